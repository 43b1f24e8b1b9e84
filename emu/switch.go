package emu

import (
	"time"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/frames"
)

// SwitchTiming is the switch's processing latency per path through its
// pipeline (AllReduce-Switch, TCSI '21, Fig. 17): a forwarded frame passes
// port learning, the first part of parsing and output; an aggregated one
// also the aggregation stage (slower with the floating-point adder); a
// re-sent result skips the adder.
type SwitchTiming struct {
	Forward        time.Duration
	AggregateFixed time.Duration
	AggregateFloat time.Duration
	Resend         time.Duration
}

// DefaultTiming is the AllReduce-Switch's measured latencies.
var DefaultTiming = SwitchTiming{
	Forward:        250 * time.Nanosecond,
	AggregateFixed: 2200 * time.Nanosecond,
	AggregateFloat: 2400 * time.Nanosecond,
	Resend:         1500 * time.Nanosecond,
}

// SwitchStats count the switch's forwarding plane.
type SwitchStats struct {
	Frames    uint64 `json:"frames"`    // frames received
	Forwarded uint64 `json:"forwarded"` // sent to the learned port
	Flooded   uint64 `json:"flooded"`   // destination unknown or broadcast
	Filtered  uint64 `json:"filtered"`  // destination is the ingress port
	Emitted   uint64 `json:"emitted"`   // result frames from the accelerator
}

// Switch is an L2 switch with the NetReduce accelerator: stage 1 learns the
// source MAC's port, stage 2 parses RoCE frames and looks them up in the
// accelerator's CLT, stage 3 aggregates, stage 4 queues the output on the
// egress port after the path's latency. Frames that are not aggregation
// traffic are forwarded by learned MAC like on any switch.
type Switch struct {
	Accel  *netreduce.Accelerator
	Stats  SwitchStats
	timing SwitchTiming
	aggLat time.Duration
	fab    *Fabric
	ports  []egress // each port's transmit side: a link direction or a device
	macs   map[[6]byte]int
	pinned map[[6]byte]bool // entries the topology gave (hosts' MACs): never relearned
	view   frames.View
	emitFn netreduce.Emit
}

// egress is a switch port's transmit side: it takes a copy of frame, to
// send no earlier than ready.
type egress interface {
	push(frame []byte, ready time.Duration) bool
}

func newSwitch(f *Fabric, t SwitchTiming) *Switch {
	s := &Switch{Accel: netreduce.New(), timing: t, aggLat: t.AggregateFixed, fab: f, macs: map[[6]byte]int{}, pinned: map[[6]byte]bool{}}
	s.emitFn = s.emit
	return s
}

// AddRing sets up an aggregator array (see netreduce.Accelerator.AddRing).
// The aggregation latency follows the ring's arithmetic (the switch uses
// the floating-point figure once any ring adds floats).
func (s *Switch) AddRing(cfg netreduce.RingConfig) error {
	if err := s.Accel.AddRing(cfg); err != nil {
		return err
	}
	if cfg.DType.Float() {
		s.aggLat = s.timing.AggregateFloat
	}
	return nil
}

// pin enters a host's MAC on its port as a static entry, as a topology
// that knows where each host sits does; learning never moves it.
func (s *Switch) pin(mac [6]byte, port int) {
	s.macs[mac], s.pinned[mac] = port, true
}

// Ports is the number of ports.
func (s *Switch) Ports() int { return len(s.ports) }

func (s *Switch) ingress(port int, frame []byte) {
	s.Stats.Frames++
	if len(frame) < 14 {
		return
	}
	// Stage 1: port learning (unicast sources only; never for a pinned
	// host MAC, which a corrupted or forged source address would otherwise
	// steal from its port, black-holing the host's traffic until it sends
	// again, and a host that has finished sends nothing).
	if frame[6]&1 == 0 {
		src := [6]byte(frame[6:12])
		if p, ok := s.macs[src]; (!ok || p != port) && !s.pinned[src] {
			s.macs[src] = port
		}
	}
	// Stages 2-3: parsing, CLT, aggregation.
	if s.view.Parse(frame) == nil {
		switch s.Accel.Process(&s.view, port, s.emitFn) {
		case netreduce.NotINA, netreduce.Stale:
		default:
			return // absorbed, answered or dropped by the accelerator
		}
	}
	s.forward(port, frame, s.timing.Forward)
}

// emit routes what the accelerator sends.
func (s *Switch) emit(frame []byte, kind netreduce.Kind) {
	s.Stats.Emitted++
	lat := s.aggLat
	if kind == netreduce.KindResend {
		lat = s.timing.Resend
	}
	s.forward(-1, frame, lat) // never filtered: a result may go back out its trigger's port
}

// forward is stage 4: the learned port, or every other port.
func (s *Switch) forward(in int, frame []byte, lat time.Duration) {
	ready := s.fab.Clock.Now() + lat
	if frame[0]&1 == 0 {
		if p, ok := s.macs[[6]byte(frame[0:6])]; ok {
			if p == in {
				s.Stats.Filtered++
				return
			}
			s.Stats.Forwarded++
			s.ports[p].push(frame, ready)
			return
		}
	}
	s.Stats.Flooded++
	for p, d := range s.ports {
		if p != in {
			d.push(frame, ready)
		}
	}
}
