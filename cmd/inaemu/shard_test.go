package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
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

// A shard report's bookkeeping is checked before it is merged: a fail_at
// the shard does not own merged into "gbn FAILS (4611686018427387905
// cases)", a shard count of -1 panicked and one of 10^12 ran out of
// memory. Each is refused in one line naming the file and the field.
func TestMergeRefusesTamperedShards(t *testing.T) {
	dir := t.TempDir()
	shard := func(args []string, i int) []byte {
		code, out, errOut := runCLI(append(args, "--shard", strconv.Itoa(i)+"/2", "--json")...)
		require.Equal(t, 0, code, errOut)
		return []byte(out)
	}
	gbn := []string{"conformance", "--suite", "gbn", "--count", "4", "--seed", "1"}
	good := filepath.Join(dir, "gbn-1.json")
	require.NoError(t, os.WriteFile(good, shard(gbn, 1), 0o644))
	gbn0 := shard(gbn, 0)
	sweep := []string{"sweep", "--workers", "3", "--tensor", "64KiB", "--seeds", "2", "--seed", "4", "--loss", "0,0.5%", "--modes", "netreduce"}
	goodSweep := filepath.Join(dir, "sweep-1.json")
	require.NoError(t, os.WriteFile(goodSweep, shard(sweep, 1), 0o644))
	sweep0 := shard(sweep, 0)
	tera := func(m map[string]any) { // shard 0 of 10^12, the one case it owns run
		m["shard"] = map[string]any{"index": 0, "of": 1000000000000}
		prop(m)["cases"] = 1
	}
	for _, c := range []struct {
		name   string
		report []byte
		other  string
		tamper func(m map[string]any)
		want   string
	}{
		{"fail_at beyond the cases", gbn0, good, func(m map[string]any) { prop(m)["shard"].(map[string]any)["fail_at"] = 4611686018427387904 },
			"property gbn: fail_at 4611686018427387904: not a case of shard 0/2 (cases 0..3 with i mod 2 = 0)"},
		{"fail_at of the other shard", gbn0, good, func(m map[string]any) { prop(m)["passed"], prop(m)["shard"].(map[string]any)["fail_at"] = false, 1 },
			"property gbn: fail_at 1: not a case of shard 0/2"},
		{"fail_at of a passed property", gbn0, good, func(m map[string]any) { prop(m)["shard"].(map[string]any)["fail_at"] = 2 },
			"property gbn: fail_at 2, and passed"},
		{"cases past fail_at", gbn0, good, func(m map[string]any) { prop(m)["passed"], prop(m)["shard"].(map[string]any)["fail_at"] = false, 0 },
			"property gbn: cases 2: want 1, shard 0/2's cases up to its fail_at 0"},
		{"more cases than owned", gbn0, good, func(m map[string]any) { prop(m)["cases"] = 99 },
			"property gbn: cases 99: shard 0/2 owns 2 of the 4 cases"},
		{"transport twice", gbn0, good, func(m map[string]any) { prop(m)["shard"].(map[string]any)["transport"] = []int{2, 2} },
			"property gbn: transport: case 2 after case 2"},
		{"negative shard count", gbn0, good, func(m map[string]any) { m["shard"] = map[string]any{"index": 0, "of": -1} },
			"shard 0/-1: want index 0..N-1 of N shards"},
		{"10^12 shards", gbn0, "", tera, "shard 1/1000000000000 is missing"},
		{"10^12 shards and another run's", gbn0, good, tera, "gbn-1.json is shard 1/2, "},
		{"a sweep's cell of the other shard", sweep0, goodSweep, func(m map[string]any) { row(m)["point"] = 1 },
			"point 1: not a case of shard 0/2"},
		{"a sweep's counts", sweep0, goodSweep, func(m map[string]any) { row(m)["exact"] = 7 },
			"point 0: runs 2, seeds 2, exact 7, failed 0, wrong 0: want runs = seeds = exact + failed + wrong"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var m map[string]any
			require.NoError(t, json.Unmarshal(c.report, &m))
			c.tamper(m)
			b, err := json.Marshal(m)
			require.NoError(t, err)
			bad := filepath.Join(dir, "tampered.json")
			require.NoError(t, os.WriteFile(bad, b, 0o644))
			args := []string{"merge", bad, c.other}
			if c.other == "" {
				args = args[:2]
			}
			code, out, errOut := runGuarded(args...)
			assert.Empty(t, out)
			prefix := "inaemu merge: " + bad + ": "
			if strings.HasPrefix(c.name, "10^12") { // said of the set of reports
				prefix = "inaemu merge: "
			}
			oneLine(t, code, errOut, prefix, c.want)
		})
	}
}

// prop is a conformance report's first property, row a sweep report's
// first row, as decoded into a map.
func prop(m map[string]any) map[string]any { return m["properties"].([]any)[0].(map[string]any) }
func row(m map[string]any) map[string]any  { return m["rows"].([]any)[0].(map[string]any) }
