// Package fabric is the emulated network on one virtual clock: the links
// of a topology (rate, propagation delay, egress queue, fault stage,
// capture, in both directions), the switches and NICs wired to them, and
// the routes the switches learn from the topology. It runs frames; jobs,
// scenarios and the live TAP runtime sit above it (a live backend
// replaces the links with devices).
package fabric

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/vclock"
)

// LinkConfig is what a link is made of (the default for every link a
// topology does not set otherwise).
type LinkConfig struct {
	Rate    float64       // bits per second
	Latency time.Duration // one-way propagation delay
	Queue   int           // egress queue, frames (0: 1000, Linux's txqueuelen)
}

// Config describes the network: a topology (by default a star of
// Hosts hosts, host r on switch port r, every link Link).
type Config struct {
	// Topology, if set, is the graph of hosts, switches and links; nil is
	// the star topo.Star(Hosts, Link).
	Topology  *topo.Topology
	Hosts     int
	Transport frames.Transport // V2IPv4 (default), V2IPv6 or V1
	Link      LinkConfig
	Timing    switching.Timing
	// SwitchMemory is each switch's aggregation memory budget in bytes (0:
	// no bound).
	SwitchMemory int64
	// Queue is every link direction's egress queue discipline (see
	// NewQueue; "": DefaultQueue, drop-tail).
	Queue string
	// ECNMarkBytes, if positive, is every egress queue's ECN marking
	// threshold in bytes (QueueConfig.MarkBytes).
	ECNMarkBytes int
	// Netem applies to every link direction; Events go to the directions
	// their link, or port and dir, keys select. Each direction's stage is
	// seeded from Seed and its place.
	Netem  faults.Netem
	Events []faults.Event
	Seed   uint64
	// Capture, if set, receives a pcapng capture of every link direction.
	Capture io.Writer
	// SwitchProgram, if set, is the switch program the capture's section
	// comment names (pcapio.SwitchProgramComment), for its readers.
	SwitchProgram string
	// DType, if set, is the element type of the NetReduce payloads the
	// capture's section comment names (pcapio.DTypeComment: nothing for
	// f32), for check's agg-sum rule.
	DType string
	// OnSend, if set, sees every frame as its last bit leaves a
	// transmitter, before the direction's fault stage (a sender-side tap;
	// the capture shows what receivers got). port and dir place the
	// direction as a fault event's keys do (host port's link, in: towards
	// the switch; -1 and DirAny off host links). frame is valid only
	// during the call.
	OnSend func(port int, dir faults.Dir, at time.Duration, frame []byte)
	// LearnMACs leaves the switches to learn every MAC, the hosts' too,
	// instead of routing each host NIC's by the topology (replay: a
	// capture's stations get ports by first appearance).
	LearnMACs bool
	// OpenPorts leaves host ports unbound (no port security; see
	// switching.Switch.Bind): for stations behind a host, a bridge's VMs,
	// which the emulated NICs never are.
	OpenPorts bool
	// Congestion (issue 36). Buffer is every switch's shared buffer and
	// PFC thresholds (switching.Switch.SetBuffer). Scheduler ("strict",
	// the default, or "dwrr"), DWRRWeights (per priority; 0: 1) and RED
	// (per class, bytes; zero: none) configure the switch egresses' prio
	// queues (prio.go). When Buffer.Lossless or Buffer.Enforce, Scheduler
	// or RED is set, switch egresses use "prio" and every link direction
	// has MAC Control (pfc.go); otherwise nothing of it exists.
	Buffer      switching.BufferConfig
	Scheduler   string
	DWRRWeights [8]int
	RED         RED
	// NICRxRate, if positive, gives every NIC a receive buffer of
	// NICRxBuffer bytes (0: nic.DefaultRxBufferBytes) drained at that
	// many bits per second: a host slower than its link (nicrx.go).
	NICRxRate   float64
	NICRxBuffer int64
}

// congestion reports whether the run uses the prio queues and MAC Control.
func (cfg *Config) congestion() bool {
	return cfg.Buffer.Lossless != 0 || cfg.Buffer.Enforce || cfg.Scheduler != "" || cfg.RED != (RED{})
}

// checkCongestion validates the scheduler, weights and RED profile.
func (cfg *Config) checkCongestion() error {
	if cfg.Scheduler != "" && !slices.Contains(Schedulers, cfg.Scheduler) {
		return fmt.Errorf("scheduler %q: want one of %s", cfg.Scheduler, strings.Join(Schedulers, ", "))
	}
	for i, w := range cfg.DWRRWeights {
		if w < 0 || w > 1000 {
			return fmt.Errorf("DWRR weight %d of priority %d: want 0..1000", w, i)
		}
	}
	if err := cfg.RED.Validate(); err != nil {
		return err
	}
	if cfg.congestion() && cfg.Queue != "" && cfg.Queue != "prio" {
		return fmt.Errorf("queue discipline %q: priorities, PFC and RED need prio", cfg.Queue)
	}
	return nil
}

// redSeed decorrelates the prio queues' marking draws from the fault
// stages' (both seeded per direction from the run's seed).
const redSeed = 0x5245442d45434e00 // "RED-ECN"

// Fabric is the emulated network: hosts, links and switches, on one
// virtual clock. Single-threaded: the clock's event loop runs it all.
type Fabric struct {
	Clock *vclock.Clock
	Topo  *topo.Topology
	// Switch is the first switch (the star's s0); nil without switches.
	Switch   *switching.Switch
	Switches []*switching.Switch
	// Hosts are each host's first NIC, by host index; NICs every NIC.
	Hosts   []*nic.NIC
	NICs    []*nic.NIC
	dirs    []*linkDir // in the topology's direction order (the star: port0-in, port0-out, port1-in, ...)
	stages  []*faults.Stage
	capture *capture
	onSend  func(port int, dir faults.Dir, at time.Duration, frame []byte)
	// Backend, when set, runs a fabric whose NICs and switch ports are
	// devices rather than emulated links (the live TAP runtime).
	Backend Backend
}

// Backend runs a fabric on devices.
type Backend interface {
	// Serve runs the event loop: it hands each frame a device read to
	// its NIC or switch port and fires timers in real time, until stop
	// (checked after every event) reports true, ctx ends, or a device
	// fails.
	Serve(ctx context.Context, stop func() bool) error
	// Close stops the readers and closes every device.
	Close() error
}

// Live reports whether the fabric runs on devices.
func (f *Fabric) Live() bool { return f.Backend != nil }

// Serve runs a live fabric (see Backend).
func (f *Fabric) Serve(ctx context.Context, stop func() bool) error {
	if f.Backend == nil {
		return errors.New("fabric: Serve needs a live fabric")
	}
	return f.Backend.Serve(ctx, stop)
}

// Close releases a live fabric's devices (nothing for an emulated one).
func (f *Fabric) Close() error {
	if f.Backend == nil {
		return nil
	}
	return f.Backend.Close()
}

// StarTopology is the star Config describes without a Topology.
func (cfg *Config) StarTopology() (*topo.Topology, error) {
	return topo.Star(cfg.Hosts, topo.LinkParams{Rate: cfg.Link.Rate, Latency: cfg.Link.Latency, Queue: cfg.Link.Queue})
}

// New builds the hosts, links, fault stages and switches.
func New(cfg Config) (*Fabric, error) {
	t := cfg.Topology
	if t == nil {
		if cfg.Hosts < 1 || cfg.Hosts > 250 {
			return nil, fmt.Errorf("fabric: %d hosts: want 1..250", cfg.Hosts)
		}
		if cfg.Link.Rate <= 0 {
			return nil, fmt.Errorf("fabric: link rate must be positive")
		}
		if cfg.Link.Latency < 0 {
			return nil, fmt.Errorf("fabric: negative link latency")
		}
		var err error
		if t, err = cfg.StarTopology(); err != nil {
			return nil, fmt.Errorf("fabric: %v", err)
		}
	}
	if err := t.Validate(); err != nil {
		return nil, fmt.Errorf("fabric: %v", err)
	}
	routes, err := t.Routes()
	if err != nil {
		return nil, fmt.Errorf("fabric: %v", err)
	}
	if cfg.Transport == frames.NotRoCE {
		cfg.Transport = frames.V2IPv4
	}
	if _, err := NewQueue(cfg.Queue, QueueConfig{}); err != nil {
		return nil, fmt.Errorf("fabric: %v", err)
	}
	if err := cfg.checkCongestion(); err != nil {
		return nil, fmt.Errorf("fabric: %v", err)
	}
	cong := cfg.congestion()
	f := &Fabric{Clock: vclock.New(), Topo: t, onSend: cfg.OnSend}
	// Nodes: a Switch per switch node, a Host per host NIC (a host's i-th
	// link is its NIC i).
	sw := map[string]*switching.Switch{}
	nics := map[string][]*nic.NIC{}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		switch n.Kind {
		case topo.KindSwitch:
			s := switching.New(f.Clock, n.Name, cfg.Timing)
			s.MemoryBudget = cfg.SwitchMemory
			sw[n.Name] = s
			f.Switches = append(f.Switches, s)
		case topo.KindHost:
			for k := range n.Links {
				h := nic.New(f.Clock, n.Name, n.Index, k, cfg.Transport)
				nics[n.Name] = append(nics[n.Name], h)
				f.NICs = append(f.NICs, h)
			}
			f.Hosts = append(f.Hosts, nics[n.Name][0])
		}
	}
	if len(f.Switches) > 0 {
		f.Switch = f.Switches[0]
	}
	portOf := func(node string, link int) int { // the node's port (or NIC) a link attaches to
		n, _ := t.Node(node)
		for p, l := range n.Links {
			if l == link {
				return p
			}
		}
		panic("fabric: topology link not on its node") // Validate guarantees it
	}
	// Links: two directions each, wired from transmitter to receiver.
	for i := range t.Links {
		l := &t.Links[i]
		q := l.Queue
		if q == 0 {
			q = 1000
		}
		for k, end := range [2][2]string{{l.A, l.B}, {l.B, l.A}} {
			from, to := end[0], end[1]
			name, fd := l.AB, faults.DirIn
			if k == 1 {
				name, fd = l.BA, faults.DirOut
			}
			// A host's first link is "its" link for port=R dir=in|out:
			// in goes from the host to the switch.
			port, dir := -1, faults.DirAny
			if a, _ := t.Node(l.A); a.Kind == topo.KindHost && a.Links[0] == i {
				if b, _ := t.Node(l.B); b.Kind == topo.KindSwitch {
					port, dir = a.Index, fd
				}
			}
			qname, qcfg := cfg.Queue, QueueConfig{Limit: q, MarkBytes: cfg.ECNMarkBytes}
			if cong && sw[from] != nil {
				qname = "prio"
				qcfg.Scheduler, qcfg.Weights, qcfg.RED = cfg.Scheduler, cfg.DWRRWeights, cfg.RED
				qcfg.Seed = faults.StageSeed(cfg.Seed^redSeed, i, fd)
				if cfg.Buffer.Lossless != 0 || cfg.Buffer.Enforce {
					qcfg.Limit = math.MaxInt // the switch's buffer admits
				}
			}
			queue, _ := NewQueue(qname, qcfg)
			d := newLinkDir(f, name, port, dir, l.Rate, l.Latency, queue)
			st := faults.NewLinkStage(name, port, dir, cfg.Netem, cfg.Events, faults.StageSeed(cfg.Seed, i, fd))
			f.stages = append(f.stages, st)
			d.setStage(st)
			fp, tp := portOf(from, i), portOf(to, i)
			if cong {
				d.pfc = &pfcState{fromSw: -1, toSw: -1, toPort: tp}
				d.pfc.pauseQueue, _ = queue.(*Prio)
			}
			if s := sw[from]; s != nil {
				s.SetPort(fp, d, name)
				s.SetPortLink(fp, l.Rate, l.Latency)
				d.onDepart = s.Departed // the switch's buffer releases a frame as it leaves the queue
				si := f.SwitchIndex(s)
				d.mac = PortMAC(si, fp)
				if d.pfc != nil {
					d.pfc.fromSw, d.pfc.fromPort = si, fp
					d.pfc.onPause = func(en uint8, q [8]uint16) { s.PauseReceived(fp, en, q) }
				}
			} else {
				h := nics[from][fp]
				h.Attach(d)
				d.src = h
				d.mac = [6]byte(h.MAC)
				if d.pfc != nil {
					d.pfc.pauseSrc = h
					h.Priority = switching.Priority
				}
			}
			if s := sw[to]; s != nil {
				d.recv = func(frame []byte) { s.Ingress(tp, frame) }
				if d.pfc != nil {
					d.pfc.toSw = f.SwitchIndex(s)
				}
			} else {
				d.recv = nics[to][tp].Receive
			}
			if k == 1 {
				prev := f.dirs[len(f.dirs)-1]
				d.rev, prev.rev = prev, d
			}
			f.dirs = append(f.dirs, d)
		}
	}
	// Port security: a NIC's link to a switch binds its MAC and address to
	// that port (switching.Switch.Bind), when the topology says where
	// every NIC sits.
	if !cfg.LearnMACs && !cfg.OpenPorts {
		for _, h := range f.NICs {
			n, _ := t.Node(h.Host)
			li := n.Links[h.Port]
			if s := sw[t.Links[li].Other(h.Host)]; s != nil {
				s.Bind(portOf(s.Name, li), [6]byte(h.MAC), h.IP)
			}
		}
	}
	// The switches' buffers, once their ports and links are known.
	if cfg.Buffer != (switching.BufferConfig{}) {
		for _, s := range f.Switches {
			if err := s.SetBuffer(cfg.Buffer); err != nil {
				return nil, fmt.Errorf("fabric: %v", err)
			}
		}
	}
	if err := f.setNICRxBuffers(&cfg); err != nil {
		return nil, fmt.Errorf("fabric: %v", err)
	}
	// Routes: every switch knows the ports towards every host NIC.
	for _, s := range f.Switches {
		if !cfg.LearnMACs {
			for _, h := range f.NICs {
				if hops := routes.NextHops(s.Name, h.Host, h.Port); len(hops) > 0 {
					ports := make([]int, len(hops))
					for i, l := range hops {
						ports[i] = portOf(s.Name, l)
					}
					s.Route([6]byte(h.MAC), ports)
				}
			}
		}
		if len(f.Switches) > 1 {
			var flood []int
			for _, l := range t.FloodPorts(s.Name) {
				flood = append(flood, portOf(s.Name, l))
			}
			s.SetFlood(flood)
		}
	}
	// A spoof event's forgery enters the network by another host's link
	// (its first), where the capture shows it.
	for _, d := range f.dirs {
		if d.dir == faults.DirIn && d.stage != nil {
			d.stage.OnSpoof = func(frame []byte, from int, ev *faults.Event) {
				if from >= 0 && from < len(f.Hosts) {
					if up := f.uplink(f.Hosts[from]); up != nil {
						up.inject(frame, faults.NoteSpoof, ev)
					}
				}
			}
		}
	}
	if cfg.Capture != nil {
		c, err := newCapture(cfg.Capture, pcapio.JoinComments(pcapio.SwitchProgramComment(cfg.SwitchProgram), pcapio.DTypeComment(cfg.DType)), f.dirs)
		if err != nil {
			return nil, err
		}
		f.capture = c
	}
	return f, nil
}

// HostByName is the NIC a rank placed on name runs on: "h3" is host h3's
// first NIC, "h3:nic1" its second.
func (f *Fabric) HostByName(name string) (*nic.NIC, bool) {
	for _, h := range f.NICs {
		if h.Name == name {
			return h, true
		}
	}
	return nil, false
}

// SwitchOf is the switch a host NIC's link leads to, and the port it
// arrives on there; nil when the NIC's link ends at another host.
func (f *Fabric) SwitchOf(h *nic.NIC) (*switching.Switch, int) {
	n, _ := f.Topo.Node(h.Host)
	l := &f.Topo.Links[n.Links[h.Port]]
	peer := l.B
	if peer == h.Host {
		peer = l.A
	}
	for _, s := range f.Switches {
		if s.Name == peer {
			pn, _ := f.Topo.Node(peer)
			for p, li := range pn.Links {
				if li == n.Links[h.Port] {
					return s, p
				}
			}
		}
	}
	return nil, -1
}

// SwitchLink is the first link joining switches a and b: the port it
// takes on each; ok is false when none does.
func (f *Fabric) SwitchLink(a, b *switching.Switch) (pa, pb int, ok bool) {
	na, okA := f.Topo.Node(a.Name)
	nb, okB := f.Topo.Node(b.Name)
	if !okA || !okB {
		return -1, -1, false
	}
	for p, li := range na.Links {
		for q, lj := range nb.Links {
			if li == lj {
				return p, q, true
			}
		}
	}
	return -1, -1, false
}

// Trunks are the ports joining switch s to other switches, ascending.
func (f *Fabric) Trunks(s *switching.Switch) []int {
	n, ok := f.Topo.Node(s.Name)
	if !ok {
		return nil
	}
	var ports []int
	for p, l := range n.Links {
		if o, _ := f.Topo.Node(f.Topo.Links[l].Other(s.Name)); o != nil && o.Kind == topo.KindSwitch {
			ports = append(ports, p)
		}
	}
	return ports
}

// SwitchIndex is s's place in Switches (-1 if it is not this fabric's).
func (f *Fabric) SwitchIndex(s *switching.Switch) int {
	for i, x := range f.Switches {
		if x == s {
			return i
		}
	}
	return -1
}

// uplink is the link direction a NIC transmits on.
func (f *Fabric) uplink(h *nic.NIC) *linkDir {
	for _, d := range f.dirs {
		if d.src == h {
			return d
		}
	}
	return nil
}

// Reachable reports whether frames from NIC a reach NIC b: over the link
// between them, or from a's switch by its routes.
func (f *Fabric) Reachable(a, b *nic.NIC) bool {
	if f.Live() {
		return true
	}
	if a == b {
		return false // a NIC's frames to itself would go out and be filtered
	}
	n, _ := f.Topo.Node(a.Host)
	bn, _ := f.Topo.Node(b.Host)
	li := n.Links[a.Port]
	if bn.Links[b.Port] == li {
		return true // the link joins the two NICs
	}
	s, _ := f.SwitchOf(a)
	if s == nil {
		return false
	}
	return s.Routed([6]byte(b.MAC))
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
		s.Add(st.Stats)
	}
	return s
}

// Direction is the counters of the link direction called name.
func (f *Fabric) Direction(name string) (LinkStats, bool) {
	for _, d := range f.dirs {
		if d.name == name {
			return d.Stats, true
		}
	}
	return LinkStats{}, false
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

// ECNMarks is how many frames the egress queues marked CE.
func (f *Fabric) ECNMarks() uint64 {
	var n uint64
	for _, d := range f.dirs {
		switch q := d.queue.(type) {
		case *DropTail:
			n += q.Marked
		case *Prio:
			n += q.Marked
		}
	}
	return n
}

// FCSDrops is how many corrupted frames the receivers' MACs discarded
// (see linkDir.fcsDrop).
func (f *Fabric) FCSDrops() uint64 {
	var n uint64
	for _, d := range f.dirs {
		n += d.Stats.FCSDrops
	}
	return n
}
