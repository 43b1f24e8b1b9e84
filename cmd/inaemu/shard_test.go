package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
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
	notJSON := filepath.Join(dir, "x.json")
	require.NoError(t, os.WriteFile(notJSON, []byte(`{"rows":[]}`), 0o644))
	code, _, errOut = runCLI("merge", notJSON)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "not a conformance --json report")
}
