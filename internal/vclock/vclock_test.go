package vclock

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/inaemu/inaemu/internal/clock"
)

func TestOrderAndTime(t *testing.T) {
	c := New()
	var got []string
	at := func(name string) func() { return func() { got = append(got, name+"@"+c.Now().String()) } }
	c.AfterFunc(2*time.Microsecond, at("b"))
	c.AfterFunc(time.Microsecond, at("a"))
	c.AfterFunc(2*time.Microsecond, at("c")) // same instant as b: scheduled later, fires later
	stopped := c.AfterFunc(time.Microsecond, at("never"))
	assert.True(t, stopped.Stop())
	assert.False(t, stopped.Stop())
	moved := c.AfterFunc(time.Microsecond, at("moved"))
	assert.True(t, moved.Reset(5*time.Microsecond))
	assert.Equal(t, 3, c.Run(2*time.Microsecond))
	assert.Equal(t, []string{"a@1µs", "b@2µs", "c@2µs"}, got)
	assert.Equal(t, 1, c.Advance(10*time.Microsecond))
	assert.Equal(t, []string{"a@1µs", "b@2µs", "c@2µs", "moved@5µs"}, got)
	assert.Equal(t, 12*time.Microsecond, c.Now())
	assert.False(t, c.Step())
	assert.Zero(t, c.Pending())
}

func TestCallbackSchedulesMore(t *testing.T) {
	c := New()
	n := 0
	var tick func()
	tick = func() {
		n++
		if n < 5 {
			c.AfterFunc(time.Nanosecond, tick)
		}
	}
	c.AfterFunc(0, tick)
	c.Run(time.Second)
	assert.Equal(t, 5, n)
	assert.Equal(t, 4*time.Nanosecond, c.Now())
}

func TestAdvanceToAndNext(t *testing.T) {
	c := New()
	_, ok := c.Next()
	assert.False(t, ok)
	fired := 0
	c.AfterFunc(3*time.Microsecond, func() { fired++ })
	c.AfterFunc(7*time.Microsecond, func() { fired++ })
	next, ok := c.Next()
	assert.True(t, ok)
	assert.Equal(t, 3*time.Microsecond, next)
	assert.Equal(t, 1, c.AdvanceTo(5*time.Microsecond))
	assert.Equal(t, 5*time.Microsecond, c.Now())
	assert.Equal(t, 0, c.AdvanceTo(4*time.Microsecond), "time never runs backward")
	assert.Equal(t, 5*time.Microsecond, c.Now())
	c.AfterFunc(0, func() { fired++ })
	assert.Equal(t, 1, c.AdvanceTo(5*time.Microsecond), "an event due now fires without time moving")
	next, _ = c.Next()
	assert.Equal(t, 7*time.Microsecond, next)
	assert.Equal(t, 1, c.AdvanceTo(7*time.Microsecond))
	assert.Equal(t, 3, fired)
}

// Under random schedules, resets and stops, events fire in the order a
// reference (every pending timer sorted by due time, then by when it was
// last scheduled) gives.
func TestQueueOrderAgainstReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	for trial := range 200 {
		c := New()
		type ref struct {
			id        int
			when      time.Duration
			seq       int
			scheduled bool
		}
		var refs []*ref
		var timers []clock.Timer
		var fired []int
		seq := 0
		sched := func(r *ref, d time.Duration) {
			seq++
			r.when, r.seq, r.scheduled = c.Now()+max(d, 0), seq, true
		}
		for op := range 300 {
			switch k := rng.IntN(10); {
			case k < 4 || len(refs) == 0:
				r := &ref{id: len(refs)}
				d := time.Duration(rng.IntN(50))
				refs = append(refs, r)
				timers = append(timers, c.AfterFunc(d, func() { fired = append(fired, r.id); r.scheduled = false }))
				sched(r, d)
			case k < 6:
				i := rng.IntN(len(refs))
				d := time.Duration(rng.IntN(50)) - 5
				if got := timers[i].Reset(d); got != refs[i].scheduled {
					t.Fatalf("trial %d op %d: Reset reported %v, want %v", trial, op, got, refs[i].scheduled)
				}
				sched(refs[i], d)
			case k < 7:
				i := rng.IntN(len(refs))
				if got := timers[i].Stop(); got != refs[i].scheduled {
					t.Fatalf("trial %d op %d: Stop reported %v", trial, op, got)
				}
				refs[i].scheduled = false
			default:
				var next *ref
				for _, r := range refs {
					if r.scheduled && (next == nil || r.when < next.when || r.when == next.when && r.seq < next.seq) {
						next = r
					}
				}
				fired = fired[:0]
				if ok := c.Step(); ok != (next != nil) {
					t.Fatalf("trial %d op %d: Step %v with %v pending", trial, op, ok, next != nil)
				}
				if next != nil && (len(fired) != 1 || fired[0] != next.id || c.Now() != next.when) {
					t.Fatalf("trial %d op %d: fired %v at %v, want timer %d at %v", trial, op, fired, c.Now(), next.id, next.when)
				}
			}
		}
	}
}
