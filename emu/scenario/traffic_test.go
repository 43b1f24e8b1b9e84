package scenario

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
)

const trafficScenario = `
workers: 4
msg_len: 4
seed: 5
jobs:
  - name: bg
    mode: traffic
    ranks: [h0, h1, h2]
    bin: 20us
    depth: 8
    flows:
      - {from: h1, to: h0, bytes: 1MB, start: 10us, rate: 5G}
      - {from: h2, to: h0, bytes: 64KiB}
  - {name: in, mode: traffic, ranks: [h1, h2, h3], traffic: incast, sink: h1, tensor: 128KiB, rate: 2Gbit}
`

// TestTrafficScenario: a scenario's traffic jobs, listed flows with their
// sizes, times and rates in the flags' spellings and a pattern, become
// the jobs' flows, and run exact.
func TestTrafficScenario(t *testing.T) {
	s, err := Parse([]byte(trafficScenario))
	require.NoError(t, err)
	cfg := emu.DefaultConfig()
	require.NoError(t, s.Apply(&cfg))
	require.Len(t, cfg.Jobs, 2)
	bg := cfg.Jobs[0].Traffic
	require.NotNil(t, bg)
	assert.Equal(t, []emu.Flow{
		{From: "h1", To: "h0", Bytes: 1_000_000, Start: 10 * time.Microsecond, Rate: 5e9},
		{From: "h2", To: "h0", Bytes: 64 << 10},
	}, bg.Flows)
	assert.Equal(t, 20*time.Microsecond, bg.Bin)
	assert.Equal(t, 8, bg.Depth)
	in := cfg.Jobs[1].Traffic
	assert.Equal(t, &emu.Traffic{Pattern: "incast", Sink: "h1", Rate: 2e9}, in)

	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	require.Len(t, res.Jobs[0].Flows, 2)
	assert.Equal(t, int64(10*time.Microsecond), res.Jobs[0].Flows[0].StartNS)
	assert.Equal(t, int64(20*time.Microsecond), res.Jobs[0].Flows[0].BinNS)
	require.Len(t, res.Jobs[1].Flows, 2)
	for _, f := range res.Jobs[1].Flows {
		assert.Equal(t, "h1", f.To)
		assert.Equal(t, int64(128<<10), f.Bytes)
	}
}

// TestTrafficScenarioRefusals: a flow's bad key or value is a one-line
// error naming the job; a flow naming a host that is no rank of its job
// is refused by emu as a configuration error.
func TestTrafficScenarioRefusals(t *testing.T) {
	for _, c := range []struct{ yaml, want string }{
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h1, to: h0, size: 1MB}]}]`, `unknown key "size"`},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h1, to: h0, bytes: lots}]}]`, "bytes"},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h1, to: h0}]}]`, "bytes: want a size"},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h1, to: h0, bytes: 1MB, rate: fast}]}]`, "rate"},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h1, to: h0, bytes: 1MB, start: soon}]}]`, "start"},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h1, to: h0, bytes: 0}]}]`, `bytes: size "0"`},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], depth: 0}]`, "depth"},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], bin: 0s}]`, "bin"},
	} {
		s, err := Parse([]byte(c.yaml))
		if err == nil {
			cfg := emu.DefaultConfig()
			err = s.Apply(&cfg)
		}
		require.Error(t, err, c.yaml)
		assert.Contains(t, err.Error(), c.want, c.yaml)
		assert.NotContains(t, err.Error(), "\n")
	}
	for _, c := range []struct{ yaml, want string }{
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h3, to: h0, bytes: 1MB}]}]`, "h3 is not a rank of the job"},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h1, to: h1, bytes: 1MB}]}]`, "not to itself"},
		{`jobs: [{name: a, mode: traffic, ranks: [h0, h1], flows: [{from: h1, to: h0, bytes: 1MB, rate: 40G}]}]`, "above its link"},
		{`jobs: [{name: a, mode: ring, ranks: [h0, h1], traffic: incast}]`, "traffic job's"},
	} {
		s, err := Parse([]byte(c.yaml))
		require.NoError(t, err)
		cfg := emu.DefaultConfig()
		require.NoError(t, s.Apply(&cfg), c.yaml)
		err = cfg.Validate()
		var ce *emu.ConfigError
		require.True(t, errors.As(err, &ce), "%s: %v", c.yaml, err)
		assert.Contains(t, err.Error(), c.want)
		assert.NotContains(t, err.Error(), "\n")
	}
}
