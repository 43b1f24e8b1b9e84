package taptest

import "syscall"

// procAttr: SIGKILL when the thread that started the process (and so the
// test process) dies.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }
