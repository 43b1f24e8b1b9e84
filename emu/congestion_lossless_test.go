package emu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// NetReduce under PFC is lossless however tight XOFF is: the switch's
// results (32 copies per completed message) are charged to the port whose
// frame completed it and count towards its XOFF, but never take the
// headroom, which is for what the upstream has in flight. When they did,
// 32 results overflowed a 10G port's 24.7 KB of headroom: 14,856 headroom
// drops and 93,486 retransmissions at XOFF 20 KB (the reviewer's case).
func TestNetReduceResultsUnderPFCAreLossless(t *testing.T) {
	for _, xoff := range []int64{3000, 20000, 100000} {
		cfg := DefaultConfig()
		cfg.Workers, cfg.TensorBytes, cfg.Seed = 32, 1<<20, 1
		cfg.PFC, cfg.Buffer.XOFF = "on", xoff
		res, err := Run(cfg)
		require.NoError(t, err, "XOFF %d", xoff)
		require.True(t, res.Exact, "XOFF %d", xoff)
		var drops, pauses uint64
		for _, b := range res.Switch.Buffer {
			drops += b.DropsEgress + b.DropsHeadroom + b.DropsFull
			pauses += b.PausesXOFF
		}
		require.Zero(t, drops+res.QueueDrops, "XOFF %d: a lossless priority dropped frames", xoff)
		require.Zero(t, res.Retransmissions, "XOFF %d", xoff)
		require.Positive(t, pauses, "XOFF %d: the results must reach XOFF and pause", xoff)
	}
}
