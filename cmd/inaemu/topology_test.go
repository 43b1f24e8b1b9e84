package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const spineLeaf = "spine-leaf:leaves=2,hosts=4,spines=1,uplink=40G"

// --topology runs the job on every host of the topology when --workers is
// not given.
func TestRunTopologyFlag(t *testing.T) {
	m, _ := runJSON(t, "--topology", spineLeaf, "--mode", "ring", "--tensor", "256KiB", "--seed", "1")
	assert.Equal(t, true, m["exact"])
	assert.Equal(t, 8.0, num(t, m, "workers"))
	jobs, ok := m["jobs"].([]any)
	require.True(t, ok, "jobs is a list: %v", m["jobs"])
	require.Len(t, jobs, 1)
	j := jobs[0].(map[string]any)
	assert.Equal(t, []any{"h0", "h1", "h2", "h3", "h4", "h5", "h6", "h7"}, j["ranks"])
	assert.Equal(t, true, j["exact"])

	// --workers N takes the first N hosts; a fault names a link direction.
	m, _ = runJSON(t, "--topology", spineLeaf, "--mode", "ring", "--tensor", "64KiB", "--seed", "1", "--workers", "6",
		"--fault", "drop link=leaf0-spine0 class=data nth=3")
	assert.Equal(t, true, m["exact"])
	assert.Equal(t, 6.0, num(t, m, "workers"))
	assert.Equal(t, 1.0, num(t, m, "fault_drops"))

	// The text report names the topology.
	code, out, errOut := runCLI(runArgs("--topology", spineLeaf, "--mode", "ring", "--tensor", "64KiB", "--seed", "1")...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "on spine-leaf (8 hosts, 3 switches")
	assert.Contains(t, out, "EXACT: all 8 workers")
}

// A scenario file with a topology and two jobs: both exact, one line each
// in the text report, both in the JSON.
func TestRunTwoJobScenario(t *testing.T) {
	path := filepath.Join(t.TempDir(), "two.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
seed: 5
tensor: 128KiB
msg_len: 16
topology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1, uplink: 40G}
switch_memory: 64MiB
jobs:
  - {name: a, mode: netreduce, ranks: [h0, h1, h2, h3]}
  - {name: b, mode: ring, ranks: [h4, h1:nic0x, h6, h7]}
`), 0o644))
	// A rank on a NIC the topology lacks: one line naming the job and key.
	code, out, errOut := runGuarded("run", "--scenario", path)
	assert.Empty(t, out)
	oneLine(t, code, errOut, "inaemu run: ", "scenario "+path, `job b: ranks: "h1:nic0x"`)

	require.NoError(t, os.WriteFile(path, []byte(`
seed: 5
tensor: 128KiB
msg_len: 16
topology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1, uplink: 40G}
switch_memory: 64MiB
jobs:
  - {name: a, mode: netreduce, ranks: [h0, h1, h2, h3]}
  - {name: b, mode: ring, ranks: [h4, h5, h6, h7], start: 20us, dtype: i32}
`), 0o644))
	code, out, errOut = runCLI("run", "--scenario", path)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	lines := regexp.MustCompile(`(?m)^  job +(a|b) +(netreduce|ring) +4 ranks +exact +\S+.*algbw [0-9.]+ GB/s +busbw [0-9.]+ GB/s$`).FindAllStringSubmatch(out, -1)
	require.Len(t, lines, 2, out)
	assert.Equal(t, []string{"a", "netreduce"}, lines[0][1:])
	assert.Equal(t, []string{"b", "ring"}, lines[1][1:])
	assert.Contains(t, out, "inaemu run: 2 jobs on spine-leaf")
	assert.Contains(t, out, "EXACT: all 8 ranks of the 2 jobs")
	assert.Contains(t, out, "from 20µs", "job b's start")

	m, _ := runJSON(t, "--scenario", path)
	assert.Equal(t, true, m["exact"])
	jobs := m["jobs"].([]any)
	require.Len(t, jobs, 2)
	for i, name := range []string{"a", "b"} {
		j := jobs[i].(map[string]any)
		assert.Equal(t, name, j["name"])
		assert.Equal(t, true, j["exact"], name)
	}
	assert.Equal(t, "i32", jobs[1].(map[string]any)["dtype"])
	assert.Equal(t, "f32", jobs[0].(map[string]any)["dtype"], "not given: the scenario's")

	// Flags override the scenario for every job that does not set its own.
	m, _ = runJSON(t, "--scenario", path, "--tensor", "64KiB")
	for _, j := range m["jobs"].([]any) {
		assert.Equal(t, float64(64<<10), num(t, j.(map[string]any), "bytes"))
	}
}

// A switch memory budget too small for the job's ring is a usage error
// (exit 2) with the numbers, and so is NetReduce across two leaves.
func TestRunSwitchMemoryAndPlacement(t *testing.T) {
	code, _, errOut := runGuarded("run", "--switch-memory", "1MiB", "--seed", "1")
	assert.Equal(t, 2, code, errOut)
	assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	for _, w := range []string{"switch s0", "needs 6.8 MiB of aggregation memory", "2×window 2×msg-len 170", "8 ranks", "1 MiB budget", "--switch-memory"} {
		assert.Contains(t, errOut, w)
	}
	m, _ := runJSON(t, append([]string{"--switch-memory", "64MiB", "--seed", "1"}, small...)...)
	assert.Equal(t, true, m["exact"], "a budget that fits")

	code, _, errOut = runGuarded("run", "--topology", "dims:2x2,kinds=switch/switch", "--workers", "4", "--tensor", "64KiB", "--seed", "1")
	assert.Equal(t, 2, code, errOut)
	assert.Contains(t, errOut, "no switch is linked to all of them")
}

// NetReduce across two leaves aggregates in the leaves and the spine; the
// JSON shows each switch's role, local ranks and CTT.
func TestRunMultiRackJSON(t *testing.T) {
	m, _ := runJSON(t, "--topology", spineLeaf, "--tensor", "64KiB", "--seed", "1")
	assert.Equal(t, true, m["exact"])
	ring := m["jobs"].([]any)[0].(map[string]any)["ring"].(map[string]any)
	assert.Equal(t, "spine0", ring["switch"])
	tree := ring["tree"].([]any)
	require.Len(t, tree, 3)
	// The spine: 2 leaves × 2 rows; a leaf: an aggregation row per local
	// sender and a multicast row per local receiver (4 + 4).
	for i, want := range []struct {
		role string
		rows int
	}{{"spine", 4}, {"leaf", 8}, {"leaf", 8}} {
		sw := tree[i].(map[string]any)
		assert.Equal(t, want.role, sw["role"])
		assert.Len(t, sw["ctt"], want.rows, "%s's CTT", sw["switch"])
	}
	code, out, errOut := runCLI("run", "--topology", spineLeaf, "--tensor", "64KiB", "--seed", "1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "racks     job job0: leaf0 [0 1 2 3], leaf1 [4 5 6 7] under spine0: ")
}

// Bad --topology and --switch-memory values, and either flag where the
// network is a star of TAPs, are one line and exit 2.
func TestTopologyFlagErrors(t *testing.T) {
	for _, c := range []struct {
		args   []string
		prefix string
		want   []string
	}{
		{[]string{"run", "--topology", "ring:4"}, "inaemu run: ", []string{"--topology", `"ring:4"`}},
		{[]string{"run", "--topology", "spine-leaf:leaves=2,hosts=4,spines=0"}, "inaemu run: ", []string{"--topology", "spines"}},
		{[]string{"run", "--topology", "spine-leaf:leaves=2,hosts=4,spine=1"}, "inaemu run: ", []string{`unknown key "spine"`}},
		{[]string{"run", "--topology", "star:hosts=4", "--workers", "5"}, "inaemu run: ", []string{"workers: 5", "4 hosts"}},
		{[]string{"run", "--topology", "/nonexistent/t.yaml"}, "inaemu run: ", []string{"/nonexistent/t.yaml"}},
		{[]string{"run", "--switch-memory", "lots"}, "inaemu run: ", []string{"switch_memory", `"lots"`}},
		{[]string{"run", "--backend", "tap", "--topology", "star"}, "inaemu run: ", []string{"--topology", "TAP"}},
		{[]string{"run", "--backend", "tap", "--switch-memory", "1MiB"}, "inaemu run: ", []string{"--switch-memory", "TAP"}},
		{[]string{"switch", "--tap", "ina", "--topology", spineLeaf}, "inaemu switch: ", []string{"--topology", "star of TAP ports"}},
		{[]string{"host", "--tap", "ina-h0", "--rank", "0", "--seed", "1", "--switch-memory", "1MiB"}, "inaemu host: ", []string{"--switch-memory", "star of TAP ports"}},
		{[]string{"topo", "show", "--topology", "mesh"}, "inaemu topo show: ", []string{"--topology", `"mesh"`}},
		{[]string{"topo", "show", "--topology", "dims:4xfour"}, "inaemu topo show: ", []string{"four"}},
		{[]string{"topo", "show", "--json", "--dot", "-"}, "inaemu topo show: ", []string{"stdout"}},
		{[]string{"topo", "show", "extra"}, "inaemu topo show: ", []string{`"extra"`}},
		{[]string{"topo"}, "inaemu topo: ", []string{"show"}},
		{[]string{"topo", "draw"}, "inaemu topo: ", []string{"show"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runGuarded(c.args...)
			assert.Empty(t, out)
			oneLine(t, code, errOut, c.prefix, c.want...)
		})
	}
	// The TAP commands refuse the flags without listing them.
	for _, cmd := range []string{"switch", "host"} {
		_, out, _ := runCLI(cmd, "--help")
		assert.NotContains(t, out, "--topology", cmd)
		assert.NotContains(t, out, "--switch-memory", cmd)
	}
	_, out, _ := runCLI("run", "--help")
	assert.Contains(t, out, "--topology SPEC")
	assert.Contains(t, out, "--switch-memory SIZE")
}

// topo show --json is topo.Describe's layout: the spine-leaf's 8 hosts,
// 3 switches, 10 links and a route from every switch to every host.
func TestTopoShowJSON(t *testing.T) {
	code, out, errOut := runCLI("topo", "show", "--topology", spineLeaf, "--json")
	require.Equal(t, 0, code, errOut)
	var d struct {
		Kind             string  `json:"kind"`
		Oversubscription float64 `json:"oversubscription"`
		Nodes            []struct {
			Name, Kind string
		} `json:"nodes"`
		Links []struct {
			A, B       string
			RateGbps   float64   `json:"rate_gbps"`
			Directions [2]string `json:"directions"`
		} `json:"links"`
		Routes []struct {
			Switch, Host string
			NextHops     []string `json:"next_hops"`
		} `json:"routes"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	assert.Equal(t, "spine-leaf", d.Kind)
	assert.Equal(t, 1.0, d.Oversubscription, "4 × 10G under 1 × 40G")
	kinds := map[string]int{}
	for _, n := range d.Nodes {
		kinds[n.Kind]++
	}
	assert.Equal(t, map[string]int{"host": 8, "switch": 3}, kinds)
	require.Len(t, d.Links, 10)
	assert.Equal(t, [2]string{"h0-leaf0", "leaf0-h0"}, d.Links[0].Directions)
	assert.Equal(t, 10.0, d.Links[0].RateGbps, "--link's default")
	assert.Equal(t, 40.0, d.Links[8].RateGbps, "the uplink")
	assert.Len(t, d.Routes, 24)

	// The default is the star of --workers hosts, its directions portR-in
	// and portR-out.
	code, out, errOut = runCLI("topo", "show", "--workers", "3", "--link", "25G", "--json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &d), out)
	assert.Equal(t, "star", d.Kind)
	require.Len(t, d.Links, 3)
	assert.Equal(t, [2]string{"port2-in", "port2-out"}, d.Links[2].Directions)
	assert.Equal(t, 25.0, d.Links[2].RateGbps)
}

// topo show's text has the summary, nodes, links and routes in aligned
// columns; --dot writes Graphviz; a scenario's topology is what it shows.
func TestTopoShowTextDOTScenario(t *testing.T) {
	code, out, errOut := runCLI("topo", "show", "--topology", spineLeaf)
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "topology  spine-leaf: 8 hosts, 3 switches, 10 links, oversubscription 1:1\n"), out)
	for _, w := range []string{"\nnodes\n", "\nlinks\n", "\nroutes\n"} {
		assert.Contains(t, out, w)
	}
	assert.Regexp(t, `(?m)^  leaf0 +spine0 +40G +1µs +1000 +leaf0-spine0 +spine0-leaf0$`, out)
	assert.Regexp(t, `(?m)^  leaf0 +h5 +leaf0-spine0$`, out)
	assert.Regexp(t, `(?m)^  spine0 +switch +0 +2$`, out)
	// Aligned: in each table every row's cells start where the header's do.
	for _, table := range strings.Split(out, "\n\n")[1:] {
		rows := strings.Split(strings.TrimSpace(table), "\n")[1:] // the title, then the header
		var starts []int
		for i := 1; i < len(rows[0]); i++ {
			if rows[0][i] != ' ' && rows[0][i-1] == ' ' {
				starts = append(starts, i)
			}
		}
		for _, r := range rows[1:] {
			rr := []rune(r)
			for _, c := range starts {
				require.Greater(t, len(rr), c, "%q", r)
				assert.True(t, rr[c] != ' ' && rr[c-1] == ' ', "row %q: no cell at column %d of %q", r, c, rows[0])
			}
		}
	}

	code, out, errOut = runCLI("topo", "show", "--topology", spineLeaf, "--dot", "-")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "graph"), out)
	dot := filepath.Join(t.TempDir(), "t.dot")
	code, out, errOut = runCLI("topo", "show", "--topology", "dims:2x2,kinds=ring/switch", "--dot", dot)
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "topology  dims: 4 hosts"), "the text still goes to stdout: %s", out)
	b, err := os.ReadFile(dot)
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "graph"))

	path := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(path, []byte("link: 100G\ntopology: {kind: star, hosts: 3}\n"), 0o644))
	code, out, errOut = runCLI("topo", "show", "--scenario", path)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^  h2 +s0 +100G +1µs +1000 +port2-in +port2-out$`, out)
	code, out, errOut = runCLI("topo", "show", "--scenario", path, "--link", "25G", "--topology", "star:hosts=2")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "star: 2 hosts")
	assert.Regexp(t, `(?m)^  h1 +s0 +25G `, out, "flags override the file")

	code, out, _ = runCLI("topo", "show", "--help")
	assert.Equal(t, 0, code)
	for _, f := range []string{"topology", "scenario", "workers", "link", "latency", "queue", "json", "dot"} {
		assert.Regexp(t, regexp.MustCompile(`(?m)^\s*--`+f+`\b`), out, f)
	}
	code, out, _ = runCLI("--help")
	assert.Equal(t, 0, code)
	assert.Regexp(t, `(?m)^  topo +show a topology`, out)
}

// replay --through-switch models one switch: a capture of another
// topology is refused, naming its first link direction.
func TestReplayRefusesTopologyCapture(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "sl.pcapng")
	code, out, errOut := runCLI("run", "--topology", spineLeaf, "--mode", "ring", "--tensor", "64KiB", "--seed", "1", "--pcap", orig)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	code, out, errOut = runGuarded("replay", orig, "--through-switch", "--out", filepath.Join(dir, "out.pcapng"))
	assert.Empty(t, out)
	oneLine(t, code, errOut, "inaemu replay: ", `interface "h0-leaf0"`, "needs a star's capture")
	_, err := os.Stat(filepath.Join(dir, "out.pcapng"))
	assert.True(t, os.IsNotExist(err), "nothing written")

	assert.Equal(t, "", topologyInterface([]string{"port0-in", "port0-out", "port1-in", "port1-out"}))
	assert.Equal(t, "", topologyInterface([]string{"ina-br0", "ina-br1"}), "a TAP bridge capture")
	assert.Equal(t, "", topologyInterface(nil), "a pcap file")
	assert.Equal(t, "a-b#1", topologyInterface([]string{"port0-in", "a-b#1", "b-a#1"}))
	assert.Equal(t, "h0-h1", topologyInterface([]string{"h0-h1", "h1-h0"}))
}

// Ranks on GPUs: a ring over 2 hosts × 4 GPUs from a scenario file ends
// exact, its hops inside a host on the interconnect (no RoCE frame of
// theirs on the wire: 2 of the 8 hops cross NICs).
func TestRunRingOverGPUs(t *testing.T) {
	path := filepath.Join(t.TempDir(), "gpus.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
seed: 5
tensor: 256KiB
topology: {kind: star, hosts: 2, gpus: 4, intra: 300G, alpha: 1us}
jobs:
  - {name: fr, mode: ring, ranks: [h0:gpu0, h0:gpu1, h0:gpu2, h0:gpu3, h1:gpu0, h1:gpu1, h1:gpu2, h1:gpu3]}
`), 0o644))
	code, out, errOut := runCLI("run", "--scenario", path, "--json")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	var res struct {
		Exact bool `json:"exact"`
		Jobs  []struct {
			Workers int      `json:"workers"`
			Ranks   []string `json:"ranks"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res))
	assert.True(t, res.Exact)
	require.Len(t, res.Jobs, 1)
	assert.Equal(t, 8, res.Jobs[0].Workers)
	assert.Equal(t, "h1:gpu3", res.Jobs[0].Ranks[7])
	// A GPU the host lacks: one line naming the job and key.
	require.NoError(t, os.WriteFile(path, []byte("topology: {kind: star, hosts: 2, gpus: 4, intra: 300G}\njobs:\n  - {name: fr, mode: ring, ranks: [h0:gpu0, h0:gpu4]}\n"), 0o644))
	code, _, errOut = runGuarded("run", "--scenario", path)
	oneLine(t, code, errOut, "inaemu run: ", `job fr: ranks: "h0:gpu4"`)
}

// Tenants (NetReduce §6): two NetReduce jobs on one switch hold RingIDs 0
// and 1 and reserve their memory against the switch's budget; the job that
// does not fit is refused with the numbers (exit 2).
func TestRunTenantsMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tenants.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
seed: 5
tensor: 128KiB
msg_len: 16
workers: 8
jobs:
  - {name: a, mode: netreduce, ranks: [h0, h1, h2, h3]}
  - {name: b, mode: netreduce, ranks: [h4, h5, h6, h7], window: 4}
`), 0o644))
	m, _ := runJSON(t, "--scenario", path)
	jobs := m["jobs"].([]any)
	require.Len(t, jobs, 2)
	// a: 2×window 2×msg-len 16 = 64 aggregators of 4 ranks' slots and the
	// sum, 5 × 1152 B each (the figure the refusal below names: 360 KiB).
	for i, want := range []map[string]any{
		{"switch": "s0", "id": json.Number("0"), "memory_bytes": json.Number("368640")},
		{"switch": "s0", "id": json.Number("1"), "memory_bytes": json.Number("737280")}, // twice the window, twice the memory
	} {
		ring := jobs[i].(map[string]any)["ring"].(map[string]any)
		assert.Positive(t, must(ring["counters"].(map[string]any)["aggregations"].(json.Number).Int64()), "job %d's ring counters", i)
		delete(ring, "counters")
		assert.Equal(t, want, ring)
	}

	code, _, errOut := runGuarded("run", "--scenario", path, "--switch-memory", "1MiB")
	oneLine(t, code, errOut, "inaemu run: ", "job b: switch s0: ring 1 needs 720 KiB of aggregation memory", "2×window 4×msg-len 16", "360 KiB of the 1 MiB budget is in use")
	m, _ = runJSON(t, "--scenario", path, "--switch-memory", "1080KiB")
	assert.Equal(t, true, m["exact"], "both fit exactly")
}

// A scheme over multi-GPU machines is one job with its inter-machine jobs
// listed after it (part_of), one verdict for every GPU, and its own
// bandwidths; a scheme on hosts without GPUs, or ta with three GPUs a
// machine, is a usage error.
func TestRunSchemes(t *testing.T) {
	const gpus = "star:hosts=4,gpus=2,intra=300G,alpha=1us"
	for _, mode := range []string{"pn", "pr", "ta", "fr"} {
		m, _ := runJSON(t, "--topology", gpus, "--mode", mode, "--tensor", "256KiB", "--seed", "1")
		assert.Equal(t, true, m["exact"], mode)
		assert.Equal(t, mode, m["mode"])
		assert.Equal(t, json.Number("8"), m["workers"], mode)
		bw, err := m["algbw_gbytes_per_s"].(json.Number).Float64()
		require.NoError(t, err)
		assert.Greater(t, bw, 0.0, mode)
		jobs := m["jobs"].([]any)
		stages := map[string]int{"pn": 2, "pr": 2, "ta": 1, "fr": 0}[mode]
		require.Len(t, jobs, 1+stages, mode)
		for _, j := range jobs[1:] {
			assert.Equal(t, "job0", j.(map[string]any)["part_of"], mode)
		}
	}
	code, out, errOut := runCLI("run", "--topology", gpus, "--mode", "pn", "--tensor", "256KiB", "--seed", "1")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "inaemu run: pn allreduce, 4 machines × 2 GPUs × 256KiB f32")
	assert.Contains(t, out, "  job       job0/ring1  netreduce  4 ranks  exact")
	assert.Contains(t, out, "  result    EXACT: all 8 GPUs hold the bit-exact sum in the scheme's order\n")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--mode", "pn"}, "--mode pn runs over machines with several GPUs each, and these hosts have none"},
		{[]string{"run", "--topology", "star:hosts=2,gpus=3,intra=100G", "--mode", "ta"}, "job job0: mode ta: 3 GPUs per machine: ta's reduce and broadcast (recursive halving, binomial trees) take a power of two"},
		{[]string{"run", "--topology", gpus, "--mode", "pr", "--tensor", "12"}, "job job0: mode pr: --tensor 3 elements: too small to cut into 2 pieces"},
	} {
		code, out, errOut := runGuarded(c.args...)
		assert.Empty(t, out)
		oneLine(t, code, errOut, "inaemu run: ", c.want)
	}
}
