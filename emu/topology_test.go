package emu

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/tensor"
)

func tenG() topo.LinkParams { return topo.LinkParams{Rate: 10e9, Latency: time.Microsecond} }

func mustTopo(t *testing.T) func(*topo.Topology, error) *topo.Topology {
	return func(tp *topo.Topology, err error) *topo.Topology {
		t.Helper()
		require.NoError(t, err)
		return tp
	}
}

func runOK(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact, "mismatch %+v", res.Mismatch)
	for _, j := range res.Jobs {
		require.True(t, j.Exact, "job %s", j.Name)
	}
	return res
}

// The default run and the same run written as an explicit star topology
// write byte-identical captures.
func TestExplicitStarIsTheDefault(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring} {
		cfg := DefaultConfig()
		cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = mode, 5, 128<<10, 8, 4
		n, err := faults.ParseNetem("loss 0.5% reorder 2% gap 3")
		require.NoError(t, err)
		cfg.Netem = n
		var a, b bytes.Buffer
		cfg.Capture = &a
		runOK(t, cfg)
		cfg.Capture = &b
		cfg.Topology = mustTopo(t)(topo.Star(5, tenG()))
		runOK(t, cfg)
		require.True(t, bytes.Equal(a.Bytes(), b.Bytes()), "%v: explicit star capture differs", mode)
	}
}

// Two NetReduce jobs on one star switch with disjoint hosts: each exact,
// each within 0.5 % of its virtual time alone, on rings 0 and 1.
func TestTwoNetReduceJobsShareASwitch(t *testing.T) {
	base := DefaultConfig()
	base.Workers, base.TensorBytes, base.Seed = 8, 1<<20, 3
	a := JobSpec{Name: "a", Mode: NetReduce, Ranks: []string{"h0", "h1", "h2", "h3"}}
	b := JobSpec{Name: "b", Mode: NetReduce, Ranks: []string{"h4", "h5", "h6", "h7"}}
	both := base
	both.Jobs = []JobSpec{a, b}
	res := runOK(t, both)
	require.Len(t, res.Jobs, 2)
	// 1 MiB in messages of 170 KiB less the 8-byte INA header: six full
	// ones and 4144 + 8 bytes (5 packets) in the seventh; one aggregation
	// per packet, per ring.
	assert.Equal(t, uint64(2*(6*170+5)), netreduce.StatsOf(res.Switch).Aggregations, "both rings aggregated every packet")
	for i, js := range []JobSpec{a, b} {
		solo := base
		solo.Jobs = []JobSpec{js}
		alone := runOK(t, solo)
		got, want := float64(res.Jobs[i].VirtualNS), float64(alone.Jobs[0].VirtualNS)
		assert.InDelta(t, 1, got/want, 0.005, "job %s: %v together, %v alone", js.Name, time.Duration(got), time.Duration(want))
	}
}

// Jobs on shared hosts get their own QPNs, rkeys and ring: a NetReduce and
// a ring job on the same four hosts, the second starting 50 µs later.
func TestJobsShareHosts(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.Seed = 4, 256<<10, 9
	cfg.Jobs = []JobSpec{
		{Name: "nr", Mode: NetReduce, Ranks: []string{"h0", "h1", "h2", "h3"}},
		{Name: "ring", Mode: Ring, Ranks: []string{"h3", "h2", "h1", "h0"}, Start: 50 * time.Microsecond},
	}
	var buf bytes.Buffer
	cfg.Capture = &buf
	res := runOK(t, cfg)
	assert.Equal(t, int64(50000), res.Jobs[1].StartNS)
	assert.Greater(t, res.Jobs[1].VirtualNS, int64(0))
	assert.Equal(t, "netreduce+ring", res.Mode)
	// Every RoCE frame's destination QP is one of the two jobs'.
	qpns := map[uint32]int{}
	r, err := pcapio.NewReader("capture", &buf)
	require.NoError(t, err)
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if len(rec.Data) > 58 && rec.Data[12] == 0x08 && rec.Data[13] == 0x00 {
			qpns[uint32(rec.Data[47])<<16|uint32(rec.Data[48])<<8|uint32(rec.Data[49])]++
		}
	}
	for q := range qpns {
		assert.Contains(t, []uint32{0x11, 0x12, 0x13, 0x14}, q)
	}
	assert.Len(t, qpns, 4)
}

func spineLeaf(t *testing.T, uplink float64, spines int) *topo.Topology {
	up := tenG()
	up.Rate = uplink
	return mustTopo(t)(topo.SpineLeaf(2, 4, spines, tenG(), up))
}

// Ring-AllReduce over a non-blocking spine-leaf (2 leaves × 4 hosts, 40G
// uplink) runs within 3 % of the same ring on a star; with every ring
// connection crossing a 2:1 oversubscribed uplink it runs at about half.
func TestRingOverSpineLeaf(t *testing.T) {
	base := DefaultConfig()
	base.Mode, base.Workers, base.TensorBytes, base.Seed = Ring, 8, 2<<20, 5
	star := runOK(t, base).AlgBWGbps
	seq := []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"}
	cross := []string{"h0", "h4", "h1", "h5", "h2", "h6", "h3", "h7"} // every connection crosses the spine
	for _, c := range []struct {
		name   string
		uplink float64
		ranks  []string
		lo, hi float64
	}{
		{"non-blocking, racks in order", 40e9, seq, 0.97, 1.03},
		{"non-blocking, every hop across", 40e9, cross, 0.97, 1.03},
		{"2:1, racks in order (two flows cross)", 20e9, seq, 0.97, 1.03},
		{"2:1, every hop across", 20e9, cross, 0.45, 0.55},
	} {
		cfg := base
		cfg.Topology = spineLeaf(t, c.uplink, 1)
		cfg.Jobs = []JobSpec{{Name: "ring", Ranks: c.ranks}}
		res := runOK(t, cfg)
		ratio := res.Jobs[0].AlgBWGbps / star
		t.Logf("%s: %.3f Gb/s, %.3f of the star's %.3f (retransmissions %d, queue drops %d)", c.name, res.Jobs[0].AlgBWGbps, ratio, star, res.Retransmissions, res.QueueDrops)
		assert.True(t, ratio >= c.lo && ratio <= c.hi, "%s: algbw ratio %.3f, want %.2f..%.2f", c.name, ratio, c.lo, c.hi)
	}
}

// Two spines: flows spread over both (ECMP by flow hash), each connection
// on one path (no reordering, so no NAK without faults).
func TestECMPSpreadsFlows(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.Seed = Ring, 8, 1<<20, 2
	cfg.Topology = spineLeaf(t, 20e9, 2)
	cfg.Jobs = []JobSpec{{Name: "ring", Ranks: []string{"h0", "h4", "h1", "h5", "h2", "h6", "h3", "h7"}}}
	u := startJob(t, cfg)
	res := u.Loop()
	require.NoError(t, u.Err())
	assert.Zero(t, res.NAKs)
	for _, name := range []string{"leaf0-spine0", "leaf0-spine1"} {
		st, ok := u.Fab.Direction(name)
		require.True(t, ok, name)
		assert.Greater(t, st.Frames, uint64(0), name)
	}
}

// A fault aimed at a link by name fires there, and the capture has one
// interface per link direction, named after it.
func TestFaultByLinkName(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.Seed, cfg.Timeout = Ring, 8, 256<<10, 1, 8
	cfg.Topology = spineLeaf(t, 40e9, 1)
	ev, err := faults.Parse("drop link=leaf0-spine0 class=data nth=3")
	require.NoError(t, err)
	cfg.Events = []faults.Event{ev}
	var buf bytes.Buffer
	cfg.Capture = &buf
	res := runOK(t, cfg)
	assert.Equal(t, uint64(1), res.Faults.Dropped)
	assert.Greater(t, res.Retransmissions, uint64(0))
	r, err := pcapio.NewReader("capture", &buf)
	require.NoError(t, err)
	comments := 0
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		if pcapio.IsGhost(rec.Comments) {
			comments++
			assert.Equal(t, "leaf0-spine0", r.Interfaces()[rec.Info.InterfaceIndex], "the dropped frame is on the named link")
		}
	}
	assert.Equal(t, 1, comments)
	assert.Contains(t, r.Interfaces(), "h3-leaf0")
	assert.Contains(t, r.Interfaces(), "spine0-leaf1")

	bad := cfg
	ev, err = faults.Parse("drop link=leaf0-spine9")
	require.NoError(t, err)
	bad.Events = []faults.Event{ev}
	_, err = Run(bad)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "no such link direction")
}

// A ring that does not fit the switch's aggregation memory is refused at
// setup, with the numbers.
func TestSwitchMemoryBudget(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.TensorBytes = 4, 64<<10
	need := NetReduceRing(cfg, nil).MemoryBytes() // 2·2·170 aggregators × (4·(1024+160) + 1024)
	assert.Equal(t, int64(2*2*170*(4*(1024+160)+1024)), need)
	cfg.SwitchMemory = need
	runOK(t, cfg)
	cfg.SwitchMemory = need - 1
	_, err := Run(cfg)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "needs 3.7 MiB of aggregation memory")
	// Two jobs: the second ring does not fit beside the first.
	cfg.Workers, cfg.SwitchMemory = 8, need+need/2
	cfg.Jobs = []JobSpec{{Name: "a", Ranks: []string{"h0", "h1", "h2", "h3"}}, {Name: "b", Ranks: []string{"h4", "h5", "h6", "h7"}}}
	_, err = Run(cfg)
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "switch s0: ring 1")
}

// Ring-AllReduce over GPUs: 2 hosts × 4 GPUs on a 300 Gbit/s interconnect
// (α = 1 µs), each host's NIC on a 10G star. Placed host by host, six hops
// stay on the interconnect and two cross the NICs, so the ring runs at
// the NICs' pace, like an 8-host ring on the star (within 3 %). Placed
// alternately, every hop crosses, four flows share each NIC, and the ring
// takes about four times as long. Both are exact; NetReduce refuses two
// GPU ranks of one host, and a GPU the host lacks is refused.
func TestRingOverGPUs(t *testing.T) {
	spec, err := topo.ParseFlag("star:hosts=2,gpus=4,intra=300G,alpha=1us")
	require.NoError(t, err)
	tp, err := spec.Build(tenG())
	require.NoError(t, err)
	h0, _ := tp.Node("h0")
	assert.Equal(t, 4, h0.GPUs)
	assert.Equal(t, time.Microsecond+80*time.Microsecond, h0.Intra.StepTime(3e6), "3 MB at 300 Gbit/s plus α")

	base := DefaultConfig()
	base.Mode, base.Workers, base.TensorBytes, base.Seed = Ring, 8, 2<<20, 3
	star := runOK(t, base).AlgBWGbps

	gpus := func(order ...string) []string { return order }
	byHost := gpus("h0:gpu0", "h0:gpu1", "h0:gpu2", "h0:gpu3", "h1:gpu0", "h1:gpu1", "h1:gpu2", "h1:gpu3")
	alternate := gpus("h0:gpu0", "h1:gpu0", "h0:gpu1", "h1:gpu1", "h0:gpu2", "h1:gpu2", "h0:gpu3", "h1:gpu3")
	cfg := base
	cfg.Topology, cfg.Workers = tp, 2
	cfg.Jobs = []JobSpec{{Name: "g", Ranks: byHost}}
	var buf bytes.Buffer
	cfg.Capture = &buf
	contiguous := runOK(t, cfg).Jobs[0]
	t.Logf("by host: %.3f Gb/s (8-host star ring: %.3f)", contiguous.AlgBWGbps, star)
	assert.InDelta(t, 1, contiguous.AlgBWGbps/star, 0.03)
	cfg.Capture = nil
	cfg.Jobs = []JobSpec{{Name: "g", Ranks: alternate}}
	crossing := runOK(t, cfg).Jobs[0]
	t.Logf("alternating: %.3f Gb/s", crossing.AlgBWGbps)
	assert.InDelta(t, 4, contiguous.AlgBWGbps/crossing.AlgBWGbps, 0.4)

	// Only the two NIC hops are on the wire: every captured RoCE frame is
	// between h0 and h1, on QPs 0x11 (rank 3's and 7's send QPs) and 0x12.
	rd, err := pcapio.NewReader("capture", &buf)
	require.NoError(t, err)
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		if len(rec.Data) > 58 && rec.Data[12] == 0x08 && rec.Data[13] == 0x00 {
			qpn := uint32(rec.Data[47])<<16 | uint32(rec.Data[48])<<8 | uint32(rec.Data[49])
			require.Contains(t, []uint32{0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18}, qpn)
		}
	}

	// Loss on the NICs' links: the RDMA hops recover, the result is exact.
	n, err := faults.ParseNetem("loss 1%")
	require.NoError(t, err)
	cfg.Netem, cfg.Timeout = n, 8
	cfg.Jobs = []JobSpec{{Name: "g", Ranks: byHost}}
	lossy := runOK(t, cfg)
	assert.Greater(t, lossy.Retransmissions, uint64(0))

	for _, c := range []struct {
		mode  Mode
		ranks []string
		want  string
	}{
		{NetReduce, byHost, "ranks 0 and 1 are both on h0: a NetReduce ring has one rank per host"},
		{Ring, gpus("h0:gpu0", "h0:gpu4"), "h0 has 4 GPUs (gpu0..gpu3)"},
		{Ring, gpus("h0:gpu0", "h9:gpu0"), "no host h9"},
	} {
		bad := base
		bad.Topology, bad.Workers = tp, 2
		bad.Jobs = []JobSpec{{Name: "g", Mode: c.mode, Ranks: c.ranks}}
		_, err = Run(bad)
		var ce *ConfigError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, err.Error(), c.want)
	}
}

// A job on a dims platform: ranks on the NICs that face a dimension's
// switch (a 4x2 platform: dimension 1 rings of 4, dimension 2 switches of
// 2; each host's NICs 0 and 1 face its ring neighbours, NIC 2 the switch).
func TestJobOnADimension(t *testing.T) {
	spec, err := topo.ParseFlag("dims:4x2,kinds=ring/switch,links=100G/50G")
	require.NoError(t, err)
	tp, err := spec.Build(tenG())
	require.NoError(t, err)
	h0, _ := tp.Node("h0")
	require.Len(t, h0.Links, 3)
	cfg := DefaultConfig()
	cfg.Topology, cfg.Mode, cfg.TensorBytes = tp, Ring, 256<<10
	cfg.Jobs = []JobSpec{{Name: "d2", Ranks: []string{"h0:nic2", "h4:nic2"}}}
	res := runOK(t, cfg)
	// 2 ranks over one 50G switch: the ring's algbw is close to the line.
	assert.InDelta(t, 50, res.Jobs[0].AlgBWGbps, 10)
	// Ranks whose NICs have no path between them are refused.
	cfg.Jobs = []JobSpec{{Name: "x", Ranks: []string{"h0", "h2"}}}
	_, err = Run(cfg)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Contains(t, err.Error(), "no path")
}

// Each ring's results take its own arithmetic's latency: an i32 job
// beside an f32 job on the same switch takes exactly its time alone (a
// switch-wide worst case would give it the float adder's 2.4 µs).
func TestPerRingLatency(t *testing.T) {
	i32, f32 := tensorDType(t, "i32"), tensorDType(t, "f32")
	base := DefaultConfig()
	base.Workers, base.TensorBytes, base.Seed = 8, 512<<10, 6
	fixed := JobSpec{Name: "fixed", Ranks: []string{"h0", "h1", "h2", "h3"}, DType: &i32}
	float := JobSpec{Name: "float", Ranks: []string{"h4", "h5", "h6", "h7"}, DType: &f32}
	solo := base
	solo.Jobs = []JobSpec{fixed}
	alone := runOK(t, solo).Jobs[0].VirtualNS
	both := base
	both.Jobs = []JobSpec{fixed, float}
	res := runOK(t, both)
	assert.Equal(t, alone, res.Jobs[0].VirtualNS, "the i32 job's time changed beside an f32 job")
	assert.Greater(t, res.Jobs[1].VirtualNS, res.Jobs[0].VirtualNS, "the f32 job pays the float adder")
}

func tensorDType(t *testing.T, s string) tensor.DType {
	d, err := tensor.ParseDType(s)
	require.NoError(t, err)
	return d
}

// On one host the whole ring is on the interconnect, and its model shows:
// with α = 1 ms every transfer step costs at least α, and a GPU sends
// 2(n-1) steps × 4 messages (512 KiB chunks in 170 KiB messages) = 24
// one after another, so the job takes at least 24 ms, and little more
// (the bytes take 512Ki·8/100G ≈ 42 µs per chunk; the pipeline fills in
// one step).
func TestGPUInterconnectTime(t *testing.T) {
	spec, err := topo.ParseFlag("star:hosts=1,gpus=4,intra=100G,alpha=1ms")
	require.NoError(t, err)
	tp, err := spec.Build(tenG())
	require.NoError(t, err)
	cfg := DefaultConfig()
	cfg.Mode, cfg.TensorBytes, cfg.Topology, cfg.Workers = Ring, 2<<20, tp, 1
	cfg.Jobs = []JobSpec{{Name: "g", Ranks: []string{"h0:gpu0", "h0:gpu1", "h0:gpu2", "h0:gpu3"}}}
	res := runOK(t, cfg)
	d := time.Duration(res.Jobs[0].VirtualNS)
	t.Logf("%v", d)
	assert.GreaterOrEqual(t, d, 24*time.Millisecond)
	assert.Less(t, d, 24*time.Millisecond+2*time.Millisecond)
	assert.Zero(t, res.Jobs[0].FramesSent, "no RoCE frame: every hop is on the interconnect")
	assert.Equal(t, uint64(1), res.FramesSent, "only the NIC's gratuitous ARP goes on the wire")
}
