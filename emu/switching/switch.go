// Package switching is the emulated switch: its forwarding pipeline
// (learning, routes from the topology with ECMP, flooding on a spanning
// tree) and the programs installed in it (program.go: each a package that
// registers itself, NetReduce's accelerator the first), with their memory
// and latency. Ports are Egress values (a link direction, a device); the
// switch knows nothing of links, jobs or what a program computes.
package switching

import (
	"net/netip"
	"time"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames"
)

// Timing is the switch's processing latency per path through its
// pipeline (AllReduce-Switch, TCSI '21, Fig. 17): a forwarded frame passes
// port learning, the first part of parsing and output; an aggregated one
// also the aggregation stage (slower with the floating-point adder); a
// re-sent result skips the adder.
type Timing struct {
	Forward        time.Duration
	AggregateFixed time.Duration
	AggregateFloat time.Duration
	Resend         time.Duration
}

// DefaultTiming is the AllReduce-Switch's measured latencies.
var DefaultTiming = Timing{
	Forward:        250 * time.Nanosecond,
	AggregateFixed: 2200 * time.Nanosecond,
	AggregateFloat: 2400 * time.Nanosecond,
	Resend:         1500 * time.Nanosecond,
}

// Counters count the switch's forwarding plane.
type Counters struct {
	Frames    uint64 `json:"frames"`    // frames received
	Forwarded uint64 `json:"forwarded"` // sent to the learned port
	Flooded   uint64 `json:"flooded"`   // destination unknown or broadcast
	Filtered  uint64 `json:"filtered"`  // destination is the ingress port
	Emitted   uint64 `json:"emitted"`   // frames the programs sent
	Runts     uint64 `json:"runts"`     // frames shorter than an Ethernet header, dropped
	// PortSecurity counts frames dropped by port security: a bound port's
	// frame from another source MAC or address, or a bound host's source
	// MAC or address entering by another port (see Bind).
	PortSecurity uint64 `json:"port_security_drops"`
}

// Switch is a switch with installed programs: stage 1 learns the source
// MAC's port, stage 2 parses RoCE frames and offers them to the programs,
// stage 3 queues the output on the egress port after the path's latency.
// Frames the programs do not consume go by the topology's routes (a host
// NIC's MAC: the ports on shortest paths to it, one chosen per flow, as
// ECMP does), else by learned MAC, else flood.
type Switch struct {
	Name  string
	Stats Counters
	// MemoryBudget bounds the aggregation memory of the programs (bytes;
	// 0: no bound).
	MemoryBudget int64

	timing    Timing
	clock     Clock
	ports     []Egress       // each port's transmit side: a link direction or a device
	tagged    []TaggedEgress // each port's egress if it reports departures (buffer accounting), else nil
	pausers   []PauseEgress  // each port's egress if it can send PFC frames, else nil
	portLinks []PortLink     // each port's link, for the buffer's headroom and pauses (SetPortLink)
	names     []string       // each port's egress link direction, for messages
	macs      map[[6]byte]int
	routes    map[[6]byte][]int // host NIC MACs: the ports on shortest paths
	flood     []int             // the ports a flooded frame leaves by (nil: all)
	programs  []Program
	bind      []binding        // per port: the host NIC bound to it (see Bind)
	boundMAC  map[[6]byte]int  // the bound NICs' MACs, by port
	boundIP   map[[16]byte]int // their addresses (As16), by port
	view      frames.View
	emitFn    ProgramEmit
	buffer    buffer // the shared buffer's accounting (buffer.go)
	inPort    int    // the ingress port of the frame the programs process (-1: none)
}

// binding is a port's bound host NIC.
type binding struct {
	set bool
	mac [6]byte
	ip  [16]byte
}

// Egress is a switch port's transmit side: it takes a copy of frame, to
// send no earlier than ready.
type Egress interface {
	Push(frame []byte, ready time.Duration) bool
}

// Clock is the time the switch stamps its output with.
type Clock interface{ Now() time.Duration }

// New makes a switch with no ports and no programs.
func New(clock Clock, name string, t Timing) *Switch {
	if t == (Timing{}) {
		t = DefaultTiming
	}
	s := &Switch{Name: name, timing: t, clock: clock, macs: map[[6]byte]int{}, routes: map[[6]byte][]int{},
		boundMAC: map[[6]byte]int{}, boundIP: map[[16]byte]int{}, inPort: -1}
	s.emitFn = s.emit
	return s
}

// SetPort makes e port p's transmit side; name says what it is (the link
// direction leaving by it, the device).
func (s *Switch) SetPort(p int, e Egress, name string) {
	for len(s.ports) <= p {
		s.ports, s.names, s.tagged = append(s.ports, nil), append(s.names, ""), append(s.tagged, nil)
		s.pausers = append(s.pausers, nil)
	}
	s.ports[p], s.names[p] = e, name
	s.tagged[p], _ = e.(TaggedEgress) // asked once here, not per frame
	s.pausers[p], _ = e.(PauseEgress)
	if s.buffer.tracked {
		s.layoutBuffer()
	}
}

// SetFlood sets the ports a broadcast or unknown-unicast frame leaves by
// (nil: every port), e.g. a spanning tree's.
func (s *Switch) SetFlood(ports []int) { s.flood = ports }

// Install adds a program after those already installed.
func (s *Switch) Install(p Program) { s.programs = append(s.programs, p) }

// Programs are the installed programs, in pipeline order.
func (s *Switch) Programs() []Program { return s.programs }

// MemoryBytes is the aggregation memory the programs hold.
func (s *Switch) MemoryBytes() int64 {
	var n int64
	for _, p := range s.programs {
		n += p.MemoryBytes()
	}
	return n
}

// Add adds another switch's counters (a run's switches together).
func (c *Counters) Add(x Counters) {
	c.Frames += x.Frames
	c.Forwarded += x.Forwarded
	c.Flooded += x.Flooded
	c.Filtered += x.Filtered
	c.Emitted += x.Emitted
	c.Runts += x.Runts
	c.PortSecurity += x.PortSecurity
}

// Route enters a host NIC's MAC with the ports on shortest paths to it,
// as a topology that knows where each host sits does; learning never
// moves it.
func (s *Switch) Route(mac [6]byte, ports []int) { s.routes[mac] = ports }

// Routed reports whether the switch has a route to mac.
func (s *Switch) Routed(mac [6]byte) bool {
	_, ok := s.routes[mac]
	return ok
}

// Ports is the number of ports.
func (s *Switch) Ports() int { return len(s.ports) }

// Bind ties the host NIC with mac and address ip to port p, as an access
// port's port security and IP source guard do on real switches: a frame
// entering by p must come from mac (and, if it is IP or RoCEv1, from ip),
// and a frame from mac or ip entering by any other port is dropped. A
// RoCE connection is named by addresses and QPNs, which any host can
// write into a frame; the port a frame enters by it cannot forge. This
// protects every job, an ordinary WRITE as much as an aggregation packet.
// Ports joining switches stay unbound: traffic between racks enters by
// them from every host behind them.
func (s *Switch) Bind(p int, mac [6]byte, ip netip.Addr) {
	for len(s.bind) <= p {
		s.bind = append(s.bind, binding{})
	}
	b := binding{set: true, mac: mac, ip: ip.As16()}
	s.bind[p] = b
	s.boundMAC[b.mac], s.boundIP[b.ip] = p, p
}

// admit is port security (see Bind): whether a frame with a unicast
// source may enter by port.
func (s *Switch) admit(port int, frame []byte) bool {
	src := [6]byte(frame[6:12])
	ip, hasIP := srcAddr(frame)
	if port < len(s.bind) && s.bind[port].set {
		b := &s.bind[port]
		return src == b.mac && (!hasIP || ip == b.ip)
	}
	if len(s.boundMAC) == 0 {
		return true
	}
	if _, ok := s.boundMAC[src]; ok {
		return false
	}
	if hasIP {
		if _, ok := s.boundIP[ip]; ok {
			return false
		}
	}
	return true
}

// srcAddr is the source address of an IPv4, IPv6 or RoCEv1 (GRH) frame,
// as netip.Addr.As16 writes it, behind any VLAN tags.
func srcAddr(f []byte) (a [16]byte, ok bool) {
	off := 12
	for len(f) >= off+2 && (f[off] == 0x81 && f[off+1] == 0x00 || f[off] == 0x88 && f[off+1] == 0xA8) {
		off += 4
	}
	if len(f) < off+2 {
		return a, false
	}
	l3 := f[off+2:]
	switch {
	case f[off] == 0x08 && f[off+1] == 0x00 && len(l3) >= 16: // IPv4
		a[10], a[11] = 0xff, 0xff
		copy(a[12:], l3[12:16])
		return a, true
	case (f[off] == 0x86 && f[off+1] == 0xDD || f[off] == 0x89 && f[off+1] == 0x15) && len(l3) >= 24: // IPv6, GRH
		copy(a[:], l3[8:24])
		return a, true
	}
	return a, false
}

// Ingress takes a frame that arrived on port (only read during the call).
func (s *Switch) Ingress(port int, frame []byte) {
	s.Stats.Frames++
	if len(frame) < 14 {
		s.Stats.Runts++
		return
	}
	if !s.admit(port, frame) {
		s.Stats.PortSecurity++
		return
	}
	// Stage 1: port learning (unicast sources only; never for a routed
	// host MAC, which a corrupted or forged source address would otherwise
	// steal from its port, black-holing the host's traffic until it sends
	// again, and a host that has finished sends nothing).
	if frame[6]&1 == 0 {
		src := [6]byte(frame[6:12])
		if _, routed := s.routes[src]; !routed {
			if p, ok := s.macs[src]; !ok || p != port {
				s.macs[src] = port
			}
		}
	}
	// Stage 2: parsing and the programs. What a program sends while it
	// processes this frame was made from it (a result, a multicast copy):
	// a managed buffer charges it to this ingress port (push).
	if len(s.programs) > 0 {
		s.inPort = port
		consumed := s.runPrograms(port, frame)
		s.inPort = -1
		if consumed {
			return
		}
	}
	s.forward(port, frame, s.timing.Forward)
}

// runPrograms offers the frame to the programs in order; it reports
// whether one consumed it.
func (s *Switch) runPrograms(port int, frame []byte) bool {
	if len(s.programs) > 0 {
		if err := s.view.Parse(frame); err == nil {
			for _, p := range s.programs {
				if p.Process(&s.view, port, s.emitFn) {
					return true
				}
			}
		} else if err == frames.ErrNotRoCE {
			for _, p := range s.programs {
				if fp, ok := p.(FrameProgram); ok && fp.ProcessFrame(frame, port, s.emitFn) {
					return true
				}
			}
		}
	}
	return false
}

// emit forwards what a program sends.
func (s *Switch) emit(frame []byte, lat time.Duration) {
	s.Stats.Emitted++
	s.forward(-1, frame, lat)
}

// forward is stage 3: the route or learned port, or flood.
func (s *Switch) forward(in int, frame []byte, lat time.Duration) {
	ready := s.clock.Now() + lat
	if frame[0]&1 == 0 {
		dst := [6]byte(frame[0:6])
		var p int
		hops, ok := s.routes[dst]
		switch {
		case !ok:
			p, ok = s.macs[dst]
		case len(hops) == 1:
			p = hops[0]
		default:
			p = topo.ECMP(hops, flowHash(frame))
		}
		if ok {
			if p == in {
				s.Stats.Filtered++
				return
			}
			s.Stats.Forwarded++
			s.push(p, in, frame, ready)
			return
		}
	}
	s.Stats.Flooded++
	if s.flood == nil {
		for p := range s.ports {
			if p != in {
				s.push(p, in, frame, ready)
			}
		}
		return
	}
	for _, p := range s.flood {
		if p != in {
			s.push(p, in, frame, ready)
		}
	}
}

// flowHash is the ECMP hash of a frame's flow (topo.FlowHash): the
// addresses and the UDP ports for RoCEv2 (the UDP source port is what
// RoCEv2 varies per QP for exactly this), the GIDs and destination QP for
// RoCEv1, the MACs otherwise. All frames of one connection take one path.
func flowHash(f []byte) uint32 {
	switch {
	case len(f) >= 38 && f[12] == 0x08 && f[13] == 0x00: // IPv4: addresses, UDP ports
		return topo.FlowHash(f[26:38])
	case len(f) >= 58 && f[12] == 0x86 && f[13] == 0xDD: // IPv6
		return topo.FlowHash(f[22:58])
	case len(f) >= 62 && f[12] == 0x89 && f[13] == 0x15: // RoCEv1: GRH GIDs, BTH destination QP
		return topo.FlowHashAdd(topo.FlowHash(f[22:54]), f[59:62])
	}
	return topo.FlowHash(f[0:12])
}
