package switching

import "time"

// The switch's shared buffer, as accounting only: a commodity ToR's
// packet memory is one pool shared by every port, whose occupancy its
// memory manager counts per ingress port and priority (what PFC's pause
// and the admission thresholds act on) as frames enter, and releases as
// they leave their egress queue for the line. The emulated switch holds
// no queue of its own: its egress queues are the link directions'
// (emu/fabric's Queue), which report each frame's departure with the tag
// the switch pushed it with (TaggedEgress, Departed). Nothing acts on the
// counts yet: the admission thresholds, ECN and PFC come with issue 36.
//
// Each copy of a flooded frame is charged on its own (a real memory
// manager stores it once and counts references); frames the programs
// send are charged to port -1.

// DefaultBufferBytes is the shared buffer's size: 12 MB, a Broadcom
// Trident II's (BCM56850) on-chip packet buffer, the ToR ASIC of the
// 10/40G generation (Arista 7050X datasheet; docs/internals.md).
const DefaultBufferBytes = 12_000_000

// Priorities are the priorities a frame may have (IEEE 802.1p's eight).
const Priorities = 8

// TaggedEgress is an egress with a queue that tells when a frame leaves
// it (a link direction): PushTagged is Push with a tag it hands back to
// the switch's Departed then. An egress without one (a device) sends a
// frame at once, so its frames are released as they are charged.
type TaggedEgress interface {
	PushTagged(frame []byte, ready time.Duration, tag uint32) bool
}

// BufferUse is the buffer held for one ingress port and priority.
type BufferUse struct {
	Switch   string `json:"switch"`
	Port     int    `json:"port"` // ingress port; -1: frames the programs sent
	Priority int    `json:"priority"`
	Bytes    int64  `json:"bytes"` // held now (frame bytes, without preamble and FCS)
	Frames   int64  `json:"frames"`
	// MaxBytes and MaxFrames are the high-water marks.
	MaxBytes  int64 `json:"max_bytes"`
	MaxFrames int64 `json:"max_frames"`
}

// buffer is the switch's accounting: one entry per (ingress port + 1,
// priority), grown as ports appear.
type buffer struct {
	use         []BufferUse
	bytes, peak int64 // the whole pool's occupancy and its high-water mark
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
	tag := uint32(in+1)*Priorities + uint32(Priority(frame))
	if te := s.tagged[p]; te != nil {
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

// Departed releases the buffer a frame held: its egress calls it with the
// frame's tag as the frame leaves the queue for the line.
func (s *Switch) Departed(tag uint32, frame []byte) { s.buffer.release(tag, len(frame)) }

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
}

func (b *buffer) release(tag uint32, n int) {
	if int(tag) >= len(b.use) {
		return // not charged here
	}
	u := &b.use[tag]
	u.Bytes -= int64(n)
	u.Frames--
	b.bytes -= int64(n)
}

// Buffer is the buffer each ingress port and priority that saw traffic
// holds, and held at most.
func (s *Switch) Buffer() []BufferUse {
	var out []BufferUse
	for _, u := range s.buffer.use {
		if u.MaxFrames > 0 {
			out = append(out, u)
		}
	}
	return out
}

// BufferBytes is the shared buffer's occupancy and its high-water mark,
// every port and priority together.
func (s *Switch) BufferBytes() (now, peak int64) { return s.buffer.bytes, s.buffer.peak }
