package pcapio_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/pcapio"
)

// TestWallClockMarker: a capture written by NewWallClockWriter carries
// the wall-clock section comment on both read paths (the plain one of a
// regular file, pcapgo's of a stream); NewWriter's (the emulator's
// virtual clock) carries none, and its bytes are what they were.
func TestWallClockMarker(t *testing.T) {
	frame := make([]byte, 60)
	for _, wall := range []bool{false, true} {
		var buf bytes.Buffer
		newW := pcapio.NewWriter
		if wall {
			newW = pcapio.NewWallClockWriter
		}
		w, err := newW(&buf, "a", "b")
		require.NoError(t, err)
		require.NoError(t, w.Write("b", 1000, frame))
		require.NoError(t, w.Flush())
		want := ""
		if wall {
			want = "inaemu: clock=wall"
		}
		path := filepath.Join(t.TempDir(), "c.pcapng")
		require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
		file, err := pcapio.Open(path)
		require.NoError(t, err)
		stream, err := pcapio.NewReader("stream", bytes.NewReader(buf.Bytes()))
		require.NoError(t, err)
		for _, rd := range []*pcapio.Reader{file, stream} {
			_, err := rd.Next()
			require.NoError(t, err)
			require.Equal(t, want, rd.SectionComment())
			require.Equal(t, wall, pcapio.WallClock(rd.SectionComment()))
			rd.Close()
		}
	}
	require.True(t, pcapio.WallClock("taken by hand\ninaemu: clock=wall"))
	require.False(t, pcapio.WallClock("inaemu: clock=wallish"))
}
