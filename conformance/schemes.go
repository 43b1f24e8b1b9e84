package conformance

import (
	"fmt"
	"strings"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

// schemeCase is one all-reduce scheme over multi-GPU machines (fr, pn,
// pr, ta: NetReduce §3.4, Appendix A) on a star or on two racks of a
// spine-leaf fabric with 1-3 spines, with one-shot faults on the
// machines' links and, on racks, every leaf-spine link either way.
type schemeCase struct {
	Seed                  uint64
	Mode                  string
	Machines, GPUs        int
	Racks                 bool // two leaves under Spines spines, else a star
	Spines                int
	MTU, Timeout          int
	Window, MsgLen, Elems int
	DType                 tensor.DType
	Events                []string
	Program               string // the switch program pn's NetReduce rings aggregate on ("": netreduce)
}

func (c schemeCase) String() string {
	net := "star"
	if c.Racks {
		net = fmt.Sprintf("spine-leaf spines=%d", c.Spines)
	}
	s := fmt.Sprintf("%s %s %d×%d GPUs mtu=%d timeout=%d window=%d msg_len=%d elems=%d dtype=%s seed=%d faults=%q",
		c.Mode, net, c.Machines, c.GPUs, c.MTU, c.Timeout, c.Window, c.MsgLen, c.Elems, c.DType, c.Seed, c.Events)
	if c.Program != "" {
		s += " switch-program=" + c.Program
	}
	return s
}

func (c schemeCase) scenario() *scenario.Scenario {
	seed, mtu, to, w, n, l := c.Seed, c.MTU, c.Timeout, c.Machines, c.Window, c.MsgLen
	tp := &topo.Spec{Kind: "star", Hosts: topo.HostsSpec{Count: c.Machines}, GPUs: c.GPUs, Intra: "150G", Alpha: "1us"}
	if c.Racks {
		perLeaf := (c.Machines + 1) / 2
		tp = &topo.Spec{Kind: "spine-leaf", Leaves: 2, HostsPerLeaf: perLeaf, Spines: c.Spines, Uplink: fmt.Sprintf("%dG", 10*perLeaf),
			GPUs: c.GPUs, Intra: "150G", Alpha: "1us"}
	}
	return &scenario.Scenario{Workers: &w, MTU: &mtu, Seed: &seed, Timeout: &to, Window: &n, MsgLen: &l, Mode: c.Mode, MaxTime: "120s", SwitchProgram: c.Program,
		Tensor: fmt.Sprint(c.Elems * c.DType.Size()), DType: c.DType.String(), Topology: tp, Faults: append([]string(nil), c.Events...)}
}

// schemeCaseGen draws a scheme, 2-4 machines of 1, 2 or 4 GPUs (powers of
// two, as ta takes), on a star or spread over two racks under 1-3 spines,
// any dtype and MTU, windows 1-4, messages long (the papers' 128-255
// packets) or short, tensors from one element per GPU to a few hundred
// thousand (so the 8-bit MsgID of the NetReduce rings wraps), a default
// or short ACK timeout, up to six one-shot faults of every kind,
// forgeries included, on the machines' links (genFaultEvent) or, on
// racks, on any leaf-spine link either way (aimed at switch-to-switch
// frames on the links to spine0, the tree's spine of pn's NetReduce
// rings), and up to two more forgeries of a machine's frame by another's
// host (port security guards every mode's frames).
func schemeCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := schemeCase{Seed: seed, Mode: []string{"fr", "pn", "pr", "ta"}[r.Intn(4)], Machines: 2 + r.Intn(3), GPUs: 1 << r.Intn(3),
			Racks: r.Intn(3) == 0, Spines: 1, MTU: mtus[r.Intn(len(mtus))], Timeout: timeouts[r.Intn(len(timeouts))],
			Window: 1 + r.Intn(4), DType: []tensor.DType{tensor.F32, tensor.I32, tensor.F16}[r.Intn(3)]}
		c.MsgLen = 1 + r.Intn(8)
		if r.Intn(3) == 0 {
			c.MsgLen = 128 + r.Intn(128)
		}
		P := c.Machines * c.GPUs
		switch r.Intn(3) {
		case 0:
			c.Elems = P + r.Intn(64*P)
		case 1:
			c.Elems = P + r.Intn(20_000)
		default:
			c.Elems = 50_000 + r.Intn(250_000)
		}
		if c.Racks {
			c.Spines = 1 + r.Intn(3)
		}
		frames := c.Elems*c.DType.Size()/c.MTU + 1
		for range r.Intn(maxBoundedEvents + 1) {
			if c.Racks && r.Intn(2) == 0 {
				leaf, spine := fmt.Sprintf("leaf%d", r.Intn(2)), fmt.Sprintf("spine%d", r.Intn(c.Spines))
				link := leaf + "-" + spine
				if r.Intn(2) == 0 {
					link = spine + "-" + leaf
				}
				var ops []wire.Opcode // where pn's NetReduce rings have their tree
				if c.Mode == "pn" && spine == "spine0" {
					ops = []wire.Opcode{wire.OpINAPartial, wire.OpINANotify}
					if strings.HasPrefix(link, "spine") {
						ops = []wire.Opcode{wire.OpINATotal, wire.OpINANotify}
					}
				}
				c.Events = append(c.Events, genLinkEvent(r, link, frames, c.Timeout, ops))
				continue
			}
			c.Events = append(c.Events, genFaultEvent(r, c.Machines, frames, c.Timeout, faultKinds))
		}
		// Forgeries of a machine's frame by another machine's host: its
		// ring's WRITEs, or pn's aggregation packets.
		for range r.Intn(3) {
			from, port := r.Intn(c.Machines), r.Intn(c.Machines)
			if from != port {
				c.Events = append(c.Events, fmt.Sprintf("spoof=%d port=%d dir=in class=data nth=%d", from, port, 1+r.Intn(frames)))
			}
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// runSchemeCase: "" when every GPU ends with the scheme's sum (its
// schedule is bounded, so it must end), else why not.
func runSchemeCase(c schemeCase) aggOutcome {
	res, out := runExact(c.scenario())
	if out.fail == "" && (res.Workers != c.Machines*c.GPUs || res.Mode != c.Mode) {
		return aggOutcome{fail: "setup", detail: fmt.Sprintf("ran %s on %d GPUs", res.Mode, res.Workers)}
	}
	return out
}

// SchemesSuite checks, for generated fr, pn, pr and ta jobs over
// multi-GPU machines with faults on their links, that every GPU ends with
// the sum in the scheme's order, bit for bit.
func SchemesSuite(o SuiteOptions) []PropertyResult {
	if o.DUT != nil {
		return []PropertyResult{skipped("schemes/exact", "needs the emulator's multi-GPU machines and their intra-machine interconnect")}
	}
	return exactSuite(o, "schemes", "schemes/exact", fitted(schemeCaseGen, (*schemeCase).fit, o), runSchemeCase, shrinkScheme, schemeCase.scenario, nil)
}

// shrinkScheme makes a failing case smaller while it fails the same way:
// fewer faults, fewer elements (at least one per GPU), shorter messages,
// smaller windows, fewer spines.
func shrinkScheme(c schemeCase, out aggOutcome) (schemeCase, aggOutcome) {
	shrinkCase(&c, 200, failsAs(runSchemeCase, &out), func(try func(schemeCase) bool) bool {
		changed := dropEachEvent(c.Events, func(fewer []string) bool {
			d := c
			d.Events = fewer
			return try(d)
		})
		return tryEach(c, try,
			func(d *schemeCase) bool { d.Elems /= 2; return d.Elems >= d.Machines*d.GPUs },
			func(d *schemeCase) bool { d.MsgLen /= 2; return d.MsgLen >= 1 },
			func(d *schemeCase) bool { d.Window--; return d.Window >= 1 },
			func(d *schemeCase) bool { d.Spines--; return d.Racks && d.Spines >= 1 },
		) || changed
	})
	return c, out
}
