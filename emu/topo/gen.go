package topo

import (
	"fmt"
	"strconv"
)

// builder collects nodes and links in declaration order.
type builder struct {
	t *Topology
	// pairs counts the links made so far between each unordered node pair,
	// for the parallel links' "#n" suffix.
	pairs map[[2]string]int
}

func newBuilder(kind string) *builder {
	return &builder{t: &Topology{Kind: kind}, pairs: map[[2]string]int{}}
}

func (b *builder) node(name string, k Kind) {
	b.t.Nodes = append(b.t.Nodes, Node{Name: name, Kind: k})
}

// link joins a and z (a first) with the default direction names.
func (b *builder) link(a, z string, p LinkParams, dim int) {
	key := [2]string{min(a, z), max(a, z)}
	suffix := ""
	if n := b.pairs[key]; n > 0 {
		suffix = "#" + strconv.Itoa(n)
	}
	b.pairs[key]++
	b.t.Links = append(b.t.Links, Link{A: a, B: z, LinkParams: p, AB: a + "-" + z + suffix, BA: z + "-" + a + suffix, Dim: dim})
}

func (b *builder) done(oversub float64) (*Topology, error) {
	b.t.oversub = oversub
	if err := b.t.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %v", b.t.Kind, err)
	}
	return b.t, nil
}

func hostName(i int) string { return "h" + strconv.Itoa(i) }

// Star is hosts hosts h0.. on one switch s0, every link l. Nodes are the
// hosts then s0; link r joins hR (A) to s0, its directions named portR-in
// (towards the switch) and portR-out.
func Star(hosts int, l LinkParams) (*Topology, error) {
	if hosts < 1 || hosts > MaxHosts {
		return nil, fmt.Errorf("star: hosts %d: want 1..%d", hosts, MaxHosts)
	}
	b := newBuilder("star")
	for r := range hosts {
		b.node(hostName(r), KindHost)
	}
	b.node("s0", KindSwitch)
	for r := range hosts {
		p := "port" + strconv.Itoa(r)
		b.t.Links = append(b.t.Links, Link{A: hostName(r), B: "s0", LinkParams: l, AB: p + "-in", BA: p + "-out"})
	}
	return b.done(1)
}

// SpineLeaf is a two-tier Clos: leaves × hostsPerLeaf hosts, host i on
// leaf i/hostsPerLeaf over a host link, and every leaf joined to each of
// spines spines by an uplink. Nodes are hosts, then leaf0.., then
// spine0..; links are the host links by host, then the uplinks by leaf and
// spine.
func SpineLeaf(leaves, hostsPerLeaf, spines int, host, uplink LinkParams) (*Topology, error) {
	switch {
	case leaves < 1:
		return nil, fmt.Errorf("spine-leaf: leaves %d: want 1 or more", leaves)
	case hostsPerLeaf < 1:
		return nil, fmt.Errorf("spine-leaf: hosts per leaf %d: want 1 or more", hostsPerLeaf)
	case spines < 1:
		return nil, fmt.Errorf("spine-leaf: spines %d: want 1 or more", spines)
	case leaves > MaxHosts || hostsPerLeaf > MaxHosts || leaves*hostsPerLeaf > MaxHosts:
		return nil, fmt.Errorf("spine-leaf: %d leaves × %d hosts: want at most %d hosts", leaves, hostsPerLeaf, MaxHosts)
	case spines > MaxHosts: // no real fabric comes near; this only keeps a typo from building a huge graph
		return nil, fmt.Errorf("spine-leaf: spines %d: want at most %d", spines, MaxHosts)
	}
	b := newBuilder("spine-leaf")
	leaf := func(i int) string { return "leaf" + strconv.Itoa(i) }
	spine := func(i int) string { return "spine" + strconv.Itoa(i) }
	for i := range leaves * hostsPerLeaf {
		b.node(hostName(i), KindHost)
	}
	for i := range leaves {
		b.node(leaf(i), KindSwitch)
	}
	for i := range spines {
		b.node(spine(i), KindSwitch)
	}
	for i := range leaves * hostsPerLeaf {
		b.link(hostName(i), leaf(i/hostsPerLeaf), host, 0)
	}
	for l := range leaves {
		for s := range spines {
			b.link(leaf(l), spine(s), uplink, 0)
		}
	}
	return b.done(host.Rate * float64(hostsPerLeaf) / (uplink.Rate * float64(spines)))
}

// Dim is one dimension of a Dims topology.
type Dim struct {
	Size int    // hosts along the dimension
	Kind string // ring, fc (full mesh) or switch ("" is switch)
	LinkParams
	LinksPerHost int // parallel links per neighbour pair or per host and switch; 0 means 1
}

// Dims is a multi-dimensional topology of P1×…×PD hosts (Pd the Size of
// dims[d-1]). Host h has coordinates (c1, …, cD) in mixed radix with
// dimension 1 varying fastest: h = c1 + P1·(c2 + P2·(c3 + …)), so h1 is
// h0's neighbour in dimension 1 and hP1 in dimension 2. Dimension d groups
// the hosts that differ only in cd; groups are numbered in the order of
// their smallest host. Within each group:
//
//   - ring: the host at cd links to the one at (cd+1) mod Pd (one pair for
//     Pd = 2, none for Pd = 1);
//   - fc: every pair of hosts is linked;
//   - switch: a switch d{d}s{g} for group g, linked to each host.
//
// Each connection is LinksPerHost parallel links; host-host links have
// the lower host as A. Nodes are the hosts, then the switches by dimension
// and group; links go by dimension, group, then host, and carry Dim = d.
func Dims(dims []Dim) (*Topology, error) {
	if len(dims) == 0 {
		return nil, fmt.Errorf("dims: no dimensions")
	}
	hosts := 1
	for i, d := range dims {
		switch {
		case d.Size < 1:
			return nil, fmt.Errorf("dims: dimension %d: size %d: want 1 or more", i+1, d.Size)
		case d.Kind != "ring" && d.Kind != "fc" && d.Kind != "switch" && d.Kind != "":
			return nil, fmt.Errorf("dims: dimension %d: kind %q: want ring, fc or switch", i+1, d.Kind)
		case d.LinksPerHost < 0 || d.LinksPerHost > 64: // 64 keeps a typo from building a huge graph
			return nil, fmt.Errorf("dims: dimension %d: links per host %d: want 1..64", i+1, d.LinksPerHost)
		}
		if hosts *= d.Size; hosts > MaxHosts {
			return nil, fmt.Errorf("dims: %s: more than %d hosts", sizes(dims), MaxHosts)
		}
	}
	b := newBuilder("dims")
	for i := range hosts {
		b.node(hostName(i), KindHost)
	}
	stride := 1 // distance between neighbours of the dimension in host index
	for di, d := range dims {
		n := max(d.LinksPerHost, 1)
		g := 0
		for first := range hosts {
			if first/stride%d.Size != 0 { // not its group's smallest host
				continue
			}
			member := func(c int) string { return hostName(first + c*stride) }
			switch d.Kind {
			case "ring":
				for c := range d.Size {
					if d.Size == 1 || d.Size == 2 && c == 1 { // no self-loop; one pair for two
						continue
					}
					a, z := member(c), member((c+1)%d.Size)
					if c+1 == d.Size {
						a, z = z, a
					}
					for range n {
						b.link(a, z, d.LinkParams, di+1)
					}
				}
			case "fc":
				for i := range d.Size {
					for j := i + 1; j < d.Size; j++ {
						for range n {
							b.link(member(i), member(j), d.LinkParams, di+1)
						}
					}
				}
			default:
				sw := fmt.Sprintf("d%ds%d", di+1, g)
				b.node(sw, KindSwitch)
				for c := range d.Size {
					for range n {
						b.link(member(c), sw, d.LinkParams, di+1)
					}
				}
			}
			g++
		}
		stride *= d.Size
	}
	return b.done(0)
}

func sizes(dims []Dim) string {
	s := ""
	for i, d := range dims {
		if i > 0 {
			s += "x"
		}
		s += strconv.Itoa(d.Size)
	}
	return s
}
