package flow

import (
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu/themis"
)

// The six target platforms of the paper's Table 2, by the paper's names:
// 1024 NPUs each, dim 1 first. A dimension's BW is Table 2's "Aggr
// BW/NPU" (BW/link × links/NPU, uni-directional, footnote 1) in bytes per
// second; its Latency is Table 2's network latency, the step latency of the
// load model (§4.4). Topologies per dimension: SW is a switch
// (halving-doubling), FC fully connected (direct), Ring a ring (Table 1).
var platforms = []struct {
	name  string
	kinds []themis.DimKind
	sizes []int
	gbps  []float64 // aggregate per NPU, Gb/s
	ns    []time.Duration
}{
	{"2D-SW_SW", kinds("switch", "switch"), []int{16, 64}, []float64{1200, 800}, []time.Duration{700, 1700}},
	{"3D-SW_SW_SW_homo", kinds("switch", "switch", "switch"), []int{16, 8, 8}, []float64{800, 800, 800}, []time.Duration{700, 700, 1700}},
	{"3D-SW_SW_SW_hetero", kinds("switch", "switch", "switch"), []int{16, 8, 8}, []float64{1600, 800, 400}, []time.Duration{700, 700, 1700}},
	{"3D-FC_Ring_SW", kinds("fc", "ring", "switch"), []int{8, 16, 8}, []float64{1400, 800, 400}, []time.Duration{700, 700, 1700}},
	{"4D-Ring_SW_SW_SW", kinds("ring", "switch", "switch", "switch"), []int{4, 4, 8, 8}, []float64{2000, 1600, 800, 400}, []time.Duration{20, 700, 700, 1700}},
	{"4D-Ring_FC_Ring_SW", kinds("ring", "fc", "ring", "switch"), []int{4, 8, 4, 8}, []float64{3000, 1400, 1200, 800}, []time.Duration{20, 700, 700, 1700}},
}

func kinds(k ...string) []themis.DimKind {
	out := make([]themis.DimKind, len(k))
	for i, s := range k {
		out[i] = themis.DimKind(s)
	}
	return out
}

// Platforms are the names of Table 2's platforms, in the table's order.
func Platforms() []string {
	out := make([]string, len(platforms))
	for i, p := range platforms {
		out[i] = p.name
	}
	return out
}

// Platform is one of Table 2's platforms by its name (e.g.
// "3D-SW_SW_SW_homo").
func Platform(name string) (themis.Topology, error) {
	for _, p := range platforms {
		if p.name != name {
			continue
		}
		t := make(themis.Topology, len(p.sizes))
		for i := range t {
			t[i] = themis.Dim{Kind: p.kinds[i], Size: p.sizes[i], BW: p.gbps[i] * 1e9 / 8, Latency: p.ns[i] * time.Nanosecond}
		}
		return t, nil
	}
	return nil, fmt.Errorf("flow: no platform %q (Table 2 has %v)", name, Platforms())
}
