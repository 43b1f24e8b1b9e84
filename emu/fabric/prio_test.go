package fabric

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// prioFrame is an IPv4 frame of n bytes (n ≥ 60) of priority prio: DSCP
// prio<<3, the class selector a DSCP-trusting switch maps to prio (TOS
// prio<<5), with ECN bits ecn; seq goes in its IPv4 identification.
func prioFrame(prio, n int, ecn byte, seq int) []byte {
	f := ipv4Frame(0x0800, byte(prio)<<5|ecn)
	f[18], f[19] = byte(seq>>8), byte(seq)
	return append(f, make([]byte, n-len(f))...)
}

func frameID(f []byte) int { return int(f[18])<<8 | int(f[19]) }

func newPrioQ(t *testing.T, cfg QueueConfig) *Prio {
	t.Helper()
	if cfg.Limit == 0 {
		cfg.Limit = 1 << 20
	}
	q, err := NewQueue("prio", cfg)
	require.NoError(t, err)
	return q.(*Prio)
}

// Strict priority: the highest priority with a frame goes first; within a
// priority, frames keep their order.
func TestPrioStrictOrder(t *testing.T) {
	q := newPrioQ(t, QueueConfig{})
	prios := []int{0, 3, 7, 3, 1, 7, 0, 5}
	for i, p := range prios {
		require.True(t, q.Enqueue(Packet{Frame: prioFrame(p, 60, 0, i)}))
	}
	var got []int
	for {
		p, next, ok := q.Dequeue(0)
		if !ok {
			assert.Equal(t, Never, next)
			break
		}
		got = append(got, frameID(p.Frame))
	}
	// by priority 7, 5, 3, 1, 0, each in arrival order
	assert.Equal(t, []int{2, 5, 7, 1, 3, 4, 0, 6}, got)
}

// DWRR: three backlogged classes with weights 1, 3 and 6 share the bytes
// sent 1:3:6 (within 1 %), whatever the frames' sizes; a class without
// frames takes no share.
func TestPrioDWRRSharesBytesByWeight(t *testing.T) {
	w := [8]int{1: 1, 2: 3, 6: 6}
	q := newPrioQ(t, QueueConfig{Scheduler: "dwrr", Weights: w})
	classes := []int{1, 2, 6}
	size := func(k int) int { return 64 + (k*2654435761)%4000 } // 64..4063 bytes, scattered
	k := 0
	for _, c := range classes {
		for range 4 {
			q.Enqueue(Packet{Frame: prioFrame(c, size(k), 0, k)})
			k++
		}
	}
	var bytes [8]float64
	for range 60_000 {
		p, _, ok := q.Dequeue(0)
		require.True(t, ok)
		c := int(p.Frame[15] >> 5)
		bytes[c] += float64(len(p.Frame))
		q.Enqueue(Packet{Frame: prioFrame(c, size(k), 0, k)}) // keep it backlogged
		k++
	}
	total := bytes[1] + bytes[2] + bytes[6]
	sumW := float64(w[1] + w[2] + w[6])
	for _, c := range classes {
		share, want := bytes[c]/total, float64(w[c])/sumW
		assert.InDelta(t, want, share, 0.01*want, "priority %d: share %.4f, weight share %.4f", c, share, want)
	}
}

// A pause holds its class only: the other class flows; when nothing else
// may go Dequeue's next is the pause's end, and then the paused frames go.
// A pause of time 0 (a resume) releases at once.
func TestPrioPauseHoldsOneClass(t *testing.T) {
	for _, sched := range Schedulers {
		q := newPrioQ(t, QueueConfig{Scheduler: sched})
		end := 10 * time.Microsecond
		q.Pause(5, end)
		for i := range 3 {
			q.Enqueue(Packet{Frame: prioFrame(5, 100, 0, i)})
			q.Enqueue(Packet{Frame: prioFrame(3, 100, 0, 10+i)})
		}
		for i := range 3 {
			p, _, ok := q.Dequeue(time.Microsecond)
			require.True(t, ok, sched)
			assert.Equal(t, 10+i, frameID(p.Frame), sched)
		}
		_, next, ok := q.Dequeue(time.Microsecond)
		assert.False(t, ok, sched)
		assert.Equal(t, end, next, sched)
		_, _, ok = q.Dequeue(end - 1)
		assert.False(t, ok, sched)
		p, _, ok := q.Dequeue(end)
		require.True(t, ok, sched)
		assert.Equal(t, 0, frameID(p.Frame), sched)

		q.Pause(5, 2*end)
		_, next, _ = q.Dequeue(end)
		assert.Equal(t, 2*end, next, sched)
		q.Pause(5, end) // resume: a pause ending now
		p, _, ok = q.Dequeue(end)
		require.True(t, ok, sched)
		assert.Equal(t, 1, frameID(p.Frame), sched)
	}
}

// RED: a frame behind fewer than Kmin bytes of its class is never marked,
// behind Kmax or more always, and between with probability Pmax × (q −
// Kmin)/(Kmax − Kmin): the count of marks over many trials lies within
// five standard deviations of the binomial mean. Frames that are not
// ECN-capable are never marked.
func TestPrioREDMarkingProbability(t *testing.T) {
	red := RED{Kmin: 10_000, Kmax: 30_000, Pmax: 0.2}
	const n, size = 20_000, 1000
	for _, depth := range []int{5_000, 10_000, 15_000, 20_000, 29_000, 30_000, 40_000} {
		q := newPrioQ(t, QueueConfig{RED: red, Seed: uint64(depth)})
		for i := range depth / size {
			q.Enqueue(Packet{Frame: prioFrame(3, size, 0, i)}) // Not-ECT filler
		}
		marked := 0
		for i := range n {
			f := prioFrame(3, size, 0b10, i) // ECT(0)
			q.Enqueue(Packet{Frame: f})
			if f[15]&3 == 3 {
				marked++
			}
			_, _, ok := q.Dequeue(0) // the depth stays depth: equal sizes
			require.True(t, ok)
		}
		var p float64
		switch {
		case depth < red.Kmin:
		case depth >= red.Kmax:
			p = 1
		default:
			p = red.Pmax * float64(depth-red.Kmin) / float64(red.Kmax-red.Kmin)
		}
		mean, sd := n*p, math.Sqrt(n*p*(1-p))
		assert.InDelta(t, mean, float64(marked), 5*sd+0.5, "depth %d: %d marked, binomial mean %.0f sd %.1f", depth, marked, mean, sd)
		assert.Equal(t, uint64(marked), q.MarkedBy[3])
	}
	q := newPrioQ(t, QueueConfig{RED: red})
	for i := range 50 {
		q.Enqueue(Packet{Frame: prioFrame(3, size, 0, i)})
	}
	assert.Zero(t, q.Marked, "Not-ECT frames are never marked")
}

// The frame limit counts every class; a refused frame leaves the queue as
// it was.
func TestPrioLimit(t *testing.T) {
	q := newPrioQ(t, QueueConfig{Limit: 3})
	assert.True(t, q.Enqueue(Packet{Frame: prioFrame(1, 60, 0, 0)}))
	assert.True(t, q.Enqueue(Packet{Frame: prioFrame(2, 60, 0, 1)}))
	assert.True(t, q.Enqueue(Packet{Frame: prioFrame(1, 60, 0, 2)}))
	assert.False(t, q.Enqueue(Packet{Frame: prioFrame(7, 60, 0, 3)}))
	assert.Equal(t, 3, q.Len())
	assert.Equal(t, 2, q.ClassLen(1))
	assert.Zero(t, q.ClassLen(7))
}

// Frames of one class leave in ready order, not before they are ready.
func TestPrioReadyOrder(t *testing.T) {
	q := newPrioQ(t, QueueConfig{})
	q.Enqueue(Packet{Frame: prioFrame(0, 60, 0, 0), Ready: 20})
	q.Enqueue(Packet{Frame: prioFrame(0, 60, 0, 1), Ready: 10})
	_, next, ok := q.Dequeue(5)
	assert.False(t, ok)
	assert.Equal(t, time.Duration(10), next)
	p, _, _ := q.Dequeue(10)
	assert.Equal(t, 1, frameID(p.Frame))
}

// Steady state allocates nothing, with either scheduler and RED on.
func TestPrioAllocatesNothing(t *testing.T) {
	for _, sched := range Schedulers {
		q := newPrioQ(t, QueueConfig{Scheduler: sched, RED: RED{Kmin: 100, Kmax: 1000, Pmax: 0.5}})
		fs := make([][]byte, 64)
		for i := range fs {
			fs[i] = prioFrame(i%8, 200, 0b10, i)
			q.Enqueue(Packet{Frame: fs[i]})
		}
		allocs := testing.AllocsPerRun(1000, func() {
			p, _, _ := q.Dequeue(0)
			q.Enqueue(p)
		})
		assert.Zero(t, allocs, sched)
	}
}
