package emu

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/tensor"
)

// multiRack is a NetReduce job on leaves × perLeaf hosts under one spine,
// every link 10G, uplinks up bits/s.
func multiRack(t *testing.T, leaves, perLeaf int, up float64) Config {
	cfg := DefaultConfig()
	u := tenG()
	u.Rate = up
	cfg.Topology = mustTopo(t)(topo.SpineLeaf(leaves, perLeaf, 1, tenG(), u))
	cfg.Workers, cfg.TensorBytes, cfg.Seed = leaves*perLeaf, 256<<10, 1
	return cfg
}

// Fig. 5 and Table 3 of the paper: four workers W1..W4 (h0..h3), two per
// leaf. The spine's CTT has the four rows of switch-to-switch
// connections set at job setup; each leaf's, populated by the first
// packets and notifications, has its two aggregation rows (the
// connections whose sender is local) and two multicast rows (those whose
// receiver is local), exactly as Table 3 prints L1's.
func TestMultiRackTable3(t *testing.T) {
	cfg := multiRack(t, 2, 2, 10e9)
	res := runOK(t, cfg)
	ring := res.Jobs[0].Ring
	require.NotNil(t, ring)
	require.Len(t, ring.Tree, 3)
	row := func(dir, from, to string) netreduce.CTTEntry {
		return netreduce.CTTEntry{Direction: dir, From: from, To: to}
	}
	both := "aggregation and multicast"
	assert.Equal(t, "spine0", ring.Switch)
	assert.Equal(t, []netreduce.CTTEntry{
		row(both, "leaf0→spine0", "spine0→leaf0"), row(both, "leaf0→spine0", "spine0→leaf1"),
		row(both, "leaf1→spine0", "spine0→leaf0"), row(both, "leaf1→spine0", "spine0→leaf1"),
	}, ring.Tree[0].CTT)
	assert.Equal(t, []netreduce.CTTEntry{
		row("aggregation", "h0→h1", "leaf0→spine0"), row("aggregation", "h1→h2", "leaf0→spine0"),
		row("multicast", "spine0→leaf0", "h0→h1"), row("multicast", "spine0→leaf0", "h3→h0"),
	}, ring.Tree[1].CTT)
	assert.Equal(t, []netreduce.CTTEntry{
		row("aggregation", "h2→h3", "leaf1→spine0"), row("aggregation", "h3→h0", "leaf1→spine0"),
		row("multicast", "spine0→leaf1", "h1→h2"), row("multicast", "spine0→leaf1", "h2→h3"),
	}, ring.Tree[2].CTT)
	assert.Equal(t, []int{0, 1}, ring.Tree[1].Ranks)
	assert.Equal(t, []int{2, 3}, ring.Tree[2].Ranks)

	// Counting, with no loss: every packet position is one aggregation at
	// each leaf and at the spine, one partial up per leaf, one total down
	// per leaf; each leaf translates it for its two local receivers.
	// Notifications: one connection per leaf crosses racks, and each of
	// its messages sends a first and a last one.
	msgs := int(NetReduceMessages(cfg))
	pkts := uint64((cfg.TensorBytes+int64(msgs)*8+int64(cfg.MTU)-1)/int64(cfg.MTU)) + 0
	sp, l0 := ring.Tree[0].Counters, ring.Tree[1].Counters
	assert.Equal(t, pkts, sp.Aggregations)
	assert.Equal(t, 2*pkts, sp.TotalsSent)
	assert.Equal(t, 2*pkts, sp.DupSuppressed, "each of 2 partials matches 2 rows, one copy each")
	assert.Equal(t, pkts, l0.PartialsSent)
	assert.Equal(t, pkts, l0.DupSuppressed, "two local connections, one partial")
	assert.Equal(t, 2*pkts, l0.Translated)
	assert.Equal(t, uint64(2*msgs), l0.NotifySent)
	assert.Zero(t, l0.ResultPackets+l0.Untranslatable+l0.PartialResends+sp.TotalResends)
}

// Exact for every dtype, transport and placement, against the tree's
// reduction order: each leaf's ranks in rank order, then the leaves in
// the order of their lowest rank. Placements put ranks across the racks
// in turn (so tree order and rank order differ), one rank per leaf, and
// three leaves.
func TestMultiRackExact(t *testing.T) {
	for _, c := range []struct {
		leaves, perLeaf int
		ranks           []string
	}{
		{2, 4, nil},
		{2, 4, []string{"h0", "h4", "h1", "h5", "h2", "h6", "h3", "h7"}},
		{4, 1, nil},
		{3, 2, []string{"h5", "h0", "h3", "h1"}},
	} {
		for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
			for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.I32} {
				name := fmt.Sprintf("%dx%d %v %v %v", c.leaves, c.perLeaf, c.ranks, tr, dt)
				t.Run(name, func(t *testing.T) {
					cfg := multiRack(t, c.leaves, c.perLeaf, 40e9)
					cfg.Transport, cfg.DType, cfg.TensorBytes, cfg.MsgLen = tr, dt, 96<<10, 20
					if c.ranks != nil {
						cfg.Workers = len(c.ranks)
						cfg.Jobs = []JobSpec{{Name: "j", Ranks: c.ranks}}
					}
					res := runOK(t, cfg)
					assert.Zero(t, res.Retransmissions)
				})
			}
		}
	}
}

// Every loss point of §1.7 recovers through the hosts' go-back-N with the
// result exact, each by its own path: a gradient lost on a host link, a
// partial on an uplink, a total on a downlink, a result on its last hop,
// a first or a last packet's notification.
func TestMultiRackLossPoints(t *testing.T) {
	for _, c := range []struct {
		fault   string
		counter func(netreduce.Stats) uint64
		what    string
	}{
		{"drop link=h1-leaf0 class=data nth=40", func(s netreduce.Stats) uint64 { return s.PartialResends + s.ResultResends }, "re-sent partials or results"},
		{"drop link=leaf0-spine0 qp=0xFFFF00 nth=40", func(s netreduce.Stats) uint64 { return s.PartialResends }, "re-sent partials"},
		{"drop link=spine0-leaf1 qp=0xFFFE00 nth=40", func(s netreduce.Stats) uint64 { return s.TotalResends + s.ResultResends }, "re-sent totals or results from a cache"},
		{"drop link=leaf1-h2 class=data nth=40", func(s netreduce.Stats) uint64 { return s.ResultResends }, "results re-sent from a cache"},
		{"drop link=leaf0-spine0 qp=0xFFFD00 nth=1", func(s netreduce.Stats) uint64 { return s.Untranslatable }, "untranslatable totals"},
		{"drop link=spine0-leaf1 qp=0xFFFD00 nth=4", func(s netreduce.Stats) uint64 { return s.Untranslatable }, "untranslatable totals"},
		{"drop link=spine0-leaf0 qp=0xFFFD00 nth=2", func(s netreduce.Stats) uint64 { return s.Untranslatable }, "untranslatable totals"},
	} {
		t.Run(c.fault, func(t *testing.T) {
			cfg := multiRack(t, 2, 2, 10e9)
			cfg.MsgLen, cfg.Timeout = 40, 8
			ev, err := faults.Parse(c.fault)
			require.NoError(t, err)
			cfg.Events = []faults.Event{ev}
			res := runOK(t, cfg)
			assert.Equal(t, uint64(1), res.Faults.Dropped, "the fault fired once")
			assert.Greater(t, c.counter(res.Jobs[0].Ring.Counters), uint64(0), c.what)
			t.Logf("%s: %d retransmissions, %d timeouts, %+v", c.fault, res.Retransmissions, res.Timeouts, res.Jobs[0].Ring.Counters.TreeStats)
		})
	}
}

// §3.3's traffic claim (issue: one partial stream up and one result
// stream down each leaf uplink per allreduce, whatever the number of
// workers under the leaf): the bytes on leaf0's uplink and downlink are
// one host's stream (its frames' bytes, plus the 24-byte INA and INATree
// headers per packet and the notifications) with 2 or 4 hosts under the
// leaf alike; and with non-blocking uplinks the allreduce runs within 3 %
// of the same workers on one switch (the window N = 2 covers the longer
// RTT: §3.2's N ≥ RTT × rate / (MsgLen × MTU) is well under 1 here).
func TestMultiRackUplinkAndSpeed(t *testing.T) {
	var up, down []uint64
	for _, perLeaf := range []int{2, 4} {
		cfg := multiRack(t, 2, perLeaf, float64(perLeaf)*10e9)
		cfg.TensorBytes = 1 << 20
		u := startJob(t, cfg)
		res := u.Loop()
		require.NoError(t, u.Err())
		require.Nil(t, u.Jobs[0].Alg.Check())
		host, _ := u.Fab.Direction("h0-leaf0")
		ul, _ := u.Fab.Direction("leaf0-spine0")
		dl, _ := u.Fab.Direction("spine0-leaf0")
		up, down = append(up, ul.Bytes), append(down, dl.Bytes)
		r := float64(ul.Bytes) / float64(host.Bytes)
		t.Logf("%d hosts per leaf: uplink %d B, downlink %d B, one host's stream %d B (×%.4f)", perLeaf, ul.Bytes, dl.Bytes, host.Bytes, r)
		assert.InDelta(t, 1.02, r, 0.02, "the uplink carries one stream")

		star := DefaultConfig()
		star.Workers, star.TensorBytes, star.Seed = cfg.Workers, cfg.TensorBytes, cfg.Seed
		flat := runOK(t, star)
		ratio := res.AlgBWGbps / flat.AlgBWGbps
		t.Logf("%d workers: multi-rack %.4f Gb/s, one switch %.4f (×%.4f)", cfg.Workers, res.AlgBWGbps, flat.AlgBWGbps, ratio)
		assert.InDelta(t, 1, ratio, 0.03)
	}
	assert.InDelta(t, 1, float64(up[1])/float64(up[0]), 0.001, "uplink bytes do not grow with the workers under the leaf")
	assert.InDelta(t, 1, float64(down[1])/float64(down[0]), 0.001, "downlink bytes neither")
}

// Ranks under switches that no one switch joins are refused, naming them.
func TestMultiRackNeedsASpine(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Topology = mustTopo(t)(topo.Dims([]topo.Dim{{Size: 2, Kind: "switch", LinkParams: tenG()}, {Size: 2, Kind: "switch", LinkParams: tenG()}}))
	cfg.Workers, cfg.TensorBytes = 4, 64<<10
	_, err := Run(cfg)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "under switches d1s0, d1s1, and no switch is linked to all of them")
}

// Two multi-rack tenants on the same leaves and spine take different
// RingIDs on every switch and both end exact.
func TestMultiRackTenants(t *testing.T) {
	cfg := multiRack(t, 2, 4, 40e9)
	cfg.Jobs = []JobSpec{{Name: "a", Ranks: []string{"h0", "h1", "h4", "h5"}}, {Name: "b", Ranks: []string{"h2", "h6", "h3", "h7"}}}
	res := runOK(t, cfg)
	assert.Equal(t, uint8(0), res.Jobs[0].Ring.ID)
	assert.Equal(t, uint8(1), res.Jobs[1].Ring.ID)
	for _, j := range res.Jobs {
		assert.Len(t, j.Ring.Tree, 3, j.Name)
		assert.Greater(t, j.Ring.Counters.Translated, uint64(0), j.Name)
	}
}

// The multi-rack data path (leaves, spine, notifications, translation)
// allocates nothing per frame once warm.
func TestMultiRackEventLoopAllocatesNothing(t *testing.T) {
	cfg := multiRack(t, 2, 4, 40e9)
	cfg.TensorBytes = 4 << 20
	u := startJob(t, cfg)
	for range 20000 {
		require.True(t, u.Fab.Clock.Step())
	}
	allocs := testing.AllocsPerRun(5, func() {
		for range 2000 {
			u.Fab.Clock.Step()
		}
	})
	require.NoError(t, u.Err())
	require.Zero(t, allocs, "the warm event loop allocated")
}

// Ring frames between racks that are not the tree's own (results re-sent
// by the sender's leaf, frames of released messages, ACKs) take whatever
// path the routes give: ECMP over several spines, or a direct link
// between two leaves while the tree's spine is a third switch. Every
// switch-to-switch port is fabric for the ring, so they pass; each case
// was a stall (RETRY_EXC_ERR, the frames dropped as forgeries off the
// tree's uplink) before.
func TestMultiRackSeveralPaths(t *testing.T) {
	triangle := &topo.Spec{Kind: "custom",
		Hosts:    topo.HostsSpec{List: []topo.HostSpec{{Name: "h0"}, {Name: "h1"}, {Name: "h2"}, {Name: "h3"}}},
		Switches: []topo.SwitchSpec{{Name: "s0"}, {Name: "s1"}, {Name: "s2"}},
		Links: []topo.LinkSpec{{A: "h0", B: "s0"}, {A: "h1", B: "s0"}, {A: "h2", B: "s1"}, {A: "h3", B: "s1"},
			{A: "s0", B: "s1"}, {A: "s1", B: "s2"}, {A: "s0", B: "s2"}}}
	for _, c := range []struct {
		name    string
		spec    *topo.Spec
		workers int
		fault   string
	}{
		{"2 spines, the issue's command", &topo.Spec{Kind: "spine-leaf", Leaves: 2, HostsPerLeaf: 2, Spines: 2}, 3, "drop link=h0-leaf0 nth=3"},
		{"3 spines, a lost result", &topo.Spec{Kind: "spine-leaf", Leaves: 2, HostsPerLeaf: 2, Spines: 3}, 4, "drop link=leaf1-h2 class=data nth=5"},
		{"a triangle, the leaves linked directly", triangle, 4, "drop link=h0-s0 nth=3"},
		{"a triangle, a lost ACK", triangle, 4, "drop link=h2-s1 class=ack nth=2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tp, err := c.spec.Build(tenG())
			require.NoError(t, err)
			cfg.Topology = tp
			cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Window, cfg.Seed = c.workers, 64<<10, 8, 1, 1
			ev, err := faults.Parse(c.fault)
			require.NoError(t, err)
			cfg.Events = []faults.Event{ev}
			res := runOK(t, cfg)
			assert.Equal(t, uint64(1), res.Faults.Dropped, "the fault fired")
			require.NotNil(t, res.Jobs[0].Ring)
			assert.Len(t, res.Jobs[0].Ring.Tree, 3, "aggregated on two tiers")
			assert.Zero(t, netreduce.StatsOf(res.Switch).PortDrops+res.Switch.PortSecurity, "nothing taken for a forgery")
		})
	}
}

// A lost total is fetched again when each leaf has one rank, window 1 and
// one-packet messages (the command). Rank 1's leaf lost message
// 9's total; rank 1 got 9's result all the same (rank 0's retransmission
// made leaf0 re-send it), so nothing brings 9 through leaf1 again, and
// leaf1 held message 8's aggregator (released only by 9's total) against
// message 10 for ever. Now 10 hitting it re-sends 9's partial, and the
// spine answers with the total.
func TestMultiRackLostTotalOneRankPerLeaf(t *testing.T) {
	for _, c := range []struct{ window, msgLen, nth int }{{1, 1, 10}, {1, 1, 1}, {2, 1, 7}, {1, 3, 10}} {
		t.Run(fmt.Sprintf("window %d msg-len %d nth %d", c.window, c.msgLen, c.nth), func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Topology = mustTopo(t)(topo.SpineLeaf(2, 1, 1, tenG(), tenG()))
			cfg.Workers, cfg.TensorBytes, cfg.MTU, cfg.Window, cfg.MsgLen, cfg.Seed = 2, 64<<10, 256, c.window, c.msgLen, 1
			ev, err := faults.Parse(fmt.Sprintf("drop link=spine0-leaf1 qp=0xFFFE00 nth=%d", c.nth))
			require.NoError(t, err)
			cfg.Events = []faults.Event{ev}
			res := runOK(t, cfg)
			assert.Equal(t, uint64(1), res.Faults.Dropped)
			tc := res.Jobs[0].Ring.Counters
			assert.Positive(t, tc.TotalResends+tc.ResultResends, "the lost total came again, or its results from a cache")
		})
	}
}
