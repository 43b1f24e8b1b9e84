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
	q     []Packet
}

func newDropTail(cfg QueueConfig) Queue { return &DropTail{limit: cfg.Limit} }

// Enqueue inserts p by ready time (stable for equal times) unless the
// queue is full.
func (d *DropTail) Enqueue(p Packet) bool {
	if len(d.q) >= d.limit {
		return false
	}
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
	copy(d.q, d.q[1:])
	d.q[len(d.q)-1] = Packet{}
	d.q = d.q[:len(d.q)-1]
	return p, 0, true
}

// Len is the number of packets queued.
func (d *DropTail) Len() int { return len(d.q) }
