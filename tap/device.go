// Package tap puts inaemu's hosts and switch ports on Linux TAP devices.
//
// A Device is one Ethernet port: frames written to it leave inaemu and
// enter the kernel (which delivers them to whatever the interface is
// bridged to); frames the kernel sends out of the interface are read from
// it. Open attaches to a TAP with github.com/songgao/water; Pipe makes a
// channel-backed pair for tests that need no privileges. Topology, Up and
// Down create and remove the persistent TAPs and the bridges that join
// them, through netlink.
package tap

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/songgao/water"
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
	WriteFrame(frame []byte) error
	// Close releases the device; the interface itself stays (persistent).
	Close() error
}

// Open attaches to the TAP interface name, creating it (persistent) if it
// does not exist. Frames carry no packet-information header.
func Open(name string) (Device, error) {
	if err := Usable(); err != nil {
		return nil, err
	}
	ifc, err := water.New(water.Config{DeviceType: water.TAP,
		PlatformSpecificParams: water.PlatformSpecificParams{Name: name, Persist: true}})
	if err != nil {
		return nil, fmt.Errorf("tap %s: %w", name, err)
	}
	return &waterDevice{ifc: ifc}, nil
}

type waterDevice struct{ ifc *water.Interface }

func (d *waterDevice) Name() string { return d.ifc.Name() }

func (d *waterDevice) ReadFrame(buf []byte) (int, error) {
	n, err := d.ifc.Read(buf)
	if err != nil {
		return 0, fmt.Errorf("tap %s: read: %w", d.ifc.Name(), err)
	}
	return n, nil
}

func (d *waterDevice) WriteFrame(frame []byte) error {
	if _, err := d.ifc.Write(frame); err != nil {
		return fmt.Errorf("tap %s: write: %w", d.ifc.Name(), err)
	}
	return nil
}

func (d *waterDevice) Close() error { return d.ifc.Close() }

// ErrNoPrivilege is wrapped by Usable's error when this process cannot make
// or attach TAPs (no /dev/net/tun, or no CAP_NET_ADMIN).
var ErrNoPrivilege = errors.New("TAP devices need /dev/net/tun and CAP_NET_ADMIN (run as root)")

// Usable reports whether this process can create and configure TAPs.
func Usable() error {
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoPrivilege, err)
	}
	f.Close()
	if !hasNetAdmin() {
		return fmt.Errorf("%w: this process lacks CAP_NET_ADMIN", ErrNoPrivilege)
	}
	return nil
}

// hasNetAdmin reads the effective capability set (bit 12, CAP_NET_ADMIN).
func hasNetAdmin() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	var caps uint64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(line, "CapEff:\t%x", &caps); err == nil {
			return caps&(1<<12) != 0
		}
	}
	return false
}

// Pipe returns two fakes joined back to back, like two TAPs on one bridge:
// a frame written to one is read from the other. Each direction buffers
// depth frames; a write to a full direction, or to an end that has been
// closed, is dropped, as on a TAP with a full queue or no reader.
func Pipe(nameA, nameB string, depth int) (Device, Device) {
	a := &fake{name: nameA, rx: make(chan []byte, depth), done: make(chan struct{})}
	b := &fake{name: nameB, rx: make(chan []byte, depth), done: make(chan struct{})}
	a.peer, b.peer = b, a
	return a, b
}

type fake struct {
	name string
	rx   chan []byte
	done chan struct{}
	once sync.Once
	peer *fake
}

func (f *fake) Name() string { return f.name }

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
	select {
	case f.peer.rx <- append([]byte(nil), frame...):
	default: // the far end's queue is full: the frame is lost
	}
	return nil
}

// Close closes this end; the far end stays open.
func (f *fake) Close() error {
	f.once.Do(func() { close(f.done) })
	return nil
}
