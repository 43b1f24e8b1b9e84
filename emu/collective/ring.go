package collective

import (
	"errors"
	"fmt"
	"github.com/inaemu/inaemu/emu/job"
	"slices"

	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// ringJob is Ring-AllReduce over the same RC connections (the switch only
// forwards): the tensor is cut into H chunks; in reduce-scatter step s
// (s = 0..H-2) rank r sends chunk (r-s) mod H to r+1, which adds it into
// its own copy; after H-1 steps rank r holds the full sum of chunk
// (r+1) mod H. In all-gather step t (s = H-1+t) rank r sends chunk
// (r+1-t) mod H on, and r+1 keeps it.
//
// Summation order (what the reference reproduces): chunk c starts at rank
// c and each later rank adds its own, so chunk c is
// ((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c+H-1}, indices mod H.
//
// With compression in the NICs (Config.Compress) every hop's data is what
// the engines make of it (packetTrip), so chunk c is
// T(...T(T(x_c) + x_{c+1}) + ... + x_{c+H-1}) with T one trip; the owner
// of a reduced chunk applies T to its own copy too, as if it had sent it
// to itself, so that every rank ends with the same bits (T is a
// projection: the copies forwarded in all-gather stay what the owner
// holds). Each result is also measured against the exact rank-order sum
// (CompressionReport.MaxAbsErr).
//
// Each chunk travels as messages of MsgLen×MTU bytes (RDMA WRITE with
// immediate = step<<24 | message), pipelined: message j of step s+1 goes
// as soon as message j of step s has arrived, as NCCL slices a chunk.
//
// Memory does not grow with the tensor. A rank's own chunk pieces are
// generated from its tensor's stream when they are needed; it starts a
// message of step 0 only while fewer than ringWindow of its WRITEs are
// unacknowledged (the messages of later steps go as soon as what they
// depend on arrives, as before), so its send queue stays about a window
// deep: what it forwards arrives no faster than its own link sends,
// except while that link is stalled (a retransmission timeout), when
// what arrives meanwhile waits. Every message's buffer returns to a pool
// when its WRITE completes. What arrives lands in a receive MR of two
// messages that wraps: in the emulator the rank takes each message out
// at the virtual instant it completes, and the next message on the
// connection lands at least a frame's serialisation later. (On live
// links completions are polled while frames keep landing, so there the
// MR covers every step, as before.) Every result is checked as it
// arrives against a rank-order sum made once per message for all local
// ranks. With at most ringWindow messages per chunk the job sends
// exactly what it sent when it held whole tensors.
type ringJob struct {
	r         *job.Job
	n         int
	msgB      int        // bytes per message
	bounds    []int      // chunk c is bytes bounds[c]:bounds[c+1]
	maxC      int        // largest chunk, bytes: a step's span of the receive addresses
	steps     int        // 2(H-1)
	window    int        // WRITEs unacknowledged beyond which step 0 waits
	arrived   [][][]bool // per rank, step, message
	ranks     []ringRank
	own       []job.Source            // per rank: its tensor, for its own pieces
	expSt     []job.Source            // per rank: its tensor, for the expected sums
	out       [][]byte                // per rank: where its result is kept (nil: checked only)
	expected  map[[2]int]*expectedMsg // (chunk, message) -> rank-order sum
	spareSums []*expectedMsg          // checked by every local rank, to reuse
	nLocal    int
	piece     []byte // scratch
	mismatch  *job.Mismatch
	mmAt      [3]int            // (chunk, rank, message) of mismatch: the first in that order is kept
	codec     *inceptionn.Codec // the NICs' codec when the job compresses
	maxErr    float64           // largest |result - exact sum|, when it does
	hops      []job.HopReport   // per step, what it carried, when it does
}

// ringRank is one rank's sending state.
type ringRank struct {
	next0 int               // the next step-0 message to send
	inUse map[uint64][]byte // WR ID -> its buffer, until the WRITE completes (ACKed): the WRITEs outstanding
	free  [][]byte          // buffers of msgB bytes to reuse
}

// ringWindow is how many WRITEs a rank keeps unacknowledged before it
// starts another message of step 0: four NetReduce windows and a margin,
// many times what keeps a link busy.
func ringWindow(cfg job.Config) int { return netReduceSlots(cfg) }

// ringRecvSlots is the receive MR's size in messages.
const ringRecvSlots = 2

// ringTamper, when a test sets it, alters what rank computed from message
// (step, msg) before the rank checks and forwards it: a ring that sums or
// forwards wrongly, which the result check must catch.
var ringTamper func(rank, step, msg int, out []byte)

// Ring is the ring job's mode: Ring-AllReduce, reduce-scatter then
// all-gather; the switch only forwards.
const Ring job.Mode = "ring"

func init() {
	job.Register(job.Algorithm{Mode: Ring, Doc: "Ring-AllReduce, reduce-scatter then all-gather; the switch only forwards", New: func(r *job.Job) (job.Collective, error) { return newRingJob(r) },
		Compresses: true, Streams: true, Memory: ringMemory,
		Validate: func(c *job.Config) error {
			if c.TensorBytes/int64(c.DType.Size()) < int64(c.Workers) {
				return &job.ConfigError{Err: errors.New("--tensor: ring mode needs at least one element per worker")}
			}
			return nil
		}})
}

// ringMemory: per worker a receive MR of two messages and a pool of
// about a window of message buffers; per chunk about a window of expected
// sums (the tensor is generated and checked as it goes).
func ringMemory(cfg job.Config, e *job.MemoryEstimate) (int64, bool) {
	w, t, mtu := int64(cfg.Workers), cfg.TensorBytes, int64(cfg.MTU)
	msgB := int64(cfg.MsgLen) * mtu
	sz := int64(cfg.DType.Size())
	maxC := job.CeilDiv(t/sz, w) * sz
	steps := 2 * (w - 1)
	perChunk := job.CeilDiv(maxC, msgB)
	wr := steps*perChunk + 1
	// Per worker a receive MR of two messages and a pool of about a
	// window of message buffers; per chunk about a window of
	// expected sums (the tensor is generated and checked as it goes).
	recv := min(steps*maxC, ringRecvSlots*msgB)
	if cfg.Devices != nil { // live: the receive MR covers every step
		recv = steps * maxC
	}
	pool := min(int64(ringWindow(cfg)), perChunk) + 8 // step 0's and a few on their way on
	pool *= min(msgB, maxC)
	e.Buffers = w*(recv+2*pool) + msgB
	e.Queues = w*2*wr*job.WRBytes + w*(steps*perChunk+steps*24)
	e.Largest = max(recv, msgB)
	// A chunk's packets, or the window's if fewer: a rank starts
	// step 0's messages only while its WRITEs are about a window.
	return 2*min(job.CeilDiv(maxC, mtu), int64(ringWindow(cfg)+8)*int64(cfg.MsgLen)) + 2, false
}

func newRingJob(r *job.Job) (*ringJob, error) {
	cfg := r.Cfg
	n := cfg.Workers
	j := &ringJob{r: r, n: n, msgB: cfg.MsgLen * cfg.MTU, steps: 2 * (n - 1), window: ringWindow(cfg),
		expected: map[[2]int]*expectedMsg{}, mmAt: [3]int{n, n, 0}, codec: r.Codec()}
	sz := int64(cfg.DType.Size())
	elems := cfg.TensorBytes / sz
	for c := 0; c <= n; c++ {
		j.bounds = append(j.bounds, int(elems*int64(c)/int64(n)*sz))
	}
	for c := 0; c < n; c++ {
		j.maxC = max(j.maxC, j.bounds[c+1]-j.bounds[c])
	}
	j.piece = make([]byte, j.msgB)
	j.ranks = make([]ringRank, n)
	for _, w := range r.Workers {
		j.own = append(j.own, r.Input(w.Rank))
		j.expSt = append(j.expSt, r.Input(w.Rank))
		j.out = append(j.out, r.Output(w.Rank))
		j.ranks[w.Rank].inUse = map[uint64][]byte{}
		recv := j.steps * j.maxC
		if !r.Fab.Live() {
			recv = min(recv, ringRecvSlots*j.msgB)
		}
		w.RecvMR = &roce.MR{Addr: r.RecvVA, Buf: make([]byte, recv), Len: uint64(j.steps * j.maxC),
			RKey: r.RKey(w.Rank), Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
		if err := w.NIC.PD.Register(w.RecvMR); err != nil {
			return nil, err
		}
		arr := make([][]bool, j.steps)
		for s := range arr {
			k := j.msgCount(j.recvChunk(w.Rank, s))
			arr[s] = make([]bool, k)
			w.RecvWant += k
			w.SendWant += j.msgCount(j.sendChunk(w.Rank, s))
		}
		j.arrived = append(j.arrived, arr)
	}
	return j, nil
}

func mod(a, n int) int { return ((a % n) + n) % n }

// sendChunk and recvChunk are the chunk rank r sends / receives in step s.
func (j *ringJob) sendChunk(r, s int) int {
	if s < j.n-1 {
		return mod(r-s, j.n)
	}
	return mod(r+1-(s-(j.n-1)), j.n)
}

func (j *ringJob) recvChunk(r, s int) int { return j.sendChunk(mod(r-1, j.n), s) }

func (j *ringJob) chunkLen(c int) int { return j.bounds[c+1] - j.bounds[c] }

func (j *ringJob) msgCount(c int) int { return (j.chunkLen(c) + j.msgB - 1) / j.msgB }

// msgRange is message m of chunk c: its byte range within the chunk.
func (j *ringJob) msgRange(c, m int) (int, int) {
	lo := m * j.msgB
	return lo, min(lo+j.msgB, j.chunkLen(c))
}

// ownPiece fills buf with rank's elements at byte offset off of its tensor.
func (j *ringJob) ownPiece(rank, off int, buf []byte) {
	s := j.own[rank]
	s.MoveTo(int64(off / j.r.Cfg.DType.Size()))
	s.Fill(buf)
}

// buffer is a message buffer of n bytes from rank's pool.
func (j *ringJob) buffer(rank, n int) []byte {
	rs := &j.ranks[rank]
	if k := len(rs.free); k > 0 {
		b := rs.free[k-1]
		rs.free = rs.free[:k-1]
		return b[:n]
	}
	return make([]byte, n, j.msgB)
}

func (j *ringJob) Start() error {
	j.nLocal = len(j.r.Local())
	for _, w := range j.r.Local() {
		for s := 0; s < j.steps; s++ {
			for m := range j.arrived[w.Rank][s] {
				if err := w.RQ.PostRecv(roce.RecvWR{ID: uint64(s)<<24 | uint64(m)}); err != nil {
					return err
				}
			}
		}
		if err := j.sendStep0(w); err != nil {
			return err
		}
	}
	return nil
}

// sendStep0 sends the rank's own pieces of its step-0 chunk while its
// window allows.
func (j *ringJob) sendStep0(w *job.Worker) error {
	rs := &j.ranks[w.Rank]
	c := j.sendChunk(w.Rank, 0)
	for ; rs.next0 < j.msgCount(c) && len(rs.inUse) < j.window; rs.next0++ {
		lo, hi := j.msgRange(c, rs.next0)
		buf := j.buffer(w.Rank, hi-lo)
		j.ownPiece(w.Rank, j.bounds[c]+lo, buf)
		if err := j.post(w, 0, rs.next0, buf); err != nil {
			return err
		}
	}
	return nil
}

// post sends message m of step s from buf, which stays the WRITE's until
// it completes.
func (j *ringJob) post(w *job.Worker, s, m int, buf []byte) error {
	lo, _ := j.msgRange(j.sendChunk(w.Rank, s), m)
	succ := j.r.Workers[(w.Rank+1)%j.n]
	id := uint64(s)<<24 | uint64(m)
	j.ranks[w.Rank].inUse[id] = buf
	if j.codec != nil && !job.IntraHop(w, succ) {
		j.hop(s).Add(j.codec, j.r.Cfg.MTU, buf)
	}
	return w.SQ.PostSend(roce.SendWR{ID: id, Opcode: roce.WRWriteImm, Local: buf,
		RemoteVA: j.r.RecvVA + uint64(s*j.maxC+lo), RKey: succ.RecvMR.RKey, Imm: uint32(s)<<24 | uint32(m), Signaled: true})
}

// nameWR names a WR by its step and message (its ID is step<<24 |
// message).
func (j *ringJob) NameWR(c roce.Completion) string {
	return fmt.Sprintf("step %d of 0..%d, message %d (%s)", c.WRID>>24, j.steps-1, c.WRID&(1<<24-1), c.Opcode)
}

func (j *ringJob) OnCompletion(w *job.Worker) {
	j.r.Drain(w, func(c roce.Completion) {
		rs := &j.ranks[w.Rank]
		if !c.Recv {
			w.SendDone++
			if buf, ok := rs.inUse[c.WRID]; ok {
				delete(rs.inUse, c.WRID)
				rs.free = append(rs.free, buf)
			}
		} else if err := j.arrive(w, c); err != nil {
			j.r.Err = err
			return
		}
		if err := j.sendStep0(w); err != nil {
			j.r.Err = &job.JobError{Msg: fmt.Sprintf("rank %d: post step 0 message %d: %v", w.Rank, rs.next0, err)}
		}
	})
}

// arrive takes message (s, m) out of the receive MR: in reduce-scatter the
// predecessor's partial sum, to which the rank adds its own piece and
// sends on (the last such step makes the rank's reduced chunk, a
// result); in all-gather a reduced chunk, a result, passed on until every
// rank has it.
func (j *ringJob) arrive(w *job.Worker, c roce.Completion) error {
	s, m := int(c.Imm>>24), int(c.Imm&0xFFFFFF)
	if !c.HasImm || s >= j.steps || m >= len(j.arrived[w.Rank][s]) || j.arrived[w.Rank][s][m] {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: unexpected message (imm %#x)", w.Rank, c.Imm)}
	}
	j.arrived[w.Rank][s][m] = true
	ch := j.recvChunk(w.Rank, s)
	lo, hi := j.msgRange(ch, m)
	at := uint64(s*j.maxC + lo)
	out := j.buffer(w.Rank, hi-lo) // what the rank sends in step s+1
	if s < j.n-1 {
		partial := j.piece[:hi-lo]
		w.RecvMR.Read(at, partial)
		j.ownPiece(w.Rank, j.bounds[ch]+lo, out)
		tensor.Add(j.r.Cfg.DType, out, partial)
	} else {
		w.RecvMR.Read(at, out)
	}
	if s == j.n-2 && j.codec != nil { // the owner's copy takes the trip the others' do
		job.PacketTrip(j.codec, j.r.Cfg.MTU, out)
	}
	if ringTamper != nil {
		ringTamper(w.Rank, s, m, out)
	}
	if s >= j.n-2 { // the rank's reduced chunk, or a copy of another's
		j.verify(w, ch, m, out)
		if o := j.out[w.Rank]; o != nil {
			copy(o[j.bounds[ch]+lo:], out)
		}
	}
	w.RecvDone++
	if w.RecvDone == w.RecvWant {
		w.DoneAt = j.r.Fab.Clock.Now()
	}
	if s+1 == j.steps {
		j.ranks[w.Rank].free = append(j.ranks[w.Rank].free, out)
		return nil
	}
	if err := j.post(w, s+1, m, out); err != nil {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: post step %d message %d: %v", w.Rank, s+1, m, err)}
	}
	return nil
}

// verify checks message m of chunk c of rank w's result against the
// rank-order sum. The first mismatch in (chunk, rank, message) order is
// kept for check.
func (j *ringJob) verify(w *job.Worker, c, m int, got []byte) {
	key := [2]int{c, m}
	e := j.expected[key]
	if e == nil {
		e = j.expectedSum(c, m)
		j.expected[key] = e
	}
	// An earlier mismatch in (chunk, rank, message) order is the one kept.
	if at := [3]int{c, w.Rank, m}; slices.Compare(at[:], j.mmAt[:]) <= 0 {
		lo, _ := j.msgRange(c, m)
		if mm := firstDiff(j.r.Cfg.DType, w.Rank, int64(j.bounds[c]+lo), got, e.sum); mm != nil {
			j.mismatch, j.mmAt = mm, at
		}
	}
	if e.exact != nil {
		j.maxErr = job.MaxAbsDiff(got, e.exact, j.maxErr)
	}
	if e.left--; e.left == 0 {
		delete(j.expected, key)
		j.spareSums = append(j.spareSums, e)
	}
}

// expectedSum is message m of chunk c summed in the ring's order: rank
// c's piece, then c+1's, and so on.
func (j *ringJob) expectedSum(c, m int) *expectedMsg {
	lo, hi := j.msgRange(c, m)
	off := int64((j.bounds[c] + lo) / j.r.Cfg.DType.Size())
	var e *expectedMsg
	if k := len(j.spareSums); k > 0 {
		e, j.spareSums = j.spareSums[k-1], j.spareSums[:k-1]
	} else {
		e = &expectedMsg{sum: make([]byte, 0, j.msgB)}
	}
	e.k, e.sum, e.left = m, e.sum[:hi-lo], j.nLocal
	fill := func(rank int, buf []byte) {
		st := j.expSt[rank]
		st.MoveTo(off)
		st.Fill(buf)
	}
	if j.codec == nil {
		ringSum(j.r.Cfg.DType, j.n, c, e.sum, j.piece[:hi-lo], fill)
		return e
	}
	if e.exact == nil {
		e.exact = make([]byte, 0, j.msgB)
	}
	// The exact rank-order sum and the hops' one, each input made once.
	e.exact = e.exact[:hi-lo]
	d, mtu, piece := j.r.Cfg.DType, j.r.Cfg.MTU, j.piece[:hi-lo]
	fill(c%j.n, e.exact)
	copy(e.sum, e.exact)
	for i := 1; i < j.n; i++ {
		fill((c+i)%j.n, piece)
		tensor.Add(d, e.exact, piece)
		job.PacketTrip(j.codec, mtu, e.sum)
		tensor.Add(d, e.sum, piece)
	}
	job.PacketTrip(j.codec, mtu, e.sum)
	return e
}

func (j *ringJob) MaxAbsErr() float64 { return j.maxErr }

// hop is step s's report, made on first use.
func (j *ringJob) hop(s int) *job.HopReport {
	if j.hops == nil {
		j.hops = make([]job.HopReport, j.steps)
		for i := range j.hops {
			j.hops[i].Hop, j.hops[i].Carries = i, "partial sums"
			switch {
			case i == 0:
				j.hops[i].Carries = "gradients"
			case i >= j.n-1:
				j.hops[i].Carries = "sums"
			}
		}
	}
	return &j.hops[s]
}

func (j *ringJob) HopReports() []job.HopReport { return slices.Clone(j.hops) }

// ringSum writes into sum a chunk's reduction in a ring's order, the one
// that starts at rank c: c's piece, plus c+1's, and so on round the n
// ranks. fill writes a rank's piece into a buffer; scratch is one of
// sum's length.
func ringSum(d tensor.DType, n, c int, sum, scratch []byte, fill func(rank int, buf []byte)) {
	fill(c%n, sum)
	for i := 1; i < n; i++ {
		fill((c+i)%n, scratch)
		tensor.Add(d, sum, scratch)
	}
}

// Check reports the first result (in chunk, rank, message order) that was
// not the rank-order sum.
func (j *ringJob) Check() *job.Mismatch { return j.mismatch }
