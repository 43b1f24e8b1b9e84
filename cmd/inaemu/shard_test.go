package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/conformance"
)

// walls zeroes a --json report's wall times, the only numbers a merge
// does not reproduce.
var wallRE = regexp.MustCompile(`"wall_ns":\d+`)

func noWalls(s string) string { return wallRE.ReplaceAllString(s, `"wall_ns":0`) }

// The CLI's sharding end to end: three shard runs (one in the index
// Kubernetes gives, one in Slurm's) merge with 'inaemu merge' into the
// --json report of the unsharded run, byte for byte but the wall times;
// -j 3 prints that report too; the exit status follows the verdict.
func TestConformanceShardsMergeCLI(t *testing.T) {
	dir := t.TempDir()
	args := []string{"conformance", "--suite", "aggregation", "--release", "paper", "--seed", "2", "--out", filepath.Join(dir, "cex"), "--json"}
	code, whole, errOut := runCLI(args...)
	require.Equal(t, 1, code, errOut)
	var files []string
	for i, env := range []map[string]string{
		{"JOB_COMPLETION_INDEX": "0"},
		{"SLURM_ARRAY_TASK_ID": "5", "SLURM_ARRAY_TASK_MIN": "4"},
		nil,
	} {
		shard := "3"
		if env == nil {
			shard = "2/3"
		}
		for k, v := range env {
			t.Setenv(k, v)
		}
		code, out, errOut := runCLI(append(args, "--shard", shard)...)
		for k := range env {
			require.NoError(t, os.Unsetenv(k))
		}
		require.Equal(t, 1, code, errOut)
		var r conformance.Report
		require.NoError(t, json.Unmarshal([]byte(out), &r))
		require.Equal(t, &conformance.Shard{Index: i, Of: 3}, r.Shard)
		f := filepath.Join(dir, filepath.Base(t.Name())+string(rune('a'+i))+".json")
		require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
		files = append(files, f)
	}
	code, merged, errOut := runCLI("merge", "--json", files[2], files[0], files[1])
	require.Equal(t, 1, code, errOut)
	assert.Equal(t, noWalls(whole), noWalls(merged))
	code, text, _ := runCLI("merge", files[1], files[0], files[2])
	require.Equal(t, 1, code)
	assert.Contains(t, text, "FAILS (83 cases")
	assert.Contains(t, text, "3 shards merged")

	code, jobs, errOut := runCLI(append(args, "-j", "3")...)
	require.Equal(t, 1, code, errOut)
	assert.Equal(t, noWalls(whole), noWalls(jobs))

	// Usage errors: one line, exit 2.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"conformance", "--shard", "3/3"}, `index "3" (from --shard) is not a whole number from 0 to 2`},
		{[]string{"conformance", "--shard", "x/3"}, `index "x"`},
		{[]string{"conformance", "--shard", "0/0"}, "want I/N"},
		{[]string{"conformance", "--shard", "4"}, "no shard index: give I/N, or set JOB_COMPLETION_INDEX"},
		{[]string{"conformance", "--shard", "0/2", "-j", "2"}, "--shard and --jobs: choose one"},
		{[]string{"conformance", "-j", "0"}, "--jobs 0: want 1..1024"},
		{[]string{"merge"}, "need the shard reports to merge"},
		{[]string{"merge", files[0]}, "shard 1/3 is missing"},
		{[]string{"merge", files[0], files[0], files[1]}, "shard 0/3 appears twice"},
		{[]string{"merge", filepath.Join(dir, "nope.json")}, "no such file"},
	} {
		code, out, errOut := runCLI(c.args...)
		assert.Equal(t, 2, code, "%v: %s", c.args, out)
		assert.Contains(t, errOut, c.want, "%v", c.args)
	}
	for body, want := range map[string]string{
		`{"rows":[]}`:  `is not a shard's report`,
		`{"foo":1}`:    "not a conformance --json report",
		`[1,2]`:        "not a --json report",
		`{"seed":"x"}`: "not a conformance --json report",
	} {
		f := filepath.Join(dir, "x.json")
		require.NoError(t, os.WriteFile(f, []byte(body), 0o644))
		code, _, errOut = runCLI("merge", f)
		assert.Equal(t, 2, code, body)
		assert.Contains(t, errOut, want, body)
	}
}

// A sweep's shards (cells k mod N) merge into the unsharded --json report
// byte for byte; more shards than cells leave some empty, which merge
// too; the text form of the merge is the run's table.
func TestSweepShardsMergeCLI(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sweep", "--workers", "3", "--tensor", "64KiB", "--seeds", "2", "--seed", "4", "--loss", "0,0.5%", "--links", "10G,100G", "--modes", "netreduce", "--json"}
	code, whole, errOut := runCLI(args...)
	require.Equal(t, 0, code, errOut)
	for _, of := range []int{3, 6} {
		var files []string
		for i := range of {
			code, out, errOut := runCLI(append(args, "--shard", strconv.Itoa(i)+"/"+strconv.Itoa(of))...)
			require.Equal(t, 0, code, errOut)
			f := filepath.Join(dir, "sweep-"+strconv.Itoa(of)+"-"+strconv.Itoa(i)+".json")
			require.NoError(t, os.WriteFile(f, []byte(out), 0o644))
			files = append([]string{f}, files...) // reversed
		}
		code, merged, errOut := runCLI(append([]string{"merge", "--json"}, files...)...)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, whole, merged, "%d shards", of)
		code, text, _ := runCLI(append([]string{"merge"}, files...)...)
		require.Equal(t, 0, code)
		_, wholeText, _ := runCLI(args[:len(args)-1]...)
		assert.Equal(t, wholeText, text)
		if of == 3 {
			code, _, errOut = runCLI("merge", files[0], files[1])
			assert.Equal(t, 2, code)
			assert.Contains(t, errOut, "is missing")
		}
	}
	other := filepath.Join(dir, "other.json")
	code, out, _ := runCLI("sweep", "--workers", "4", "--tensor", "64KiB", "--seeds", "1", "--loss", "0", "--shard", "1/2", "--json")
	require.Equal(t, 0, code)
	require.NoError(t, os.WriteFile(other, []byte(out), 0o644))
	code, _, errOut = runCLI("merge", filepath.Join(dir, "sweep-3-0.json"), other)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "shard 1/2, ")
}
