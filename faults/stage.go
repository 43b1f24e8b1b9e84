package faults

import (
	"math/rand/v2"
	"time"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// Note says what a stage did to an emitted frame (a bit set), for counters
// and capture annotations.
type Note uint16

const (
	NoteLoss    Note = 1 << iota // netem loss (random or gemodel): the frame was dropped
	NoteDrop                     // a deterministic drop event
	NoteDup                      // this emission is a duplicate
	NoteCorrupt                  // a bit was flipped
	NoteDelay                    // extra delay (netem delay/jitter or a delay event)
	NoteReorder                  // netem reorder: sent ahead of delayed frames
	NoteHold                     // released after being held back
	NoteSpoof                    // a forged copy from another port
)

var noteNames = [...]string{"loss", "drop", "duplicate", "corrupt", "delay", "reorder", "hold", "spoof"}

func (n Note) String() string {
	s := ""
	for i, name := range noteNames {
		if n&(1<<i) != 0 {
			if s != "" {
				s += ","
			}
			s += name
		}
	}
	return s
}

// Emit receives what a stage lets through: the frame (valid only during
// the call), the extra delay before it goes on the wire, what was done to
// it, and the deterministic event responsible, if any.
type Emit func(frame []byte, delay time.Duration, note Note, ev *Event)

// Stats count a stage's work.
type Stats struct {
	Frames     uint64 `json:"frames"`
	Lost       uint64 `json:"lost"`    // netem loss
	Dropped    uint64 `json:"dropped"` // deterministic drop events
	Duplicated uint64 `json:"duplicated"`
	Corrupted  uint64 `json:"corrupted"`
	Delayed    uint64 `json:"delayed"`
	Reordered  uint64 `json:"reordered"`
	Held       uint64 `json:"held"`
	Spoofed    uint64 `json:"spoofed"` // forged copies sent in from another port
}

// Add adds x's counts to s (totals over several stages).
func (s *Stats) Add(x Stats) {
	s.Frames += x.Frames
	s.Lost += x.Lost
	s.Dropped += x.Dropped
	s.Duplicated += x.Duplicated
	s.Corrupted += x.Corrupted
	s.Delayed += x.Delayed
	s.Reordered += x.Reordered
	s.Held += x.Held
	s.Spoofed += x.Spoofed
}

// Injected is how many faults the counts record (every kind, frames aside).
func (s Stats) Injected() uint64 {
	return s.Lost + s.Dropped + s.Duplicated + s.Corrupted + s.Delayed + s.Reordered + s.Held + s.Spoofed
}

type eventState struct {
	ev    Event
	count int
}

type heldFrame struct {
	buf   []byte
	left  int
	note  Note
	ev    *Event
	since time.Duration
}

// Stage is the fault stage of one link direction: the deterministic events
// aimed at it, then netem's random impairments, drawn from its own seeded
// generator so a run replays bit for bit. It is not safe for concurrent use.
type Stage struct {
	Port  int
	Dir   Dir
	Link  string // the link direction's name (events with link= match it)
	Stats Stats
	// Now, if set, is the link's clock: a held frame then says, in
	// HeldFor while it is emitted, how long it was held back, so that a
	// capture can put it back where it was sent.
	Now func() time.Duration
	// HeldFor is how long the frame being emitted was held (0 for a frame
	// that was not).
	HeldFor time.Duration
	// OnDrop, if set, sees every frame the stage drops (for capture
	// annotations), with the event responsible for a deterministic drop.
	OnDrop func(frame []byte, note Note, ev *Event)
	// OnSpoof, if set, takes each forged copy a spoof event makes (valid
	// only during the call) and the port it is to enter the switch by.
	// Without it spoof events do nothing.
	OnSpoof func(frame []byte, from int, ev *Event)

	netem    Netem
	events   []eventState
	rng      *rand.Rand
	geBad    bool
	reorderN int // netem's reorder counter
	held     []heldFrame
	forged   []byte
	pool     [][]byte
}

// StageSeed derives a stage's seed from the run seed and its place, so
// every link direction draws an independent, reproducible stream.
func StageSeed(run uint64, port int, dir Dir) uint64 {
	x := run ^ uint64(port)<<8 ^ uint64(dir)
	x += 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// NewStage builds the stage for switch port port, direction dir: the
// events whose port and dir keys match it, and the netem settings n.
func NewStage(port int, dir Dir, n Netem, events []Event, seed uint64) *Stage {
	return NewLinkStage("", port, dir, n, events, seed)
}

// NewLinkStage builds the stage for the link direction named link, which
// is host port's link in direction dir (port -1: no host's link, dir
// DirAny: not relative to a switch). An event with a link key matches
// only the direction of that name, others their port and dir keys.
func NewLinkStage(link string, port int, dir Dir, n Netem, events []Event, seed uint64) *Stage {
	s := &Stage{Port: port, Dir: dir, Link: link, netem: n, rng: rand.New(rand.NewPCG(seed, seed^0x5DEECE66D))}
	if s.netem.Reorder > 0 && s.netem.Gap == 0 {
		s.netem.Gap = 1 // tc's default
	}
	for _, e := range events {
		if e.Link != "" && e.Link == link || e.Link == "" && (e.Port < 0 || e.Port == port) && (e.Dir == DirAny || e.Dir == dir) {
			s.events = append(s.events, eventState{ev: e})
		}
	}
	return s
}

// Active reports whether the stage can do anything at all.
func (s *Stage) Active() bool { return len(s.events) > 0 || !s.netem.Zero() }

// Pending is the number of frames held back.
func (s *Stage) Pending() int { return len(s.held) }

// classify finds what events match on: class, destination QP and PSN.
func classify(frame []byte) (c Class, qp, psn int64, v frames.View, roce bool) {
	if frames.IsMACControl(frame) {
		return ClassPause, -1, -1, v, false
	}
	if v.Parse(frame) != nil {
		return ClassAny, -1, -1, v, false
	}
	op := v.Opcode()
	c = ClassData
	if op == wire.Acknowledge || op.IsReadResponse() || op == wire.AtomicAcknowledge {
		c = ClassAck
		if a := v.AETH(); a != nil && (a.Syndrome().IsNAK() || a.Syndrome().IsRNRNAK()) {
			c = ClassNAK
		}
	}
	if op == wire.CNP {
		c = ClassCNP
	}
	return c, int64(v.DestQP()), int64(v.PSN()), v, true
}

func (e *eventState) matches(c Class, qp, psn int64) bool {
	ev := &e.ev
	if ev.Class != ClassAny && ev.Class != c || ev.QP >= 0 && ev.QP != qp || ev.PSN >= 0 && ev.PSN != psn {
		return false
	}
	e.count++
	switch {
	case ev.Nth > 0 && ev.Every > 0:
		return e.count >= ev.Nth && (e.count-ev.Nth)%ev.Every == 0
	case ev.Nth > 0:
		return e.count == ev.Nth
	case ev.Every > 0:
		return e.count%ev.Every == 0
	}
	return true
}

// Process runs one frame through the stage and emits what comes out:
// nothing (lost or held), the frame, or two copies; then any held frames
// whose wait is over. Process may modify frame in place (corruption).
func (s *Stage) Process(frame []byte, emit Emit) {
	s.Stats.Frames++
	var (
		c       = ClassAny
		qp, psn = int64(-1), int64(-1)
		v       frames.View
		roce    bool
	)
	if len(s.events) > 0 { // netem alone never looks inside the frame
		c, qp, psn, v, roce = classify(frame)
	}
	var note Note
	var fired *Event
	var delay time.Duration
	copies := 1
	hold := 0
	for i := range s.events {
		e := &s.events[i]
		if !e.matches(c, qp, psn) || (e.ev.Prob < 1 && s.rng.Float64() >= e.ev.Prob) {
			continue
		}
		fired = &e.ev
		switch e.ev.Action {
		case ActDrop:
			note |= NoteDrop
		case ActDup:
			copies, note = 2, note|NoteDup
		case ActCorrupt:
			s.corruptCovered(frame, &v, roce)
			note |= NoteCorrupt
		case ActDelay:
			delay += e.ev.Delay
			note |= NoteDelay
		case ActHold:
			hold = max(hold, e.ev.Hold)
		case ActSpoof:
			s.spoof(frame, &e.ev)
		}
	}
	if note&NoteDrop != 0 {
		s.Stats.Dropped++
		if s.OnDrop != nil {
			s.OnDrop(frame, note, fired)
		}
		s.release(emit)
		return
	}
	if s.lose() {
		s.Stats.Lost++
		if s.OnDrop != nil {
			s.OnDrop(frame, note|NoteLoss, nil)
		}
		s.release(emit)
		return
	}
	if s.netem.Duplicate > 0 && s.rng.Float64() < s.netem.Duplicate {
		copies, note = 2, note|NoteDup
	}
	if s.netem.Corrupt > 0 && s.rng.Float64() < s.netem.Corrupt && len(frame) > 0 {
		// netem flips one bit anywhere in the frame.
		frame[s.rng.IntN(len(frame))] ^= 1 << s.rng.IntN(8)
		note |= NoteCorrupt
	}
	d, reordered := s.netemDelay()
	delay += d
	if reordered {
		s.Stats.Reordered++
		note |= NoteReorder
		if s.netem.Delay == 0 && s.netem.Jitter == 0 {
			// With nothing delayed to overtake, a reordered frame swaps
			// places with the next one instead.
			hold = max(hold, 1)
		}
	}
	if delay > 0 {
		s.Stats.Delayed++
		note |= NoteDelay
	}
	if note&NoteCorrupt != 0 {
		s.Stats.Corrupted++
	}
	if copies == 2 {
		s.Stats.Duplicated++
	}
	if hold > 0 {
		s.Stats.Held++
		s.release(emit)
		for i := 0; i < copies; i++ {
			s.keep(frame, hold, note|NoteHold, fired)
		}
		return
	}
	for i := 0; i < copies; i++ {
		n := note
		if i == 1 {
			n |= NoteDup
		}
		emit(frame, delay, n, fired)
	}
	s.release(emit)
}

// corruptCovered flips one bit the ICRC covers and does not mask (a
// transport header or payload byte), so the corruption is always
// detectable; a frame that is not RoCE gets a bit flipped anywhere.
func (s *Stage) corruptCovered(frame []byte, v *frames.View, roce bool) {
	if !roce {
		if len(frame) > 0 {
			frame[s.rng.IntN(len(frame))] ^= 1 << s.rng.IntN(8)
		}
		return
	}
	start := v.ICRCOffset() - len(v.Payload()) - len(v.Pad())
	if start >= v.ICRCOffset() { // no payload: use the BTH's PSN bytes
		start = v.ICRCOffset() - 3
	}
	i := start + s.rng.IntN(v.ICRCOffset()-start)
	frame[i] ^= 1 << s.rng.IntN(8)
}

// lose draws netem loss: random, or the Gilbert-Elliott chain as netem's
// loss_gilb_ell steps it (transition first, then loss by the old state).
func (s *Stage) lose() bool {
	if ge := s.netem.GE; ge != nil {
		if !s.geBad {
			if s.rng.Float64() < ge.P {
				s.geBad = true
			}
			return s.rng.Float64() < ge.OneMinusK
		}
		if s.rng.Float64() < ge.R {
			s.geBad = false
		}
		return s.rng.Float64() < ge.OneMinusH
	}
	return s.netem.Loss > 0 && s.rng.Float64() < s.netem.Loss
}

// netemDelay is netem's delay with reordering: a frame is reordered (sent
// at once) when the gap counter allows and the draw hits; otherwise it
// gets the delay plus normal jitter (netem's default distribution).
func (s *Stage) netemDelay() (time.Duration, bool) {
	n := &s.netem
	if n.Reorder > 0 {
		if s.reorderN >= n.Gap-1 && s.rng.Float64() < n.Reorder {
			s.reorderN = 0
			return 0, true
		}
		s.reorderN++
	}
	d := n.Delay
	if n.Jitter > 0 {
		d += time.Duration(s.rng.NormFloat64() * float64(n.Jitter))
		d = max(0, min(d, n.Delay+4*n.Jitter))
	}
	return d, false
}

func (s *Stage) keep(frame []byte, left int, note Note, ev *Event) {
	var buf []byte
	if k := len(s.pool); k > 0 {
		buf, s.pool = s.pool[k-1][:0], s.pool[:k-1]
	}
	var since time.Duration
	if s.Now != nil {
		since = s.Now()
	}
	s.held = append(s.held, heldFrame{buf: append(buf, frame...), left: left, note: note, ev: ev, since: since})
}

func (s *Stage) emitHeld(emit Emit, h heldFrame) {
	if s.Now != nil {
		s.HeldFor = s.Now() - h.since
	}
	emit(h.buf, 0, h.note, h.ev)
	s.HeldFor = 0
	s.pool = append(s.pool, h.buf)
}

// release counts one more frame past every held frame and emits those
// whose wait is over, oldest first.
func (s *Stage) release(emit Emit) {
	j := 0
	for _, h := range s.held {
		h.left--
		if h.left > 0 {
			s.held[j] = h
			j++
			continue
		}
		s.emitHeld(emit, h)
	}
	for i := j; i < len(s.held); i++ {
		s.held[i] = heldFrame{}
	}
	s.held = s.held[:j]
}

// spoof forges a copy of a RoCE frame with data: one payload bit flipped
// (the last byte of the payload, which is gradient data in an aggregation
// packet) and the ICRC made valid again, and hands it to OnSpoof.
func (s *Stage) spoof(frame []byte, ev *Event) {
	if s.OnSpoof == nil {
		return
	}
	s.forged = append(s.forged[:0], frame...)
	var v frames.View
	if v.Parse(s.forged) != nil || len(v.Payload()) == 0 {
		return
	}
	p := v.Payload()
	p[len(p)-1] ^= 0x40
	v.SetICRC()
	s.Stats.Spoofed++
	s.OnSpoof(s.forged, ev.From, ev)
}

// Flush emits every held frame now (the link is going idle).
func (s *Stage) Flush(emit Emit) {
	for _, h := range s.held {
		s.emitHeld(emit, h)
	}
	clear(s.held)
	s.held = s.held[:0]
}
