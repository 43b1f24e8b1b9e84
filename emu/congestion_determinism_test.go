package emu

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/faults"
)

// A congested run is as deterministic as any: with PFC, DWRR, RED marking
// (random draws), DCQCN and faults on, the same seed writes the same
// capture byte for byte, pauses and CNPs included, and another seed does
// not.
func TestCongestionIsDeterministic(t *testing.T) {
	run := func(seed uint64) ([]byte, *Result) {
		cfg := DefaultConfig()
		cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.Seed = "traffic", 4, 512<<10, seed
		cfg.Link.Rate = 40e9
		cfg.CC, cfg.DSCP = job.CCDCQCN, 26
		cfg.PFC, cfg.Scheduler = "on", "dwrr"
		cfg.Buffer.Bytes = 1 << 20 // small enough for the incast to pause
		cfg.RED = fabric.RED{Kmin: 5000, Kmax: 200000, Pmax: 0.01}
		n, err := faults.ParseNetem("loss 0.05% delay 1us 100ns")
		require.NoError(t, err)
		cfg.Netem = n
		var buf bytes.Buffer
		cfg.Capture = &buf
		res, err := Run(cfg)
		require.NoError(t, err, "seed %d", seed)
		require.True(t, res.Exact)
		return buf.Bytes(), res
	}
	a, ra := run(5)
	b, rb := run(5)
	c, _ := run(6)
	var pauses, marks uint64
	for _, p := range ra.PFC {
		pauses += p.PausesSent
		marks += p.ECNMarks
	}
	require.Greater(t, pauses, uint64(0), "the run must pause")
	require.Greater(t, marks, uint64(0), "the run must mark")
	require.Greater(t, ra.Jobs[0].DCQCN.CNPSent, uint64(0), "the run must send CNPs")
	require.True(t, bytes.Equal(a, b), "two runs with seed 5 wrote different captures (%d vs %d bytes)", len(a), len(b))
	require.Equal(t, ra.VirtualNS, rb.VirtualNS)
	require.False(t, bytes.Equal(a, c), "seeds 5 and 6 gave the same capture")
}
