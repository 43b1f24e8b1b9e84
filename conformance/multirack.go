package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

// rackNet is a multi-rack case's fabric: leaves leaf0.. with hosts under
// them (hosts numbered leaf by leaf) and spines spine0.. each linked to
// every leaf. As a spine-leaf every leaf has the same number of hosts; as
// a custom graph leaves may have different numbers, links may join
// leaves directly (two leaves and one spine with a leaf-leaf link are a
// triangle of switches with hosts on two) and the switches are declared
// in any order, so the tree's spine, the first switch declared that is
// linked to every leaf of the job, may be another leaf.
type rackNet struct {
	Custom    bool
	Hosts     []int    // hosts under each leaf
	Spines    int      // switches linked to every leaf
	LeafLinks [][2]int // custom: links between two leaves
	Order     []string // custom: the switches in declaration order
	Uplink    string   // every switch-to-switch link's rate: non-blocking
}

func (n rackNet) String() string {
	if !n.Custom {
		return fmt.Sprintf("spine-leaf %d×%d spines=%d uplink=%s", len(n.Hosts), n.Hosts[0], n.Spines, n.Uplink)
	}
	var ll []string
	for _, l := range n.LeafLinks {
		ll = append(ll, fmt.Sprintf("leaf%d-leaf%d", l[0], l[1]))
	}
	return fmt.Sprintf("custom hosts/leaf=%v spines=%d leaf-links=%v order=%v uplink=%s", n.Hosts, n.Spines, ll, n.Order, n.Uplink)
}

// leafOf is the leaf host h is under.
func (n rackNet) leafOf(h int) int {
	for l, k := range n.Hosts {
		if h < k {
			return l
		}
		h -= k
	}
	return -1
}

func (n rackNet) hostCount() int {
	s := 0
	for _, k := range n.Hosts {
		s += k
	}
	return s
}

// switchOrder is the switches in the order the fabric has them.
func (n rackNet) switchOrder() []string {
	if n.Custom {
		return n.Order
	}
	var o []string
	for l := range n.Hosts {
		o = append(o, fmt.Sprintf("leaf%d", l))
	}
	for s := range n.Spines {
		o = append(o, fmt.Sprintf("spine%d", s))
	}
	return o
}

// trunks are the switch-to-switch links, each as its two ends.
func (n rackNet) trunks() [][2]string {
	var t [][2]string
	for l := range n.Hosts {
		for s := range n.Spines {
			t = append(t, [2]string{fmt.Sprintf("leaf%d", l), fmt.Sprintf("spine%d", s)})
		}
	}
	for _, ll := range n.LeafLinks {
		t = append(t, [2]string{fmt.Sprintf("leaf%d", ll[0]), fmt.Sprintf("leaf%d", ll[1])})
	}
	return t
}

func (n rackNet) spec() *topo.Spec {
	if !n.Custom {
		return &topo.Spec{Kind: "spine-leaf", Leaves: len(n.Hosts), HostsPerLeaf: n.Hosts[0], Spines: n.Spines, Uplink: n.Uplink}
	}
	s := &topo.Spec{Kind: "custom"}
	for _, name := range n.Order {
		s.Switches = append(s.Switches, topo.SwitchSpec{Name: name})
	}
	for h := range n.hostCount() {
		s.Hosts.List = append(s.Hosts.List, topo.HostSpec{Name: fmt.Sprintf("h%d", h)})
		s.Links = append(s.Links, topo.LinkSpec{A: fmt.Sprintf("h%d", h), B: fmt.Sprintf("leaf%d", n.leafOf(h))})
	}
	for _, t := range n.trunks() {
		s.Links = append(s.Links, topo.LinkSpec{A: t[0], B: t[1], Link: n.Uplink})
	}
	return s
}

// tree is the switches a job on hosts aggregates in: its leaves (the
// switches of its ranks, in the order of their lowest rank) and its spine,
// the first switch in the fabric's order that is not one of them and is
// linked to all of them (emu's rule).
func (n rackNet) tree(hosts []int) (spine string, leaves []string) {
	for _, h := range hosts {
		if l := fmt.Sprintf("leaf%d", n.leafOf(h)); !slices.Contains(leaves, l) {
			leaves = append(leaves, l)
		}
	}
	linked := map[[2]string]bool{}
	for _, t := range n.trunks() {
		linked[t], linked[[2]string{t[1], t[0]}] = true, true
	}
	for _, s := range n.switchOrder() {
		if slices.Contains(leaves, s) {
			continue
		}
		all := true
		for _, l := range leaves {
			all = all && linked[[2]string{l, s}]
		}
		if all {
			return s, leaves
		}
	}
	return "", leaves
}

// multiRackCase is a NetReduce job whose ranks sit under several leaves
// of a fabric with one or more paths between them, with one-shot faults
// on any of its links: the ranks' host links both ways, the tree's
// uplinks and downlinks (where they may aim at the switch-to-switch
// partials, totals or notifications by their QPN), and every other
// switch-to-switch direction, which ordinary ring traffic between racks
// takes by ECMP.
type multiRackCase struct {
	Seed         uint64
	Net          rackNet
	MTU, Timeout int
	Job          tenantJob // Hosts: rank r on host Hosts[r]
	Events       []string
	// OpenPorts runs the switches without port security: forgeries then
	// meet the accelerators' own binding of each ring connection to its
	// member's port (a leaf knows the other racks' connections too).
	OpenPorts bool
}

func (c multiRackCase) String() string {
	s := fmt.Sprintf("%s mtu=%d timeout=%d seed=%d job=%+v faults=%q", c.Net, c.MTU, c.Timeout, c.Seed, c.Job, c.Events)
	if c.OpenPorts {
		s += " port-security=off"
	}
	return s
}

func (c multiRackCase) scenario() *scenario.Scenario {
	seed, mtu, to := c.Seed, c.MTU, c.Timeout
	sc := &scenario.Scenario{MTU: &mtu, Seed: &seed, Timeout: &to, Mode: "netreduce", MaxTime: "120s",
		Topology: c.Net.spec(), Jobs: []scenario.Job{c.Job.job("j", 0)}, Faults: append([]string(nil), c.Events...)}
	if c.OpenPorts {
		sc.PortSecurity = "off"
	}
	return sc
}

// multiRackKinds are the fault kinds on switch-to-switch links (a spoof
// names host ports, so it goes on host links only).
var multiRackKinds = []string{"drop", "dup", "corrupt", "delay", "long-delay", "hold", "long-hold"}

// genRackNet draws a fabric: half of the time a spine-leaf of 2-4 leaves
// × 1-4 hosts with 1-3 spines; else a custom graph, half of those the
// triangle (two leaves of 1-4 hosts each, linked to each other and to one
// spine), the rest 2-4 leaves of 1-4 hosts each under 1-3 spines with one
// or more leaf-leaf links; the custom graph's switches in random order.
// Links between switches carry the most hosts a leaf has × 10G.
func genRackNet(r interface {
	Intn(int) int
	Perm(int) []int
}) rackNet {
	var n rackNet
	switch r.Intn(4) {
	case 0, 1:
		per := 1 + r.Intn(4)
		n.Hosts = slices.Repeat([]int{per}, 2+r.Intn(3))
		n.Spines = 1 + r.Intn(3)
	case 2:
		n.Custom, n.Hosts, n.Spines, n.LeafLinks = true, []int{1 + r.Intn(4), 1 + r.Intn(4)}, 1, [][2]int{{0, 1}}
	default:
		n.Custom, n.Spines = true, 1+r.Intn(3)
		for range 2 + r.Intn(3) {
			n.Hosts = append(n.Hosts, 1+r.Intn(4))
		}
		var pairs [][2]int
		for a := range n.Hosts {
			for b := a + 1; b < len(n.Hosts); b++ {
				pairs = append(pairs, [2]int{a, b})
			}
		}
		perm := r.Perm(len(pairs))
		for _, i := range perm[:1+r.Intn(len(pairs))] {
			n.LeafLinks = append(n.LeafLinks, pairs[i])
		}
	}
	n.Uplink = fmt.Sprintf("%dG", 10*slices.Max(n.Hosts))
	if n.Custom {
		var sws []string
		for l := range n.Hosts {
			sws = append(sws, fmt.Sprintf("leaf%d", l))
		}
		for s := range n.Spines {
			sws = append(sws, fmt.Sprintf("spine%d", s))
		}
		for _, i := range r.Perm(len(sws)) {
			n.Order = append(n.Order, sws[i])
		}
	}
	return n
}

// genRackJob draws a multi-rack job on hosts: a third of the time window
// 1 and one-packet messages, 10-300 of them (where a leaf whose ranks got
// a message's results from another leaf's cache has nothing bringing that
// message through it again); else as genTenantJob (the papers' long
// messages or short ones, window 1-4, 2-12 messages).
func genRackJob(r interface{ Intn(int) int }, hosts []int, mtu int) tenantJob {
	if r.Intn(3) != 0 {
		return genTenantJob(r, hosts, mtu)
	}
	j := tenantJob{Hosts: hosts, Window: 1, MsgLen: 1, DType: tensor.DType(r.Intn(3))}
	per := (mtu - 8) / j.DType.Size()
	j.Elems = (9+r.Intn(291))*per + 1 + r.Intn(per)
	return j
}

// multiRackCaseGen draws a fabric (genRackNet), a job of 2-8 ranks on
// random hosts spanning at least two leaves (in random order, so the
// tree's order is not the ranks'; 1-4 ranks under each of its leaves), its
// messages (genRackJob), any MTU, a default or short ACK timeout, and up
// to six one-shot faults of every kind: a quarter on the ranks' host
// links either way (genFaultEvent, forgeries included), half on the
// tree's uplinks and downlinks (genLinkEvent: any frame class, or the
// partials', totals' or notifications' QPN on the links that carry
// them), a quarter on the other switch-to-switch directions (links of
// spines that are not the tree's and between leaves, which ordinary
// traffic between racks takes; the tree's when there are none); and up
// to three forgeries of a rank's frame by another rank's host, under the
// same leaf or another, with port security on or (a quarter of the
// cases) off.
func multiRackCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := multiRackCase{Seed: seed, Net: genRackNet(r), MTU: mtus[r.Intn(len(mtus))], Timeout: timeouts[r.Intn(len(timeouts))]}
		// Non-blocking links between switches (§3.3's setting).
		// Oversubscribed ones are left out: there, go-back-N bursts of
		// several local ranks (each re-sent packet a re-sent partial or
		// result on the one uplink) under an ACK timeout shorter than a
		// window's transmission can keep the uplink's queue full and starve
		// a result for good, as a flat network without congestion control
		// would.
		hosts := c.Net.hostCount()
		var ranks []int
		for {
			perm := r.Perm(hosts)
			ranks = perm[:2+r.Intn(min(hosts, 8)-1)]
			if c.Net.spans(ranks) {
				break
			}
		}
		c.Job = genRackJob(r, ranks, c.MTU)
		frames := c.Job.Elems*c.Job.DType.Size()/c.MTU + 1
		spine, leaves := c.Net.tree(ranks)
		var other []string
		for _, t := range c.Net.trunks() {
			if t[1] == spine && slices.Contains(leaves, t[0]) || t[0] == spine && slices.Contains(leaves, t[1]) {
				continue
			}
			other = append(other, t[0]+"-"+t[1], t[1]+"-"+t[0])
		}
		for range r.Intn(maxBoundedEvents + 1) {
			switch k := r.Intn(4); {
			case k == 0:
				c.Events = append(c.Events, onHostsOf(genFaultEvent(r, len(ranks), frames, c.Timeout, faultKinds), ranks))
			case k <= 2 || len(other) == 0:
				// The tree: a leaf's uplink carries partials and
				// notifications, its downlink totals and notifications.
				leaf := leaves[r.Intn(len(leaves))]
				link, ops := leaf+"-"+spine, []wire.Opcode{wire.OpINAPartial, wire.OpINANotify}
				if r.Intn(2) == 0 {
					link, ops = spine+"-"+leaf, []wire.Opcode{wire.OpINATotal, wire.OpINANotify}
				}
				c.Events = append(c.Events, genLinkEvent(r, link, frames, c.Timeout, ops))
			default:
				c.Events = append(c.Events, genLinkEvent(r, other[r.Intn(len(other))], frames, c.Timeout, nil))
			}
		}
		// Forgeries: a rank's frame entering by another rank's host port,
		// under its own leaf or another (a leaf knows the ring's other
		// connections too), with port security on or, a quarter of the
		// time, off.
		c.OpenPorts = r.Intn(4) == 0
		for range r.Intn(4) {
			if a, b := ranks[r.Intn(len(ranks))], ranks[r.Intn(len(ranks))]; a != b {
				c.Events = append(c.Events, fmt.Sprintf("spoof=%d port=%d dir=in class=data nth=%d", a, b, 1+r.Intn(frames)))
			}
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// spans reports whether hosts sit under two leaves or more.
func (n rackNet) spans(hosts []int) bool {
	for _, h := range hosts[1:] {
		if n.leafOf(h) != n.leafOf(hosts[0]) {
			return true
		}
	}
	return false
}

// genLinkEvent draws one one-shot event on link direction link, anywhere
// in a job whose links carry about frames frames each way: any kind at
// any frame class or, when the link carries switch-to-switch frames of
// ring 0 with opcodes ops, a quarter of the time any kind at one's QPN
// and half of the time its loss (drop or corrupt), which the tree must
// recover from.
func genLinkEvent(r interface{ Intn(int) int }, link string, frames, timeout int, ops []wire.Opcode) string {
	target := "class=" + []string{"data", "ack", "nak", "any"}[r.Intn(4)]
	ev := genFaultEvent(r, 1, frames, timeout, multiRackKinds) // "ACT port=0 dir=D class=C nth=N"
	act, _, _ := strings.Cut(ev, " ")
	if k := r.Intn(4); len(ops) > 0 && k > 0 {
		target = fmt.Sprintf("qp=%#x", netreduce.TreeQPN(ops[r.Intn(len(ops))], 0))
		if k >= 2 {
			act = []string{"drop", "corrupt"}[r.Intn(2)]
		}
	}
	nth := 1 + r.Intn(frames)
	if r.Intn(3) == 0 {
		nth = 1 + r.Intn(min(frames, 40)+1)
	}
	return fmt.Sprintf("%s link=%s %s nth=%d", act, link, target, nth)
}

// runMultiRackCase: "" when the job ends exact (its schedule is bounded,
// so it must end) on the tree the generator aimed its faults at, with
// every forgery and nothing else (but corrupted frames) dropped as one:
// at the host port it entered by (port security) or, with port security
// off, by an accelerator's connection binding (forgeryDrops); else why
// not.
func runMultiRackCase(c multiRackCase) aggOutcome {
	res, out := runExact(c.scenario())
	if out.fail != "" {
		return out
	}
	spine, leaves := c.Net.tree(c.Job.Hosts)
	ring := res.Jobs[0].Ring
	if ring == nil || len(ring.Tree) != 1+len(leaves) || ring.Switch != spine {
		return aggOutcome{fail: "setup", detail: fmt.Sprintf("the job did not aggregate on the tree of spine %s and leaves %v: %+v", spine, leaves, ring)}
	}
	if d := forgeryDrops(res, c.OpenPorts); d != "" {
		return aggOutcome{fail: "forgery", detail: "exact, but " + d}
	}
	return out
}

// MultiRackSuite checks, for generated multi-rack NetReduce jobs on
// fabrics with one or several paths between leaves, with faults on every
// kind of link (host links, the tree's uplinks and downlinks aimed at
// data, ACKs, NAKs or the switch-to-switch frames, every other
// switch-to-switch direction), that the job ends with the tree-order sum,
// bit for bit, and that only forgeries were dropped as forgeries.
func MultiRackSuite(o SuiteOptions) []PropertyResult {
	if o.DUT != nil {
		return []PropertyResult{skipped("multirack/exact", "needs a spine-leaf network of switches; a device under test is one switch")}
	}
	if why := o.noTrees(); why != "" {
		return []PropertyResult{skipped("multirack/exact", why)}
	}
	return exactSuite(o, "multirack", "multirack/exact", multiRackCaseGen, runMultiRackCase, shrinkMultiRack, multiRackCase.scenario,
		func(out aggOutcome) bool { return out.fail != "forgery" }) // a run ends exact then; the suite reads its counters
}

// shrinkMultiRack makes a failing case smaller while it fails the same
// way: fewer faults, fewer ranks (still under two leaves or more), fewer
// elements, shorter messages, smaller windows, fewer spines and
// leaf-leaf links.
func shrinkMultiRack(c multiRackCase, out aggOutcome) (multiRackCase, aggOutcome) {
	shrinkCase(&c, 200, failsAs(runMultiRackCase, &out), func(try func(multiRackCase) bool) bool {
		changed := dropEachEvent(c.Events, func(fewer []string) bool {
			d := c
			d.Events = fewer
			return try(d)
		})
		for i := 0; i < len(c.Job.Hosts) && len(c.Job.Hosts) > 2; i++ {
			d := c
			d.Job.Hosts = slices.Delete(slices.Clone(c.Job.Hosts), i, i+1)
			if d.Net.spans(d.Job.Hosts) && try(d) {
				changed, i = true, i-1
			}
		}
		for _, shrink := range jobShrinks {
			d := c
			if shrink(&d.Job) && try(d) {
				changed = true
			}
		}
		if c.Net.Spines > 1 {
			d := c
			d.Net.Spines--
			d.Net.Order = slices.DeleteFunc(slices.Clone(c.Net.Order), func(s string) bool { return s == fmt.Sprintf("spine%d", d.Net.Spines) })
			if try(d) {
				changed = true
			}
		}
		for i := range c.Net.LeafLinks {
			d := c
			d.Net.LeafLinks = slices.Delete(slices.Clone(c.Net.LeafLinks), i, i+1)
			if try(d) {
				changed = true
				break
			}
		}
		return changed
	})
	return c, out
}
