package tap

import (
	"fmt"
	"os"
	"strings"

	"github.com/songgao/water"
)

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
