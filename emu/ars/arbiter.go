package ars

import (
	"slices"
	"time"
)

// cycle is one clock of the switch's processing domain: 200 MHz (§IV-A),
// moving 64 bits of AXI stream data per cycle.
const cycle = 5 * time.Nanosecond

// txOut is how long the Aggregation Output Arbiter's TX_OUT state holds the
// arbiter to package a frame of n bytes (header buffer plus result, ICRC
// computed on the way): one 8-byte beat per cycle.
func txOut(n int) time.Duration { return time.Duration((n+7)/8) * cycle }

// arbiter is the Aggregation Output Arbiter (§IV-D2, Fig. 15): one TX_OUT
// engine shared by the aggregation flow (a completed sum, broadcast to
// every member branch in one grant) and the retransmission requests of the
// branches. It grants by weighted round robin: the aggregation flow has
// weight 1/2, the branches' retransmissions share the other 1/2; a class
// with nothing to send leaves the engine to the other.
//
// The emulator must fix a frame's departure when the switch handles the
// frame that triggers it, so grants are booked as they are requested and
// never moved. A retransmission takes the earliest gap in the booked
// grants from when it reaches the arbiter (first come, first served: the
// branches' requests are served in turn as they arrive). An aggregation
// waits for the aggregation grants before it and for at most one
// retransmission grant (the one running when it arrives, or the next:
// its turn in the round robin comes after one), never for a whole backlog
// of re-sends. Where that puts it on top of booked retransmissions, the
// engine time it takes is owed by the next retransmission booked, so the
// engine never does more than its rate. Deterministic: the booking
// depends on the requests' times and order only.
type arbiter struct {
	grants []grant // booked, by start; those over before now are pruned
	debt   time.Duration
	// waits and waited: grants that could not start on arrival, and their
	// total wait (the arbiter's effect on when results leave).
	waits  uint64
	waited time.Duration
}

type grant struct {
	start, end time.Duration
	resend     bool
}

// book reserves the engine for dur for a request that reaches the arbiter
// at at, and returns how long it waits. now is the switch's clock: grants
// over by then are forgotten.
func (a *arbiter) book(now, at, dur time.Duration, resend bool) time.Duration {
	keep := a.grants[:0]
	for _, g := range a.grants {
		if g.end > now {
			keep = append(keep, g)
		}
	}
	a.grants = keep
	var start time.Duration
	if resend {
		start = a.gap(at, dur)
		if a.debt > 0 { // after the backlog, plus the time aggregations took on top of it
			start, a.debt = a.gap(start+a.debt, dur), 0
		}
	} else {
		start = at
		passed, over := false, false // a retransmission's grant let through; on top of others
		for _, g := range a.grants {
			switch {
			case g.end <= start || g.start >= start+dur:
			case !g.resend:
				// Aggregations are served in order; after each, one
				// retransmission has its turn again.
				start, passed = g.end, false
			case !passed:
				// The retransmission running when it arrives, or the
				// one whose turn comes first.
				start, passed = g.end, true
			default:
				over = true
			}
		}
		if over {
			a.debt += dur // later re-sends owe the engine time it took
		}
	}
	i, _ := slices.BinarySearchFunc(a.grants, start, func(g grant, t time.Duration) int { return cmpDur(g.start, t) })
	a.grants = slices.Insert(a.grants, i, grant{start: start, end: start + dur, resend: resend})
	if start > at {
		a.waits++
		a.waited += start - at
	}
	return start - at
}

// gap is the start of the earliest gap of dur in the booked grants at or
// after at.
func (a *arbiter) gap(at, dur time.Duration) time.Duration {
	start := at
	for _, g := range a.grants { // by start
		if g.end <= start {
			continue
		}
		if g.start >= start+dur {
			break
		}
		start = g.end
	}
	return start
}

func cmpDur(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
