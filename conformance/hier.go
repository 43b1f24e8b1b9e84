package conformance

import (
	"fmt"
	"strings"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/tensor"
)

// The hier suite (issue 37): generated hierarchical all-reduces (mode
// hier, docs/themis.md) on dims fabrics of 2-3 dimensions of 2-4 hosts
// each, every dimension a ring, a full mesh or a switch, the tensor in
// 1-8 chunks scheduled by the baseline or Themis and served FIFO or SCF,
// with one-shot faults of every kind on any direction of any link of any
// dimension. What must hold: every rank ends with every element summed
// in the order its chunk's schedule defines, bit for bit.

// hierSuiteDim is one dimension of a case's fabric.
type hierSuiteDim struct {
	Kind string // ring, fc or switch
	Size int
}

// hierSuiteCase is one hier job.
type hierSuiteCase struct {
	Seed          uint64
	Dims          []hierSuiteDim
	Chunks        int
	Scheduler     string // baseline or themis
	Policy        string // fifo or scf
	MTU, Timeout  int
	MsgLen, Elems int
	DType         tensor.DType
	Events        []string
}

func (c hierSuiteCase) String() string {
	return fmt.Sprintf("dims:%s chunks=%d scheduler=%s policy=%s mtu=%d timeout=%d msg_len=%d elems=%d dtype=%s seed=%d faults=%q",
		c.flag(), c.Chunks, c.Scheduler, c.Policy, c.MTU, c.Timeout, c.MsgLen, c.Elems, c.DType, c.Seed, c.Events)
}

// flag is the fabric as --topology writes it, without "dims:".
func (c hierSuiteCase) flag() string {
	sz, kinds := make([]string, len(c.Dims)), make([]string, len(c.Dims))
	for i, d := range c.Dims {
		sz[i], kinds[i] = fmt.Sprint(d.Size), d.Kind
	}
	return strings.Join(sz, "x") + ",kinds=" + strings.Join(kinds, "/")
}

func (c hierSuiteCase) hosts() int {
	n := 1
	for _, d := range c.Dims {
		n *= d.Size
	}
	return n
}

func (c hierSuiteCase) spec() *topo.Spec {
	s := &topo.Spec{Kind: "dims"}
	for _, d := range c.Dims {
		s.Dims = append(s.Dims, topo.DimSpec{Size: d.Size, Kind: d.Kind})
	}
	return s
}

func (c hierSuiteCase) scenario() *scenario.Scenario {
	seed, mtu, to, w, l, ch := c.Seed, c.MTU, c.Timeout, c.hosts(), c.MsgLen, c.Chunks
	return &scenario.Scenario{Workers: &w, MTU: &mtu, Seed: &seed, Timeout: &to, MsgLen: &l, Mode: "hier", MaxTime: "120s",
		Chunks: &ch, Scheduler: c.Scheduler, Policy: c.Policy, Topology: c.spec(),
		Tensor: fmt.Sprint(c.Elems * c.DType.Size()), DType: c.DType.String(), Faults: append([]string(nil), c.Events...)}
}

// hierLinks are the directions of every link of the case's fabric, by
// name (h0-h1, h1-d1s0, ...).
func (c hierSuiteCase) hierLinks() []string {
	t, err := c.spec().Build(topo.LinkParams{Rate: 10e9})
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range t.Links {
		out = append(out, l.AB, l.BA)
	}
	return out
}

// hierCaseGen draws 2-3 dimensions of 2-4 hosts, each a ring, a full mesh
// or a switch (a switch's size a power of two: halving-doubling needs
// it), 1-8 chunks, a scheduler and a policy, any dtype and MTU, short or
// long messages, tensors from one element per rank and chunk to some
// hundred thousand, a default or short ACK timeout, and up to six one-shot
// faults of every kind that keeps a link's frames (drop, duplicate,
// corrupt, delay, hold, short or long) on any direction of any link.
func hierCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := hierSuiteCase{Seed: seed, Chunks: 1 + r.Intn(8), Scheduler: []string{"baseline", "themis"}[r.Intn(2)],
			Policy: []string{"fifo", "scf"}[r.Intn(2)], MTU: mtus[r.Intn(len(mtus))], Timeout: timeouts[r.Intn(len(timeouts))],
			DType: []tensor.DType{tensor.F32, tensor.I32, tensor.F16}[r.Intn(3)], MsgLen: 1 + r.Intn(8)}
		for range 2 + r.Intn(2) {
			d := hierSuiteDim{Kind: []string{"ring", "fc", "switch"}[r.Intn(3)], Size: 2 + r.Intn(3)}
			if d.Kind == "switch" && d.Size == 3 {
				d.Size = []int{2, 4}[r.Intn(2)]
			}
			c.Dims = append(c.Dims, d)
		}
		if r.Intn(3) == 0 {
			c.MsgLen = 64 + r.Intn(128)
		}
		P := c.hosts() * c.Chunks
		switch r.Intn(3) {
		case 0:
			c.Elems = P + r.Intn(8*P)
		case 1:
			c.Elems = P + r.Intn(20_000)
		default:
			c.Elems = 50_000 + r.Intn(150_000)
		}
		links := c.hierLinks()
		// Frames a link direction carries, about: an all-reduce sends
		// twice the tensor per rank over all its dimensions.
		frames := 2*c.Elems*c.DType.Size()/(c.MTU*len(c.Dims)) + 1
		for range r.Intn(maxBoundedEvents + 1) {
			c.Events = append(c.Events, genLinkEvent(r, links[r.Intn(len(links))], frames, c.Timeout, nil))
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// runHierSuiteCase: "" when every rank ends exact (its schedule is
// bounded, so it must end), else why not.
func runHierSuiteCase(c hierSuiteCase) aggOutcome {
	res, out := runExact(c.scenario())
	if out.fail == "" && (res.Workers != c.hosts() || res.Mode != "hier") {
		return aggOutcome{fail: "setup", detail: fmt.Sprintf("ran %s on %d ranks", res.Mode, res.Workers)}
	}
	return out
}

// HierSuite checks, for generated hierarchical all-reduces on dims
// fabrics with faults on their links, that every rank ends with every
// element summed in its schedule's order, bit for bit.
func HierSuite(o SuiteOptions) []PropertyResult {
	if o.DUT != nil {
		return []PropertyResult{skipped("hier/exact", "needs the emulator's dims fabrics: several switches and host-to-host links")}
	}
	return exactSuite(o, "hier", "hier/exact", hierCaseGen, runHierSuiteCase, shrinkHier, hierSuiteCase.scenario, nil)
}

// shrinkHier makes a failing case smaller while it fails the same way:
// fewer faults, fewer elements (at least one per rank and chunk), fewer
// chunks, shorter messages.
func shrinkHier(c hierSuiteCase, out aggOutcome) (hierSuiteCase, aggOutcome) {
	shrinkCase(&c, 200, failsAs(runHierSuiteCase, &out), func(try func(hierSuiteCase) bool) bool {
		changed := dropEachEvent(c.Events, func(fewer []string) bool {
			d := c
			d.Events = fewer
			return try(d)
		})
		return tryEach(c, try,
			func(d *hierSuiteCase) bool { d.Elems /= 2; return d.Elems >= d.hosts()*d.Chunks },
			func(d *hierSuiteCase) bool { d.Chunks--; return d.Chunks >= 1 },
			func(d *hierSuiteCase) bool { d.MsgLen /= 2; return d.MsgLen >= 1 },
		) || changed
	})
	return c, out
}
