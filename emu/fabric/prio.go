package fabric

import (
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu/switching"
)

// Prio is a switch port's egress as a DCB switch builds it: eight traffic
// classes, one per priority (switching.Priority, the one mapping of a
// frame to its priority), each a FIFO in ready order like DropTail; a
// scheduler choosing among the classes that may send; a PFC pause per
// class (802.1Qbb: a paused class is not served until its pause ends,
// the others are); and per-class RED/ECN marking.
//
// Schedulers (IEEE 802.1Q-2018 §8.6.8 transmission selection):
//   - strict: the highest priority that may send goes first (802.1Q's
//     strict priority algorithm);
//   - dwrr: deficit weighted round robin (M. Shreedhar, G. Varghese,
//     "Efficient Fair Queuing Using Deficit Round Robin", SIGCOMM '95),
//     the ETS scheduler of commodity ASICs: each class visited in turn
//     gains its quantum, weight × MaxFrame bytes, and sends frames while
//     its head fits in its deficit; an emptied class loses its deficit.
//     Over a busy period each backlogged class gets bytes in the ratio of
//     the weights.
//
// RED/ECN (S. Floyd, V. Jacobson, "Random Early Detection Gateways",
// 1993, with the instantaneous queue as DCQCN's switches use it: Zhu et
// al., "Congestion Control for Large-Scale RDMA Deployments", SIGCOMM
// '15, §3.1): a frame enqueued behind q bytes of its class is marked CE
// never when q < Kmin, always when q ≥ Kmax, and with probability
// Pmax × (q − Kmin)/(Kmax − Kmin) between, drawn from the discipline's own
// seeded generator. Only ECN-capable IPv4 frames are marked (MarkCE).
//
// No allocation in steady state: each class is a ring that grows by
// doubling and is never shrunk.
type Prio struct {
	limit, n int
	dwrr     bool
	quantum  [8]int
	deficit  [8]int
	granted  [8]bool // the class has had its quantum this visit
	cur      int     // dwrr: the class being visited
	red      RED
	mark     int // MarkBytes, when RED is off
	rng      uint64
	class    [8]ring
	paused   [8]time.Duration // each class's pause end
	// Marked counts the packets it marked CE, MarkedBy per priority.
	Marked   uint64
	MarkedBy [8]uint64
}

// RED is the RED/ECN marking profile of each class of a Prio queue, in
// bytes of the class's queue (see Prio). The zero value marks nothing.
type RED struct {
	Kmin int     `json:"kmin"`
	Kmax int     `json:"kmax"`
	Pmax float64 `json:"pmax"`
}

// On reports whether the profile marks at all.
func (r RED) On() bool { return r.Kmax > 0 }

// Validate checks 0 ≤ Kmin ≤ Kmax and 0 ≤ Pmax ≤ 1.
func (r RED) Validate() error {
	if r == (RED{}) {
		return nil
	}
	if r.Kmin < 0 || r.Kmax < r.Kmin || r.Kmax == 0 || !(r.Pmax >= 0 && r.Pmax <= 1) {
		return fmt.Errorf("RED kmin=%d kmax=%d pmax=%g: want 0 <= kmin <= kmax, kmax > 0, 0 <= pmax <= 1", r.Kmin, r.Kmax, r.Pmax)
	}
	return nil
}

// Schedulers are the Prio schedulers' names; "" is "strict".
var Schedulers = []string{"strict", "dwrr"}

func newPrio(cfg QueueConfig) Queue {
	x := &Prio{limit: cfg.Limit, dwrr: cfg.Scheduler == "dwrr", red: cfg.RED, mark: cfg.MarkBytes, rng: cfg.Seed}
	for c := range x.quantum {
		w := cfg.Weights[c]
		if w <= 0 {
			w = 1
		}
		x.quantum[c] = w * MaxFrame
	}
	return x
}

// ring is one class's FIFO in ready order.
type ring struct {
	buf     []Packet // a power of two long
	head, n int
	bytes   int
}

func (r *ring) at(i int) *Packet { return &r.buf[(r.head+i)&(len(r.buf)-1)] }

// push inserts p by ready time (stable for equal times).
func (r *ring) push(p Packet) {
	if r.n == len(r.buf) {
		nb := make([]Packet, max(16, 2*len(r.buf)))
		for i := range r.n {
			nb[i] = *r.at(i)
		}
		r.buf, r.head = nb, 0
	}
	i := r.n
	r.n++
	for i > 0 && r.at(i-1).Ready > p.Ready {
		*r.at(i) = *r.at(i - 1)
		i--
	}
	*r.at(i) = p
	r.bytes += len(p.Frame)
}

func (r *ring) pop() Packet {
	h := r.at(0)
	p := *h
	*h = Packet{}
	r.head = (r.head + 1) & (len(r.buf) - 1)
	r.n--
	r.bytes -= len(p.Frame)
	return p
}

// Enqueue classifies p, marks it by its class's depth, and queues it
// unless the direction's frame limit is reached.
func (x *Prio) Enqueue(p Packet) bool {
	if x.n >= x.limit {
		return false
	}
	c := switching.Priority(p.Frame)
	r := &x.class[c]
	if x.shouldMark(r.bytes) && MarkCE(p.Frame) {
		x.Marked++
		x.MarkedBy[c]++
	}
	r.push(p)
	x.n++
	return true
}

// shouldMark is the RED decision for a frame behind q bytes of its class.
func (x *Prio) shouldMark(q int) bool {
	switch {
	case x.red.On():
		if q < x.red.Kmin {
			return false
		}
		if q >= x.red.Kmax {
			return true
		}
		return x.uniform() < x.red.Pmax*float64(q-x.red.Kmin)/float64(x.red.Kmax-x.red.Kmin)
	case x.mark > 0:
		return q >= x.mark
	}
	return false
}

// uniform is a draw in [0, 1) from the queue's generator (SplitMix64:
// G. Steele, D. Lea, C. Flood, "Fast Splittable Pseudorandom Number
// Generators", OOPSLA '14).
func (x *Prio) uniform() float64 {
	x.rng += 0x9E3779B97F4A7C15
	z := x.rng
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	z ^= z >> 31
	return float64(z>>11) / (1 << 53)
}

// when is the earliest time class c's head may go (ok false: empty).
func (x *Prio) when(c int) (time.Duration, bool) {
	r := &x.class[c]
	if r.n == 0 {
		return 0, false
	}
	return max(r.at(0).Ready, x.paused[c]), true
}

func (x *Prio) take(c int) Packet {
	x.n--
	return x.class[c].pop()
}

// Dequeue returns the next packet the scheduler picks among the classes
// whose head is ready and that are not paused; next is the earliest time
// any class may send (a head's ready time, a pause's end).
func (x *Prio) Dequeue(now time.Duration) (Packet, time.Duration, bool) {
	next := Never
	if x.n == 0 {
		return Packet{}, next, false
	}
	if !x.dwrr {
		for c := 7; c >= 0; c-- {
			if t, ok := x.when(c); ok {
				if t <= now {
					return x.take(c), 0, true
				}
				next = min(next, t)
			}
		}
		return Packet{}, next, false
	}
	// Two rounds at most: a class that may send gains at least MaxFrame
	// on its next visit, so its head then fits.
	for range 2*len(x.class) + 1 {
		c := x.cur
		t, ok := x.when(c)
		switch {
		case !ok:
			x.deficit[c] = 0
		case t > now:
			next = min(next, t)
		default:
			if !x.granted[c] {
				x.deficit[c] += x.quantum[c]
				x.granted[c] = true
			}
			if sz := len(x.class[c].at(0).Frame); sz <= x.deficit[c] {
				x.deficit[c] -= sz
				p := x.take(c)
				if x.class[c].n == 0 {
					x.deficit[c], x.granted[c], x.cur = 0, false, (c+1)%len(x.class)
				}
				return p, 0, true
			}
		}
		x.granted[c], x.cur = false, (c+1)%len(x.class)
	}
	return Packet{}, next, false
}

// Len is the number of packets queued, every class together.
func (x *Prio) Len() int { return x.n }

// ClassLen is the number of packets of priority c queued.
func (x *Prio) ClassLen(c int) int { return x.class[c].n }

// Pause holds class c until until (802.1Qbb: a PFC frame's time for the
// priority; a time at or before now releases it). A frame already on the
// line is not the queue's any more and finishes.
func (x *Prio) Pause(c int, until time.Duration) { x.paused[c] = until }

// holdsFrom reports whether class c holds a frame whose tag says it
// entered the switch by ingress port in (the switch's buffer tags:
// low 16 bits (ingress+1)×Priorities + priority, the egress above).
func (x *Prio) holdsFrom(c, in int) bool {
	r := &x.class[c]
	for i := range r.n {
		if int(r.at(i).Tag&0xffff)/switching.Priorities-1 == in {
			return true
		}
	}
	return false
}
