package topo

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	g10 = LinkParams{Rate: 10e9, Latency: time.Microsecond}
	g20 = LinkParams{Rate: 20e9, Latency: time.Microsecond}
	g40 = LinkParams{Rate: 40e9, Latency: time.Microsecond}
)

func names(t *Topology) []string {
	var ns []string
	for _, n := range t.Nodes {
		ns = append(ns, n.Name)
	}
	return ns
}

// link finds the index of the link whose A->B direction is named ab.
func link(t *testing.T, topo *Topology, ab string) int {
	t.Helper()
	l, fwd, ok := topo.Direction(ab)
	require.True(t, ok && fwd, ab)
	return l
}

func TestStar(t *testing.T) {
	s, err := Star(3, g10)
	require.NoError(t, err)
	assert.Equal(t, "star", s.Kind)
	assert.Equal(t, []string{"h0", "h1", "h2", "s0"}, names(s))
	assert.Equal(t, []string{"port0-in", "port0-out", "port1-in", "port1-out", "port2-in", "port2-out"}, s.DirectionNames())
	assert.Equal(t, Link{A: "h2", B: "s0", LinkParams: g10, AB: "port2-in", BA: "port2-out"}, s.Links[2])
	l, fwd, ok := s.Direction("port1-out")
	assert.Equal(t, []any{1, false, true}, []any{l, fwd, ok})
	_, _, ok = s.Direction("port3-in")
	assert.False(t, ok)
	h2, ok := s.Node("h2")
	require.True(t, ok)
	assert.Equal(t, Node{Name: "h2", Kind: KindHost, Index: 2, Links: []int{2}}, *h2)
	assert.Len(t, s.Hosts(), 3)
	assert.Equal(t, "s0", s.Switches()[0].Name)
	assert.Equal(t, 1.0, s.Oversubscription())
	r, err := s.Routes()
	require.NoError(t, err)
	assert.Equal(t, []int{1}, r.NextHops("s0", "h1", 0))
	assert.Equal(t, []int{0, 1, 2}, s.FloodPorts("s0"))
	for _, n := range []int{0, 251} {
		_, err := Star(n, g10)
		assert.ErrorContains(t, err, fmt.Sprintf("hosts %d", n))
	}
	_, err = Star(2, LinkParams{})
	assert.ErrorContains(t, err, "rate")
}

func TestSpineLeaf(t *testing.T) {
	s, err := SpineLeaf(2, 4, 1, g10, g40)
	require.NoError(t, err)
	assert.Len(t, s.Hosts(), 8)
	assert.Len(t, s.Switches(), 3)
	assert.Len(t, s.Links, 10) // 8 host links, 2 uplinks
	assert.Equal(t, []string{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7", "leaf0", "leaf1", "spine0"}, names(s))
	assert.Equal(t, Link{A: "h5", B: "leaf1", LinkParams: g10, AB: "h5-leaf1", BA: "leaf1-h5"}, s.Links[5])
	assert.Equal(t, Link{A: "leaf0", B: "spine0", LinkParams: g40, AB: "leaf0-spine0", BA: "spine0-leaf0"}, s.Links[8])
	r, err := s.Routes()
	require.NoError(t, err)
	assert.Equal(t, []int{8}, r.NextHops("leaf0", "h5", 0)) // up to the spine
	assert.Equal(t, []int{9}, r.NextHops("spine0", "h5", 0))
	assert.Equal(t, []int{5}, r.NextHops("leaf1", "h5", 0))
	assert.Nil(t, r.NextHops("leaf1", "h5", 1)) // h5 has one NIC
	assert.Nil(t, r.NextHops("h0", "h5", 0))    // h0 is no switch
	src, dst, ok := r.HostNICTo("h0", "h5")
	assert.Equal(t, []any{0, 0, true}, []any{src, dst, ok})

	assert.Equal(t, 1.0, s.Oversubscription()) // 4 × 10G down, 1 × 40G up
	s, err = SpineLeaf(2, 4, 1, g10, g20)
	require.NoError(t, err)
	assert.Equal(t, 2.0, s.Oversubscription())

	for _, c := range []struct {
		leaves, hosts, spines int
		want                  string
	}{{0, 4, 1, "leaves 0"}, {2, 0, 1, "hosts per leaf 0"}, {2, 4, 0, "spines 0"}, {26, 10, 1, "26 leaves × 10 hosts"}} {
		_, err := SpineLeaf(c.leaves, c.hosts, c.spines, g10, g40)
		assert.ErrorContains(t, err, c.want)
	}
}

func TestSpineLeafECMPAndFlood(t *testing.T) {
	s, err := SpineLeaf(2, 4, 2, g10, g40)
	require.NoError(t, err)
	assert.Equal(t, 0.5, s.Oversubscription()) // 4 × 10G / (2 × 40G)
	// Links 0-7 hosts; 8 leaf0-spine0, 9 leaf0-spine1, 10 leaf1-spine0, 11 leaf1-spine1.
	require.Equal(t, 8, link(t, s, "leaf0-spine0"))
	require.Equal(t, 11, link(t, s, "leaf1-spine1"))
	r, err := s.Routes()
	require.NoError(t, err)
	hops := r.NextHops("leaf0", "h5", 0)
	assert.Equal(t, []int{8, 9}, hops)
	assert.Equal(t, []int{10}, r.NextHops("spine0", "h5", 0))
	assert.Equal(t, 9, ECMP(hops, 3))
	assert.Equal(t, 8, ECMP(hops, 4))
	assert.Equal(t, -1, ECMP(nil, 4))

	// The tree is a BFS from leaf0 (the first switch): leaf0 reaches both
	// spines (8, 9), spine0 then reaches leaf1 (10). leaf0, the root,
	// keeps both uplinks; in a 2×2 Clos some leaf must, since the tree
	// joins four switches with three links.
	assert.Equal(t, []int{0, 1, 2, 3, 8, 9}, s.FloodPorts("leaf0"))
	assert.Equal(t, []int{4, 5, 6, 7, 10}, s.FloodPorts("leaf1")) // exactly one uplink
	assert.Equal(t, []int{8, 10}, s.FloodPorts("spine0"))
	assert.Equal(t, []int{9}, s.FloodPorts("spine1"))
	assert.Nil(t, s.FloodPorts("h0"))
}

func TestFlowHash(t *testing.T) {
	// FNV-1a 32 test vectors.
	assert.Equal(t, uint32(0x811c9dc5), FlowHash(nil))
	assert.Equal(t, uint32(0xe40c292c), FlowHash([]byte("a")))
}

func TestDimsRingSwitch(t *testing.T) {
	d, err := Dims([]Dim{
		{Size: 4, Kind: "ring", LinkParams: LinkParams{Rate: 100e9}},
		{Size: 4, Kind: "switch", LinkParams: LinkParams{Rate: 50e9}},
	})
	require.NoError(t, err)
	assert.Len(t, d.Hosts(), 16)
	var sw []string
	for _, s := range d.Switches() {
		sw = append(sw, s.Name)
	}
	assert.Equal(t, []string{"d2s0", "d2s1", "d2s2", "d2s3"}, sw)
	// Dimension 1: a ring of 4 per group, 4 links × 4 groups; dimension 2:
	// one switch per group, 4 hosts × 4 groups.
	require.Len(t, d.Links, 32)
	perDim := map[int]int{}
	for _, l := range d.Links {
		perDim[l.Dim]++
	}
	assert.Equal(t, map[int]int{1: 16, 2: 16}, perDim)
	// Group 0 of dimension 1 is h0..h3; the wrap-around link has the lower host as A.
	assert.Equal(t, []string{"h0-h1", "h1-h0", "h1-h2", "h2-h1", "h2-h3", "h3-h2", "h0-h3", "h3-h0"}, d.DirectionNames()[:8])
	// Dimension 2's group 1 is the hosts with c1 = 1: h1, h5, h9, h13
	// (links 20..23, after group 0's 16..19).
	var members []string
	for _, l := range d.Links {
		if l.B == "d2s1" {
			members = append(members, l.A)
		}
	}
	assert.Equal(t, []string{"h1", "h5", "h9", "h13"}, members)
	h5, _ := d.Node("h5")
	assert.Equal(t, []int{4, 5, 21}, h5.Links) // h4-h5, h5-h6, h5-d2s1

	r, err := d.Routes()
	require.NoError(t, err)
	assert.Equal(t, []int{21}, r.NextHops("d2s1", "h5", 2))
	assert.Nil(t, r.NextHops("d2s0", "h5", 2)) // another switch group: hosts do not forward
	src, dst, ok := r.HostNICTo("h1", "h13")
	assert.Equal(t, []any{2, 2, true}, []any{src, dst, ok})
	_, _, ok = r.HostNICTo("h0", "h5") // differ in both coordinates
	assert.False(t, ok)
	src, dst, ok = r.HostNICTo("h4", "h7") // ring neighbours by the wrap link
	assert.Equal(t, []any{1, 1, true}, []any{src, dst, ok})

	d, err = Dims([]Dim{{Size: 4, Kind: "ring", LinkParams: g10, LinksPerHost: 2}, {Size: 4, LinkParams: g10}})
	require.NoError(t, err)
	assert.Len(t, d.Links, 48) // 32 ring links, 16 switch links
	assert.Equal(t, []string{"h0-h1", "h1-h0", "h0-h1#1", "h1-h0#1"}, d.DirectionNames()[:4])
}

func TestDimsSmall(t *testing.T) {
	fc, err := Dims([]Dim{{Size: 3, Kind: "fc", LinkParams: g10}})
	require.NoError(t, err)
	assert.Equal(t, []string{"h0-h1", "h1-h0", "h0-h2", "h2-h0", "h1-h2", "h2-h1"}, fc.DirectionNames())
	assert.Empty(t, fc.Switches())
	assert.Equal(t, 1, fc.Links[1].Dim)
	r, err := fc.Routes()
	require.NoError(t, err)
	src, dst, ok := r.HostNICTo("h0", "h2")
	assert.Equal(t, []any{1, 0, true}, []any{src, dst, ok})

	ring, err := Dims([]Dim{{Size: 4, Kind: "ring", LinkParams: g10}})
	require.NoError(t, err)
	r, err = ring.Routes()
	require.NoError(t, err)
	_, _, ok = r.HostNICTo("h0", "h2") // two hops, through a host
	assert.False(t, ok)
	src, dst, ok = r.HostNICTo("h0", "h1")
	assert.Equal(t, []any{0, 0, true}, []any{src, dst, ok})
	src, dst, ok = r.HostNICTo("h0", "h3") // h0's links: h0-h1, h0-h3; h3's: h2-h3, h0-h3
	assert.Equal(t, []any{1, 1, true}, []any{src, dst, ok})
	_, _, ok = r.HostNICTo("h0", "h0")
	assert.False(t, ok)

	two, err := Dims([]Dim{{Size: 2, Kind: "ring", LinkParams: g10, LinksPerHost: 2}})
	require.NoError(t, err)
	assert.Equal(t, []string{"h0-h1", "h1-h0", "h0-h1#1", "h1-h0#1"}, two.DirectionNames())

	for _, c := range []struct {
		dims []Dim
		want string
	}{
		{nil, "no dimensions"},
		{[]Dim{{Size: 0, LinkParams: g10}}, "size 0"},
		{[]Dim{{Size: 4, Kind: "torus", LinkParams: g10}}, `"torus"`},
		{[]Dim{{Size: 16, LinkParams: g10}, {Size: 16, LinkParams: g10}}, "16x16"},
		{[]Dim{{Size: 1, Kind: "ring", LinkParams: g10}}, "h0 has no link"},
	} {
		_, err := Dims(c.dims)
		assert.ErrorContains(t, err, c.want)
	}
}

func TestParseFlag(t *testing.T) {
	def := LinkParams{Rate: 10e9, Latency: time.Microsecond}
	build := func(flag string) *Topology {
		t.Helper()
		s, err := ParseFlag(flag)
		require.NoError(t, err, flag)
		topo, err := s.Build(def)
		require.NoError(t, err, flag)
		return topo
	}
	s, err := ParseFlag("star")
	require.NoError(t, err)
	assert.Equal(t, &Spec{Kind: "star"}, s)
	_, err = s.Build(def)
	assert.ErrorContains(t, err, "hosts 0") // the caller's worker count goes in first

	star := build("star:hosts=8,link=25G,latency=2us,queue=500")
	assert.Len(t, star.Hosts(), 8)
	assert.Equal(t, LinkParams{Rate: 25e9, Latency: 2 * time.Microsecond, Queue: 500}, star.Links[7].LinkParams)

	s, err = ParseFlag("spine-leaf:leaves=2,hosts=4,spines=1,uplink=40G")
	require.NoError(t, err)
	assert.Equal(t, &Spec{Kind: "spine-leaf", Leaves: 2, HostsPerLeaf: 4, Spines: 1, Uplink: "40G"}, s)
	sl := build("spine-leaf:leaves=2,hosts=4,spines=1,uplink=40G")
	assert.Len(t, sl.Links, 10)
	assert.Equal(t, 1.0, sl.Oversubscription())
	assert.Equal(t, def, sl.Links[0].LinkParams)

	d := build("dims:4x4x4")
	assert.Len(t, d.Hosts(), 64)
	assert.Len(t, d.Switches(), 48) // 16 groups in each of 3 dimensions
	assert.Len(t, d.Links, 192)     // every host once per dimension

	s, err = ParseFlag("dims:4x4,kinds=ring/switch,links=100G/50G,latency=500ns/1us,links_per_host=2/1")
	require.NoError(t, err)
	assert.Equal(t, []DimSpec{
		{Size: 4, Kind: "ring", Link: "100G", Latency: "500ns", LinksPerHost: 2},
		{Size: 4, Kind: "switch", Link: "50G", Latency: "1us", LinksPerHost: 1},
	}, s.Dims)
	d, err = s.Build(def)
	require.NoError(t, err)
	assert.Len(t, d.Links, 48)
	assert.Equal(t, LinkParams{Rate: 100e9, Latency: 500 * time.Nanosecond}, d.Links[0].LinkParams)
	assert.Equal(t, LinkParams{Rate: 50e9, Latency: time.Microsecond}, d.Links[47].LinkParams)

	s, err = ParseFlag("dims:2x3,kinds=fc,gpus=8,intra=300G,alpha=1us")
	require.NoError(t, err)
	assert.Equal(t, "fc", s.Dims[1].Kind)
	d, err = s.Build(def)
	require.NoError(t, err)
	assert.Len(t, d.Links, 3*1+2*3) // 3 pairs of 2, 2 triangles of 3
	assert.Equal(t, Intra{Rate: 300e9, Alpha: time.Microsecond}, d.Nodes[5].Intra)
	assert.Equal(t, 8, d.Nodes[5].GPUs)

	path := filepath.Join(t.TempDir(), "fabric.yaml")
	require.NoError(t, os.WriteFile(path, []byte("kind: star\nhosts: 3\n"), 0o644))
	assert.Len(t, build(path).Hosts(), 3)

	for flag, want := range map[string]string{
		"star:bogus=1":                  `unknown key "bogus"`,
		"spine-leaf:leaves=2,uplinks=1": `unknown key "uplinks"`,
		"dims:4xq":                      `size "q" in 4xq`,
		"dims:4x":                       `size "" in 4x`,
		"spine-leaf:leaves=0":           "leaves=0",
		"spine-leaf:hosts=x":            "hosts=x",
		"star:link=10X":                 "link=10X",
		"star:latency=soon":             "latency=soon",
		"star:hosts=8,hosts=9":          "hosts given twice",
		"star:hosts":                    `"hosts": want key=value`,
		"dims:kinds=ring":               "sizes first",
		"dims:4x4,kinds=ring/switch/fc": "kinds=ring/switch/fc: 3 values for 2 dimensions",
		"dims:4x4,kinds=ring/torus":     `kind "torus"`,
		"ring:4":                        `"ring:4"`,
		"missing.yaml":                  "missing.yaml",
	} {
		_, err := ParseFlag(flag)
		if assert.Error(t, err, flag) {
			assert.Contains(t, err.Error(), want, flag)
			assert.NotContains(t, err.Error(), "\n", flag)
		}
	}
}

// README ("Topologies and jobs"): "Every form takes link=, latency=,
// queue=". The dims form refuses link= (it only knows the per-dimension
// links=), so `--topology dims:4x4,link=25G` is an error.
func TestDimsFlagTakesLink(t *testing.T) {
	s, err := ParseFlag("dims:2x2,link=25G")
	require.NoError(t, err)
	tp, err := s.Build(LinkParams{Rate: 10e9})
	require.NoError(t, err)
	for _, l := range tp.Links {
		require.Equal(t, 25e9, l.Rate, "%s", l.AB)
	}
}

func TestYAML(t *testing.T) {
	def := LinkParams{Rate: 10e9, Latency: time.Microsecond}
	for text, want := range map[string]string{
		"kind: star\nhosts: 8\nbogus: 1\n":                  `line 3: unknown key "bogus"`,
		"kind: dims\ndims: [{size: 4, knd: ring}]\n":        `unknown key "knd"`,
		"hosts: [{name: a, gpu: 4}]\nlinks: [{a: a, b: a}]": `line 1: unknown key "gpu"`,
		"links: [{a: a, b: tor, rate: 10G}]\n":              `unknown key "rate"`,
		"kind: star\nhosts: eight\n":                        "eight",
		"":                                                  "empty topology",
	} {
		_, err := ParseYAML([]byte(text))
		if assert.Error(t, err, text) {
			assert.Contains(t, err.Error(), want, text)
			assert.NotContains(t, err.Error(), "\n", text)
		}
	}
	for text, want := range map[string]string{
		"kind: star\nhosts: 4\nleaves: 2\n":                "leaves: not a key of a star topology",
		"kind: star\nhosts: [{name: a}]\n":                 "hosts: a star takes a count",
		"kind: custom\nhosts: 4\n":                         "hosts: a custom topology takes a list",
		"kind: mesh\n":                                     `kind "mesh"`,
		"{kind: star, hosts: 2, link: fast}":               "link: rate \"fast\"",
		"{kind: star, hosts: 2, gpus: 4}":                  "4 GPUs need an interconnect rate",
		"{kind: dims, dims: [{size: 4, latency: -1us}]}":   "dims[0] latency",
		"{hosts: [{name: a}], links: [{a: a, b: x}]}":      `no node "x"`,
		"{kind: spine-leaf, leaves: 2, hosts_per_leaf: 4}": "spines 0",
	} {
		s, err := ParseYAML([]byte(text))
		require.NoError(t, err, text)
		_, err = s.Build(def)
		assert.ErrorContains(t, err, want, text)
	}

	// Defaults: the link's own, else the spec's, else Build's.
	s, err := ParseYAML([]byte("{kind: spine-leaf, leaves: 2, hosts_per_leaf: 2, spines: 1, latency: 3us, queue: 64}"))
	require.NoError(t, err)
	sl, err := s.Build(def)
	require.NoError(t, err)
	want := LinkParams{Rate: 10e9, Latency: 3 * time.Microsecond, Queue: 64}
	assert.Equal(t, want, sl.Links[0].LinkParams)
	assert.Equal(t, want, sl.Links[4].LinkParams) // the uplink: link and latency by default
	assert.Equal(t, 2.0, sl.Oversubscription())   // 2 × 10G down, 1 × 10G up

	s, err = ParseYAML([]byte("{kind: star, hosts: 2, gpus: 4, intra: 300G, alpha: 1us}"))
	require.NoError(t, err)
	star, err := s.Build(def)
	require.NoError(t, err)
	assert.Equal(t, Intra{Rate: 300e9, Alpha: time.Microsecond}, star.Nodes[1].Intra)
	assert.Equal(t, 4, star.Nodes[1].GPUs)
	assert.Equal(t, 0, star.Nodes[2].GPUs) // s0
}

const customYAML = `
kind: custom
hosts: [{name: a, gpus: 4, intra: 300G, alpha: 1us}, {name: b}]
switches: [{name: tor}]
links: [{a: a, b: tor, link: 25G, latency: 2us, queue: 500}, {a: tor, b: b}, {a: a, b: tor}]
`

func TestCustom(t *testing.T) {
	def := LinkParams{Rate: 10e9, Latency: time.Microsecond}
	s, err := ParseYAML([]byte(customYAML))
	require.NoError(t, err)
	c, err := s.Build(def)
	require.NoError(t, err)
	assert.Equal(t, "custom", c.Kind)
	assert.Equal(t, []string{"a", "b", "tor"}, names(c))
	assert.Equal(t, Node{Name: "a", Kind: KindHost, GPUs: 4, Intra: Intra{Rate: 300e9, Alpha: time.Microsecond}, Links: []int{0, 2}}, c.Nodes[0])
	assert.Equal(t, []Link{
		{A: "a", B: "tor", LinkParams: LinkParams{Rate: 25e9, Latency: 2 * time.Microsecond, Queue: 500}, AB: "a-tor", BA: "tor-a"},
		{A: "b", B: "tor", LinkParams: def, AB: "b-tor", BA: "tor-b"}, // written switch first
		{A: "a", B: "tor", LinkParams: def, AB: "a-tor#1", BA: "tor-a#1"},
	}, c.Links)
	assert.Equal(t, 0.0, c.Oversubscription())
	r, err := c.Routes()
	require.NoError(t, err)
	assert.Equal(t, []int{2}, r.NextHops("tor", "a", 1))
	src, dst, ok := r.HostNICTo("b", "a")
	assert.Equal(t, []any{0, 0, true}, []any{src, dst, ok})

	// Round trip: written back out and read again, the same spec and topology.
	out, err := s.Marshal()
	require.NoError(t, err)
	back, err := ParseYAML(out)
	require.NoError(t, err, string(out))
	assert.Equal(t, s, back)
	c2, err := back.Build(def)
	require.NoError(t, err)
	assert.Equal(t, c, c2)

	// kind: custom may be left out when links are given.
	s, err = ParseYAML([]byte(strings.Replace(customYAML, "kind: custom\n", "", 1)))
	require.NoError(t, err)
	c2, err = s.Build(def)
	require.NoError(t, err)
	assert.Equal(t, c, c2)
}

func TestValidate(t *testing.T) {
	hand := func(nodes []Node, links ...[2]string) *Topology {
		tp := &Topology{Kind: "custom", Nodes: nodes}
		for _, l := range links {
			tp.Links = append(tp.Links, Link{A: l[0], B: l[1], LinkParams: g10, AB: l[0] + "-" + l[1], BA: l[1] + "-" + l[0]})
		}
		return tp
	}
	h := func(n string) Node { return Node{Name: n, Kind: KindHost} }
	s := func(n string) Node { return Node{Name: n, Kind: KindSwitch} }

	ok := hand([]Node{h("a"), s("x"), h("b")}, [2]string{"a", "x"}, [2]string{"b", "x"})
	require.NoError(t, ok.Validate())
	assert.Equal(t, 1, ok.Nodes[2].Index) // filled in
	assert.Equal(t, []int{0, 1}, ok.Nodes[1].Links)

	for want, tp := range map[string]*Topology{
		"disconnected":         hand([]Node{h("a"), h("b"), s("x"), s("y")}, [2]string{"a", "x"}, [2]string{"b", "y"}),
		`"a": name used twice`: hand([]Node{h("a"), s("a")}, [2]string{"a", "a"}),
		`no node "z"`:          hand([]Node{h("a"), s("x")}, [2]string{"a", "x"}, [2]string{"a", "z"}),
		"to itself":            hand([]Node{h("a"), s("x")}, [2]string{"a", "x"}, [2]string{"x", "x"}),
		"names the host as a":  hand([]Node{h("a"), s("x")}, [2]string{"x", "a"}),
		"switch y has no link": hand([]Node{h("a"), s("x"), s("y")}, [2]string{"a", "x"}),
		"0 hosts":              hand([]Node{s("x"), s("y")}, [2]string{"x", "y"}),
		`"a b"`:                hand([]Node{h("a b")}),
		`"a-x" used twice`:     hand([]Node{h("a"), s("x")}, [2]string{"a", "x"}, [2]string{"a", "x"}),
	} {
		assert.ErrorContains(t, tp.Validate(), want)
	}
}

// A validated topology is shared read-only: validating it again, routing
// and flooding write nothing (go test -race).
func TestSharedTopology(t *testing.T) {
	s, err := SpineLeaf(2, 2, 2, g10, g40)
	require.NoError(t, err)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			assert.NoError(t, s.Validate())
			_, err := s.Routes()
			assert.NoError(t, err)
			assert.Len(t, s.FloodPorts("leaf1"), 3)
		})
	}
	wg.Wait()
}

func TestIntraStepTime(t *testing.T) {
	assert.Equal(t, 2*time.Microsecond, Intra{Rate: 8e9, Alpha: time.Microsecond}.StepTime(1000))
	assert.Equal(t, 5*time.Nanosecond, Intra{Alpha: 5}.StepTime(1000))
}

func TestDOT(t *testing.T) {
	sl, err := SpineLeaf(2, 2, 2, g10, g40)
	require.NoError(t, err)
	dot := sl.DOT()
	assert.True(t, strings.HasPrefix(dot, `graph "spine-leaf" {`), dot)
	assert.Equal(t, len(sl.Links), strings.Count(dot, " -- "))
	for _, l := range sl.Links {
		assert.Equal(t, 1, strings.Count(dot, fmt.Sprintf("%q -- %q ", l.A, l.B)), l.AB)
	}
	assert.Contains(t, dot, `"h0" [shape=box`)
	assert.Contains(t, dot, `"spine1" [shape=ellipse`)
	assert.Contains(t, dot, `"leaf1" -- "spine1" [label="40G 1µs"];`)
	assert.Equal(t, dot, sl.DOT())

	two, err := Dims([]Dim{{Size: 2, Kind: "ring", LinkParams: g10, LinksPerHost: 2}})
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(two.DOT(), `"h0" -- "h1" `)) // parallel links apart
}

func TestJSON(t *testing.T) {
	s, err := Star(2, g10)
	require.NoError(t, err)
	b, err := json.Marshal(s)
	require.NoError(t, err)
	var d Description
	require.NoError(t, json.Unmarshal(b, &d))
	assert.Equal(t, "star", d.Kind)
	assert.Equal(t, 1.0, d.Oversubscription)
	assert.Equal(t, NodeInfo{Name: "h1", Kind: KindHost, Links: []int{1}}, d.Nodes[1])
	assert.Equal(t, LinkInfo{A: "h0", B: "s0", RateGbps: 10, LatencyNS: 1000, Queue: DefaultQueue, Directions: [2]string{"port0-in", "port0-out"}}, d.Links[0])
	assert.Equal(t, []RouteInfo{
		{Switch: "s0", Host: "h0", NIC: 0, NextHops: []string{"port0-out"}},
		{Switch: "s0", Host: "h1", NIC: 0, NextHops: []string{"port1-out"}},
	}, d.Routes)
}

// hopsTo is the hop count from each switch to NIC nic of host h, over
// switch-switch links and the NIC's own link, found by relaxing every link
// until nothing changes (Routes uses a breadth-first search).
func hopsTo(tp *Topology, h *Node, nic int) map[string]int {
	isSwitch := map[string]bool{}
	for _, n := range tp.Nodes {
		isSwitch[n.Name] = n.Kind == KindSwitch
	}
	l := tp.Links[h.Links[nic]]
	d := map[string]int{l.Other(h.Name): 1}
	for changed := true; changed; {
		changed = false
		for _, l := range tp.Links {
			if !isSwitch[l.A] || !isSwitch[l.B] {
				continue
			}
			for _, e := range [][2]string{{l.A, l.B}, {l.B, l.A}} {
				if v, ok := d[e[0]]; ok {
					if w, ok := d[e[1]]; !ok || v+1 < w {
						d[e[1]], changed = v+1, true
					}
				}
			}
		}
	}
	return d
}

// Every switch of a spine-leaf has a route to every host, and every next
// hop, and only those, brings the frame one hop closer.
func TestRoutesShortestProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for range 60 {
		leaves, per, spines := 1+rng.IntN(6), 1+rng.IntN(8), 1+rng.IntN(4)
		tp, err := SpineLeaf(leaves, per, spines, g10, g40)
		require.NoError(t, err)
		r, err := tp.Routes()
		require.NoError(t, err)
		for _, h := range tp.Hosts() {
			dist := hopsTo(tp, h, 0)
			for _, s := range tp.Switches() {
				name := fmt.Sprintf("%dx%dx%d %s->%s", leaves, per, spines, s.Name, h.Name)
				hops := r.NextHops(s.Name, h.Name, 0)
				require.NotEmpty(t, hops, name)
				for _, l := range s.Links {
					next := tp.Links[l].Other(s.Name)
					d, isSwitch := dist[next] // hosts have no distance: they do not forward
					closer := next == h.Name && l == h.Links[0] || isSwitch && d == dist[s.Name]-1
					assert.Equal(t, closer, slices.Contains(hops, l), "%s link %d", name, l)
				}
			}
		}
	}
}
