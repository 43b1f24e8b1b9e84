package dut

import "syscall"

// procAttr: the device command in its own process group, killed
// (SIGKILL) when the thread that started it, and so this process, dies.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
