package collective

import (
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/topo"
)

// The plan of a hier job (hier.go): which dimensions a dims topology has,
// each chunk's order of stages, and every transfer each rank makes in
// every step of every stage, worked out before the first frame so that
// sender and receiver agree on where each message lands.

// hierDim is one dimension of a dims topology as its links show it.
type hierDim struct {
	kind   string // ring, fc or switch
	alg    string // the 1-D algorithm its stages run: ring, direct or halving-doubling
	size   int    // hosts along it (P)
	stride int    // host index distance between neighbours along it
	links  int    // links a host has in it
	rate   float64
	// latency is its links' propagation delay.
	latency time.Duration
}

// Algorithms of a dimension (Themis Table 1: Ring on a ring, Direct on a
// full mesh, Halving-Doubling on a switch).
const (
	algRing   = "ring"
	algDirect = "direct"
	algHD     = "halving-doubling"
)

// hierDims reads the dimensions of a dims topology (topo.Dims) back from
// its links: dimension d's group of h0 is the hosts its dimension-d links
// reach (through the group's switch, or host to host), its size the
// group's; a host-host dimension whose hosts all link to each other is a
// full mesh (fc), unless it has 3 hosts or fewer, where a ring is a full
// mesh too and is read as a ring. defRate is the rate of links that set
// none.
func hierDims(t *topo.Topology, defRate float64, defLatency time.Duration) ([]hierDim, error) {
	if t == nil || t.Kind != "dims" {
		return nil, errors.New("--mode hier runs over a dims topology, e.g. --topology dims:4x4,kinds=ring/switch")
	}
	hosts := t.Hosts()
	nd := 0
	for _, l := range t.Links {
		nd = max(nd, l.Dim)
	}
	var out []hierDim
	stride := 1
	h0 := hosts[0]
	for d := 1; d <= nd; d++ {
		hd := hierDim{stride: stride, rate: defRate, latency: defLatency}
		group := map[string]bool{h0.Name: true}
		for q := []string{h0.Name}; len(q) > 0; q = q[1:] {
			n, _ := t.Node(q[0])
			for _, li := range n.Links {
				l := &t.Links[li]
				if l.Dim != d {
					continue
				}
				if n.Name == h0.Name {
					hd.links++
					if l.Rate > 0 {
						hd.rate = l.Rate
					}
					if l.Latency > 0 {
						hd.latency = l.Latency
					}
				}
				o := l.Other(n.Name)
				on, _ := t.Node(o)
				if on.Kind == topo.KindSwitch {
					hd.kind = "switch"
					for _, sl := range on.Links {
						group[t.Links[sl].Other(o)] = true
					}
					continue
				}
				if !group[o] {
					group[o] = true
					q = append(q, o)
				}
			}
		}
		hd.size = len(group)
		if hd.kind == "" {
			n, _ := t.Node(h0.Name)
			peers := map[string]bool{}
			for _, li := range n.Links {
				if t.Links[li].Dim == d {
					peers[t.Links[li].Other(h0.Name)] = true
				}
			}
			hd.kind = "ring"
			if hd.size > 3 && len(peers) == hd.size-1 {
				hd.kind = "fc"
			}
		}
		switch hd.kind {
		case "ring":
			hd.alg = algRing
		case "fc":
			hd.alg = algDirect
		default:
			hd.alg = algHD
			if hd.size > 1 && bits.OnesCount(uint(hd.size)) != 1 {
				return nil, fmt.Errorf("--mode hier: dimension %d is a switch of %d hosts, and halving-doubling, its algorithm, needs a power of two", d, hd.size)
			}
		}
		out = append(out, hd)
		stride *= hd.size
	}
	if stride != len(hosts) {
		return nil, fmt.Errorf("--mode hier: the dimensions' sizes multiply to %d, and the topology has %d hosts", stride, len(hosts))
	}
	return out, nil
}

// hierStage is one stage of a chunk's schedule: a reduce-scatter (or,
// with ag, an all-gather) among the peers of each rank along dim.
type hierStage struct {
	dim int // 0-based
	ag  bool
	ar  bool // an ina dimension's all-reduce: NetReduce on the group's switch (hier_ina.go)
}

func (s hierStage) String() string {
	if s.ar {
		return fmt.Sprintf("AR%d", s.dim+1)
	}
	if s.ag {
		return fmt.Sprintf("AG%d", s.dim+1)
	}
	return fmt.Sprintf("RS%d", s.dim+1)
}

// scheduleString is a chunk's stages, e.g. "RS1 RS2 AG2 AG1".
func scheduleString(st []hierStage) string {
	s := make([]string, len(st))
	for i, x := range st {
		s[i] = x.String()
	}
	return strings.Join(s, " ")
}

// baselineSchedule is today's hierarchical all-reduce (Themis §2.3, the
// paper's baseline): every chunk reduce-scatters on dimension 1, 2, ...,
// D, then all-gathers on D, ..., 1. Dimensions of one host have no stage.
func baselineSchedule(dims []hierDim, chunks int) [][]hierStage {
	var one []hierStage
	for d := range dims {
		if dims[d].size > 1 {
			one = append(one, hierStage{dim: d})
		}
	}
	for i := len(one) - 1; i >= 0; i-- {
		one = append(one, hierStage{dim: one[i].dim, ag: true})
	}
	out := make([][]hierStage, chunks)
	for c := range out {
		out[c] = slices.Clone(one)
	}
	return out
}

// checkSchedule refuses a chunk schedule the packet executor cannot run
// for collective coll: an all-reduce wants an RS stage on every
// dimension of more than one host, in any order, then the AG stages in
// the reverse order (what Algorithm 1 of the Themis paper makes for an
// all-reduce: AG_Sch = reverseOrder(RS_Sch)), since a rank's data after
// the RS stages is one contiguous block only when the gathers undo the
// scatters in turn; a reduce-scatter wants the RS stages alone, an
// all-gather the AG stages alone, one per such dimension in any order.
func checkSchedule(dims []hierDim, st []hierStage, coll themis.Collective) error {
	// An AR stage stands for the RS and AG pair it fuses, and only on an
	// ina dimension (emu/themis's fuseINA).
	if slices.ContainsFunc(st, func(s hierStage) bool { return s.ar }) {
		if coll != themis.AllReduce {
			return fmt.Errorf("schedule %q: an AR stage belongs to an all-reduce", scheduleString(st))
		}
		var ex []hierStage
		for _, s := range st {
			if !s.ar {
				ex = append(ex, s)
				continue
			}
			if s.dim < 0 || s.dim >= len(dims) || dims[s.dim].kind != kindINA {
				return fmt.Errorf("schedule %q: an AR stage runs on an ina dimension only", scheduleString(st))
			}
			ex = append(ex, hierStage{dim: s.dim}, hierStage{dim: s.dim, ag: true})
		}
		if err := checkSchedule(dims, ex, coll); err != nil {
			return fmt.Errorf("schedule %q: want an RS on each dimension of more than one host, the AR where the last meets its AG, then the AGs in reverse order", scheduleString(st))
		}
		return nil
	}
	var rs []int
	for d := range dims {
		if dims[d].size > 1 {
			rs = append(rs, d)
		}
	}
	k := len(rs)
	seen := map[int]bool{}
	one := func(s hierStage, ag bool) bool {
		ok := s.ag == ag && s.dim >= 0 && s.dim < len(dims) && dims[s.dim].size > 1 && !seen[s.dim]
		seen[s.dim] = true
		return ok
	}
	if coll != themis.AllReduce {
		ag := coll == themis.AllGather
		op := map[bool]string{false: "RS", true: "AG"}[ag]
		if len(st) != k {
			return fmt.Errorf("schedule %q: want %d stages for a %s, an %s on each dimension of more than one host", scheduleString(st), k, coll, op)
		}
		for i, s := range st {
			if !one(s, ag) {
				return fmt.Errorf("schedule %q: stage %d: want an %s on each dimension of more than one host, once", scheduleString(st), i+1, op)
			}
		}
		return nil
	}
	if len(st) != 2*k {
		return fmt.Errorf("schedule %q: want %d stages, an RS and an AG on each dimension of more than one host", scheduleString(st), 2*k)
	}
	for i, s := range st[:k] {
		if !one(s, false) {
			return fmt.Errorf("schedule %q: stage %d: want the RS stages first, one per dimension", scheduleString(st), i+1)
		}
		if a := st[2*k-1-i]; !a.ag || a.dim != s.dim {
			return fmt.Errorf("schedule %q: the AG stages must undo the RS stages in reverse order", scheduleString(st))
		}
	}
	return nil
}

// hierXfer is one transfer: a block of a chunk that rank from sends to
// rank to in one step of one stage, as WRITEs with immediate of at most
// msgB bytes each.
type hierXfer struct {
	from, to   int
	lo, hi     int // elements of the tensor
	dim        int
	conn       int   // the connection (hierConn) it goes over
	off        int64 // byte offset in the receiver's receive region
	rmsg0      int   // the receiver's index of its first message (its immediate)
	smsg0      int   // the sender's index of its first message (its WR ID)
	msgs       int
	chunk, stg int
}

// hierStep is what one rank does in one step of a stage: its sends, and
// the transfers it waits for (in its peers' coordinate order, own the
// place its own value takes in a Direct reduce-scatter's sum).
type hierStep struct {
	sends, recvs []int // transfer indices
	own          int   // Direct RS: where the rank's own value goes among recvs (-1: not that)
}

// hierStepKind is how a stage's received blocks meet the rank's data.
type hierStepKind int

const (
	stepAdd     hierStepKind = iota // ring or halving-doubling RS: data += the one block received
	stepOrdered                     // Direct RS: the block is the peers' values summed in coordinate order
	stepCopy                        // AG: the block received is the data
	stepAR                          // ina AR: the group's sum, from the switch (hier_ina.go)
)

// hierPlan is the whole job's transfers.
type hierPlan struct {
	n, chunks int
	elemSize  int
	msgB      int
	dims      []hierDim
	sched     [][]hierStage
	bounds    []int            // chunk c is elements bounds[c]:bounds[c+1]
	xfers     []hierXfer       // in plan order: chunk, stage, step, sender
	steps     [][][][]hierStep // rank, chunk, stage, step
	kinds     [][]hierStepKind // chunk, stage
	conns     []hierConnPlan
	connOf    map[[3]int]int // (lower rank, higher rank, dim) -> conn
	recvBytes []int64        // per rank: its receive region
	recvMsgs  []int          // per rank: messages it receives
	sendMsgs  []int          // per rank: messages it sends
	inbox     [][]int        // per rank: the transfers to it, by rmsg0
	// arReg is, per (rank, chunk, stage) of an AR stage, the elements
	// the rank holds there (its group's members hold the same).
	arReg map[[3]int][2]int
}

// hierConnPlan is an RC connection between two ranks along a dimension.
type hierConnPlan struct {
	a, b         int // ranks, a < b
	dim          int
	sendA, sendB int // messages each end sends on it
}

// coord is rank r's coordinate along dimension d.
func (p *hierPlan) coord(r, d int) int { return r / p.dims[d].stride % p.dims[d].size }

// members are the ranks of r's group along d, by coordinate.
func (p *hierPlan) members(r, d int) []int {
	dm := p.dims[d]
	base := r - p.coord(r, d)*dm.stride
	m := make([]int, dm.size)
	for k := range m {
		m[k] = base + k*dm.stride
	}
	return m
}

// split cuts elements [lo, hi) into p blocks: block k is
// [lo + n·k/p, lo + n·(k+1)/p).
func split(lo, hi, p int) []int {
	n := hi - lo
	b := make([]int, p+1)
	for k := range b {
		b[k] = lo + n*k/p
	}
	return b
}

// newHierPlan lays out every transfer of a job of n ranks over dims,
// its tensor of elems elements of elemSize bytes cut into chunks equal
// chunks (elements), each run by its schedule, a collective coll.
//
// A rank's shard of a chunk is where its RS stages leave it: the chunk
// cut into P blocks along the first RS stage's dimension (block k:
// [lo + n·k/P, lo + n·(k+1)/P), split's cut), the rank's block the one at
// its coordinate there, that block cut along the next RS stage's
// dimension likewise, and so on. A reduce-scatter ends with each rank's
// shard summed there; an all-gather starts from the shards an RS in the
// reverse of its AG order would leave (the AG stages undo that RS), so
// its last AG stage's dimension cuts the chunk first.
func newHierPlan(dims []hierDim, sched [][]hierStage, coll themis.Collective, elems int64, elemSize, msgB int) (*hierPlan, error) {
	n := 1
	for _, d := range dims {
		n *= d.size
	}
	chunks := len(sched)
	if elems < int64(chunks)*int64(n) {
		return nil, fmt.Errorf("--mode hier: %d elements for %d chunks of %d ranks: want at least one element per rank and chunk", elems, chunks, n)
	}
	for _, st := range sched {
		if err := checkSchedule(dims, st, coll); err != nil {
			return nil, err
		}
	}
	p := &hierPlan{n: n, chunks: chunks, elemSize: elemSize, msgB: msgB, dims: dims, sched: sched, connOf: map[[3]int]int{},
		recvBytes: make([]int64, n), recvMsgs: make([]int, n), sendMsgs: make([]int, n), inbox: make([][]int, n),
		arReg: map[[3]int][2]int{}}
	for c := 0; c <= chunks; c++ {
		p.bounds = append(p.bounds, int(elems*int64(c)/int64(chunks)))
	}
	p.steps = make([][][][]hierStep, n)
	for r := range p.steps {
		p.steps[r] = make([][][]hierStep, chunks)
	}
	p.kinds = make([][]hierStepKind, chunks)
	for c := range chunks {
		region := make([][2]int, n) // per rank: the elements it holds reduced so far
		for r := range region {
			region[r] = [2]int{p.bounds[c], p.bounds[c+1]}
		}
		var stack [][][2]int
		// An all-gather's chunk starts from its shards: the RS stages it
		// undoes run without a transfer, to leave each rank its region.
		if coll == themis.AllGather {
			for i := len(sched[c]) - 1; i >= 0; i-- {
				stack = append(stack, slices.Clone(region))
				p.scatter(region, sched[c][i].dim)
			}
		}
		for si, s := range sched[c] {
			if s.ar {
				// No transfer between the ranks: each sends its region to
				// the switch and gets the sum back; the region stays.
				p.kinds[c] = append(p.kinds[c], stepAR)
				for r := range n {
					p.steps[r][c] = append(p.steps[r][c], []hierStep{{own: -1}})
					p.arReg[[3]int{r, c, si}] = region[r]
				}
				continue
			}
			kind := stepAdd
			switch {
			case s.ag:
				kind = stepCopy
			case dims[s.dim].alg == algDirect:
				kind = stepOrdered
			}
			p.kinds[c] = append(p.kinds[c], kind)
			if !s.ag {
				stack = append(stack, slices.Clone(region))
			}
			var before [][2]int
			if s.ag {
				before = stack[len(stack)-1]
				stack = stack[:len(stack)-1]
			}
			done := map[int]bool{}
			for r := range n {
				m := p.members(r, s.dim)
				if done[m[0]] {
					continue
				}
				done[m[0]] = true
				reg := region[r]
				if s.ag {
					reg = before[r]
				}
				p.stage(c, si, s, m, split(reg[0], reg[1], len(m)))
				if s.ag {
					for _, x := range m {
						region[x] = before[x]
					}
				}
			}
			if !s.ag {
				p.scatter(region, s.dim)
			}
		}
	}
	// Each receiver's transfers, in plan order, take its receive region
	// and its immediates in turn; each sender's its WR IDs.
	for i := range p.xfers {
		x := &p.xfers[i]
		x.msgs = (x.hi - x.lo) * elemSize
		x.msgs = (x.msgs + msgB - 1) / msgB
		x.off = p.recvBytes[x.to]
		p.recvBytes[x.to] += int64((x.hi - x.lo) * elemSize)
		x.rmsg0, x.smsg0 = p.recvMsgs[x.to], p.sendMsgs[x.from]
		p.recvMsgs[x.to] += x.msgs
		p.sendMsgs[x.from] += x.msgs
		p.inbox[x.to] = append(p.inbox[x.to], i)
		cp := &p.conns[x.conn]
		if x.from == cp.a {
			cp.sendA += x.msgs
		} else {
			cp.sendB += x.msgs
		}
	}
	return p, nil
}

// scatter is an RS stage along d on the ranks' regions: each group's
// region (its members share one) cut into blocks, member k keeping
// block k.
func (p *hierPlan) scatter(region [][2]int, d int) {
	done := map[int]bool{}
	for r := range p.n {
		m := p.members(r, d)
		if done[m[0]] {
			continue
		}
		done[m[0]] = true
		b := split(region[r][0], region[r][1], len(m))
		for k, x := range m {
			region[x] = [2]int{b[k], b[k+1]}
		}
	}
}

// stage lays out one stage of chunk c in one group m (ranks by
// coordinate) whose region is cut into blocks b.
func (p *hierPlan) stage(c, si int, s hierStage, m, b []int) {
	P := len(m)
	alg := p.dims[s.dim].alg
	nsteps := P - 1
	switch alg {
	case algDirect:
		nsteps = 1
	case algHD:
		nsteps = bits.Len(uint(P)) - 1
	}
	for _, r := range m {
		st := make([]hierStep, nsteps)
		for i := range st {
			st[i].own = -1
		}
		p.steps[r][c] = append(p.steps[r][c], st)
	}
	step := func(r int) []hierStep { return p.steps[r][c][si] }
	add := func(step_, from, to, lo, hi int) {
		key := [3]int{min(m[from], m[to]), max(m[from], m[to]), s.dim}
		k, ok := p.connOf[key]
		if !ok {
			k = len(p.conns)
			p.connOf[key] = k
			p.conns = append(p.conns, hierConnPlan{a: key[0], b: key[1], dim: s.dim})
		}
		i := len(p.xfers)
		p.xfers = append(p.xfers, hierXfer{from: m[from], to: m[to], lo: lo, hi: hi, dim: s.dim, conn: k, chunk: c, stg: si})
		sf, st := step(m[from]), step(m[to])
		sf[step_].sends = append(sf[step_].sends, i)
		st[step_].recvs = append(st[step_].recvs, i)
	}
	mod := func(a int) int { return ((a % P) + P) % P }
	switch {
	case alg == algRing && !s.ag:
		// Step t: rank k sends block k-t-1 (its own at t = 0, else what it
		// received and added to at t-1) to k+1; after P-1 steps rank k
		// holds block k summed from rank k+1's value on round the ring.
		for t := range P - 1 {
			for k := range P {
				blk := mod(k - t - 1)
				add(t, k, mod(k+1), b[blk], b[blk+1])
			}
		}
	case alg == algRing:
		// Step t: rank k passes block k-t on to k+1.
		for t := range P - 1 {
			for k := range P {
				blk := mod(k - t)
				add(t, k, mod(k+1), b[blk], b[blk+1])
			}
		}
	case alg == algDirect:
		// One step: every rank sends each peer that peer's block (RS) or
		// its own block (AG); a receiver takes them in coordinate order.
		for to := range P {
			for from := range P {
				if from == to {
					if !s.ag {
						step(m[to])[0].own = len(step(m[to])[0].recvs)
					}
					continue
				}
				blk := to
				if s.ag {
					blk = from
				}
				add(0, from, to, b[blk], b[blk+1])
			}
		}
	case !s.ag: // halving-doubling's reduce-scatter: recursive halving
		// Step t: partners k and k^d (d = P/2^(t+1)) split the blocks they
		// hold in two; the one without bit d keeps the lower half and sends
		// the upper, the other the reverse. Rank k ends with block k.
		lo, hi := make([]int, P), make([]int, P)
		for k := range P {
			lo[k], hi[k] = 0, P
		}
		for t := range nsteps {
			d := P >> (t + 1)
			for k := range P {
				mid := (lo[k] + hi[k]) / 2
				if k&d == 0 {
					add(t, k, k^d, b[mid], b[hi[k]])
				} else {
					add(t, k, k^d, b[lo[k]], b[mid])
				}
			}
			for k := range P {
				mid := (lo[k] + hi[k]) / 2
				if k&d == 0 {
					hi[k] = mid
				} else {
					lo[k] = mid
				}
			}
		}
	default: // halving-doubling's all-gather: recursive doubling
		// Step t: partners k and k^d (d = 2^t) swap the blocks they hold.
		lo, hi := make([]int, P), make([]int, P)
		for k := range P {
			lo[k], hi[k] = k, k+1
		}
		for t := range nsteps {
			d := 1 << t
			for k := range P {
				add(t, k, k^d, b[lo[k]], b[hi[k]])
			}
			for k := range P {
				if k&d == 0 {
					hi[k] += hi[k] - lo[k]
				} else {
					lo[k] -= hi[k] - lo[k]
				}
			}
		}
	}
}

// hierScheduling is what the job runs: each chunk's stages, and the
// order in which each dimension serves them.
type hierScheduling struct {
	sched [][]hierStage
	// order[d] is dimension d's stages in the order every rank serves
	// them (none for a dimension of one host).
	order [][]themis.OpRef
	// topo is the model the scheduler saw (the dimensions of more than
	// one host), dim[k] the job's dimension of its k-th.
	topo themis.Topology
	dim  []int
	// scheds are the chunks' schedules on topo, as themis made them.
	scheds []themis.ChunkSchedule
}

// hierActive is how many stages a dimension of a rank runs at once: one,
// as ASTRA-sim's Themis runs (and emu/themis/flow by default).
const hierActive = 1

// themisTopology is the dimensions of more than one host as the Themis
// model sees them: each one's bandwidth per NPU is what the hier job's
// algorithm sends on at once (one link toward the ring's next host or
// to the switch, the P-1 links of a full mesh), its step latency a
// link's (two through a switch).
func themisTopology(dims []hierDim) (themis.Topology, []int) {
	var t themis.Topology
	var idx []int
	for d, dm := range dims {
		if dm.size < 2 {
			continue
		}
		bw, lat := dm.rate/8, dm.latency
		switch dm.kind {
		case "fc":
			bw *= float64(dm.size - 1)
		case "switch", kindINA:
			lat *= 2
		}
		t = append(t, themis.Dim{Kind: themis.DimKind(dm.kind), Size: dm.size, BW: bw, Latency: lat})
		idx = append(idx, d)
	}
	return t, idx
}

// hierCollective is the job's collective ("": all-reduce).
func hierCollective(h job.Hier) (themis.Collective, error) {
	switch c := themis.Collective(h.Collective); c {
	case "":
		return themis.AllReduce, nil
	case themis.AllReduce, themis.ReduceScatter, themis.AllGather:
		return c, nil
	}
	return "", fmt.Errorf("--collective %q: want all-reduce, reduce-scatter or all-gather", h.Collective)
}

// hierMutations re-introduce scheduler bugs (themis.Mutations) into what
// the hier job runs, for the power checks of its tests and of the hier
// conformance suite; zero in every real run (nothing but a test sets it).
var hierMutations themis.Mutations

// hierSchedule makes the job's schedules with emu/themis: the chunks'
// stage orders (Schedule: baseline or Algorithm 1) for the collective
// of bytes per rank (an all-reduce's or reduce-scatter's input, an
// all-gather's output: the tensor), and each dimension's order of
// service (ServiceOrder by the policy, fifo or scf), which every rank
// follows so that no two wait on each other (the paper's §4.6).
func hierSchedule(dims []hierDim, h job.Hier, bytes int64) (*hierScheduling, error) {
	sc := themis.Scheduler(h.Scheduler)
	if sc == "" {
		sc = themis.Baseline
	}
	if sc != themis.Baseline && sc != themis.Themis {
		return nil, fmt.Errorf("--scheduler %q: want baseline or themis", h.Scheduler)
	}
	pol := themis.Policy(h.Policy)
	if pol == "" {
		pol = themis.FIFO
	}
	if pol.Validate() != nil {
		return nil, fmt.Errorf("--policy %q: want fifo or scf", h.Policy)
	}
	coll, err := hierCollective(h)
	if err != nil {
		return nil, err
	}
	chunks := max(h.Chunks, 1)
	out := &hierScheduling{order: make([][]themis.OpRef, len(dims))}
	out.topo, out.dim = themisTopology(dims)
	if len(out.topo) == 0 {
		return nil, errors.New("--mode hier: every dimension has one host")
	}
	scheds, _, err := themis.Schedule(out.topo, coll, float64(bytes), themis.Config{Scheduler: sc, Chunks: chunks, Mutations: hierMutations})
	if err != nil {
		return nil, err
	}
	if out.sched, err = hierStages(dims, scheds, out.dim, coll); err != nil {
		return nil, err
	}
	out.scheds = scheds
	order, err := themis.ServiceOrder(out.topo, scheds, pol, hierActive)
	if err != nil {
		return nil, err
	}
	for k, o := range order {
		out.order[out.dim[k]] = o
	}
	return out, nil
}

// hierStages reads emu/themis's chunk schedules as the executor's
// stages, dimension k of the model being the job's dim[k]. An AR stage
// (an ina dimension's in-network all-reduce, emu/themis/ina.go) is taken
// on an ina dimension only (hier_ina.go).
func hierStages(dims []hierDim, scheds []themis.ChunkSchedule, dim []int, coll themis.Collective) ([][]hierStage, error) {
	var out [][]hierStage
	for _, cs := range scheds {
		st := make([]hierStage, len(cs.Stages))
		for i, x := range cs.Stages {
			if x.Op != themis.RS && x.Op != themis.AG && x.Op != themis.AR {
				return nil, fmt.Errorf("--mode hier: chunk %d stage %d is an %s on dimension %d", cs.Chunk, i+1, x.Op, x.Dim+1)
			}
			if x.Dim < 0 || x.Dim >= len(dim) {
				return nil, fmt.Errorf("--mode hier: chunk %d stage %d is on dimension %d of a model of %d", cs.Chunk, i+1, x.Dim+1, len(dim))
			}
			if x.Op == themis.AR && dims[dim[x.Dim]].kind != kindINA {
				return nil, fmt.Errorf("--mode hier: chunk %d stage %d is an AR on dimension %d, which is not an in-network aggregation (ina) dimension", cs.Chunk, i+1, x.Dim+1)
			}
			st[i] = hierStage{dim: dim[x.Dim], ag: x.Op == themis.AG, ar: x.Op == themis.AR}
		}
		if err := checkSchedule(dims, st, coll); err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, nil
}
