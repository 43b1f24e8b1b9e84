// Package live is the TAP backend: a fabric whose host NICs and switch
// ports are real interfaces (package tap) instead of emulated links. One
// reader goroutine per device hands frames to the single-threaded event
// loop, which follows the wall clock; the kernel (a bridge per link) is the
// network.
package live

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tap"
)

// Devices puts hosts and switch ports on real interfaces (the TAP backend)
// instead of emulated links. Frames then cross the kernel, the links are
// whatever the kernel does (a bridge per link), and the clock follows the
// wall clock.
type Devices struct {
	// Hosts[r] is host r's NIC. A nil entry, or a slice shorter than the
	// number of workers, means that rank runs in another process.
	Hosts []tap.Device
	// Switch[p] is switch port p. Empty: the switch runs in another process.
	Switch []tap.Device
}

// Live I/O sizing: frames read and not yet handled, and the buffers that
// hold them (the readers stop reading when all are in use).
const (
	liveBuffers = 2048
	// liveBurst bounds the frames a NIC writes per event, so frames read
	// meanwhile are handled between bursts.
	liveBurst = 64
)

// liveIO is the live fabric's device side: one reader goroutine per device
// hands frames to the event loop (Serve), which owns all other state.
type liveIO struct {
	f     *fabric.Fabric
	start time.Time
	rx    chan rxFrame
	free  chan []byte
	errc  chan error
	quit  chan struct{}
	wg    sync.WaitGroup
	devs  []tap.Device
	err   error // a write failed on the loop's side
	once  sync.Once
}

type rxFrame struct {
	buf     []byte
	n       int
	deliver func(frame []byte)
}

// NewFabric builds a fabric on devices: hosts with a device run here,
// the others only lend their addresses (they run elsewhere); the switch
// runs here when it has ports. Call Serve to run it, Close to stop.
func NewFabric(hosts int, t frames.Transport, timing switching.Timing, devs Devices) (*fabric.Fabric, error) {
	if hosts < 1 || hosts > 250 {
		return nil, fmt.Errorf("live: %d hosts: want 1..250", hosts)
	}
	if len(devs.Hosts) > hosts {
		return nil, fmt.Errorf("live: %d host devices for %d hosts", len(devs.Hosts), hosts)
	}
	if len(devs.Switch) != 0 && len(devs.Switch) != hosts {
		return nil, fmt.Errorf("live: %d switch ports for %d hosts", len(devs.Switch), hosts)
	}
	if t == frames.NotRoCE {
		t = frames.V2IPv4
	}
	f := &fabric.Fabric{Clock: vclock.New()}
	l := &liveIO{start: time.Now(), rx: make(chan rxFrame, liveBuffers), free: make(chan []byte, liveBuffers),
		errc: make(chan error, 1), quit: make(chan struct{})}
	for range liveBuffers {
		l.free <- make([]byte, tap.MaxFrame)
	}
	l.f = f
	f.Backend = l
	for p, d := range devs.Switch { // before any reader starts
		if d == nil {
			return nil, fmt.Errorf("live: switch port %d has no device", p)
		}
	}
	if len(devs.Switch) > 0 {
		f.Switch = switching.New(f.Clock, "s0", timing)
		f.Switches = []*switching.Switch{f.Switch}
		for p, d := range devs.Switch {
			f.Switch.SetPort(p, &livePort{l: l, dev: d}, d.Name())
			f.Switch.Route([6]byte(nic.MAC(p, 0)), []int{p}) // rank p's NIC sits behind port p
			port := p
			l.add(d, func(frame []byte) { f.Switch.Ingress(port, frame) })
		}
	}
	for r := 0; r < hosts; r++ {
		h := nic.New(f.Clock, fmt.Sprintf("h%d", r), r, 0, t)
		h.Attach(noTx{})
		if r < len(devs.Hosts) && devs.Hosts[r] != nil {
			tx := &liveTx{l: l, dev: devs.Hosts[r], src: h, buf: make([]byte, tap.MaxFrame)}
			tx.timer = f.Clock.AfterFunc(0, tx.drain)
			tx.timer.Stop()
			h.Attach(tx)
			h.Live = true
			l.add(devs.Hosts[r], h.Receive)
		}
		f.Hosts = append(f.Hosts, h)
	}
	f.NICs = f.Hosts
	return f, nil
}

func (l *liveIO) add(d tap.Device, deliver func([]byte)) {
	l.devs = append(l.devs, d)
	l.wg.Add(1)
	go l.read(d, deliver)
}

// read is a device's reader goroutine.
func (l *liveIO) read(d tap.Device, deliver func([]byte)) {
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
			default:
				select {
				case l.errc <- err:
				default:
				}
			}
			return
		}
		select {
		case l.rx <- rxFrame{buf: buf, n: n, deliver: deliver}:
		case <-l.quit:
			return
		}
	}
}

func (l *liveIO) now() time.Duration { return time.Since(l.start) }

func (l *liveIO) fail(err error) {
	if l.err == nil {
		l.err = err
	}
}

// Serve runs a live fabric's event loop: it hands each frame a device read
// to its host or switch port and fires timers in real time, until stop
// (checked after every event) reports true, ctx ends, or a device fails.
func (l *liveIO) Serve(ctx context.Context, stop func() bool) error {
	c := l.f.Clock
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		c.AdvanceTo(l.now())
		if l.err != nil {
			return l.err
		}
		if stop() {
			return nil
		}
		var wake <-chan time.Time
		if next, ok := c.Next(); ok {
			d := next - l.now()
			if d <= 0 {
				continue
			}
			timer.Reset(d)
			wake = timer.C
		}
		select {
		case fr := <-l.rx:
			timer.Stop()
			c.AdvanceTo(l.now())
			fr.deliver(fr.buf[:fr.n])
			l.free <- fr.buf
			// Frames that queued meanwhile go without a trip through the
			// timers (bounded, so timers are never starved).
			for range liveBurst {
				select {
				case fr = <-l.rx:
					fr.deliver(fr.buf[:fr.n])
					l.free <- fr.buf
					continue
				default:
				}
				break
			}
		case <-wake:
		case err := <-l.errc:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Close stops the readers and closes every device (the interfaces stay).
func (l *liveIO) Close() error {
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

// liveTx is a host NIC on a device. No line rate is modelled: when a QP
// has frames the NIC writes them to the device in bursts, and the kernel
// sets the pace.
type liveTx struct {
	l       *liveIO
	dev     tap.Device
	src     *nic.NIC
	buf     []byte
	timer   roce.Timer
	pending bool
}

func (t *liveTx) Kick() {
	if !t.pending {
		t.pending = true
		t.timer.Reset(0)
	}
}

func (t *liveTx) drain() {
	t.pending = false
	for range liveBurst {
		n := t.src.NextFrame(t.buf)
		if n == 0 {
			return
		}
		if err := t.dev.WriteFrame(t.buf[:n]); err != nil {
			t.l.fail(err)
			return
		}
	}
	t.Kick() // more to send: after the frames read meanwhile
}

// noTx is the NIC of a host that runs in another process.
type noTx struct{}

func (noTx) Kick() {}

// livePort is a switch port on a device: frames leave at once (the
// switch's processing latency is whatever this process takes).
type livePort struct {
	l   *liveIO
	dev tap.Device
}

func (p *livePort) Push(frame []byte, _ time.Duration) bool {
	if err := p.dev.WriteFrame(frame); err != nil {
		p.l.fail(err)
		return false
	}
	return true
}
