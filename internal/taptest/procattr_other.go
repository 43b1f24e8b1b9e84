//go:build !linux

package taptest

import "syscall"

// procAttr: no parent-death signal outside Linux (where TAP tests skip).
func procAttr() *syscall.SysProcAttr { return nil }
