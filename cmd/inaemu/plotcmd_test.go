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

// plot psn draws an emulated run's capture: one connection per rank, each
// from its sender's link, with the retransmissions the run reported.
func TestPlotPSN(t *testing.T) {
	dir := t.TempDir()
	pcap, svg := filepath.Join(dir, "run.pcapng"), filepath.Join(dir, "psn.svg")
	code, out, errOut := runCLI("run", "--workers", "3", "--tensor", "64KiB", "--msg-len", "8", "--loss", "1%", "--timeout", "8", "--seed", "2", "--pcap", pcap, "--json")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	var run struct {
		Retransmissions int `json:"retransmissions"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &run))
	code, out, errOut = runCLI("plot", "psn", pcap, "--out", svg, "--json")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	var got struct {
		Connections int `json:"connections"`
		Drawn       []struct {
			Conn   string         `json:"connection"`
			Points map[string]int `json:"points"`
		} `json:"drawn"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, 3, got.Connections)
	resent := 0
	for i, c := range got.Drawn {
		assert.True(t, strings.HasSuffix(c.Conn, []string{"on port0", "on port1", "on port2"}[i]), c.Conn)
		resent += c.Points["retransmission"] + c.Points["fault"]
	}
	assert.GreaterOrEqual(t, resent, run.Retransmissions, "every retransmission the run reported is drawn (faulted ones as faults)")
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	assert.Contains(t, string(b), "<svg")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plot", "psn", pcap}, "need --out"},
		{[]string{"plot", "psn", pcap, "--out", filepath.Join(dir, "x.gif")}, "want a .svg, .png or .pdf file"},
		{[]string{"plot", "psn", filepath.Join(dir, "missing.pcapng"), "--out", svg}, "missing.pcapng"},
		{[]string{"plot", "bars"}, `unknown picture "bars"`},
	} {
		code, _, errOut := runGuarded(c.args...)
		oneLine(t, code, errOut, "inaemu plot", c.want)
	}
}

// plot sweep draws bandwidth against a parameter of run --json results
// (here the worker count) and refuses a parameter the results lack.
func TestPlotSweep(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, w := range []string{"2", "4"} {
		code, out, errOut := runCLI("run", "--workers", w, "--tensor", "64KiB", "--seed", "1", "--json")
		require.Equal(t, 0, code, "%s%s", out, errOut)
		f := filepath.Join(dir, "w"+w+".json")
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
		files = append(files, f)
	}
	png := filepath.Join(dir, "bw.png")
	code, out, errOut := runCLI(append([]string{"plot", "sweep", "--x", "workers", "--out", png}, files...)...)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	b, err := os.ReadFile(png)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(b[:4]))
	code, _, errOut = runGuarded(append([]string{"plot", "sweep", "--x", "loss", "--out", png}, files...)...)
	oneLine(t, code, errOut, "inaemu plot", "--x loss: the results have no such parameter")
	code, _, errOut = runGuarded("plot", "sweep", "--x", "workers", "--out", png, filepath.Join(dir, "none.json"))
	oneLine(t, code, errOut, "inaemu plot", "none.json")
}
