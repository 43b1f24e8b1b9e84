package switching

import (
	"fmt"
	"time"

	"github.com/inaemu/inaemu/internal/clock"
)

// The switch's shared buffer: a commodity ToR's packet memory is one
// pool shared by every port, whose memory manager (MMU) counts occupancy
// per ingress port and priority (what PFC's pause acts on) and per egress
// port and priority (what lossy admission acts on) as frames enter, and
// releases it as they leave their egress queue for the line. The emulated
// switch holds no queue of its own: its egress queues are the link
// directions' (emu/fabric's Queue), which report each frame's departure
// with the tag the switch pushed it with (TaggedEgress, Departed).
//
// Without SetBuffer (or with the zero BufferConfig) the buffer only
// counts, per ingress port and priority. With one, the MMU also admits:
//
//   - The pool of Bytes holds back, for each port and lossless priority,
//     its headroom (BufferConfig.PortHeadroom); the rest is shared.
//   - A lossless frame entering by port i is stored in the shared pool
//     while its ingress (i, priority) holds no more than XOFF with it
//     (static, or Alpha × the free shared buffer now), or nothing in the
//     shared pool before it, and the pool has room; else in the ingress's headroom while that has room; else it
//     is dropped (a headroom drop). The first frame stored in headroom
//     pauses the priority on port i's own egress (a PFC frame for the
//     upstream transmitter), re-sent at half the pause time while the
//     ingress holds more than XON; once its headroom is empty and its
//     shared part is under XON = XOFF − XONDelta (or empty), a resume
//     (quanta 0) goes. A frame leaving releases headroom first.
//   - A lossy frame is admitted while its egress (port, priority) queue,
//     with it, stays within EgressAlpha × the free shared buffer (else an
//     egress threshold drop) and the shared pool has room (else a
//     buffer-full drop). Lossless egress queues are never limited (SONiC's
//     egress_lossless_profile: a static threshold of the whole pool).
//
// Each copy of a flooded frame is charged on its own (a real memory
// manager stores it once and counts references). Frames a program sends
// while it processes a frame are charged to that frame's ingress port
// (towards its XOFF, so the port is paused while they wait) and take the
// shared pool while it has room, the headroom only when it is full
// (admission); frames a program sends from a timer are charged to port
// -1 and pause no one. A frame for an egress without a queue (a device)
// leaves at once: it is counted, never admitted or held.

// DefaultBufferBytes is the shared buffer's size: 12 MB, a Broadcom
// Trident II's (BCM56850) on-chip packet buffer, the ToR ASIC of the
// 10/40G generation (Arista 7050X datasheet; docs/internals.md).
const DefaultBufferBytes = 12_000_000

// Priorities are the priorities a frame may have (IEEE 802.1p's eight).
const Priorities = 8

// TaggedEgress is an egress with a queue that tells when a frame leaves
// it (a link direction): PushTagged is Push with a tag it hands back to
// the switch's Departed then (later, never from within PushTagged: the
// switch charges a frame once PushTagged took it). An egress without one
// (a device) sends a frame at once, so its frames are released as they
// are charged.
type TaggedEgress interface {
	PushTagged(frame []byte, ready time.Duration, tag uint32) bool
}

// BufferUse is the buffer held for one ingress port and priority, and
// what the memory manager did for it.
type BufferUse struct {
	Switch   string `json:"switch"`
	Port     int    `json:"port"` // ingress port; -1: frames the programs sent
	Priority int    `json:"priority"`
	Bytes    int64  `json:"bytes"` // held now (frame bytes, without preamble and FCS)
	Frames   int64  `json:"frames"`
	// MaxBytes and MaxFrames are the high-water marks.
	MaxBytes  int64 `json:"max_bytes"`
	MaxFrames int64 `json:"max_frames"`
	// MaxHeadroomBytes is the most this lossless ingress held in headroom.
	MaxHeadroomBytes int64 `json:"max_headroom_bytes,omitempty"`
	// Drops by reason: a lossy frame over its egress queue's threshold, a
	// lossless frame with its headroom full, a frame the shared pool had
	// no room for.
	DropsEgress   uint64 `json:"drops_egress_threshold,omitempty"`
	DropsHeadroom uint64 `json:"drops_headroom,omitempty"`
	DropsFull     uint64 `json:"drops_buffer_full,omitempty"`
	// Pauses this ingress sent upstream: on crossing XOFF, re-sent while
	// over XON, and resumes; PausedNs is the time it kept the upstream
	// paused (up to now for a pause still on).
	PausesXOFF    uint64 `json:"pauses_xoff,omitempty"`
	PausesRefresh uint64 `json:"pauses_refresh,omitempty"`
	PausesXON     uint64 `json:"pauses_xon,omitempty"`
	PausedNs      int64  `json:"paused_ns,omitempty"`
}

// EgressUse is the buffer one egress port and priority's queue holds
// (listed once SetBuffer configured the buffer), and the pauses its
// transmitter received.
type EgressUse struct {
	Switch    string `json:"switch"`
	Port      int    `json:"port"` // egress port
	Priority  int    `json:"priority"`
	Bytes     int64  `json:"bytes"`
	Frames    int64  `json:"frames"`
	MaxBytes  int64  `json:"max_bytes"`
	MaxFrames int64  `json:"max_frames"`
	// Drops counts the frames for this queue the memory manager dropped,
	// whatever the reason (each also counted by its ingress's BufferUse).
	Drops uint64 `json:"drops,omitempty"`
	// PausesReceived and ResumesReceived count the PFC frames naming this
	// priority that arrived on the port (quanta > 0, quanta 0).
	PausesReceived  uint64 `json:"pauses_received,omitempty"`
	ResumesReceived uint64 `json:"resumes_received,omitempty"`
}

// Tags: a frame's tag names its ingress row (the low 16 bits: (ingress
// port + 1) × Priorities + priority) and, when the buffer is configured,
// its egress port + 1 (the high 16 bits; 0: not tracked per egress).
const tagIngress = 0xffff

// buffer is the switch's memory manager: one row per (ingress port + 1,
// priority), grown as ports appear, and once configured one per (egress
// port, priority) and the lossless ingresses' headroom and pause state.
type buffer struct {
	use         []BufferUse
	bytes, peak int64 // the whole pool's occupancy and its high-water mark
	// charged and released are every byte ever charged and released, for
	// BufferBalance.
	charged, released int64

	tracked bool         // SetBuffer with a non-zero config: egress rows, tags with the egress
	admit   bool         // admission on (Lossless or Enforce)
	cfg     BufferConfig // with defaults
	shared  int64        // the pool less every port's lossless headroom
	hdrm    int64        // bytes held in headroom, every ingress together
	egress  []EgressUse  // per (egress port, priority)
	ing     []ingress    // per ingress row, beside use
	timers  timerClock   // the switch's clock, if it has timers
}

// ingress is a lossless ingress (port, priority)'s headroom and pause.
type ingress struct {
	hdrm   int64 // bytes in headroom
	paused bool
	since  time.Duration // when the pause began
	timer  clock.Timer   // the pause's refresh
}

// timerClock is a Clock that can call back (internal/vclock's is), which
// the pause refresh needs.
type timerClock interface {
	AfterFunc(d time.Duration, f func()) clock.Timer
}

// SetBuffer configures the memory manager (see the top of buffer.go).
// Call it after the ports and their links (SetPort, SetPortLink): the
// headroom held back is computed from them. The zero config keeps the
// buffer counting only, as a switch never configured.
func (s *Switch) SetBuffer(cfg BufferConfig) error {
	if err := cfg.Validate(s.links()...); err != nil {
		return fmt.Errorf("%s: %w", s.Name, err)
	}
	if len(s.ports) >= tagIngress/Priorities-1 {
		return fmt.Errorf("%s: switch buffer: %d ports: a frame's tag names at most %d", s.Name, len(s.ports), tagIngress/Priorities-2)
	}
	b := &s.buffer
	if cfg == (BufferConfig{}) {
		b.tracked, b.admit = false, false
		return nil
	}
	if cfg.Lossless != 0 {
		tc, ok := s.clock.(timerClock)
		if !ok {
			return fmt.Errorf("%s: switch buffer: PFC needs a clock with timers (AfterFunc) for the pause refresh", s.Name)
		}
		b.timers = tc
	}
	b.tracked, b.admit = true, cfg.Lossless != 0 || cfg.Enforce
	b.cfg = cfg.withDefaults()
	s.layoutBuffer()
	return nil
}

// SetPortLink tells the buffer port p's link: its rate (bits per second)
// and one-way propagation delay, from which the port's headroom and the
// length of its pauses follow. The fabric calls it for each switch port
// on a link.
func (s *Switch) SetPortLink(p int, rate float64, prop time.Duration) {
	for len(s.portLinks) <= p {
		s.portLinks = append(s.portLinks, PortLink{})
	}
	s.portLinks[p] = PortLink{Rate: rate, Prop: prop}
	if s.buffer.tracked {
		s.layoutBuffer()
	}
}

// links is every port's link (the zero PortLink for a port without one).
func (s *Switch) links() []PortLink {
	l := make([]PortLink, len(s.ports))
	copy(l, s.portLinks)
	return l
}

// layoutBuffer sizes the shared pool from the ports' headroom.
func (s *Switch) layoutBuffer() {
	b := &s.buffer
	b.shared = b.cfg.Bytes - b.cfg.reserved(s.links())
}

// headroom is ingress port in's headroom per lossless priority.
func (s *Switch) headroom(in int) int64 {
	var l PortLink
	if in < len(s.portLinks) {
		l = s.portLinks[in]
	}
	return s.buffer.cfg.PortHeadroom(l)
}

// Priority is a frame's priority as a switch that trusts DSCP classifies
// it, the mode RoCEv2 deployments use since their frames are routed: the
// DSCP's class selector bits (DSCP >> 3), the default DSCP-to-priority map
// of DCB switches (Brocade Network OS Command Reference, "qos trust
// dscp": DSCP 0-7 → 0, ..., 24-31 → 3), so RoCE's customary DSCP 26 is
// priority 3. RoCEv1's GRH traffic class is read as IPv6's. A frame
// without an IP header takes its VLAN tag's PCP, or 0.
func Priority(f []byte) int {
	off, pcp := 12, 0
	if len(f) >= 16 && (f[12] == 0x81 && f[13] == 0x00 || f[12] == 0x88 && f[13] == 0xA8) {
		pcp = int(f[14] >> 5)
	}
	for len(f) >= off+4 && (f[off] == 0x81 && f[off+1] == 0x00 || f[off] == 0x88 && f[off+1] == 0xA8) {
		off += 4
	}
	if len(f) < off+4 {
		return pcp
	}
	l3 := f[off+2:]
	switch {
	case f[off] == 0x08 && f[off+1] == 0x00: // IPv4: TOS
		return int(l3[1] >> 5)
	case f[off] == 0x86 && f[off+1] == 0xDD || f[off] == 0x89 && f[off+1] == 0x15: // IPv6, GRH: traffic class
		return int(l3[0]&0x0f) >> 1
	}
	return pcp
}

// push queues frame on port p's egress, charged to ingress port in.
func (s *Switch) push(p, in int, frame []byte, ready time.Duration) {
	program := in < 0
	if program && s.buffer.tracked {
		// A managed buffer charges what a program sends to the port whose
		// frame made it (-1 when a timer sent it), as a memory manager
		// charges a replica to its packet's ingress: its bytes count
		// towards that port's XOFF, so the port is paused while a
		// lossless priority's results wait (admission keeps them out of
		// the headroom, which is the upstream's).
		in = s.inPort
	}
	prio := Priority(frame)
	tag := uint32(in+1)*Priorities + uint32(prio)
	if te := s.tagged[p]; te != nil {
		if s.buffer.tracked {
			s.pushManaged(te, p, in, prio, tag, frame, ready, program)
			return
		}
		if te.PushTagged(frame, ready, tag) {
			s.buffer.charge(s.Name, tag, len(frame))
		}
		return
	}
	if s.ports[p].Push(frame, ready) {
		s.buffer.charge(s.Name, tag, len(frame))
		s.buffer.release(tag, len(frame))
	}
}

// Where the memory manager puts a frame.
const (
	toShared = iota
	toHeadroom
	dropEgress
	dropHeadroom
	dropFull
)

// pushManaged is push through the configured memory manager: admission,
// per-egress accounting, and the pause on crossing XOFF.
func (s *Switch) pushManaged(te TaggedEgress, p, in, prio int, tag uint32, frame []byte, ready time.Duration, program bool) {
	b := &s.buffer
	n := int64(len(frame))
	b.grow(s.Name, tag)
	e := b.egressRow(s.Name, p, prio)
	lossless := b.cfg.Lossless&(1<<prio) != 0
	where := toShared
	if b.admit {
		where = s.admission(in, lossless, program, tag, e, n)
	}
	if where >= dropEgress {
		u := &b.use[tag]
		switch where {
		case dropEgress:
			u.DropsEgress++
		case dropHeadroom:
			u.DropsHeadroom++
		default:
			u.DropsFull++
		}
		e.Drops++
		return
	}
	if !te.PushTagged(frame, ready, uint32(p+1)<<16|tag) {
		return // the queue's own frame limit: neither charged nor held
	}
	b.charge(s.Name, tag, len(frame))
	e.Bytes += n
	e.Frames++
	e.MaxBytes = max(e.MaxBytes, e.Bytes)
	e.MaxFrames = max(e.MaxFrames, e.Frames)
	if program && lossless && in >= 0 && where == toShared {
		// Over XOFF by a program's frame: pause the port whose frame made
		// it, as its own next frame would (it goes to headroom from now).
		if g := &b.ing[tag]; !g.paused && b.use[tag].Bytes-g.hdrm > b.xoff() {
			s.pause(int(tag), in, prio)
		}
	}
	if where == toHeadroom {
		g := &b.ing[tag]
		g.hdrm += n
		b.hdrm += n
		u := &b.use[tag]
		u.MaxHeadroomBytes = max(u.MaxHeadroomBytes, g.hdrm)
		if !g.paused {
			s.pause(int(tag), in, prio)
		}
	}
}

// free is the shared pool's room now.
func (b *buffer) free() int64 { return b.shared - (b.bytes - b.hdrm) }

// xoff is a lossless ingress's XOFF threshold now.
func (b *buffer) xoff() int64 {
	if b.cfg.XOFF > 0 {
		return b.cfg.XOFF
	}
	return int64(b.cfg.Alpha * float64(max(b.free(), 0)))
}

// admission decides where a frame of n bytes goes (see the top of
// buffer.go).
func (s *Switch) admission(in int, lossless, program bool, tag uint32, e *EgressUse, n int64) int {
	b := &s.buffer
	free := b.free()
	if !lossless {
		switch {
		case float64(e.Bytes+n) > b.cfg.EgressAlpha*float64(max(free, 0)):
			return dropEgress
		case n > free:
			return dropFull
		}
		return toShared
	}
	if program {
		// A program's frame (a result, a replica) is not held to XOFF:
		// no pause stops the copies the switch makes itself, so it takes
		// the shared pool while the pool has room (charged to the port
		// whose frame made it, it counts towards that port's XOFF and
		// pauses it: pushManaged), and only a full pool sends it to the
		// port's headroom, the last room before a drop. Held to XOFF, a
		// result's 32 copies overflowed a 10G port's 24.7 KB headroom;
		// held to the pool alone, a tight pool dropped results of a
		// lossless priority as the upstream's frames filled it.
		if n <= free {
			return toShared
		}
		if in < 0 {
			return dropFull
		}
		if g := &b.ing[tag]; g.hdrm+n <= s.headroom(in) {
			return toHeadroom
		}
		return dropHeadroom
	}
	// An ingress holding nothing in the shared pool takes a frame the
	// pool has room for however low XOFF is, as a dynamic threshold
	// admits to a queue shorter than the threshold (Choudhury and Hahne,
	// IEEE/ACM ToN 1998): else a frame longer than XOFF and the headroom
	// together (a jumbo frame against a tight pool's α × free) could never
	// enter, and its sender would retry it until it gave up.
	u, g := &b.use[tag], &b.ing[tag]
	if shared := u.Bytes - g.hdrm; (shared+n <= b.xoff() || shared == 0) && n <= free {
		return toShared
	}
	if g.hdrm+n <= s.headroom(in) {
		return toHeadroom
	}
	return dropHeadroom
}

// pause sends ingress row i's XOFF upstream on port in's egress and arms
// its refresh.
func (s *Switch) pause(i, in, prio int) {
	b := &s.buffer
	g := &b.ing[i]
	g.paused, g.since = true, s.clock.Now()
	b.use[i].PausesXOFF++
	s.sendPause(in, prio, PauseQuanta)
	s.armRefresh(i, in)
}

// sendPause sends a PFC frame naming prio alone on port in's egress, if
// that egress can (a device cannot).
func (s *Switch) sendPause(in, prio int, quanta uint16) {
	if in < len(s.pausers) && s.pausers[in] != nil {
		var q [8]uint16
		q[prio] = quanta
		s.pausers[in].SendPause(1<<prio, q)
	}
}

// armRefresh schedules ingress row i's pause refresh at half the pause
// time at port in's rate (none for a port whose rate is unknown: its
// pause is never re-sent).
func (s *Switch) armRefresh(i, in int) {
	b := &s.buffer
	if in >= len(s.portLinks) || s.portLinks[in].Rate <= 0 || b.timers == nil {
		return
	}
	half := time.Duration(float64(PauseQuanta) * 512 / s.portLinks[in].Rate * 1e9 / 2)
	g := &b.ing[i]
	if g.timer == nil {
		g.timer = b.timers.AfterFunc(half, func() { s.refresh(i) })
		return
	}
	g.timer.Reset(half)
}

// refresh is ingress row i's pause timer: resume if it drained under XON
// meanwhile (another port's release raised a dynamic XOFF), else re-send.
func (s *Switch) refresh(i int) {
	b := &s.buffer
	g := &b.ing[i]
	if !g.paused {
		return
	}
	in, prio := i/Priorities-1, i%Priorities
	if s.underXON(i) {
		s.resume(i)
		return
	}
	b.use[i].PausesRefresh++
	s.sendPause(in, prio, PauseQuanta)
	s.armRefresh(i, in)
}

// underXON reports whether ingress row i may be resumed: no headroom held
// and its shared part empty or within XOFF − XONDelta.
func (s *Switch) underXON(i int) bool {
	b := &s.buffer
	g := &b.ing[i]
	sh := b.use[i].Bytes - g.hdrm
	return g.hdrm == 0 && (sh == 0 || sh <= b.xoff()-b.cfg.XONDelta)
}

// resume ends ingress row i's pause with a quanta-0 PFC frame.
func (s *Switch) resume(i int) {
	b := &s.buffer
	g := &b.ing[i]
	u := &b.use[i]
	g.paused = false
	u.PausesXON++
	u.PausedNs += int64(s.clock.Now() - g.since)
	if g.timer != nil {
		g.timer.Stop()
	}
	s.sendPause(i/Priorities-1, i%Priorities, 0)
}

// Departed releases the buffer a frame held: its egress calls it with the
// frame's tag as the frame leaves the queue for the line.
func (s *Switch) Departed(tag uint32, frame []byte) {
	s.buffer.release(tag, len(frame))
	if tag>>16 != 0 {
		s.departedManaged(tag, int64(len(frame)))
	}
}

// departedManaged is the configured memory manager's part of a release:
// the egress row, headroom first, and the resume once under XON.
func (s *Switch) departedManaged(tag uint32, n int64) {
	b := &s.buffer
	i := int(tag & tagIngress)
	if i >= len(b.ing) {
		return
	}
	if p, prio := int(tag>>16)-1, i%Priorities; p*Priorities+prio < len(b.egress) {
		e := &b.egress[p*Priorities+prio]
		e.Bytes -= n
		e.Frames--
	}
	g := &b.ing[i]
	from := min(g.hdrm, n)
	g.hdrm -= from
	b.hdrm -= from
	if g.paused && s.underXON(i) {
		s.resume(i)
	}
}

// grow makes the ingress rows up to tag exist.
func (b *buffer) grow(sw string, tag uint32) {
	for int(tag) >= len(b.use) {
		i := len(b.use)
		b.use = append(b.use, BufferUse{Switch: sw, Port: i/Priorities - 1, Priority: i % Priorities})
	}
	for len(b.ing) < len(b.use) {
		b.ing = append(b.ing, ingress{})
	}
}

// egressRow is egress (p, prio)'s row, made if new.
func (b *buffer) egressRow(sw string, p, prio int) *EgressUse {
	for p*Priorities+prio >= len(b.egress) {
		i := len(b.egress)
		b.egress = append(b.egress, EgressUse{Switch: sw, Port: i / Priorities, Priority: i % Priorities})
	}
	return &b.egress[p*Priorities+prio]
}

func (b *buffer) charge(sw string, tag uint32, n int) {
	for int(tag) >= len(b.use) {
		i := len(b.use)
		b.use = append(b.use, BufferUse{Switch: sw, Port: i/Priorities - 1, Priority: i % Priorities})
	}
	u := &b.use[tag]
	u.Bytes += int64(n)
	u.Frames++
	u.MaxBytes = max(u.MaxBytes, u.Bytes)
	u.MaxFrames = max(u.MaxFrames, u.Frames)
	b.bytes += int64(n)
	b.peak = max(b.peak, b.bytes)
	b.charged += int64(n)
}

func (b *buffer) release(tag uint32, n int) {
	tag &= tagIngress
	if int(tag) >= len(b.use) {
		return // not charged here
	}
	u := &b.use[tag]
	u.Bytes -= int64(n)
	u.Frames--
	b.bytes -= int64(n)
	b.released += int64(n)
}

// PauseReceived counts a PFC frame that arrived on port p (the fabric's
// MAC consumed it and paused the port's transmitter): for each priority
// named in enable, a pause (quanta > 0) or a resume (0).
func (s *Switch) PauseReceived(p int, enable uint8, quanta [8]uint16) {
	if p < 0 {
		return
	}
	for prio := 0; prio < Priorities; prio++ {
		if enable&(1<<prio) == 0 {
			continue
		}
		e := s.buffer.egressRow(s.Name, p, prio)
		if quanta[prio] > 0 {
			e.PausesReceived++
		} else {
			e.ResumesReceived++
		}
	}
}

// Buffer is the buffer each ingress port and priority that saw traffic
// holds, and held at most, with its drops and pauses.
func (s *Switch) Buffer() []BufferUse {
	var out []BufferUse
	for i, u := range s.buffer.use {
		if i < len(s.buffer.ing) && s.buffer.ing[i].paused {
			u.PausedNs += int64(s.clock.Now() - s.buffer.ing[i].since)
		}
		if u.MaxFrames > 0 || u.DropsEgress+u.DropsHeadroom+u.DropsFull+u.PausesXOFF > 0 {
			out = append(out, u)
		}
	}
	return out
}

// BufferEgress is the buffer each egress port and priority that saw
// traffic (or a pause) holds, and held at most.
func (s *Switch) BufferEgress() []EgressUse {
	var out []EgressUse
	for _, e := range s.buffer.egress {
		if e.MaxFrames > 0 || e.Drops+e.PausesReceived+e.ResumesReceived > 0 {
			out = append(out, e)
		}
	}
	return out
}

// BufferBytes is the shared buffer's occupancy and its high-water mark,
// every port and priority together.
func (s *Switch) BufferBytes() (now, peak int64) { return s.buffer.bytes, s.buffer.peak }

// BufferThresholds are a lossless ingress's thresholds now: XOFF (static,
// or α × the free shared buffer), XON = XOFF − XONDelta, and port in's
// headroom; and the shared pool's free bytes. Zero before SetBuffer.
func (s *Switch) BufferThresholds(in int) (xoff, xon, headroom, free int64) {
	b := &s.buffer
	if !b.tracked {
		return 0, 0, 0, 0
	}
	x := b.xoff()
	return x, x - b.cfg.XONDelta, s.headroom(in), b.free()
}

// BufferBalance checks the memory manager's books: every byte charged is
// released or held, nothing is negative, the rows add up to the pool, the
// headroom held is within each port's, and the shared pool is not
// overdrawn while admission is on. A property test calls it at any point
// between events.
func (s *Switch) BufferBalance() error {
	b := &s.buffer
	if b.charged != b.released+b.bytes {
		return fmt.Errorf("%s: buffer: %d B charged, %d B released, %d B held", s.Name, b.charged, b.released, b.bytes)
	}
	var sum, hdrm int64
	for i, u := range b.use {
		if u.Bytes < 0 || u.Frames < 0 || (u.Frames == 0) != (u.Bytes == 0) {
			return fmt.Errorf("%s: buffer: ingress %d priority %d holds %d B in %d frames", s.Name, u.Port, u.Priority, u.Bytes, u.Frames)
		}
		sum += u.Bytes
		if i < len(b.ing) {
			g := b.ing[i]
			if g.hdrm < 0 || g.hdrm > u.Bytes || b.admit && u.Port >= 0 && g.hdrm > s.headroom(u.Port) {
				return fmt.Errorf("%s: buffer: ingress %d priority %d holds %d B in headroom of %d B held", s.Name, u.Port, u.Priority, g.hdrm, u.Bytes)
			}
			hdrm += g.hdrm
		}
	}
	if sum != b.bytes {
		return fmt.Errorf("%s: buffer: the ingress rows hold %d B, the pool %d B", s.Name, sum, b.bytes)
	}
	if hdrm != b.hdrm {
		return fmt.Errorf("%s: buffer: the ingress rows hold %d B of headroom, the pool counts %d B", s.Name, hdrm, b.hdrm)
	}
	if !b.tracked {
		return nil
	}
	var esum int64
	for _, e := range b.egress {
		if e.Bytes < 0 || e.Frames < 0 {
			return fmt.Errorf("%s: buffer: egress %d priority %d holds %d B in %d frames", s.Name, e.Port, e.Priority, e.Bytes, e.Frames)
		}
		esum += e.Bytes
	}
	if esum != b.bytes {
		return fmt.Errorf("%s: buffer: the egress rows hold %d B, the pool %d B", s.Name, esum, b.bytes)
	}
	if b.admit && b.bytes-b.hdrm > b.shared {
		return fmt.Errorf("%s: buffer: %d B shared of a %d B shared pool", s.Name, b.bytes-b.hdrm, b.shared)
	}
	return nil
}
