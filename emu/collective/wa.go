package collective

import (
	"errors"
	"fmt"
	"github.com/inaemu/inaemu/emu/job"
	"math/rand/v2"
	"slices"

	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// waJob is INCEPTIONN's worker-aggregator baseline (MICRO '18 §II-B,
// Fig. 2: a parameter server): ranks 0..p-1 are workers and the last rank
// is the aggregator host. Every worker WRITEs its tensor to the
// aggregator, message by message (WRITE WITH IMMEDIATE, immediate = the
// message); the aggregator sums a message in rank order, x_0 + x_1 + ...,
// once all p copies have arrived; when every message is summed it sends
// the sum back: to each worker in turn (unicast), or down a binomial tree
// over [aggregator, worker 0, ..., worker p-1] (tree: in step s every node
// i < 2^s that holds the whole sum sends it to node i + 2^s, so a node
// sends to its children one after the other, the largest subtree first).
// The legs do not overlap, as §VIII-D adds them: the workers' gradients,
// then the sum's way back. A node sends to its next child once the
// previous child's WRITEs are all acknowledged.
//
// worker-tree is the broadcast §VIII-D's (p + log p)·n·β counts: log p
// steps among the p workers. The aggregator's sending side is idle while
// the gradients converge on it, so it WRITEs each message of the sum to
// worker 0 as soon as it is summed, and worker 0, once it holds the
// whole sum, roots the binomial tree over [worker 0, ..., worker p-1]
// (in step s worker i < 2^s sends to worker i + 2^s): the gather's p·n·β
// hides the first hop, and ceil(log2 p) whole-sum steps follow.
//
// The p workers' gradients converge on the aggregator's port, and RoCE
// here has no congestion control (the paper's WA ran over TCP): so that
// this incast never overflows the port's egress queue of Q frames, a
// worker has one message in flight at a time and a wa job's messages are
// at most Q/(2p) packets (fewer than --msg-len asks when that is more).
//
// With Compress only the gradient leg is compressed (WA+C: the paper's
// aggregator sends back weights, which are not gradients): the aggregator
// sums what the engines make of each worker's packets, T(x_0) + T(x_1) +
// ..., and the sum travels back as it is. Every worker checks each
// message of the sum against that reference as it arrives.
type waJob struct {
	r     *job.Job
	p     int // workers; r.workers[p] is the aggregator
	msgB  int
	nmsg  int
	bcast job.Bcast
	codec *inceptionn.Codec

	// conn[i] is worker i's connection to the aggregator: its QP there
	// and the aggregator's (gradients go up, unicast sums come down).
	conn [][2]*roce.QP
	// edges are the sum's way down: per node (0 the aggregator, i+1
	// worker i) the QPs to its children, in sending order, and each
	// child's node.
	down     [][]*roce.QP
	children [][]int
	nextKid  []int      // per node: the child it sends to next
	pending  []int      // per node: the WRITEs to the current child not yet acknowledged
	in       []*roce.QP // per worker: the QP the sum arrives on

	grads   []*roce.MR // the aggregator's receive regions, one per worker
	sum     []byte     // the aggregator's sum
	arrived []int      // per message: workers whose copy has arrived
	summed  int        // messages summed
	results []*roce.MR // per worker: where the sum lands
	got     [][]bool   // per worker, message: arrived

	own      []job.Source
	expSt    []job.Source
	expected map[int]*expectedMsg
	piece    []byte
	gradBuf  [][]byte // per worker: its message in flight
	gradHop  job.HopReport
	mismatch *job.Mismatch
	mmAt     [2]int // (message, rank) of mismatch
	maxErr   float64
}

// waTamper, when a test sets it, alters the aggregator's sum of message
// m before it goes back; waSeen, when set, is shown every message of the
// sum a worker receives (after its check).
var (
	waTamper func(m int, sum []byte)
	waSeen   func(rank, m int, got []byte)
)

// WA is the worker-aggregator job's mode: workers send to an aggregator
// host, which sums and sends back.
const WA job.Mode = "wa"

func init() {
	job.Register(job.Algorithm{Mode: WA, Doc: "worker-aggregator: the workers send to one more host, the aggregator, which sums and sends back", New: func(r *job.Job) (job.Collective, error) { return newWAJob(r) },
		OwnConnections: true, ExtraRank: true, Compresses: true, Memory: waMemory,
		Validate: func(c *job.Config) error {
			if c.Devices != nil {
				return &job.ConfigError{Err: errors.New("--mode wa runs on emulated links; the TAP backend runs ring and netreduce jobs")}
			}
			return nil
		},
		// A wa job's legs and compression live in NICs: GPUs, whose hops
		// to GPUs of their host never pass one, cannot take part.
		ValidateJob: func(j job.JobConfig) error {
			if g := job.GPURank(j.Ranks); g != "" {
				return fmt.Errorf("job %s: a wa job's ranks are host NICs (its workers, then its aggregator), not GPUs (%s)", j.Name, g)
			}
			return nil
		}})
}

// waMemory: w ranks, w-1 workers and the aggregator.
func waMemory(cfg job.Config, e *job.MemoryEstimate) (int64, bool) {
	w, t := int64(cfg.Workers), cfg.TensorBytes
	msgB := int64(cfg.MsgLen) * int64(cfg.MTU)
	// w ranks: w-1 workers and the aggregator. The aggregator holds
	// every worker's tensor and the sum, each worker its result and a
	// message; the expected sums are made per message as results come.
	p := w - 1
	msgs := job.CeilDiv(t, msgB)
	e.Buffers = (2*p+1)*t + p*msgB + 2*msgB
	e.Queues = 2 * (p + 1) * 2 * (2*msgs + 1) * job.WRBytes
	e.Largest = t
	return int64(cfg.MsgLen) + 2, false
}

// Report: the aggregator holds no result.
func (j *waJob) Report(jr *job.JobResult) { jr.Workers = j.p }

// node is rank's node in the tree the sum goes down (the aggregator is
// node 0, worker i node i+1).
func (j *waJob) node(rank int) int { return (rank + 1) % (j.p + 1) }

// rankOf is node's rank.
func (j *waJob) rankOf(node int) int { return (node + j.p) % (j.p + 1) }

func newWAJob(r *job.Job) (*waJob, error) {
	cfg := r.Cfg
	p := len(r.Workers) - 1
	t := int(cfg.TensorBytes)
	q := cfg.Link.Queue
	if q == 0 {
		q = 1000
	}
	j := &waJob{r: r, p: p, msgB: min(cfg.MsgLen, max(1, q/(2*p))) * cfg.MTU, bcast: cfg.Bcast, codec: r.Codec(),
		expected: map[int]*expectedMsg{}, mmAt: [2]int{1 << 30, p}}
	j.nmsg = (t + j.msgB - 1) / j.msgB
	j.piece = make([]byte, j.msgB)
	j.sum = make([]byte, t)
	j.arrived = make([]int, j.nmsg)
	for _, w := range r.Workers {
		j.own = append(j.own, r.Input(w.Rank))
		j.expSt = append(j.expSt, r.Input(w.Rank))
	}
	agg := r.Workers[p]
	// The tree (or the star of unicasts) the sum goes down.
	nodes := p + 1
	j.children = make([][]int, nodes)
	// binomial adds a binomial tree over nodes [root, nodes): in step s,
	// node root+x, x < 2^s, sends to node root+x+2^s.
	binomial := func(root int) {
		for s := 1; root+s < nodes; s <<= 1 {
			for x := 0; x < s && root+x+s < nodes; x++ {
				j.children[root+x] = append(j.children[root+x], root+x+s)
			}
		}
	}
	switch j.bcast {
	case job.BcastTree:
		binomial(0)
	case job.BcastWorkerTree:
		j.children[0] = []int{1}
		binomial(1)
	default:
		for i := 1; i < nodes; i++ {
			j.children[0] = append(j.children[0], i)
		}
	}
	j.nextKid = make([]int, nodes)
	j.pending = make([]int, nodes)
	if j.bcast == job.BcastWorkerTree { // the aggregator streams the sum to worker 0
		j.pending[0] = j.nmsg
	}
	j.down = make([][]*roce.QP, nodes)

	qpn := map[string]uint32{}
	newQP := func(w *job.Worker) *roce.QP {
		// Above every ring QPN (qpnPair) of the run's jobs on the NIC.
		k := qpn[w.NIC.Name]
		qpn[w.NIC.Name]++
		q := w.NIC.NewQP(0x10000 + uint32(r.Index)<<10 + k)
		w.QPs = append(w.QPs, q)
		return q
	}
	for i := 0; i < p; i++ {
		w := r.Workers[i]
		j.conn = append(j.conn, [2]*roce.QP{newQP(w), newQP(agg)})
		reg := &roce.MR{Addr: r.RecvVA + uint64(i)*uint64(t), Buf: make([]byte, t), RKey: r.RKey(i),
			Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
		if err := agg.NIC.PD.Register(reg); err != nil {
			return nil, err
		}
		j.grads = append(j.grads, reg)
		res := &roce.MR{Addr: r.RecvVA, Buf: make([]byte, t), RKey: r.RKey(i), Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
		if err := w.NIC.PD.Register(res); err != nil {
			return nil, err
		}
		j.results = append(j.results, res)
		j.got = append(j.got, make([]bool, j.nmsg))
		j.gradBuf = append(j.gradBuf, make([]byte, j.msgB))
		w.SendWant += j.nmsg
		w.RecvWant += j.nmsg
		agg.RecvWant += j.nmsg
	}
	j.in = make([]*roce.QP, p)
	for x := range nodes {
		from := r.Workers[j.rankOf(x)]
		for _, c := range j.children[x] {
			to := r.Workers[j.rankOf(c)]
			if x == 0 { // the gradients' connection, the other way
				j.down[x] = append(j.down[x], j.conn[to.Rank][1])
				j.in[to.Rank] = j.conn[to.Rank][0]
			} else {
				j.down[x] = append(j.down[x], newQP(from))
				j.in[to.Rank] = newQP(to)
			}
			from.SendWant += j.nmsg
		}
	}
	return j, nil
}

// connect connects every QP pair; initial PSNs come from the job's seed.
func (j *waJob) Connect() error {
	r := j.r
	rng := rand.New(rand.NewPCG(r.Cfg.Seed, 0x3A77E6A7))
	psn := func() uint32 { return uint32(rng.Uint64()) & 0xFFFFFF }
	maxWR := 2*j.nmsg + 1
	base := roce.Config{MTU: r.Cfg.MTU, Timeout: r.Cfg.Timeout, RetryCnt: r.Cfg.RetryCnt, RNRRetry: 7, MinRNRTimer: 1,
		MaxSendWR: maxWR, MaxRecvWR: maxWR, Profile: r.Cfg.NIC,
		AdaptiveTimeout: r.Fab.Live()} // the wall clock's round trips are the machine's (roce/rto.go)
	pair := func(a, b *job.Worker, qa, qb *roce.QP, markA bool) error {
		if !r.Fab.Reachable(a.NIC, b.NIC) || !r.Fab.Reachable(b.NIC, a.NIC) {
			return fmt.Errorf("job %s: rank %d (%s) and rank %d (%s) have no path between them in the topology", r.Name, a.Rank, a.NIC.Name, b.Rank, b.NIC.Name)
		}
		x, y := psn(), psn()
		ca, cb := base, base
		ca.SQPSN, ca.RQPSN = x, y
		cb.SQPSN, cb.RQPSN = y, x
		pa := r.PathTo(a.NIC, b.NIC, qb.QPN())
		if markA {
			pa = job.MarkPath(pa)
		}
		if err := qa.Connect(pa, ca); err != nil {
			return err
		}
		return qb.Connect(r.PathTo(b.NIC, a.NIC, qa.QPN()), cb)
	}
	agg := r.Workers[j.p]
	for i, c := range j.conn {
		if err := pair(r.Workers[i], agg, c[0], c[1], r.Cfg.Compress != 0); err != nil {
			return err
		}
	}
	for x := 1; x <= j.p; x++ { // the tree's edges between workers
		from := r.Workers[j.rankOf(x)]
		for k, c := range j.children[x] {
			to := r.Workers[j.rankOf(c)]
			if err := pair(from, to, j.down[x][k], j.in[to.Rank], false); err != nil {
				return err
			}
		}
	}
	return nil
}

// peerOf is the rank at the other end of w's QP q (for error messages):
// a worker's gradient connection, the connections the sum goes down, and
// a worker's from its tree parent.
func (j *waJob) PeerOf(w *job.Worker, q job.Endpoint) int {
	for i, c := range j.conn {
		switch {
		case w.Rank == j.p && q == job.Endpoint(c[1]):
			return i
		case w.Rank == i && q == job.Endpoint(c[0]):
			return j.p
		}
	}
	x := j.node(w.Rank)
	for k, d := range j.down[x] {
		if q == job.Endpoint(d) {
			return j.rankOf(j.children[x][k])
		}
	}
	if w.Rank < j.p && q == job.Endpoint(j.in[w.Rank]) {
		for parent, kids := range j.children {
			if slices.Contains(kids, x) {
				return j.rankOf(parent)
			}
		}
	}
	return -1
}

func (j *waJob) Start() error {
	r := j.r
	for i, c := range j.conn {
		w := r.Workers[i]
		if !w.Local {
			continue
		}
		for m := range j.nmsg {
			if err := c[1].PostRecv(roce.RecvWR{ID: uint64(m)}); err != nil {
				return err
			}
		}
		for m := range j.nmsg { // the sum, from the aggregator or the tree parent
			if err := j.in[i].PostRecv(roce.RecvWR{ID: uint64(m)}); err != nil {
				return err
			}
		}
		if err := j.sendGradient(i, 0); err != nil {
			return err
		}
	}
	return nil
}

// sendGradient sends worker i's message m of its tensor, generated from
// its stream into the worker's message buffer.
func (j *waJob) sendGradient(i, m int) error {
	if m >= j.nmsg {
		return nil
	}
	lo, hi := j.msgRange(m)
	buf := j.gradBuf[i][:hi-lo]
	j.own[i].MoveTo(int64(lo / j.r.Cfg.DType.Size()))
	j.own[i].Fill(buf)
	if j.codec != nil {
		j.gradHop.Carries = "gradients"
		j.gradHop.Add(j.codec, j.r.Cfg.MTU, buf)
	}
	if err := j.conn[i][0].PostSend(roce.SendWR{ID: uint64(m), Opcode: roce.WRWriteImm, Local: buf,
		RemoteVA: j.grads[i].Addr + uint64(lo), RKey: j.grads[i].RKey, Imm: uint32(m), Signaled: true}); err != nil {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: post gradient message %d: %v", i, m, err)}
	}
	return nil
}

// downWR marks the work requests of the sum's way down.
const downWR = 1 << 40

// nameWR names a WR by its leg and message; on its QP, WR m is message m.
func (j *waJob) NameWR(c roce.Completion) string {
	if m := c.WRID &^ downWR; c.WRID&downWR != 0 {
		return fmt.Sprintf("message %d of 0..%d of the sum (WR %d, %s)", m, j.nmsg-1, m, c.Opcode)
	}
	return fmt.Sprintf("gradient message %d of 0..%d (WR %d, %s)", c.WRID, j.nmsg-1, c.WRID, c.Opcode)
}

func (j *waJob) msgRange(m int) (int, int) {
	lo := m * j.msgB
	return lo, min(lo+j.msgB, int(j.r.Cfg.TensorBytes))
}

func (j *waJob) OnCompletion(w *job.Worker) {
	j.r.Drain(w, func(c roce.Completion) {
		if !c.Recv {
			w.SendDone++
			if c.WRID&downWR != 0 {
				j.sent(w)
			} else if err := j.sendGradient(w.Rank, int(c.WRID)+1); err != nil {
				j.r.Err = err
			}
			return
		}
		if err := j.arrive(w, c); err != nil {
			j.r.Err = err
		}
	})
}

// arrive: at the aggregator a worker's message (summed once all p are
// in); at a worker a message of the sum.
func (j *waJob) arrive(w *job.Worker, c roce.Completion) error {
	m := int(c.Imm)
	if !c.HasImm || m >= j.nmsg {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: unexpected message (imm %#x)", w.Rank, c.Imm)}
	}
	w.RecvDone++
	lo, hi := j.msgRange(m)
	if w.Rank == j.p {
		if j.arrived[m]++; j.arrived[m] < j.p {
			return nil
		}
		sum := j.sum[lo:hi]
		copy(sum, j.grads[0].Buf[lo:hi])
		for i := 1; i < j.p; i++ {
			tensor.Add(j.r.Cfg.DType, sum, j.grads[i].Buf[lo:hi])
		}
		if waTamper != nil {
			waTamper(m, sum)
		}
		if j.bcast == job.BcastWorkerTree {
			if err := j.postSum(0, 0, m); err != nil {
				return err
			}
		}
		if j.summed++; j.summed == j.nmsg {
			w.DoneAt = j.r.Fab.Clock.Now()
			if j.bcast != job.BcastWorkerTree {
				return j.sendDown(0)
			}
		}
		return nil
	}
	if j.got[w.Rank][m] {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: message %d of the sum arrived twice", w.Rank, m)}
	}
	j.got[w.Rank][m] = true
	j.verify(w, m, j.results[w.Rank].Buf[lo:hi])
	if waSeen != nil {
		waSeen(w.Rank, m, j.results[w.Rank].Buf[lo:hi])
	}
	if w.RecvDone == w.RecvWant {
		w.DoneAt = j.r.Fab.Clock.Now()
		if j.bcast != job.BcastUnicast {
			return j.sendDown(j.node(w.Rank))
		}
	}
	return nil
}

// sendDown sends the whole sum from node x to its next child.
func (j *waJob) sendDown(x int) error {
	k := j.nextKid[x]
	if k >= len(j.children[x]) {
		return nil
	}
	j.pending[x] = j.nmsg
	for m := range j.nmsg {
		if err := j.postSum(x, k, m); err != nil {
			return err
		}
	}
	return nil
}

// postSum WRITEs message m of the sum from node x to its k-th child.
func (j *waJob) postSum(x, k, m int) error {
	src := j.sum
	if x != 0 {
		src = j.results[j.rankOf(x)].Buf
	}
	child := j.rankOf(j.children[x][k])
	dst := j.results[child]
	lo, hi := j.msgRange(m)
	if err := j.down[x][k].PostSend(roce.SendWR{ID: downWR | uint64(m), Opcode: roce.WRWriteImm, Local: src[lo:hi],
		RemoteVA: dst.Addr + uint64(lo), RKey: dst.RKey, Imm: uint32(m), Signaled: true}); err != nil {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: post the sum to rank %d: %v", j.rankOf(x), child, err)}
	}
	return nil
}

// sent: one of node w's WRITEs down the tree is acknowledged; once the
// current child has all of them, the next child's turn.
func (j *waJob) sent(w *job.Worker) {
	x := j.node(w.Rank)
	if j.pending[x]--; j.pending[x] == 0 {
		j.nextKid[x]++
		if err := j.sendDown(x); err != nil {
			j.r.Err = err
		}
	}
}

// verify checks message m of worker w's sum against the reference.
func (j *waJob) verify(w *job.Worker, m int, got []byte) {
	e := j.expected[m]
	if e == nil {
		e = j.expectedSum(m)
		j.expected[m] = e
	}
	if at := [2]int{m, w.Rank}; at[0] < j.mmAt[0] || at[0] == j.mmAt[0] && at[1] < j.mmAt[1] {
		lo, _ := j.msgRange(m)
		if mm := firstDiff(j.r.Cfg.DType, w.Rank, int64(lo), got, e.sum); mm != nil {
			j.mismatch, j.mmAt = mm, at
		}
	}
	if e.exact != nil {
		j.maxErr = job.MaxAbsDiff(got, e.exact, j.maxErr)
	}
	if e.left--; e.left == 0 {
		delete(j.expected, m)
	}
}

// expectedSum is message m summed in rank order, each worker's copy as
// the gradient leg delivers it.
func (j *waJob) expectedSum(m int) *expectedMsg {
	lo, hi := j.msgRange(m)
	d := j.r.Cfg.DType
	off := int64(lo / d.Size())
	local := 0
	for _, w := range j.r.Workers[:j.p] {
		if w.Local {
			local++
		}
	}
	e := &expectedMsg{k: m, sum: make([]byte, hi-lo), left: local}
	if j.codec != nil {
		e.exact = make([]byte, hi-lo)
	}
	piece := j.piece[:hi-lo]
	for i := range j.p {
		st := j.expSt[i]
		st.MoveTo(off)
		st.Fill(piece)
		if j.codec != nil { // the exact sum of the inputs, then the gradient leg's trip
			if i == 0 {
				copy(e.exact, piece)
			} else {
				tensor.Add(d, e.exact, piece)
			}
			job.PacketTrip(j.codec, j.r.Cfg.MTU, piece)
		}
		if i == 0 {
			copy(e.sum, piece)
		} else {
			tensor.Add(d, e.sum, piece)
		}
	}
	return e
}

func (j *waJob) Check() *job.Mismatch { return j.mismatch }

func (j *waJob) MaxAbsErr() float64 { return j.maxErr }

func (j *waJob) HopReports() []job.HopReport { return []job.HopReport{j.gradHop} }
