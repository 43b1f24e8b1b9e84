package scenario

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/tensor"
)

func writeScenario(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "scenario.yaml")
	require.NoError(t, os.WriteFile(p, []byte(text), 0o644))
	return p
}

const fullScenario = `
workers: 6
mode: ring
window: 4
msg_len: 32
mtu: 2048
tensor: 3MiB
dtype: f16
pattern: ramp
transport: v2-ipv6
link: 25Gbit
latency: 1.5us
queue: 64
seed: 1234
release: paper
timeout: 12
retry_cnt: 3
max_time: 2ms
netem: "delay 5us 1us"
loss: "1%"
reorder: "25% gap 5"
duplicate: "0.5%"
corrupt: "0.1%"
faults:
  - drop port=0 dir=out class=data nth=1
  - hold=3 port=5 dir=in class=data nth=10
`

func TestLoadScenarioEveryField(t *testing.T) {
	s, err := Load(writeScenario(t, fullScenario))
	require.NoError(t, err)
	seed, timeout, retry := uint64(1234), 12, 3
	want := Scenario{Workers: intp(6), Mode: "ring", Window: intp(4), MsgLen: intp(32), MTU: intp(2048), Tensor: "3MiB", DType: "f16",
		Pattern: "ramp", Transport: "v2-ipv6", Link: "25Gbit", Latency: "1.5us", Queue: intp(64), Seed: &seed,
		Release: "paper", Timeout: &timeout, RetryCnt: &retry, MaxTime: "2ms", Netem: "delay 5us 1us",
		Loss: "1%", Reorder: "25% gap 5", Duplicate: "0.5%", Corrupt: "0.1%",
		Faults: []string{"drop port=0 dir=out class=data nth=1", "hold=3 port=5 dir=in class=data nth=10"}}
	assert.Equal(t, want, *s)

	cfg := emu.DefaultConfig()
	require.NoError(t, s.Apply(&cfg))
	assert.Equal(t, 6, cfg.Workers)
	assert.Equal(t, emu.Ring, cfg.Mode)
	assert.Equal(t, 4, cfg.Window)
	assert.Equal(t, 32, cfg.MsgLen)
	assert.Equal(t, 2048, cfg.MTU)
	assert.Equal(t, int64(3<<20), cfg.TensorBytes)
	assert.Equal(t, tensor.F16, cfg.DType)
	wantPat, err := workload.ParsePattern("ramp")
	require.NoError(t, err)
	assert.Equal(t, wantPat, cfg.Pattern)
	assert.Equal(t, frames.V2IPv6, cfg.Transport)
	assert.Equal(t, 25e9, cfg.Link.Rate)
	assert.Equal(t, 1500*time.Nanosecond, cfg.Link.Latency)
	assert.Equal(t, 64, cfg.Link.Queue)
	assert.Equal(t, uint64(1234), cfg.Seed)
	assert.Equal(t, netreduce.Paper, cfg.Release)
	assert.Equal(t, uint8(12), cfg.Timeout)
	assert.Equal(t, uint8(3), cfg.RetryCnt)
	assert.Equal(t, 2*time.Millisecond, cfg.MaxVirtual)
	// netem and its shorthands make one setting.
	assert.Equal(t, 5*time.Microsecond, cfg.Netem.Delay)
	assert.Equal(t, time.Microsecond, cfg.Netem.Jitter)
	assert.InDelta(t, 0.01, cfg.Netem.Loss, 1e-12)
	assert.InDelta(t, 0.25, cfg.Netem.Reorder, 1e-12)
	assert.Equal(t, 5, cfg.Netem.Gap)
	assert.InDelta(t, 0.005, cfg.Netem.Duplicate, 1e-12)
	assert.InDelta(t, 0.001, cfg.Netem.Corrupt, 1e-12)
	require.Len(t, cfg.Events, 2)
	assert.Equal(t, faults.ActDrop, cfg.Events[0].Action)
	assert.Equal(t, 0, cfg.Events[0].Port)
	assert.Equal(t, faults.DirOut, cfg.Events[0].Dir)
	assert.Equal(t, faults.ClassData, cfg.Events[0].Class)
	assert.Equal(t, 1, cfg.Events[0].Nth)
	assert.Equal(t, faults.ActHold, cfg.Events[1].Action)
	assert.Equal(t, 3, cfg.Events[1].Hold)
	assert.Equal(t, 5, cfg.Events[1].Port)
	assert.Equal(t, "hold=3 port=5 dir=in class=data nth=10", cfg.Events[1].Spec)
	require.NoError(t, cfg.Validate())
}

// Fields a scenario leaves out keep the configuration's values.
func TestScenarioEmptyFieldsKeepDefaults(t *testing.T) {
	s, err := Load(writeScenario(t, "workers: 3\n"))
	require.NoError(t, err)
	cfg := emu.DefaultConfig()
	require.NoError(t, s.Apply(&cfg))
	want := emu.DefaultConfig()
	want.Workers = 3
	assert.Equal(t, want, cfg)

	cfg = emu.DefaultConfig()
	require.NoError(t, (&Scenario{}).Apply(&cfg))
	assert.Equal(t, emu.DefaultConfig(), cfg)
	assert.Equal(t, "", (&Scenario{}).NetemSpec())

	// seed, timeout and retry_cnt are pointers so that 0 can be given.
	s, err = Load(writeScenario(t, "seed: 0\ntimeout: 0\nretry_cnt: 0\n"))
	require.NoError(t, err)
	cfg = emu.DefaultConfig()
	cfg.Seed = 77
	require.NoError(t, s.Apply(&cfg))
	assert.Equal(t, uint64(0), cfg.Seed)
	assert.Equal(t, uint8(0), cfg.Timeout)
	assert.Equal(t, uint8(0), cfg.RetryCnt)
}

// A scenario file with nothing in it (or only comments) is a scenario that
// changes nothing, not an error.
func TestLoadScenarioEmptyFile(t *testing.T) {
	for _, text := range []string{"", "# just a comment\n", "---\n"} {
		s, err := Load(writeScenario(t, text))
		if assert.NoError(t, err, "file %q", text) {
			assert.Equal(t, Scenario{}, *s)
		}
	}
}

func TestLoadScenarioRejects(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"workers: 4\nworkerz: 5\n", "workerz"},
		{"msglen: 4\n", "msglen"},
		{"workers: eight\n", "line 1"},
		{"faults: drop\n", ""},
		{"seed: -1\n", ""},
		{"workers: [\n", ""},
	} {
		_, err := Load(writeScenario(t, c.text))
		require.Error(t, err, "%q", c.text)
		assert.Contains(t, err.Error(), "scenario.yaml", "the error names the file")
		assert.Contains(t, err.Error(), c.want)
	}
	_, err := Load(filepath.Join(t.TempDir(), "missing.yaml"))
	assert.Error(t, err)
}

func TestScenarioApplyErrorsNameTheField(t *testing.T) {
	for _, c := range []struct{ yaml, field string }{
		{"mode: fast", "mode"},
		{"tensor: 1.3B", "tensor"},
		{"tensor: lots", "tensor"},
		{"dtype: f64", "dtype"},
		{"pattern: stripes", "pattern"},
		{"transport: v3", "transport"},
		{"link: 10X", "link"},
		{"link: 0G", "link"},
		{"latency: soon", "latency"},
		{"latency: -1us", "latency"},
		{"max_time: forever", "max_time"},
		{"release: never", "release"},
		{"timeout: 32", "timeout"},
		{"timeout: -1", "timeout"},
		{"retry_cnt: 8", "retry_cnt"},
		{"retry_cnt: -1", "retry_cnt"},
		{"workers: -1", "workers"},
		{"workers: 1000000000000", "workers"},
		{"window: -3", "window"},
		{"msg_len: 256", "msg_len"},
		{"netem: \"loss\"", "netem"},
		{"netem: \"jitter 5us\"", "netem"},
		{"loss: \"200%\"", "netem"},
		{"duplicate: \"x\"", "netem"},
		{"faults: [\"explode port=1\"]", "fault"},
		{"faults: [\"drop port=one\"]", "fault"},
	} {
		s, err := Load(writeScenario(t, c.yaml+"\n"))
		require.NoError(t, err, c.yaml)
		cfg := emu.DefaultConfig()
		err = s.Apply(&cfg)
		require.Error(t, err, c.yaml)
		assert.True(t, strings.HasPrefix(err.Error(), c.field+":"), "%s: error %q should start with %q", c.yaml, err, c.field+":")
		var se *Error
		if assert.True(t, errors.As(err, &se), "%s: want *Error, got %T", c.yaml, err) {
			assert.Equal(t, c.field, se.Key)
		}
	}
}

func TestParseTransport(t *testing.T) {
	for in, want := range map[string]frames.Transport{
		"v2-ipv4": frames.V2IPv4, "v2": frames.V2IPv4, "ipv4": frames.V2IPv4, "RoCEv2": frames.V2IPv4,
		"v2-ipv6": frames.V2IPv6, "ipv6": frames.V2IPv6, "V2-IPv6": frames.V2IPv6,
		"v1": frames.V1, "rocev1": frames.V1,
	} {
		got, err := ParseTransport(in)
		if assert.NoError(t, err, in) {
			assert.Equal(t, want, got, in)
		}
	}
	for _, in := range []string{"", "v3", "ib", "v2-ipv5"} {
		_, err := ParseTransport(in)
		assert.Error(t, err, in)
	}
	// The names a Result reports parse back.
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		got, err := ParseTransport(tr.String())
		require.NoError(t, err, tr.String())
		assert.Equal(t, tr, got)
	}
}

// A scenario written with Marshal and loaded back gives the same Config.
func TestScenarioMarshalRoundTrip(t *testing.T) {
	orig, err := Load(writeScenario(t, fullScenario))
	require.NoError(t, err)
	seed0, zero := uint64(0), 0
	for _, s := range []*Scenario{
		orig,
		{},
		{Workers: intp(2), Seed: &seed0, Timeout: &zero, RetryCnt: &zero},
		{Mode: "netreduce", Tensor: "1.5KiB", Link: "100gbps", Latency: "0", Faults: []string{"delay=20us port=6 dir=out nth=3"}},
	} {
		b, err := s.Marshal()
		require.NoError(t, err)
		back, err := Load(writeScenario(t, string(b)))
		require.NoError(t, err, "%s", b)
		assert.True(t, reflect.DeepEqual(s, back), "scenario changed:\n%s\n%+v\n%+v", b, *s, *back)

		c1, c2 := emu.DefaultConfig(), emu.DefaultConfig()
		require.NoError(t, s.Apply(&c1))
		require.NoError(t, back.Apply(&c2))
		assert.Equal(t, c1, c2, "%s", b)
	}
}

// Applying a scenario with no netem keys leaves a configured netem alone;
// one with a netem key replaces it.
func TestScenarioNetemSpec(t *testing.T) {
	s := &Scenario{Netem: "delay 1us", Loss: "2%", Corrupt: "1%"}
	assert.Equal(t, "delay 1us loss 2% corrupt 1%", s.NetemSpec())
	s = &Scenario{Reorder: "10% gap 2", Duplicate: "3%"}
	assert.Equal(t, "reorder 10% gap 2 duplicate 3%", s.NetemSpec())

	cfg := emu.DefaultConfig()
	cfg.Netem.Loss = 0.5
	require.NoError(t, (&Scenario{Workers: intp(3)}).Apply(&cfg))
	assert.Equal(t, 0.5, cfg.Netem.Loss)
	require.NoError(t, (&Scenario{Duplicate: "1%"}).Apply(&cfg))
	assert.Zero(t, cfg.Netem.Loss)
	assert.InDelta(t, 0.01, cfg.Netem.Duplicate, 1e-12)
}

// A scenario's run is the same job as the equivalent Config.
func TestScenarioRuns(t *testing.T) {
	s, err := Load(writeScenario(t, `
workers: 4
mode: netreduce
tensor: 64KiB
msg_len: 8
link: 25G
latency: 2us
seed: 7
faults:
  - drop port=1 dir=in class=data nth=2
`))
	require.NoError(t, err)
	cfg := emu.DefaultConfig()
	require.NoError(t, s.Apply(&cfg))
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	assert.Equal(t, uint64(7), res.Seed)
	assert.Equal(t, int64(64<<10), res.Bytes)
	assert.Equal(t, uint64(1), res.Faults.Dropped)
	assert.False(t, math.IsNaN(res.AlgBWGbps))
}

func intp(v int) *int { return &v }
