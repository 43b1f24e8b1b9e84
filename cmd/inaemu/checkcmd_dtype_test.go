package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/pcapio"
)

// TestCheckTakesTheCapturesDType: an f16 or i32 run's capture names its
// element type in the section comment, and check sums its results as that
// type without a flag (before, f16 captures failed agg-sum on thousands of
// frames and exited 1). --dtype on the command line still wins, which
// shows the rule is really judging: the same capture read as f32 fails.
// An f32 run's capture names nothing, as before.
func TestCheckTakesTheCapturesDType(t *testing.T) {
	dir := t.TempDir()
	for _, dt := range []string{"f16", "i32", "f32"} {
		f := filepath.Join(dir, dt+".pcapng")
		code, _, errOut := runCLI("run", "--workers", "4", "--dtype", dt, "--tensor", "64KiB", "--seed", "1", "--pcap", f)
		require.Zero(t, code, errOut)
		rd, err := pcapio.Open(f)
		require.NoError(t, err)
		comment := rd.SectionComment()
		rd.Close()
		if dt == "f32" {
			require.Empty(t, comment, "an f32 capture stays as it was")
		} else {
			require.Equal(t, "inaemu: dtype="+dt, comment)
		}
		code, out, errOut := runCLI("check", f)
		require.Zero(t, code, "%s\n%s", out, errOut)
		require.Contains(t, out, "result       conforms")
		if dt == "f32" {
			continue
		}
		code, out, _ = runCLI("check", "--dtype", "f32", f)
		require.Equal(t, 1, code, out)
		require.True(t, strings.Contains(out, "agg-sum"), out)
	}
}

// TestEmptyDTypeIsAUsageError: check and replay treat an empty --dtype
// alike: a usage error in one line, exit 2 (replay used the capture's
// type silently).
func TestEmptyDTypeIsAUsageError(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "f16.pcapng")
	code, _, errOut := runCLI("run", "--workers", "2", "--dtype", "f16", "--tensor", "4KiB", "--seed", "1", "--pcap", f)
	require.Zero(t, code, errOut)
	for _, args := range [][]string{
		{"check", "--dtype=", f},
		{"replay", "--through-switch", "--out", filepath.Join(dir, "out.pcapng"), "--dtype=", f},
	} {
		code, _, errOut := runCLI(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
		require.Contains(t, errOut, `--dtype: dtype "": want f32, i32 or f16`, args)
		require.Equal(t, 1, strings.Count(errOut, "\n"), "%v: one line: %s", args, errOut)
	}
	code, _, errOut = runCLI("replay", "--through-switch", "--out", filepath.Join(dir, "out.pcapng"), f)
	require.Zero(t, code, "the capture's type without the flag: %s", errOut)
}
