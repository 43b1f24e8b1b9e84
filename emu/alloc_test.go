package emu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// startJob sets a run up and starts its jobs.
func startJob(t testing.TB, cfg Config) *Session {
	t.Helper()
	u, err := NewSession(cfg)
	require.NoError(t, err)
	for _, r := range u.Jobs {
		require.NoError(t, r.Alg.Start())
		r.Started = true
	}
	return u
}

// The event loop (links, switch, accelerator, NICs, QPs, job) allocates
// nothing per frame once it is warm.
func TestEventLoopAllocatesNothing(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring, "ring --compress 2^-10"} {
		cfg := DefaultConfig()
		cfg.Mode, cfg.TensorBytes = mode, 4<<20
		if mode == "ring --compress 2^-10" { // the NICs' engines too
			cfg.Mode, cfg.Compress = Ring, 10
		}
		r := startJob(t, cfg)
		for i := 0; i < 20000; i++ {
			require.True(t, r.Fab.Clock.Step())
		}
		allocs := testing.AllocsPerRun(5, func() {
			for i := 0; i < 2000; i++ {
				r.Fab.Clock.Step()
			}
		})
		require.NoError(t, r.Err())
		t.Logf("%v: %.1f allocations per 2000 events", mode, allocs)
		require.Zero(t, allocs, "%v: the warm event loop allocated", mode)
	}
}
