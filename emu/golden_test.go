package emu_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
)

// goldenCaptures pins the star's behaviour across the rebuild of the core
// as a graph (and any later change): each scenario's pcapng must hash to
// what the commit before that work wrote (b26faa8). Scenarios vary the
// mode, transport, dtype, release rule, NIC profile, netem impairments and
// deterministic events (spoof included). A change that moves any frame,
// timestamp or fault comment on the star fails here; if the change is
// meant, say why in its commit and update the hash.
var goldenCaptures = []struct {
	name     string
	scenario string
	sha256   string
}{
	{"netreduce-v2ipv4-f32-loss", `
workers: 4
tensor: 256KiB
msg_len: 16
seed: 11
netem: "loss 0.2% duplicate 0.5% corrupt 0.2% delay 2us 100ns reorder 1% gap 4"
faults: ["drop port=1 dir=out class=data nth=3"]
`, "0f721c346c871e2be7108731720bc9bbae90fe192660cb3e97d323ed9aeca393"},
	{"ring-v2ipv6-i32-reorder", `
workers: 5
mode: ring
tensor: 200KiB
dtype: i32
transport: v2-ipv6
msg_len: 8
seed: 3
netem: "reorder 5% gap 3 duplicate 2%"
`, "e164cf6c0723ed66b1f5d1f601eb0deab6f1f57076f76b2bf08567f1e0c873f9"},
	{"netreduce-v1-f16-paper-events", `
workers: 3
window: 4
tensor: 96KiB
dtype: f16
transport: v1
release: paper
msg_len: 4
mtu: 512
seed: 5
timeout: 8
faults:
  - "drop port=0 dir=in class=data nth=2"
  - "corrupt port=2 dir=out class=data nth=4"
  - "delay=30us port=1 dir=in class=ack nth=1"
`, "eb859062f7373ac5a66c30cca09c91a3dc90e3580b57f8c90c01d7a215859364"},
	{"netreduce-spoof-rxe", `
workers: 4
tensor: 128KiB
msg_len: 8
nic: rxe
seed: 9
link: 100G
latency: 500ns
faults: ["spoof=2 port=1 class=data nth=5", "hold=3 port=3 dir=in class=data nth=2"]
`, "3baa5e5b4e7818b11109d8693fcedea54d6e7d8f56f439a5915899ff04d9bf35"},
	{"ring-v2ipv4-gemodel-queue", `
workers: 6
mode: ring
tensor: 300KiB
msg_len: 4
queue: 20
seed: 21
timeout: 10
netem: "loss gemodel 1% 50% 50%"
`, "ed0cef4f321e0843b584b4e12a32bbda6cf4e8dbe2c77f251a7f03dac0fe6756"},
}

func goldenCapture(t *testing.T, text string) []byte {
	t.Helper()
	b, res := scenarioCapture(t, text)
	require.NotZero(t, res.Faults.Lost+res.Faults.Dropped+res.Faults.Corrupted+res.Faults.Reordered+res.Faults.Spoofed+res.Faults.Held+res.Faults.Delayed,
		"a golden scenario must exercise its faults")
	return b
}

// scenarioCapture runs a scenario (YAML) that must end exact and returns
// its capture.
func scenarioCapture(t *testing.T, text string) ([]byte, *emu.Result) {
	t.Helper()
	s, err := scenario.Parse([]byte(text))
	require.NoError(t, err)
	cfg := emu.DefaultConfig()
	require.NoError(t, s.Apply(&cfg))
	var buf bytes.Buffer
	cfg.Capture = &buf
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	return buf.Bytes(), res
}

func TestGoldenCaptures(t *testing.T) {
	for _, g := range goldenCaptures {
		t.Run(g.name, func(t *testing.T) {
			sum := sha256.Sum256(goldenCapture(t, g.scenario))
			require.Equal(t, g.sha256, hex.EncodeToString(sum[:]), "the star's capture changed")
		})
	}
}
