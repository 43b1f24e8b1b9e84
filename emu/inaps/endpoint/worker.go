package endpoint

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/clock"
)

// WorkerConfig is one worker of a job.
type WorkerConfig struct {
	Job     uint16
	Rank    int // its bit in the bitmap
	Workers int // the job's fan-in
	Self    inaps.Addr
	PS      inaps.Addr // its PS (static: none)
	Policy  inaps.Policy
	// Index is the job's aggregator per window slot (fcfs, esa, straw*:
	// inaps.IndexTable); First and Size a static job's region.
	Index       []uint16
	First, Size int
	Seed        uint64 // the values' seed (the run's)
	// Window: initial and largest, in frames; AIMD halves it on ECN and
	// adds MSS bytes once per window otherwise (ATP's CC_manager).
	InitWindow, MaxWindow int
	AIMD                  bool
	RTOMin                time.Duration
	DupThresh             int // results beyond a missing one that declare it lost (3)
	Oracle                *Oracle
	// Floats, if on, makes the gradients float32 in fixed point.
	Floats Floats
}

// WorkerStats count a worker's transport.
type WorkerStats struct {
	Sent          uint64 `json:"gradients_sent"`
	Results       uint64 `json:"results"`
	DupResults    uint64 `json:"duplicate_results"`
	Wrong         uint64 `json:"wrong_results"`
	Timeouts      uint64 `json:"timeouts"`
	DupACKs       uint64 `json:"dupack_triggers"`
	Reminders     uint64 `json:"reminders"`     // sent to the PS (esa)
	Retransmits   uint64 `json:"retransmits"`   // gradients sent again (to the switch, or to the PS on request)
	QueryAnswers  uint64 `json:"query_answers"` // results given to the PS from the cache
	ECNWindows    uint64 `json:"ecn_windows"`   // windows that saw a mark (and halved)
	Payload       uint64 `json:"payload_bytes"` // result payload bytes received
	MinWindow     int    `json:"min_window"`    // frames
	MaxWindowSeen int    `json:"max_window"`    // frames
	ChannelRetry  uint64 `json:"channel_retries"`
}

// Add counts o's work in s too (a run's workers together): counts add,
// the window's range widens.
func (s *WorkerStats) Add(o WorkerStats) {
	if s.MinWindow == 0 || o.MinWindow < s.MinWindow {
		s.MinWindow = o.MinWindow
	}
	s.MaxWindowSeen = max(s.MaxWindowSeen, o.MaxWindowSeen)
	s.Sent += o.Sent
	s.Results += o.Results
	s.DupResults += o.DupResults
	s.Wrong += o.Wrong
	s.Timeouts += o.Timeouts
	s.DupACKs += o.DupACKs
	s.Reminders += o.Reminders
	s.Retransmits += o.Retransmits
	s.QueryAnswers += o.QueryAnswers
	s.ECNWindows += o.ECNWindows
	s.Payload += o.Payload
	s.ChannelRetry += o.ChannelRetry
}

// partRange is a pushed partition: its sequence numbers and how many
// of its results are in.
type partRange struct {
	first, last uint32 // 1-based, inclusive
	prio        uint8
	got         uint32
	index       int // the caller's partition index
}

// Worker is one worker's transport for one iteration at a time.
type Worker struct {
	cfg  WorkerConfig
	clk  clock.Clock
	kick func()
	out  outQueue
	ch   *channel

	iter   uint32
	begun  bool // Begin has started iter
	parts  []partRange
	pushed uint32 // sequence numbers available to send: 1..pushed
	next   uint32 // next to send
	base   uint32 // oldest without its result
	total  uint32 // fragments this iteration (all pushes)
	got    []uint64
	ring   int // power of two ≥ the largest window
	sentAt []time.Duration
	trig   []bool
	viaPS  []uint64 // fragments (iteration<<32 | sequence) the PS asked for before they were sent
	asked  []uint64 // fragments the PS asked about before their result came
	retx   []uint32 // sequence numbers to send again to the switch (static, fcfs)
	scan   uint32
	index  []uint16 // the slots' indices (fcfs: the PS may move one)

	cwndBytes int
	finish    uint32
	ecn       bool
	rto       rtoEstimator
	backoff   int
	timer     clock.Timer
	armed     bool
	jit       time.Duration
	rng       *rand.Rand

	cache    []inaps.Vec
	cacheSeq []uint32
	cacheIt  []uint32
	cacheOvf []bool
	fl       [inaps.Values]float32
	q        inaps.Vec

	// OnPartitionDone is told when every result of a pushed partition is
	// in (its caller's index); OnIdle when the iteration's results are.
	OnPartitionDone func(iter uint32, index int)
	Stats           WorkerStats
	// Cwnd is the window's trace: its first value, then every change
	// (ATP's AIMD adjusts it once per window).
	Cwnd []CwndPoint
}

// CwndPoint is the window from a time on.
type CwndPoint struct {
	At     time.Duration `json:"t_ns"`
	Frames int           `json:"frames"`
}

// NewWorker makes a worker; kick tells its NIC it has a frame.
func NewWorker(cfg WorkerConfig, clk clock.Clock, kick func()) *Worker {
	if cfg.DupThresh == 0 {
		cfg.DupThresh = 3
	}
	if cfg.Policy == inaps.Static {
		cfg.MaxWindow = cfg.Size / 2 // SwitchML: a slot per packet in flight, and its shadow
		cfg.InitWindow = cfg.MaxWindow
	}
	if cfg.MaxWindow < 1 {
		cfg.MaxWindow = inaps.Slots
	}
	if cfg.InitWindow < 1 || cfg.InitWindow > cfg.MaxWindow {
		cfg.InitWindow = cfg.MaxWindow
	}
	ring := 1
	for ring < max(cfg.MaxWindow, inaps.Slots)*2 {
		ring <<= 1
	}
	w := &Worker{cfg: cfg, clk: clk, kick: kick, ring: ring, sentAt: make([]time.Duration, ring), trig: make([]bool, ring), viaPS: make([]uint64, ring), asked: make([]uint64, ring),
		cache: make([]inaps.Vec, ring), cacheSeq: make([]uint32, ring), cacheIt: make([]uint32, ring), cacheOvf: make([]bool, ring),
		cwndBytes: cfg.InitWindow * inaps.FrameLen, rto: rtoEstimator{min: cfg.RTOMin}, next: 1, base: 1, scan: 1}
	w.index = append([]uint16(nil), cfg.Index...)
	w.rng = rand.New(rand.NewPCG(cfg.Seed^uint64(cfg.Job)<<32^0x7e7, uint64(cfg.Rank)))
	w.Stats.MinWindow, w.Stats.MaxWindowSeen = cfg.InitWindow, cfg.InitWindow
	w.Cwnd = []CwndPoint{{0, w.window()}}
	w.timer = clk.AfterFunc(0, w.onTimer)
	w.timer.Stop()
	if cfg.Policy.HasPS() {
		w.ch = newChannel(clk, cfg.Self, cfg.PS, &w.out, kick, cfg.RTOMin, w.onMessage)
		w.ch.Stale = w.stale
	}
	return w
}

// Begin starts iteration iter of total fragments.
func (w *Worker) Begin(iter uint32, total uint32) {
	w.iter, w.total, w.begun = iter, total, true
	w.parts = w.parts[:0]
	w.pushed, w.next, w.base, w.scan = 0, 1, 1, 1
	w.finish = 1 + uint32(w.window())
	words := int(total/64 + 1)
	if cap(w.got) < words {
		w.got = make([]uint64, words)
	}
	w.got = w.got[:words]
	clear(w.got)
	clear(w.trig)
	w.retx = w.retx[:0]
}

// Push makes the next n fragments sendable, at priority prio; index is
// the caller's name for the partition.
func (w *Worker) Push(n uint32, prio uint8, index int) {
	w.parts = append(w.parts, partRange{first: w.pushed + 1, last: w.pushed + n, prio: prio, index: index})
	w.pushed += n
	w.kick()
}

// Done reports whether every pushed fragment's result is in.
func (w *Worker) Done() bool { return w.base > w.pushed }

// window is the congestion window in frames.
func (w *Worker) window() int {
	if w.cfg.Policy == inaps.Static {
		return w.cfg.Size / 2
	}
	return max(1, min(w.cfg.MaxWindow, w.cwndBytes/inaps.FrameLen))
}

func (w *Worker) has(s uint32) bool { return w.got[s/64]&(1<<(s%64)) != 0 }

// NextFrame is the NIC's pull: channel frames, retransmissions, then the
// next fragment the window allows.
func (w *Worker) NextFrame(buf []byte) int {
	if n := w.out.pop(buf); n > 0 {
		return n
	}
	for len(w.retx) > 0 {
		s := w.retx[0]
		w.retx = w.retx[1:]
		if s >= w.base && s < w.next && !w.has(s) {
			w.gradient(buf, s, wire.INAPSFlagResend)
			w.Stats.Retransmits++
			return inaps.FrameLen
		}
	}
	if w.next > w.pushed || int(w.next-w.base) >= w.window() {
		return 0
	}
	s := w.next
	w.next++
	k := s & uint32(w.ring-1)
	w.sentAt[k] = w.clk.Now()
	w.Stats.Sent++
	if !w.armed {
		w.arm()
	}
	if w.viaPS[k] == uint64(w.iter)<<32|uint64(s) {
		// The PS asked for it ahead: it goes over the channel.
		w.viaPS[k] = 0
		w.Stats.Retransmits++
		w.ch.Send(KindGradient, func(h wire.INAPS) { w.fill(h, w.iter, s, wire.INAPSFlagResend) })
		return w.out.pop(buf)
	}
	w.gradient(buf, s, 0)
	return inaps.FrameLen
}

// gradient writes fragment s's frame.
func (w *Worker) gradient(buf []byte, s uint32, flags uint8) {
	dst := w.cfg.PS
	if w.cfg.Policy == inaps.Static {
		dst = inaps.GroupAddr(w.cfg.Job)
	}
	h := inaps.WriteHeaders(buf[:inaps.FrameLen], w.cfg.Self, dst)
	w.fill(h, w.iter, s, flags)
}

// fill writes fragment s's header of iteration it: the worker's bit,
// its values.
func (w *Worker) fill(h wire.INAPS, it, s uint32, flags uint8) {
	h.SetBitmap(1 << w.cfg.Rank)
	h.SetFanIn(uint8(w.cfg.Workers))
	h.SetFlags(flags)
	h.SetJob(w.cfg.Job)
	h.SetSeq(uint16(s))
	h.SetAggregator(w.indexOf(it, s))
	h.SetPriority(w.prioOf(s))
	h.SetLevel(0)
	if w.cfg.Floats.On() {
		GradientFloats(&w.fl, w.cfg.Seed, w.cfg.Job, w.cfg.Rank, it, s)
		if w.cfg.Floats.Quantise(&w.fl, w.cfg.Workers, &w.q) {
			h.SetFlags(flags | wire.INAPSFlagOverflow)
		}
		w.q.Store(h)
	} else {
		Gradient(h, w.cfg.Seed, w.cfg.Job, w.cfg.Rank, it, s)
	}
	h.SetKey(inaps.TaskKey(it, s))
	h.SetTensorLength(w.total)
}

func (w *Worker) indexOf(it, s uint32) uint16 {
	if w.cfg.Policy == inaps.Static {
		return inaps.StaticIndex(w.cfg.First, w.cfg.Size, uint64(it)*uint64(w.total)+uint64(s))
	}
	return w.index[(s-1)%inaps.Slots]
}

func (w *Worker) prioOf(s uint32) uint8 {
	if !w.cfg.Policy.Preemptive() {
		return 0
	}
	for i := len(w.parts) - 1; i >= 0; i-- {
		if s >= w.parts[i].first {
			return w.parts[i].prio
		}
	}
	return 0
}

// Receive takes a frame for this host.
func (w *Worker) Receive(f []byte) {
	if IsChannel(f) {
		if w.ch != nil {
			w.ch.receive(f)
		}
		return
	}
	if !inaps.IsINAPS(f) {
		return
	}
	h := wire.INAPS(f[inaps.HeaderOff:inaps.FrameLen])
	if h.Flags()&wire.INAPSFlagACK == 0 || h.Job() != w.cfg.Job {
		return
	}
	w.result(h, inaps.CE(f), [6]byte(f[6:12]) == inaps.SwitchAddr.MAC)
}

// result takes a result (from the switch, the PS, or the channel).
func (w *Worker) result(h wire.INAPS, ce, fromSwitch bool) {
	if uint32(h.Key()) != w.iter {
		w.Stats.DupResults++
		return
	}
	s := inaps.FullSeq(h)
	if s < w.base || s >= w.next || w.has(s) {
		w.Stats.DupResults++
		return
	}
	if w.cfg.Policy == inaps.FCFS && h.Flags()&wire.INAPSFlagCollision != 0 {
		// ATP's PS moved the slot to a fresh aggregator after a collision.
		if n := h.TensorLength(); n > 0 && n <= inaps.MaxAggregators {
			w.index[(s-1)%inaps.Slots] = uint16(n - 1)
		}
	}
	if w.cfg.Oracle != nil && !w.cfg.Oracle.Check(w.iter, s, h, w.cfg.Rank) {
		w.Stats.Wrong++
	}
	w.got[s/64] |= 1 << (s % 64)
	w.Stats.Results++
	w.Stats.Payload += inaps.AggregatorBytes
	k := s & uint32(w.ring-1)
	w.cache[k].Load(h)
	w.cacheSeq[k], w.cacheIt[k], w.cacheOvf[k] = s, w.iter, h.Flags()&wire.INAPSFlagOverflow != 0
	if w.asked[k] == uint64(w.iter)<<32|uint64(s) {
		w.asked[k] = 0
		if fromSwitch {
			// The PS asked before the switch's multicast came: it learns
			// the result now (one from the PS it has already).
			w.answer(w.iter, s)
		}
	}
	if !w.trig[k] {
		w.rto.sample(w.clk.Now() - w.sentAt[k])
	}
	w.trig[k] = false
	w.ecn = w.ecn || ce || h.Flags()&wire.INAPSFlagECN != 0
	for i := range w.parts {
		p := &w.parts[i]
		if s >= p.first && s <= p.last {
			if p.got++; p.got == p.last-p.first+1 && w.OnPartitionDone != nil {
				defer w.OnPartitionDone(w.iter, p.index)
			}
			break
		}
	}
	// Slide the window; adjust it once per window (ATP: at the ACK of
	// finish_window_seq).
	moved := false
	for w.base < w.next && w.has(w.base) {
		w.base++
		moved = true
	}
	if moved {
		w.backoff = 0
	}
	if w.cfg.AIMD && w.base > w.finish {
		if w.ecn {
			w.cwndBytes = max(inaps.FrameLen, w.cwndBytes/2)
			w.Stats.ECNWindows++
		} else {
			w.cwndBytes = min(w.cfg.MaxWindow*inaps.FrameLen, w.cwndBytes+1500)
		}
		win := w.window()
		if n := len(w.Cwnd); n == 0 || w.Cwnd[n-1].Frames != win {
			w.Cwnd = append(w.Cwnd, CwndPoint{w.clk.Now(), win})
		}
		w.Stats.MinWindow = min(w.Stats.MinWindow, win)
		w.Stats.MaxWindowSeen = max(w.Stats.MaxWindowSeen, win)
		w.ecn = false
		w.finish = w.base + uint32(win)
	}
	// Loss detection: a fragment whose result has not come while the
	// DupThresh-th one after it has is lost (once; its RTO covers more).
	w.scan = max(w.scan, w.base)
	for w.scan+uint32(w.cfg.DupThresh) <= s {
		if q := w.scan; q < w.next && !w.has(q) && !w.trig[q&uint32(w.ring-1)] {
			w.Stats.DupACKs++
			w.trigger(q)
		}
		w.scan++
	}
	if moved {
		w.kick()
	}
}

// trigger starts the recovery of fragment s's result.
func (w *Worker) trigger(s uint32) {
	k := s & uint32(w.ring-1)
	w.trig[k] = true
	w.sentAt[k] = w.clk.Now() // its timer runs from the trigger
	switch {
	case w.cfg.Policy.Preemptive():
		// ESA: every retransmission goes to the PS; a worker asks it.
		w.Stats.Reminders++
		w.ch.Send(KindReminder, func(h wire.INAPS) { w.header(h, s) })
	default:
		// SwitchML and ATP: the gradient goes to the switch again (ATP
		// with isResend: it flushes the partial to the PS).
		w.retx = append(w.retx, s)
		w.kick()
	}
}

// header writes fragment s's header without values (a reminder).
func (w *Worker) header(h wire.INAPS, s uint32) {
	h.SetBitmap(1 << w.cfg.Rank)
	h.SetFanIn(uint8(w.cfg.Workers))
	h.SetFlags(wire.INAPSFlagsReminder)
	h.SetJob(w.cfg.Job)
	h.SetSeq(uint16(s))
	h.SetAggregator(w.indexOf(w.iter, s))
	h.SetKey(inaps.TaskKey(w.iter, s))
	h.SetTensorLength(s) // the full sequence number, for the PS
}

// arm sets the timer to the oldest outstanding fragment's deadline.
func (w *Worker) arm() {
	if w.base >= w.next {
		w.armed = false
		return
	}
	due := w.sentAt[w.base&uint32(w.ring-1)] + w.rto.backedOff(w.backoff) + w.jit
	w.armed = true
	w.timer.Reset(max(0, due-w.clk.Now()))
}

// onTimer: the oldest fragment's result is overdue (RTO), or the timer
// is early for a base that moved: re-arm.
func (w *Worker) onTimer() {
	w.armed = false
	if w.base >= w.next {
		return
	}
	k := w.base & uint32(w.ring-1)
	if due := w.sentAt[k] + w.rto.backedOff(w.backoff) + w.jit; due > w.clk.Now() {
		w.arm()
		return
	}
	w.Stats.Timeouts++
	w.backoff = min(w.backoff+1, 6)
	// The next wait is spread by up to a quarter (from the seed): the
	// workers of a job that time out together would otherwise retry in
	// step for ever, and where their retries meet a short queue the same
	// one would always be the one dropped.
	w.jit = time.Duration(w.rng.Int64N(int64(w.rto.backedOff(w.backoff))/4 + 1))
	w.trigger(w.base)
	w.arm()
}

// onMessage is a channel message from the PS.
func (w *Worker) onMessage(k Kind, m wire.INAPS) {
	switch k {
	case KindResend:
		s, it := w.near(m), uint32(m.Key())
		if it > w.iter || it == w.iter && (s >= w.next || !w.begun) {
			// Not sent yet (this worker is behind the others, maybe not
			// even in the iteration yet): when its window reaches it, it
			// goes to the PS instead of the switch, never before the
			// training loop pushed it.
			w.viaPS[s&uint32(w.ring-1)] = uint64(it)<<32 | uint64(s)
			return
		}
		// The gradient of an earlier fragment can be made again (the
		// values are a function of its place).
		w.Stats.Retransmits++
		w.ch.Send(KindGradient, func(h wire.INAPS) { w.fill(h, it, s, wire.INAPSFlagResend) })
	case KindQuery:
		s := w.near(m)
		kk := s & uint32(w.ring-1)
		if w.cacheSeq[kk] == s && w.cacheIt[kk] == uint32(m.Key()) && s != 0 {
			w.answer(uint32(m.Key()), s)
			return
		}
		// Not held yet: if it comes (the switch's multicast may be on its
		// way), the PS gets it then, rather than asking everyone to resend.
		w.asked[kk] = uint64(m.Key())<<32 | uint64(s)
		w.ch.Send(KindNotHeld, func(h wire.INAPS) {
			h.SetBitmap(1 << w.cfg.Rank)
			h.SetJob(w.cfg.Job)
			h.SetSeq(uint16(s))
			h.SetKey(m.Key())
			h.SetTensorLength(s)
		})
	case KindParameter:
		w.result(m, false, false)
	}
}

// answer gives the PS the result of fragment s of iteration it, from
// the cache.
func (w *Worker) answer(it, s uint32) {
	kk := s & uint32(w.ring-1)
	w.Stats.QueryAnswers++
	w.ch.Send(KindAnswer, func(h wire.INAPS) {
		h.SetBitmap(uint32(1)<<w.cfg.Workers - 1)
		h.SetFanIn(uint8(w.cfg.Workers))
		fl := uint8(wire.INAPSFlagACK)
		if w.cacheOvf[kk] {
			fl |= wire.INAPSFlagOverflow
		}
		h.SetFlags(fl)
		h.SetJob(w.cfg.Job)
		h.SetSeq(uint16(s))
		h.SetAggregator(w.indexOf(it, s))
		w.cache[kk].Store(h)
		h.SetKey(inaps.TaskKey(it, s))
		h.SetTensorLength(s)
	})
}

// stale reports whether a channel message waiting to go is no longer
// needed: a reminder for a result that has come meanwhile.
func (w *Worker) stale(k Kind, h wire.INAPS) bool {
	if k != KindReminder {
		return false
	}
	if it := inaps.Iteration(h); it != w.iter {
		return it < w.iter
	}
	s := inaps.FullSeq(h)
	return s < w.base || s < w.next && w.has(s)
}

// near is the full sequence number a message names.
func (w *Worker) near(m wire.INAPS) uint32 { return max(inaps.FullSeq(m), 1) }

// ChannelRetries is the channel's retry count.
func (w *Worker) ChannelRetries() uint64 {
	if w.ch == nil {
		return 0
	}
	return w.ch.Retries
}

// Describe says where the worker's window is (for failure messages).
func (w *Worker) Describe() string {
	s := fmt.Sprintf("iteration %d base %d next %d pushed %d window %d armed %v", w.iter, w.base, w.next, w.pushed, w.window(), w.armed)
	if w.ch != nil {
		s += fmt.Sprintf(" channel next %d acked %d unacked %d expect %d", w.ch.next, w.ch.acked, len(w.ch.unacked), w.ch.expect)
	}
	return s
}

// Idle reports whether the worker's channel has every message
// acknowledged.
func (w *Worker) Idle() bool { return w.ch == nil || len(w.ch.unacked) == 0 }
