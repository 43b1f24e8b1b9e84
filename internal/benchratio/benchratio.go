// Package benchratio gives a benchmark's ratio to its raw limit as the
// median of interleaved rounds. A benchmark alternates short rounds of
// the project's code and of the raw limit (hash/crc32, a copy) over the
// same work, so both see the same machine; each round pair gives one
// speed ratio, and the median of those is the figure. A ratio of summed
// times lets one slow stretch of a shared machine (another tenant, a
// frequency change) decide it: summed ratios of the same code have swung
// from 0.67 to 1.93 on a shared 2-core machine.
package benchratio

import (
	"slices"
	"time"
)

// Rounds collects the timed round pairs of one benchmark run.
type Rounds struct {
	ratios    []float64
	ours, raw time.Duration
}

// Add records one round pair: the time the project's code and the raw
// limit took for the same work. Rounds with a zero time (below the
// clock's resolution) carry no ratio.
func (r *Rounds) Add(ours, raw time.Duration) {
	r.ours += ours
	r.raw += raw
	if ours > 0 && raw > 0 {
		r.ratios = append(r.ratios, float64(raw)/float64(ours))
	}
}

// Pair times one round pair, ours and raw, each doing the same work and
// returning how long it took; pair k runs ours first when k is even and
// raw first when it is odd, so neither always runs on a warmed-up cache.
func (r *Rounds) Pair(k int, ours, raw func() time.Duration) {
	if k%2 == 0 {
		o := ours()
		r.Add(o, raw())
		return
	}
	w := raw()
	r.Add(ours(), w)
}

// Ratio is the median speed ratio (raw time / our time, so above 1 is
// faster than the limit), 0 without rounds.
func (r *Rounds) Ratio() float64 {
	if len(r.ratios) == 0 {
		return 0
	}
	s := slices.Clone(r.ratios)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// Ours and Raw are the summed times, for per-operation figures beside the
// ratio.
func (r *Rounds) Ours() time.Duration { return r.ours }
func (r *Rounds) Raw() time.Duration  { return r.raw }

// Len is the number of round pairs with a ratio.
func (r *Rounds) Len() int { return len(r.ratios) }
