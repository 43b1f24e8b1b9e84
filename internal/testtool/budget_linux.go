package testtool

import (
	"runtime"
	"syscall"
	"time"
)

// wallPerCPU spins one thread for wall of wall-clock time and returns the
// ratio of that time to the CPU time the thread was given.
func wallPerCPU(wall time.Duration) float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	cpu := func() time.Duration {
		var ru syscall.Rusage
		if syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru) != nil {
			return -1
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	c0, t0 := cpu(), time.Now()
	for time.Since(t0) < wall {
	}
	c1, w := cpu(), time.Since(t0)
	if c0 < 0 || c1 <= c0 {
		return 1
	}
	return float64(w) / float64(c1-c0)
}
