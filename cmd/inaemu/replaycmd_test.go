package main

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// outFrames are the RoCE frames a capture shows leaving the switch.
func outFrames(t *testing.T, fn string) []string {
	t.Helper()
	recs, names, err := pcapio.ReadAllNamed(fn)
	require.NoError(t, err)
	var v frames.View
	var out []string
	for _, r := range recs {
		if strings.HasSuffix(names[r.Info.InterfaceIndex], "-out") && v.Parse(r.Data) == nil {
			out = append(out, string(r.Data))
		}
	}
	sort.Strings(out)
	return out
}

// Replaying what entered the switch of a NetReduce run reproduces, byte
// for byte, every RoCE frame the switch sent in that run: the results
// (sums and fresh ICRCs) and the forwarded ACKs.
func TestReplayThroughSwitchReproducesTheRun(t *testing.T) {
	dir := t.TempDir()
	orig, replayed := filepath.Join(dir, "run.pcapng"), filepath.Join(dir, "replayed.pcapng")
	code, out, errOut := runCLI("run", "--workers", "4", "--tensor", "64KiB", "--msg-len", "8", "--seed", "3", "--pcap", orig)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	code, out, errOut = runCLI("replay", orig, "--through-switch", "--out", replayed)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "65 aggregations")
	want, got := outFrames(t, orig), outFrames(t, replayed)
	require.Greater(t, len(want), 250) // 260 results (65 aggregations × 4 connections) and the ACKs
	require.Equal(t, len(want), len(got))
	require.True(t, equalStrings(want, got), "the replayed switch output differs from the run's")

	for _, args := range [][]string{{"replay"}, {"replay", orig}, {"replay", orig, "--through-switch"}, {"replay", orig, "--tap", "ina0", "--through-switch"},
		{"replay", orig, "--tap", "ina0", "--pps", "10", "--topspeed"}, {"replay", orig, "--tap", "ina0", "--pps", "-3"},
		{"replay", orig, "--tap", "ina0", "--from", "no-such-iface"},
		{"replay", orig, "--through-switch", "--out", replayed, "--dtype", "f64"}} {
		code, _, errOut := runCLI(args...)
		require.Equal(t, 2, code, "%v", args)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "%v: %q", args, errOut)
	}
	code, _, _ = runCLI("replay", filepath.Join(dir, "missing.pcapng"), "--through-switch", "--out", replayed)
	require.Equal(t, 2, code)
}

func equalStrings(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// TestReplayTakesTheCapturesDType: replaying an f16 run's capture adds
// f16 as the run's switch did, because the capture names its element
// type; before, replay added every capture as f32 unless --dtype said
// otherwise, so its results differed from the run's. --dtype still wins.
func TestReplayTakesTheCapturesDType(t *testing.T) {
	dir := t.TempDir()
	orig, replayed := filepath.Join(dir, "run.pcapng"), filepath.Join(dir, "replayed.pcapng")
	code, out, errOut := runCLI("run", "--workers", "4", "--dtype", "f16", "--tensor", "64KiB", "--msg-len", "8", "--seed", "3", "--pcap", orig)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	code, out, errOut = runCLI("replay", orig, "--through-switch", "--out", replayed)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "dtype=f16")
	require.True(t, equalStrings(outFrames(t, orig), outFrames(t, replayed)), "the replayed switch output differs from the run's")
	code, out, errOut = runCLI("replay", orig, "--through-switch", "--out", replayed, "--dtype", "f32")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.False(t, equalStrings(outFrames(t, orig), outFrames(t, replayed)), "f16 payloads added as f32 came out the same")
}
