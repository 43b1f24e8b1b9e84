package pcapio_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/pcapio"
)

// TestDTypeComment: a capture's section comment names a non-default
// element type beside the wall clock (as faultwire writes it for run
// --dut), a reader finds both lines, and f32 adds nothing.
func TestDTypeComment(t *testing.T) {
	require.Empty(t, pcapio.DTypeComment("f32"))
	require.Empty(t, pcapio.DTypeComment(""))
	comment := pcapio.JoinComments(pcapio.WallClockComment, pcapio.DTypeComment("f16"), pcapio.SwitchProgramComment("netreduce"))
	require.Equal(t, "inaemu: clock=wall\ninaemu: dtype=f16", comment)
	var buf bytes.Buffer
	w, err := pcapio.NewCommentedWriter(&buf, comment, "a")
	require.NoError(t, err)
	require.NoError(t, w.Write("a", 1, make([]byte, 60)))
	require.NoError(t, w.Flush())
	rd, err := pcapio.NewReader("x", &buf)
	require.NoError(t, err)
	_, err = rd.Next()
	require.NoError(t, err)
	require.True(t, pcapio.WallClock(rd.SectionComment()))
	require.Equal(t, "f16", pcapio.DType(rd.SectionComment()))
	require.Equal(t, "", pcapio.DType("inaemu: clock=wall"))
}
