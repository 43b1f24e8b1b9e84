package conformance

import (
	"fmt"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames/wire"
)

// multiRackCase is a NetReduce job whose ranks sit under several leaves
// of a spine-leaf fabric (one spine), with one-shot faults on any of its
// links: the ranks' host links both ways, and every leaf's uplink and
// downlink, where they may aim at the switch-to-switch partials, totals
// or notifications by their QPN.
type multiRackCase struct {
	Seed            uint64
	Leaves, PerLeaf int
	Uplink          string // the uplinks' rate: PerLeaf×10G
	MTU, Timeout    int
	Job             tenantJob // Hosts: rank r on host Hosts[r]
	Events          []string
}

func (c multiRackCase) String() string {
	return fmt.Sprintf("spine-leaf %d×%d uplink=%s mtu=%d timeout=%d seed=%d job=%+v faults=%q", c.Leaves, c.PerLeaf, c.Uplink, c.MTU, c.Timeout, c.Seed, c.Job, c.Events)
}

func (c multiRackCase) scenario() *scenario.Scenario {
	seed, mtu, to := c.Seed, c.MTU, c.Timeout
	return &scenario.Scenario{MTU: &mtu, Seed: &seed, Timeout: &to, Mode: "netreduce", MaxTime: "120s",
		Topology: &topo.Spec{Kind: "spine-leaf", Leaves: c.Leaves, HostsPerLeaf: c.PerLeaf, Spines: 1, Uplink: c.Uplink},
		Jobs:     []scenario.Job{c.Job.job("j")}, Faults: append([]string(nil), c.Events...)}
}

// multiRackKinds are the fault kinds on switch-to-switch links (a spoof
// names host ports, so it goes on host links only).
var multiRackKinds = []string{"drop", "dup", "corrupt", "delay", "long-delay", "hold", "long-hold"}

// multiRackCaseGen draws 2-4 leaves of 1-3 hosts, a job of 2-8 ranks on
// random hosts spanning at least two leaves (in random order, so the
// tree's order is not the ranks'), messages long (the papers' 128-255
// packets) or short, window 1-4, any dtype and MTU, a default or short
// ACK timeout, and up to six one-shot faults of every kind, each on a
// host link of a rank (genFaultEvent) or on a leaf's uplink or downlink
// (any frame class, or the partials', totals' or notifications' QPN);
// and up to three forgeries of a rank's frame by a host under another
// leaf.
func multiRackCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := multiRackCase{Seed: seed, Leaves: 2 + r.Intn(3), PerLeaf: 1 + r.Intn(3), MTU: mtus[r.Intn(len(mtus))], Timeout: timeouts[r.Intn(len(timeouts))]}
		// Non-blocking uplinks (§3.3's setting). Oversubscribed ones are
		// left out: there, go-back-N bursts of several local ranks (each
		// re-sent packet a re-sent partial or result on the one uplink)
		// under an ACK timeout shorter than a window's transmission can
		// keep the uplink's queue full and starve a result for good, as
		// a flat network without congestion control would.
		c.Uplink = fmt.Sprintf("%dG", 10*c.PerLeaf)
		hosts := c.Leaves * c.PerLeaf
		var ranks []int
		for {
			perm := r.Perm(hosts)
			ranks = perm[:2+r.Intn(min(hosts, 8)-1)]
			if ranks[0]/c.PerLeaf != ranks[1]/c.PerLeaf || spansLeaves(ranks, c.PerLeaf) {
				break
			}
		}
		c.Job = genTenantJob(r, ranks, c.MTU)
		frames := c.Job.Elems*c.Job.DType.Size()/c.MTU + 1
		for range r.Intn(maxBoundedEvents + 1) {
			if r.Intn(2) == 0 {
				c.Events = append(c.Events, onHostsOf(genFaultEvent(r, len(ranks), frames, c.Timeout, faultKinds), ranks))
				continue
			}
			c.Events = append(c.Events, genUplinkEvent(r, c.Leaves, frames, c.Timeout, true))
		}
		// A forgery across racks: a rank's frame entering another leaf by
		// a host there (a leaf knows the ring's other connections too).
		for range r.Intn(4) {
			a, b := ranks[r.Intn(len(ranks))], ranks[r.Intn(len(ranks))]
			if a/c.PerLeaf != b/c.PerLeaf {
				c.Events = append(c.Events, fmt.Sprintf("spoof=%d port=%d dir=in class=data nth=%d", a, b, 1+r.Intn(frames)))
			}
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// genUplinkEvent draws one one-shot event on a leaf's uplink or downlink
// (one spine), at any frame class or, with tree, at the partials',
// totals' or notifications' QPN of ring 0, anywhere in a job whose links
// carry about frames frames each way.
func genUplinkEvent(r interface{ Intn(int) int }, leaves, frames, timeout int, tree bool) string {
	leaf := fmt.Sprintf("leaf%d", r.Intn(leaves))
	link := leaf + "-spine0"
	if r.Intn(2) == 0 {
		link = "spine0-" + leaf
	}
	target := "class=" + []string{"data", "ack", "nak", "any"}[r.Intn(4)]
	if tree && r.Intn(2) == 0 {
		op := []wire.Opcode{wire.OpINAPartial, wire.OpINATotal, wire.OpINANotify}[r.Intn(3)]
		target = fmt.Sprintf("qp=%#x", netreduce.TreeQPN(op, 0))
	}
	ev := genFaultEvent(r, 1, frames, timeout, multiRackKinds) // "ACT port=0 dir=D class=C nth=N"
	var act string
	fmt.Sscanf(ev, "%s", &act)
	nth := 1 + r.Intn(frames)
	if r.Intn(3) == 0 {
		nth = 1 + r.Intn(min(frames, 40)+1)
	}
	return fmt.Sprintf("%s link=%s %s nth=%d", act, link, target, nth)
}

func spansLeaves(ranks []int, perLeaf int) bool {
	for _, h := range ranks[1:] {
		if h/perLeaf != ranks[0]/perLeaf {
			return true
		}
	}
	return false
}

// runMultiRackCase: "" when the job ends exact (its schedule is bounded,
// so it must end), else why not.
func runMultiRackCase(c multiRackCase) aggOutcome {
	res, out := runExact(c.scenario())
	if out.fail == "" && (res.Jobs[0].Ring == nil || len(res.Jobs[0].Ring.Tree) == 0) {
		return aggOutcome{fail: "setup", detail: "the job did not aggregate across racks"}
	}
	return out
}

// MultiRackSuite checks, for generated multi-rack NetReduce jobs with
// faults on every kind of link (host links, leaf uplinks and downlinks,
// aimed at data, ACKs, NAKs or the switch-to-switch frames), that the job
// ends with the tree-order sum, bit for bit.
func MultiRackSuite(o SuiteOptions) []PropertyResult {
	if o.DUT != nil {
		return []PropertyResult{skipped("multirack/exact", "needs a spine-leaf network of switches; a device under test is one switch")}
	}
	return exactSuite(o, "multirack", "multirack/exact", multiRackCaseGen, runMultiRackCase, shrinkMultiRack, multiRackCase.scenario, nil)
}

// shrinkMultiRack makes a failing case smaller while it fails the same
// way: fewer faults, fewer elements, shorter messages, smaller windows.
func shrinkMultiRack(c multiRackCase, out aggOutcome) (multiRackCase, aggOutcome) {
	shrinkCase(&c, 200, failsAs(runMultiRackCase, &out), func(try func(multiRackCase) bool) bool {
		changed := dropEachEvent(c.Events, func(fewer []string) bool {
			d := c
			d.Events = fewer
			return try(d)
		})
		for _, shrink := range jobShrinks {
			d := c
			if shrink(&d.Job) && try(d) {
				changed = true
			}
		}
		return changed
	})
	return c, out
}
