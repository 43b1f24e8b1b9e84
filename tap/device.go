// Package tap puts inaemu's hosts and switch ports on Linux TAP devices.
//
// A Device is one Ethernet port: frames written to it leave inaemu and
// enter the kernel (which delivers them to whatever the interface is
// bridged to); frames the kernel sends out of the interface are read from
// it. Open attaches to a TAP with github.com/songgao/water; Pipe makes a
// channel-backed pair for tests that need no privileges, and HostPipe one
// that loses nothing unseen, for a host beside a loop that serves many
// ports. Topology, Up and Down create and remove the persistent TAPs and
// the bridges that join them, through netlink; an Injector sends frames
// out of an interface through a raw socket.
//
// TAPs, netlink and raw AF_PACKET sockets are Linux's: the package builds
// everywhere, but on other systems Open, Usable, Up, Down, Remove, WaitUp
// and NewInjector return an error wrapping ErrNeedLinux. Device, Pipe,
// HostPipe and Topology's names work on every system.
package tap

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
)

// MaxFrame bounds the frames a Device carries: MTU 4096 plus every header,
// rounded up (a TAP's own MTU is set to 9000).
const MaxFrame = 9216

// Device is one Ethernet port of inaemu.
type Device interface {
	// Name is the interface name (for a fake, the name it was given).
	Name() string
	// ReadFrame blocks for the next frame the kernel sends out of the
	// interface, copies it into buf and returns its length. After Close it
	// returns an error wrapping os.ErrClosed.
	ReadFrame(buf []byte) (int, error)
	// WriteFrame hands one Ethernet frame (without FCS) to the kernel.
	// An error wrapping ErrQueueFull lost only this frame (see HostPipe);
	// any other says the device failed.
	WriteFrame(frame []byte) error
	// Close releases the device; the interface itself stays (persistent).
	Close() error
}

// ErrNoPrivilege is wrapped by Usable's error when this process cannot make
// or attach TAPs (no /dev/net/tun, or no CAP_NET_ADMIN).
var ErrNoPrivilege = errors.New("TAP devices need /dev/net/tun and CAP_NET_ADMIN (run as root)")

// ErrInterfaceDown is wrapped by NewInjector's error for an interface that
// is administratively down: frames sent out of it would go nowhere.
var ErrInterfaceDown = errors.New("interface is down")

// ErrNeedLinux is wrapped by the error of everything that needs TAP
// devices, netlink or raw sockets, on a system other than Linux. It also
// matches errors.ErrUnsupported: no privilege or installation provides
// TAPs there (test helpers skip rather than fail).
var ErrNeedLinux error = needLinuxError{}

type needLinuxError struct{}

func (needLinuxError) Error() string        { return "TAP devices need Linux" }
func (needLinuxError) Is(target error) bool { return target == errors.ErrUnsupported }

// ErrQueueFull is wrapped by the error of a write HostPipe's loop end
// drops because the host's queue is full: only that frame is lost, the
// device still works. The writer can record the loss (a wire annotates
// the frame in its capture).
var ErrQueueFull = errors.New("the far end's queue is full: frame dropped")

// Dropper is a device that counts the frames written to it that were lost
// to a full queue: Pipe's and HostPipe's ends.
type Dropper interface {
	// Dropped is how many frames written at this end the far end's full
	// queue lost.
	Dropped() uint64
}

// Pipe returns two fakes joined back to back, like two TAPs on one bridge:
// a frame written to one is read from the other. Each direction buffers
// depth frames; a write to a full direction is dropped (counted by the
// writing end's Dropped), as on a TAP with a full queue, and a write to an
// end that has been closed is lost, as on a TAP with no reader. Neither
// returns an error.
func Pipe(nameA, nameB string, depth int) (Device, Device) {
	a := &fake{name: nameA, rx: make(chan []byte, depth), done: make(chan struct{})}
	b := &fake{name: nameB, rx: make(chan []byte, depth), done: make(chan struct{})}
	a.peer, b.peer = b, a
	return a, b
}

// HostPipe is a Pipe between a host and the loop that serves it beside
// other ports (a fault-injecting wire): nothing either writes is lost
// unseen. A write at the host end waits while the loop end's queue is
// full, until either end is closed: the host loses nothing it sends. A
// write at the loop end never waits (one slow host must not stall every
// port the loop serves): to a full host queue it is dropped, counted by
// Dropped, and its error wraps ErrQueueFull, so that the loop can record
// which frame the host never got.
//
// The host's waits end as long as the loop end is read: whatever reads it
// must never wait on the host.
func HostPipe(host, loop string, depth int) (h, l Device) {
	a, b := Pipe(host, loop, depth)
	a.(*fake).wait, b.(*fake).report = true, true
	return a, b
}

type fake struct {
	name string
	rx   chan []byte
	done chan struct{}
	once sync.Once
	peer *fake
	// wait: a write to a full far end waits for room (HostPipe's host
	// end); report: a write a full far end drops returns ErrQueueFull
	// (its loop end).
	wait, report bool
	dropped      atomic.Uint64
}

func (f *fake) Name() string { return f.name }

func (f *fake) Dropped() uint64 { return f.dropped.Load() }

func (f *fake) ReadFrame(buf []byte) (int, error) {
	select {
	case <-f.done:
		return 0, fmt.Errorf("tap %s: read: %w", f.name, os.ErrClosed)
	default:
	}
	select {
	case b := <-f.rx:
		if len(b) > len(buf) {
			return 0, fmt.Errorf("tap %s: %d-byte frame does not fit a %d-byte buffer", f.name, len(b), len(buf))
		}
		return copy(buf, b), nil
	case <-f.done:
		return 0, fmt.Errorf("tap %s: read: %w", f.name, os.ErrClosed)
	}
}

func (f *fake) WriteFrame(frame []byte) error {
	select {
	case <-f.done:
		return fmt.Errorf("tap %s: write: %w", f.name, os.ErrClosed)
	case <-f.peer.done:
		return nil // nobody reads the far end: the frame is lost
	default:
	}
	b := append([]byte(nil), frame...)
	if f.wait {
		select {
		case f.peer.rx <- b:
			return nil
		case <-f.done:
			return fmt.Errorf("tap %s: write: %w", f.name, os.ErrClosed)
		case <-f.peer.done:
			return nil // closed while we waited: nobody reads it
		}
	}
	select {
	case f.peer.rx <- b:
		return nil
	default: // the far end's queue is full: the frame is lost
	}
	f.dropped.Add(1)
	if f.report {
		return fmt.Errorf("tap %s: write: %w", f.name, ErrQueueFull)
	}
	return nil
}

// Close closes this end; the far end stays open.
func (f *fake) Close() error {
	f.once.Do(func() { close(f.done) })
	return nil
}
