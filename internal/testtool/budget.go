package testtool

import (
	"sort"
	"sync"
	"time"
)

// Wall-clock tests wait for events (a line of output, an interface up, a
// process gone) up to a deadline. A deadline fit for a quiet machine is
// too short for one whose cores are shared eightfold, so deadlines are
// given for a quiet machine and stretched by how little of a core this
// process gets now: Budget.

var (
	slowOnce sync.Once
	slow     float64
)

// Slowdown is how many times longer than on an idle core work takes here
// now, measured once per test process: a thread spins for 10 ms of wall
// time and the kernel says how much CPU time it was given (Linux's
// per-thread rusage); the median of five such wall/CPU ratios, between 1
// and 20 (maxSlowdown). Idle: 1; two cores shared with eight busy processes: about 4.
// Elsewhere it is 1.
func Slowdown() float64 {
	slowOnce.Do(func() {
		var r []float64
		for range 5 {
			r = append(r, wallPerCPU(10*time.Millisecond))
		}
		sort.Float64s(r)
		slow = clampSlowdown(r[len(r)/2])
	})
	return slow
}

// Budget is a wall-clock deadline of d on a quiet machine, stretched by
// Slowdown.
func Budget(d time.Duration) time.Duration { return budget(d, Slowdown()) }

// maxSlowdown caps Slowdown, and so a Budget at maxSlowdown times its
// base: a machine slower than that fails the test rather than hang it.
const maxSlowdown = 20

func clampSlowdown(s float64) float64 { return min(max(s, 1), maxSlowdown) }

// budget is d stretched by slowdown s (taken within 1..maxSlowdown).
func budget(d time.Duration, s float64) time.Duration {
	return time.Duration(float64(d) * clampSlowdown(s))
}
