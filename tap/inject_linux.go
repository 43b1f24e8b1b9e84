package tap

import (
	"errors"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// Injector sends frames out of an interface, as tcpreplay does: through a
// raw AF_PACKET socket, so the frames leave as if transmitted there (out
// of a TAP, they reach whatever holds its descriptor; out of a bridge,
// its ports).
type Injector struct {
	fd   int
	name string
	addr unix.SockaddrLinklayer
}

// NewInjector opens a raw socket on the interface name.
func NewInjector(name string) (*Injector, error) {
	if err := Usable(); err != nil {
		return nil, err
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	if ifc.Flags&net.FlagUp == 0 {
		return nil, fmt.Errorf("interface %s: %w: nothing sent out of it would arrive anywhere (ip link set %s up)", name, ErrInterfaceDown, name)
	}
	// Protocol 0: the socket sends only, it never queues received frames.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("raw socket: %w", err)
	}
	in := &Injector{fd: fd, name: name, addr: unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}}
	if err := unix.Bind(fd, &in.addr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind raw socket to %s: %w", name, err)
	}
	return in, nil
}

// Send transmits one Ethernet frame (without FCS). A full device queue
// (ENOBUFS) is waited out, as tcpreplay does, for up to a second.
func (in *Injector) Send(frame []byte) error {
	if len(frame) < 14 {
		return fmt.Errorf("send on %s: %d-byte frame is shorter than an Ethernet header", in.name, len(frame))
	}
	copy(in.addr.Addr[:6], frame[0:6])
	deadline := time.Time{}
	for {
		err := unix.Sendto(in.fd, frame, 0, &in.addr)
		if err == nil {
			return nil
		}
		if !errors.Is(err, unix.ENOBUFS) && !errors.Is(err, unix.EAGAIN) {
			return fmt.Errorf("send on %s: %w", in.name, err)
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(time.Second)
		} else if time.Now().After(deadline) {
			return fmt.Errorf("send on %s: device queue full for 1s: %w", in.name, err)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

// Close closes the socket.
func (in *Injector) Close() error { return unix.Close(in.fd) }
