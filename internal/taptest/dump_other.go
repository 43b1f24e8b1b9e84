//go:build !linux

package taptest

import "errors"

// errDumpInterrupted exists only on Linux's netlink; elsewhere there are no
// TAP tests, and this error is never returned.
var errDumpInterrupted = errors.New("netlink dump interrupted")
