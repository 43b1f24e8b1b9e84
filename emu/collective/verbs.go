package collective

import (
	"fmt"
	"github.com/inaemu/inaemu/emu/job"

	"github.com/inaemu/inaemu/roce"
)

// The verbs job (mode verbs): perftest's shape over the job's ring of RC
// connections. Each rank i does one verb against rank i+1, through the
// switch, and checks what it did (docs/verbs.md):
//
//   - write: rank i writes its tensor into i+1's region, one RDMA WRITE
//     per message; each message, once its WRITE completes, must be in
//     i+1's region bit for bit.
//   - read: rank i reads i+1's region (which holds i+1's tensor), one
//     RDMA READ per message; each message read must be i+1's bit for bit.
//   - fetch-add: rank i adds to a counter in i+1's region, one
//     fetch-and-add per message; each must return the counter's start
//     plus the adds before it (one QP executes in order: the serial order
//     is the posting order), and the counter must end at the start plus
//     exactly the sum: an add executed twice or lost is caught.
//   - cmp-swap: rank i runs a chain of compare-and-swaps on a word of
//     i+1's region, each comparing with the value the one before it
//     wrote: every link must find it (orig = compare) and the word must
//     end at the chain's last value.
//
// The tensor is cut into messages of msg_len×MTU bytes as for the
// collectives; an atomic job does one atomic per message. At most
// verbsDepth WRs of a rank are outstanding (perftest's --tx-depth), READs
// and atomics further bounded by the QP's max_rd_atomic.
//
// The job knows nothing of the run but the runner's workers, their NICs'
// protection domains and send QPs, which keeps it movable into a plug-in
// package.

// Verbs is the verbs job's mode.
const Verbs job.Mode = "verbs"

// checkVerb refuses a verb that is not one, and a verb other than the
// default given to a run none of whose jobs is a verbs job (it would be
// ignored without a word).
func checkVerb(c *job.Config, jobs []job.JobConfig) error {
	if c.Verb == "" || c.Verb == job.VerbWrite {
		return nil
	}
	if _, err := job.ParseVerb(string(c.Verb)); err != nil {
		return &job.ConfigError{Err: fmt.Errorf("--verb %v", err)}
	}
	for _, j := range jobs {
		if j.Cfg.Mode == Verbs {
			return nil
		}
	}
	return &job.ConfigError{Err: fmt.Errorf("--verb %s: only --mode verbs takes a verb (this run is %s)", c.Verb, c.Mode)}
}

// verbsDepth bounds a rank's outstanding WRs: perftest's default
// --tx-depth of 128, halved to keep a READ's responses and the next
// requests interleaved on a 10G link.
const verbsDepth = 64

func init() {
	job.Register(job.Algorithm{Mode: Verbs, Doc: "no allreduce: each rank does one RDMA verb (--verb) against the next, as perftest does", New: func(r *job.Job) (job.Collective, error) { return newVerbsJob(r) }, ValidateRun: checkVerb,
		Memory: func(c job.Config, e *job.MemoryEstimate) (out int64, whole bool) {
			e.Buffers, e.Queues, e.Largest, out = verbsMemory(c)
			return out, false
		}})
}

type verbsJob struct {
	r    *job.Job
	verb job.Verb
	n    int
	msgB int
	msgs int // WRs per rank
	size int // bytes of the tensor (write, read)
	// Per rank: the region peers target (its MR's Buf), what it sends or
	// where its READs land (local), and for atomics one 8-byte buffer per
	// outstanding WR, by WR ID modulo verbsDepth.
	mem      [][]byte
	local    [][]byte
	orig     [][]byte
	next     []int    // the next WR to post
	want     []uint64 // atomics: the original value the next completion must return
	startVal []uint64 // atomics: the word's start value, per region owner
	piece    []byte
	src      []job.Source // per rank: its tensor, read where a check needs it
	mm       *job.Mismatch
	mmRank   int
}

func newVerbsJob(r *job.Job) (*verbsJob, error) {
	cfg := r.Cfg
	if r.Fab.Live() {
		return nil, &job.ConfigError{Err: fmt.Errorf("--mode verbs runs on emulated links (not on TAPs)")}
	}
	verb := cfg.Verb
	if verb == "" {
		verb = job.VerbWrite
	}
	if _, err := job.ParseVerb(string(verb)); err != nil {
		return nil, &job.ConfigError{Err: fmt.Errorf("--verb %v", err)}
	}
	j := &verbsJob{r: r, verb: verb, n: cfg.Workers, msgB: cfg.MsgLen * cfg.MTU, size: int(cfg.TensorBytes)}
	j.msgs = (j.size + j.msgB - 1) / j.msgB
	j.mem, j.local, j.orig = make([][]byte, j.n), make([][]byte, j.n), make([][]byte, j.n)
	j.next, j.want, j.startVal = make([]int, j.n), make([]uint64, j.n), make([]uint64, j.n)
	j.piece = make([]byte, j.msgB)
	j.src = make([]job.Source, j.n)
	for _, w := range r.Workers {
		if w.GPU >= 0 {
			return nil, &job.ConfigError{Err: fmt.Errorf("--mode verbs: rank %d is on a GPU (%s:gpu%d); verbs ranks are host NICs", w.Rank, w.Host, w.GPU)}
		}
	}
	for _, w := range r.Workers {
		k := w.Rank
		j.src[k] = r.Input(k)
		switch {
		case verb.Atomic():
			j.mem[k] = make([]byte, 8)
			j.startVal[k] = j.atomicStart(k)
			roce.PutUint64At(j.mem[k], 0, j.startVal[k])
			j.orig[k] = make([]byte, 8*verbsDepth)
		case verb == job.VerbRead:
			j.mem[k] = make([]byte, j.size)
			j.fill(k, 0, j.mem[k]) // what the predecessor reads
			j.local[k] = make([]byte, j.size)
		default:
			j.mem[k] = make([]byte, j.size)
			j.local[k] = make([]byte, j.size)
			j.fill(k, 0, j.local[k]) // what the rank writes
		}
		w.RecvMR = &roce.MR{Addr: r.RecvVA, Buf: j.mem[k], RKey: r.RKey(k),
			Access: roce.AccessLocalWrite | roce.AccessRemoteWrite | roce.AccessRemoteRead | roce.AccessRemoteAtomic}
		if err := w.NIC.PD.Register(w.RecvMR); err != nil {
			return nil, err
		}
		w.SendWant, w.RecvWant = j.msgs, j.msgs
	}
	for _, w := range r.Workers { // rank k's requests check k+1's word
		j.want[w.Rank] = j.startVal[(w.Rank+1)%j.n]
	}
	return j, nil
}

// fill writes rank's tensor from byte off into buf.
func (j *verbsJob) fill(rank, off int, buf []byte) {
	s := j.src[rank]
	s.MoveTo(int64(off / j.r.Cfg.DType.Size()))
	s.Fill(buf)
}

// atomicStart is the start value of rank's word, from the seed.
func (j *verbsJob) atomicStart(rank int) uint64 {
	if j.verb == job.VerbCmpSwap {
		return casLink(j.r.Cfg.Seed, rank, 0)
	}
	return verbsMix(j.r.Cfg.Seed, 0xFA, uint64(rank))
}

// addend is the k-th fetch-and-add of rank: from the seed, never zero (a
// lost or doubled add must move the sum).
func addend(seed uint64, rank, k int) uint64 {
	return verbsMix(seed, 0xADD, uint64(rank)<<32|uint64(k))%(1<<32) + 1
}

// casLink is the k-th value of the chain on rank's word: distinct from
// its neighbours, so a link executed twice cannot pass for a success.
func casLink(seed uint64, rank, k int) uint64 {
	return verbsMix(seed, 0xCA5, uint64(rank)<<32|uint64(k))<<1 | uint64(k&1)
}

// verbsMix is a value from the seed for (what, i): SplitMix64's finalizer
// over their sum, computed where it is needed without a generator's state.
func verbsMix(seed, what, i uint64) uint64 {
	z := seed + what*0x9E3779B97F4A7C15 + i*0xBF58476D1CE4E5B9
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

func (j *verbsJob) Start() error {
	for _, w := range j.r.Local() {
		if err := j.post(w); err != nil {
			return err
		}
	}
	return nil
}

// msgRange is message m's bytes of the tensor.
func (j *verbsJob) msgRange(m int) (int, int) { return m * j.msgB, min((m+1)*j.msgB, j.size) }

// post posts the rank's next WRs while fewer than verbsDepth are
// outstanding.
func (j *verbsJob) post(w *job.Worker) error {
	succ := j.r.Workers[(w.Rank+1)%j.n]
	for ; j.next[w.Rank] < j.msgs && j.next[w.Rank]-w.SendDone < verbsDepth; j.next[w.Rank]++ {
		m := j.next[w.Rank]
		wr := roce.SendWR{ID: uint64(m), RKey: succ.RecvMR.RKey, RemoteVA: j.r.RecvVA, Signaled: true}
		switch j.verb {
		case job.VerbWrite, job.VerbRead:
			lo, hi := j.msgRange(m)
			wr.Opcode, wr.Local, wr.RemoteVA = roce.WRWrite, j.local[w.Rank][lo:hi], j.r.RecvVA+uint64(lo)
			if j.verb == job.VerbRead {
				wr.Opcode = roce.WRRead
			}
		case job.VerbFetchAdd:
			wr.Opcode, wr.SwapAdd = roce.WRFetchAdd, addend(j.r.Cfg.Seed, w.Rank, m)
		case job.VerbCmpSwap:
			wr.Opcode = roce.WRCompSwap
			wr.Compare, wr.SwapAdd = casLink(j.r.Cfg.Seed, succ.Rank, m), casLink(j.r.Cfg.Seed, succ.Rank, m+1)
		}
		if j.verb.Atomic() {
			s := m % verbsDepth * 8
			wr.Local = j.orig[w.Rank][s : s+8]
		}
		if err := w.SQ.PostSend(wr); err != nil {
			return &job.JobError{Msg: fmt.Sprintf("rank %d: post %s %d: %v", w.Rank, j.verb, m, err)}
		}
	}
	return nil
}

func (j *verbsJob) NameWR(c roce.Completion) string {
	return fmt.Sprintf("%s %d of 0..%d (WR %d, %s)", j.verb, c.WRID, j.msgs-1, c.WRID, c.Opcode)
}

func (j *verbsJob) OnCompletion(w *job.Worker) {
	j.r.Drain(w, func(c roce.Completion) {
		if c.Recv {
			j.r.Err = &job.JobError{Msg: fmt.Sprintf("rank %d: a receive completion in a verbs job", w.Rank)}
			return
		}
		m := int(c.WRID)
		if m != w.SendDone {
			j.r.Err = &job.JobError{Msg: fmt.Sprintf("rank %d: %s %d completed when %d was due", w.Rank, j.verb, m, w.SendDone)}
			return
		}
		j.verify(w, m)
		w.SendDone++
		w.RecvDone++
		if w.RecvDone == w.RecvWant {
			w.DoneAt = j.r.Fab.Clock.Now()
		}
		if err := j.post(w); err != nil {
			j.r.Err = err
		}
	})
}

// verbsTamper, when a test sets it, alters what rank's WR m left (the
// bytes a WRITE put in the next rank's region or a READ landed, or the
// original value an atomic returned) before the rank checks it: a
// transport that delivers wrongly, which the check must catch.
var verbsTamper func(rank, m int, landed []byte)

// verify checks WR m of rank w as it completes (WRs complete in order).
func (j *verbsJob) verify(w *job.Worker, m int) {
	succ := (w.Rank + 1) % j.n
	if verbsTamper != nil {
		lo, hi := j.msgRange(m)
		switch j.verb {
		case job.VerbWrite:
			verbsTamper(w.Rank, m, j.mem[succ][lo:hi])
		case job.VerbRead:
			verbsTamper(w.Rank, m, j.local[w.Rank][lo:hi])
		default:
			s := m % verbsDepth * 8
			verbsTamper(w.Rank, m, j.orig[w.Rank][s:s+8])
		}
	}
	keep := func(mm *job.Mismatch) {
		if mm != nil && (j.mm == nil || w.Rank < j.mmRank) {
			j.mm, j.mmRank = mm, w.Rank
		}
	}
	seed := j.r.Cfg.Seed
	switch j.verb {
	case job.VerbWrite:
		lo, hi := j.msgRange(m)
		want := j.piece[:hi-lo]
		j.fill(w.Rank, lo, want)
		keep(firstDiff(j.r.Cfg.DType, succ, int64(lo), j.mem[succ][lo:hi], want))
	case job.VerbRead:
		lo, hi := j.msgRange(m)
		want := j.piece[:hi-lo]
		j.fill(succ, lo, want)
		keep(firstDiff(j.r.Cfg.DType, w.Rank, int64(lo), j.local[w.Rank][lo:hi], want))
	default:
		s := m % verbsDepth * 8
		got := roce.Uint64At(j.orig[w.Rank], s)
		if got != j.want[w.Rank] {
			keep(&job.Mismatch{Rank: w.Rank, Element: int64(m), Got: fmt.Sprintf("%s %d returned %#x", j.verb, m, got),
				Want: fmt.Sprintf("%#x (the serial order's)", j.want[w.Rank])})
		}
		if j.verb == job.VerbFetchAdd {
			j.want[w.Rank] += addend(seed, w.Rank, m)
		} else {
			j.want[w.Rank] = casLink(seed, succ, m+1)
		}
		if m == j.msgs-1 { // the last: the word holds the whole chain or sum
			if end := roce.Uint64At(j.mem[succ], 0); end != j.want[w.Rank] {
				keep(&job.Mismatch{Rank: succ, Element: 0, Got: fmt.Sprintf("word %#x after %d %ss", end, j.msgs, j.verb),
					Want: fmt.Sprintf("%#x", j.want[w.Rank])})
			}
		}
	}
}

func (j *verbsJob) Check() *job.Mismatch { return j.mm }

// verbsMemory is what a verbs job holds: per rank its region and its
// local buffer (write, read), and the WR queues.
func verbsMemory(cfg job.Config) (buffers, queues, largest, outstanding int64) {
	w, t := int64(cfg.Workers), cfg.TensorBytes
	msgB := int64(cfg.MsgLen) * int64(cfg.MTU)
	msgs := job.CeilDiv(t, msgB)
	if cfg.Verb.Atomic() {
		buffers = w * (8 + 8*verbsDepth)
	} else {
		buffers, largest = 2*w*t+msgB, t
	}
	queues = w * 2 * (msgs + 1) * job.WRBytes
	return buffers, queues, largest, int64(verbsDepth)*int64(cfg.MsgLen) + 2
}
