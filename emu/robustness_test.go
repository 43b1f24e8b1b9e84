package emu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRobustnessGrid: with the default NIC profile every job ends exact
// under each impairment a commodity RNIC survives, at its limit: random
// loss 1 %, Gilbert-Elliott bursts of mean loss 1 %, reordering 5 % with
// small and large gaps, duplication 5 %, corruption 0.1 %, delay jitter,
// and all of them at once; in both modes, at 10G and 100G, with the
// default (and the papers') window 2 and 170-packet messages.
func TestRobustnessGrid(t *testing.T) {
	if testing.Short() {
		t.Skip("a grid of 64 jobs under faults; skipped with -short")
	}
	impair := []string{"loss 1%", "loss gemodel 1% 50% 50%", "reorder 5% gap 1", "reorder 5% gap 7",
		"duplicate 5%", "corrupt 0.1%", "delay 2us 1us", "loss 1% reorder 5% gap 3 duplicate 5% corrupt 0.1% delay 1us 1us"}
	var points []SweepPoint
	for _, m := range []Mode{NetReduce, Ring} {
		for _, rate := range []float64{10e9, 100e9} {
			for _, n := range impair {
				points = append(points, SweepPoint{Mode: m, Rate: rate, Netem: n})
			}
		}
	}
	cfg := DefaultConfig()
	cfg.TensorBytes = 1 << 20
	rows, err := Sweep(cfg, points, []uint64{1, 2}, nil)
	require.NoError(t, err)
	for _, r := range rows {
		t.Logf("%-9s %-4s %-70s exact %d/%d, algbw %.3f Gb/s, %0.f retransmissions, %.0f timeouts", r.Mode, r.Link, r.Netem, r.Exact, r.Runs, r.AlgBWGbps, r.Retrans, r.Timeouts)
		require.Equal(t, r.Runs, r.Exact, "%s %s %q: %v", r.Mode, r.Link, r.Netem, r.Errors)
	}
}
