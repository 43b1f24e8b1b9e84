//go:build unix

package testtool

import "syscall"

// processGone reports whether no process has the id pid.
func processGone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }
