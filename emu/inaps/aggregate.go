package inaps

import (
	"math/bits"
	"time"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames/wire"
)

// ProcessFrame is the data plane: an INA-PS frame of an installed job is
// aggregated, diverted, swapped or copied here; anything else goes on
// through the pipeline.
func (p *Program) ProcessFrame(f []byte, port int, emit switching.ProgramEmit) bool {
	if !IsINAPS(f) || p.pool == nil {
		return false
	}
	h := wire.INAPS(f[HeaderOff:FrameLen])
	j := p.jobs[h.Job()]
	if j == nil {
		p.stats.UnknownJob++
		return false
	}
	g := GroupAddr(j.ID)
	switch {
	case [6]byte(f[0:6]) == g.MAC && h.Flags()&wire.INAPSFlagACK != 0:
		p.psResult(j, f, h, emit) // a PS's result: release (fcfs), copy to the workers
		return true
	case h.Flags()&wire.INAPSFlagACK != 0:
		return false // a result on its way to one host
	case h.IsReminder():
		if [6]byte(f[0:6]) != g.MAC {
			return false // a reminder coming back to its PS
		}
		p.reminder(j, f, h, emit)
		return true
	case h.Flags()&wire.INAPSFlagCollision != 0:
		return false // a partial or a diverted gradient on its way to the PS
	}
	p.stats.Gradients++
	if int(h.Aggregator()) >= len(p.pool) || (p.cfg.Policy == Static && (int(h.Aggregator()) < j.First || int(h.Aggregator()) >= j.First+j.Size)) {
		p.stats.BadIndex++
		return true // dropped: the worker's reminder or timeout recovers
	}
	if h.Flags()&wire.INAPSFlagOverflow != 0 && p.cfg.Policy != Static {
		p.overflow(j, f, h, emit)
		return true
	}
	switch p.cfg.Policy {
	case Static:
		p.static(j, f, h, emit)
	case FCFS:
		p.fcfs(j, f, h, emit)
	default:
		p.preemptive(j, f, h, emit)
	}
	return true
}

// matches reports whether a holds the packet's task.
func (a *Aggregator) matches(h wire.INAPS) bool {
	return a.Used && a.Job == h.Job() && a.Seq == h.Seq() && a.Key == h.Key()
}

// claim gives a to the packet's task, with the packet as its first
// contribution.
func (p *Program) claim(a *Aggregator, f []byte, h wire.INAPS) {
	*a = Aggregator{Used: true, Job: h.Job(), Seq: h.Seq(), Key: h.Key(), Prio: h.Priority(), Level: h.Level(),
		FanIn: h.FanIn(), ECN: CE(f) || h.Flags()&wire.INAPSFlagECN != 0, Bitmap: h.Bitmap(), Count: 1, Since: p.env.Clock.Now()}
	a.Values.Load(h)
	p.stats.Aggregated++
	p.inUse++
	p.stats.MaxInUse = max(p.stats.MaxInUse, p.inUse)
}

// join adds the packet to a's task; it reports false for a contribution
// already in (a duplicate, dropped).
func (p *Program) join(a *Aggregator, f []byte, h wire.INAPS) bool {
	if a.Bitmap&h.Bitmap() != 0 && !p.Mutations.ReAddRetransmitted {
		p.stats.Duplicates++
		return false
	}
	a.Values.Add(h)
	a.Bitmap |= h.Bitmap()
	a.Count++
	a.ECN = a.ECN || CE(f) || h.Flags()&wire.INAPSFlagECN != 0
	p.stats.Aggregated++
	return true
}

// full reports whether every worker of a's task is in.
func (a *Aggregator) full() bool {
	return a.FanIn > 0 && a.Bitmap == uint32(1<<a.FanIn-1)
}

// free releases a.
func (p *Program) free(a *Aggregator) {
	if a.Used {
		if lost := a.Bitmap &^ a.Out; lost != 0 {
			// Contributions that never left in a frame: a task a late
			// copy started, freed by its job's teardown, or a bug.
			if p.tearing {
				p.stats.AbandonedContributions += uint64(bits.OnesCount32(lost))
			} else {
				p.stats.LostContributions += uint64(bits.OnesCount32(lost))
			}
		}
		d := int64(p.env.Clock.Now() - a.Since)
		p.heldNs += d
		p.held[a.Job] += d
		if a.Done {
			p.wait[a.Job] += int64(a.DoneAt - a.Since)
		} else {
			p.wait[a.Job] += d
		}
		p.inUse--
	}
	*a = Aggregator{}
}

// build writes a's task into the scratch frame from src to dst with
// flags, and returns it.
func (p *Program) build(a *Aggregator, j *Job, src, dst Addr, flags uint8) []byte {
	f := p.out[:]
	h := WriteHeaders(f, src, dst)
	h.SetBitmap(a.Bitmap)
	h.SetFanIn(a.FanIn)
	if a.ECN {
		flags |= wire.INAPSFlagECN
	}
	h.SetFlags(flags)
	h.SetJob(a.Job)
	h.SetSeq(a.Seq)
	h.SetPriority(a.Prio)
	h.SetLevel(a.Level)
	a.Values.Store(h)
	h.SetKey(a.Key)
	h.SetTensorLength(0)
	return f
}

// multicast sends a's result to every worker of its job.
func (p *Program) multicast(a *Aggregator, j *Job, idx uint16, emit switching.ProgramEmit, lat time.Duration) {
	f := p.build(a, j, SwitchAddr, j.Workers[0], wire.INAPSFlagACK)
	wire.INAPS(f[HeaderOff:]).SetAggregator(idx)
	a.Out |= a.Bitmap
	for _, w := range j.Workers {
		Readdress(f, w)
		emit(f, lat)
	}
	p.stats.Multicasts++
}

// static is SwitchML's slot: per-slot bitmap, completion broadcast, the
// result kept (shadow copy) for a worker whose copy was lost, stale
// rounds dropped.
func (p *Program) static(j *Job, f []byte, h wire.INAPS, emit switching.ProgramEmit) {
	idx := h.Aggregator()
	a := &p.pool[idx]
	switch {
	case a.matches(h):
		if a.Done {
			// A retransmission reaching a completed slot: its sender lost
			// the result; answer it alone, from the kept copy.
			if a.Bitmap&h.Bitmap() != 0 {
				w := bits.TrailingZeros32(h.Bitmap())
				if w < len(j.Workers) {
					r := p.build(a, j, SwitchAddr, j.Workers[w], wire.INAPSFlagACK)
					wire.INAPS(r[HeaderOff:]).SetAggregator(idx)
					emit(r, p.cfg.Latency)
					p.stats.Retransmits++
				}
			}
			return
		}
		if !p.join(a, f, h) {
			return
		}
	case a.Used && older(h, a):
		p.stats.Stale++ // a late copy of a round the slot has moved past
		return
	default:
		// A new round of the slot: the previous one completed, or every
		// worker would not be sending this one (SwitchML's self-clocking).
		if a.Used {
			p.free(a)
		}
		p.claim(a, f, h)
	}
	if a.full() {
		a.Done, a.DoneAt = true, p.env.Clock.Now()
		p.stats.Completed++
		p.multicast(a, j, idx, emit, p.cfg.Latency)
	}
}

// older reports whether the packet's task precedes a's in its job's
// order (iteration, then sequence number in serial arithmetic).
func older(h wire.INAPS, a *Aggregator) bool {
	if it, ait := Iteration(h), uint32(a.Key); it != ait {
		return int32(it-ait) < 0
	}
	return int32(FullSeq(h)-(uint32(a.Key>>32&0xffff)<<16|uint32(a.Seq))) < 0
}

// fcfs is ATP's aggregator: claim or join; a collision goes raw to the
// PS; completion goes to the PS; a resend flushes the partial.
func (p *Program) fcfs(j *Job, f []byte, h wire.INAPS, emit switching.ProgramEmit) {
	idx := h.Aggregator()
	a := &p.pool[idx]
	resend := h.Flags()&wire.INAPSFlagResend != 0
	switch {
	case a.matches(h):
		if resend {
			// Flush: the aggregator's sum, with this packet's own values
			// if its bit is not in yet, leaves for the PS; the aggregator
			// is free.
			if a.Bitmap&h.Bitmap() == 0 {
				p.join(a, f, h)
			}
			// Marked isResend alone: resend and collision together are
			// the reminder's flags.
			r := p.build(a, j, SwitchAddr, j.PS, wire.INAPSFlagResend)
			wire.INAPS(r[HeaderOff:]).SetAggregator(idx)
			a.Out |= a.Bitmap
			emit(r, p.cfg.Latency)
			p.stats.Flushed++
			p.free(a)
			return
		}
		if a.Done || !p.join(a, f, h) {
			if a.Done {
				p.stats.Duplicates++
			}
			return
		}
	case !a.Used:
		if resend {
			// Nothing held: the resend goes to the PS as a contribution.
			p.divert(j, f, h, emit, 0)
			return
		}
		p.claim(a, f, h)
	default:
		p.stats.Collisions++
		p.divert(j, f, h, emit, 0)
		return
	}
	if a.full() {
		a.Done, a.DoneAt = true, p.env.Clock.Now()
		p.stats.Completed++
		p.stats.ToPS++
		r := p.build(a, j, SwitchAddr, j.PS, 0)
		wire.INAPS(r[HeaderOff:]).SetAggregator(idx)
		a.Out |= a.Bitmap
		emit(r, p.cfg.Latency)
	}
}

// overflow is ATP's overflow path: a fragment sent as raw floats is
// never added here; it goes to the PS, and so does the partial of its
// task if the switch holds it (the task cannot complete here without it).
func (p *Program) overflow(j *Job, f []byte, h wire.INAPS, emit switching.ProgramEmit) {
	idx := h.Aggregator()
	if a := &p.pool[idx]; a.matches(h) && !a.Done {
		r := p.build(a, j, SwitchAddr, j.PS, wire.INAPSFlagCollision)
		wire.INAPS(r[HeaderOff:]).SetAggregator(idx)
		a.Out |= a.Bitmap
		p.stats.Flushed++
		p.free(a)
		emit(r, p.cfg.Latency)
	}
	p.stats.Overflows++
	p.divert(j, f, h, emit, 0)
}

// divert sends a gradient raw to its job's PS, tagged as a collision
// (the PS takes it as a partial of one contribution).
func (p *Program) divert(j *Job, f []byte, h wire.INAPS, emit switching.ProgramEmit, extra time.Duration) {
	if h.Flags()&wire.INAPSFlagResend == 0 {
		// A resend keeps its isResend alone (with the collision bit it
		// would read as a reminder).
		h.SetFlags(h.Flags() | wire.INAPSFlagCollision)
	}
	if [6]byte(f[0:6]) != j.PS.MAC {
		Redirect(f, Addr{MAC: [6]byte(f[6:12]), IP: [4]byte(f[26:30])}, j.PS)
	}
	p.stats.Diverted++
	emit(f, p.cfg.Latency+extra)
}

// preemptive is ESA's aggregator (and its straw men's): claim, join with
// priority renewal, multicast on completion; on a collision the higher
// priority takes the aggregator and the holder's partial goes to its PS
// by packet swapping (one more pipeline pass), else the packet goes to
// its PS and the holder's priority is halved.
func (p *Program) preemptive(j *Job, f []byte, h wire.INAPS, emit switching.ProgramEmit) {
	idx := h.Aggregator()
	a := &p.pool[idx]
	switch {
	case !a.Used:
		p.claim(a, f, h)
	case a.matches(h) && a.Level == h.Level():
		if !p.join(a, f, h) {
			return
		}
		if !a.full() {
			a.Prio = h.Priority() // renewal: an active task keeps the priority of its latest packet
			return
		}
	default:
		p.stats.Collisions++
		if !p.preempts(a, h) {
			p.stats.FailedPreempts++
			if p.cfg.Policy == ESA {
				a.Prio >>= 1
				p.stats.Downgrades++
			}
			p.divert(j, f, h, emit, 0)
			return
		}
		// Packet swapping: the packet leaves with the holder's task and
		// partial, towards the holder's PS; the aggregator starts the
		// packet's task with its contribution.
		old := p.jobs[a.Job]
		if old == nil {
			old = j // a torn-down job's leftover: its partial goes nowhere useful
		}
		src := Addr{MAC: [6]byte(f[6:12]), IP: [4]byte(f[26:30])}
		r := p.build(a, old, src, old.PS, wire.INAPSFlagCollision)
		wire.INAPS(r[HeaderOff:]).SetAggregator(idx)
		if p.Mutations.EvictLosesBitmap {
			// The values are swapped, the bitmap is not: the partial
			// leaves naming the evicting packet's worker.
			wire.INAPS(r[HeaderOff:]).SetBitmap(h.Bitmap())
		}
		a.Out |= wire.INAPS(r[HeaderOff:]).Bitmap()
		p.stats.Preemptions++
		p.stats.Evicted++
		p.stats.Resubmits++
		p.free(a)
		p.claim(a, f, h)
		emit(r, p.cfg.Latency+p.cfg.Resubmit)
		if !a.full() {
			return
		}
	}
	if a.full() {
		p.stats.Completed++
		p.multicast(a, j, idx, emit, p.cfg.Latency)
		p.free(a)
	}
}

// preempts decides a collision: ESA by priority (ties keep the holder),
// straw1 always, straw2 by a coin.
func (p *Program) preempts(a *Aggregator, h wire.INAPS) bool {
	switch p.cfg.Policy {
	case Straw1:
		return true
	case Straw2:
		return p.coin.IntN(2) == 0
	}
	return h.Priority() > a.Prio
}

// reminder is deallocation case 3: a PS asks for what the switch holds
// of a task; the reminder returns to it carrying the aggregator's value
// and bitmap (or bitmap 0: nothing held), and the aggregator is free.
func (p *Program) reminder(j *Job, f []byte, h wire.INAPS, emit switching.ProgramEmit) {
	p.stats.Reminders++
	idx := h.Aggregator()
	var r []byte
	if int(idx) < len(p.pool) && p.pool[idx].matches(h) {
		a := &p.pool[idx]
		p.stats.RemindersValue++
		p.stats.Resubmits++
		if p.Mutations.ReminderNoSwap {
			p.free(a)
			r = f
			h.SetBitmap(0)
		} else {
			r = p.build(a, j, SwitchAddr, j.PS, wire.INAPSFlagsReminder)
			wire.INAPS(r[HeaderOff:]).SetAggregator(idx)
			wire.INAPS(r[HeaderOff:]).SetFlags(wire.INAPSFlagsReminder) // exactly: build ORs in an ECN mark, and 0x0E is not a reminder
			a.Out |= a.Bitmap
			p.free(a)
		}
	} else {
		r = f
		h.SetBitmap(0)
	}
	Redirect(r, SwitchAddr, j.PS)
	emit(r, p.cfg.Latency)
}

// psResult is a PS's completed result to the job's group: under fcfs its
// ACK frees the task's aggregator as it passes; it is copied to every
// worker.
func (p *Program) psResult(j *Job, f []byte, h wire.INAPS, emit switching.ProgramEmit) {
	if p.cfg.Policy == FCFS {
		if idx := h.Aggregator(); int(idx) < len(p.pool) && p.pool[idx].matches(h) {
			// The ACK carries the task's whole result: every contribution
			// the aggregator holds is in it (one that came after a flush
			// was sent again to the PS by its worker as well).
			a := &p.pool[idx]
			if a.ECN {
				// ATP's ECN register: the ACK passing the aggregator
				// carries the marks its contributions met.
				h.SetFlags(h.Flags() | wire.INAPSFlagECN)
			}
			a.Out |= a.Bitmap
			p.free(a)
			p.stats.Released++
		}
	}
	p.stats.PSMulticasts++
	for _, w := range j.Workers {
		Readdress(f, w)
		emit(f, p.cfg.Latency)
	}
}
