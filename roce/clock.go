package roce

import (
	"sync"
	"time"
)

// Clock drives every timer of the transport. The emulator's discrete-event
// scheduler implements it in virtual time, so a QP needs no goroutine; the
// TAP backend uses WallClock.
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

// WallClock is a Clock in real time. Its callbacks run on their own
// goroutines (time.AfterFunc), serialized by Mu: users that share state
// with them must hold Mu too.
type WallClock struct {
	Mu    sync.Mutex
	start time.Time
}

// NewWallClock returns a wall clock whose epoch is now.
func NewWallClock() *WallClock { return &WallClock{start: time.Now()} }

func (w *WallClock) Now() time.Duration { return time.Since(w.start) }

func (w *WallClock) AfterFunc(d time.Duration, f func()) Timer {
	return wallTimer{time.AfterFunc(d, func() {
		w.Mu.Lock()
		defer w.Mu.Unlock()
		f()
	})}
}

type wallTimer struct{ t *time.Timer }

func (t wallTimer) Stop() bool                 { return t.t.Stop() }
func (t wallTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
