package collective

import (
	"encoding/binary"
	"github.com/inaemu/inaemu/emu/job"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The ring job's result check catches a rank that sums or forwards
// wrongly, and reports the first wrong element in (chunk, rank) order:
// the element, the rank, the value it got and the one the rank-order sum
// gives. The expected positions are worked out here from the schedule
// (4 ranks, chunks of 16384 elements, messages of 1024).
func TestRingJobCatchesWrongResults(t *testing.T) {
	cfg := job.DefaultConfig()
	cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = Ring, 4, 256<<10, 4, 1
	res, err := job.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact, "untampered: %+v", res.Mismatch)
	for _, c := range []struct {
		name          string
		rank, step, m int
		el            int   // element within the message
		wantRank      int   // first rank (in chunk, rank order) with a wrong result
		wantElement   int64 // its element in the tensor
	}{
		// Rank 1 forwards a wrong partial sum of chunk (0-1) mod 4 = 3 in
		// reduce-scatter step 1: every rank's chunk 3 is wrong, rank 0 first.
		{"partial sum", 1, 1, 5, 7, 0, 3*16384 + 5*1024 + 7},
		// Rank 2 keeps and forwards a wrong copy of chunk 1 in all-gather
		// step 1 (step 4): ranks 0 and 1 hold it right, rank 2 is first.
		{"all-gather copy", 2, 4, 0, 0, 2, 16384},
		// Rank 3 makes its own reduced chunk 0 wrong in the last
		// reduce-scatter step (2): rank 0 receives it in all-gather.
		{"reduced chunk", 3, 2, 15, 1023, 0, 15*1024 + 1023},
	} {
		t.Run(c.name, func(t *testing.T) {
			ringTamper = func(rank, step, msg int, out []byte) {
				if rank == c.rank && step == c.step && msg == c.m {
					v := math.Float32frombits(binary.LittleEndian.Uint32(out[4*c.el:]))
					binary.LittleEndian.PutUint32(out[4*c.el:], math.Float32bits(v+0.5))
				}
			}
			defer func() { ringTamper = nil }()
			res, err := job.Run(cfg)
			require.NoError(t, err)
			assert.False(t, res.Exact)
			require.NotNil(t, res.Mismatch)
			assert.Equal(t, c.wantRank, res.Mismatch.Rank)
			assert.Equal(t, c.wantElement, res.Mismatch.Element)
			assert.NotEqual(t, res.Mismatch.Got, res.Mismatch.Want)
		})
	}
}
