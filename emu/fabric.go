package emu

import (
	"fmt"
	"io"
	"net"
	"net/netip"
	"time"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/vclock"
)

// LinkConfig is what every host-switch link is made of.
type LinkConfig struct {
	Rate    float64       // bits per second
	Latency time.Duration // one-way propagation delay
	Queue   int           // switch egress queue, frames (0: 1000, Linux's txqueuelen)
}

// FabricConfig describes a star: Hosts hosts, host r on switch port r.
type FabricConfig struct {
	Hosts     int
	Transport frames.Transport // V2IPv4 (default), V2IPv6 or V1
	Link      LinkConfig
	Timing    SwitchTiming
	// Netem applies to every link direction; Events go to the directions
	// their port and dir keys select. Each direction's stage is seeded
	// from Seed and its place.
	Netem  faults.Netem
	Events []faults.Event
	Seed   uint64
	// Capture, if set, receives a pcapng capture of every link direction.
	Capture io.Writer
	// OnSend, if set, sees every frame as its last bit leaves a
	// transmitter, before the direction's fault stage (a sender-side tap;
	// the capture shows what receivers got). frame is valid only during
	// the call.
	OnSend func(port int, dir faults.Dir, at time.Duration, frame []byte)
	// LearnMACs leaves the switch to learn every MAC, the hosts' too,
	// instead of entering each host's on its port (replay: a capture's
	// stations get ports by first appearance).
	LearnMACs bool
}

// Fabric is the emulated network: hosts, their links and the switch, on
// one virtual clock. Single-threaded: the clock's event loop runs it all.
type Fabric struct {
	Clock   *vclock.Clock
	Switch  *Switch
	Hosts   []*Host
	dirs    []*linkDir // port0-in, port0-out, port1-in, ...
	stages  []*faults.Stage
	capture *capture
	onSend  func(port int, dir faults.Dir, at time.Duration, frame []byte)
	live    *liveIO // set when hosts and switch run on devices (NewLiveFabric)
}

// HostMAC, HostIP and HostGID are host r's addresses: a locally
// administered MAC, 10.0.0.r+1 or fd00::r+1, and for RoCEv1 the link-local
// GID the MAC gives (EUI-64), as rxe derives it.
func HostMAC(r int) net.HardwareAddr {
	return net.HardwareAddr{0x02, 0x1A, 0xE0, 0, byte(r >> 8), byte(r + 1)}
}

func hostAddr(t frames.Transport, r int) netip.Addr {
	switch t {
	case frames.V2IPv6:
		return netip.AddrFrom16([16]byte{0: 0xfd, 15: byte(r + 1), 14: byte((r + 1) >> 8)})
	case frames.V1:
		m := HostMAC(r)
		return netip.AddrFrom16([16]byte{0: 0xfe, 1: 0x80, 8: m[0] ^ 2, 9: m[1], 10: m[2], 11: 0xff, 12: 0xfe, 13: m[3], 14: m[4], 15: m[5]})
	}
	return netip.AddrFrom4([4]byte{10, 0, byte((r + 1) >> 8), byte(r + 1)})
}

// NewFabric builds the hosts, links, fault stages and switch.
func NewFabric(cfg FabricConfig) (*Fabric, error) {
	if cfg.Hosts < 1 || cfg.Hosts > 250 {
		return nil, fmt.Errorf("emu: %d hosts: want 1..250", cfg.Hosts)
	}
	if cfg.Link.Rate <= 0 {
		return nil, fmt.Errorf("emu: link rate must be positive")
	}
	if cfg.Link.Latency < 0 {
		return nil, fmt.Errorf("emu: negative link latency")
	}
	if cfg.Transport == frames.NotRoCE {
		cfg.Transport = frames.V2IPv4
	}
	if cfg.Link.Queue == 0 {
		cfg.Link.Queue = 1000
	}
	if cfg.Timing == (SwitchTiming{}) {
		cfg.Timing = DefaultTiming
	}
	f := &Fabric{Clock: vclock.New(), onSend: cfg.OnSend}
	f.Switch = newSwitch(f, cfg.Timing)
	for r := 0; r < cfg.Hosts; r++ {
		in := newLinkDir(f, fmt.Sprintf("port%d-in", r), r, faults.DirIn, cfg.Link.Rate, cfg.Link.Latency, cfg.Link.Queue)
		out := newLinkDir(f, fmt.Sprintf("port%d-out", r), r, faults.DirOut, cfg.Link.Rate, cfg.Link.Latency, cfg.Link.Queue)
		for _, d := range []*linkDir{in, out} {
			st := faults.NewStage(r, d.dir, cfg.Netem, cfg.Events, faults.StageSeed(cfg.Seed, r, d.dir))
			f.stages = append(f.stages, st)
			d.setStage(st)
		}
		h := newHost(f, r, cfg.Transport)
		h.up = in
		port := r
		in.recv = func(frame []byte) { f.Switch.ingress(port, frame) }
		out.recv = h.receive
		in.src = h
		f.Switch.ports = append(f.Switch.ports, out)
		if !cfg.LearnMACs {
			f.Switch.pin([6]byte(h.MAC), r)
		}
		f.Hosts = append(f.Hosts, h)
		f.dirs = append(f.dirs, in, out)
	}
	// A spoof event's forgery enters the switch by another port's link,
	// where the capture shows it.
	for _, d := range f.dirs {
		if d.dir == faults.DirIn && d.stage != nil {
			d.stage.OnSpoof = func(frame []byte, from int, ev *faults.Event) {
				if from >= 0 && from < cfg.Hosts {
					f.dirs[2*from].fly(frame, 0, faults.NoteSpoof, ev)
				}
			}
		}
	}
	if cfg.Capture != nil {
		c, err := newCapture(cfg.Capture, f.dirs)
		if err != nil {
			return nil, err
		}
		f.capture = c
	}
	return f, nil
}

// CloseCapture flushes the capture (if any) and reports a write error.
func (f *Fabric) CloseCapture() error {
	if f.capture == nil {
		return nil
	}
	return f.capture.close()
}

// FaultStats sums the fault stages' counters.
func (f *Fabric) FaultStats() faults.Stats {
	var s faults.Stats
	for _, st := range f.stages {
		x := st.Stats
		s.Frames += x.Frames
		s.Lost += x.Lost
		s.Dropped += x.Dropped
		s.Duplicated += x.Duplicated
		s.Corrupted += x.Corrupted
		s.Delayed += x.Delayed
		s.Reordered += x.Reordered
		s.Held += x.Held
		s.Spoofed += x.Spoofed
	}
	return s
}

// LinkStats sums the link directions' counters.
func (f *Fabric) LinkStats() LinkStats {
	var s LinkStats
	for _, d := range f.dirs {
		s.Frames += d.Stats.Frames
		s.Bytes += d.Stats.Bytes
		s.Delivered += d.Stats.Delivered
		s.QueueDrops += d.Stats.QueueDrops
		s.MaxQueue = max(s.MaxQueue, d.Stats.MaxQueue)
	}
	return s
}
