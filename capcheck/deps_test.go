package capcheck_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/testtool"
)

// TestDependsOnWireFormatsOnly: the checker imports, of this module, only
// the wire formats, the capture reader and the tensor element types; a
// checker that imported the emulator or the transport could share their
// bugs, and could not be used on captures of other devices without them.
func TestDependsOnWireFormatsOnly(t *testing.T) {
	_, err := exec.LookPath("go")
	testtool.Require(t, "deps", err)
	out, err := exec.Command("go", "list", "-deps", "github.com/inaemu/inaemu/capcheck").Output()
	require.NoError(t, err)
	allowed := map[string]bool{
		"github.com/inaemu/inaemu/capcheck":        true,
		"github.com/inaemu/inaemu/frames":          true,
		"github.com/inaemu/inaemu/frames/wire":     true,
		"github.com/inaemu/inaemu/internal/pcapio": true,
		"github.com/inaemu/inaemu/emu/tensor":      true,
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.HasPrefix(p, "github.com/inaemu/inaemu/") || p == "github.com/inaemu/inaemu" {
			assert.True(t, allowed[p], "capcheck depends on %s", p)
		}
	}
}
