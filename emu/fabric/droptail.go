package fabric

import (
	"time"

	"github.com/inaemu/inaemu/frames"
)

// DropTail is a bounded FIFO in ready order with tail drop, as Linux's
// pfifo on a txqueuelen-long device queue: a packet arriving at a full
// queue is refused. Packets leave in order of their ready time, packets
// ready at the same instant in the order they came (a switch's frames
// carry its per-path latency, so a forwarded frame may overtake an
// aggregated one pushed before it).
type DropTail struct {
	limit int
	mark  int // ECN threshold in bytes (0: no marking)
	bytes int // bytes queued
	q     []Packet
	// Marked counts the packets it marked CE.
	Marked uint64
}

func newDropTail(cfg QueueConfig) Queue { return &DropTail{limit: cfg.Limit, mark: cfg.MarkBytes} }

// Enqueue inserts p by ready time (stable for equal times) unless the
// queue is full.
func (d *DropTail) Enqueue(p Packet) bool {
	if len(d.q) >= d.limit {
		return false
	}
	if d.mark > 0 && d.bytes >= d.mark && MarkCE(p.Frame) {
		d.Marked++
	}
	d.bytes += len(p.Frame)
	i := len(d.q)
	d.q = append(d.q, Packet{})
	for i > 0 && d.q[i-1].Ready > p.Ready {
		d.q[i] = d.q[i-1]
		i--
	}
	d.q[i] = p
	return true
}

// Dequeue returns the head when it is ready.
func (d *DropTail) Dequeue(now time.Duration) (Packet, time.Duration, bool) {
	if len(d.q) == 0 {
		return Packet{}, Never, false
	}
	if d.q[0].Ready > now {
		return Packet{}, d.q[0].Ready, false
	}
	p := d.q[0]
	d.bytes -= len(p.Frame)
	copy(d.q, d.q[1:])
	d.q[len(d.q)-1] = Packet{}
	d.q = d.q[:len(d.q)-1]
	return p, 0, true
}

// Len is the number of packets queued.
func (d *DropTail) Len() int { return len(d.q) }

// MarkCE sets an ECN-capable frame's ECN field to CE (Congestion
// Experienced, RFC 3168) and reports whether it marked: IPv4 (EtherType
// 0x0800, or 0x0700, an INA-PS frame: ATP's IPv4 header follows it), its
// header checksum updated incrementally (frames.SetIPv4TOS, RFC 1624);
// IPv6 and RoCEv1's GRH (0x86DD, 0x8915: the traffic class straddles the
// first two bytes, and neither has a header checksum). 802.1Q and 802.1ad
// tags are skipped. Frames that are not IP or not ECN-capable (ECN 00) are
// left alone, as a switch leaves them. A RoCE frame's ICRC reads the
// traffic class as ones, so it stays valid.
func MarkCE(f []byte) bool {
	off := 12
	for len(f) >= off+4 && (f[off] == 0x81 && f[off+1] == 0x00 || f[off] == 0x88 && f[off+1] == 0xA8) {
		off += 4
	}
	if len(f) < off+2+20 {
		return false
	}
	et, l3 := uint16(f[off])<<8|uint16(f[off+1]), f[off+2:]
	switch {
	case (et == 0x0800 || et == 0x0700) && l3[0]>>4 == 4:
		if tos := l3[1]; tos&3 == 1 || tos&3 == 2 {
			frames.SetIPv4TOS(l3, tos|3)
			return true
		}
	case (et == 0x86DD || et == 0x8915) && l3[0]>>4 == 6:
		if ecn := l3[1] >> 4 & 3; ecn == 1 || ecn == 2 {
			l3[1] |= 0x30
			return true
		}
	}
	return false
}
