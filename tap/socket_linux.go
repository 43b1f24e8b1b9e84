package tap

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// OpenSocket attaches to any existing interface through a raw AF_PACKET
// socket, as a Device: ReadFrame returns the frames the interface
// receives (for a TAP, what the process holding its descriptor writes;
// for one end of a veth pair, what is sent into the other end), never
// those it transmits, and WriteFrame transmits a frame out of it (out of
// a TAP, to its descriptor's holder; out of a veth end, into the peer).
// This is how a wire sits between two interfaces that other processes
// hold: it needs neither their descriptors nor a bridge.
func OpenSocket(name string) (Device, error) {
	if err := Usable(); err != nil {
		return nil, err
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, fmt.Errorf("interface %s: %w", name, err)
	}
	// Protocol 0 until bound: no frame of another interface is queued.
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("raw socket on %s: %w", name, err)
	}
	// What the interface sends out is what this socket writes (or the
	// kernel's own chatter): never read it back.
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_IGNORE_OUTGOING, 1); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("raw socket on %s: ignore outgoing frames: %w", name, err)
	}
	// A deep receive queue: the reader may be descheduled for a while on
	// a shared machine, and a frame the queue drops is a loss nobody
	// injected.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, socketBuffer); err != nil {
		_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, socketBuffer)
	}
	addr := unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_ALL), Ifindex: ifc.Index}
	if err := unix.Bind(fd, &addr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind raw socket to %s: %w", name, err)
	}
	f := os.NewFile(uintptr(fd), name) // non-blocking: reads park in the runtime's poller, Close wakes them
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("raw socket on %s: %w", name, err)
	}
	return &socketDevice{name: name, f: f, rc: rc, to: unix.SockaddrLinklayer{Ifindex: ifc.Index, Halen: 6}}, nil
}

// socketBuffer is a raw socket's receive buffer: a few thousand full frames.
const socketBuffer = 32 << 20

func htons(v uint16) uint16 { return v<<8 | v>>8 }

type socketDevice struct {
	name   string
	f      *os.File
	rc     syscall.RawConn
	to     unix.SockaddrLinklayer
	closed atomic.Bool // the raw connection's own error for it is internal
}

func (d *socketDevice) Name() string { return d.name }

func (d *socketDevice) ReadFrame(buf []byte) (int, error) {
	var n int
	var rerr error
	err := d.rc.Read(func(fd uintptr) bool {
		// MSG_TRUNC: n is the frame's length even when buf is shorter.
		n, _, rerr = unix.Recvfrom(int(fd), buf, unix.MSG_TRUNC)
		return !errors.Is(rerr, unix.EAGAIN)
	})
	if err == nil {
		err = rerr
	}
	switch {
	case err != nil && d.closed.Load():
		return 0, fmt.Errorf("socket %s: read: %w", d.name, os.ErrClosed)
	case err != nil:
		return 0, fmt.Errorf("socket %s: read: %w", d.name, err)
	case n > len(buf):
		return 0, fmt.Errorf("socket %s: %d-byte frame does not fit a %d-byte buffer", d.name, n, len(buf))
	}
	return n, nil
}

// WriteFrame transmits one frame. A full device queue (ENOBUFS) is waited
// out for up to a second, as tcpreplay does.
func (d *socketDevice) WriteFrame(frame []byte) error {
	if len(frame) < 14 {
		return fmt.Errorf("socket %s: write: %d-byte frame is shorter than an Ethernet header", d.name, len(frame))
	}
	copy(d.to.Addr[:6], frame[0:6])
	var deadline time.Time
	for {
		var werr error
		err := d.rc.Write(func(fd uintptr) bool {
			werr = unix.Sendto(int(fd), frame, 0, &d.to)
			return !errors.Is(werr, unix.EAGAIN)
		})
		if err == nil {
			err = werr
		}
		switch {
		case err == nil:
			return nil
		case d.closed.Load():
			return fmt.Errorf("socket %s: write: %w", d.name, os.ErrClosed)
		case !errors.Is(err, unix.ENOBUFS):
			return fmt.Errorf("socket %s: write: %w", d.name, err)
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(time.Second)
		} else if time.Now().After(deadline) {
			return fmt.Errorf("socket %s: write: device queue full for 1s: %w", d.name, err)
		}
		time.Sleep(50 * time.Microsecond)
	}
}

func (d *socketDevice) Close() error {
	d.closed.Store(true)
	return d.f.Close()
}
