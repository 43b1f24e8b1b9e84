package themis_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/inaemu/inaemu/emu/themis"
)

func TestNext(t *testing.T) {
	if got := themis.Next(themis.FIFO, nil); got != -1 {
		t.Errorf("Next on nothing = %d, want -1", got)
	}
	ready := []themis.ReadyChunk{
		{Chunk: 3, Stage: 1, Bytes: 64, Seq: 4},
		{Chunk: 1, Stage: 0, Bytes: 16, Seq: 7},
		{Chunk: 2, Stage: 3, Bytes: 4, Last: true, Seq: 2},
		{Chunk: 0, Stage: 2, Bytes: 16, Seq: 5},
	}
	// FIFO: the earliest arrival (Seq 2), whatever its size.
	if got := themis.Next(themis.FIFO, ready); got != 2 {
		t.Errorf("FIFO picks %d, want 2", got)
	}
	// SCF: the smallest stage that is not its chunk's last: 16 bytes
	// twice, the earlier (Seq 5) first; the 4-byte last stage waits.
	if got := themis.Next(themis.SCF, ready); got != 3 {
		t.Errorf("SCF picks %d, want 3", got)
	}
	if got := themis.Next(themis.SCF, ready[2:3]); got != 0 {
		t.Errorf("SCF with only a last stage picks %d, want 0", got)
	}
	// Equal arrival: the lower chunk.
	tie := []themis.ReadyChunk{{Chunk: 5, Seq: 1}, {Chunk: 4, Seq: 1}}
	if got := themis.Next(themis.FIFO, tie); got != 1 {
		t.Errorf("FIFO tie picks %d, want 1 (chunk 4)", got)
	}
	// Ready reports an AG by what it gathers.
	s := themis.ChunkSchedule{Chunk: 0, Stages: []themis.Stage{{Op: themis.RS, InBytes: 8, OutBytes: 2}, {Op: themis.AG, InBytes: 2, OutBytes: 8}}}
	if r := themis.Ready(s, 1, 9); r.Bytes != 8 || !r.Last || r.Seq != 9 {
		t.Errorf("Ready = %+v", r)
	}
}

func op(c, s int) themis.OpRef { return themis.OpRef{Chunk: c - 1, Stage: s - 1} } // the paper's Cc.s

// Fig. 5's Themis schedule replayed with FIFO, one chunk per dimension,
// by hand (units: dim1 takes 1 for a chunk-1/3/4 RS or last AG, 0.25 for
// chunk 2's; dim2 takes 0.5 for chunks 1/3/4, 2 for chunk 2's):
//
//	t=0   dim1 starts C1.1 (ready: C1.1 C3.1 C4.1); dim2 starts C2.1
//	t=1   C1.1 done, C1.2 waits on dim2; dim1 starts C3.1
//	t=2   C2.1 and C3.1 done (chunk 2 first): C2.2 to dim1, C3.2 to dim2;
//	      dim1 starts C4.1 (arrived at 0), dim2 C1.2 (arrived at 1)
//	t=2.5 C1.3 to dim2; dim2 starts C3.2
//	t=3   C3.3 and C4.2 to dim2; dim1 starts C2.2, dim2 C1.3
//	t=3.25 C2.3 to dim1, which starts it
//	t=3.5 C1.4 to dim1, C2.4 to dim2; dim1 starts C1.4, dim2 C3.3
//	t=4   C3.4 to dim1; dim2 starts C4.2
//	t=4.5 C4.3 to dim2; dim1 starts C3.4, dim2 C2.4 (arrived at 3.5)
//	t=5.5 dim1 starts C4.4 only after C4.3 (dim2 6.5-7), 7-8
func TestServiceOrderFig5FIFO(t *testing.T) {
	sch, _, err := themis.Schedule(fig5(), themis.AllReduce, 256*mb, themis.Config{Scheduler: themis.Themis, Chunks: 4})
	if err != nil {
		t.Fatal(err)
	}
	got, err := themis.ServiceOrder(fig5(), sch, themis.FIFO, 1)
	if err != nil {
		t.Fatal(err)
	}
	want := [][]themis.OpRef{
		{op(1, 1), op(3, 1), op(4, 1), op(2, 2), op(2, 3), op(1, 4), op(3, 4), op(4, 4)},
		{op(2, 1), op(1, 2), op(3, 2), op(1, 3), op(3, 3), op(4, 2), op(2, 4), op(4, 3)},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("service order\n got %v\nwant %v", got, want)
	}
	// Every rank serving that order completes.
	n := fig5().NPUs()
	orders := make([][][]themis.OpRef, n)
	for r := range orders {
		orders[r] = got
	}
	if err := themis.CheckOrders(fig5(), sch, orders); err != nil {
		t.Errorf("the service order on every rank: %v", err)
	}
	// Turns enforce it: C3.1 may not start on dim1 before C1.1.
	turns := themis.NewTurns(got)
	if err := turns.Start(0, op(3, 1)); err == nil || !strings.Contains(err.Error(), "C1.1 is") {
		t.Errorf("Start out of turn = %v", err)
	}
	for _, o := range got[0] {
		if err := turns.Start(0, o); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := turns.Next(0); ok {
		t.Error("dim1 has a turn after its whole order")
	}
}

// Service orders of random schedules run to the end on every rank, with
// both policies and 1 or 2 chunks per dimension.
func TestServiceOrdersComplete(t *testing.T) {
	topo := themis.Topology{{Kind: themis.Ring, Size: 2, BW: 3e9}, {Kind: themis.FC, Size: 3, BW: 2e9}, {Kind: themis.Switch, Size: 2, BW: 1e9}}
	for _, coll := range []themis.Collective{themis.AllReduce, themis.ReduceScatter, themis.AllGather} {
		sch, _, err := themis.Schedule(topo, coll, 1e8, themis.Config{Scheduler: themis.Themis, Chunks: 16})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []themis.Policy{themis.FIFO, themis.SCF} {
			for active := 1; active <= 2; active++ {
				order, err := themis.ServiceOrder(topo, sch, p, active)
				if err != nil {
					t.Fatal(err)
				}
				orders := make([][][]themis.OpRef, topo.NPUs())
				for r := range orders {
					orders[r] = order
				}
				if err := themis.CheckOrders(topo, sch, orders); err != nil {
					t.Errorf("%s %s active %d: %v", coll, p, active, err)
				}
			}
		}
	}
}

// hazardFailures builds the paper's §4.6.2 hazard on a 2×2×2 network:
// C1.1 runs on dim1 and C2.1 on dim3, and both chunks go to dim2 next.
// Ranks whose dim2 coordinate is 0 serve C1.2 first, those where it is
// 1 serve C2.2 first. Rank 0 (coordinates 0,0,0) and its dim2 peer rank
// 2 (0,1,0) then wait on each other; CheckOrders must name that cycle.
func hazardFailures(m themis.Mutations) []string {
	topo := themis.Topology{{Kind: themis.Ring, Size: 2, BW: 1}, {Kind: themis.Ring, Size: 2, BW: 1}, {Kind: themis.Ring, Size: 2, BW: 1}}
	rs := func(c int, dims ...int) themis.ChunkSchedule {
		s := themis.ChunkSchedule{Chunk: c}
		for _, d := range dims {
			s.Stages = append(s.Stages, themis.Stage{Dim: d, Op: themis.RS})
		}
		return s
	}
	sch := []themis.ChunkSchedule{rs(0, 0, 1, 2), rs(1, 2, 1, 0)}
	orders := make([][][]themis.OpRef, 8)
	for r := range orders {
		dim2 := []themis.OpRef{op(1, 2), op(2, 2)}
		if r/2%2 == 1 {
			dim2 = []themis.OpRef{op(2, 2), op(1, 2)}
		}
		orders[r] = [][]themis.OpRef{{op(1, 1), op(2, 3)}, dim2, {op(2, 1), op(1, 3)}}
	}
	err := themis.CheckOrdersMutated(topo, sch, orders, m)
	cyc, ok := err.(*themis.WaitCycle)
	if !ok {
		return []string{fmt.Sprintf("CheckOrders = %v, want a wait cycle", err)}
	}
	want := []themis.Wait{
		{Rank: 0, Dim: 1, Op: op(1, 2), OnRank: 2, OnDim: 1, OnOp: op(2, 2)},
		{Rank: 2, Dim: 1, Op: op(2, 2), OnRank: 0, OnDim: 1, OnOp: op(1, 2)},
	}
	var bad []string
	if !reflect.DeepEqual(cyc.Waits, want) {
		bad = append(bad, fmt.Sprintf("cycle %+v, want %+v", cyc.Waits, want))
	}
	msg := err.Error()
	for _, s := range []string{"rank 0 dim2 waits to serve C1.2", "rank 2 dim2, which serves C2.2 first", "rank 2 dim2 waits to serve C2.2"} {
		if !strings.Contains(msg, s) || strings.Contains(msg, "\n") {
			bad = append(bad, fmt.Sprintf("message %q lacks %q", msg, s))
		}
	}
	// The same orders with every rank agreeing complete.
	for r := range orders {
		orders[r] = orders[0]
	}
	if err := themis.CheckOrdersMutated(topo, sch, orders, m); err != nil {
		bad = append(bad, fmt.Sprintf("consistent orders: %v", err))
	}
	return bad
}

func TestConsistencyHazard(t *testing.T) {
	for _, f := range hazardFailures(themis.Mutations{}) {
		t.Error(f)
	}
}

// A wait that goes through a chunk's own previous stage: dim1 serves
// C2.2 before C1.1 on every rank, while C2.1 (dim2) waits behind C1.2,
// which needs C1.1: the cycle crosses dimensions.
func TestWaitCycleAcrossDimensions(t *testing.T) {
	topo := themis.Topology{{Kind: themis.Ring, Size: 2, BW: 1}, {Kind: themis.Ring, Size: 2, BW: 1}}
	sch := []themis.ChunkSchedule{
		{Chunk: 0, Stages: []themis.Stage{{Dim: 0, Op: themis.RS}, {Dim: 1, Op: themis.RS}}},
		{Chunk: 1, Stages: []themis.Stage{{Dim: 1, Op: themis.RS}, {Dim: 0, Op: themis.RS}}},
	}
	orders := make([][][]themis.OpRef, 4)
	for r := range orders {
		orders[r] = [][]themis.OpRef{{op(2, 2), op(1, 1)}, {op(1, 2), op(2, 1)}}
	}
	err := themis.CheckOrders(topo, sch, orders)
	cyc, ok := err.(*themis.WaitCycle)
	if !ok {
		t.Fatalf("CheckOrders = %v, want a wait cycle", err)
	}
	want := []themis.Wait{
		{Rank: 0, Dim: 0, Op: op(2, 2), OnRank: 0, OnDim: 1, OnOp: op(1, 2), Own: true},
		{Rank: 0, Dim: 1, Op: op(1, 2), OnRank: 0, OnDim: 0, OnOp: op(2, 2), Own: true},
	}
	if !reflect.DeepEqual(cyc.Waits, want) {
		t.Errorf("cycle %+v, want %+v", cyc.Waits, want)
	}
	if !strings.Contains(err.Error(), "for its own C2.1 on rank 0 dim2") {
		t.Errorf("message %q", err)
	}
}

func TestCheckOrdersRefusesMalformed(t *testing.T) {
	topo := themis.Topology{{Kind: themis.Ring, Size: 2, BW: 1}}
	sch := []themis.ChunkSchedule{{Chunk: 0, Stages: []themis.Stage{{Dim: 0, Op: themis.RS}}}, {Chunk: 1, Stages: []themis.Stage{{Dim: 0, Op: themis.RS}}}}
	ok := []themis.OpRef{op(1, 1), op(2, 1)}
	for _, c := range []struct {
		orders [][][]themis.OpRef
		want   string
	}{
		{[][][]themis.OpRef{{ok}}, "orders for 1 ranks, want 2"},
		{[][][]themis.OpRef{{ok}, {}}, "rank 1: orders for 0 dimensions"},
		{[][][]themis.OpRef{{ok}, {{op(1, 1)}}}, "rank 1 dim1: 1 stages in its order, want 2"},
		{[][][]themis.OpRef{{ok}, {{op(1, 1), op(1, 1)}}}, "C1.1 twice"},
		{[][][]themis.OpRef{{ok}, {{op(1, 1), op(3, 1)}}}, "C3.1 is not a stage"},
	} {
		err := themis.CheckOrders(topo, sch, c.orders)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("CheckOrders = %v, want %q", err, c.want)
		}
	}
	if _, err := themis.ServiceOrder(topo, sch, "lifo", 1); err == nil {
		t.Error("ServiceOrder accepted policy lifo")
	}
	if _, err := themis.ServiceOrder(topo, sch, themis.FIFO, 0); err == nil {
		t.Error("ServiceOrder accepted 0 active chunks")
	}
	if _, err := themis.ServiceOrder(topo, []themis.ChunkSchedule{{Chunk: 0, Stages: []themis.Stage{{Dim: 3}}}}, themis.FIFO, 1); err == nil {
		t.Error("ServiceOrder accepted a stage on dim4 of a 1-D topology")
	}
}
