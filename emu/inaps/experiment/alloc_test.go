package experiment

import (
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
)

// TestSteadyStateAllocatesNothing: the hot path (workers' sends and
// results, the switch's aggregation, the links) allocates nothing per
// fragment: a run of four times the fragments allocates about as much
// as the small one (setup, maps warming up), not four times its
// per-fragment share.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	allocs := func(numel int) float64 {
		m := smallModel(t, numel)
		cfg := Config{Policy: inaps.ESA, Jobs: []JobSpec{{"a", m, 4}, {"b", m, 4}}, Seed: 1, StartSpread: time.Millisecond, Jitter: 100 * time.Microsecond}
		return testing.AllocsPerRun(2, func() {
			r, err := Run(cfg)
			if err != nil || !r.Exact {
				t.Fatalf("run: %v %v", err, r.Failures)
			}
		})
	}
	// smallModel has two layers of numel values: 2 × numel/62 fragments
	// per worker and iteration; 8 workers send them.
	small, large := allocs(62*4000), allocs(62*16000)
	added := float64(8 * 2 * (16000 - 4000))
	extra := large - small
	t.Logf("allocations: %.0f for 64,000 fragments sent, %.0f for 256,000 (%.4f per added fragment)", small, large, extra/added)
	if extra/added > 0.001 {
		t.Errorf("%.0f more allocations for %.0f more fragments: the hot path allocates", extra, added)
	}
}
