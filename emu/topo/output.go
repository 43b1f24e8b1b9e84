package topo

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/inaemu/inaemu/internal/units"
)

// Description is a topology laid out for JSON: its nodes, links and
// routes.
type Description struct {
	Kind             string      `json:"kind"`
	Oversubscription float64     `json:"oversubscription"`
	Nodes            []NodeInfo  `json:"nodes"`
	Links            []LinkInfo  `json:"links"`
	Routes           []RouteInfo `json:"routes"`
}

// NodeInfo describes a node.
type NodeInfo struct {
	Name      string  `json:"name"`
	Kind      Kind    `json:"kind"`
	GPUs      int     `json:"gpus"`
	IntraGbps float64 `json:"intra_gbps"`
	AlphaNS   int64   `json:"alpha_ns"`
	Links     []int   `json:"links"` // indices into links; a host's i-th is its NIC i
}

// LinkInfo describes a link.
type LinkInfo struct {
	A          string    `json:"a"`
	B          string    `json:"b"`
	RateGbps   float64   `json:"rate_gbps"`
	LatencyNS  int64     `json:"latency_ns"`
	Queue      int       `json:"queue"`      // frames, the default filled in
	Directions [2]string `json:"directions"` // A->B, B->A
	Dim        int       `json:"dim"`
}

// RouteInfo is one switch's next hops towards one host NIC.
type RouteInfo struct {
	Switch   string   `json:"switch"`
	Host     string   `json:"host"`
	NIC      int      `json:"nic"`
	NextHops []string `json:"next_hops"` // the directions leaving the switch
}

// Describe lays the topology and its routes out for JSON.
func (t *Topology) Describe() (*Description, error) {
	r, err := t.Routes()
	if err != nil {
		return nil, err
	}
	d := &Description{Kind: t.Kind, Oversubscription: t.oversub, Nodes: []NodeInfo{}, Links: []LinkInfo{}, Routes: []RouteInfo{}}
	for _, n := range t.Nodes {
		d.Nodes = append(d.Nodes, NodeInfo{Name: n.Name, Kind: n.Kind, GPUs: n.GPUs, IntraGbps: n.Intra.Rate / 1e9, AlphaNS: n.Intra.Alpha.Nanoseconds(), Links: n.Links})
	}
	for _, l := range t.Links {
		d.Links = append(d.Links, LinkInfo{A: l.A, B: l.B, RateGbps: l.Rate / 1e9, LatencyNS: l.Latency.Nanoseconds(), Queue: l.QueueLen(), Directions: [2]string{l.AB, l.BA}, Dim: l.Dim})
	}
	for _, s := range t.Switches() {
		for _, h := range t.Hosts() {
			for nic := range h.Links {
				hops := r.NextHops(s.Name, h.Name, nic)
				if len(hops) == 0 {
					continue
				}
				ri := RouteInfo{Switch: s.Name, Host: h.Name, NIC: nic}
				for _, l := range hops {
					ri.NextHops = append(ri.NextHops, t.Links[l].From(s.Name))
				}
				d.Routes = append(d.Routes, ri)
			}
		}
	}
	return d, nil
}

// MarshalJSON writes Describe's layout.
func (t *Topology) MarshalJSON() ([]byte, error) {
	d, err := t.Describe()
	if err != nil {
		return nil, err
	}
	return json.Marshal(d)
}

// DOT draws the topology for Graphviz: hosts as boxes, switches as
// ellipses, an edge per link (parallel links apart) labelled with its rate
// and latency.
func (t *Topology) DOT() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q {\n", t.Kind)
	for _, n := range t.Nodes {
		shape, label := "ellipse", n.Name
		if n.Kind == KindHost {
			shape = "box"
			if n.GPUs > 0 {
				label = fmt.Sprintf("%s\\n%d GPUs", n.Name, n.GPUs)
			}
		}
		fmt.Fprintf(&b, "\t%q [shape=%s, label=\"%s\"];\n", n.Name, shape, label)
	}
	for _, l := range t.Links {
		fmt.Fprintf(&b, "\t%q -- %q [label=\"%s %v\"];\n", l.A, l.B, units.FormatRate(l.Rate), l.Latency)
	}
	b.WriteString("}\n")
	return b.String()
}
