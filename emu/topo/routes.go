package topo

import (
	"slices"
)

// Routes are the shortest paths, in hops, from every switch to every host
// NIC. Paths transit switches only: hosts never forward.
type Routes struct {
	t *Topology
	// dist is the hop count between switches over switch-switch links, by
	// switch Index; -1 where no such path exists.
	dist [][]int
	next map[nicKey][]int
}

type nicKey struct {
	sw   int // switch Index
	host int // host Index
	nic  int
}

// Routes computes the routes. The topology must be valid (Validate's
// error is returned otherwise).
func (t *Topology) Routes() (*Routes, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	sws := t.Switches()
	r := &Routes{t: t, dist: make([][]int, len(sws)), next: map[nicKey][]int{}}
	for i, s := range sws {
		d := make([]int, len(sws))
		for j := range d {
			d[j] = -1
		}
		d[i] = 0
		for q := []*Node{s}; len(q) > 0; q = q[1:] {
			for _, l := range q[0].Links {
				if o := t.peer(q[0], l); o.Kind == KindSwitch && d[o.Index] < 0 {
					d[o.Index] = d[q[0].Index] + 1
					q = append(q, o)
				}
			}
		}
		r.dist[i] = d
	}
	for _, h := range t.Hosts() {
		for nic, l := range h.Links {
			x := t.peer(h, l) // the switch the NIC hangs off, if it is one
			if x.Kind != KindSwitch {
				continue
			}
			for _, s := range sws {
				d := r.dist[s.Index][x.Index]
				var hops []int
				switch {
				case d < 0:
					continue
				case d == 0:
					hops = []int{l}
				default:
					for _, sl := range s.Links {
						if y := t.peer(s, sl); y.Kind == KindSwitch && r.dist[y.Index][x.Index] == d-1 {
							hops = append(hops, sl)
						}
					}
				}
				slices.Sort(hops)
				r.next[nicKey{s.Index, h.Index, nic}] = hops
			}
		}
	}
	return r, nil
}

// peer is the node at the other end of link l from n.
func (t *Topology) peer(n *Node, l int) *Node {
	o, _ := t.Node(t.Links[l].Other(n.Name))
	return o
}

// NextHops are the links (indices into Topology.Links, ascending) by which
// switch sw forwards towards NIC nic of host: those on a shortest path.
// It is empty when no path exists.
func (r *Routes) NextHops(sw, host string, nic int) []int {
	s, ok1 := r.t.Node(sw)
	h, ok2 := r.t.Node(host)
	if !ok1 || !ok2 || s.Kind != KindSwitch || h.Kind != KindHost {
		return nil
	}
	return slices.Clone(r.next[nicKey{s.Index, h.Index, nic}])
}

// HostNICTo is the NIC of src to send to dst by, and the NIC of dst that
// receives: a direct host-host link if there is one (the lowest src NIC),
// else the lowest pair of NICs (by src NIC, then dst NIC) with the
// shortest switch path between them. ok is false when no path exists (and
// for src == dst).
func (r *Routes) HostNICTo(src, dst string) (srcNIC, dstNIC int, ok bool) {
	t := r.t
	s, ok1 := t.Node(src)
	d, ok2 := t.Node(dst)
	if !ok1 || !ok2 || s.Kind != KindHost || d.Kind != KindHost || s == d {
		return 0, 0, false
	}
	for i, l := range s.Links {
		if t.Links[l].Other(src) == dst {
			return i, slices.Index(d.Links, l), true
		}
	}
	best := -1
	for i, l := range s.Links {
		x := t.peer(s, l)
		if x.Kind != KindSwitch {
			continue
		}
		for j, m := range d.Links {
			y := t.peer(d, m)
			if y.Kind != KindSwitch {
				continue
			}
			if h := r.dist[x.Index][y.Index]; h >= 0 && (best < 0 || h < best) {
				best, srcNIC, dstNIC = h, i, j
			}
		}
	}
	return srcNIC, dstNIC, best >= 0
}

// ECMP picks the next hop for a flow: hops[flowHash % len(hops)], so one
// flow keeps one path (no reordering) while flows spread over the equal
// paths. It returns -1 for no hops.
func ECMP(hops []int, flowHash uint32) int {
	if len(hops) == 0 {
		return -1
	}
	return hops[flowHash%uint32(len(hops))]
}

// FlowHash is the hash ECMP takes: 32-bit FNV-1a of b, the flow's fields
// as the caller lays them out (for RoCEv2 the addresses and
// both UDP ports: the source port is what spreads a host's QPs over the
// paths). It is the same on every run and platform.
func FlowHash(b []byte) uint32 { return FlowHashAdd(flowHashBasis, b) }

// FlowHashAdd continues a FlowHash over more of the flow's fields (FNV-1a
// of the fields one after the other). It is written out, not hash/fnv's
// interface, so a switch hashing every frame allocates nothing.
func FlowHashAdd(h uint32, b []byte) uint32 {
	for _, c := range b {
		h = (h ^ uint32(c)) * 16777619
	}
	return h
}

const flowHashBasis = 2166136261 // FNV-1a's 32-bit offset basis

// FloodPorts are the links a broadcast or unknown-unicast frame leaves
// switch sw by (the caller leaves out the one it came in on): every link
// to a host, and sw's links on a spanning tree of the switches, so a flood
// never loops. The tree is a breadth-first search from the first switch in
// node order, each switch joined by the lowest link it is first reached
// by; a switch not reached starts a tree of its own. Links are ascending.
func (t *Topology) FloodPorts(sw string) []int {
	s, ok := t.Node(sw)
	if !ok || s.Kind != KindSwitch {
		return nil
	}
	sws := t.Switches()
	seen := make([]bool, len(sws))
	tree := map[int]bool{}
	for _, root := range sws {
		if seen[root.Index] {
			continue
		}
		seen[root.Index] = true
		for q := []*Node{root}; len(q) > 0; q = q[1:] {
			for _, l := range q[0].Links {
				if o := t.peer(q[0], l); o.Kind == KindSwitch && !seen[o.Index] {
					seen[o.Index], tree[l] = true, true
					q = append(q, o)
				}
			}
		}
	}
	var ports []int
	for _, l := range s.Links {
		if tree[l] || t.peer(s, l).Kind == KindHost {
			ports = append(ports, l)
		}
	}
	return ports
}
