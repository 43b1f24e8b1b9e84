// Package topo is the emulator's topology graph: hosts and switches joined
// by links, the generators that build the usual shapes (a star, a
// spine-leaf Clos, multi-dimensional rings, full meshes and switch groups),
// the YAML and command-line forms that describe them, and the shortest-path
// routes and flood trees switches forward by. It is pure data: nothing here
// moves a frame.
package topo

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"time"
)

// MaxHosts bounds a topology's hosts as the emulator always has: host r's
// address ends in r+1, which then fits one byte.
const MaxHosts = 250

// MaxGPUs bounds a host's GPUs: a job has at most 64 ranks, so more could
// never all be in one, and a typo (gpus=100000000000) would otherwise size
// a list of that many GPUs before any check of the job.
const MaxGPUs = 64

// DefaultQueue is the egress queue, in frames, of a link whose Queue is 0:
// Linux's default txqueuelen.
const DefaultQueue = 1000

// Kind is what a node is.
type Kind string

// The node kinds.
const (
	KindHost   Kind = "host"
	KindSwitch Kind = "switch"
)

// Node is a host or a switch.
type Node struct {
	// Name is the node's unique name: hosts are h0, h1, ... in every
	// generator, switches s0 (star), leaf0.. and spine0.. (spine-leaf),
	// d1s0.. (dims); a custom topology may use any [A-Za-z0-9_.]+ name.
	Name string
	Kind Kind
	// Index is the node's position among the nodes of its kind in
	// declaration order (h3 is host 3 in every generator). Validate sets
	// it.
	Index int
	// GPUs on a host (0: none). GPUs on one host talk over Intra, not
	// over RoCE.
	GPUs  int
	Intra Intra
	// Links are indices into Topology.Links of the links attached, in
	// attachment (that is, Topology.Links) order; a host's i-th link is its
	// NIC i. Validate sets them.
	Links []int
}

// Intra is a host's interconnect between its own GPUs (NVLink and the
// like), modelled as a rate and a fixed cost per transfer step.
type Intra struct {
	Rate  float64       // bit/s
	Alpha time.Duration // fixed cost of each transfer step
}

// StepTime is how long one transfer step of n bytes takes on the
// interconnect: n*8/Rate + Alpha, rounded to the nanosecond. Without a
// rate only Alpha counts.
func (i Intra) StepTime(n int64) time.Duration {
	if i.Rate <= 0 {
		return i.Alpha
	}
	return time.Duration(math.Round(float64(n)*8/i.Rate*1e9)) + i.Alpha
}

// LinkParams are a link's physical properties, the same both ways.
type LinkParams struct {
	Rate    float64       // bit/s
	Latency time.Duration // one-way propagation delay
	Queue   int           // egress queue at each end, frames (0: DefaultQueue)
}

// QueueLen is the egress queue in frames, DefaultQueue for 0.
func (p LinkParams) QueueLen() int {
	if p.Queue == 0 {
		return DefaultQueue
	}
	return p.Queue
}

// Link is a full-duplex link between two nodes: two directions, each with
// a name that fault events and the capture's interfaces use.
type Link struct {
	A, B string // endpoint node names; on a host-switch link A is the host
	LinkParams
	// AB and BA name the directions A->B and B->A: "A-B" and "B-A" by
	// default, "A-B#1", "A-B#2", ... for the second, third, ... parallel
	// link between the same two nodes; the star's host links are
	// "portR-in" (hR->s0) and "portR-out" (s0->hR).
	AB, BA string
	Dim    int // dims: the (1-based) dimension the link belongs to; 0 otherwise
}

// Other is the end of the link that is not node.
func (l *Link) Other(node string) string {
	if l.A == node {
		return l.B
	}
	return l.A
}

// From is the name of the direction leaving node.
func (l *Link) From(node string) string {
	if l.A == node {
		return l.AB
	}
	return l.BA
}

// Topology is a graph of hosts and switches. Generators and Spec.Build
// return validated topologies; one built by hand must pass Validate, which
// fills in the nodes' Index and Links and the lookup tables, before it is
// used.
type Topology struct {
	Kind  string // star, spine-leaf, dims or custom
	Nodes []Node // in declaration order: the generators put hosts first
	Links []Link

	oversub float64        // see Oversubscription
	byName  map[string]int // node name -> index into Nodes
	dirs    map[string]int // direction name -> 2*link, +1 for B->A
}

// Oversubscription is a spine-leaf's host bandwidth per leaf over its
// uplink bandwidth (host rate × hosts per leaf / (uplink rate × spines)),
// 1 for a star, 0 where the ratio means nothing (dims, custom).
func (t *Topology) Oversubscription() float64 { return t.oversub }

// Node looks a node up by name.
func (t *Topology) Node(name string) (*Node, bool) {
	if t.byName == nil { // not validated yet: look the slow way
		for i := range t.Nodes {
			if t.Nodes[i].Name == name {
				return &t.Nodes[i], true
			}
		}
		return nil, false
	}
	i, ok := t.byName[name]
	if !ok {
		return nil, false
	}
	return &t.Nodes[i], true
}

// Hosts are the host nodes by Index.
func (t *Topology) Hosts() []*Node { return t.ofKind(KindHost) }

// Switches are the switch nodes by Index.
func (t *Topology) Switches() []*Node { return t.ofKind(KindSwitch) }

func (t *Topology) ofKind(k Kind) []*Node {
	var ns []*Node
	for i := range t.Nodes {
		if t.Nodes[i].Kind == k {
			ns = append(ns, &t.Nodes[i])
		}
	}
	return ns
}

// Direction finds a direction by name: its link and whether it runs A->B.
func (t *Topology) Direction(name string) (link int, forward bool, ok bool) {
	if t.dirs == nil {
		for i := range t.Links {
			switch name {
			case t.Links[i].AB:
				return i, true, true
			case t.Links[i].BA:
				return i, false, true
			}
		}
		return 0, false, false
	}
	d, ok := t.dirs[name]
	if !ok {
		return 0, false, false
	}
	return d / 2, d%2 == 0, true
}

// DirectionNames lists every direction: for each link in order, AB then
// BA. This is the order of the capture's interfaces; on the star it is
// port0-in, port0-out, port1-in, port1-out, ...
func (t *Topology) DirectionNames() []string {
	names := make([]string, 0, 2*len(t.Links))
	for i := range t.Links {
		names = append(names, t.Links[i].AB, t.Links[i].BA)
	}
	return names
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9_.]+$`)

// Validate checks the graph and fills in each node's Index and Links and
// the name lookups: names are unique and well formed, links join two
// different existing nodes (a host-switch link with the host as A), rates
// are positive, latencies and queues not negative, direction names unique,
// every node has a link, there are 1..MaxHosts hosts, and the graph is
// connected. It writes nothing to a topology it has validated before (and
// that has not changed since), so goroutines may share a validated
// topology and validate it again.
func (t *Topology) Validate() error {
	byName := make(map[string]int, len(t.Nodes))
	dirs := make(map[string]int, 2*len(t.Links))
	index := make([]int, len(t.Nodes))
	links := make([][]int, len(t.Nodes))
	count := map[Kind]int{}
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if !nameRE.MatchString(n.Name) {
			return fmt.Errorf("node %q: a name is letters, digits, _ and .", n.Name)
		}
		if _, dup := byName[n.Name]; dup {
			return fmt.Errorf("node %q: name used twice", n.Name)
		}
		byName[n.Name] = i
		if n.Kind != KindHost && n.Kind != KindSwitch {
			return fmt.Errorf("node %s: kind %q: want host or switch", n.Name, n.Kind)
		}
		index[i] = count[n.Kind]
		count[n.Kind]++
		switch {
		case n.GPUs < 0 || n.Kind == KindSwitch && n.GPUs != 0:
			return fmt.Errorf("node %s: %d GPUs", n.Name, n.GPUs)
		case n.GPUs > MaxGPUs:
			return fmt.Errorf("node %s: %d GPUs: want at most %d", n.Name, n.GPUs, MaxGPUs)
		case math.IsNaN(n.Intra.Rate) || math.IsInf(n.Intra.Rate, 0) || n.Intra.Rate < 0 || n.Intra.Alpha < 0:
			return fmt.Errorf("node %s: interconnect rate %g, alpha %v", n.Name, n.Intra.Rate, n.Intra.Alpha)
		case n.GPUs > 1 && n.Intra.Rate == 0: // its GPUs could not exchange a byte
			return fmt.Errorf("node %s: %d GPUs need an interconnect rate (intra)", n.Name, n.GPUs)
		}
	}
	if h := count[KindHost]; h < 1 || h > MaxHosts {
		return fmt.Errorf("%d hosts: want 1..%d", h, MaxHosts)
	}
	for i := range t.Links {
		l := &t.Links[i]
		a, okA := byName[l.A]
		b, okB := byName[l.B]
		switch {
		case !okA || !okB:
			missing := l.A
			if okA {
				missing = l.B
			}
			return fmt.Errorf("link %d (%s-%s): no node %q", i, l.A, l.B, missing)
		case a == b:
			return fmt.Errorf("link %d (%s-%s): joins a node to itself", i, l.A, l.B)
		case t.Nodes[a].Kind == KindSwitch && t.Nodes[b].Kind == KindHost:
			return fmt.Errorf("link %d (%s-%s): a host-switch link names the host as a", i, l.A, l.B)
		case !(l.Rate > 0) || math.IsInf(l.Rate, 0):
			return fmt.Errorf("link %d (%s-%s): rate %g: want a positive bit/s", i, l.A, l.B, l.Rate)
		case l.Latency < 0:
			return fmt.Errorf("link %d (%s-%s): negative latency %v", i, l.A, l.B, l.Latency)
		case l.Queue < 0:
			return fmt.Errorf("link %d (%s-%s): queue %d: want 0 (default) or more frames", i, l.A, l.B, l.Queue)
		}
		for k, d := range []string{l.AB, l.BA} {
			if d == "" {
				return fmt.Errorf("link %d (%s-%s): unnamed direction", i, l.A, l.B)
			}
			if _, dup := dirs[d]; dup {
				return fmt.Errorf("link %d (%s-%s): direction name %q used twice", i, l.A, l.B, d)
			}
			dirs[d] = 2*i + k
		}
		links[a] = append(links[a], i)
		links[b] = append(links[b], i)
	}
	for i := range t.Nodes {
		if len(links[i]) == 0 {
			return fmt.Errorf("%s %s has no link", t.Nodes[i].Kind, t.Nodes[i].Name)
		}
	}
	// Connected: a flood from node 0 over every link reaches every node.
	seen := make([]bool, len(t.Nodes))
	seen[0] = true
	for q := []int{0}; len(q) > 0; q = q[1:] {
		for _, li := range links[q[0]] {
			o := byName[t.Links[li].Other(t.Nodes[q[0]].Name)]
			if !seen[o] {
				seen[o] = true
				q = append(q, o)
			}
		}
	}
	for i, ok := range seen {
		if !ok {
			return fmt.Errorf("disconnected: no path from %s to %s", t.Nodes[0].Name, t.Nodes[i].Name)
		}
	}
	if !maps.Equal(byName, t.byName) || !maps.Equal(dirs, t.dirs) {
		t.byName, t.dirs = byName, dirs
	}
	for i := range t.Nodes {
		if n := &t.Nodes[i]; n.Index != index[i] || !slices.Equal(n.Links, links[i]) {
			n.Index, n.Links = index[i], links[i]
		}
	}
	return nil
}
