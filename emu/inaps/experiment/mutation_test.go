package experiment

import (
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/faults"
)

// TestMutationsAreCaught re-introduces each known bug in the switch and
// requires the run's checks to fail, and the same run without it to
// hold: the checks have the power to see each.
func TestMutationsAreCaught(t *testing.T) {
	m := smallModel(t, 62*1000)
	dup, err := faults.ParseNetem("duplicate 2%")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mut    inaps.Mutations
		policy inaps.Policy
		netem  faults.Netem
	}{
		{"evicted partial loses its bitmap", inaps.Mutations{EvictLosesBitmap: true}, inaps.Straw1, faults.Netem{}},
		{"reminder frees without swapping", inaps.Mutations{ReminderNoSwap: true}, inaps.ESA, faults.Netem{}},
		{"retransmission re-added (static)", inaps.Mutations{ReAddRetransmitted: true}, inaps.Static, dup},
		{"retransmission re-added (fcfs)", inaps.Mutations{ReAddRetransmitted: true}, inaps.FCFS, dup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := Config{Policy: tc.policy, Jobs: []JobSpec{{"a", m, 4}, {"b", m, 4}, {"c", m, 3}}, Aggregators: 40, Seed: 7,
				StartSpread: time.Millisecond, Jitter: 300 * time.Microsecond, Netem: tc.netem}
			good, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !good.Exact {
				t.Fatalf("without the bug: %v", good.Failures)
			}
			cfg.Mutations = tc.mut
			bad, err := Run(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if bad.Exact {
				t.Fatalf("the bug went unseen: switch %+v", bad.Switch)
			}
			t.Logf("caught: %.200s", bad.Failures[0])
		})
	}
}
