package capcheck_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// chkWithComment is the clean NetReduce capture rewritten with a
// section comment (naming a switch program), in a file of its own; with
// flip, the first result WRITE FIRST has a bit of its payload's byte 12
// flipped (data for NetReduce's 8-byte header, header for a 20-byte one)
// and its ICRC made good again.
func chkWithComment(t *testing.T, comment string, flip bool) string {
	recs, names, err := pcapio.ReadAllNamed(chkGoldenPath("netreduce_clean.pcapng"))
	require.NoError(t, err)
	var buf bytes.Buffer
	w, err := pcapio.NewCommentedWriter(&buf, comment, names...)
	require.NoError(t, err)
	for _, r := range recs {
		data := r.Data
		var v frames.View
		if flip && strings.HasSuffix(names[r.Info.InterfaceIndex], "-out") && v.Parse(data) == nil && v.Opcode() == wire.WriteFirst {
			data = append([]byte(nil), data...)
			data[v.PayloadOffset()+12] ^= 0x20
			require.NoError(t, frames.FixICRC(data))
			flip = false
		}
		require.NoError(t, w.WriteIndex(r.Info.InterfaceIndex, r.Info.Timestamp.UnixNano(), data, r.Comments...))
	}
	require.False(t, flip, "a result WRITE FIRST was changed")
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "capture.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestCheckSwitchProgramFromComment: agg-sum takes the switch program a
// capture's section comment names, and with it the header length in
// front of a WRITE FIRST's data: NetReduce's 8 bytes by default, the
// AllReduce-Switch's 20 (its bytes 8-19 are no data, not summed); a program the
// checker does not know leaves agg-sum not applied, with a one-line
// reason and an undecidable verdict; --switch-program overrides.
func TestCheckSwitchProgramFromComment(t *testing.T) {
	t.Run("netreduce named", func(t *testing.T) {
		rep, err := capcheck.CheckFile(chkWithComment(t, pcapio.SwitchProgramPrefix+"netreduce", false), capcheck.CheckOptions{})
		require.NoError(t, err)
		assert.Empty(t, rep.Violations)
		assert.Positive(t, rep.AggChecked)
		assert.True(t, rep.Conforms)
	})
	for _, tc := range []struct {
		comment string
		wrong   bool
	}{{"", true}, {pcapio.SwitchProgramPrefix + "ars", false}} {
		t.Run("byte 12 of a WRITE FIRST under "+tc.comment, func(t *testing.T) {
			rep, err := capcheck.CheckFile(chkWithComment(t, tc.comment, true), capcheck.CheckOptions{})
			require.NoError(t, err)
			if !tc.wrong {
				assert.Empty(t, rep.Violations, "header, not data, for a 20-byte header")
				assert.Positive(t, rep.AggChecked)
				return
			}
			require.Len(t, rep.Violations, 1, "data for NetReduce's 8-byte header")
			assert.Equal(t, "agg-sum", rep.Violations[0].Rule)
		})
	}
	unknown := chkWithComment(t, "made by a test\n"+pcapio.SwitchProgramPrefix+"atp", false)
	t.Run("unknown program", func(t *testing.T) {
		rep, err := capcheck.CheckFile(unknown, capcheck.CheckOptions{})
		require.NoError(t, err)
		assert.Empty(t, rep.Violations)
		assert.Zero(t, rep.AggChecked)
		assert.Equal(t, `agg-sum not applied: switch program "atp" is not one the checker knows the aggregation header of (ars, netreduce); give --switch-program`, rep.AggError)
		assert.Equal(t, "undecidable", rep.Verdict)
		assert.False(t, rep.Conforms)
	})
	t.Run("the option overrides the comment", func(t *testing.T) {
		rep, err := capcheck.CheckFile(unknown, capcheck.CheckOptions{SwitchProgram: "netreduce"})
		require.NoError(t, err)
		assert.Empty(t, rep.Violations)
		assert.Positive(t, rep.AggChecked)
		assert.True(t, rep.Conforms)
	})
	assert.Equal(t, []string{"ars", "netreduce"}, capcheck.SwitchPrograms())
}
