// Package vclock is a virtual clock: a discrete-event timer queue advanced
// by hand (or run until idle). Events at the same instant fire in the order
// they were scheduled, so a run is deterministic.
package vclock

import (
	"container/heap"
	"time"

	"github.com/inaemu/inaemu/roce"
)

// Clock implements roce.Clock in virtual time. It is not safe for
// concurrent use: the event loop is single-threaded by design.
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
func (c *Clock) AfterFunc(d time.Duration, f func()) roce.Timer {
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
	t := heap.Pop(&c.q).(*Timer)
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
	heap.Remove(&t.c.q, t.idx)
	return true
}

func (t *Timer) Reset(d time.Duration) bool {
	was := t.Stop()
	if d < 0 {
		d = 0
	}
	t.when = t.c.now + d
	t.c.seq++
	t.seq = t.c.seq
	heap.Push(&t.c.q, t)
	return was
}

type queue []*Timer

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].when != q[j].when {
		return q[i].when < q[j].when
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].idx = i
	q[j].idx = j
}
func (q *queue) Push(x any) {
	t := x.(*Timer)
	t.idx = len(*q)
	*q = append(*q, t)
}
func (q *queue) Pop() any {
	old := *q
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	t.idx = -1
	return t
}
