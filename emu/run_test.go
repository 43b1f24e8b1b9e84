package emu

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
)

func TestSmoke(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring} {
		cfg := DefaultConfig()
		cfg.Mode = mode
		cfg.TensorBytes = 1 << 20
		res, err := Run(cfg)
		require.NoError(t, err)
		t.Logf("%+v wall %v", *res, res.Wall)
		require.True(t, res.Exact)
	}
}

// The switch's buffer accounting charges every frame it queues and
// releases it as it leaves: after a run under loss, duplication and tail
// drops (a queue of 4 frames) every port and priority holds nothing, and
// the high-water marks saw traffic.
func TestSwitchBufferEmptiesAfterARun(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring} {
		cfg := DefaultConfig()
		cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.Seed = mode, 4, 256<<10, 3
		cfg.Link.Queue = 4
		cfg.Netem = faults.Netem{Loss: 0.005, Duplicate: 0.005}
		res, err := Run(cfg)
		require.NoError(t, err)
		require.True(t, res.Exact)
		require.NotEmpty(t, res.Switch.Buffer, mode)
		var peak int64
		for _, u := range res.Switch.Buffer {
			assert.Zero(t, u.Bytes, "%s: switch %s port %d priority %d still holds bytes", mode, u.Switch, u.Port, u.Priority)
			assert.Zero(t, u.Frames, "%s: port %d priority %d", mode, u.Port, u.Priority)
			peak = max(peak, u.MaxFrames)
		}
		assert.Positive(t, peak, mode)
	}
}
