package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSweepJSON(t *testing.T) {
	code, out, errOut := runCLI("sweep", "--workers", "3", "--tensor", "64KiB", "--msg-len", "8", "--seed", "5", "--seeds", "2",
		"--links", "10G,100G", "--loss", "0,1%", "--netem", "reorder 5% gap 3; duplicate 5%", "--json")
	require.Equal(t, 0, code, "stderr: %s", errOut)
	var doc struct {
		Workers int `json:"workers"`
		Rows    []struct {
			Mode, Link, Netem    string
			Runs, Exact          int
			Failed, Wrong        int
			AlgBW                float64 `json:"algbw_gbps"`
			AlgBWBytes           float64 `json:"algbw_gbytes_per_s"`
			Seeds                []uint64
			Retrans, TimeoutsRun float64
		} `json:"rows"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	assert.Equal(t, 3, doc.Workers)
	require.Len(t, doc.Rows, 2*2*4, "modes × links × (2 loss rates + 2 netem settings)")
	want := []string{"", "loss 1%", "reorder 5% gap 3", "duplicate 5%"}
	for i, r := range doc.Rows {
		assert.Equal(t, want[i%4], r.Netem)
		assert.Equal(t, []string{"10G", "100G"}[i/4%2], r.Link)
		assert.Equal(t, []string{"netreduce", "ring"}[i/8], r.Mode)
		assert.Equal(t, 2, r.Runs)
		assert.Equal(t, 2, r.Exact, "%+v", r)
		assert.Equal(t, []uint64{5, 6}, r.Seeds)
		assert.Greater(t, r.AlgBW, 0.0)
		assert.InDelta(t, r.AlgBW/8, r.AlgBWBytes, 1e-12, "GB/s is Gbit/s over 8")
	}
	// The same sweep is the same table: runs are deterministic.
	_, again, _ := runCLI("sweep", "--workers", "3", "--tensor", "64KiB", "--msg-len", "8", "--seed", "5", "--seeds", "2",
		"--links", "10G,100G", "--loss", "0,1%", "--netem", "reorder 5% gap 3; duplicate 5%", "--json")
	assert.Equal(t, out, again)
}

func TestSweepTable(t *testing.T) {
	code, out, _ := runCLI("sweep", "--workers", "2", "--tensor", "16KiB", "--seed", "1", "--seeds", "1", "--modes", "ring", "--loss", "0")
	require.Equal(t, 0, code)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	assert.Contains(t, lines[1], "algbw(GB/s)")
	assert.Regexp(t, `^ring\s+10G\s+none\s+1\s+1\s+0\s+0\s`, lines[2])
}

func TestSweepUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--seeds", "0"}, "--seeds 0"},
		{[]string{"--modes", "tree"}, "--modes"},
		{[]string{"--links", "fast"}, "--links"},
		{[]string{"--loss", "lots"}, "--loss"},
		{[]string{"--loss", "", "--netem", ""}, "nothing to sweep"},
		{[]string{"--netem", "reorder"}, "netem"},
		{[]string{"--latency", "-1us"}, "--latency"},
	} {
		code, out, errOut := runCLI(append([]string{"sweep", "--tensor", "16KiB"}, c.args...)...)
		assert.Equal(t, exitUsage, code, "%v", c.args)
		assert.Empty(t, out, "%v", c.args)
		assert.Contains(t, errOut, c.want, "%v", c.args)
		assert.Equal(t, 1, strings.Count(strings.TrimSpace(errOut), "\n")+1, "one line: %q", errOut)
	}
}
