package scenario

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/tensor"
)

// apply parses text and applies it to the default configuration.
func apply(t *testing.T, text string) (emu.Config, error) {
	t.Helper()
	s, err := Parse([]byte(text))
	require.NoError(t, err, text)
	cfg := emu.DefaultConfig()
	return cfg, s.Apply(&cfg)
}

// link finds the link between a and b.
func link(t *testing.T, tp *topo.Topology, a, b string) topo.Link {
	t.Helper()
	for _, l := range tp.Links {
		if l.A == a && l.B == b {
			return l
		}
	}
	require.Failf(t, "no link", "%s-%s", a, b)
	return topo.Link{}
}

const twoJobs = `
link: 25G
latency: 2us
queue: 64
tensor: 64KiB
msg_len: 8
topology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1, uplink: 40G}
switch_memory: 64MiB
jobs:
  - {name: a, mode: netreduce, ranks: [h0, h1, h2, h3]}
  - {name: b, mode: ring, ranks: [h4, h5, h6, h7], tensor: 32KiB, start: 50us, window: 4, msg_len: 4, dtype: i32, release: paper}
`

// Every new key reaches the Config: the topology (its links taking the
// scenario's link, latency and queue where it sets none), the switch
// memory and the jobs.
func TestApplyTopologyMemoryJobs(t *testing.T) {
	cfg, err := apply(t, twoJobs)
	require.NoError(t, err)
	require.NotNil(t, cfg.Topology)
	assert.Equal(t, "spine-leaf", cfg.Topology.Kind)
	assert.Len(t, cfg.Topology.Hosts(), 8)
	assert.Len(t, cfg.Topology.Switches(), 3)
	host := link(t, cfg.Topology, "h0", "leaf0")
	assert.Equal(t, 25e9, host.Rate, "the scenario's link")
	assert.Equal(t, 2*time.Microsecond, host.Latency, "the scenario's latency")
	assert.Equal(t, 64, host.Queue, "the scenario's queue")
	up := link(t, cfg.Topology, "leaf0", "spine0")
	assert.Equal(t, 40e9, up.Rate, "the topology's uplink")
	assert.Equal(t, 2*time.Microsecond, up.Latency)
	assert.Equal(t, int64(64<<20), cfg.SwitchMemory)

	require.Len(t, cfg.Jobs, 2)
	a, b := cfg.Jobs[0], cfg.Jobs[1]
	// Job a sets only its mode and ranks: everything else is the run's.
	assert.Equal(t, emu.JobSpec{Name: "a", Mode: emu.NetReduce, Ranks: []string{"h0", "h1", "h2", "h3"}}, a)
	i32, paper := tensor.I32, netreduce.Paper
	assert.Equal(t, emu.JobSpec{Name: "b", Mode: emu.Ring, Ranks: []string{"h4", "h5", "h6", "h7"}, TensorBytes: 32 << 10,
		Start: 50 * time.Microsecond, Window: 4, MsgLen: 4, DType: &i32, Release: &paper}, b)
	require.NoError(t, cfg.Validate())
}

// Jobs take the scenario's settings where they set none, and so the
// command line's (Override) when it gives them; a job's own setting wins.
func TestJobsInheritSettings(t *testing.T) {
	s, err := Parse([]byte(twoJobs))
	require.NoError(t, err)
	dt := "f16"
	s.Override(&Scenario{DType: dt, Tensor: "16KiB", Mode: "ring"})
	cfg := emu.DefaultConfig()
	cfg.Seed = 3
	require.NoError(t, s.Apply(&cfg))
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	require.Len(t, res.Jobs, 2)
	a, b := res.Jobs[0], res.Jobs[1]
	assert.Equal(t, "netreduce", a.Mode, "the job's own mode wins")
	assert.Equal(t, int64(16<<10), a.Bytes, "the override's tensor")
	assert.Equal(t, "f16", a.DType, "the override's dtype")
	assert.Equal(t, int64(32<<10), b.Bytes, "the job's own tensor")
	assert.Equal(t, "i32", b.DType, "the job's own dtype")
	assert.Equal(t, int64(50_000), b.StartNS)
	for _, j := range res.Jobs {
		assert.True(t, j.Exact, j.Name)
		assert.Equal(t, 4, j.Workers, j.Name)
	}
}

// With a topology and no jobs, workers picks the hosts: all of them when
// not given, the first N when given; a star's hosts default to workers.
func TestTopologyWorkers(t *testing.T) {
	for _, c := range []struct {
		yaml           string
		workers, hosts int
		ranks          []string
	}{
		{"topology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1}", 8, 8, nil},
		{"workers: 3\ntopology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1}", 3, 8, nil},
		{"topology: {kind: star}", 8, 8, nil},
		{"workers: 5\ntopology: {kind: star}", 5, 5, nil},
		{"topology: {kind: star, hosts: 4}", 4, 4, nil},
		{"workers: 2\ntopology: {kind: star, hosts: 6}", 2, 6, nil},
		{"topology: {kind: dims, dims: [{size: 2, kind: ring}, {size: 3}]}", 6, 6, nil},
		// Jobs place themselves: workers is left alone.
		{"workers: 4\ntopology: {kind: star, hosts: 6}\njobs: [{ranks: [h4, h5]}]", 4, 6, []string{"h4", "h5"}},
	} {
		cfg, err := apply(t, c.yaml)
		require.NoError(t, err, c.yaml)
		assert.Equal(t, c.workers, cfg.Workers, c.yaml)
		assert.Len(t, cfg.Topology.Hosts(), c.hosts, c.yaml)
		if c.ranks != nil {
			require.Len(t, cfg.Jobs, 1)
			assert.Equal(t, c.ranks, cfg.Jobs[0].Ranks)
		}
		require.NoError(t, cfg.Validate(), c.yaml)
	}
	_, err := apply(t, "workers: 9\ntopology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1}")
	require.Error(t, err)
	assert.Equal(t, "workers: 9: the spine-leaf topology has 8 hosts", err.Error())

	// The flat form means what it always meant: the star Config.Topology
	// leaves to emu.
	cfg, err := apply(t, "workers: 4")
	require.NoError(t, err)
	assert.Nil(t, cfg.Topology)
	assert.Nil(t, cfg.Jobs)
	assert.Zero(t, cfg.SwitchMemory)
}

// Unknown keys are errors naming the key at every level: the top, the
// topology (and its nested entries) and each job, whose errors name the
// job too. Each is one line.
func TestUnknownKeysAtEveryLevel(t *testing.T) {
	for _, c := range []struct {
		yaml string
		want []string
	}{
		{"workers: 4\nswitch_mem: 1MiB\n", []string{"line 2", `unknown key "switch_mem"`}},
		{"topology:\n  kind: spine-leaf\n  leavs: 2\n", []string{"line 3", `unknown key "leavs"`}},
		{"topology: {kind: dims, dims: [{size: 2, knd: ring}]}\n", []string{`unknown key "knd"`}},
		{"topology: {kind: custom, hosts: [{name: a, gpu: 2}]}\n", []string{`unknown key "gpu"`}},
		{"jobs:\n  - name: a\n    ranks: [h0, h1]\n    tensr: 4MiB\n", []string{"line 4", "job a", `unknown key "tensr"`, "a job takes name, mode, ranks, tensor, start, window, msg_len, dtype, release"}},
		{"jobs:\n  - {ranks: [h0, h1], windw: 2}\n", []string{"job at line 2", `unknown key "windw"`}},
		{"jobs:\n  - {name: b, ranks: [h0, h1], window: four}\n", []string{"job b", "window", "four"}},
		{"jobs:\n  - {name: b, ranks: h0}\n", []string{"job b", "ranks"}},
		{"jobs:\n  - {name: b, mode: ring, mode: netreduce}\n", []string{"job b", "mode given twice"}},
		{"jobs: [h0, h1]\n", []string{"a job is a mapping"}},
	} {
		_, err := Parse([]byte(c.yaml))
		require.Error(t, err, c.yaml)
		assert.NotContains(t, err.Error(), "\n", "one line")
		for _, w := range c.want {
			assert.Contains(t, err.Error(), w, c.yaml)
		}
	}
}

// A job's bad setting is an *Error naming the job and its key, in one
// line.
func TestJobErrorsNameJobAndKey(t *testing.T) {
	for _, c := range []struct{ job, want string }{
		{"{name: b, ranks: [h0, h1], mode: fast}", "job b: mode: "},
		{"{name: b, ranks: [h0, h1], tensor: lots}", "job b: tensor: "},
		{"{name: b, ranks: [h0, h1], tensor: 0}", "job b: tensor: "},
		{"{name: b, ranks: [h0, h1], start: soon}", "job b: start: "},
		{"{name: b, ranks: [h0, h1], start: 2h}", "job b: start: "},
		{"{name: b, ranks: [h0, h1], window: 0}", "job b: window: 0: want 1 or more"},
		{"{name: b, ranks: [h0, h1], msg_len: -1}", "job b: msg_len: -1: want 1 or more"},
		{"{name: b, ranks: [h0, h1], dtype: f64}", "job b: dtype: "},
		{"{name: b, ranks: [h0, h1], release: never}", "job b: release: "},
		{"{name: b, ranks: [h0]}", "job b: ranks: want at least two host NICs"},
		{"{name: b, ranks: [h0, h9]}", `job b: ranks: "h9": the network has no such host NIC or GPU (the spine-leaf topology's hosts are h0..h7)`},
		{"{name: b, ranks: [h0, h1:nic1]}", `job b: ranks: "h1:nic1": the network has no such host NIC or GPU`},
		{"{ranks: [h0, h1], mode: fast}", "job job0: mode: "},
	} {
		_, err := apply(t, "topology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1}\njobs: ["+c.job+"]")
		require.Error(t, err, c.job)
		assert.True(t, strings.HasPrefix(err.Error(), c.want), "%s: %q should start with %q", c.job, err, c.want)
		assert.NotContains(t, err.Error(), "\n")
		var se *Error
		require.True(t, errors.As(err, &se))
		assert.True(t, strings.HasPrefix(se.Key, "job "), se.Key)
	}
	// Without a topology the network is the star of workers hosts.
	_, err := apply(t, "workers: 4\njobs: [{name: x, ranks: [h0, h4]}]")
	assert.EqualError(t, err, `job x: ranks: "h4": the network has no such host NIC or GPU (the star of workers=4 has h0..h3)`)
	// A second NIC exists where a host has a second link.
	cfg, err := apply(t, "topology: {kind: dims, dims: [{size: 2, kind: ring, links_per_host: 2}, {size: 2}]}\njobs: [{ranks: ['h0:nic1', 'h1:nic1']}]")
	require.NoError(t, err)
	assert.Equal(t, []string{"h0:nic1", "h1:nic1"}, cfg.Jobs[0].Ranks)
}

func TestTopologyAndMemoryErrors(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{"topology: {kind: ring}", "topology: kind \"ring\""},
		{"topology: {kind: spine-leaf, leaves: 0, hosts_per_leaf: 4, spines: 1}", "topology: "},
		{"topology: {kind: star, leaves: 2}", "topology: leaves: not a key of a star topology"},
		{"topology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1, uplink: fast}", "topology: "},
		{"switch_memory: lots", "switch_memory: "},
	} {
		_, err := apply(t, c.yaml)
		require.Error(t, err, c.yaml)
		assert.True(t, strings.HasPrefix(err.Error(), c.want), "%s: %q should start with %q", c.yaml, err, c.want)
	}
}

// Override replaces what the override gives, adds faults, and replaces
// the netem settings as one.
func TestOverride(t *testing.T) {
	w, w2 := 4, 6
	s := &Scenario{Workers: &w, Mode: "ring", Tensor: "1MiB", Loss: "1%", Netem: "delay 1us", Faults: []string{"drop port=0"},
		Topology: &topo.Spec{Kind: "star"}, Jobs: []Job{{Name: "a"}}}
	s.Override(&Scenario{Workers: &w2, Tensor: "2MiB", Faults: []string{"dup port=1"}})
	assert.Equal(t, 6, *s.Workers)
	assert.Equal(t, "ring", s.Mode, "not given: kept")
	assert.Equal(t, "2MiB", s.Tensor)
	assert.Equal(t, []string{"drop port=0", "dup port=1"}, s.Faults)
	assert.Equal(t, "delay 1us loss 1%", s.NetemSpec(), "no netem in the override: kept")
	assert.Equal(t, "star", s.Topology.Kind)

	s.Override(&Scenario{Corrupt: "1%", Topology: &topo.Spec{Kind: "spine-leaf"}, SwitchMemory: "1MiB", Jobs: []Job{{Name: "b"}}})
	assert.Equal(t, "corrupt 1%", s.NetemSpec(), "a netem key replaces all of them")
	assert.Equal(t, "spine-leaf", s.Topology.Kind)
	assert.Equal(t, "1MiB", s.SwitchMemory)
	assert.Equal(t, []Job{{Name: "b"}}, s.Jobs)

	empty := &Scenario{}
	empty.Override(&Scenario{})
	assert.Equal(t, &Scenario{}, empty)
}

// A scenario with a topology and jobs survives Marshal and Parse.
func TestMarshalRoundTripTopologyJobs(t *testing.T) {
	s, err := Parse([]byte(twoJobs))
	require.NoError(t, err)
	b, err := s.Marshal()
	require.NoError(t, err)
	back, err := Parse(b)
	require.NoError(t, err, "%s", b)
	assert.True(t, reflect.DeepEqual(s, back), "%s", b)
	c1, c2 := emu.DefaultConfig(), emu.DefaultConfig()
	require.NoError(t, s.Apply(&c1))
	require.NoError(t, back.Apply(&c2))
	assert.Equal(t, c1.Jobs, c2.Jobs)
	d1, err := c1.Topology.Describe()
	require.NoError(t, err)
	d2, err := c2.Topology.Describe()
	require.NoError(t, err)
	assert.Equal(t, d1, d2)
}
