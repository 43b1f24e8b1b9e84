package input

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/themis/flow"
)

// TestParseDims: the brief's example spec, read field by field against
// values written out by hand (200 GB/s is 2e11 bytes per second; 800G
// is 800 Gbit/s, 1e11 bytes per second).
func TestParseDims(t *testing.T) {
	p, err := ParseDims("ring:4:200GB/s:500ns, switch:8:800G:700ns:4,fc:3:100Gbit/s")
	require.NoError(t, err)
	assert.Equal(t, themis.Topology{
		{Kind: themis.Ring, Size: 4, BW: 2e11, Latency: 500 * time.Nanosecond},
		{Kind: themis.Switch, Size: 8, BW: 1e11, Latency: 700 * time.Nanosecond},
		{Kind: themis.FC, Size: 3, BW: 12.5e9},
	}, p.Topology)
	assert.Equal(t, []int{1, 4, 1}, p.Links)
	assert.Equal(t, "", p.Name)
	p, err = ParseDims("ring:2:100GB/s,ina:8:100GB/s:1us")
	require.NoError(t, err)
	assert.Equal(t, themis.INA, p.Topology[1].Kind)
}

// TestParseDimsBad: every spec that is no valid topology is one line
// naming the dimension and what is wrong.
func TestParseDimsBad(t *testing.T) {
	for spec, want := range map[string]string{
		"":                             "empty",
		"ring:1:100GB/s":               "dim1",
		"ring:4:100GB/s,switch:6:1G":   "power of two",
		"torus:4:100GB/s":              `unknown kind "torus"`,
		"ring:4":                       "KIND:SIZE:BW",
		"ring:4:fast":                  `bandwidth "fast"`,
		"ring:4:100GB/s:soon":          "latency",
		"ring:4:100GB/s:1us:0":         "links",
		"ring:4:100GB/s:1us:2:extra":   "KIND:SIZE:BW",
		"ring:x:100GB/s":               `size "x"`,
		"ring:4:100GB/s,ring:4:-5GB/s": "dim2",
		"ina:128:100GB/s":              "at most",
		"ina:12:100GB/s":               "power of two",
	} {
		_, err := ParseDims(spec)
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), want, spec)
		assert.NotContains(t, err.Error(), "\n", spec)
	}
}

// TestNamedPlatforms: each of Table 2's platforms has its links per NPU,
// and its preset's bandwidth per NPU is Table 2's BW/link × links/NPU
// (the table's columns, typed here from the paper, in Gb/s).
func TestNamedPlatforms(t *testing.T) {
	perLink := map[string][]float64{
		"2D-SW_SW":           {200, 800},
		"3D-SW_SW_SW_homo":   {200, 200, 800},
		"3D-SW_SW_SW_hetero": {200, 200, 400},
		"3D-FC_Ring_SW":      {200, 200, 400},
		"4D-Ring_SW_SW_SW":   {1000, 200, 200, 400},
		"4D-Ring_FC_Ring_SW": {1500, 200, 200, 800},
	}
	require.Len(t, flow.Platforms(), len(perLink))
	for _, name := range flow.Platforms() {
		p, err := NamedPlatform(name)
		require.NoError(t, err, name)
		assert.Equal(t, 1024, p.Topology.NPUs(), name)
		require.Len(t, p.Links, len(p.Topology), name)
		for d, dim := range p.Topology {
			assert.InDelta(t, perLink[name][d]*float64(p.Links[d])*1e9/8, dim.BW, 1, "%s dim%d", name, d+1)
		}
	}
	_, err := NamedPlatform("5D-Torus")
	require.Error(t, err)
	assert.Contains(t, err.Error(), "2D-SW_SW")
}

func twoDims(t *testing.T) themis.Topology {
	p, err := ParseDims("ring:4:100GB/s:1us,switch:8:50GB/s:1us,fc:3:25GB/s")
	require.NoError(t, err)
	return p.Topology
}

// TestParseWorkload: YAML and JSON read alike; sizes with units; dims
// numbered from 1 in the file become 0-based and sorted; no dims is all.
func TestParseWorkload(t *testing.T) {
	top := twoDims(t)
	want := []Item{
		{Name: "grad", Collective: themis.AllReduce, Bytes: 64 << 20, Dims: []int{0, 1, 2}},
		{Name: "2:reduce-scatter", Collective: themis.ReduceScatter, Bytes: 1000, Dims: []int{0, 2}},
	}
	y := "collectives:\n  - {name: grad, collective: all-reduce, size: 64MiB}\n  - collective: reduce-scatter\n    size: 1000\n    dims: [3, 1]\n"
	j := `{"collectives": [{"name": "grad", "collective": "all-reduce", "size": "64MiB"}, {"collective": "reduce-scatter", "size": "1000", "dims": [3, 1]}]}`
	for _, in := range []string{y, j} {
		got, err := ParseWorkload([]byte(in), top)
		require.NoError(t, err, in)
		assert.Equal(t, want, got)
	}
}

// TestParseWorkloadBad: the list (unknown fields, an empty list)
// and the brief's (unknown collectives, sizes ≤ 0, dims out of range),
// each one line naming the collective and what is wrong.
func TestParseWorkloadBad(t *testing.T) {
	top := twoDims(t)
	for _, c := range []struct{ in, want string }{
		{"", "empty workload"},
		{"collectives: []\n", "empty"},
		{"{}", "empty"},
		{"collectives:\n  - {collective: all-reduce, size: 1MiB, bytes: 3}\n", `unknown key "bytes"`},
		{"colectives: []\n", `unknown key "colectives"`},
		{`{"collectives": [{"collective": "all-reduce", "size": "1MiB", "involved_dim": [1]}]}`, `unknown key "involved_dim"`},
		{"collectives:\n  - {collective: all-to-all, size: 1MiB}\n", `collective 1: unknown collective "all-to-all"`},
		{"collectives:\n  - {size: 1MiB}\n", "collective 1: no collective"},
		{"collectives:\n  - {collective: all-reduce, size: 1MiB}\n  - {collective: all-gather, size: 0}\n", "collective 2: size 0"},
		{"collectives:\n  - {collective: all-gather, size: -4KiB}\n", "collective 1: size"},
		{"collectives:\n  - {collective: all-gather, size: -4}\n", "more than 0"},
		{"collectives:\n  - {collective: all-gather}\n", "no size"},
		{"collectives:\n  - {collective: all-reduce, size: 1MiB, dims: [4]}\n", "dimension 4 out of range: the platform has dims 1..3"},
		{"collectives:\n  - {collective: all-reduce, size: 1MiB, dims: [0]}\n", "dimension 0 out of range"},
		{"collectives:\n  - {collective: all-reduce, size: 1MiB, dims: [2, 2]}\n", "named twice"},
		{"collectives:\n  - {collective: all-reduce, size: 1MiB, dims: two}\n", "line 2"},
		{"collectives:\n  - {collective: all-reduce, size: 1MiB}\n---\ncollectives: []\n", "more than one"},
	} {
		_, err := ParseWorkload([]byte(c.in), top)
		require.Error(t, err, c.in)
		assert.Contains(t, err.Error(), c.want, c.in)
		assert.NotContains(t, err.Error(), "\n", c.in)
	}
}

// TestScheduleSubset: a collective on dims 1 and 3 of three is the same
// schedule as on the two-dimensional topology of those dims, with dim
// numbers mapped back and dim 2 never visited nor charged.
func TestScheduleSubset(t *testing.T) {
	top := twoDims(t)
	it := Item{Collective: themis.AllReduce, Bytes: 1 << 20, Dims: []int{0, 2}}
	cfg := themis.Config{Scheduler: themis.Themis, Chunks: 8}
	scheds, log, err := Schedule(top, it, cfg)
	require.NoError(t, err)
	ref, refLog, err := themis.Schedule(themis.Topology{top[0], top[2]}, themis.AllReduce, 1<<20, cfg)
	require.NoError(t, err)
	require.Len(t, scheds, 8)
	back := []int{0, 2}
	for i := range scheds {
		require.Len(t, scheds[i].Stages, 4)
		for j, st := range scheds[i].Stages {
			assert.Equal(t, back[ref[i].Stages[j].Dim], st.Dim)
			assert.Equal(t, ref[i].Stages[j].SentBytes, st.SentBytes)
		}
		assert.Len(t, log[i].After, 3)
		assert.Zero(t, log[i].After[1])
		assert.Equal(t, refLog[i].After[1], log[i].After[2])
		for k, d := range log[i].Order {
			assert.Equal(t, back[refLog[i].Order[k]], d)
		}
	}
	// Every dimension involved: the scheduler's own output unchanged.
	all, _, err := Schedule(top, Item{Collective: themis.AllReduce, Bytes: 1 << 20, Dims: []int{0, 1, 2}}, cfg)
	require.NoError(t, err)
	direct, _, _ := themis.Schedule(top, themis.AllReduce, 1<<20, cfg)
	assert.Equal(t, direct, all)
	assert.True(t, strings.HasPrefix(DimsSyntax, "KIND"))
}
