package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// 'inaemu model' evaluates Appendix A: the default (P = 32, n = 8,
// α = 1 µs, M = 10^8 B, B_intra = 100 GB/s, B_inter = 12.5 GB/s) and a
// Fig. 7-style grid, against times worked by hand from Eqs. (1)-(3).
func TestModelCommand(t *testing.T) {
	code, out, errOut := runCLI("model", "--json")
	require.Equal(t, 0, code, errOut)
	var rep struct {
		Rows []modelRow `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Rows, 1)
	r := rep.Rows[0]
	assert.InDelta(t, 15.562, r.TotalMS["fr"], 5e-4)
	assert.InDelta(t, 15.522, r.TotalMS["ta"], 5e-4)
	assert.InDelta(t, 9.765, r.TotalMS["pn"], 5e-4)
	assert.Equal(t, "pn", r.Fastest)
	assert.InDelta(t, 1.8667, r.FRPNExact, 1e-4)

	code, out, _ = runCLI("model", "--gpus", "1024", "--b-intra", "15.75GBps", "--alpha", "10us", "--ta-form", "bracketed", "--json")
	require.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.InDelta(t, 31.075, rep.Rows[0].TotalMS["ta"], 5e-4)
	assert.InDelta(t, 19.261, rep.Rows[0].TotalMS["pn"], 5e-4)

	// A grid: every combination is a row; FR wins where the bandwidth
	// ratio is under the threshold and α is small.
	code, out, _ = runCLI("model", "--scheme", "pn", "--scheme", "fr")
	require.Equal(t, 0, code)
	assert.Regexp(t, `\n\s+P\s+B_intra GB/s\s+alpha us\s+fr\s+pn\s+fastest\n`, out, "schemes in the model's order")
	code, out, _ = runCLI("model", "--gpus", "32,1024", "--b-intra", "15.75GBps,100GBps", "--alpha", "0.1us,100us")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Len(t, lines, 1+1+8+1, "title, header, 8 rows, TA's form")
	assert.Regexp(t, `^\s+32\s+15.75\s+0.1\s+15.506\s+34.224\s+19.113\s+23.113\s+fr$`, lines[2])
}

func TestModelBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--scheme", "nccl"}, "--scheme nccl"},
		{[]string{"--gpus", "30"}, "30 GPUs with 8 per machine"},
		{[]string{"--gpus", "8"}, "at least two machines"},
		{[]string{"--gpus", "x"}, "--gpus: x: want a whole number"},
		{[]string{"--per-host", "6", "--gpus", "36"}, "power of two"},
		{[]string{"--per-host", "0"}, "GPUs per machine 0"},
		{[]string{"--alpha", "-1us"}, "--alpha"},
		{[]string{"--size", "0"}, "--size 0"},
		{[]string{"--b-intra", "fast"}, "--b-intra"},
		{[]string{"--b-inter", "0"}, "--b-inter"},
		{[]string{"--ta-form", "both"}, `TA form "both"`},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--batch", "64"}, "--batch is for --train"},
		{[]string{"--overlap"}, "--overlap is for --train"},
		{[]string{"--train", "lenet"}, "--train lenet: want alexnet, vgg16, resnet50 or a .csv file"},
		{[]string{"--train", "alexnet", "--size", "1GB"}, "--size and --train"},
		{[]string{"--train", "alexnet", "--gpus", "32,64"}, "--train takes one --gpus"},
		{[]string{"--train", "alexnet", "--batch", "0"}, "--batch 0"},
		{[]string{"--train", "alexnet", "--fusion", "lots"}, "--fusion lots"},
	} {
		code, out, errOut := runGuarded(append([]string{"model"}, c.args...)...)
		assert.Empty(t, out)
		oneLine(t, code, errOut, "inaemu model: ", c.want)
	}
}

// The training-step model against NetReduce's Tables 7 and 9 (BS 32,
// FP16, V100s; docs/model.md): B_inter = 7 GB/s is the effective NIC
// bandwidth Table 7's NetReduce times imply for FP32 gradient bytes, B_intra
// = 150 GB/s is the NVLink figure of the paper's §3.4, α = 10 µs. Table 7
// (4 machines × 1 GPU): ring/NetReduce communication 1.5 and PN's gains
// within 3 points of 35.6, 24.5 and 6.9 %. Table 9 (4 × 8 GPUs): the
// ordering PN > TA > FR for every network, PN's gain over FR within 15 %
// of 68.8, 50.7 and 15.1 %; its gain over TA falls short (39.7 against
// 57.9 % for AlexNet: the model's TA cannot be as slow as NCCL's measured
// one while FR is as slow as measured, docs/model.md), so it is held to
// the model's own numbers within 20 points.
func TestModelTrainTables(t *testing.T) {
	type row struct {
		Model, Scheme string
		CommMS        float64            `json:"comm_ms"`
		Gain          map[string]float64 `json:"gain_over"`
	}
	run := func(args ...string) map[string]map[string]row {
		t.Helper()
		code, out, errOut := runCLI(append([]string{"model", "--train", "alexnet,vgg16,resnet50", "--b-inter", "7GBps", "--b-intra", "150GBps", "--alpha", "10us", "--json"}, args...)...)
		require.Equal(t, 0, code, errOut)
		var rep struct{ Rows []row }
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		got := map[string]map[string]row{}
		for _, r := range rep.Rows {
			if got[r.Model] == nil {
				got[r.Model] = map[string]row{}
			}
			got[r.Model][r.Scheme] = r
		}
		return got
	}
	t7 := run("--gpus", "4", "--per-host", "1", "--scheme", "fr,pn")
	for name, gain := range map[string]float64{"alexnet": 0.356, "vgg16": 0.245, "resnet50": 0.069} {
		m := t7[name]
		assert.InDelta(t, gain, m["pn"].Gain["fr"], 0.03, name)
		if name != "resnet50" { // Table 7's ResNet-50 ratio is 1.19: latency the model lacks
			assert.InDelta(t, 1.5, m["fr"].CommMS/m["pn"].CommMS, 0.01, name)
		}
	}
	// A network of one's own, and a broken one.
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "mine.csv"), filepath.Join(dir, "bad.csv")
	require.NoError(t, os.WriteFile(good, []byte("layer,bytes,forward_ms,backward_ms\nfc,100000000,1,2\n"), 0o644))
	require.NoError(t, os.WriteFile(bad, []byte("layer,bytes,forward_ms,backward_ms\nfc,many,1,2\n"), 0o644))
	code, out, errOut := runCLI("model", "--train", good, "--scheme", "pn", "--gpus", "4", "--per-host", "1", "--b-inter", "10GBps", "--alpha", "0")
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `mine.csv\s+95 MiB\s+pn\s+1\s+3.00\s+10.00\s+10.00\s+13.00\s+2461.5`, out, "one 10^8 B bucket at 10 GB/s after 3 ms of compute")
	code, out, errOut = runGuarded("model", "--train", bad)
	assert.Empty(t, out)
	oneLine(t, code, errOut, "inaemu model: ", `bad.csv: line 2: bytes "many"`)

	t9 := run("--scheme", "fr,ta,pn")
	for name, g := range map[string][2]float64{"alexnet": {0.688, 0.579}, "vgg16": {0.507, 0.421}, "resnet50": {0.151, 0.123}} {
		pn := t9[name]["pn"]
		assert.Positive(t, pn.Gain["ta"], name)
		assert.Greater(t, pn.Gain["fr"], pn.Gain["ta"], "%s: TA is faster than FR", name)
		assert.InEpsilon(t, g[0], pn.Gain["fr"], 0.15, "%s: PN over FR", name)
		assert.InDelta(t, g[1], pn.Gain["ta"], 0.20, "%s: PN over TA", name)
	}
}
