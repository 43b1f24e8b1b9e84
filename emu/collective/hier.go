package collective

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"time"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// The hier job (mode hier): a hierarchical all-reduce over the dimensions
// of a dims topology (docs/themis.md, "Packet mode"), as the Themis paper
// (Rashidi et al., ISCA '22, §2.3) describes today's multi-rail
// collectives: the tensor is cut into chunks; each chunk reduce-scatters
// within each rank's group along one dimension after another, then
// all-gathers in the reverse order, every stage run by its dimension's
// algorithm (Table 1: Ring on a ring dimension, Direct on a full mesh,
// Halving-Doubling on a switch), its steps RDMA WRITEs with immediate
// between the group's ranks over the dimension's own links. Chunks
// pipeline: each goes on to its next stage as soon as its last one is
// done at the rank, whatever the other chunks do.
//
// Every transfer is planned before the first frame (hier_plan.go), so a
// message's immediate is its index among what its receiver gets, and
// the receiver knows from it the transfer, the step and where the bytes
// landed in its receive region (one slot per transfer: nothing is
// overwritten while it may still be needed). A rank begins a step when
// it has finished the one before: it sends a copy of the blocks the step
// sends (a WRITE reads its buffer again when go-back-N resends it, so the
// data must not change under it), then waits for the blocks the step
// brings, and combines them with its data in the algorithm's order:
// ring and halving-doubling reduce-scatter add the one block received to
// the rank's own, a Direct reduce-scatter sums the peers' values in
// their coordinate order (the rank's own at its place), an all-gather
// copies what it received.
//
// Each rank holds its tensor, which it reduces in place; its result is
// checked at the end against the same steps run without a network on
// every rank's input.
//
// --collective reduce-scatter runs each chunk's RS stages alone: each
// rank ends with its shard of the chunk summed (hier_plan.go's
// newHierPlan says which shard), the rest of its tensor holding what the
// stages left there (partial sums, checked too). --collective all-gather
// runs the AG stages alone: each rank's input is its tensor's elements
// at its shards (the shards an RS in the reverse of the AG order would
// leave it), and every rank ends with every rank's shards, each at its
// place: the concatenation of their inputs in the schedule's order.
//
// A switch dimension named in Hier.INADims is an ina dimension: a
// chunk's AR stage there (its RS and AG meeting on it) is one NetReduce
// aggregation on each group's switch (hier_ina.go).

// Hier is the hier job's mode.
const Hier job.Mode = "hier"

// hierQPN is the first QPN of a hier job's QPs on a NIC: above the ring
// QPNs, wa's (0x10000 up) and traffic's (0x40000 up); 1024 per job.
const hierQPN = 0x60000

// maxHierChunks bounds --chunks: each chunk is a pipeline of its own.
const maxHierChunks = 4096

func init() {
	job.Register(job.Algorithm{Mode: Hier,
		Doc:            "hierarchical all-reduce over a dims topology: the tensor in --chunks chunks, each reduce-scattered along dimension 1..D then all-gathered along D..1 by each dimension's algorithm (ring, direct on a full mesh, halving-doubling on a switch) with RDMA WRITEs, checked bit for bit; --collective reduce-scatter or all-gather runs one half",
		New:            func(r *job.Job) (job.Collective, error) { return newHierJob(r) },
		OwnConnections: true, Memory: hierMemory,
		Validate:    validateHier,
		ValidateJob: validateHierJob,
		ValidateRun: checkHierSettings,
	})
}

// hierOf is the job's hier settings (the zero value: one chunk, the
// baseline, FIFO).
func hierOf(c *job.Config) job.Hier {
	if c.Hier == nil {
		return job.Hier{}
	}
	return *c.Hier
}

// validateHier checks the settings a hier job takes.
func validateHier(c *job.Config) error {
	bad := func(f string, a ...any) error { return &job.ConfigError{Err: fmt.Errorf(f, a...)} }
	h := hierOf(c)
	switch {
	case c.Devices != nil:
		return bad("--mode hier runs on emulated links (not on TAPs)")
	case h.Chunks < 0 || h.Chunks > maxHierChunks:
		return bad("--chunks %d: want 1..%d", h.Chunks, maxHierChunks)
	}
	dims, err := hierDims(c.Topology, c.Link.Rate, c.Link.Latency)
	if err == nil {
		err = markINA(dims, h, c)
	}
	if err != nil {
		return &job.ConfigError{Err: err}
	}
	if _, err := hierSchedule(dims, h, c.TensorBytes); err != nil {
		return &job.ConfigError{Err: err}
	}
	if n := len(c.Topology.Hosts()); c.Workers != n {
		return bad("--mode hier runs on every host of the dims topology: --workers %d, and it has %d hosts", c.Workers, n)
	}
	if e := c.TensorBytes / int64(c.DType.Size()); e < int64(max(h.Chunks, 1))*int64(c.Workers) {
		return bad("--tensor: %d elements for %d chunks of %d ranks: want at least one element per rank and chunk", e, max(h.Chunks, 1), c.Workers)
	}
	return nil
}

// validateHierJob wants rank r on host hr, every host a rank.
func validateHierJob(j job.JobConfig) error {
	hs := j.Cfg.Topology.Hosts() // validateHier made sure there is one
	for i, rk := range j.Ranks {
		if i >= len(hs) || rk != hs[i].Name {
			return fmt.Errorf("job %s: --mode hier places rank r on host hr of the dims topology (h0, h1, ...), not %s on rank %d", j.Name, rk, i)
		}
	}
	return nil
}

// checkHierSettings refuses hier settings given to a run without a hier
// job: they would be ignored without a word.
func checkHierSettings(c *job.Config, jobs []job.JobConfig) error {
	if c.Hier == nil {
		return nil
	}
	for _, j := range jobs {
		if j.Cfg.Mode == Hier {
			return nil
		}
	}
	return &job.ConfigError{Err: fmt.Errorf("--chunks, --scheduler, --policy, --collective, --consistency and --ina-dims are a hier job's (this run is %s)", c.Mode)}
}

// hierMemory: per rank its tensor, its receive region (about twice the
// tensor: what an all-reduce brings it), copies of what it sends, and
// at the check every rank's tensor again.
func hierMemory(cfg job.Config, e *job.MemoryEstimate) (int64, bool) {
	w, t := int64(cfg.Workers), cfg.TensorBytes
	e.Buffers = w * 5 * t
	e.Queues = w * 2 * job.CeilDiv(2*t, int64(cfg.MsgLen*cfg.MTU)+1) * job.WRBytes
	e.Largest = 2 * t
	return job.CeilDiv(t, int64(cfg.MTU)) + 2, false
}

// hierConn is a planned connection's two QPs.
type hierConn struct {
	hierConnPlan
	qa, qb *roce.QP
	na, nb *nic.NIC
}

// hierRank is one rank's state.
type hierRank struct {
	w     *job.Worker
	data  []byte   // its tensor, reduced in place
	recv  *roce.MR // where its transfers land
	got   []int    // per transfer to it (by plan index): messages arrived
	stage []int    // per chunk: the stage it is in
	step  []int    // per chunk: the step
	wait  []int    // per chunk: transfers of the step not yet arrived
	done  int      // chunks finished
	// started: the chunk's current stage has begun here; running: the
	// stages under way per dimension; turns: whose turn it is on each.
	started []bool
	running []int
	turns   *themis.Turns
	bufs    map[int][]byte
	left    map[int]int // per transfer it sends: WRITEs not yet completed
	acc     []byte      // scratch for a Direct sum
	qpConn  map[*roce.QP]int
	rings   []*inaMember // per dimension: the rank's place in its group's ring (nil: not ina)

	// Without consistency (Hier.LocalOrder): per chunk the local order in
	// which its current stage became ready, the count so far, and per
	// dimension the stages served, in order (hier_local.go).
	readySeq []int
	seq      int
	served   [][]themis.OpRef
}

type hierJob struct {
	r      *job.Job
	p      *hierPlan
	h      job.Hier
	hs     *hierScheduling
	conns  []hierConn
	ranks  []*hierRank
	start  time.Duration
	active [][][2]time.Duration // chunk, stage: first start and last end over the ranks
	// payload per dimension (bytes the messages carried)
	payload []int64
	mm      *job.Mismatch
	ina     *inaPlan // the ina dimensions' rings (nil: none)
}

func newHierJob(r *job.Job) (*hierJob, error) {
	cfg := r.Cfg
	if r.Fab.Live() {
		return nil, &job.ConfigError{Err: errors.New("--mode hier runs on emulated links (not on TAPs)")}
	}
	h := hierOf(&cfg)
	dims, err := hierDims(cfg.Topology, cfg.Link.Rate, cfg.Link.Latency)
	if err == nil {
		err = markINA(dims, h, &cfg)
	}
	if err != nil {
		return nil, &job.ConfigError{Err: err}
	}
	hs, err := hierSchedule(dims, h, cfg.TensorBytes)
	if err != nil {
		return nil, &job.ConfigError{Err: err}
	}
	sched := hs.sched
	coll, _ := hierCollective(h) // hierSchedule checked it
	p, err := newHierPlan(dims, sched, coll, cfg.TensorBytes/int64(cfg.DType.Size()), cfg.DType.Size(), cfg.MsgLen*cfg.MTU)
	if err != nil {
		return nil, &job.ConfigError{Err: err}
	}
	j := &hierJob{r: r, p: p, h: h, hs: hs, payload: make([]int64, len(dims))}
	if j.ina, err = newINAPlan(p, hs, &cfg); err != nil {
		return nil, &job.ConfigError{Err: err}
	}
	j.active = make([][][2]time.Duration, p.chunks)
	for c := range j.active {
		j.active[c] = make([][2]time.Duration, len(sched[c]))
		for i := range j.active[c] {
			j.active[c][i] = [2]time.Duration{-1, -1}
		}
	}
	// Each rank's NIC along each dimension toward each peer: the host's
	// link of that dimension to the peer (ring, fc) or to its switch.
	t := cfg.Topology
	nicAt := func(rank, dim, peer int) (*nic.NIC, error) {
		host, _ := t.Node(r.Workers[rank].Host)
		ph := r.Workers[peer].Host
		for port, li := range host.Links {
			l := &t.Links[li]
			if l.Dim != dim+1 {
				continue
			}
			if o, _ := t.Node(l.Other(host.Name)); o.Kind == "switch" || o.Name == ph {
				for _, x := range r.Fab.NICs {
					if x.Host == host.Name && x.Port == port {
						return x, nil
					}
				}
			}
		}
		return nil, fmt.Errorf("job %s: rank %d (%s) has no link of dimension %d toward rank %d (%s)", r.Name, rank, host.Name, dim+1, peer, ph)
	}
	next := map[*nic.NIC]uint32{}
	newQP := func(w *job.Worker, h *nic.NIC) *roce.QP {
		q := h.NewQP(hierQPN + uint32(r.Index)<<10 + next[h])
		next[h]++
		w.QPs = append(w.QPs, q)
		if h != w.NIC && !slices.Contains(w.NICs, h) {
			w.NICs = append(w.NICs, h)
		}
		return q
	}
	j.ranks = make([]*hierRank, p.n)
	for i, w := range r.Workers {
		hr := &hierRank{w: w, got: make([]int, len(p.xfers)), stage: make([]int, p.chunks), step: make([]int, p.chunks),
			wait: make([]int, p.chunks), started: make([]bool, p.chunks), running: make([]int, len(dims)),
			turns: themis.NewTurns(hs.order), bufs: map[int][]byte{}, left: map[int]int{}, qpConn: map[*roce.QP]int{}}
		if h.LocalOrder {
			hr.readySeq, hr.seq, hr.served = make([]int, p.chunks), p.chunks, make([][]themis.OpRef, len(dims))
			for c := range hr.readySeq {
				hr.readySeq[c] = c
			}
		}
		hr.data = make([]byte, cfg.TensorBytes)
		in := r.Input(i)
		in.MoveTo(0)
		in.Fill(hr.data)
		hr.recv = &roce.MR{Addr: r.RecvVA, Buf: make([]byte, p.recvBytes[i]+j.ina.bytes(i)), RKey: r.RKey(i),
			Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
		w.RecvWant, w.SendWant = p.recvMsgs[i]+j.ina.msgs(i), p.sendMsgs[i]+j.ina.msgs(i)
		j.ranks[i] = hr
	}
	registered := map[*nic.NIC]bool{}
	for k, cp := range p.conns {
		c := hierConn{hierConnPlan: cp}
		if c.na, err = nicAt(cp.a, cp.dim, cp.b); err == nil {
			c.nb, err = nicAt(cp.b, cp.dim, cp.a)
		}
		if err != nil {
			return nil, &job.ConfigError{Err: err}
		}
		c.qa, c.qb = newQP(r.Workers[cp.a], c.na), newQP(r.Workers[cp.b], c.nb)
		j.ranks[cp.a].qpConn[c.qa], j.ranks[cp.b].qpConn[c.qb] = k, k
		for _, e := range []struct {
			rank int
			h    *nic.NIC
		}{{cp.a, c.na}, {cp.b, c.nb}} {
			if !registered[e.h] {
				registered[e.h] = true
				if err := e.h.PD.Register(j.ranks[e.rank].recv); err != nil {
					return nil, err
				}
			}
		}
		j.conns = append(j.conns, c)
	}
	if err := j.setupRings(nicAt, newQP, registered); err != nil {
		return nil, err
	}
	return j, nil
}

// Connect connects every planned connection; initial PSNs come from the
// job's seed.
func (j *hierJob) Connect() error {
	r := j.r
	rng := rand.New(rand.NewPCG(r.Cfg.Seed, 0x41E6))
	psn := func() uint32 { return uint32(rng.Uint64()) & 0xFFFFFF }
	for _, c := range j.conns {
		if !r.Fab.Reachable(c.na, c.nb) || !r.Fab.Reachable(c.nb, c.na) {
			return fmt.Errorf("job %s: rank %d (%s) and rank %d (%s) have no path between them along dimension %d", r.Name, c.a, c.na.Name, c.b, c.nb.Name, c.dim+1)
		}
		recvA, recvB := c.sendB, c.sendA
		base := roce.Config{MTU: r.Cfg.MTU, Timeout: r.Cfg.Timeout, RetryCnt: r.Cfg.RetryCnt, RNRRetry: 7, MinRNRTimer: 1, Profile: r.Cfg.NIC}
		x, y := psn(), psn()
		ca, cb := base, base
		ca.SQPSN, ca.RQPSN, ca.MaxSendWR, ca.MaxRecvWR = x, y, c.sendA+1, recvA+1
		cb.SQPSN, cb.RQPSN, cb.MaxSendWR, cb.MaxRecvWR = y, x, c.sendB+1, recvB+1
		if err := c.qa.Connect(r.PathTo(c.na, c.nb, c.qb.QPN()), ca); err != nil {
			return err
		}
		if err := c.qb.Connect(r.PathTo(c.nb, c.na, c.qa.QPN()), cb); err != nil {
			return err
		}
	}
	return j.connectRings()
}

func (j *hierJob) Start() error {
	j.start = j.r.Fab.Clock.Now()
	// Every receive up front: a WRITE with immediate consumes one.
	for _, c := range j.conns {
		for _, e := range []struct {
			q *roce.QP
			n int
		}{{c.qa, c.sendB}, {c.qb, c.sendA}} {
			for range e.n {
				if err := e.q.PostRecv(roce.RecvWR{}); err != nil {
					return err
				}
			}
		}
	}
	if err := j.postRingRecvs(); err != nil {
		return err
	}
	for rank := range j.ranks {
		if err := j.pump(rank); err != nil {
			return err
		}
	}
	return nil
}

// pump starts on each dimension of the rank the stages whose turn it is,
// while the dimension has room (hierActive) and the chunk is ready (its
// previous stage done here); the service order is every rank's, so a
// stage never waits for a peer that serves another first.
func (j *hierJob) pump(rank int) error {
	hr := j.ranks[rank]
	for d := range hr.running {
		for hr.running[d] < hierActive {
			var op themis.OpRef
			if j.h.LocalOrder {
				var ok bool
				if op, ok = j.localNext(hr, d); !ok {
					break
				}
				hr.served[d] = append(hr.served[d], op)
			} else {
				var ok bool
				op, ok = hr.turns.Next(d)
				if !ok || hr.stage[op.Chunk] != op.Stage || hr.started[op.Chunk] {
					break
				}
				if err := hr.turns.Start(d, op); err != nil {
					return &job.JobError{Msg: fmt.Sprintf("rank %d: %v", rank, err)}
				}
			}
			hr.running[d]++
			hr.started[op.Chunk], hr.step[op.Chunk] = true, 0
			if a := &j.active[op.Chunk][op.Stage]; a[0] < 0 || j.r.Fab.Clock.Now() < a[0] {
				a[0] = j.r.Fab.Clock.Now()
			}
			if err := j.advance(rank, op.Chunk, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// advance runs chunk c's current stage at the rank as far as it can:
// entering a step posts its sends and counts the blocks it waits for;
// a step whose blocks are all there is combined, and the next entered.
// The stage's end frees its dimension (pump).
func (j *hierJob) advance(rank, c int, entering bool) error {
	hr := j.ranks[rank]
	si := hr.stage[c]
	steps := j.p.steps[rank][c][si]
	if j.p.kinds[c][si] == stepAR {
		if done, err := j.arStep(rank, c, si, entering); err != nil || !done {
			return err
		}
	}
	for j.p.kinds[c][si] != stepAR {
		st := &steps[hr.step[c]]
		if entering {
			for _, xi := range st.sends {
				if err := j.send(hr, xi); err != nil {
					return err
				}
			}
			hr.wait[c] = 0
			for _, xi := range st.recvs {
				if hr.got[xi] < j.p.xfers[xi].msgs {
					hr.wait[c]++
				}
			}
			if hr.wait[c] > 0 {
				return nil
			}
		}
		j.combine(hr, c, si, st)
		if hr.step[c]++; hr.step[c] < len(steps) {
			entering = true
			continue
		}
		break
	}
	now := j.r.Fab.Clock.Now()
	if a := &j.active[c][si]; now > a[1] {
		a[1] = now
	}
	hr.running[j.p.sched[c][si].dim]--
	hr.stage[c]++
	if hr.readySeq != nil {
		hr.readySeq[c], hr.seq = hr.seq, hr.seq+1
	}
	hr.started[c], hr.step[c] = false, 0
	if hr.stage[c] == len(j.p.sched[c]) {
		if hr.done++; hr.done == j.p.chunks {
			hr.w.DoneAt = now
		}
	}
	return j.pump(rank)
}

// send posts transfer xi's WRITEs from a copy of its block.
func (j *hierJob) send(hr *hierRank, xi int) error {
	x := &j.p.xfers[xi]
	sz := j.p.elemSize
	buf := slices.Clone(hr.data[x.lo*sz : x.hi*sz])
	hr.bufs[xi] = buf
	hr.left[xi] = x.msgs
	c := &j.conns[x.conn]
	q, peerMR := c.qa, j.ranks[c.b].recv
	if x.from == c.b {
		q, peerMR = c.qb, j.ranks[c.a].recv
	}
	j.payload[x.dim] += int64(len(buf))
	for m := range x.msgs {
		lo := m * j.p.msgB
		hi := min(lo+j.p.msgB, len(buf))
		wr := roce.SendWR{ID: uint64(xi)<<32 | uint64(m), Opcode: roce.WRWriteImm, Local: buf[lo:hi],
			RemoteVA: j.r.RecvVA + uint64(x.off) + uint64(lo), RKey: peerMR.RKey, Imm: uint32(x.rmsg0 + m), Signaled: true}
		if err := q.PostSend(wr); err != nil {
			return &job.JobError{Msg: fmt.Sprintf("rank %d: post %s: %v", x.from, j.describe(xi, m), err)}
		}
	}
	return nil
}

// describe names message m of transfer xi.
func (j *hierJob) describe(xi, m int) string {
	x := &j.p.xfers[xi]
	return fmt.Sprintf("chunk %d stage %s, WRITE %d of %d to rank %d", x.chunk, j.p.sched[x.chunk][x.stg], m, x.msgs, x.to)
}

// combine applies step st's received blocks to the rank's data.
func (j *hierJob) combine(hr *hierRank, c, si int, st *hierStep) {
	combineStep(j.p, j.r.Cfg.DType, j.p.kinds[c][si], hr.data, st, &hr.acc, func(xi int) []byte {
		x := &j.p.xfers[xi]
		return hr.recv.Buf[x.off : x.off+int64((x.hi-x.lo)*j.p.elemSize)]
	})
}

// combineStep is a step's reduction on one rank's data, whatever brought
// the blocks (the network, or the check's run without one).
func combineStep(p *hierPlan, d tensor.DType, kind hierStepKind, data []byte, st *hierStep, acc *[]byte, block func(xi int) []byte) {
	sz := p.elemSize
	switch kind {
	case stepCopy:
		for _, xi := range st.recvs {
			x := &p.xfers[xi]
			copy(data[x.lo*sz:x.hi*sz], block(xi))
		}
	case stepAdd:
		for _, xi := range st.recvs {
			x := &p.xfers[xi]
			tensor.Add(d, data[x.lo*sz:x.hi*sz], block(xi))
		}
	case stepOrdered:
		x := &p.xfers[st.recvs[0]]
		own := data[x.lo*sz : x.hi*sz]
		*acc = append((*acc)[:0], make([]byte, len(own))...)
		a := *acc
		for i := 0; i <= len(st.recvs); i++ {
			var v []byte
			switch {
			case i == st.own:
				v = own
			case i < st.own:
				v = block(st.recvs[i])
			default:
				v = block(st.recvs[i-1])
			}
			if i == 0 {
				copy(a, v)
			} else {
				tensor.Add(d, a, v)
			}
		}
		copy(own, a)
	}
}

func (j *hierJob) NameWR(c roce.Completion) string {
	if c.WRID&ringWR != 0 {
		return j.describeRing(c.WRID)
	}
	return j.describe(int(c.WRID>>32), int(uint32(c.WRID)))
}

// PeerOf is the rank at the other end of one of w's QPs.
func (j *hierJob) PeerOf(w *job.Worker, q job.Endpoint) int {
	qp, _ := q.(*roce.QP)
	k, ok := j.ranks[w.Rank].qpConn[qp]
	if !ok {
		return j.ringPeer(w.Rank, qp)
	}
	if c := j.conns[k]; c.a == w.Rank {
		return c.b
	}
	return j.conns[k].a
}

func (j *hierJob) OnCompletion(w *job.Worker) {
	hr := j.ranks[w.Rank]
	j.r.Drain(w, func(c roce.Completion) {
		if j.ringCompletion(hr, c) {
			return
		}
		if !c.Recv {
			w.SendDone++
			xi := int(c.WRID >> 32)
			if hr.left[xi]--; hr.left[xi] == 0 {
				delete(hr.left, xi)
				delete(hr.bufs, xi)
			}
			return
		}
		if err := j.arrive(hr, c); err != nil {
			j.r.Err = err
		}
	})
}

// arrive takes one message in: the transfer it belongs to, and if that
// completes the step its chunk waits in, the step.
func (j *hierJob) arrive(hr *hierRank, c roce.Completion) error {
	rank := hr.w.Rank
	in := j.p.inbox[rank]
	k := sort.Search(len(in), func(i int) bool { return j.p.xfers[in[i]].rmsg0 > int(c.Imm) }) - 1
	if !c.HasImm || k < 0 || int(c.Imm) >= j.p.recvMsgs[rank] {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: unexpected message (imm %#x)", rank, c.Imm)}
	}
	xi := in[k]
	x := &j.p.xfers[xi]
	if hr.got[xi] >= x.msgs {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: %s arrived twice", rank, j.describe(xi, int(c.Imm)-x.rmsg0))}
	}
	hr.w.RecvDone++
	if hr.got[xi]++; hr.got[xi] < x.msgs {
		return nil
	}
	ch := x.chunk
	if hr.stage[ch] != x.stg || !hr.started[ch] || !slices.Contains(j.p.steps[rank][ch][x.stg][hr.step[ch]].recvs, xi) {
		return nil // a later step's: counted when the chunk gets there
	}
	if hr.wait[ch]--; hr.wait[ch] > 0 {
		return nil
	}
	return j.advance(rank, ch, false)
}

// Check runs the plan's steps without a network on every rank's input,
// and compares each rank's data with the result.
func (j *hierJob) Check() *job.Mismatch {
	if j.mm != nil {
		return j.mm
	}
	want := hierReference(j.p, j.r.Cfg.DType, func(rank int, buf []byte) {
		in := j.r.Input(rank)
		in.MoveTo(0)
		in.Fill(buf)
	})
	for rank, hr := range j.ranks {
		if mm := firstDiff(j.r.Cfg.DType, rank, 0, hr.data, want[rank]); mm != nil {
			j.mm = mm
			return mm
		}
	}
	return nil
}

// hierReference runs the plan on every rank's input (fill) step by step,
// each step's sends taken before its combines: what the ranks must hold.
func hierReference(p *hierPlan, d tensor.DType, fill func(rank int, buf []byte)) [][]byte {
	data := make([][]byte, p.n)
	for r := range data {
		data[r] = make([]byte, p.bounds[p.chunks]*p.elemSize)
		fill(r, data[r])
	}
	sz := p.elemSize
	sent := make([][]byte, len(p.xfers))
	var acc []byte
	for c := range p.chunks {
		for si := range p.sched[c] {
			if p.kinds[c][si] == stepAR {
				arReference(p, d, data, c, si)
				continue
			}
			nsteps := len(p.steps[0][c][si])
			for t := range nsteps {
				for r := range p.n {
					for _, xi := range p.steps[r][c][si][t].sends {
						x := &p.xfers[xi]
						sent[xi] = slices.Clone(data[r][x.lo*sz : x.hi*sz])
					}
				}
				for r := range p.n {
					combineStep(p, d, p.kinds[c][si], data[r], &p.steps[r][c][si][t], &acc, func(xi int) []byte { return sent[xi] })
				}
			}
		}
	}
	return data
}

// Report: the job's figures per dimension and link direction.
func (j *hierJob) Report(jr *job.JobResult) {
	p := j.p
	rep := &job.HierReport{Chunks: p.chunks, Scheduler: "baseline", Policy: "fifo", BinNS: int64(hierBin)}
	if j.h.Scheduler != "" {
		rep.Scheduler = j.h.Scheduler
	}
	if j.h.Policy != "" {
		rep.Policy = j.h.Policy
	}
	rep.Collective = j.h.Collective
	for _, st := range p.sched {
		rep.Schedule = append(rep.Schedule, scheduleString(st))
	}
	var end time.Duration
	for _, hr := range j.ranks {
		end = max(end, hr.w.DoneAt)
	}
	span := end - j.start
	if span <= 0 {
		span = j.r.Fab.Clock.Now() - j.start
	}
	t := j.r.Cfg.Topology
	for d, dm := range p.dims {
		rep.Dims = append(rep.Dims, job.HierDim{Dim: d + 1, Kind: dm.kind, Size: dm.size, Algorithm: dm.alg, PayloadBytes: j.payload[d]})
		if j.ina != nil {
			rep.Dims[d].ARUpBytes, rep.Dims[d].ARDownBytes = j.ina.up[d], j.ina.down[d]
		}
	}
	for _, l := range t.Links {
		rate := l.Rate
		if rate == 0 {
			rate = j.r.Cfg.Link.Rate
		}
		for k, name := range []string{l.AB, l.BA} {
			s, _ := j.r.Fab.Direction(name)
			hl := job.HierLink{Name: name, Dim: l.Dim, WireBytes: int64(s.Bytes), Frames: int64(s.Frames)}
			if span > 0 {
				hl.Utilisation = 100 * float64(s.Bytes) * 8 / (rate * span.Seconds())
			}
			rep.Links = append(rep.Links, hl)
			from, _ := t.Node([]string{l.A, l.B}[k])
			if l.Dim >= 1 && l.Dim <= len(p.dims) && from.Kind == topo.KindHost {
				rep.Dims[l.Dim-1].WireBytes += int64(s.Bytes) // what the hosts sent on the dimension
			}
		}
	}
	bins := int(span/hierBin) + 1
	for k, td := range j.hs.topo {
		// The Themis paper's utilisation (§6.1): what the dimension
		// carried over what its bandwidth per NPU, the model's, could
		// carry from every NPU in the job's time.
		d := j.hs.dim[k]
		if span > 0 {
			rep.Dims[d].Utilisation = 100 * float64(rep.Dims[d].WireBytes) / (td.BW * float64(p.n) * span.Seconds())
		}
	}
	for d := range rep.Dims {
		rep.Dims[d].Timeline = make([]float64, bins)
	}
	for c := range p.chunks {
		for si, s := range p.sched[c] {
			a := j.active[c][si]
			if a[0] < 0 || a[1] < 0 {
				continue
			}
			lo, hi := a[0]-j.start, a[1]-j.start
			tl := rep.Dims[s.dim].Timeline
			for k := int(lo / hierBin); k <= int(hi/hierBin) && k < len(tl); k++ {
				b0, b1 := time.Duration(k)*hierBin, time.Duration(k+1)*hierBin
				if ov := min(hi, b1) - max(lo, b0); ov > 0 {
					tl[k] += float64(ov) / float64(hierBin)
				}
			}
		}
	}
	jr.Hier = rep
}

// hierBin is the activity timeline's bin: 100 µs, as the Themis paper's
// Fig. 9 plots it.
const hierBin = 100 * time.Microsecond

var _ job.Reporter = (*hierJob)(nil)
var _ job.Connector = (*hierJob)(nil)
var _ job.QPPeers = (*hierJob)(nil)
