package netreduce

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/inaemu/inaemu/emu/switching"
)

// The control plane: a NetReduce job's ring set up on the switches its
// ranks are under, through whichever program aggregates (RingHost). One
// switch holds a ring whose ranks are all under it; ranks under several
// leaves make a two-tier tree (tree.go) on those leaves and a spine
// linked to each.

// Fabric is what the control plane asks of the network the ranks are in
// (emu/fabric's Fabric answers it).
type Fabric interface {
	// SwitchLink is the ports by which a and b are linked, if they are.
	SwitchLink(a, b *switching.Switch) (pa, pb int, ok bool)
	// Trunks are s's ports to other switches.
	Trunks(s *switching.Switch) []int
	// SwitchIndex is s's place among the fabric's switches.
	SwitchIndex(s *switching.Switch) int
}

// Placement is a ring to set up and where its ranks are.
type Placement struct {
	Job     string // the job, for messages
	Tenants bool   // several jobs share the fabric: a switch's refusal names the job
	Program string // the switch program that aggregates ("": ProgramName)
	// Ring is the ring with its connections filled in, each with the
	// port of its rank's switch (ID is chosen here).
	Ring RingConfig
	// Switches are, per rank, the switch its NIC is attached to.
	Switches []*switching.Switch
	// All are the fabric's switches, among which a spine is sought.
	All    []*switching.Switch
	Fabric Fabric
}

// Member is one switch of an installed ring.
type Member struct {
	Switch      *switching.Switch
	Role        Role
	Ranks       []int // a leaf's local ranks
	MemoryBytes int64
}

// Installed is a ring as it was set up.
type Installed struct {
	ID uint8
	// Groups are the ranks each aggregating switch sums, in the tree's
	// order: the result is each group's sum in rank order, then the
	// groups' in this order (one switch: one group of every rank).
	Groups [][]int
	// Members are the ring's switch (Role Single), or a tree's spine
	// then its leaves in the tree's order.
	Members     []Member
	MemoryBytes int64 // on all its switches
}

// Host is the RingHost of the program registered as program on sw,
// installing the program there on first use.
func Host(sw *switching.Switch, program string) (RingHost, error) {
	program = cmp.Or(program, ProgramName)
	p, err := sw.Program(program)
	if err != nil {
		return nil, err
	}
	h, ok := p.(RingHost)
	if !ok {
		return nil, fmt.Errorf("switch program %s does not aggregate NetReduce rings", program)
	}
	return h, nil
}

// AddRing sets ring cfg up on sw's program (see Host).
func AddRing(sw *switching.Switch, program string, cfg RingConfig) error {
	h, err := Host(sw, program)
	if err != nil {
		return err
	}
	return h.AddRing(cfg)
}

// RingStatsOn is ring id's counters on sw's program, if it runs it and
// counts per ring (RingCounter).
func RingStatsOn(sw *switching.Switch, program string, id uint8) (Stats, bool) {
	if c, ok := sw.Installed(cmp.Or(program, ProgramName)).(RingCounter); ok {
		return c.RingStats(id)
	}
	return Stats{}, false
}

// CTTOn is ring id's Connection Translation Table on sw's program, if it
// keeps one (CTTHolder).
func CTTOn(sw *switching.Switch, program string, id uint8) []CTTEntry {
	if c, ok := sw.Installed(cmp.Or(program, ProgramName)).(CTTHolder); ok {
		return c.CTT(id)
	}
	return nil
}

// Install sets the ring up: on the one switch every rank is under, or,
// when the ranks sit under several leaves, on those leaves and the spine
// that joins them (multi-rack aggregation, tree.go).
func Install(p Placement) (Installed, error) {
	var leaves []*switching.Switch // in the order of their lowest rank: the tree's order
	for _, s := range p.Switches {
		if !slices.Contains(leaves, s) {
			leaves = append(leaves, s)
		}
	}
	if len(leaves) > 1 {
		return p.installTree(leaves)
	}
	sw := leaves[0]
	id, ok, err := p.freeRingID(leaves)
	if err != nil {
		return Installed{}, err
	}
	if !ok {
		return Installed{}, fmt.Errorf("job %s: switch %s already holds 256 rings", p.Job, sw.Name)
	}
	ring := p.Ring
	ring.ID = id
	if err := p.add(sw, ring); err != nil {
		return Installed{}, err
	}
	all := make([]int, len(p.Switches))
	for i := range all {
		all[i] = i
	}
	m := p.memory(sw, ring)
	return Installed{ID: id, Groups: [][]int{all}, Members: []Member{{Switch: sw, Role: Single, MemoryBytes: m}}, MemoryBytes: m}, nil
}

// add sets ring up on sw's program; a refusal names the job when
// several share the fabric.
func (p *Placement) add(sw *switching.Switch, ring RingConfig) error {
	h, err := Host(sw, p.Program)
	if err == nil {
		err = h.AddRing(ring)
	}
	if err != nil && p.Tenants {
		return fmt.Errorf("job %s: %w", p.Job, err)
	}
	return err
}

// memory is what ring takes on sw's program: its own figure
// (RingMemory), else the aggregator array's.
func (p *Placement) memory(sw *switching.Switch, ring RingConfig) int64 {
	if h, err := Host(sw, p.Program); err == nil {
		if m, ok := h.(RingMemory); ok {
			return m.RingMemoryBytes(ring)
		}
	}
	return ring.MemoryBytes()
}

// freeRingID is the lowest RingID no switch of sws holds.
func (p *Placement) freeRingID(sws []*switching.Switch) (uint8, bool, error) {
	hosts := make([]RingHost, len(sws))
	for i, s := range sws {
		h, err := Host(s, p.Program)
		if err != nil {
			return 0, false, err
		}
		hosts[i] = h
	}
	for id := 0; id < 256; id++ {
		free := true
		for _, h := range hosts {
			free = free && !h.HasRing(uint8(id))
		}
		if free {
			return uint8(id), true, nil
		}
	}
	return 0, false, nil
}

// SwitchNode is a switch's end of multi-rack NetReduce's virtual
// connections: a locally administered MAC 02:1a:e5:00:i and 10.255.i,
// i its place among the fabric's switches plus one (host NICs have
// 02:1a:e0:… and 10.P.…, P a NIC's port).
func SwitchNode(f Fabric, s *switching.Switch) Node {
	i := f.SwitchIndex(s) + 1
	return Node{Name: s.Name, MAC: [6]byte{0x02, 0x1A, 0xE5, 0, byte(i >> 8), byte(i)}, IP: netip.AddrFrom4([4]byte{10, 255, byte(i >> 8), byte(i)})}
}

// installTree sets a multi-rack ring up: the spine (a switch linked to
// every leaf) aggregates the leaves' partials, in the leaves' order; each
// leaf its local ranks. Routes carry the virtual connections: a leaf's
// uplink to the spine and the other leaves, the spine's downlinks.
func (p *Placement) installTree(leaves []*switching.Switch) (Installed, error) {
	ring, f := p.Ring, p.Fabric
	var spine *switching.Switch
	up, down := make([]int, len(leaves)), make([]int, len(leaves))
	for _, s := range p.All {
		if slices.Contains(leaves, s) {
			continue
		}
		ok := true
		for li, l := range leaves {
			var linked bool
			up[li], down[li], linked = f.SwitchLink(l, s)
			ok = ok && linked
		}
		if ok {
			spine = s
			break
		}
	}
	names := make([]string, len(leaves))
	for i, l := range leaves {
		names[i] = l.Name
	}
	if spine == nil {
		return Installed{}, fmt.Errorf("job %s: the ranks are under switches %s, and no switch is linked to all of them: multi-rack NetReduce aggregates on two tiers (leaves and a spine linked to each)", p.Job, strings.Join(names, ", "))
	}
	id, ok, err := p.freeRingID(append([]*switching.Switch{spine}, leaves...))
	if err != nil {
		return Installed{}, err
	}
	if !ok {
		return Installed{}, fmt.Errorf("job %s: no RingID is free on all of %s and %s", p.Job, strings.Join(names, ", "), spine.Name)
	}
	ring.ID = id
	in := Installed{ID: id}
	leafOf := make([]int, len(p.Switches))
	in.Groups = make([][]int, len(leaves))
	for i, s := range p.Switches {
		leafOf[i] = slices.Index(leaves, s)
		in.Groups[leafOf[i]] = append(in.Groups[leafOf[i]], i)
	}
	spineNode := SwitchNode(f, spine)
	children := make([]Node, len(leaves))
	for i, l := range leaves {
		children[i] = SwitchNode(f, l)
		spine.Route(children[i].MAC, []int{down[i]})
	}
	sc := RingConfig{ID: id, Workers: len(leaves), Window: ring.Window, MsgLen: ring.MsgLen, MTU: ring.MTU, DType: ring.DType, Release: ring.Release,
		TClass: ring.TClass, Tree: &Tree{Role: Spine, Self: spineNode, Children: children, ChildPorts: down, Trunks: f.Trunks(spine)}}
	if err := p.add(spine, sc); err != nil {
		return Installed{}, err
	}
	in.MemoryBytes = p.memory(spine, sc)
	in.Members = append(in.Members, Member{Switch: spine, Role: Spine, MemoryBytes: in.MemoryBytes})
	n := len(p.Switches)
	for li, l := range leaves {
		lc := ring
		lc.Conns = slices.Clone(ring.Conns)
		for i := range lc.Conns {
			c := &lc.Conns[i]
			c.Remote = leafOf[i] != li
			if c.Remote {
				c.Port = AnyPort
			}
			c.LocalDst = leafOf[(i+1)%n] == li
			c.Peer = children[leafOf[(i+1)%n]]
		}
		lc.Tree = &Tree{Role: Leaf, Self: children[li], Parent: spineNode, ParentPort: up[li], Child: li, Trunks: f.Trunks(l)}
		if err := p.add(l, lc); err != nil {
			return Installed{}, err
		}
		l.Route(spineNode.MAC, []int{up[li]})
		for k, other := range children {
			if k != li {
				l.Route(other.MAC, []int{up[li]})
			}
		}
		lm := p.memory(l, lc)
		in.MemoryBytes += lm
		in.Members = append(in.Members, Member{Switch: l, Role: Leaf, Ranks: in.Groups[li], MemoryBytes: lm})
	}
	return in, nil
}
