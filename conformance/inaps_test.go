package conformance

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// inapsTestCount is the inaps suite's cases per run in the tests.
const inapsTestCount = 20

// inapsKnownBugs: the real ina-ps switch and hosts still fail generated
// cases (reported to the lead with replays: static's shadow copies across
// iterations; fcfs, straw1/2 PS entries left open and stalls); while it
// is set, TestINAPSSuiteHolds logs its failures instead of failing.
const inapsKnownBugs = false

// TestINAPSSuiteHolds: the real switch passes the suite at a few seeds.
func TestINAPSSuiteHolds(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		rs := INAPSSuite(SuiteOptions{Count: inapsTestCount, Seed: seed, OutDir: t.TempDir()})
		require.Len(t, rs, 1)
		r := rs[0]
		t.Logf("seed %d: %d cases in %v, passed %v", seed, r.Cases, r.Wall.Round(time.Millisecond), r.Passed)
		if !r.Passed {
			if inapsKnownBugs {
				t.Logf("known bug: %s\nreplay: %s", r.Failure, r.Replay)
				continue
			}
			t.Fatalf("seed %d: %s\nreplay: %s", seed, r.Failure, r.Replay)
		}
		require.Equal(t, inapsTestCount, r.Cases)
	}
}

// TestINAPSSuiteCatchesMutations: with each known bug put back in the
// switch, the suite fails (a case the mutant fails and the real switch
// passes), shrinks it, and writes it as a command line with its model
// files and a capture; the shrunk case still tells the two apart.
func TestINAPSSuiteCatchesMutations(t *testing.T) {
	for _, tc := range []struct {
		name string
		mut  inaps.Mutations
	}{
		{"evict-loses-bitmap", inaps.Mutations{EvictLosesBitmap: true}},
		{"reminder-no-swap", inaps.Mutations{ReminderNoSwap: true}},
		{"re-add-retransmitted", inaps.Mutations{ReAddRetransmitted: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := t.TempDir()
			rs := INAPSSuite(SuiteOptions{Count: inapsTestCount, Seed: 1, OutDir: out, inapsMutations: tc.mut})
			require.Len(t, rs, 1)
			r := rs[0]
			require.False(t, r.Passed, "the bug went unseen in %d cases", r.Cases)
			require.NotNil(t, r.Counterexample)
			require.True(t, strings.HasPrefix(r.Replay, "inaemu inaps run "), r.Replay)
			sh, err := os.ReadFile(*r.Counterexample)
			require.NoError(t, err)
			require.Contains(t, string(sh), r.Replay)
			t.Logf("caught at case %d in %v: %s\nreplay: %s", r.Cases-1, r.Wall.Round(time.Millisecond), r.Failure, r.Replay)
		})
	}
}

// The generated cases reach where the bugs live (inapsCaseGen's doc).
func TestINAPSCasesReach(t *testing.T) {
	seen := map[string]bool{}
	for i := range 600 {
		seed := caseSeed(9, "inaps/exact", i)
		c := sample(inapsCaseGen(seed), seed).(inapsCase)
		cfg, err := c.config()
		require.NoError(t, err, "%s", c)
		cfg.Defaults()
		require.NoError(t, cfg.Validate(), "%s", c)
		mark := func(ok bool, what string) {
			if ok {
				seen[what] = true
			}
		}
		mark(true, "policy "+c.Policy)
		mark(true, "jobs "+string(rune('0'+c.Jobs)))
		mark(c.Workers == 1, "1 worker")
		mark(c.Workers > 16, "workers above 16")
		mark(c.Aggregators == 2*c.Jobs, "static's least pool")
		mark(c.Aggregators < 8, "fewer than 8 aggregators")
		mark(c.Aggregators == inaps.DefaultAggregators, "20,000 aggregators")
		var frags int64
		for _, m := range c.Models {
			frags = max(frags, m.fragments())
			mark(len(m.Layers) == 3, "3 layers")
		}
		mark(frags > inapsWrapFragments, "sequence numbers wrap")
		mark(frags > inapsWrapFragments && c.Jobs == 1 && c.Workers == 2, "wrap on 1 job × 2 workers")
		require.False(t, frags > inapsWrapFragments && c.Jobs*c.Workers > 2, "a wrapping case stays small: %s", c)
		mark(c.Iterations == 3, "3 iterations")
		mark(c.MaxWindow == 1, "window 1")
		mark(c.MaxWindow == inaps.Slots, "window 256")
		mark(c.NoAIMD, "AIMD off")
		mark(!c.NoAIMD, "AIMD on")
		mark(c.RTOMin == 20*time.Microsecond, "RTO 20us")
		mark(c.PSDelay > c.RTOMin, "PS slower than the RTO")
		mark(c.Queue < 1000, "short queues")
		for _, n := range c.Netem {
			mark(true, "netem "+strings.Fields(n)[0])
		}
		for _, e := range c.Events {
			hop := "worker"
			if e.Worker < 0 {
				hop = "PS"
			}
			mark(true, strings.SplitN(e.Action, "=", 2)[0]+" "+hop+" "+e.Dir)
		}
		// The command line reads back as the case (the CLI's parsers).
		args := c.flags([]string{"m.csv"})
		for k := 0; k+1 < len(args); k++ {
			switch v := args[k+1]; args[k] {
			case "--rto-min", "--start-spread", "--jitter", "--ps-delay", "--switch-delay", "--max-time":
				_, err := units.ParseDuration(v)
				require.NoError(t, err)
			case "--switch-memory", "--window", "--ecn":
				_, err := units.ParseSize(v)
				require.NoError(t, err)
			case "--netem":
				_, err := faults.ParseNetem(v)
				require.NoError(t, err)
			}
		}
	}
	want := []string{"policy static", "policy fcfs", "policy esa", "policy straw1", "policy straw2", "jobs 1", "jobs 6", "1 worker",
		"workers above 16", "static's least pool", "fewer than 8 aggregators", "20,000 aggregators", "3 layers", "sequence numbers wrap",
		"wrap on 1 job × 2 workers", "3 iterations", "window 1", "window 256", "AIMD off", "AIMD on", "RTO 20us", "PS slower than the RTO",
		"short queues", "netem loss", "netem duplicate", "netem corrupt", "netem delay", "netem reorder"}
	for _, a := range []string{"drop", "dup", "corrupt", "delay", "hold"} {
		for _, hop := range []string{"worker in", "worker out", "PS in", "PS out"} {
			want = append(want, a+" "+hop)
		}
	}
	for _, w := range want {
		require.True(t, seen[w], "no case with %s", w)
	}
}
