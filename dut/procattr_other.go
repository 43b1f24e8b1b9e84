//go:build unix && !linux

package dut

import "syscall"

// procAttr: the device command in its own process group (no parent-death
// signal outside Linux).
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
