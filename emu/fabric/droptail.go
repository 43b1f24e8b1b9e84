package fabric

import "time"

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

// MarkCE sets an ECN-capable IPv4 frame's ECN field to CE (Congestion
// Experienced, RFC 3168) and updates the header checksum incrementally
// (RFC 1624); it reports whether it marked. IPv4 is EtherType 0x0800, or
// 0x0700 (an INA-PS frame: ATP's IPv4 header follows it). Frames that are not IPv4 or
// not ECN-capable (ECN 00) are left alone, as a switch leaves them.
func MarkCE(f []byte) bool {
	if len(f) < 34 || !(f[12] == 0x08 || f[12] == 0x07) || f[13] != 0x00 || f[14]>>4 != 4 {
		return false
	}
	tos := f[15]
	if tos&3 == 0 || tos&3 == 3 {
		return false
	}
	old := uint32(f[14])<<8 | uint32(tos)
	f[15] = tos | 3
	neu := uint32(f[14])<<8 | uint32(f[15])
	// HC' = ~(~HC + ~m + m')
	sum := uint32(^(uint16(f[24])<<8 | uint16(f[25]))) + uint32(^uint16(old)) + neu
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	c := ^uint16(sum)
	f[24], f[25] = byte(c>>8), byte(c)
	return true
}
