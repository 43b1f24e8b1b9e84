package themis_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/themis"
)

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b)) }

func TestValidateRefuses(t *testing.T) {
	ok := themis.Dim{Kind: themis.Ring, Size: 4, BW: 1e9}
	for _, c := range []struct {
		name string
		topo themis.Topology
		want string
	}{
		{"empty", themis.Topology{}, "no dimension"},
		{"size 1", themis.Topology{ok, {Kind: themis.Ring, Size: 1, BW: 1e9}}, "dim2: size 1"},
		{"size 0", themis.Topology{{Kind: themis.FC, Size: 0, BW: 1e9}}, "dim1: size 0"},
		{"kind", themis.Topology{{Kind: "torus", Size: 4, BW: 1e9}}, `unknown kind "torus"`},
		{"zero bw", themis.Topology{{Kind: themis.Ring, Size: 4}}, "bandwidth 0"},
		{"negative bw", themis.Topology{{Kind: themis.Ring, Size: 4, BW: -1}}, "bandwidth -1"},
		{"nan bw", themis.Topology{{Kind: themis.Ring, Size: 4, BW: math.NaN()}}, "bandwidth NaN"},
		{"inf bw", themis.Topology{{Kind: themis.Ring, Size: 4, BW: math.Inf(1)}}, "bandwidth +Inf"},
		{"hd not pow2", themis.Topology{{Kind: themis.Switch, Size: 6, BW: 1e9}}, "power of two"},
		{"latency", themis.Topology{{Kind: themis.FC, Size: 4, BW: 1e9, Latency: -time.Nanosecond}}, "negative step latency"},
		{"too big", themis.Topology{{Kind: themis.Ring, Size: 1 << 13, BW: 1}, {Kind: themis.Ring, Size: 1 << 13, BW: 1}}, "more than"},
	} {
		err := c.topo.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Validate() = %v, want a one-line error with %q", c.name, err, c.want)
		}
	}
	if err := (themis.Topology{ok, {Kind: themis.Switch, Size: 8, BW: 1}}).Validate(); err != nil {
		t.Errorf("a valid topology: %v", err)
	}
	topo := themis.Topology{ok}
	for _, c := range []struct {
		coll  themis.Collective
		bytes float64
		cfg   themis.Config
		want  string
	}{
		{themis.AllReduce, 1e6, themis.Config{Scheduler: themis.Themis, Chunks: 0}, "0 chunks"},
		{themis.AllReduce, 1e6, themis.Config{Scheduler: themis.Themis, Chunks: -3}, "-3 chunks"},
		{themis.AllReduce, 1e6, themis.Config{Scheduler: "greedy", Chunks: 1}, `unknown scheduler "greedy"`},
		{"all-to-all", 1e6, themis.Config{Scheduler: themis.Themis, Chunks: 1}, `unknown collective "all-to-all"`},
		{themis.AllReduce, 0, themis.Config{Scheduler: themis.Themis, Chunks: 1}, "collective size 0"},
		{themis.AllReduce, 1e6, themis.Config{Scheduler: themis.Themis, Chunks: 1, ThresholdDivisor: -1}, "threshold divisor -1"},
	} {
		if _, _, err := themis.Schedule(topo, c.coll, c.bytes, c.cfg); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Schedule(%v, %v, %+v) = %v, want %q", c.coll, c.bytes, c.cfg, err, c.want)
		}
	}
	if _, _, err := themis.Schedule(themis.Topology{{Kind: themis.Ring, Size: 1, BW: 1}}, themis.AllReduce, 1, themis.Config{Scheduler: themis.Themis, Chunks: 1}); err == nil {
		t.Error("Schedule accepted a dimension of size 1")
	}
	if err := themis.Policy("lifo").Validate(); err == nil || !strings.Contains(err.Error(), `"lifo"`) {
		t.Errorf("Policy(lifo).Validate() = %v", err)
	}
}

// The per-stage bytes of the paper's §2.1/§2.3 worked by hand: a 64 MB
// chunk on a 4-NPU dimension.
func TestStageBytes(t *testing.T) {
	const MB = 1 << 20
	// RS: each NPU keeps one quarter (16 MB) and sends the other three
	// quarters (48 MB).
	if got := themis.OutBytes(4, themis.RS, 64*MB); got != 16*MB {
		t.Errorf("RS out = %v, want 16 MB", got)
	}
	if got := themis.SentBytes(4, themis.RS, 64*MB); got != 48*MB {
		t.Errorf("RS sent = %v, want 48 MB", got)
	}
	// AG of 16 MB: each NPU sends its 16 MB to 3 peers (48 MB) and ends
	// with 64 MB.
	if got := themis.OutBytes(4, themis.AG, 16*MB); got != 64*MB {
		t.Errorf("AG out = %v, want 64 MB", got)
	}
	if got := themis.SentBytes(4, themis.AG, 16*MB); got != 48*MB {
		t.Errorf("AG sent = %v, want 48 MB", got)
	}
	// The step counts of Table 1's algorithms on 8 NPUs: ring 7, Direct
	// 1, Halving-Doubling 3 (8 = 2^3); and 16 NPUs: 15, 1, 4.
	for _, c := range []struct {
		k       themis.DimKind
		p, want int
	}{{themis.Ring, 8, 7}, {themis.FC, 8, 1}, {themis.Switch, 8, 3}, {themis.Ring, 16, 15}, {themis.FC, 16, 1}, {themis.Switch, 16, 4}, {themis.Switch, 2, 1}} {
		if got := themis.Steps(c.k, c.p); got != c.want {
			t.Errorf("Steps(%s, %d) = %d, want %d", c.k, c.p, got, c.want)
		}
	}
	// A ring of 8 at 100 GB/s, 700 ns per step: an RS of 8 MB sends
	// 7 MB: 7e6/1e11 = 70 µs, plus 7 × 700 ns = 4.9 µs.
	d := themis.Dim{Kind: themis.Ring, Size: 8, BW: 100e9, Latency: 700 * time.Nanosecond}
	if got := themis.StageSeconds(d, themis.RS, 8e6, false); !near(got, 70e-6) {
		t.Errorf("ring RS, no latency = %v s, want 70 µs", got)
	}
	if got := themis.StageTime(d, themis.RS, 8e6, true); got != 74900*time.Nanosecond {
		t.Errorf("ring RS with latency = %v, want 74.9 µs", got)
	}
	// A_K: an all-reduce on that ring takes 2P-2 = 14 steps (§4.4): 9.8 µs;
	// an RS alone 4.9 µs. A switch of 8 (HD): 2 × 3 steps × 700 ns.
	if got := themis.AK(d, themis.AllReduce); !near(got, 9.8e-6) {
		t.Errorf("A_K ring all-reduce = %v, want 9.8 µs", got)
	}
	if got := themis.AK(d, themis.ReduceScatter); !near(got, 4.9e-6) {
		t.Errorf("A_K ring RS = %v, want 4.9 µs", got)
	}
	sw := themis.Dim{Kind: themis.Switch, Size: 8, BW: 1, Latency: 700 * time.Nanosecond}
	if got := themis.AK(sw, themis.AllReduce); !near(got, 4.2e-6) {
		t.Errorf("A_K switch all-reduce = %v, want 4.2 µs", got)
	}
}

// A hierarchical all-reduce of S on 4×8×2 (§3.1): RS 4 then 8 then 2,
// AG back; bytes entering each stage S, S/4, S/32, S/64, S/32, S/4, and
// the chunk sends S(N-1)/N in each half whatever the order.
func TestStagesOfAnAllReduce(t *testing.T) {
	topo := themis.Topology{
		{Kind: themis.Ring, Size: 4, BW: 1e9},
		{Kind: themis.FC, Size: 8, BW: 1e9},
		{Kind: themis.Switch, Size: 2, BW: 1e9},
	}
	const S = 64.0 * 1024
	scheds, _, err := themis.Schedule(topo, themis.AllReduce, S, themis.Config{Scheduler: themis.Baseline, Chunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	st := scheds[0].Stages
	want := []struct {
		dim    int
		op     themis.Op
		in     float64
		sent   float64
		outDiv float64
	}{
		{0, themis.RS, S, S * 3 / 4, 4},
		{1, themis.RS, S / 4, S / 4 * 7 / 8, 32},
		{2, themis.RS, S / 32, S / 32 / 2, 64},
		{2, themis.AG, S / 64, S / 64, 32},
		{1, themis.AG, S / 32, S / 32 * 7, 4},
		{0, themis.AG, S / 4, S / 4 * 3, 1},
	}
	if len(st) != len(want) {
		t.Fatalf("%d stages, want %d", len(st), len(want))
	}
	var rs, ag float64
	for i, w := range want {
		if st[i].Dim != w.dim || st[i].Op != w.op || st[i].InBytes != w.in || st[i].SentBytes != w.sent || st[i].OutBytes != S/w.outDiv {
			t.Errorf("stage %d = %+v, want dim %d %s in %v sent %v out %v", i, st[i], w.dim, w.op, w.in, w.sent, S/w.outDiv)
		}
		if w.op == themis.RS {
			rs += st[i].SentBytes
		} else {
			ag += st[i].SentBytes
		}
	}
	if !near(rs, S*63/64) || !near(ag, S*63/64) {
		t.Errorf("RS sent %v, AG sent %v, want S·63/64 = %v each", rs, ag, S*63/64)
	}
	// Reduce-scatter alone: the first half; all-gather alone: the
	// second, entering with S/N.
	rsOnly, _, _ := themis.Schedule(topo, themis.ReduceScatter, S, themis.Config{Scheduler: themis.Baseline, Chunks: 1})
	agOnly, _, _ := themis.Schedule(topo, themis.AllGather, S, themis.Config{Scheduler: themis.Baseline, Chunks: 1})
	for i := 0; i < 3; i++ {
		if rsOnly[0].Stages[i] != st[i] {
			t.Errorf("reduce-scatter stage %d = %+v, want %+v", i, rsOnly[0].Stages[i], st[i])
		}
		if agOnly[0].Stages[i] != st[3+i] {
			t.Errorf("all-gather stage %d = %+v, want %+v", i, agOnly[0].Stages[i], st[3+i])
		}
	}
	if len(rsOnly[0].Stages) != 3 || len(agOnly[0].Stages) != 3 {
		t.Errorf("RS-only %d stages, AG-only %d, want 3 each", len(rsOnly[0].Stages), len(agOnly[0].Stages))
	}
}
