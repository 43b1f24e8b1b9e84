// Package wallloop runs an event loop on the wall clock: a virtual clock
// (package vclock) kept at the time elapsed since the loop began, whose
// timers fire in real time, and one reader goroutine per device handing
// each frame it reads to the loop, which alone touches the state it
// feeds. The TAP backend's fabric and the fault-injecting wire both run on
// it. It knows a device only as Device (tap.Device is one), so the loop
// imports no transport.
package wallloop

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/inaemu/inaemu/internal/vclock"
)

// Device is an Ethernet port a loop serves (package tap's devices are
// ones): the loop reads it and closes it; its owner writes to it, from
// the loop's events.
type Device interface {
	// Name names the port (for errors and reports).
	Name() string
	// ReadFrame blocks for the next frame, copies it into buf and returns
	// its length. After Close it returns an error wrapping os.ErrClosed.
	ReadFrame(buf []byte) (int, error)
	// WriteFrame sends one Ethernet frame (without FCS).
	WriteFrame(frame []byte) error
	// Close releases the port; a ReadFrame blocked on it returns.
	Close() error
}

// Loop is a wall-clock event loop.
type Loop struct {
	Clock *vclock.Clock
	start time.Time
	burst int
	rx    chan frame
	free  chan []byte
	errc  chan error
	quit  chan struct{}
	wg    sync.WaitGroup
	once  sync.Once
	devs  []Device
	// failed is the first error a deliverer or timer reported with Fail.
	failed error
}

type frame struct {
	buf     []byte
	n       int
	at      time.Duration
	deliver func(frame []byte)
}

// New makes a loop whose clock starts now, with buffers frame buffers of
// maxFrame bytes (the devices' largest frame; the readers stop reading
// while all are in use) and at most burst frames handled per wake-up
// before the timers get a turn.
func New(buffers, maxFrame, burst int) *Loop {
	l := &Loop{Clock: vclock.New(), start: time.Now(), burst: burst, rx: make(chan frame, buffers),
		free: make(chan []byte, buffers), errc: make(chan error, 1), quit: make(chan struct{})}
	for range buffers {
		l.free <- make([]byte, maxFrame)
	}
	return l
}

// Now is the wall time since Start.
func (l *Loop) Now() time.Duration { return time.Since(l.start) }

// Add starts d's reader: each frame read is handed to deliver on the
// loop, with the clock at the time it was read. Close closes d.
func (l *Loop) Add(d Device, deliver func(frame []byte)) {
	l.devs = append(l.devs, d)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for {
			var buf []byte
			select {
			case buf = <-l.free:
			case <-l.quit:
				return
			}
			n, err := d.ReadFrame(buf)
			if err != nil {
				select {
				case <-l.quit: // closed by Close
				case l.errc <- err:
				default:
				}
				return
			}
			select {
			case l.rx <- frame{buf: buf, n: n, at: l.Now(), deliver: deliver}:
			case <-l.quit:
				return
			}
		}
	}()
}

// Fail ends Serve with err, after the event that called it: a write that
// failed on the loop's side. The first error given is kept.
func (l *Loop) Fail(err error) {
	if l.failed == nil {
		l.failed = err
	}
}

// Failed is the error given to Fail, or nil.
func (l *Loop) Failed() error { return l.failed }

// Serve runs the loop: it fires timers in real time and hands each frame
// read to its deliverer, until stop (checked after every event) reports
// true, ctx ends (its error is returned), a device's read fails, or an
// event calls Fail (that error is returned, whatever else ended it).
func (l *Loop) Serve(ctx context.Context, stop func() bool) error {
	err := l.serve(ctx, func() bool { return l.failed != nil || stop() })
	if l.failed != nil {
		return l.failed
	}
	return err
}

func (l *Loop) serve(ctx context.Context, stop func() bool) error {
	c := l.Clock
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		c.AdvanceTo(l.Now())
		if stop() {
			return nil
		}
		var wake <-chan time.Time
		if next, ok := c.Next(); ok {
			d := next - l.Now()
			if d <= 0 {
				continue
			}
			timer.Reset(d)
			wake = timer.C
		}
		select {
		case fr := <-l.rx:
			timer.Stop()
			l.handle(fr)
			// Frames that queued meanwhile go without a trip through the
			// timers (bounded, so timers are never starved).
		burst:
			for range l.burst - 1 {
				select {
				case fr = <-l.rx:
					l.handle(fr)
				default:
					break burst
				}
			}
		case <-wake:
		case err := <-l.errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// handle delivers one frame, the timers due before it was read first.
func (l *Loop) handle(fr frame) {
	l.Clock.AdvanceTo(fr.at)
	fr.deliver(fr.buf[:fr.n])
	l.free <- fr.buf
}

// Close stops the readers and closes every device added.
func (l *Loop) Close() error {
	var first error
	l.once.Do(func() {
		close(l.quit)
		for _, d := range l.devs {
			if err := d.Close(); err != nil && first == nil && !errors.Is(err, os.ErrClosed) {
				first = err
			}
		}
		l.wg.Wait()
	})
	return first
}
