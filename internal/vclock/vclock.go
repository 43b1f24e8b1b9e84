// Package vclock is a virtual clock: a discrete-event timer queue advanced
// by hand (or run until idle). Events at the same instant fire in the order
// they were scheduled, so a run is deterministic. It imports no protocol:
// the interfaces it implements are internal/clock's.
package vclock

import (
	"time"

	"github.com/inaemu/inaemu/internal/clock"
)

// Clock implements clock.Clock (roce.Clock) in virtual time. It is not
// safe for concurrent use: the event loop is single-threaded by design.
type Clock struct {
	now time.Duration
	q   queue
	seq uint64
}

// New returns a clock at time zero.
func New() *Clock { return &Clock{} }

// Now is the current virtual time.
func (c *Clock) Now() time.Duration { return c.now }

// AfterFunc schedules f at Now()+d.
func (c *Clock) AfterFunc(d time.Duration, f func()) clock.Timer {
	t := &Timer{c: c, f: f, idx: -1}
	t.Reset(d)
	return t
}

// Step fires the earliest pending event, advancing time to it; it reports
// false when nothing is pending.
func (c *Clock) Step() bool {
	if len(c.q) == 0 {
		return false
	}
	t := c.q.pop()
	if t.when > c.now {
		c.now = t.when
	}
	t.f()
	return true
}

// Run fires events until none is pending or the next is after limit
// (relative to the current time); it returns the number fired.
func (c *Clock) Run(limit time.Duration) int {
	end := c.now + limit
	n := 0
	for len(c.q) > 0 && c.q[0].when <= end {
		c.Step()
		n++
	}
	return n
}

// Advance moves time forward by d, firing every event due on the way.
func (c *Clock) Advance(d time.Duration) int {
	end := c.now + d
	n := c.Run(d)
	c.now = end
	return n
}

// AdvanceTo moves time forward to t (never backward), firing every event
// due by then. The TAP backend drives the clock this way with the wall
// clock's reading, so timers fire in real time.
func (c *Clock) AdvanceTo(t time.Duration) int {
	if t <= c.now {
		return c.Run(0)
	}
	return c.Advance(t - c.now)
}

// Next is when the earliest pending event is due.
func (c *Clock) Next() (time.Duration, bool) {
	if len(c.q) == 0 {
		return 0, false
	}
	return c.q[0].when, true
}

// Pending is the number of scheduled events.
func (c *Clock) Pending() int { return len(c.q) }

// Timer is one scheduled call.
type Timer struct {
	c    *Clock
	f    func()
	when time.Duration
	seq  uint64
	idx  int
}

func (t *Timer) Stop() bool {
	if t.idx < 0 {
		return false
	}
	t.c.q.remove(t.idx)
	return true
}

// Reset reschedules the timer at Now()+d, after every event already
// scheduled for that instant. A pending timer moves within the queue.
func (t *Timer) Reset(d time.Duration) bool {
	if d < 0 {
		d = 0
	}
	t.when = t.c.now + d
	t.c.seq++
	t.seq = t.c.seq
	if t.idx >= 0 {
		t.c.q.fix(t.idx)
		return true
	}
	t.c.q.push(t)
	return false
}

// queue is a binary min-heap of timers by (when, seq), written for
// *Timer so that the event loop makes no interface calls. seq is unique,
// so the order timers leave the heap is fixed whatever its layout.
type queue []*Timer

func (q queue) less(i, j int) bool {
	a, b := q[i], q[j]
	return a.when < b.when || a.when == b.when && a.seq < b.seq
}

func (q queue) swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx = i
	q[j].idx = j
}

func (q queue) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if !q.less(j, i) {
			break
		}
		q.swap(i, j)
		j = i
	}
}

// down moves element i down within q[:n]; it reports whether it moved.
func (q queue) down(i, n int) bool {
	i0 := i
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		j := l
		if r := l + 1; r < n && q.less(r, l) {
			j = r
		}
		if !q.less(j, i) {
			break
		}
		q.swap(i, j)
		i = j
	}
	return i > i0
}

func (q *queue) push(t *Timer) {
	t.idx = len(*q)
	*q = append(*q, t)
	q.up(t.idx)
}

func (q *queue) pop() *Timer {
	h := *q
	n := len(h) - 1
	h.swap(0, n)
	h.down(0, n)
	t := h[n]
	h[n] = nil
	*q = h[:n]
	t.idx = -1
	return t
}

func (q *queue) remove(i int) {
	h := *q
	n := len(h) - 1
	t := h[i]
	if i != n {
		h.swap(i, n)
		if !h.down(i, n) {
			h.up(i)
		}
	}
	h[n] = nil
	*q = h[:n]
	t.idx = -1
}

// fix restores the order after element i's key changed.
func (q queue) fix(i int) {
	if !q.down(i, len(q)) {
		q.up(i)
	}
}
