package congestion

import (
	"fmt"
	"io"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/topo"
)

// The deadlock experiment's network (docs/congestion/deadlock.yaml): a
// ring of RingSwitches switches s0..s4, one host hI on each sI, every
// link 100G. Host hI sends to h(I+2): two hops clockwise is the only
// shortest path (the other way round is three), so each flow crosses two
// ring links in the same rotational direction and each ring link sI→sI+1
// carries two flows (hI's first hop, hI−1's second) at line rate each.
// sI+1's ingress from the ring then holds frames of hI's flow waiting for
// the link sI+1→sI+2, which sI+2 pauses for the same reason: a cyclic
// buffer dependency (Hu et al., HotNets '16, §2; Guo et al., SIGCOMM '16,
// §4.3). A ring of three or four would not do: in a ring of three every
// host is one hop away, in a ring of four two hops go either way and ECMP
// splits them.
const RingSwitches = 5

// DeadlockBuffer is the experiment's switch buffer: 1 MB, so each ring
// ingress reaches its dynamic XOFF with the frames of the one flow it
// forwards (a flow's window is 2.85 MB). With the default 12 MB the two
// windows at a switch stay under XOFF, nothing pauses for long, and the
// same traffic completes.
const DeadlockBuffer = 1_000_000

// ringSpec is the ring's topology.
func ringSpec() topo.Spec {
	var s topo.Spec
	for i := 0; i < RingSwitches; i++ {
		s.Switches = append(s.Switches, topo.SwitchSpec{Name: fmt.Sprintf("s%d", i)})
		s.Links = append(s.Links, topo.LinkSpec{A: fmt.Sprintf("s%d", i), B: fmt.Sprintf("s%d", (i+1)%RingSwitches)})
	}
	for i := 0; i < RingSwitches; i++ {
		s.Hosts.List = append(s.Hosts.List, topo.HostSpec{Name: fmt.Sprintf("h%d", i)})
		s.Links = append(s.Links, topo.LinkSpec{A: fmt.Sprintf("h%d", i), B: fmt.Sprintf("s%d", i)})
	}
	return s
}

// DeadlockConfig is one run of the experiment.
type DeadlockConfig struct {
	// Chain leaves out h4 → h1, the flow that closes the cycle: the
	// dependencies then form a chain, which PFC drains.
	Chain bool
	PFC   bool
	// Buffer is each switch's shared buffer (0: DeadlockBuffer).
	Buffer int64
	// Capture, if set, receives the run's pcapng.
	Capture io.Writer
	Seed    uint64
}

// DeadlockResult is how the run ended.
type DeadlockResult struct {
	Exact bool `json:"exact"`
	// Error is the run's error: "job cannot finish: PFC deadlock on
	// priority 0: s0-s1 → ... paused since ..." for a deadlock.
	Error     string            `json:"error,omitempty"`
	Deadlocks []fabric.Deadlock `json:"deadlocks,omitempty"`
	Drops     uint64            `json:"drops"`
	Pauses    uint64            `json:"pauses"` // PFC frames the switches sent
	// Time is the run's virtual time to its last completion (0 for a run
	// that failed; a deadlock's start is in Deadlocks).
	Time time.Duration `json:"time_ns"`
}

// DeadlockConfigFor is the emu.Config of c.
func DeadlockConfigFor(c DeadlockConfig) (emu.Config, error) {
	cfg := emu.DefaultConfig()
	cfg.Link.Rate = 100e9
	cfg.Seed = c.Seed
	cfg.Capture = c.Capture
	if c.PFC {
		cfg.PFC = "on"
	}
	cfg.Buffer.Bytes = c.Buffer
	if cfg.Buffer.Bytes == 0 {
		cfg.Buffer.Bytes = DeadlockBuffer
	}
	spec := ringSpec()
	t, err := spec.Build(topo.LinkParams{Rate: cfg.Link.Rate, Latency: cfg.Link.Latency})
	if err != nil {
		return cfg, err
	}
	cfg.Topology = t
	const size = 4 << 20
	j := emu.JobSpec{Name: "ring", Mode: collective.Traffic, TensorBytes: size, Traffic: &emu.Traffic{}}
	for i := 0; i < RingSwitches; i++ {
		j.Ranks = append(j.Ranks, fmt.Sprintf("h%d", i))
		if c.Chain && i == RingSwitches-1 {
			continue
		}
		j.Traffic.Flows = append(j.Traffic.Flows, emu.Flow{From: fmt.Sprintf("h%d", i), To: fmt.Sprintf("h%d", (i+2)%RingSwitches), Bytes: size})
	}
	cfg.Jobs = []emu.JobSpec{j}
	return cfg, nil
}

// Deadlock runs c. A run the runner ended for a deadlock is a result
// (Error, Deadlocks), not an error.
func Deadlock(c DeadlockConfig) (DeadlockResult, error) {
	cfg, err := DeadlockConfigFor(c)
	if err != nil {
		return DeadlockResult{}, err
	}
	res, err := runToEnd(cfg)
	if err != nil {
		return DeadlockResult{}, err
	}
	r := DeadlockResult{Exact: res.Exact, Error: res.Error, Deadlocks: res.Deadlocks, Time: time.Duration(res.VirtualNS),
		Drops: res.QueueDrops + res.FaultDrops + pfcBufferDrops(res.Switch.Buffer)}
	for _, p := range res.PFC {
		if p.Switch != "" {
			r.Pauses += p.PausesSent
		}
	}
	return r, nil
}
