package main

import (
	"encoding/json"
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
	} {
		code, out, errOut := runGuarded(append([]string{"model"}, c.args...)...)
		assert.Empty(t, out)
		oneLine(t, code, errOut, "inaemu model: ", c.want)
	}
}
