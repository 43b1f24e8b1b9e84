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

// Cases the suite found, each fixed where it lived; every property
// holds for each now.
//
//   - netreduce across racks under PFC (the suite's first spine-leaf
//     netreduce jobs): three ranks under two leaves of a 4×2 spine-leaf
//     with 20G uplinks, 12 bytes, DSCP 46 lossless with a static XOFF in
//     a tight buffer, which ended in RETRY_EXC_ERR while the switch
//     charged what the program sent to no ingress port and the tree's
//     frames between racks went at DSCP 0;
//   - a jumbo frame against a tight pool: MTU 4096 and a 3 KB headroom
//     in a 50 KB pool with α 1/8, whose dynamic XOFF (4096 B) is below
//     one frame: the empty ingress dropped it at every retry
//     (RETRY_EXC_ERR) before it took a frame whatever XOFF;
//   - DCQCN on a netreduce job across racks: the capture checker took a
//     CNP seen again on a leaf's uplink for a second one 1.3 µs later
//     (cnp-rate) before it left the tree's links out of the cnp rules.
func TestCongestionFoundCases(t *testing.T) {
	var cases []congCase
	for _, spines := range []int{1, 2} {
		cases = append(cases, congCase{Seed: 91120043377319, MTU: 1024, Timeout: 14, PFC: "on", XOFF: "63488", Buffer: "1276992",
			Net:  congNet{Leaves: 4, PerLeaf: 2, Spines: spines, Gbps: 10, Uplink: 20},
			Jobs: []congJob{{Mode: "netreduce", Hosts: []int{2, 4, 5}, Bytes: 12, MsgLen: 22, DSCP: 46, CC: "none"}}})
	}
	cases = append(cases,
		congCase{Seed: 218528528197767, MTU: 4096, Timeout: 14, PFC: "on", Buffer: "51200", Alpha: "1/8", Headroom: "3072",
			Net: congNet{Leaves: 3, PerLeaf: 1, Spines: 1, Gbps: 10, Uplink: 10},
			Jobs: []congJob{
				{Mode: "traffic", Hosts: []int{0, 2}, Pattern: "all-to-all", Bytes: 4, MsgLen: 12, DSCP: 16, CC: "none"},
				{Mode: "traffic", Hosts: []int{1, 2}, Pattern: "incast", Bytes: 4120, MsgLen: 2, DSCP: 0, CC: "none"}}},
		congCase{Seed: 182039911335037, MTU: 512, Timeout: 14, PFC: "off", Buffer: "32768", RED: "4KB,165KB,65%",
			Net:  congNet{Leaves: 4, PerLeaf: 2, Spines: 1, Gbps: 25, Uplink: 25},
			Jobs: []congJob{{Mode: "netreduce", Hosts: []int{6, 7, 3}, Bytes: 28464, MsgLen: 24, DSCP: 26, CC: "dcqcn"}}})
	for _, c := range cases {
		out := runCongCase(c)
		require.Empty(t, out.fail, "%s: %s", c, out.detail)
	}
}
