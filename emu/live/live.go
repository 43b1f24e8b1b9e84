// Package live is the TAP backend: a fabric whose host NICs and switch
// ports are real interfaces (package tap) instead of emulated links. One
// reader goroutine per device hands frames to the single-threaded event
// loop (internal/wallloop), which follows the wall clock; the kernel (a
// bridge per link) is the network.
//
// It is the only package under emu/ that knows devices: Devices is the
// runner's job.Devices (the fabric, whose Backend is the loop, and the
// start barrier the processes of a job meet at), and ServeSwitch runs a
// job's switch on its own ports.
package live

import (
	"context"
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/wallloop"
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
	// Observe, if set, is called on the loop with every frame a host here
	// sends (as its NIC built it, before it is written) and every frame a
	// host here is handed (before the host looks at it): the hosts' own
	// view, in the order they act. The frame is valid only during the call.
	Observe func(rank int, sent bool, frame []byte)
}

// Live I/O sizing: frames read and not yet handled, and the buffers that
// hold them (the readers stop reading when all are in use).
const (
	liveBuffers = 2048
	// liveBurst bounds the frames a NIC writes per event, so frames read
	// meanwhile are handled between bursts.
	liveBurst = 64
)

// liveIO is the live fabric's device side: a wall-clock loop
// (internal/wallloop) whose readers hand frames to the fabric's hosts and
// switch ports.
type liveIO struct {
	loop *wallloop.Loop
}

// Fabric builds the live fabric of a job (job.Devices): NewFabric on d.
func (d *Devices) Fabric(hosts int, t frames.Transport, timing switching.Timing) (*fabric.Fabric, error) {
	return NewFabric(hosts, t, timing, *d)
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
	l := &liveIO{loop: wallloop.New(liveBuffers, tap.MaxFrame, liveBurst)}
	f := &fabric.Fabric{Clock: l.loop.Clock}
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
			l.loop.Add(d, func(frame []byte) { f.Switch.Ingress(port, frame) })
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
			deliver := h.Receive
			if obs := devs.Observe; obs != nil {
				rank := r
				tx.observe = func(frame []byte) { obs(rank, true, frame) }
				deliver = func(frame []byte) { obs(rank, false, frame); h.Receive(frame) }
			}
			l.loop.Add(devs.Hosts[r], deliver)
		}
		f.Hosts = append(f.Hosts, h)
	}
	f.NICs = f.Hosts
	return f, nil
}

// Serve runs a live fabric's event loop: it hands each frame a device read
// to its host or switch port and fires timers in real time, until stop
// (checked after every event) reports true, ctx ends, or a device fails.
func (l *liveIO) Serve(ctx context.Context, stop func() bool) error {
	return l.loop.Serve(ctx, stop)
}

// Close stops the readers and closes every device (the interfaces stay).
func (l *liveIO) Close() error { return l.loop.Close() }

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
	observe func(frame []byte) // Devices.Observe for this host, or nil
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
		if t.observe != nil {
			t.observe(t.buf[:n])
		}
		if err := t.dev.WriteFrame(t.buf[:n]); err != nil {
			t.l.loop.Fail(err)
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
		p.l.loop.Fail(err)
		return false
	}
	return true
}
