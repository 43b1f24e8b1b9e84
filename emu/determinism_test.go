package emu

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Same scenario and seed: byte-identical captures (frames, order, virtual
// timestamps, fault comments). A different seed gives a different run.
func TestDeterministicCaptures(t *testing.T) {
	run := func(mode Mode, seed uint64) ([]byte, *Result) {
		cfg := DefaultConfig()
		cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = mode, 4, 256<<10, 16, seed
		n, err := faults.ParseNetem("loss 0.2% duplicate 0.5% corrupt 0.2% delay 2us 100ns reorder 1% gap 4")
		require.NoError(t, err)
		cfg.Netem = n
		ev, err := faults.Parse("drop port=1 dir=out class=data nth=3")
		require.NoError(t, err)
		cfg.Events = []faults.Event{ev}
		var buf bytes.Buffer
		cfg.Capture = &buf
		res, err := Run(cfg)
		require.NoError(t, err, "seed %d", seed)
		require.True(t, res.Exact)
		return buf.Bytes(), res
	}
	for _, mode := range []Mode{NetReduce, Ring} {
		a, ra := run(mode, 11)
		b, rb := run(mode, 11)
		c, _ := run(mode, 12)
		require.Greater(t, ra.Faults.Lost+ra.Faults.Dropped+ra.Faults.Corrupted, uint64(0), "the scenario must exercise faults")
		require.True(t, bytes.Equal(a, b), "%v: two runs with seed 11 wrote different captures (%d vs %d bytes)", mode, len(a), len(b))
		require.Equal(t, ra.VirtualNS, rb.VirtualNS)
		require.False(t, bytes.Equal(a, c), "%v: seeds 11 and 12 gave the same capture", mode)
		recs, err := pcapio.NewReader("capture", bytes.NewReader(a))
		require.NoError(t, err)
		n := 0
		for {
			if _, err := recs.Next(); err != nil {
				break
			}
			n++
		}
		require.Greater(t, n, 100)
	}
}

// Capturing never changes a run: with --pcap a job under random loss,
// reordering and duplication takes the same virtual time and the fault
// stages make the same decisions as without (dropped frames go to the
// capture on their own timer, never moving a delivery).
func TestCaptureDoesNotChangeTheRun(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		for _, mode := range []Mode{NetReduce, Ring} {
			cfg := DefaultConfig()
			cfg.Mode, cfg.Workers, cfg.Window, cfg.MsgLen, cfg.TensorBytes, cfg.MTU, cfg.Seed, cfg.Timeout = mode, 7, 3, 3, 96<<10, 256, seed, 8
			n, err := faults.ParseNetem("loss 0.8% reorder 5% gap 3 duplicate 3%")
			require.NoError(t, err)
			cfg.Netem = n
			plain, err := Run(cfg)
			require.NoError(t, err)
			var buf bytes.Buffer
			cfg.Capture = &buf
			captured, err := Run(cfg)
			require.NoError(t, err)
			require.Equal(t, plain.VirtualNS, captured.VirtualNS, "%v seed %d: virtual time", mode, seed)
			require.Equal(t, plain.Faults, captured.Faults, "%v seed %d: fault decisions", mode, seed)
			require.Equal(t, plain.FramesSent, captured.FramesSent, "%v seed %d", mode, seed)
		}
	}
}
