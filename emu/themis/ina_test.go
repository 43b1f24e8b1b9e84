package themis_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/themis"
)

// NetReduce's switch (AllReduce-Switch, TCSI '21, Fig. 17): a float sum
// leaves 2.4 µs after the last contribution, a forwarded frame 250 ns.
const aggBeyondForward = 2400*time.Nanosecond - 250*time.Nanosecond

func TestINAValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		dim  themis.Dim
		want string
	}{
		{"size 1", themis.Dim{Kind: themis.INA, Size: 1, BW: 1e9}, "dim1: size 1"},
		{"not pow2", themis.Dim{Kind: themis.INA, Size: 12, BW: 1e9}, "ina size 12: halving-doubling needs a power of two"},
		{"too many", themis.Dim{Kind: themis.INA, Size: 128, BW: 1e9}, "at most 64 NPUs"},
		{"negative agg", themis.Dim{Kind: themis.INA, Size: 4, BW: 1e9, Aggregation: -1}, "negative aggregation time"},
		{"agg on switch", themis.Dim{Kind: themis.Switch, Size: 4, BW: 1e9, Aggregation: time.Microsecond}, "only ina aggregates"},
		{"zero bw", themis.Dim{Kind: themis.INA, Size: 4}, "bandwidth 0"},
	} {
		err := themis.Topology{c.dim}.Validate()
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: Validate() = %v, want a one-line error with %q", c.name, err, c.want)
		}
	}
	for p := 2; p <= 64; p *= 2 {
		if err := (themis.Topology{{Kind: themis.INA, Size: p, BW: 1}}).Validate(); err != nil {
			t.Errorf("ina of %d: %v", p, err)
		}
	}
}

// The load model of an ina dimension, by hand: its all-reduce is one
// step (the step latency, two links and a forwarding pass, plus the
// aggregation beyond forwarding) that sends s; its RS and AG are
// Halving-Doubling's.
func TestINALoadModel(t *testing.T) {
	d := themis.Dim{Kind: themis.INA, Size: 8, BW: 1e9, Latency: 1700 * time.Nanosecond}
	const s = 1e6
	if got, want := themis.StageSeconds(d, themis.AR, s, true), 1700e-9+aggBeyondForward.Seconds()+s/1e9; !near(got, want) {
		t.Errorf("AR of %v: %v s, want %v", s, got, want)
	}
	if got, want := themis.StageSeconds(d, themis.AR, s, false), s/1e9; !near(got, want) {
		t.Errorf("AR bytes only: %v, want %v", got, want)
	}
	if got, want := themis.StageSeconds(d, themis.RS, s, true), 3*1700e-9+s*7/8/1e9; !near(got, want) {
		t.Errorf("RS on ina (halving-doubling): %v, want %v", got, want)
	}
	if got, want := themis.AK(d, themis.AllReduce), 1700e-9+aggBeyondForward.Seconds(); !near(got, want) {
		t.Errorf("A_K all-reduce = %v, want one step %v", got, want)
	}
	if got, want := themis.AK(d, themis.ReduceScatter), 3*1700e-9; !near(got, want) {
		t.Errorf("A_K reduce-scatter = %v, want log2 8 steps %v", got, want)
	}
	d.Aggregation = 100 * time.Nanosecond
	if got, want := themis.FixedSeconds(d, themis.AR), 1800e-9; !near(got, want) {
		t.Errorf("AR fixed delay with a 100 ns aggregation: %v, want %v", got, want)
	}
	if themis.OutBytes(8, themis.AR, s) != s || themis.SentBytes(8, themis.AR, s) != s {
		t.Errorf("AR: out %v sent %v, want %v each", themis.OutBytes(8, themis.AR, s), themis.SentBytes(8, themis.AR, s), s)
	}
}

// The middle RS/AG pair of an all-reduce on an ina dimension is one AR
// stage; off the middle an ina dimension runs Halving-Doubling.
func TestINAStages(t *testing.T) {
	topo := themis.Topology{
		{Kind: themis.Switch, Size: 4, BW: 4e9, Latency: 700 * time.Nanosecond},
		{Kind: themis.INA, Size: 8, BW: 1e9, Latency: 1700 * time.Nanosecond},
	}
	const S = 64.0 * 1024
	type st struct {
		dim            int
		op             themis.Op
		in, sent, out  float64
		fixed, byteSec float64
	}
	check := func(name string, got []themis.Stage, want []st) {
		t.Helper()
		if len(got) != len(want) {
			t.Fatalf("%s: %d stages %+v, want %d", name, len(got), got, len(want))
		}
		for i, w := range want {
			g := got[i]
			wt := time.Duration(math.Round((w.fixed + w.byteSec) * 1e9))
			if g.Dim != w.dim || g.Op != w.op || g.InBytes != w.in || g.SentBytes != w.sent || g.OutBytes != w.out || g.Time != wt {
				t.Errorf("%s: stage %d = %+v, want dim %d %s in %v sent %v out %v time %v", name, i, g, w.dim, w.op, w.in, w.sent, w.out, wt)
			}
		}
	}
	ar := 1700e-9 + aggBeyondForward.Seconds()
	// The baseline: RS dim1, then dim2 is the middle: one AR of S/4.
	base, _, err := themis.Schedule(topo, themis.AllReduce, S, themis.Config{Scheduler: themis.Baseline, Chunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	check("baseline", base[0].Stages, []st{
		{0, themis.RS, S, S * 3 / 4, S / 4, 2 * 700e-9, S * 3 / 4 / 4e9},
		{1, themis.AR, S / 4, S / 4, S / 4, ar, S / 4 / 1e9},
		{0, themis.AG, S / 4, S * 3 / 4, S, 2 * 700e-9, S * 3 / 4 / 4e9},
	})
	// Reduce-scatter and all-gather have no middle: the ina dimension
	// runs halving-doubling.
	rs, _, err := themis.Schedule(topo, themis.ReduceScatter, S, themis.Config{Scheduler: themis.Baseline, Chunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	check("reduce-scatter", rs[0].Stages, []st{
		{0, themis.RS, S, S * 3 / 4, S / 4, 2 * 700e-9, S * 3 / 4 / 4e9},
		{1, themis.RS, S / 4, S / 4 * 7 / 8, S / 32, 3 * 1700e-9, S / 4 * 7 / 8 / 1e9},
	})
	ag, _, err := themis.Schedule(topo, themis.AllGather, S, themis.Config{Scheduler: themis.Baseline, Chunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	check("all-gather", ag[0].Stages, []st{
		{1, themis.AG, S / 32, S / 32 * 7, S / 4, 3 * 1700e-9, S / 32 * 7 / 1e9},
		{0, themis.AG, S / 4, S * 3 / 4, S, 2 * 700e-9, S * 3 / 4 / 4e9},
	})
	// One ina dimension alone: the whole all-reduce is one AR.
	one, _, err := themis.Schedule(topo[1:], themis.AllReduce, S, themis.Config{Scheduler: themis.Themis, Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range one {
		check("ina alone", c.Stages, []st{{0, themis.AR, S / 2, S / 2, S / 2, ar, S / 2 / 1e9}})
	}
	// Two ina dimensions: only the middle one aggregates.
	two := themis.Topology{topo[1], topo[1]}
	sc, _, err := themis.Schedule(two, themis.AllReduce, S, themis.Config{Scheduler: themis.Baseline, Chunks: 1})
	if err != nil {
		t.Fatal(err)
	}
	check("two ina", sc[0].Stages, []st{
		{0, themis.RS, S, S * 7 / 8, S / 8, 3 * 1700e-9, S * 7 / 8 / 1e9},
		{1, themis.AR, S / 8, S / 8, S / 8, ar, S / 8 / 1e9},
		{0, themis.AG, S / 8, S * 7 / 8, S, 3 * 1700e-9, S * 7 / 8 / 1e9},
	})
}

// Algorithm 1 sees an ina dimension's load like any other's: the AR's
// s/BW. On dims (switch 4 at 4 GB/s, X 4 at 1 GB/s) a baseline chunk of
// c charges dim1 2·3/4·c/4e9 and, with X a switch, dim2 2·3/4·(c/4)/1e9:
// equal, so the next chunk keeps the baseline order. With X ina, dim2
// is charged (c/4)/1e9, two thirds of that: the gap exceeds the
// threshold (an RS of c/16 on dim2, 3/4·c/16/1e9) and the next chunk
// runs dim2 first, where ina is not the middle and runs
// halving-doubling on the whole chunk.
func TestINAThemisSeesItsLoad(t *testing.T) {
	const c = 4e6 // per chunk; 2 chunks
	for _, k := range []themis.DimKind{themis.Switch, themis.INA} {
		topo := themis.Topology{{Kind: themis.Switch, Size: 4, BW: 4e9}, {Kind: k, Size: 4, BW: 1e9}}
		for _, rsOnly := range []bool{false, true} {
			_, log, err := themis.Schedule(topo, themis.AllReduce, 2*c, themis.Config{Scheduler: themis.Themis, Chunks: 2, LoadRSOnly: rsOnly})
			if err != nil {
				t.Fatal(err)
			}
			half := 1.0
			if rsOnly {
				half = 0.5
			}
			first := []float64{half * 2 * 0.75 * c / 4e9, half * 2 * 0.75 * c / 4 / 1e9}
			if k == themis.INA {
				first[1] = half * c / 4 / 1e9
			}
			if !near(log[0].Added[0], first[0]) || !near(log[0].Added[1], first[1]) {
				t.Errorf("%s rsOnly=%v: chunk 1 added %v, want %v", k, rsOnly, log[0].Added, first)
			}
			if th := 0.75 * c / 16 / 1e9; k == themis.INA && !near(log[1].Threshold, th) {
				t.Errorf("%s: chunk 2 threshold %v, want an RS of c/16 on dim2 %v", k, log[1].Threshold, th)
			}
			// Switch: gap 0. ina: gap 0.375c/1e9 (RS-only 0.0625c/1e9),
			// over the threshold 0.046875c/1e9 either way.
			wantBase := k == themis.Switch
			if log[1].Baseline != wantBase {
				t.Errorf("%s rsOnly=%v: chunk 2 baseline=%v (gap %v, threshold %v), want %v", k, rsOnly, log[1].Baseline, log[1].Gap, log[1].Threshold, wantBase)
			}
			if k == themis.INA && !rsOnly {
				// Order (2, 1): RS of c on dim2 (HD, 3/4·c), the middle on
				// dim1 (RS c/4, AG c/16: 3/16·c each), AG c/4 on dim2.
				want := []float64{2 * 3.0 / 16 * c / 4e9, 2 * 0.75 * c / 1e9}
				if log[1].Order[0] != 1 || !near(log[1].Added[0], want[0]) || !near(log[1].Added[1], want[1]) {
					t.Errorf("ina: chunk 2 order %v added %v, want (2, 1) and %v", log[1].Order, log[1].Added, want)
				}
			}
		}
	}
}

func TestINAScheduleChecks(t *testing.T) {
	topo := themis.Topology{{Kind: themis.Switch, Size: 4, BW: 1e9}, {Kind: themis.INA, Size: 4, BW: 1e9}}
	scheds, _, err := themis.Schedule(topo, themis.AllReduce, 1e6, themis.Config{Scheduler: themis.Baseline, Chunks: 2})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := themis.ServiceOrder(topo, scheds, themis.SCF, 1); err != nil {
		t.Fatalf("service order with ina: %v", err)
	}
	// An AR on a plain switch is refused in one line.
	bad := themis.Topology{topo[0], {Kind: themis.Switch, Size: 4, BW: 1e9}}
	_, err = themis.ServiceOrder(bad, scheds, themis.FIFO, 1)
	if err == nil || !strings.Contains(err.Error(), "C1.2 is an AR on dim2, a switch dimension: only ina aggregates") {
		t.Errorf("AR on a switch: %v", err)
	}
	// Orders are consistent across ranks with the AR stage.
	order, _ := themis.ServiceOrder(topo, scheds, themis.FIFO, 1)
	orders := make([][][]themis.OpRef, topo.NPUs())
	for r := range orders {
		orders[r] = order
	}
	if err := themis.CheckOrders(topo, scheds, orders); err != nil {
		t.Errorf("check orders: %v", err)
	}
}
