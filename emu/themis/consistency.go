package themis

import (
	"fmt"
	"sort"
	"strings"
)

// Schedule consistency (the paper's §4.6). Every rank computes the same
// schedules (Schedule is deterministic), but runtime variation can make
// chunks ready on a dimension in different orders on different ranks; a
// stage on a dimension needs every peer of the dimension, so two ranks
// serving two chunks in opposite orders wait on each other for ever.
// Themis therefore replays the schedules on its latency model to fix,
// per dimension, the order chunks are served in, and every rank enforces
// it: "Even if some chunks are available sooner on the NPU, Themis does
// not execute them if it is not their turn."

// OpRef names a chunk's stage: ChunkSchedule.Stages[Stage] of chunk
// Chunk. Written C<chunk+1>.<stage+1>, the paper's notation (§4.6.2).
type OpRef struct{ Chunk, Stage int }

func (o OpRef) String() string { return fmt.Sprintf("C%d.%d", o.Chunk+1, o.Stage+1) }

// ServiceOrder is the order in which each dimension serves the chunks'
// stages, order[dim] first to last, found by replaying the schedules on
// the load model alone: each stage takes its Time's seconds (bytes/BW
// plus steps × latency) at the dimension's full bandwidth, up to active
// stages share a dimension fairly, a dimension picks by policy among the
// stages ready on it, and simultaneous completions are handled in
// chunk order, then dimension order. Every rank computes the same order
// and serves each dimension in it (Turns).
func ServiceOrder(t Topology, scheds []ChunkSchedule, p Policy, active int) ([][]OpRef, error) {
	if err := checkSchedules(t, scheds); err != nil {
		return nil, err
	}
	if err := p.Validate(); err != nil {
		return nil, err
	}
	if active < 1 {
		return nil, fmt.Errorf("themis: %d active chunks per dimension: want at least 1", active)
	}
	type run struct {
		op        OpRef
		rem, work float64
	}
	D := len(t)
	order := make([][]OpRef, D)
	ready := make([][]ReadyChunk, D)
	running := make([][]run, D)
	seq := make([]int, D)
	enqueue := func(c, j int) {
		d := scheds[c].Stages[j].Dim
		ready[d] = append(ready[d], Ready(scheds[c], j, seq[d]))
		seq[d]++
	}
	for c := range scheds {
		enqueue(c, 0)
	}
	for {
		busy := false
		for d := range t {
			for len(running[d]) < active && len(ready[d]) > 0 {
				i := Next(p, ready[d])
				r := ready[d][i]
				ready[d] = append(ready[d][:i], ready[d][i+1:]...)
				st := scheds[r.Chunk].Stages[r.Stage]
				w := StageSeconds(t[d], st.Op, st.InBytes, true)
				op := OpRef{r.Chunk, r.Stage}
				order[d] = append(order[d], op)
				running[d] = append(running[d], run{op, w, w})
			}
			busy = busy || len(running[d]) > 0
		}
		if !busy {
			return order, nil
		}
		// The next completion: the smallest remaining work times the
		// number sharing its dimension.
		dt := -1.0
		for d := range running {
			for _, r := range running[d] {
				if x := r.rem * float64(len(running[d])); dt < 0 || x < dt {
					dt = x
				}
			}
		}
		var done []OpRef
		for d := range running {
			n := float64(len(running[d]))
			keep := running[d][:0]
			for _, r := range running[d] {
				r.rem -= dt / n
				if r.rem <= 1e-9*r.work {
					done = append(done, r.op)
				} else {
					keep = append(keep, r)
				}
			}
			running[d] = keep
		}
		sort.Slice(done, func(a, b int) bool {
			if done[a].Chunk != done[b].Chunk {
				return done[a].Chunk < done[b].Chunk
			}
			return scheds[done[a].Chunk].Stages[done[a].Stage].Dim < scheds[done[b].Chunk].Stages[done[b].Stage].Dim
		})
		for _, op := range done {
			if op.Stage+1 < len(scheds[op.Chunk].Stages) {
				enqueue(op.Chunk, op.Stage+1)
			}
		}
	}
}

// checkSchedules refuses schedules that do not fit the topology.
func checkSchedules(t Topology, scheds []ChunkSchedule) error {
	if err := t.Validate(); err != nil {
		return err
	}
	for c, s := range scheds {
		if s.Chunk != c {
			return fmt.Errorf("themis: schedule %d names chunk %d: want chunks in order from 0", c, s.Chunk)
		}
		if len(s.Stages) == 0 {
			return fmt.Errorf("themis: chunk %d has no stage", c)
		}
		for j, st := range s.Stages {
			if st.Dim < 0 || st.Dim >= len(t) {
				return fmt.Errorf("themis: %v is on dim%d of a %d-dimension topology", OpRef{c, j}, st.Dim+1, len(t))
			}
			if st.Op == AR && t[st.Dim].Kind != INA {
				return fmt.Errorf("themis: %v is an AR on dim%d, a %s dimension: only ina aggregates", OpRef{c, j}, st.Dim+1, t[st.Dim].Kind)
			}
		}
	}
	return nil
}

// Turns enforces a service order on one rank: a stage may start on a
// dimension only when it is the dimension's next in the order, however
// early it is ready. Executors keep one Turns per rank (the fluid
// executor one for all: its ranks are symmetric).
type Turns struct {
	order [][]OpRef
	next  []int
}

// NewTurns starts every dimension at the head of its order.
func NewTurns(order [][]OpRef) *Turns {
	return &Turns{order: order, next: make([]int, len(order))}
}

// Next is the stage whose turn it is on dim, false when dim has served
// its whole order.
func (t *Turns) Next(dim int) (OpRef, bool) {
	if dim < 0 || dim >= len(t.order) || t.next[dim] >= len(t.order[dim]) {
		return OpRef{}, false
	}
	return t.order[dim][t.next[dim]], true
}

// Start records that dim starts op, refusing it when it is not op's turn.
func (t *Turns) Start(dim int, op OpRef) error {
	want, ok := t.Next(dim)
	if !ok {
		return fmt.Errorf("themis: dim%d has served its whole order; %v is not in it", dim+1, op)
	}
	if want != op {
		return fmt.Errorf("themis: dim%d: %v is not its turn (%v is)", dim+1, op, want)
	}
	t.next[dim]++
	return nil
}

// Wait is one edge of a wait cycle: rank Rank's dimension Dim would
// serve Op next but waits for rank OnRank's dimension OnDim, which
// serves OnOp first. Own is true when the wait is on the rank's own
// previous stage of the chunk, false when on a peer of the dimension.
type Wait struct {
	Rank, Dim     int
	Op            OpRef
	OnRank, OnDim int
	OnOp          OpRef
	Own           bool
}

// WaitCycle is the error CheckOrders returns for orders that deadlock:
// the waits, each on the next, the last on the first.
type WaitCycle struct{ Waits []Wait }

func (w *WaitCycle) Error() string {
	parts := make([]string, len(w.Waits))
	for i, x := range w.Waits {
		why := "its peer"
		if x.Own {
			why = fmt.Sprintf("its own %v", OpRef{x.Op.Chunk, x.Op.Stage - 1})
		}
		parts[i] = fmt.Sprintf("rank %d dim%d waits to serve %v for %s on rank %d dim%d, which serves %v first",
			x.Rank, x.Dim+1, x.Op, why, x.OnRank, x.OnDim+1, x.OnOp)
	}
	return "themis: inconsistent schedule, wait cycle: " + strings.Join(parts, "; ")
}

// CheckOrders runs per-rank service orders, orders[rank][dim], to the
// end or to a deadlock, without a clock: a dimension of a rank serves
// its order one stage at a time, and a stage runs when it is the head
// of that dimension's order on every peer of the dimension (the ranks
// whose coordinates differ in that dimension only) and each has
// finished the chunk's previous stage. It returns nil when every stage
// runs, a *WaitCycle naming the chunks, ranks and dimensions that wait
// on each other when none can, and a one-line error for orders that do
// not list each rank's stages on each dimension exactly once.
func CheckOrders(t Topology, scheds []ChunkSchedule, orders [][][]OpRef) error {
	return checkOrders(t, scheds, orders, Mutations{})
}

func checkOrders(t Topology, scheds []ChunkSchedule, orders [][][]OpRef, m Mutations) error {
	if err := checkSchedules(t, scheds); err != nil {
		return err
	}
	N, D := t.NPUs(), len(t)
	if len(orders) != N {
		return fmt.Errorf("themis: orders for %d ranks, want %d", len(orders), N)
	}
	// want[d] counts the stages on dimension d; each rank's order for d
	// must list each of them once.
	want := make([]int, D)
	first := make([]int, len(scheds)) // index of chunk c's stage 0 in a flat numbering
	total := 0
	for c, s := range scheds {
		first[c] = total
		total += len(s.Stages)
		for _, st := range s.Stages {
			want[st.Dim]++
		}
	}
	seen := make([]int, total)
	for r := range orders {
		if len(orders[r]) != D {
			return fmt.Errorf("themis: rank %d: orders for %d dimensions, want %d", r, len(orders[r]), D)
		}
		for d, o := range orders[r] {
			if len(o) != want[d] {
				return fmt.Errorf("themis: rank %d dim%d: %d stages in its order, want %d", r, d+1, len(o), want[d])
			}
			for _, op := range o {
				if op.Chunk < 0 || op.Chunk >= len(scheds) || op.Stage < 0 || op.Stage >= len(scheds[op.Chunk].Stages) ||
					scheds[op.Chunk].Stages[op.Stage].Dim != d {
					return fmt.Errorf("themis: rank %d dim%d: %v is not a stage on dim%d", r, d+1, op, d+1)
				}
				i := first[op.Chunk] + op.Stage
				if seen[i] == r+1 {
					return fmt.Errorf("themis: rank %d dim%d: %v twice", r, d+1, op)
				}
				seen[i] = r + 1
			}
		}
	}

	stride := make([]int, D)
	s := 1
	for k, d := range t {
		stride[k] = s
		s *= d.Size
	}
	peers := func(r, d int) []int {
		base := r - (r/stride[d]%t[d].Size)*stride[d]
		g := make([]int, t[d].Size)
		for j := range g {
			g[j] = base + j*stride[d]
		}
		return g
	}
	head := make([][]int, N)   // head[r][d]: index of the next stage in orders[r][d]
	stages := make([][]int, N) // stages[r][c]: stages of chunk c rank r has finished
	for r := range head {
		head[r] = make([]int, D)
		stages[r] = make([]int, len(scheds))
	}
	headOf := func(r, d int) (OpRef, bool) {
		if head[r][d] >= len(orders[r][d]) {
			return OpRef{}, false
		}
		return orders[r][d][head[r][d]], true
	}
	runnable := func(r, d int, op OpRef) bool {
		if stages[r][op.Chunk] != op.Stage {
			return false
		}
		if m.IgnorePeers {
			return true
		}
		for _, q := range peers(r, d) {
			if h, ok := headOf(q, d); !ok || h != op || stages[q][op.Chunk] != op.Stage {
				return false
			}
		}
		return true
	}
	left := N * total // each rank runs every stage once
	for progress := true; progress && left > 0; {
		progress = false
		for r := 0; r < N; r++ {
			for d := 0; d < D; d++ {
				op, ok := headOf(r, d)
				if !ok || !runnable(r, d, op) {
					continue
				}
				group := []int{r}
				if !m.IgnorePeers {
					group = peers(r, d)
				}
				for _, q := range group {
					head[q][d]++
					stages[q][op.Chunk]++
					left--
				}
				progress = true
			}
		}
	}
	if left == 0 {
		return nil
	}
	// A deadlock: no head can run. Each waits on another head (its own
	// previous stage's dimension, or a peer whose head differs or has
	// not finished the chunk's previous stage); following those waits
	// from any blocked head must return to one already visited.
	waitOf := func(r, d int) Wait {
		op, _ := headOf(r, d)
		w := Wait{Rank: r, Dim: d, Op: op}
		if stages[r][op.Chunk] != op.Stage {
			w.Own, w.OnRank, w.OnDim = true, r, scheds[op.Chunk].Stages[op.Stage-1].Dim
		} else {
			w.OnRank, w.OnDim = -1, d
			for _, q := range peers(r, d) {
				if h, ok := headOf(q, d); ok && h != op {
					w.OnRank = q
					break
				}
			}
			if w.OnRank < 0 { // every peer's head is op: one has not finished the previous stage
				for _, q := range peers(r, d) {
					if stages[q][op.Chunk] != op.Stage {
						w.OnRank = q
						break
					}
				}
			}
		}
		w.OnOp, _ = headOf(w.OnRank, w.OnDim)
		return w
	}
	r0, d0 := -1, -1
	for r := 0; r < N && r0 < 0; r++ {
		for d := 0; d < D; d++ {
			if _, ok := headOf(r, d); ok {
				r0, d0 = r, d
				break
			}
		}
	}
	visited := map[[2]int]int{} // (rank, dim) -> index in path; lookups only
	var path []Wait
	for r, d := r0, d0; ; {
		if i, ok := visited[[2]int{r, d}]; ok {
			return &WaitCycle{Waits: path[i:]}
		}
		visited[[2]int{r, d}] = len(path)
		w := waitOf(r, d)
		if w.OnRank < 0 {
			return fmt.Errorf("themis: rank %d dim%d cannot serve %v and waits on no one (a checker bug)", r, d+1, w.Op)
		}
		path = append(path, w)
		r, d = w.OnRank, w.OnDim
	}
}
