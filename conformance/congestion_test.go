package conformance

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
)

// TestCongestionSuiteHolds: the real code passes the suite's default
// count at a few seeds.
func TestCongestionSuiteHolds(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		rs := CongestionSuite(SuiteOptions{Count: 100, Seed: seed, OutDir: t.TempDir()})
		require.Len(t, rs, 1)
		r := rs[0]
		t.Logf("seed %d: %d cases in %v", seed, r.Cases, r.Wall.Round(time.Millisecond))
		require.True(t, r.Passed, "seed %d: %s\nreplay: %s", seed, r.Failure, r.Replay)
		require.Equal(t, 100, r.Cases)
	}
}

// The generated cases reach what congCaseGen's doc says they draw, and
// each is a valid run configuration.
func TestCongestionCasesReach(t *testing.T) {
	seen := map[string]bool{}
	for i := range 400 {
		seed := caseSeed(5, "congestion/invariants", i)
		c := sample(congCaseGen(seed), seed).(congCase)
		cfg := emu.DefaultConfig()
		require.NoError(t, c.scenario().Apply(&cfg), "%s", c)
		mark := func(ok bool, what string) {
			if ok {
				seen[what] = true
			}
		}
		mark(c.Net.Star, "star")
		mark(!c.Net.Star && c.Net.Spines == 2, "2 spines")
		mark(c.Net.Leaves == 4, "4 leaves")
		mark(c.Net.Gbps == 10, "10G")
		mark(c.Net.Gbps == 100, "100G")
		mark(c.PFC == "off", "pfc off")
		mark(c.PFC == "on", "pfc on")
		mark(strings.Contains(c.PFC, ","), "pfc list")
		mark(c.Buffer != "", "tight buffer")
		mark(c.XOFF != "", "static xoff")
		mark(c.Alpha != "", "alpha")
		mark(c.Headroom != "", "small headroom")
		mark(strings.HasPrefix(c.Sched, "dwrr:"), "dwrr weights")
		mark(c.RED != "", "red")
		mark(c.Netem != "", "netem")
		mark(!c.faulty(), "clean")
		for _, j := range c.Jobs {
			mark(true, "mode "+j.Mode)
			mark(j.Mode == "traffic", "pattern "+j.Pattern)
			mark(j.CC == "dcqcn", "dcqcn")
			mark(j.Start > 0, "job start")
			for _, f := range j.Flows {
				mark(f.Start > 0, "flow start")
				mark(f.RateG > 0, "flow rate")
			}
		}
		mark(len(c.Jobs) > 1 && c.Jobs[0].DSCP>>3 != c.Jobs[len(c.Jobs)-1].DSCP>>3, "two priorities")
		for _, e := range c.Events {
			f := strings.Fields(e)
			mark(true, strings.SplitN(f[0], "=", 2)[0]+" "+f[2])
			mark(strings.Contains(f[1], "spine"), "trunk fault")
		}
	}
	want := []string{"star", "2 spines", "4 leaves", "10G", "100G", "pfc off", "pfc on", "pfc list", "tight buffer", "static xoff",
		"alpha", "small headroom", "dwrr weights", "red", "netem", "clean", "mode traffic", "mode ring", "mode netreduce",
		"pattern incast", "pattern all-to-all", "pattern permutation", "pattern ", "dcqcn", "job start", "flow start", "flow rate",
		"two priorities", "trunk fault"}
	for _, a := range []string{"drop", "dup", "corrupt", "delay", "hold"} {
		for _, cl := range []string{"data", "ack", "nak", "any", "pause", "cnp"} {
			want = append(want, a+" class="+cl)
		}
	}
	for _, w := range want {
		require.True(t, seen[w], "no case with %s", w)
	}
}

func TestReverseDir(t *testing.T) {
	require.Equal(t, "port3-out", reverseDir("port3-in"))
	require.Equal(t, "port3-in", reverseDir("port3-out"))
	require.Equal(t, "spine0-leaf1", reverseDir("leaf1-spine0"))
	require.Equal(t, "leaf0-h1", reverseDir("h1-leaf0"))
}
