package congestion

import (
	"errors"
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/topo"
)

// The head-of-line blocking experiment's network (docs/congestion/hol.yaml):
// two switches joined by a 400G trunk, hosts on 100G links. a0, a1 and
// the victim's sender x hang off s1; b0, b1, the incast's sink r and the
// victim's receiver v off s0:
//
//	a0 ─┐                  ┌─ b0
//	a1 ─┼─ s1 ══400G══ s0 ─┼─ b1
//	x  ─┘                  ├─ r   (incast sink: a0, a1, b0, b1 → r)
//	                       └─ v   (victim: x → v)
//
// Only s0's port to r is overloaded (4 × 100G into 100G); the trunk
// carries 300G of its 400G and v's link carries the victim alone.
var holSpec = topo.Spec{
	Hosts:    topo.HostsSpec{List: []topo.HostSpec{{Name: "a0"}, {Name: "a1"}, {Name: "x"}, {Name: "b0"}, {Name: "b1"}, {Name: "r"}, {Name: "v"}}},
	Switches: []topo.SwitchSpec{{Name: "s0"}, {Name: "s1"}},
	Links: []topo.LinkSpec{{A: "s1", B: "s0", Link: "400G"},
		{A: "a0", B: "s1"}, {A: "a1", B: "s1"}, {A: "x", B: "s1"},
		{A: "b0", B: "s0"}, {A: "b1", B: "s0"}, {A: "r", B: "s0"}, {A: "v", B: "s0"}},
}

// HoLBuffer is the experiment's switch buffer: 4 MB, so that s1's
// ingress ports, each holding at most a flow's window (2.85 MB), reach
// their dynamic XOFF (≈ free/(active ports + 1)) and the pause spreads
// to the hosts; with the default 12 MB it stops at the trunk.
const HoLBuffer = 4_000_000

// HoLConfig is one run of the experiment.
type HoLConfig struct {
	// PFC is the --pfc setting: "" (off), "on" (every job's priority
	// lossless) or a list of priorities.
	PFC string
	// OwnPriority puts the victim on DSCP 34 (priority 4) and the incast on
	// DSCP 26 (priority 3); otherwise both send DSCP 0.
	OwnPriority bool
	// Alone runs the victim without the incast.
	Alone bool
	// Buffer is each switch's shared buffer (0: HoLBuffer).
	Buffer int64
	Seed   uint64
}

// HoLResult is what the victim got, and where the pauses went.
type HoLResult struct {
	Exact bool   `json:"exact"`
	Error string `json:"error,omitempty"`
	// VictimGoodputGbps is x → v's goodput, IncastGoodputGbps the incast
	// flows' together (bytes over the incast job's time).
	VictimGoodputGbps float64 `json:"victim_goodput_gbps"`
	IncastGoodputGbps float64 `json:"incast_goodput_gbps,omitempty"`
	Drops             uint64  `json:"drops"`
	// PFC is every direction and priority that sent or received pauses.
	PFC []fabric.PFCStats `json:"pfc,omitempty"`
}

// Paused is how long direction dir's transmitter was paused (any
// priority).
func (r HoLResult) Paused(dir string) time.Duration {
	var d time.Duration
	for _, p := range r.PFC {
		if p.Direction == dir {
			d += time.Duration(p.PausedNs)
		}
	}
	return d
}

// HoLConfigFor is the emu.Config of c.
func HoLConfigFor(c HoLConfig) (emu.Config, error) {
	cfg := emu.DefaultConfig()
	cfg.Link.Rate = 100e9
	cfg.Seed = c.Seed
	cfg.PFC = c.PFC
	cfg.Buffer.Bytes = c.Buffer
	if cfg.Buffer.Bytes == 0 {
		cfg.Buffer.Bytes = HoLBuffer
	}
	t, err := holSpec.Build(topo.LinkParams{Rate: cfg.Link.Rate, Latency: cfg.Link.Latency})
	if err != nil {
		return cfg, err
	}
	cfg.Topology = t
	dscp := func(d int) *int {
		if !c.OwnPriority {
			return nil
		}
		return &d
	}
	const size = 4 << 20
	victim := emu.JobSpec{Name: "victim", Mode: collective.Traffic, Ranks: []string{"x", "v"}, TensorBytes: size, DSCP: dscp(34),
		Traffic: &emu.Traffic{Flows: []emu.Flow{{From: "x", To: "v", Bytes: size}}}}
	incast := emu.JobSpec{Name: "incast", Mode: collective.Traffic, Ranks: []string{"a0", "a1", "b0", "b1", "r"}, TensorBytes: size, DSCP: dscp(26),
		Traffic: &emu.Traffic{Pattern: "incast", Sink: "r"}}
	cfg.Jobs = []emu.JobSpec{incast, victim}
	if c.Alone {
		cfg.Jobs = cfg.Jobs[1:]
	}
	return cfg, nil
}

// HoL runs c.
func HoL(c HoLConfig) (HoLResult, error) {
	cfg, err := HoLConfigFor(c)
	if err != nil {
		return HoLResult{}, err
	}
	res, err := runToEnd(cfg)
	if err != nil {
		return HoLResult{}, err
	}
	return holResult(res)
}

// holResult reads a run of the experiment's jobs (from HoL, or from its
// scenario files).
func holResult(res *emu.Result) (HoLResult, error) {
	r := HoLResult{Exact: res.Exact, Error: res.Error, PFC: res.PFC,
		Drops: res.QueueDrops + res.FaultDrops + pfcBufferDrops(res.Switch.Buffer)}
	found := false
	for _, j := range res.Jobs {
		switch j.Name {
		case "victim":
			if len(j.Flows) != 1 {
				return r, fmt.Errorf("the victim job has %d flows, want 1", len(j.Flows))
			}
			r.VictimGoodputGbps, found = j.Flows[0].GoodputGbps, true
		case "incast":
			if j.VirtualNS > 0 {
				r.IncastGoodputGbps = float64(j.Bytes) * 8 / float64(j.VirtualNS)
			}
		}
	}
	if !found {
		return r, errors.New("no job named victim")
	}
	return r, nil
}
