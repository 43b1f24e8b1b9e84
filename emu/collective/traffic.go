package collective

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/internal/clock"
	"github.com/inaemu/inaemu/roce"
)

// The traffic job (mode traffic): no collective, only flows, the load a
// congestion experiment puts on a network (docs/traffic.md). A flow is one
// RC QP pair from a source rank to a destination rank; the source moves
// the flow's bytes with RDMA WRITEs of the job's message size (msg_len ×
// MTU), at most Depth of them outstanding (perftest's --tx-depth), from
// the job's start plus the flow's own start, optionally paced by the
// application at a rate: WR m is not posted before the flow's first post
// plus the time its bytes before m take at that rate.
//
// The destination's region is a ring of Depth message slots, WR m writing
// slot m mod Depth; WR m+Depth is posted only after m completed, so a
// slot is never written while its message is being checked. When a WRITE
// completes (the ACK says it is in the destination's memory), its slot
// must hold the source's bytes bit for bit. The bytes are made from the
// flow's seed where they are needed (a counter-based generator: byte
// offset o is byte o mod 8 of a hash of (seed, o/8)), so a flow of any
// size holds 2 × Depth messages, never its whole size.
//
// Patterns: incast (every rank but the sink → the sink, the last rank
// unless named), all-to-all (every ordered pair), permutation (a
// derangement drawn from the job's seed), or flows listed one by one.

// Traffic is the traffic job's mode.
const Traffic job.Mode = "traffic"

// The patterns of a traffic job (job.Traffic.Pattern).
const (
	Incast      = "incast"
	AllToAll    = "all-to-all"
	Permutation = "permutation"
)

// TrafficDepth is a flow's default bound on outstanding WRs. perftest's
// ib_write_bw posts 128 (--tx-depth) of 64 KiB by default, 8 MiB in
// flight per QP; with the job's default 170 KiB messages 16 are 2.7 MiB,
// the same order, and an incast of a few flows stays within a switch
// buffer's few MiB per port when it has one.
const TrafficDepth = 16

// maxTrafficDepth bounds Depth: a flow holds 2 × Depth messages.
const maxTrafficDepth = 1024

// maxFlowBytes bounds a flow, as --tensor is bounded.
const maxFlowBytes = 4 << 30

// trafficQPN is the first QPN of a traffic job's QPs on a NIC: above
// every ring QPN (qpnPair) and wa's (0x10000 up), 1024 per job and NIC.
const (
	trafficQPN   = 0x40000
	maxQPsPerNIC = 1024
)

// flowRKeyBase: a flow's destination region has rkey flowRKeyBase +
// job index << 16 + flow, apart from the ranks' (job.Job.RKey).
const flowRKeyBase = 0x0100_0000

func init() {
	job.Register(job.Algorithm{Mode: Traffic,
		Doc:            "no collective: RC RDMA WRITE flows between the ranks (incast, all-to-all, permutation or listed), each checked bit for bit, with per-flow completion times and throughput timelines",
		New:            func(r *job.Job) (job.Collective, error) { return newTrafficJob(r) },
		OwnConnections: true, Streams: true, Memory: trafficMemory, PointToPoint: true,
		Validate: func(c *job.Config) error {
			if c.Devices != nil {
				return &job.ConfigError{Err: errors.New("--mode traffic runs on emulated links (not on TAPs)")}
			}
			return nil
		},
		ValidateJob: func(j job.JobConfig) error { _, err := PlanFlows(j); return err },
		ValidateRun: checkTraffic,
	})
}

// checkTraffic refuses traffic settings given to a run (or a job) that
// has no traffic job to take them: they would be ignored without a word.
func checkTraffic(c *job.Config, jobs []job.JobConfig) error {
	for i, js := range c.Jobs {
		if js.Traffic == nil {
			continue
		}
		mode := js.Mode
		if mode == "" {
			mode = c.Mode
		}
		if mode != Traffic {
			name := js.Name
			if name == "" {
				name = fmt.Sprintf("job%d", i)
			}
			return &job.ConfigError{Err: fmt.Errorf("job %s: flows and traffic patterns are a traffic job's (this job is %s)", name, mode)}
		}
	}
	if c.Traffic == nil {
		return nil
	}
	for _, j := range jobs {
		if j.Cfg.Mode == Traffic {
			return nil
		}
	}
	return &job.ConfigError{Err: fmt.Errorf("traffic settings: only --mode traffic takes them (this run is %s)", c.Mode)}
}

// FlowPlan is one flow of a traffic job, resolved: its ranks by index.
type FlowPlan struct {
	job.Flow
	Src, Dst int // ranks
}

// trafficOf is the job's traffic settings (the zero value: an incast).
func trafficOf(c *job.Config) job.Traffic {
	if c.Traffic == nil {
		return job.Traffic{}
	}
	return *c.Traffic
}

// PlanFlows resolves a traffic job's flows: its pattern over its ranks
// (a permutation drawn from the job's seed) or its listed flows, each
// checked (ranks that are the job's, distinct ends, positive bytes, a
// rate the links can carry). Errors are one line naming the job.
func PlanFlows(j job.JobConfig) ([]FlowPlan, error) {
	bad := func(f string, a ...any) error { return fmt.Errorf("job %s: "+f, append([]any{j.Name}, a...)...) }
	t := trafficOf(&j.Cfg)
	n := len(j.Ranks)
	if g := job.GPURank(j.Ranks); g != "" {
		return nil, bad("a traffic job's ranks are host NICs, not GPUs (%s)", g)
	}
	rankOf := map[string]int{}
	for i, name := range j.Ranks {
		rankOf[name] = i
	}
	switch {
	case t.Depth < 0 || t.Depth > maxTrafficDepth:
		return nil, bad("depth %d: want 1..%d outstanding WRs per flow (0: %d)", t.Depth, maxTrafficDepth, TrafficDepth)
	case t.Bin < 0:
		return nil, bad("bin %v: must not be negative", t.Bin)
	case t.Bytes < 0 || t.Bytes > maxFlowBytes:
		return nil, bad("flow bytes %d: want 1..%d (0: the tensor size)", t.Bytes, int64(maxFlowBytes))
	case t.Pattern != "" && len(t.Flows) > 0:
		return nil, bad("traffic %s and %d listed flows: give a pattern or flows, not both", t.Pattern, len(t.Flows))
	case t.Sink != "" && t.Pattern != "" && t.Pattern != Incast:
		return nil, bad("sink %s: only an incast has a sink (this is %s)", t.Sink, t.Pattern)
	}
	bytes := t.Bytes
	if bytes == 0 {
		bytes = j.Cfg.TensorBytes
	}
	var out []FlowPlan
	add := func(s, d int) {
		out = append(out, FlowPlan{Flow: job.Flow{From: j.Ranks[s], To: j.Ranks[d], Bytes: bytes, Rate: t.Rate}, Src: s, Dst: d})
	}
	pattern := t.Pattern
	if pattern == "" && len(t.Flows) == 0 {
		pattern = Incast
	}
	if pattern != "" && n < 2 {
		return nil, bad("traffic %s needs at least 2 ranks, and the job has %d", pattern, n)
	}
	switch pattern {
	case "":
		for i, f := range t.Flows {
			s, okS := rankOf[f.From]
			d, okD := rankOf[f.To]
			what := fmt.Sprintf("flow %d (%s -> %s)", i, f.From, f.To)
			switch {
			case !okS:
				return nil, bad("%s: %s is not a rank of the job (ranks %s)", what, f.From, strings.Join(j.Ranks, ", "))
			case !okD:
				return nil, bad("%s: %s is not a rank of the job (ranks %s)", what, f.To, strings.Join(j.Ranks, ", "))
			case s == d:
				return nil, bad("%s: a flow goes from one rank to another, not to itself", what)
			case f.Bytes <= 0 || f.Bytes > maxFlowBytes:
				return nil, bad("%s: bytes %d: want 1..%d", what, f.Bytes, int64(maxFlowBytes))
			case f.Start < 0:
				return nil, bad("%s: start %v: must not be negative", what, f.Start)
			}
			out = append(out, FlowPlan{Flow: f, Src: s, Dst: d})
		}
	case Incast:
		sink := n - 1
		if t.Sink != "" {
			k, ok := rankOf[t.Sink]
			if !ok {
				return nil, bad("sink %s is not a rank of the job (ranks %s)", t.Sink, strings.Join(j.Ranks, ", "))
			}
			sink = k
		}
		for s := range n {
			if s != sink {
				add(s, sink)
			}
		}
	case AllToAll:
		for s := range n {
			for d := range n {
				if s != d {
					add(s, d)
				}
			}
		}
	case Permutation:
		for s, d := range Derangement(j.Cfg.Seed, n) {
			add(s, d)
		}
	default:
		return nil, bad("traffic %q: want %s, %s or %s", pattern, Incast, AllToAll, Permutation)
	}
	qps := map[string]int{}
	for i, f := range out {
		what := fmt.Sprintf("flow %d (%s -> %s)", i, f.From, f.To)
		link := min(linkRate(&j.Cfg, f.From), linkRate(&j.Cfg, f.To))
		switch {
		case f.Rate < 0 || math.IsNaN(f.Rate) || math.IsInf(f.Rate, 0):
			return nil, bad("%s: rate %v: want a positive number of bits per second (0: unpaced)", what, f.Rate)
		case f.Rate > link:
			return nil, bad("%s: rate %.6g bit/s is above its link's %.6g bit/s", what, f.Rate, link)
		}
		qps[f.From]++
		qps[f.To]++
		if qps[f.From] > maxQPsPerNIC || qps[f.To] > maxQPsPerNIC {
			return nil, bad("more than %d flows at one NIC", maxQPsPerNIC)
		}
	}
	return out, nil
}

// linkRate is the rate of the link of the rank's NIC (name: h3, h3:nic1).
func linkRate(c *job.Config, name string) float64 {
	if c.Topology == nil {
		return c.Link.Rate
	}
	host, p := name, 0
	if h, nicN, ok := strings.Cut(name, ":nic"); ok {
		if _, err := fmt.Sscan(nicN, &p); err == nil {
			host = h
		}
	}
	n, ok := c.Topology.Node(host)
	if !ok || p >= len(n.Links) {
		return c.Link.Rate
	}
	if r := c.Topology.Links[n.Links[p]].Rate; r > 0 {
		return r
	}
	return c.Link.Rate
}

// Derangement is the permutation pattern's destinations: d[s] is rank
// s's, a uniformly drawn permutation of 0..n-1 without a fixed point
// (Fisher-Yates shuffles from the seed, redrawn until no rank is its own:
// on average e ≈ 2.7 draws), so each rank sends to exactly one other and
// receives from exactly one.
func Derangement(seed uint64, n int) []int {
	rng := rand.New(rand.NewPCG(seed, 0xDE7A26E))
	d := make([]int, n)
	for {
		for i := range d {
			d[i] = i
		}
		for i := n - 1; i > 0; i-- {
			k := rng.IntN(i + 1)
			d[i], d[k] = d[k], d[i]
		}
		fixed := false
		for i, v := range d {
			fixed = fixed || i == v
		}
		if !fixed {
			return d
		}
	}
}

// JainIndex is Jain's fairness index of the rates, (Σx)² / (n·Σx²)
// (Jain, Chiu, Hawe, DEC-TR-301, 1984): 1 when all are equal, 1/n when
// one has everything. No rates, or all zero, is 1 (nothing is unfair).
func JainIndex(rates []float64) float64 {
	var s, s2 float64
	for _, x := range rates {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 1
	}
	return s * s / (float64(len(rates)) * s2)
}

// WindowRates is each flow's throughput in bits per second over the
// window [from, to) of virtual time (since the run's start), from its
// timeline (a bin partly inside counts in proportion).
func WindowRates(flows []job.FlowResult, jobStart, from, to time.Duration) []float64 {
	out := make([]float64, len(flows))
	if to <= from {
		return out
	}
	for i, f := range flows {
		var b float64
		for k, v := range f.Timeline {
			lo := jobStart + time.Duration(int64(k)*f.BinNS)
			hi := lo + time.Duration(f.BinNS)
			ov := min(hi, to) - max(lo, from)
			if ov > 0 {
				b += float64(v) * float64(ov) / float64(f.BinNS)
			}
		}
		out[i] = b * 8 / (to - from).Seconds()
	}
	return out
}

type trafficFlow struct {
	FlowPlan
	idx        int
	src, dst   *job.Worker
	sq, dq     *roce.QP
	msgs       int
	slots      int    // messages in the rings: min(depth, msgs)
	local      []byte // the source's ring: what its WRs read
	region     *roce.MR
	seed       uint64
	next, done int
	started    bool
	t0, end    time.Duration
	posted     []time.Duration // per slot: when its WR was posted
	lastDone   time.Duration
	timer      clock.Timer
	armed      bool
	bins       []float64 // bytes delivered per bin (fractions: a WR spans bins)
}

type trafficJob struct {
	r      *job.Job
	msgB   int
	flows  []*trafficFlow
	bin    time.Duration
	start  time.Duration
	piece  []byte
	mm     *job.Mismatch
	mmFlow int
	total  int64
	byQP   map[*roce.QP]int // flow of a QP, for PeerOf
}

func newTrafficJob(r *job.Job) (*trafficJob, error) {
	cfg := r.Cfg
	if r.Fab.Live() {
		return nil, &job.ConfigError{Err: errors.New("--mode traffic runs on emulated links (not on TAPs)")}
	}
	plan, err := PlanFlows(job.JobConfig{Name: r.Name, Ranks: r.Ranks, Cfg: cfg})
	if err != nil {
		return nil, &job.ConfigError{Err: err}
	}
	t := trafficOf(&cfg)
	depth := t.Depth
	if depth == 0 {
		depth = TrafficDepth
	}
	j := &trafficJob{r: r, msgB: cfg.MsgLen * cfg.MTU, byQP: map[*roce.QP]int{}}
	j.piece = make([]byte, j.msgB)
	qpn := map[*job.Worker]uint32{}
	newQP := func(w *job.Worker) *roce.QP {
		k := qpn[w]
		qpn[w]++
		q := w.NIC.NewQP(trafficQPN + uint32(r.Index)<<10 + k)
		w.QPs = append(w.QPs, q)
		return q
	}
	for i, p := range plan {
		f := &trafficFlow{FlowPlan: p, idx: i, src: r.Workers[p.Src], dst: r.Workers[p.Dst]}
		f.msgs = int(job.CeilDiv(p.Bytes, int64(j.msgB)))
		f.slots = min(depth, f.msgs)
		ring := min(int64(f.slots)*int64(j.msgB), p.Bytes)
		f.local = make([]byte, ring)
		f.posted = make([]time.Duration, f.slots)
		f.seed = verbsMix(cfg.Seed, 0x7AFF1C, uint64(i))
		f.sq, f.dq = newQP(f.src), newQP(f.dst)
		j.byQP[f.sq], j.byQP[f.dq] = i, i
		f.region = &roce.MR{Addr: r.RecvVA, Buf: make([]byte, ring), RKey: flowRKeyBase + uint32(r.Index)<<16 + uint32(i),
			Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
		if err := f.dst.NIC.PD.Register(f.region); err != nil {
			return nil, err
		}
		f.src.SendWant += f.msgs
		f.src.RecvWant += f.msgs
		j.total += p.Bytes
		j.flows = append(j.flows, f)
	}
	j.bin = t.Bin
	if j.bin == 0 {
		j.bin = autoBin(plan, func(name string) float64 { return linkRate(&cfg, name) })
	}
	return j, nil
}

// autoBin is the timeline's bin when none is given: a hundredth of the
// span the job would take if every flow had its fair share of its
// busiest end's link (or its pacing rate, if lower), rounded up to 1, 2
// or 5 × 10^k ns, and at least 1 µs. A hundred points make a plot and
// leave fifty for a fairness window over the last half; a fixed width
// would give a second-long run 100,000 bins per flow, or a short incast
// a handful.
func autoBin(plan []FlowPlan, rate func(string) float64) time.Duration {
	out, in := map[int]int{}, map[int]int{}
	for _, f := range plan {
		out[f.Src]++
		in[f.Dst]++
	}
	var span float64
	for _, f := range plan {
		share := min(rate(f.From), rate(f.To)) / float64(max(out[f.Src], in[f.Dst]))
		if f.Rate > 0 {
			share = min(share, f.Rate)
		}
		span = max(span, f.Start.Seconds()+float64(f.Bytes)*8/share)
	}
	want := span * 1e9 / 100
	for b := int64(1000); ; b *= 10 {
		for _, m := range []int64{1, 2, 5} {
			if float64(b*m) >= want {
				return time.Duration(b * m)
			}
		}
	}
}

// Connect connects every flow's QP pair; initial PSNs come from the
// job's seed.
func (j *trafficJob) Connect() error {
	r := j.r
	rng := rand.New(rand.NewPCG(r.Cfg.Seed, 0x7AFF1C))
	psn := func() uint32 { return uint32(rng.Uint64()) & 0xFFFFFF }
	for _, f := range j.flows {
		a, b := f.src, f.dst
		if !r.Fab.Reachable(a.NIC, b.NIC) || !r.Fab.Reachable(b.NIC, a.NIC) {
			return fmt.Errorf("job %s: rank %d (%s) and rank %d (%s) have no path between them in the topology", r.Name, a.Rank, a.NIC.Name, b.Rank, b.NIC.Name)
		}
		base := roce.Config{MTU: r.Cfg.MTU, Timeout: r.Cfg.Timeout, RetryCnt: r.Cfg.RetryCnt, RNRRetry: 7, MinRNRTimer: 1,
			MaxSendWR: f.slots + 1, MaxRecvWR: 1, Profile: r.Cfg.NIC}
		x, y := psn(), psn()
		ca, cb := base, base
		ca.SQPSN, ca.RQPSN = x, y
		cb.SQPSN, cb.RQPSN = y, x
		if err := f.sq.Connect(r.PathTo(a.NIC, b.NIC, f.dq.QPN()), ca); err != nil {
			return err
		}
		if err := f.dq.Connect(r.PathTo(b.NIC, a.NIC, f.sq.QPN()), cb); err != nil {
			return err
		}
	}
	return nil
}

func (j *trafficJob) Start() error {
	c := j.r.Fab.Clock
	j.start = c.Now()
	for _, f := range j.flows {
		if !f.src.Local {
			continue
		}
		if f.Start == 0 {
			if err := j.begin(f); err != nil {
				return err
			}
			continue
		}
		f := f
		c.AfterFunc(f.Start, func() {
			if err := j.begin(f); err != nil && j.r.Err == nil {
				j.r.Err = err
			}
		})
	}
	return nil
}

// begin posts the flow's first WRs.
func (j *trafficJob) begin(f *trafficFlow) error {
	f.started, f.t0 = true, j.r.Fab.Clock.Now()
	f.lastDone = f.t0
	return j.post(f)
}

// msgRange is message m's bytes of flow f.
func (j *trafficJob) msgRange(f *trafficFlow, m int) (int64, int64) {
	lo := int64(m) * int64(j.msgB)
	return lo, min(lo+int64(j.msgB), f.Bytes)
}

// paceAt is when a flow paced at rate may post the WR whose bytes start
// at lo: its bytes before it at the rate after its first post.
func paceAt(t0 time.Duration, lo int64, rate float64) time.Duration {
	return t0 + time.Duration(math.Ceil(float64(lo)*8/rate*1e9))
}

// post posts the flow's next WRs while fewer than its slots are
// outstanding and, when paced, their time has come (else it sets the
// flow's timer for it).
func (j *trafficJob) post(f *trafficFlow) error {
	c := j.r.Fab.Clock
	now := c.Now()
	for f.next < f.msgs && f.next-f.done < f.slots {
		m := f.next
		lo, hi := j.msgRange(f, m)
		if f.Rate > 0 {
			if at := paceAt(f.t0, lo, f.Rate); at > now {
				if !f.armed {
					f.armed = true
					if f.timer == nil {
						f.timer = c.AfterFunc(at-now, func() { j.wake(f) })
					} else {
						f.timer.Reset(at - now)
					}
				}
				return nil
			}
		}
		s := m % f.slots
		off := s * j.msgB
		buf := f.local[off : off+int(hi-lo)]
		flowBytes(f.seed, lo, buf)
		wr := roce.SendWR{ID: uint64(f.idx)<<32 | uint64(m), Opcode: roce.WRWrite, Local: buf,
			RemoteVA: j.r.RecvVA + uint64(off), RKey: f.region.RKey, Signaled: true}
		if err := f.sq.PostSend(wr); err != nil {
			return &job.JobError{Msg: fmt.Sprintf("rank %d: flow %d (%s -> %s): post WRITE %d: %v", f.Src, f.idx, f.From, f.To, m, err)}
		}
		f.posted[s] = now
		f.next++
	}
	return nil
}

// wake posts a paced flow's WRs whose time has come.
func (j *trafficJob) wake(f *trafficFlow) {
	f.armed = false
	if j.r.Err != nil {
		return
	}
	if err := j.post(f); err != nil {
		j.r.Err = err
	}
}

// flowBytes writes the flow's bytes from offset off into buf: byte o is
// byte o mod 8 (little-endian) of a SplitMix64 hash of (seed, o/8), so
// any piece is made without what comes before it.
func flowBytes(seed uint64, off int64, buf []byte) {
	i := 0
	if r := int(off % 8); r != 0 { // a head up to the next word
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], verbsMix(seed, 0xB17E5, uint64(off/8)))
		i = copy(buf, w[r:])
	}
	for ; i+8 <= len(buf); i += 8 {
		binary.LittleEndian.PutUint64(buf[i:], verbsMix(seed, 0xB17E5, uint64((off+int64(i))/8)))
	}
	if i < len(buf) {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], verbsMix(seed, 0xB17E5, uint64((off+int64(i))/8)))
		copy(buf[i:], w[:])
	}
}

func (j *trafficJob) NameWR(c roce.Completion) string {
	f := j.flows[c.WRID>>32]
	return fmt.Sprintf("flow %d (%s -> %s) WRITE %d of 0..%d", f.idx, f.From, f.To, uint32(c.WRID), f.msgs-1)
}

// PeerOf is the rank at the other end of one of w's flows' QPs.
func (j *trafficJob) PeerOf(w *job.Worker, q job.Endpoint) int {
	qp, _ := q.(*roce.QP)
	i, ok := j.byQP[qp]
	if !ok {
		return -1
	}
	if f := j.flows[i]; f.sq == qp {
		return f.Dst
	}
	return j.flows[i].Src
}

func (j *trafficJob) OnCompletion(w *job.Worker) {
	j.r.Drain(w, func(c roce.Completion) {
		if c.Recv || c.WRID>>32 >= uint64(len(j.flows)) {
			j.r.Err = &job.JobError{Msg: fmt.Sprintf("rank %d: a completion no flow posted (WR %d)", w.Rank, c.WRID)}
			return
		}
		f := j.flows[c.WRID>>32]
		m := int(uint32(c.WRID))
		if m != f.done {
			j.r.Err = &job.JobError{Msg: fmt.Sprintf("rank %d: flow %d: WRITE %d completed when %d was due", w.Rank, f.idx, m, f.done)}
			return
		}
		now := j.r.Fab.Clock.Now()
		j.verify(f, m)
		lo, hi := j.msgRange(f, m)
		j.deliver(f, max(f.posted[m%f.slots], f.lastDone), now, hi-lo)
		f.lastDone = now
		f.done++
		w.SendDone++
		w.RecvDone++
		if f.done == f.msgs {
			f.end = now
		}
		if w.RecvDone == w.RecvWant {
			w.DoneAt = now
		}
		if err := j.post(f); err != nil {
			j.r.Err = err
		}
	})
}

// trafficTamper, when a test sets it, alters what flow f's WRITE m left
// in the destination's region before it is checked.
var trafficTamper func(flow, m int, landed []byte)

// verify checks that WRITE m of flow f put the source's bytes in the
// destination's slot.
func (j *trafficJob) verify(f *trafficFlow, m int) {
	lo, hi := j.msgRange(f, m)
	off := m % f.slots * j.msgB
	got := f.region.Buf[off : off+int(hi-lo)]
	if trafficTamper != nil {
		trafficTamper(f.idx, m, got)
	}
	want := j.piece[:hi-lo]
	flowBytes(f.seed, lo, want)
	if bytes.Equal(got, want) || (j.mm != nil && j.mmFlow <= f.idx) {
		return
	}
	for i := range want {
		if got[i] != want[i] {
			j.mm, j.mmFlow = &job.Mismatch{Rank: f.Dst, Element: lo + int64(i),
				Got:  fmt.Sprintf("byte %#02x (flow %d %s -> %s, WRITE %d)", got[i], f.idx, f.From, f.To, m),
				Want: fmt.Sprintf("%#02x", want[i])}, f.idx
			return
		}
	}
}

// deliver spreads n bytes evenly over [a, b] into the flow's bins (all
// in b's bin when the interval is empty).
func (j *trafficJob) deliver(f *trafficFlow, a, b time.Duration, n int64) {
	a, b = a-j.start, b-j.start
	last := int(b / j.bin)
	for len(f.bins) <= last {
		f.bins = append(f.bins, 0)
	}
	if b <= a {
		f.bins[last] += float64(n)
		return
	}
	per := float64(n) / float64(b-a)
	for k := int(a / j.bin); k <= last; k++ {
		lo, hi := max(a, time.Duration(k)*j.bin), min(b, time.Duration(k+1)*j.bin)
		if hi > lo {
			f.bins[k] += per * float64(hi-lo)
		}
	}
}

func (j *trafficJob) Check() *job.Mismatch { return j.mm }

// Report: the job moved its flows' bytes, and each flow's figures.
func (j *trafficJob) Report(jr *job.JobResult) {
	jr.Bytes = j.total
	for _, f := range j.flows {
		fr := job.FlowResult{From: f.From, To: f.To, Bytes: f.Bytes, RateBps: f.Rate, BinNS: int64(j.bin)}
		if f.started {
			fr.StartNS = int64(f.t0)
		}
		if f.done == f.msgs && f.end > f.t0 {
			fr.FCTNS = int64(f.end - f.t0)
			fr.GoodputGbps = float64(f.Bytes) * 8 / float64(fr.FCTNS)
		}
		// Whole bytes per bin: the rounded running sum's steps, so the
		// bins add up to what was delivered exactly.
		fr.Timeline = make([]int64, len(f.bins))
		var sum float64
		var prev int64
		for k, v := range f.bins {
			sum += v
			cum := int64(math.Round(sum))
			fr.Timeline[k], prev = cum-prev, cum
		}
		jr.Flows = append(jr.Flows, fr)
	}
}

// trafficMemory: per flow its two rings of min(depth, messages)
// messages, and its QPs' queues.
func trafficMemory(cfg job.Config, e *job.MemoryEstimate) (int64, bool) {
	t := trafficOf(&cfg)
	depth := int64(t.Depth)
	if depth <= 0 {
		depth = TrafficDepth
	}
	w := int64(cfg.Workers)
	msgB := int64(cfg.MsgLen) * int64(cfg.MTU)
	flows := w - 1
	switch t.Pattern {
	case AllToAll:
		flows = w * (w - 1)
	case Permutation:
		flows = w
	case "":
		if len(t.Flows) > 0 {
			flows = int64(len(t.Flows))
		}
	}
	bytes := t.Bytes
	if bytes == 0 {
		bytes = cfg.TensorBytes
	}
	ring := min(depth*msgB, bytes)
	if len(t.Flows) > 0 {
		ring = depth * msgB
	}
	e.Buffers = flows*2*ring + msgB
	e.Queues = flows * 2 * (depth + 2) * job.WRBytes
	e.Largest = ring
	fanIn := min(flows, w-1) // flows one NIC's link may carry at once
	return depth*int64(cfg.MsgLen)*fanIn + 2, false
}

var _ job.Reporter = (*trafficJob)(nil)
var _ job.Connector = (*trafficJob)(nil)
