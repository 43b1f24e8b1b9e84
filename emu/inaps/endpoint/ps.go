package endpoint

import (
	"fmt"
	"math/bits"
	"math/rand/v2"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/clock"
)

// PSConfig is a job's parameter server.
type PSConfig struct {
	Job       uint16
	Workers   []inaps.Addr // bit w is Workers[w]
	Self      inaps.Addr
	Policy    inaps.Policy
	Pool      int // the switch's aggregators (fcfs: where a moved slot may go)
	RTOMin    time.Duration
	DupThresh int
	// Delay is the PS's processing time per fragment it completes.
	Delay time.Duration
	// Floats is the job's float path (ATP's overflow: raw floats summed
	// here).
	Floats Floats
	Seed   uint64 // the run's: the spread of the PS's timers
}

// PSStats count a PS's work (spec: the PS's counters).
type PSStats struct {
	Partials       uint64 `json:"partials"`        // partial results and diverted gradients taken
	Completed      uint64 `json:"completed"`       // fragments the PS completed and multicast
	Entries        uint64 `json:"entries"`         // dictionary entries created
	Overlaps       uint64 `json:"overlaps"`        // partials naming a worker already in, discarded
	Late           uint64 `json:"late"`            // partials of a closed entry, discarded
	Reminders      uint64 `json:"reminders"`       // reminders sent to the switch
	RemindersValue uint64 `json:"reminders_value"` // ... that came back with a value
	RemindersEmpty uint64 `json:"reminders_empty"` // ... that came back empty
	WorkerReminder uint64 `json:"worker_reminders"`
	ResendRequests uint64 `json:"resend_requests"`
	Queries        uint64 `json:"queries"`         // worker queries sent
	QueryForwarded uint64 `json:"query_forwarded"` // results a worker's cache gave back
	Reanswers      uint64 `json:"reanswers"`       // results sent again (a closed entry asked for)
	Reassigned     uint64 `json:"reassigned"`      // fcfs: slots moved to a fresh aggregator
	ChannelRetries uint64 `json:"channel_retries"`
}

// Add counts o's work in s too (a run's PSes together).
func (s *PSStats) Add(o PSStats) {
	s.Partials += o.Partials
	s.Completed += o.Completed
	s.Entries += o.Entries
	s.Overlaps += o.Overlaps
	s.Late += o.Late
	s.Reminders += o.Reminders
	s.RemindersValue += o.RemindersValue
	s.RemindersEmpty += o.RemindersEmpty
	s.WorkerReminder += o.WorkerReminder
	s.ResendRequests += o.ResendRequests
	s.Queries += o.Queries
	s.QueryForwarded += o.QueryForwarded
	s.Reanswers += o.Reanswers
	s.Reassigned += o.Reassigned
	s.ChannelRetries += o.ChannelRetries
}

type psKey uint64

// keyOf is a header's fragment: its iteration and full sequence number.
func keyOf(h wire.INAPS) psKey {
	return psKey(uint64(inaps.Iteration(h))<<32 | uint64(inaps.FullSeq(h)))
}

func (k psKey) iter() uint32 { return uint32(k >> 32) }
func (k psKey) full() uint32 { return uint32(k) }

// entry is a fragment the PS takes part in: the dictionary's ⟨bitmap,
// aggregation result, timestamp⟩.
type entry struct {
	key       psKey
	iter      uint32
	seq       uint16
	full      uint32 // the full sequence number (inaps.FullSeq)
	bitmap    uint32
	val       inaps.Vec
	idx       uint16
	born      time.Duration
	timer     clock.Timer
	backoff   int
	dup       int
	notHeld   uint32 // workers that said they do not hold the result
	asked     uint32 // workers asked to resend in this round
	reminding bool
	querying  bool // the workers were asked whether they hold the result
	collided  bool
	raw       map[int]*inaps.Vec // workers' fragments sent as raw floats (overflow)
	final     bool               // val is the result itself (a worker's cached copy)
	ovf       bool               // ... sent as raw floats
}

// closed is a completed fragment's result, kept a while for workers that
// missed it.
type closed struct {
	key psKey
	val inaps.Vec
	idx uint16
	ok  bool
	ovf bool
}

// PS is a job's parameter server.
type PS struct {
	cfg   PSConfig
	clk   clock.Clock
	kick  func()
	out   outQueue
	chans []*channel
	mask  uint32
	open  map[psKey]*entry
	order []*entry // open entries, oldest first (the dupACK rule)
	done  []closed
	rto   rtoEstimator
	group inaps.Addr
	moved map[uint32]uint16 // fcfs: window slots moved after collisions
	spare []*entry
	rng   *rand.Rand
	// doneSet is, per iteration, a bit per fragment completed.
	doneSet map[uint32][]uint64
	Stats   PSStats
}

// NewPS makes a PS; kick tells its NIC it has a frame.
func NewPS(cfg PSConfig, clk clock.Clock, kick func()) *PS {
	if cfg.DupThresh == 0 {
		cfg.DupThresh = 3
	}
	p := &PS{cfg: cfg, clk: clk, kick: kick, mask: uint32(1)<<len(cfg.Workers) - 1, open: map[psKey]*entry{},
		done: make([]closed, 4096), rto: rtoEstimator{min: cfg.RTOMin}, group: inaps.GroupAddr(cfg.Job), moved: map[uint32]uint16{}}
	p.doneSet = map[uint32][]uint64{}
	p.rng = rand.New(rand.NewPCG(cfg.Seed^uint64(cfg.Job)<<32, 0x5eed))
	for w, a := range cfg.Workers {
		p.chans = append(p.chans, newChannel(clk, cfg.Self, a, &p.out, kick, cfg.RTOMin, func(k Kind, h wire.INAPS) { p.onMessage(w, k, h) }))
	}
	return p
}

// Open is how many entries are open (the end-of-run invariant: none).
func (p *PS) Open() int { return len(p.open) }

// NextFrame is the NIC's pull.
func (p *PS) NextFrame(buf []byte) int { return p.out.pop(buf) }

// Receive takes a frame for this host.
func (p *PS) Receive(f []byte) {
	if IsChannel(f) {
		for w, a := range p.cfg.Workers {
			if [6]byte(f[6:12]) == a.MAC {
				p.chans[w].receive(f)
				return
			}
		}
		return
	}
	if !inaps.IsINAPS(f) {
		return
	}
	h := wire.INAPS(f[inaps.HeaderOff:inaps.FrameLen])
	if h.Job() != p.cfg.Job || h.Flags()&wire.INAPSFlagACK != 0 {
		return
	}
	if h.IsReminder() {
		p.reminderBack(h)
		return
	}
	p.partial(h)
}

// lookup is the open entry of (iter, seq), made if absent unless the
// fragment is closed (nil then).
func (p *PS) lookup(h wire.INAPS) *entry {
	k := keyOf(h)
	if e := p.open[k]; e != nil {
		return e
	}
	if p.isDone(k) {
		return nil
	}
	return p.reopen(k, h)
}

// isDone reports whether fragment k was completed (a late partial or
// gradient of it is discarded, never opens it again).
func (p *PS) isDone(k psKey) bool {
	d := p.doneSet[k.iter()]
	i := k.full()
	return int(i/64) < len(d) && d[i/64]&(1<<(i%64)) != 0
}

// markDone records fragment k as completed: a bit per fragment and
// iteration, so that however far behind a late copy comes, it never
// reopens it (the result ring, done, keeps only the last values).
func (p *PS) markDone(k psKey) {
	it, i := k.iter(), k.full()
	d := p.doneSet[it]
	for int(i/64) >= len(d) {
		d = append(d, 0)
	}
	d[i/64] |= 1 << (i % 64)
	p.doneSet[it] = d
}

// reopen makes an entry for fragment k (a worker that misses its result
// asks for it again after its value left the ring).
func (p *PS) reopen(k psKey, h wire.INAPS) *entry {
	var e *entry
	if n := len(p.spare); n > 0 {
		e, p.spare = p.spare[n-1], p.spare[:n-1]
		t := e.timer
		*e = entry{timer: t}
	} else {
		e = &entry{}
		e.timer = p.clk.AfterFunc(0, func() { p.onTimer(e) })
		e.timer.Stop()
	}
	e.key, e.iter, e.seq, e.full, e.idx, e.born = k, k.iter(), h.Seq(), k.full(), h.Aggregator(), p.clk.Now()
	p.open[k] = e
	// Keep order sorted by (iter, seq): entries mostly come in order.
	i := len(p.order)
	p.order = append(p.order, e)
	for i > 0 && less(e, p.order[i-1]) {
		p.order[i] = p.order[i-1]
		i--
	}
	p.order[i] = e
	p.Stats.Entries++
	e.timer.Reset(p.timeout(e))
	return e
}

func less(a, b *entry) bool { return a.key < b.key }

// partial takes a partial result, a diverted gradient, a complete
// aggregate (fcfs) or a flushed one.
func (p *PS) partial(h wire.INAPS) {
	p.dupACK(h)
	k := keyOf(h)
	e := p.lookup(h)
	if e == nil {
		p.Stats.Late++
		if h.Flags()&wire.INAPSFlagResend != 0 {
			// A worker resent (alone, or flushing the aggregator with the
			// others' bits): one of them never got the result.
			for b := h.Bitmap(); b != 0; b &= b - 1 {
				p.reanswer(k, bits.TrailingZeros32(b))
			}
		}
		return
	}
	if h.Flags()&wire.INAPSFlagCollision != 0 && h.Bitmap()&(h.Bitmap()-1) == 0 && h.Flags()&wire.INAPSFlagResend == 0 {
		e.collided = true
	}
	p.add(e, h.Bitmap(), h)
}

// add puts contributions into an entry; contributions already in make
// the whole partial unusable (it double-counts), so it is discarded and
// the workers only it carried are asked again.
func (p *PS) add(e *entry, bitmap uint32, h wire.INAPS) {
	if bitmap == 0 {
		return
	}
	p.Stats.Partials++
	if e.bitmap&bitmap != 0 {
		p.Stats.Overlaps++
		if lost := bitmap &^ e.bitmap; lost != 0 {
			p.requestResends(e, lost)
		}
		return
	}
	if h.Flags()&wire.INAPSFlagOverflow != 0 && bitmap&(bitmap-1) == 0 {
		// A worker's fragment as raw floats: summed in floats at the end.
		if e.raw == nil {
			e.raw = map[int]*inaps.Vec{}
		}
		v := new(inaps.Vec)
		v.Load(h)
		e.raw[bits.TrailingZeros32(bitmap)] = v
	} else {
		e.val.Add(h)
	}
	e.bitmap |= bitmap
	e.asked &^= bitmap
	if e.bitmap == p.mask {
		p.complete(e)
	}
}

// complete multicasts an entry's result and closes it.
func (p *PS) complete(e *entry) {
	p.Stats.Completed++
	p.rto.sample(p.clk.Now() - e.born)
	idx := e.idx
	moved := uint16(0)
	if p.cfg.Policy == inaps.FCFS && e.collided && p.cfg.Pool > 0 {
		// ATP: after a collision the slot takes a fresh aggregator,
		// returned in the tensor length with the collision bit.
		slot := (uint32(e.seq) - 1) % inaps.Slots
		n := p.moved[slot] + 1
		p.moved[slot] = n
		moved = inaps.SaltedIndex(p.cfg.Job, uint16(slot), 0x8000+n, p.cfg.Pool) + 1
		p.Stats.Reassigned++
	}
	ovf := e.ovf
	if !e.final && len(e.raw) > 0 {
		ints := e.val
		p.cfg.Floats.FloatResult(&ints, e.raw, &e.val)
		ovf = true
	}
	p.send(e.key, &e.val, idx, moved, ovf)
	p.markDone(e.key)
	c := p.slot(e.key)
	*c = closed{key: e.key, val: e.val, idx: idx, ok: true, ovf: ovf}
	p.close(e)
}

// send multicasts a result to the job's group (through the switch, whose
// copy to each worker also frees the aggregator under fcfs).
func (p *PS) send(k psKey, v *inaps.Vec, idx uint16, moved uint16, ovf bool) {
	b := p.out.get(inaps.FrameLen)
	h := inaps.WriteHeaders(b, p.cfg.Self, p.group)
	h.SetBitmap(p.mask)
	h.SetFanIn(uint8(len(p.cfg.Workers)))
	flags := uint8(wire.INAPSFlagACK)
	if moved > 0 {
		flags |= wire.INAPSFlagCollision
	}
	if ovf {
		flags |= wire.INAPSFlagOverflow
	}
	h.SetFlags(flags)
	h.SetJob(p.cfg.Job)
	h.SetSeq(uint16(k.full()))
	h.SetAggregator(idx)
	h.SetPriority(0)
	h.SetLevel(0)
	v.Store(h)
	h.SetKey(inaps.TaskKey(k.iter(), k.full()))
	h.SetTensorLength(uint32(moved))
	if p.cfg.Delay > 0 {
		p.clk.AfterFunc(p.cfg.Delay, func() { p.out.put(b); p.kick() })
		return
	}
	p.out.put(b)
	p.kick()
}

// reanswer sends a closed fragment's result again to worker w, who
// asked for it (a resend, a reminder): over the channel under ESA, as a
// result frame under fcfs.
func (p *PS) reanswer(k psKey, w int) bool {
	c := p.slot(k)
	if !c.ok || c.key != k || w < 0 || w >= len(p.chans) {
		return false
	}
	p.Stats.Reanswers++
	fill := func(h wire.INAPS) {
		h.SetBitmap(p.mask)
		h.SetFanIn(uint8(len(p.cfg.Workers)))
		fl := uint8(wire.INAPSFlagACK)
		if c.ovf {
			fl |= wire.INAPSFlagOverflow
		}
		h.SetFlags(fl)
		h.SetJob(p.cfg.Job)
		h.SetSeq(uint16(k.full()))
		h.SetAggregator(c.idx)
		c.val.Store(h)
		h.SetKey(inaps.TaskKey(k.iter(), k.full()))
	}
	if p.cfg.Policy.Preemptive() {
		p.chans[w].Send(KindParameter, fill)
		return true
	}
	b := p.out.get(inaps.FrameLen)
	fill(inaps.WriteHeaders(b, p.cfg.Self, p.cfg.Workers[w]))
	p.out.put(b)
	p.kick()
	return true
}

func (p *PS) close(e *entry) {
	e.timer.Stop()
	delete(p.open, e.key)
	for i, o := range p.order {
		if o == e {
			copy(p.order[i:], p.order[i+1:])
			p.order[len(p.order)-1] = nil
			p.order = p.order[:len(p.order)-1]
			break
		}
	}
	p.spare = append(p.spare, e)
}

// dupACK counts, for the oldest open entries, arrivals of later
// fragments; the DupThresh-th reminds the switch (ESA's PS: "three
// gradient fragments with larger sequence numbers").
func (p *PS) dupACK(h wire.INAPS) {
	if !p.cfg.Policy.Preemptive() {
		return
	}
	x := entry{key: keyOf(h)}
	for i := 0; i < len(p.order) && i < 16; i++ {
		e := p.order[i]
		if !less(e, &x) {
			break
		}
		// An entry already waiting on the workers (queried, or asked to
		// resend) gains nothing from reminding the switch again: its
		// timer does that.
		if e.dup++; e.dup == p.cfg.DupThresh && !e.reminding && e.asked == 0 && !e.querying {
			p.remind(e)
		}
	}
}

// timeout is how long an entry waits before the PS acts: an RTO (with
// back-off) under ESA, whose PS reminds the switch; ten under ATP's
// policy, whose PS has no timer of its own (its workers' resends complete
// an entry), for entries nothing else will close: a late copy's, opened
// after the fragment's result was out.
func (p *PS) timeout(e *entry) time.Duration {
	d := p.rto.backedOff(e.backoff)
	if !p.cfg.Policy.Preemptive() {
		d *= 10
	}
	return d + time.Duration(p.rng.Int64N(int64(d)/4+1)) // spread, as the workers' (Worker.onTimer)
}

// onTimer: an entry has waited its timeout: under ESA remind the switch
// (again); otherwise ask the workers.
func (p *PS) onTimer(e *entry) {
	if p.open[e.key] != e {
		return
	}
	e.backoff = min(e.backoff+1, 6)
	e.asked, e.querying = 0, false
	if p.cfg.Policy.Preemptive() {
		p.remind(e)
		return
	}
	p.query(e)
	e.timer.Reset(p.timeout(e))
}

// remind sends a reminder to the switch for e's aggregator.
func (p *PS) remind(e *entry) {
	p.Stats.Reminders++
	e.reminding = true
	e.dup = 0
	b := p.out.get(inaps.FrameLen)
	clear(b)
	h := inaps.WriteHeaders(b, p.cfg.Self, p.group)
	h.SetFlags(wire.INAPSFlagsReminder)
	h.SetJob(p.cfg.Job)
	h.SetSeq(e.seq)
	h.SetAggregator(e.idx)
	h.SetKey(inaps.TaskKey(e.iter, e.full))
	p.out.put(b)
	p.kick()
	e.timer.Reset(p.timeout(e))
}

// reminderBack is a reminder returning from the switch: with the
// aggregator's partial, or empty.
func (p *PS) reminderBack(h wire.INAPS) {
	e := p.open[keyOf(h)]
	if e == nil {
		if h.Bitmap() != 0 {
			p.Stats.Late++
		}
		return
	}
	e.reminding = false
	if h.Bitmap() != 0 {
		p.Stats.RemindersValue++
		p.add(e, h.Bitmap(), h)
		if p.open[e.key] == e {
			// The switch had not completed it: nobody holds the result,
			// so the workers still missing resend (selective).
			p.requestResends(e, p.mask&^e.bitmap)
		}
		return
	}
	p.Stats.RemindersEmpty++
	// Nothing held: the switch may have completed it while the reminder
	// was on its way; ask the workers first.
	p.query(e)
}

// query asks every worker whether it holds e's result.
func (p *PS) query(e *entry) {
	e.notHeld, e.querying = 0, true
	for w := range p.chans {
		p.Stats.Queries++
		p.chans[w].Send(KindQuery, func(m wire.INAPS) { p.about(m, e) })
	}
}

// slot is a closed fragment's place in done: hashed, so that the same
// sequence number of consecutive iterations do not evict each other.
func (p *PS) slot(k psKey) *closed {
	return &p.done[int((uint64(k)*0x9E3779B97F4A7C15)>>52)%len(p.done)]
}

// about writes an entry's identity into a channel message.
func (p *PS) about(m wire.INAPS, e *entry) {
	m.SetJob(p.cfg.Job)
	m.SetSeq(e.seq)
	m.SetAggregator(e.idx)
	m.SetKey(inaps.TaskKey(e.iter, e.full))
	m.SetTensorLength(e.full)
}

// requestResends asks the workers in bits (not asked yet this round) to
// send their gradient over the channel.
func (p *PS) requestResends(e *entry, bits uint32) {
	bits &^= e.asked
	for w := range p.chans {
		if bits&(1<<w) != 0 {
			p.Stats.ResendRequests++
			p.chans[w].Send(KindResend, func(m wire.INAPS) { p.about(m, e) })
		}
	}
	e.asked |= bits
}

// onMessage is a channel message from worker w.
func (p *PS) onMessage(w int, k Kind, m wire.INAPS) {
	switch k {
	case KindGradient:
		p.dupACK(m)
		e := p.lookup(m)
		if e == nil {
			p.Stats.Late++
			return
		}
		p.add(e, m.Bitmap(), m)
	case KindReminder:
		p.Stats.WorkerReminder++
		kk := keyOf(m)
		e := p.open[kk]
		if e == nil {
			if p.isDone(kk) {
				if p.reanswer(kk, w) {
					return
				}
				// Done, its value gone from the ring, and a worker still
				// misses it: the switch holds nothing of it and the workers'
				// caches are past it; they all send it again.
				e = p.reopen(kk, m)
				p.requestResends(e, p.mask)
				return
			}
			e = p.reopen(kk, m)
		}
		if !e.reminding {
			p.remind(e)
		}
	case KindAnswer:
		e := p.open[keyOf(m)]
		if e == nil {
			return
		}
		p.Stats.QueryForwarded++
		e.val.Load(m)
		e.bitmap = p.mask
		e.final, e.ovf = true, m.Flags()&wire.INAPSFlagOverflow != 0
		p.complete(e)
	case KindNotHeld:
		e := p.open[keyOf(m)]
		if e == nil {
			return
		}
		e.notHeld |= 1 << w
		if e.notHeld == p.mask {
			p.requestResends(e, p.mask&^e.bitmap)
		}
	}
}

// Retries is the channels' retry count.
func (p *PS) Retries() uint64 {
	var n uint64
	for _, c := range p.chans {
		n += c.Retries
	}
	return n
}

// Describe says what the open entries hold (for failure messages).
func (p *PS) Describe() string {
	s := ""
	for i, e := range p.order {
		if i == 4 {
			s += " ..."
			break
		}
		s += fmt.Sprintf(" (iteration %d seq %d bitmap %#x notHeld %#x asked %#x)", e.iter, e.seq, e.bitmap, e.notHeld, e.asked)
	}
	return s
}

// Idle reports whether the PS has nothing left to do: no entry open,
// every channel message acknowledged.
func (p *PS) Idle() bool {
	if len(p.open) > 0 {
		return false
	}
	for _, c := range p.chans {
		if len(c.unacked) > 0 {
			return false
		}
	}
	return true
}
