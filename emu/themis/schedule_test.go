package themis_test

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/themis"
)

// The paper's Fig. 5 and Fig. 7 (§3.3, §4.2): a 256 MB all-reduce on a
// 4×4 network with BW(dim1) = 2·BW(dim2), cut into 4 chunks of 64 MB,
// A_K neglected. The paper's unit: "the 64MB RS (or 16MB AG) takes 1
// unit of time when running on dim1". Both send 48 MB, so with MB = 10^6
// and BW(dim1) = 48 MB/s one unit is one second; BW(dim2) = 24 MB/s.
const mb = 1e6

func fig5() themis.Topology {
	return themis.Topology{
		{Kind: themis.Switch, Size: 4, BW: 48 * mb},
		{Kind: themis.Switch, Size: 4, BW: 24 * mb},
	}
}

// fig5Failures schedules Fig. 5 with Themis and the baseline and lists
// where the result departs from the paper; empty when it matches.
func fig5Failures(m themis.Mutations) []string {
	var bad []string
	fail := func(f string, a ...any) { bad = append(bad, fmt.Sprintf(f, a...)) }

	// Fig. 5.a, the baseline: every chunk RS dim1, RS dim2, AG dim2, AG
	// dim1, taking 1, 0.5 ("0.25 Data / 0.5 BW"), 0.5 and 1 units.
	base, blog, err := themis.Schedule(fig5(), themis.AllReduce, 256*mb, themis.Config{Scheduler: themis.Baseline, Chunks: 4, Mutations: m})
	if err != nil {
		return []string{err.Error()}
	}
	type st struct {
		dim int
		op  themis.Op
		sec float64
	}
	baseStages := []st{{0, themis.RS, 1}, {1, themis.RS, 0.5}, {1, themis.AG, 0.5}, {0, themis.AG, 1}}
	for _, c := range base {
		if len(c.Stages) != 4 {
			fail("baseline chunk %d: %d stages", c.Chunk, len(c.Stages))
			continue
		}
		for j, w := range baseStages {
			g := c.Stages[j]
			if g.Dim != w.dim || g.Op != w.op || !near(g.Time.Seconds(), w.sec) {
				fail("baseline chunk %d stage %d = dim%d %s %v, want dim%d %s %vs", c.Chunk, j, g.Dim+1, g.Op, g.Time, w.dim+1, w.op, w.sec)
			}
		}
	}
	// Fig. 7.a: the baseline leaves the gap: 2 units on dim1 and 1 on
	// dim2 per chunk, (8, 4) after four.
	if got := blog[3].After; !near(got[0], 8) || !near(got[1], 4) {
		fail("baseline loads after 4 chunks = %v, want (8, 4)", got)
	}

	// Fig. 7.b-e, Themis. Per chunk: a chunk in order (1,2) charges
	// dim1 1 + 1 and dim2 0.5 + 0.5 units; in order (2,1) its RS of 64 MB
	// on dim2 sends 48 MB at half bandwidth (2 units), its RS of 16 MB on
	// dim1 sends 12 MB (0.25), and the reversed AG the same again. The
	// threshold is an RS of chunkSize/16 = 4 MB on the least-loaded
	// dimension: 3 MB sent, 0.0625 units on dim1, 0.125 on dim2.
	//   b) loads (0,0): "all dim loads are zero, thus, the first chunk
	//      schedule is similar to the baseline": (1,2) -> (2,1)
	//   c) "dim2 has a lower load, hence the chunk scheduling starts from
	//      dim2": (2,1) -> (2.5,5)
	//   d,e) "Chunk schedule starts from dim1 to fill the gap with the
	//      overloaded dim2": (1,2) -> (4.5,6), then (6.5,7)
	want := []struct {
		before, after []float64
		thr           float64
		baseline      bool
		order         []int
	}{
		{[]float64{0, 0}, []float64{2, 1}, 0.0625, true, []int{0, 1}},
		{[]float64{2, 1}, []float64{2.5, 5}, 0.125, false, []int{1, 0}},
		{[]float64{2.5, 5}, []float64{4.5, 6}, 0.0625, false, []int{0, 1}},
		{[]float64{4.5, 6}, []float64{6.5, 7}, 0.0625, false, []int{0, 1}},
	}
	sch, log, err := themis.Schedule(fig5(), themis.AllReduce, 256*mb, themis.Config{Scheduler: themis.Themis, Chunks: 4, Mutations: m})
	if err != nil {
		return []string{err.Error()}
	}
	for i, w := range want {
		d := log[i]
		if !near(d.Before[0], w.before[0]) || !near(d.Before[1], w.before[1]) || !near(d.After[0], w.after[0]) || !near(d.After[1], w.after[1]) {
			fail("Themis chunk %d: loads %v -> %v, want %v -> %v", i+1, d.Before, d.After, w.before, w.after)
		}
		if !near(d.Threshold, w.thr) || d.Baseline != w.baseline || !reflect.DeepEqual(d.Order, w.order) {
			fail("Themis chunk %d: threshold %v baseline %v order %v, want %v %v %v", i+1, d.Threshold, d.Baseline, d.Order, w.thr, w.baseline, w.order)
		}
		// The chunk's stages: RS in the order, AG in its reverse
		// (Algorithm 1 line 8).
		o := w.order
		wantDims := []int{o[0], o[1], o[1], o[0]}
		for j, s := range sch[i].Stages {
			if s.Dim != wantDims[j] {
				fail("Themis chunk %d stage %d on dim%d, want dim%d", i+1, j, s.Dim+1, wantDims[j]+1)
			}
		}
	}
	// The bandwidth bound falls from 8 units (dim1) to 7 (dim2).
	return bad
}

func TestFig5Fig7(t *testing.T) {
	for _, f := range fig5Failures(themis.Mutations{}) {
		t.Error(f)
	}
}

// ASTRA-sim charges an all-reduce chunk's RS half only: every load
// halves, the orders stay (spec of this package's docs: docs/themis.md).
func TestFig7RSOnlyCharge(t *testing.T) {
	_, log, err := themis.Schedule(fig5(), themis.AllReduce, 256*mb, themis.Config{Scheduler: themis.Themis, Chunks: 4, LoadRSOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	after := [][]float64{{1, 0.5}, {1.25, 2.5}, {2.25, 3}, {3.25, 3.5}}
	orders := [][]int{{0, 1}, {1, 0}, {0, 1}, {0, 1}}
	for i, d := range log {
		if !near(d.After[0], after[i][0]) || !near(d.After[1], after[i][1]) || !reflect.DeepEqual(d.Order, orders[i]) {
			t.Errorf("chunk %d: order %v loads %v, want %v %v", i+1, d.Order, d.After, orders[i], after[i])
		}
	}
}

// akFailures: Fig. 5's network with a slow dim1 (a ring of 4, 1 s per
// step: an all-reduce takes 2·3 steps, A_1 = 6 s; dim2 Direct with no
// latency, A_2 = 0). Charging A_K (Algorithm 1 line 2) starts the
// tracker at (6, 0), so Themis starts the first chunk on dim2:
//
//	chunk 1: gap 6 ≥ 0.125 -> (2,1), adds (0.5, 4) -> (6.5, 4)
//	chunk 2: gap 2.5 ≥ 0.125 -> (2,1) -> (7, 8)
//	chunk 3: gap 1 ≥ 0.0625 (dim1 least) -> (1,2), adds (2, 1) -> (9, 9)
//	chunk 4: gap 0 < 0.0625 -> baseline (1,2) -> (11, 10)
func akFailures(m themis.Mutations) []string {
	topo := themis.Topology{
		{Kind: themis.Ring, Size: 4, BW: 48 * mb, Latency: time.Second},
		{Kind: themis.FC, Size: 4, BW: 24 * mb},
	}
	_, log, err := themis.Schedule(topo, themis.AllReduce, 256*mb, themis.Config{Scheduler: themis.Themis, Chunks: 4, ChargeAK: true, Mutations: m})
	if err != nil {
		return []string{err.Error()}
	}
	var bad []string
	before := [][]float64{{6, 0}, {6.5, 4}, {7, 8}, {9, 9}}
	after := [][]float64{{6.5, 4}, {7, 8}, {9, 9}, {11, 10}}
	orders := [][]int{{1, 0}, {1, 0}, {0, 1}, {0, 1}}
	for i, d := range log {
		if !near(d.Before[0], before[i][0]) || !near(d.Before[1], before[i][1]) || !near(d.After[0], after[i][0]) || !near(d.After[1], after[i][1]) || !reflect.DeepEqual(d.Order, orders[i]) {
			bad = append(bad, fmt.Sprintf("chunk %d: %v -> order %v -> %v, want %v -> %v -> %v", i+1, d.Before, d.Order, d.After, before[i], orders[i], after[i]))
		}
	}
	if !log[3].Baseline || log[2].Baseline {
		bad = append(bad, "chunk 4 should fall back to the baseline order, chunk 3 not")
	}
	return bad
}

func TestChargeAK(t *testing.T) {
	for _, f := range akFailures(themis.Mutations{}) {
		t.Error(f)
	}
}

// propertyFailures checks, on seeded random topologies, what holds for
// every schedule whatever the scheduler: the volume each chunk sends is
// fixed (§3.1: S(N-1)/N in each half), the reversed AG gives every
// dimension back what its RS sent it, each chunk visits every dimension
// once per half, the log's loads are A_K plus the stages' bytes/BW, and
// the scheduler is deterministic.
func propertyFailures(m themis.Mutations, seeds int) []string {
	var bad []string
	kinds := []themis.DimKind{themis.Ring, themis.FC, themis.Switch}
	for seed := 1; seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 37))
		topo := make(themis.Topology, 1+rng.IntN(4))
		for k := range topo {
			kind := kinds[rng.IntN(3)]
			size := 2 + rng.IntN(7)
			if kind == themis.Switch {
				size = 1 << (1 + rng.IntN(4))
			}
			topo[k] = themis.Dim{Kind: kind, Size: size, BW: float64(1+rng.IntN(40)) * 25e9, Latency: time.Duration(rng.IntN(2000)) * time.Nanosecond}
		}
		N := float64(topo.NPUs())
		S := float64(1+rng.IntN(1000)) * 1e6
		cfg := themis.Config{Scheduler: []themis.Scheduler{themis.Baseline, themis.Themis}[rng.IntN(2)], Chunks: 1 + rng.IntN(64), ChargeAK: rng.IntN(2) == 0, Mutations: m}
		sch, log, err := themis.Schedule(topo, themis.AllReduce, S, cfg)
		if err != nil {
			bad = append(bad, fmt.Sprintf("seed %d: %v", seed, err))
			continue
		}
		loads := make([]float64, len(topo))
		for k, d := range topo {
			if cfg.ChargeAK {
				loads[k] = themis.AK(d, themis.AllReduce)
			}
		}
		for _, c := range sch {
			var rs, ag float64
			rsDim := make([]float64, len(topo))
			agDim := make([]float64, len(topo))
			visits := make([]int, len(topo))
			for _, s := range c.Stages {
				loads[s.Dim] += s.SentBytes / topo[s.Dim].BW
				visits[s.Dim]++
				if s.Op == themis.RS {
					rs += s.SentBytes
					rsDim[s.Dim] += s.SentBytes
				} else {
					ag += s.SentBytes
					agDim[s.Dim] += s.SentBytes
				}
			}
			if !near(rs, c.Bytes*(N-1)/N) || !near(ag, c.Bytes*(N-1)/N) {
				bad = append(bad, fmt.Sprintf("seed %d chunk %d: RS sent %v, AG %v, want %v each", seed, c.Chunk, rs, ag, c.Bytes*(N-1)/N))
			}
			for k := range topo {
				if visits[k] != 2 || !near(rsDim[k], agDim[k]) {
					bad = append(bad, fmt.Sprintf("seed %d chunk %d dim%d: %d visits, RS sent %v, AG %v: the AG is not the RS reversed", seed, c.Chunk, k+1, visits[k], rsDim[k], agDim[k]))
				}
			}
		}
		final := log[len(log)-1].After
		for k := range topo {
			if !near(final[k], loads[k]) {
				bad = append(bad, fmt.Sprintf("seed %d dim%d: the log's final load %v, the stages' %v", seed, k+1, final[k], loads[k]))
			}
		}
		again, log2, _ := themis.Schedule(topo, themis.AllReduce, S, cfg)
		if !reflect.DeepEqual(again, sch) || !reflect.DeepEqual(log2, log) {
			bad = append(bad, fmt.Sprintf("seed %d: two runs differ", seed))
		}
	}
	return bad
}

func TestScheduleProperties(t *testing.T) {
	for _, f := range propertyFailures(themis.Mutations{}, 200) {
		t.Error(f)
	}
}

// Themis on Table 2's 3D-SW_SW_SW_homo (16×8×8, 800 Gb/s per dimension)
// moves load off dim1, the baseline's bottleneck (§6.1): the baseline
// charges dim1 2·15/16·S/BW, Themis less, and its largest load is below
// the baseline's.
func TestThemisUnloadsTheBottleneck(t *testing.T) {
	bw := 800e9 / 8
	topo := themis.Topology{{Kind: themis.Switch, Size: 16, BW: bw}, {Kind: themis.Switch, Size: 8, BW: bw}, {Kind: themis.Switch, Size: 8, BW: bw}}
	const S = 1 << 30
	_, blog, err := themis.Schedule(topo, themis.AllReduce, S, themis.Config{Scheduler: themis.Baseline, Chunks: 64})
	if err != nil {
		t.Fatal(err)
	}
	_, tlog, _ := themis.Schedule(topo, themis.AllReduce, S, themis.Config{Scheduler: themis.Themis, Chunks: 64})
	b, th := blog[63].After, tlog[63].After
	if !near(b[0], 2*15.0/16*S/bw) {
		t.Errorf("baseline dim1 load %v, want %v", b[0], 2*15.0/16*S/bw)
	}
	maxOf := func(v []float64) float64 { return max(v[0], v[1], v[2]) }
	if !(maxOf(th) < 0.5*maxOf(b)) {
		t.Errorf("Themis's largest load %v, the baseline's %v: want it at least halved", th, b)
	}
	if s := tlog.String(); len(s) == 0 {
		t.Error("empty log table")
	}
}

// The mutations' power: each re-introduced bug makes a check above fail.
func TestMutationsAreCaught(t *testing.T) {
	if len(akFailures(themis.Mutations{ForgetAK: true})) == 0 {
		t.Error("a tracker that forgets A_K passed the A_K test")
	}
	if len(fig5Failures(themis.Mutations{AGNotReversed: true})) == 0 {
		t.Error("an AG in the RS order passed the Fig. 5/7 test")
	}
	if len(propertyFailures(themis.Mutations{AGNotReversed: true}, 20)) == 0 {
		t.Error("an AG in the RS order passed the schedule properties")
	}
	if len(hazardFailures(themis.Mutations{IgnorePeers: true})) == 0 {
		t.Error("a checker that ignores peers passed the §4.6.2 hazard test")
	}
}
