package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
)

func TestConformanceCLI(t *testing.T) {
	code, out, errOut := runCLI("conformance", "--help")
	require.Equal(t, 0, code, errOut)
	for _, f := range []string{"--suite", "--count", "--seed", "--release", "--out", "--json"} {
		assert.Contains(t, out, f)
	}
	for _, args := range [][]string{{"--suite", "nope"}, {"--count", "0"}, {"--release", "both"}, {"extra"}} {
		code, out, errOut := runCLI(append([]string{"conformance"}, args...)...)
		assert.Equal(t, 2, code, "%v", args)
		assert.Empty(t, out, "%v", args)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "%v: %q", args, errOut)
	}

	dir := t.TempDir()
	code, out, errOut = runCLI("conformance", "--count", "15", "--seed", "4", "--out", dir, "--json")
	require.Equal(t, 0, code, "%s\n%s", out, errOut)
	var doc struct {
		Seed       uint64 `json:"seed"`
		Properties []struct {
			Name           string  `json:"name"`
			Passed         bool    `json:"passed"`
			Cases          int     `json:"cases"`
			Counterexample *string `json:"counterexample"`
		} `json:"properties"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	require.Equal(t, uint64(4), doc.Seed)
	names := []string{}
	for _, p := range doc.Properties {
		names = append(names, p.Name)
		assert.True(t, p.Passed, p.Name)
		assert.Equal(t, 15, p.Cases, p.Name)
		assert.Nil(t, p.Counterexample, p.Name)
	}
	assert.Equal(t, []string{"aggregation/release=safe", "gbn", "icrc/emitted-frames-verify", "icrc/bit-flips-detected",
		"icrc/masked-fields-keep-icrc", "icrc/no-aggregate-from-corruption", "tenants/isolation", "multirack/exact", "schemes/exact", "inaps/exact", "congestion/invariants", "hier/exact"}, names)
	assert.Contains(t, string(must(json.Marshal(json.RawMessage(out)))), `"counterexample":null`)

	// The paper rule fails; the report names the counterexample, which exists.
	code, out, _ = runCLI("conformance", "--suite", "aggregation", "--release", "paper", "--count", "200", "--seed", "1", "--out", dir)
	require.Equal(t, 1, code, out)
	require.Contains(t, out, "FAILS")
	require.Contains(t, out, "counterexample: "+filepath.Join(dir, "aggregation-paper-"))
	require.Contains(t, out, "replay: inaemu run --scenario ")
	files, _ := filepath.Glob(filepath.Join(dir, "aggregation-paper-*"))
	require.Len(t, files, 2, "a scenario and its capture")
	for _, f := range files {
		st, err := os.Stat(f)
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(0))
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// A counterexample that cannot be written is exit 74 (EX_IOERR), one
// line naming --out, not a failure reported as if the files were there.
func TestConformanceOutUnwritable(t *testing.T) {
	notDir := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(notDir, nil, 0o644))
	code, out, errOut := runCLI("conformance", "--suite", "aggregation", "--release", "paper", "--count", "200", "--seed", "1", "--out", notDir)
	assert.Equal(t, exitIO, code, "%s\n%s", out, errOut)
	assert.Contains(t, out, "FAILS")
	assert.NotContains(t, out, "      counterexample: ")
	assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	assert.True(t, strings.HasPrefix(errOut, "inaemu conformance: --out "+notDir), errOut)
}

// The first counterexample write error is kept, whatever the types of the
// errors after it (atomic.Value panicked on a second error of another
// concrete type), and from many goroutines at once.
func TestConformanceFirstWriteError(t *testing.T) {
	var f firstError
	require.NoError(t, f.get())
	first := &os.PathError{Op: "open", Path: "/out/x.json", Err: syscall.ENOSPC}
	f.set(first)
	require.NotPanics(t, func() { f.set(errors.New("another kind")) })
	require.NotPanics(t, func() { f.set(syscall.EIO) })
	require.Same(t, first, f.get())

	var g firstError
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				g.set(fmt.Errorf("write %d", i))
			} else {
				g.set(&os.PathError{Op: "write", Path: fmt.Sprint(i), Err: syscall.ENOSPC})
			}
		}()
	}
	wg.Wait()
	require.Error(t, g.get())
}

// A device log whose writes failed (/dev/full) is named in one warning
// line when it is closed (conformance and run --dut close it so); a log
// written whole, or none, says nothing.
func TestConformanceDeviceLogWriteErrorWarns(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skipf("no /dev/full to fill: %v", err)
	}
	l, err := dut.CreateLog("/dev/full", "x")
	require.NoError(t, err)
	_, _ = l.Write([]byte("ready\n"))
	var w strings.Builder
	closeLog(&w, "conformance", l)
	require.Equal(t, "inaemu conformance: warning: device log /dev/full: no space left on device\n", w.String())

	w.Reset()
	l, err = dut.CreateLog(filepath.Join(t.TempDir(), "d.log"), "x")
	require.NoError(t, err)
	_, _ = l.Write([]byte("ready\n"))
	closeLog(&w, "run", l)
	closeLog(&w, "run", nil)
	require.Empty(t, w.String())
}

// A skipped property is not counted as one that holds: against ars the
// multi-rack property is skipped, and the summary says so (the whole run
// reads "8 of 8 properties hold, 1 skipped", not "9 of 9").
func TestConformanceSummaryCountsSkippedApart(t *testing.T) {
	code, out, stderr := runCLI("conformance", "--switch-program", "ars", "--suite", "multirack", "--count", "2", "--seed", "1")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, out, "multirack/exact                          skipped: ars has no multi-rack trees")
	require.Contains(t, out, "0 of 0 properties hold, 1 skipped")
}
