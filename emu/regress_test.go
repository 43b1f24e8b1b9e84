package emu

// Regression tests for bugs a review of the graph rebuild found: each
// failed before its fix (the comment above each says what it was).

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
)

func parseTopo(t *testing.T, spec string) *topo.Topology {
	t.Helper()
	s, err := topo.ParseFlag(spec)
	require.NoError(t, err)
	tp, err := s.Build(tenG())
	require.NoError(t, err)
	return tp
}

func parseFault(t *testing.T, s string) faults.Event {
	t.Helper()
	ev, err := faults.Parse(s)
	require.NoError(t, err)
	return ev
}

// requireExactOrRefused: a configuration must either run bit-exact or be
// refused up front as a *ConfigError, never be accepted and then fail in
// the network.
func requireExactOrRefused(t *testing.T, cfg Config, what string) {
	t.Helper()
	res, err := Run(cfg)
	var ce *ConfigError
	if errors.As(err, &ce) {
		return
	}
	require.NoError(t, err, "%s: accepted, then failed in the network", what)
	require.True(t, res.Exact, "%s: %+v", what, res.Mismatch)
}

// A ring that places one rank on a host's NIC and the next on one of the
// same host's GPUs (whose RDMA goes over that very NIC) makes a
// connection from the NIC to itself. Reachable says yes (the host's own
// link "joins" them), the frames go to the switch, which filters them
// (destination = ingress port), and the job dies with RETRY_EXC_ERR.
// Random placements (TestRandomPlacementsAreExact) can draw exactly this.
func TestRingOnAHostsNICAndItsGPUIsExactOrRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.TensorBytes, cfg.Workers = Ring, 64<<10, 2
	cfg.Topology = parseTopo(t, "star:hosts=2,gpus=2,intra=100G,alpha=1us")
	cfg.Timeout, cfg.RetryCnt, cfg.MaxVirtual = 4, 1, time.Second
	for _, ranks := range [][]string{{"h0", "h0:gpu0"}, {"h0", "h0:gpu0", "h1"}, {"h1:gpu1", "h0", "h1"}} {
		cfg.Jobs = []JobSpec{{Name: "mixed", Ranks: ranks}}
		requireExactOrRefused(t, cfg, "ranks "+ranks[0]+","+ranks[1]+"...")
	}
}

// The GPU interconnect sends "one at a time from each sending GPU", but
// the busy time is kept per (sender, receiver) link of a job, so two jobs
// whose rings use the same GPUs each run as fast as alone: the GPU sends
// two transfers at once.
func TestJobsSharingAGPUShareItsSendTime(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.TensorBytes, cfg.Workers = Ring, 1<<20, 1
	cfg.Topology = parseTopo(t, "star:hosts=1,gpus=2,intra=100G,alpha=100us")
	a := JobSpec{Name: "a", Ranks: []string{"h0:gpu0", "h0:gpu1"}}
	b := JobSpec{Name: "b", Ranks: []string{"h0:gpu0", "h0:gpu1"}}
	cfg.Jobs = []JobSpec{a}
	solo := runOK(t, cfg).Jobs[0].VirtualNS
	cfg.Jobs = []JobSpec{a, b}
	res, err := Run(cfg)
	var ce *ConfigError
	if errors.As(err, &ce) {
		return // refusing to share a GPU is a fix too
	}
	require.NoError(t, err)
	last := max(res.Jobs[0].VirtualNS, res.Jobs[1].VirtualNS)
	assert.GreaterOrEqual(t, float64(last), 1.8*float64(solo),
		"two jobs' transfers from one GPU overlap: alone %v, together %v and %v",
		time.Duration(solo), time.Duration(res.Jobs[0].VirtualNS), time.Duration(res.Jobs[1].VirtualNS))
}

// port=R names "host hR's first link", but the fabric only gives a port to
// a host's first link when it leads to a switch. On a dims ring (host-host
// links) Validate accepts port=0, and the fault never fires.
func TestPortFaultOnAHostHostLinkFiresOrIsRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.TensorBytes, cfg.Workers = Ring, 64<<10, 2
	cfg.Topology = parseTopo(t, "dims:2,kinds=ring")
	cfg.Events = []faults.Event{parseFault(t, "drop port=0 class=data nth=1")}
	res, err := Run(cfg)
	var ce *ConfigError
	if errors.As(err, &ce) {
		return
	}
	require.NoError(t, err)
	assert.Equal(t, uint64(1), res.FaultDrops, "port=0 was accepted but dropped nothing")
}

// Two NICs of one host on the same switch (links_per_host=2) can reach
// each other through it, but Fabric.Reachable takes any link of the
// target's host as "the link between them" and says no: the job is refused
// with "no path".
func TestRanksOnTwoNICsOfOneHostReachEachOtherViaTheSwitch(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.TensorBytes = Ring, 64<<10
	cfg.Topology = parseTopo(t, "dims:2,kinds=switch,links_per_host=2")
	cfg.Jobs = []JobSpec{{Name: "x", Ranks: []string{"h0", "h0:nic1", "h1"}}}
	runOK(t, cfg)
	cfg.Jobs = []JobSpec{{Name: "y", Mode: NetReduce, Ranks: []string{"h0", "h0:nic1", "h1", "h1:nic1"}}}
	runOK(t, cfg)
}

// checkEvent accepts qp=0x11+2(j+J·k) for every k up to the ranks per NIC,
// but a GPU rank whose hops stay on the interconnect has no QP: on a ring
// of one host's GPUs there is no QP at all, and on 2 hosts × 4 GPUs placed
// by host only 0x12 and 0x17 exist. qp=0x13 passes Validate and never
// fires.
func TestQPFaultOnGPURanksFiresOrIsRefused(t *testing.T) {
	for _, c := range []struct {
		spec  string
		ranks []string
	}{
		{"star:hosts=1,gpus=4,intra=100G,alpha=1us", []string{"h0:gpu0", "h0:gpu1", "h0:gpu2", "h0:gpu3"}},
		{"star:hosts=2,gpus=4,intra=100G,alpha=1us", []string{"h0:gpu0", "h0:gpu1", "h0:gpu2", "h0:gpu3", "h1:gpu0", "h1:gpu1", "h1:gpu2", "h1:gpu3"}},
	} {
		cfg := DefaultConfig()
		cfg.Mode, cfg.TensorBytes, cfg.Workers = Ring, 256<<10, 1
		cfg.Topology = parseTopo(t, c.spec)
		cfg.Jobs = []JobSpec{{Name: "g", Ranks: c.ranks}}
		cfg.Events = []faults.Event{parseFault(t, "drop qp=0x13 nth=1")}
		res, err := Run(cfg)
		var ce *ConfigError
		if errors.As(err, &ce) {
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, uint64(1), res.FaultDrops, "%s: qp=0x13 accepted, but no frame carries it", c.spec)
	}
}

// checkEvent's switch returns after the link= case, so a code-built delay
// event with link= skips the delay range check (the same event with port=
// is refused, see TestValidate...).
func TestDelayFaultOnALinkIsRangeChecked(t *testing.T) {
	for _, d := range []time.Duration{3 * time.Hour, -time.Microsecond} {
		c := DefaultConfig()
		c.Workers, c.TensorBytes = 2, 64<<10
		c.Events = []faults.Event{{Action: faults.ActDelay, Delay: d, Link: "port0-in", Port: -1, QP: -1, PSN: -1}}
		err := c.Validate()
		var ce *ConfigError
		assert.ErrorAs(t, err, &ce, "delay %v on link=port0-in was accepted", d)
	}
}

// The memory estimate sizes the links from cfg.Link alone: a topology
// whose links have 10 ms of latency is estimated as if they had the
// default 1 µs, ~30x less link memory than the same star given with
// --latency 10ms, so the guard lets through runs it exists to refuse.
func TestMemoryEstimateSizesLinksFromTheTopology(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.TensorBytes = Ring, 64<<20
	flag := cfg
	flag.Link.Latency = 10 * time.Millisecond
	want := EstimateRunMemory(flag)
	cfg.Topology = parseTopo(t, "star:hosts=8,latency=10ms")
	got := EstimateRunMemory(cfg)
	assert.GreaterOrEqual(t, got.Links, want.Links, "links of 10ms: estimate %d B via the topology, %d B via --latency", got.Links, want.Links)
}

// With one job given in Jobs, the memory error still describes the
// run's top-level Workers and TensorBytes, not the job's.
func TestMemoryErrorDescribesTheJobNotTheTopLevel(t *testing.T) {
	cfg := DefaultConfig() // 8 workers × 16 MiB at the top
	cfg.Mode, cfg.MaxMemory = Ring, 1<<20
	cfg.Jobs = []JobSpec{{Name: "x", Ranks: []string{"h0", "h1"}, TensorBytes: 256 << 20}}
	err := cfg.Validate()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "(2 workers, window 2)")
}

// With Devices (the TAP backend), Jobs is accepted with any placement, but
// the live fabric and its start barrier take rank r to be host hr: a job
// on [h1, h0] never starts ("no gratuitous ARP ..."), although the same job on
// [h0, h1] runs.
func TestLiveJobOnAnyPlacementRunsOrIsRefused(t *testing.T) {
	cfg := liveConfig(Ring, 3)
	cfg.MaxVirtual = 2 * time.Second
	hosts, ports := pipeStar(3)
	cfg.Devices = &live.Devices{Hosts: hosts, Switch: ports}
	cfg.Jobs = []JobSpec{{Name: "x", Ranks: []string{"h1", "h0"}}}
	requireExactOrRefused(t, cfg, "live job on [h1, h0]")
}

// placeRank reads the GPU index with Atoi, so "h0:gpu00" (or "h0:gpu+0")
// is GPU 0 under another name and passes the "holds two ranks" check,
// which compares the strings: two ranks run on one GPU.
func TestOneGPUUnderTwoNamesIsRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.TensorBytes, cfg.Workers = Ring, 64<<10, 1
	cfg.Topology = parseTopo(t, "star:hosts=1,gpus=2,intra=100G,alpha=1us")
	cfg.Jobs = []JobSpec{{Name: "g", Ranks: []string{"h0:gpu0", "h0:gpu00"}}}
	_, err := Run(cfg)
	var ce *ConfigError
	assert.ErrorAs(t, err, &ce, "h0:gpu0 and h0:gpu00 are one GPU holding two ranks")
}

// When one job fails (here: runs out of virtual time), Run returns before
// checking any job, so a job that finished every rank's work is reported
// exact=false with no error and no mismatch: --json's jobs say it failed
// without saying why.
func TestFinishedJobIsCheckedWhenAnotherFails(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TensorBytes = 256 << 10
	cfg.MaxVirtual = 300 * time.Microsecond
	cfg.Jobs = []JobSpec{
		{Name: "quick", Ranks: []string{"h0", "h1"}, TensorBytes: 16 << 10},
		{Name: "long", Mode: Ring, Ranks: []string{"h2", "h3"}, TensorBytes: 4 << 20},
	}
	res, err := Run(cfg)
	var je *JobError
	require.ErrorAs(t, err, &je)
	require.Len(t, res.Jobs, 2)
	quick := res.Jobs[0]
	require.Empty(t, quick.Error)
	require.Positive(t, quick.VirtualNS, "job quick finished")
	assert.True(t, quick.Exact, "job quick finished bit-exact but is reported exact=false (mismatch %v, error %q)", quick.Mismatch, quick.Error)
}

// A job whose start lies beyond --max-time can never finish, yet Validate
// accepts it and the run fails after a minute of virtual time.
func TestJobStartingAfterMaxTimeIsRefused(t *testing.T) {
	cfg := DefaultConfig()
	cfg.TensorBytes = 64 << 10
	cfg.MaxVirtual = time.Millisecond
	cfg.Jobs = []JobSpec{
		{Name: "a", Ranks: []string{"h0", "h1"}},
		{Name: "b", Ranks: []string{"h2", "h3"}, Start: 2 * time.Millisecond},
	}
	err := cfg.Validate()
	var ce *ConfigError
	assert.ErrorAs(t, err, &ce, "job b starts at 2ms, after --max-time 1ms")
}
