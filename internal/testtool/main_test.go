//go:build unix

package testtool

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestSweepTempRemovesOnlyTheDead: a directory of a test binary whose
// process is gone is removed; one of a live process (this test's parent,
// go test) and any other name are kept.
func TestSweepTempRemovesOnlyTheDead(t *testing.T) {
	base := t.TempDir()
	dead := filepath.Join(base, tmpPrefix+"999999999-x") // beyond any pid_max
	live := filepath.Join(base, fmt.Sprintf("%s%d-y", tmpPrefix, os.Getppid()))
	other := filepath.Join(base, "inaemu-dut-dut-1.log.d")
	for _, d := range []string{dead, live, other} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sweepTemp(base)
	for d, want := range map[string]bool{dead: false, live: true, other: true} {
		if _, err := os.Stat(d); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(d), err == nil, want)
		}
	}
}
