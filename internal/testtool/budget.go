package testtool

import (
	"sort"
	"sync"
	"time"
)

// Wall-clock tests wait for events (a line of output, an interface up, a
// process gone) up to a deadline. A deadline fit for a quiet machine is
// too short for one whose cores are shared eightfold, so deadlines are
// given for a quiet machine and stretched by how late this machine's
// timers fire now: Budget.

var (
	slowOnce sync.Once
	slow     float64
)

// Slowdown is how many times longer than asked this machine takes to wake
// a waiting goroutine, measured once per test process: the median of 15
// timers of 2 ms each, over 2 ms, between 1 and 20. Quiet: 1; a 2-core
// machine at load 8: several.
func Slowdown() float64 {
	slowOnce.Do(func() {
		const want = 2 * time.Millisecond
		var took []time.Duration
		for range 15 {
			start := time.Now()
			<-time.After(want)
			took = append(took, time.Since(start))
		}
		sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
		slow = min(max(float64(took[len(took)/2])/float64(want), 1), 20)
	})
	return slow
}

// Budget is a wall-clock deadline of d on a quiet machine, stretched by
// Slowdown.
func Budget(d time.Duration) time.Duration {
	return time.Duration(float64(d) * Slowdown())
}
