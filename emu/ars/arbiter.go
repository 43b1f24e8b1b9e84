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
// weight 1/2, the branches' retransmissions share the other 1/2.
//
// The emulator must fix a frame's departure when the switch handles the
// frame that triggers it, so grants are booked as they are requested and
// never moved: a request takes the earliest gap in the booked grants at or
// after it reaches the arbiter, and a retransmission never takes a gap
// next to another retransmission's grant. So a burst of re-sends leaves
// every other grant to the aggregation flow (its half), and the
// aggregation flow alone runs at the engine's full rate. Deterministic:
// the booking depends on the requests' times and order only.
type arbiter struct {
	grants []grant // booked, by start; those over before now are pruned
	// Waits and Waited: grants that could not start on arrival, and their
	// total wait (the arbiter's effect on when results leave).
	waits  uint64
	waited time.Duration
}

type grant struct {
	start, end time.Duration
	resend     bool
}

// book reserves the engine for dur from the earliest time at or after at
// that the rules allow, and returns how long the request waited. now is
// the switch's clock: grants over by then are forgotten.
func (a *arbiter) book(now, at, dur time.Duration, resend bool) time.Duration {
	keep := a.grants[:0]
	for _, g := range a.grants {
		if g.end > now {
			keep = append(keep, g)
		}
	}
	a.grants = keep
	start := at
	// Candidates: the arrival, then the end of each grant after it (the
	// earliest gap starts at one of them).
	if !a.fits(start, dur, resend) {
		start = -1
		for _, g := range a.grants {
			if g.end >= at && a.fits(g.end, dur, resend) {
				start = g.end
				break
			}
		}
		if start < 0 { // after the last grant (and after its gap rule)
			last := a.grants[len(a.grants)-1].end
			if resend && a.grants[len(a.grants)-1].resend {
				last += dur // leave one grant's room for the aggregation flow
			}
			start = max(last, at)
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

// fits reports whether [s, s+dur) overlaps no booked grant and, for a
// retransmission, touches no other retransmission's grant.
func (a *arbiter) fits(s, dur time.Duration, resend bool) bool {
	e := s + dur
	for _, g := range a.grants {
		if g.start < e && s < g.end {
			return false
		}
		if resend && g.resend && (g.end == s || g.start == e) {
			return false
		}
	}
	return true
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
