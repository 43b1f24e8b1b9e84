package emu

import (
	"fmt"
	"strings"

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
const Verbs Mode = "verbs"

// Verb is what a verbs job's ranks do.
type Verb string

const (
	VerbWrite    Verb = "write"
	VerbRead     Verb = "read"
	VerbFetchAdd Verb = "fetch-add"
	VerbCmpSwap  Verb = "cmp-swap"
)

// verbsAll lists the verbs in the order help names them.
var verbsAll = []Verb{VerbWrite, VerbRead, VerbFetchAdd, VerbCmpSwap}

// ParseVerb reads write, read, fetch-add or cmp-swap.
func ParseVerb(s string) (Verb, error) {
	for _, v := range verbsAll {
		if string(v) == s {
			return v, nil
		}
	}
	names := make([]string, len(verbsAll))
	for i, v := range verbsAll {
		names[i] = string(v)
	}
	return "", fmt.Errorf("%q: want %s", s, strings.Join(names, ", "))
}

func (v Verb) String() string {
	if v == "" {
		return string(VerbWrite)
	}
	return string(v)
}

// checkVerb refuses a verb that is not one, and a verb other than the
// default given to a run none of whose jobs is a verbs job (it would be
// ignored without a word).
func checkVerb(c *Config, jobs []JobConfig) error {
	if c.Verb == "" || c.Verb == VerbWrite {
		return nil
	}
	if _, err := ParseVerb(string(c.Verb)); err != nil {
		return &ConfigError{fmt.Errorf("--verb %v", err)}
	}
	for _, j := range jobs {
		if j.Cfg.Mode == Verbs {
			return nil
		}
	}
	return &ConfigError{fmt.Errorf("--verb %s: only --mode verbs takes a verb (this run is %s)", c.Verb, c.Mode)}
}

func (v Verb) atomic() bool { return v == VerbFetchAdd || v == VerbCmpSwap }

// verbsDepth bounds a rank's outstanding WRs: perftest's default
// --tx-depth of 128, halved to keep a READ's responses and the next
// requests interleaved on a 10G link.
const verbsDepth = 64

func init() {
	Register(Algorithm{Mode: Verbs, New: func(r *Job) (Collective, error) { return newVerbsJob(r) }, ValidateRun: checkVerb,
		Memory: func(c Config, e *MemoryEstimate) (out int64, whole bool) {
			e.Buffers, e.Queues, e.Largest, out = verbsMemory(c)
			return out, false
		}})
}

type verbsJob struct {
	r    *Job
	verb Verb
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
	src      []Source // per rank: its tensor, read where a check needs it
	mm       *Mismatch
	mmRank   int
}

func newVerbsJob(r *Job) (*verbsJob, error) {
	cfg := r.Cfg
	if r.Fab.Live() {
		return nil, &ConfigError{fmt.Errorf("--mode verbs runs on emulated links (not on TAPs)")}
	}
	verb := cfg.Verb
	if verb == "" {
		verb = VerbWrite
	}
	if _, err := ParseVerb(string(verb)); err != nil {
		return nil, &ConfigError{fmt.Errorf("--verb %v", err)}
	}
	j := &verbsJob{r: r, verb: verb, n: cfg.Workers, msgB: cfg.MsgLen * cfg.MTU, size: int(cfg.TensorBytes)}
	j.msgs = (j.size + j.msgB - 1) / j.msgB
	j.mem, j.local, j.orig = make([][]byte, j.n), make([][]byte, j.n), make([][]byte, j.n)
	j.next, j.want, j.startVal = make([]int, j.n), make([]uint64, j.n), make([]uint64, j.n)
	j.piece = make([]byte, j.msgB)
	j.src = make([]Source, j.n)
	for _, w := range r.Workers {
		if w.GPU >= 0 {
			return nil, &ConfigError{fmt.Errorf("--mode verbs: rank %d is on a GPU (%s:gpu%d); verbs ranks are host NICs", w.Rank, w.Host, w.GPU)}
		}
	}
	for _, w := range r.Workers {
		k := w.Rank
		j.src[k] = r.Input(k)
		switch {
		case verb.atomic():
			j.mem[k] = make([]byte, 8)
			j.startVal[k] = j.atomicStart(k)
			roce.PutUint64At(j.mem[k], 0, j.startVal[k])
			j.orig[k] = make([]byte, 8*verbsDepth)
		case verb == VerbRead:
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
	if j.verb == VerbCmpSwap {
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
func (j *verbsJob) post(w *Worker) error {
	succ := j.r.Workers[(w.Rank+1)%j.n]
	for ; j.next[w.Rank] < j.msgs && j.next[w.Rank]-w.SendDone < verbsDepth; j.next[w.Rank]++ {
		m := j.next[w.Rank]
		wr := roce.SendWR{ID: uint64(m), RKey: succ.RecvMR.RKey, RemoteVA: j.r.RecvVA, Signaled: true}
		switch j.verb {
		case VerbWrite, VerbRead:
			lo, hi := j.msgRange(m)
			wr.Opcode, wr.Local, wr.RemoteVA = roce.WRWrite, j.local[w.Rank][lo:hi], j.r.RecvVA+uint64(lo)
			if j.verb == VerbRead {
				wr.Opcode = roce.WRRead
			}
		case VerbFetchAdd:
			wr.Opcode, wr.SwapAdd = roce.WRFetchAdd, addend(j.r.Cfg.Seed, w.Rank, m)
		case VerbCmpSwap:
			wr.Opcode = roce.WRCompSwap
			wr.Compare, wr.SwapAdd = casLink(j.r.Cfg.Seed, succ.Rank, m), casLink(j.r.Cfg.Seed, succ.Rank, m+1)
		}
		if j.verb.atomic() {
			s := m % verbsDepth * 8
			wr.Local = j.orig[w.Rank][s : s+8]
		}
		if err := w.SQ.PostSend(wr); err != nil {
			return &JobError{Msg: fmt.Sprintf("rank %d: post %s %d: %v", w.Rank, j.verb, m, err)}
		}
	}
	return nil
}

func (j *verbsJob) nameWR(c roce.Completion) string {
	return fmt.Sprintf("%s %d of 0..%d (WR %d, %s)", j.verb, c.WRID, j.msgs-1, c.WRID, c.Opcode)
}

func (j *verbsJob) OnCompletion(w *Worker) {
	j.r.Drain(w, func(c roce.Completion) {
		if c.Recv {
			j.r.Err = &JobError{Msg: fmt.Sprintf("rank %d: a receive completion in a verbs job", w.Rank)}
			return
		}
		m := int(c.WRID)
		if m != w.SendDone {
			j.r.Err = &JobError{Msg: fmt.Sprintf("rank %d: %s %d completed when %d was due", w.Rank, j.verb, m, w.SendDone)}
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
func (j *verbsJob) verify(w *Worker, m int) {
	succ := (w.Rank + 1) % j.n
	if verbsTamper != nil {
		lo, hi := j.msgRange(m)
		switch j.verb {
		case VerbWrite:
			verbsTamper(w.Rank, m, j.mem[succ][lo:hi])
		case VerbRead:
			verbsTamper(w.Rank, m, j.local[w.Rank][lo:hi])
		default:
			s := m % verbsDepth * 8
			verbsTamper(w.Rank, m, j.orig[w.Rank][s:s+8])
		}
	}
	keep := func(mm *Mismatch) {
		if mm != nil && (j.mm == nil || w.Rank < j.mmRank) {
			j.mm, j.mmRank = mm, w.Rank
		}
	}
	seed := j.r.Cfg.Seed
	switch j.verb {
	case VerbWrite:
		lo, hi := j.msgRange(m)
		want := j.piece[:hi-lo]
		j.fill(w.Rank, lo, want)
		keep(firstDiff(j.r.Cfg.DType, succ, int64(lo), j.mem[succ][lo:hi], want))
	case VerbRead:
		lo, hi := j.msgRange(m)
		want := j.piece[:hi-lo]
		j.fill(succ, lo, want)
		keep(firstDiff(j.r.Cfg.DType, w.Rank, int64(lo), j.local[w.Rank][lo:hi], want))
	default:
		s := m % verbsDepth * 8
		got := roce.Uint64At(j.orig[w.Rank], s)
		if got != j.want[w.Rank] {
			keep(&Mismatch{Rank: w.Rank, Element: int64(m), Got: fmt.Sprintf("%s %d returned %#x", j.verb, m, got),
				Want: fmt.Sprintf("%#x (the serial order's)", j.want[w.Rank])})
		}
		if j.verb == VerbFetchAdd {
			j.want[w.Rank] += addend(seed, w.Rank, m)
		} else {
			j.want[w.Rank] = casLink(seed, succ, m+1)
		}
		if m == j.msgs-1 { // the last: the word holds the whole chain or sum
			if end := roce.Uint64At(j.mem[succ], 0); end != j.want[w.Rank] {
				keep(&Mismatch{Rank: succ, Element: 0, Got: fmt.Sprintf("word %#x after %d %ss", end, j.msgs, j.verb),
					Want: fmt.Sprintf("%#x", j.want[w.Rank])})
			}
		}
	}
}

func (j *verbsJob) Check() *Mismatch { return j.mm }

// verbsMemory is what a verbs job holds: per rank its region and its
// local buffer (write, read), and the WR queues.
func verbsMemory(cfg Config) (buffers, queues, largest, outstanding int64) {
	w, t := int64(cfg.Workers), cfg.TensorBytes
	msgB := int64(cfg.MsgLen) * int64(cfg.MTU)
	msgs := CeilDiv(t, msgB)
	if cfg.Verb.atomic() {
		buffers = w * (8 + 8*verbsDepth)
	} else {
		buffers, largest = 2*w*t+msgB, t
	}
	queues = w * 2 * (msgs + 1) * WRBytes
	return buffers, queues, largest, int64(verbsDepth)*int64(cfg.MsgLen) + 2
}
