//go:build !linux

package tap

import (
	"context"
	"fmt"
	"runtime"
)

// needLinux is the error of everything here: TAPs, netlink and raw
// AF_PACKET sockets are Linux's.
func needLinux() error { return fmt.Errorf("tap: %w (this is %s)", ErrNeedLinux, runtime.GOOS) }

// Open would attach to a TAP; TAP devices need Linux.
func Open(name string) (Device, error) { return nil, needLinux() }

// Usable reports why this process cannot create and configure TAPs: this
// system is not Linux.
func Usable() error { return needLinux() }

// Up would create the topology's TAPs and bridges; they need Linux.
func Up(t Topology) ([]string, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	return nil, needLinux()
}

// Down would remove the topology's interfaces; they need Linux.
func Down(prefix string) ([]string, error) { return nil, needLinux() }

// Remove would delete the named interfaces; they need Linux.
func Remove(names []string) error { return needLinux() }

// WaitUp would wait for interfaces to come up; they need Linux.
func WaitUp(ctx context.Context, names ...string) error { return needLinux() }

// Injector would send frames out of an interface through a raw AF_PACKET
// socket, which needs Linux.
type Injector struct{}

// NewInjector would open a raw socket on the interface name; it needs
// Linux.
func NewInjector(name string) (*Injector, error) { return nil, needLinux() }

// Send would transmit one Ethernet frame; an Injector cannot be made here.
func (in *Injector) Send(frame []byte) error { return needLinux() }

// Close releases nothing: an Injector cannot be made here.
func (in *Injector) Close() error { return nil }

// OpenSocket would attach to an interface through a raw AF_PACKET socket,
// which needs Linux.
func OpenSocket(name string) (Device, error) { return nil, needLinux() }

// SweepStale would remove the interfaces of runs that are gone; they
// need Linux.
func SweepStale() ([]string, error) { return nil, needLinux() }
