// Package clock is what drives every timer of inaemu: the Clock and Timer
// interfaces, and nothing else. It is a leaf so that the clocks
// (internal/vclock in virtual time, internal/wallloop on the wall clock)
// and what they drive (the roce transport, the fabric, fault stages) meet
// here without a clock importing the transport.
package clock

import "time"

// Clock drives every timer of the transport. The emulator's discrete-event
// scheduler (internal/vclock) implements it in virtual time, so a QP needs
// no goroutine; on real interfaces the same clock is advanced in real time
// by one event loop (internal/wallloop), so a QP still runs on one
// goroutine.
type Clock interface {
	// Now is the time since the clock's epoch.
	Now() time.Duration
	// AfterFunc calls f once, d from now, on the clock's event loop.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc call.
type Timer interface {
	// Stop cancels the call; it reports whether the call was pending.
	Stop() bool
	// Reset (re)schedules the call d from now; it reports whether the call
	// was pending.
	Reset(d time.Duration) bool
}
