package dut_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
)

// A device's log keeps every line in its file and the last TailLines in
// memory, lines split across writes and an unended last line included.
func TestLogFileKeepsAllAndTheTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "dev.log")
	l, err := dut.CreateLog(path, "ina")
	require.NoError(t, err)
	require.Equal(t, path, l.Path)
	var all strings.Builder
	for i := range 150 {
		fmt.Fprintf(&all, "line %d\n", i)
	}
	text := all.String() + "partial"
	for len(text) > 0 { // in uneven pieces, as a pipe hands them
		n := min(7, len(text))
		_, err := l.Write([]byte(text[:n]))
		require.NoError(t, err)
		text = text[n:]
	}
	tail := l.Tail()
	require.Len(t, tail, dut.TailLines)
	require.Equal(t, "line 131", tail[0])
	require.Equal(t, "line 149", tail[dut.TailLines-2])
	require.Equal(t, "partial", tail[dut.TailLines-1])
	require.Equal(t, 151, l.Lines())
	require.Equal(t, path+" (151 lines)", l.Summary())
	require.NoError(t, l.Close())
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, all.String()+"partial", string(b))

	tmp, err := dut.CreateLog("", "ina")
	require.NoError(t, err)
	require.NoError(t, tmp.Close())
	t.Cleanup(func() { os.Remove(tmp.Path) })
	require.True(t, strings.HasPrefix(filepath.Base(tmp.Path), "inaemu-dut-ina-"), tmp.Path)
	require.Empty(t, tmp.Tail())

	_, err = dut.CreateLog(filepath.Join(t.TempDir(), "no", "such", "dir"), "ina")
	require.Error(t, err)
}
