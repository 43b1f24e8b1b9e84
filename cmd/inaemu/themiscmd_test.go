package main

import (
	"encoding/csv"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// twoDims: a 4-NPU ring at 200 GB/s and an 8-NPU switch at 100 GB/s
// (bytes per second per NPU), the brief's example spec.
const themisTwoDims = "ring:4:200GB/s:500ns,switch:8:100GB/s:700ns"

func themisJSON(t *testing.T, out string, v any) {
	t.Helper()
	require.Equal(t, 1, strings.Count(out, "\n"), "one line: %s", out)
	require.NoError(t, json.Unmarshal([]byte(out), v), "%s", out)
}

// TestThemisSchedule: a 1 MiB all-reduce in 4 chunks of 262144 bytes on
// themisTwoDims, checked against the paper's load model worked by hand
// (§4.4: a stage's load is the bytes it sends over the dimension's
// bandwidth; an RS sends (P−1)/P of what it holds, an AG (P−1) times it;
// the threshold is the time of a chunkSize/16 RS on the least-loaded
// dimension; A_K not charged):
//
//	chunk 0, loads (0, 0): gap 0 < threshold 3/4·16384/2e11 = 0.06144 µs:
//	  the baseline order RS1 RS2 AG2 AG1;
//	  dim1: RS 3/4·262144/2e11 + AG 3·65536/2e11 = 0.98304 + 0.98304 µs
//	  dim2: RS 7/8·65536/1e11 + AG 7·8192/1e11 = 0.57344 + 0.57344 µs
//	chunk 1, loads (1.96608, 1.14688): least loaded dim2, threshold
//	  7/8·16384/1e11 = 0.14336 µs < gap 0.8192 µs: greedy, dim2 first,
//	  RS2 RS1 AG1 AG2; dim2 adds 2 × 7/8·262144/1e11 = 4.58752 µs, dim1
//	  2 × 3/4·32768/2e11 = 0.24576 µs.
func TestThemisSchedule(t *testing.T) {
	args := []string{"themis", "schedule", "--dims", themisTwoDims, "--size", "1MiB", "--chunks", "4", "--charge-ak=false"}
	code, out, errOut := runGuarded(append(args, "--json")...)
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Schema    string `json:"schema"`
		NPUs      int    `json:"npus"`
		Scheduler string `json:"scheduler"`
		Dims      []struct {
			Kind string  `json:"kind"`
			BW   float64 `json:"bw_bytes_per_s"`
		} `json:"dims"`
		Collectives []struct {
			Collective string  `json:"collective"`
			Bytes      float64 `json:"bytes"`
			Chunks     []struct {
				Chunk     int       `json:"chunk"`
				Bytes     float64   `json:"bytes"`
				Order     []int     `json:"order"`
				Baseline  bool      `json:"baseline_order"`
				Gap       float64   `json:"gap_s"`
				Threshold float64   `json:"threshold_s"`
				Before    []float64 `json:"loads_before_s"`
				Added     []float64 `json:"added_s"`
				After     []float64 `json:"loads_after_s"`
				Stages    []struct {
					Dim  int     `json:"dim"`
					Op   string  `json:"op"`
					Sent float64 `json:"sent_bytes"`
				} `json:"stages"`
			} `json:"chunks"`
		} `json:"collectives"`
	}
	themisJSON(t, out, &doc)
	assert.Equal(t, "inaemu.themis.schedule/1", doc.Schema)
	assert.Equal(t, 32, doc.NPUs)
	assert.Equal(t, "themis", doc.Scheduler)
	require.Len(t, doc.Dims, 2)
	assert.Equal(t, 2e11, doc.Dims[0].BW)
	require.Len(t, doc.Collectives, 1)
	ch := doc.Collectives[0].Chunks
	require.Len(t, ch, 4)
	near := func(want, got []float64, what string) {
		t.Helper()
		require.Len(t, got, len(want), what)
		for i := range want {
			assert.InDelta(t, want[i], got[i], 1e-15, "%s[%d]", what, i)
		}
	}
	c0, c1 := ch[0], ch[1]
	assert.True(t, c0.Baseline)
	assert.Equal(t, []int{1, 2}, c0.Order)
	assert.Equal(t, 262144.0, c0.Bytes)
	assert.InDelta(t, 0.06144e-6, c0.Threshold, 1e-15)
	near([]float64{0, 0}, c0.Before, "chunk 0 before")
	near([]float64{1.96608e-6, 1.14688e-6}, c0.Added, "chunk 0 added")
	var ops []string
	for _, s := range c0.Stages {
		ops = append(ops, s.Op+strconv.Itoa(s.Dim))
	}
	assert.Equal(t, []string{"RS1", "RS2", "AG2", "AG1"}, ops)
	assert.Equal(t, 196608.0, c0.Stages[0].Sent)

	assert.False(t, c1.Baseline)
	assert.Equal(t, []int{2, 1}, c1.Order)
	assert.InDelta(t, 0.8192e-6, c1.Gap, 1e-15)
	assert.InDelta(t, 0.14336e-6, c1.Threshold, 1e-15)
	near([]float64{1.96608e-6, 1.14688e-6}, c1.Before, "chunk 1 before")
	near([]float64{0.24576e-6, 4.58752e-6}, c1.Added, "chunk 1 added")
	near([]float64{2.21184e-6, 5.7344e-6}, c1.After, "chunk 1 after")

	// The text table: one line per chunk with the same numbers in µs.
	code, out, errOut = runGuarded(args...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "4x8 = 32 NPUs")
	assert.Regexp(t, `(?m)^\s+0\s+RS1 RS2 AG2 AG1\s+baseline\s+0\.000\s+0\.061\s+\(0\.000, 0\.000\)\s+\(1\.966, 1\.147\)\s+\(1\.966, 1\.147\)$`, out)
	assert.Regexp(t, `(?m)^\s+1\s+RS2 RS1 AG1 AG2\s+greedy\s+0\.819\s+0\.143\s+\(1\.966, 1\.147\)\s+\(0\.246, 4\.588\)\s+\(2\.212, 5\.734\)$`, out)

	// CSV: a header and one row per chunk, loads per dimension.
	code, out, errOut = runGuarded(append(args, "--csv")...)
	require.Equal(t, 0, code, errOut)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 5)
	assert.Equal(t, []string{"collective", "name", "chunk", "bytes", "stages", "order", "baseline_order", "gap_s", "threshold_s",
		"before_s_d1", "before_s_d2", "added_s_d1", "added_s_d2", "after_s_d1", "after_s_d2"}, rows[0])
	assert.Equal(t, []string{"1", "all-reduce", "1", "262144", "RS2 RS1 AG1 AG2", "2,1", "false"}, rows[2][:7])
	added, _ := strconv.ParseFloat(rows[2][12], 64)
	assert.InDelta(t, 4.58752e-6, added, 1e-15)

	// The baseline scheduler: every chunk in the baseline order.
	code, out, _ = runGuarded("themis", "schedule", "--dims", themisTwoDims, "--size", "1MiB", "--chunks", "4", "--scheduler", "baseline", "--csv")
	require.Equal(t, 0, code)
	rows, _ = csv.NewReader(strings.NewReader(out)).ReadAll()
	for _, r := range rows[1:] {
		assert.Equal(t, "RS1 RS2 AG2 AG1", r[4])
	}
}

// TestThemisRunByHand: one chunk of a 1 MiB all-reduce on one ring of 4
// NPUs at 100 GB/s with a 1 µs step latency and 2 links per NPU. By the
// flow model (a stage is steps × latency, then its bytes at the
// dimension's bandwidth): RS 3 µs + 3/4·1048576/1e11 s = 3 + 7.86432 µs,
// AG 3 µs + 3·262144/1e11 s the same, 21.72864 µs in all; each NPU sends
// 1572864 bytes, 786432 per link, ×4 NPUs in total; utilisation
// 1572864 / (1e11 · 21.72864e-6). Its timeline is one 100 µs window,
// active 21.72864 % of it.
func TestThemisRunByHand(t *testing.T) {
	tl := filepath.Join(t.TempDir(), "timeline.csv")
	code, out, errOut := runGuarded("themis", "run", "--dims", "ring:4:100GB/s:1us:2", "--size", "1MiB", "--chunks", "1", "--scheduler", "baseline", "--json", "--timeline", tl)
	require.Equal(t, 0, code, errOut)
	var doc struct {
		Schema      string  `json:"schema"`
		TimeNs      int64   `json:"time_ns"`
		Seconds     float64 `json:"seconds"`
		Utilisation float64 `json:"utilisation"`
		Policy      string  `json:"policy"`
		Active      int     `json:"active_per_dim"`
		Traffic     []struct {
			Dim          int     `json:"dim"`
			BytesPerNPU  float64 `json:"bytes_per_npu"`
			BytesPerLink float64 `json:"bytes_per_link"`
			BytesTotal   float64 `json:"bytes_total"`
			BusyNs       int64   `json:"busy_ns"`
			Utilisation  float64 `json:"utilisation"`
		} `json:"traffic"`
	}
	themisJSON(t, out, &doc)
	assert.Equal(t, "inaemu.themis.run/1", doc.Schema)
	assert.Equal(t, "fifo", doc.Policy)
	assert.Equal(t, 1, doc.Active)
	want := 21.72864e-6
	assert.InDelta(t, want, doc.Seconds, 1e-15)
	assert.Equal(t, int64(21729), doc.TimeNs)
	require.Len(t, doc.Traffic, 1)
	tr := doc.Traffic[0]
	assert.InDelta(t, 1572864, tr.BytesPerNPU, 1e-6)
	assert.InDelta(t, 786432, tr.BytesPerLink, 1e-6)
	assert.InDelta(t, 4*1572864, tr.BytesTotal, 1e-6)
	assert.Equal(t, int64(21729), tr.BusyNs)
	assert.InDelta(t, 1572864/(1e11*want), tr.Utilisation, 1e-12)
	assert.InDelta(t, 1572864/(1e11*want), doc.Utilisation, 1e-12)

	b, err := os.ReadFile(tl)
	require.NoError(t, err)
	rows, err := csv.NewReader(strings.NewReader(string(b))).ReadAll()
	require.NoError(t, err)
	require.Equal(t, [][]string{{"collective", "window", "start_us", "d1_activity", "d1_serving"}, {"1", "0", "0.000", "0.217286", "0.217286"}}, rows)
}

// TestThemisRunWorkload: a workload's collectives run one after the
// other: the run's time is the sum of each alone, its bytes the sum, and
// a collective on dim 2 only sends nothing on dim 1. The CSV has a row
// per collective and dimension, one "all" per collective and the totals.
func TestThemisRunWorkload(t *testing.T) {
	dir := t.TempDir()
	wl := filepath.Join(dir, "w.yaml")
	require.NoError(t, os.WriteFile(wl, []byte("collectives:\n  - {name: grads, collective: all-reduce, size: 4MiB}\n  - {collective: all-gather, size: 1MiB, dims: [2]}\n"), 0o644))
	type runDoc struct {
		Seconds     float64 `json:"seconds"`
		Collectives []struct {
			Name    string  `json:"name"`
			Seconds float64 `json:"seconds"`
			StartNs int64   `json:"start_ns"`
			Dims    []int   `json:"involved_dims"`
			Traffic []struct {
				BytesPerNPU float64 `json:"bytes_per_npu"`
			} `json:"traffic"`
		} `json:"collectives"`
		Traffic []struct {
			BytesPerNPU float64 `json:"bytes_per_npu"`
		} `json:"traffic"`
	}
	base := []string{"themis", "run", "--dims", themisTwoDims, "--chunks", "8", "--policy", "scf", "--json"}
	code, out, errOut := runGuarded(append(base, "--workload", wl)...)
	require.Equal(t, 0, code, errOut)
	var all runDoc
	themisJSON(t, out, &all)
	require.Len(t, all.Collectives, 2)
	assert.Equal(t, "grads", all.Collectives[0].Name)
	assert.Equal(t, "2:all-gather", all.Collectives[1].Name)
	assert.Equal(t, []int{2}, all.Collectives[1].Dims)
	assert.Zero(t, all.Collectives[1].Traffic[0].BytesPerNPU)
	// An all-gather of 1 MiB out per NPU on the 8-NPU switch: each NPU
	// sends the 7/8 it did not hold.
	assert.InDelta(t, 7.0/8*(1<<20), all.Collectives[1].Traffic[1].BytesPerNPU, 1e-6)

	var one, two runDoc
	code, out, _ = runGuarded(append(base, "--size", "4MiB")...)
	require.Equal(t, 0, code)
	themisJSON(t, out, &one)
	// The second alone, through a one-entry workload (JSON this time).
	w2 := filepath.Join(dir, "w2.json")
	require.NoError(t, os.WriteFile(w2, []byte(`{"collectives": [{"collective": "all-gather", "size": "1MiB", "dims": [2]}]}`), 0o644))
	code, out, errOut = runGuarded(append(base, "--workload", w2)...)
	require.Equal(t, 0, code, errOut)
	themisJSON(t, out, &two)
	assert.Equal(t, one.Seconds, all.Collectives[0].Seconds)
	assert.Equal(t, two.Seconds, all.Collectives[1].Seconds)
	assert.InDelta(t, one.Seconds+two.Seconds, all.Seconds, 1e-15)
	assert.Equal(t, int64(math.Round(one.Seconds*1e9)), all.Collectives[1].StartNs)
	for d := range 2 {
		assert.InDelta(t, one.Traffic[d].BytesPerNPU+two.Traffic[d].BytesPerNPU, all.Traffic[d].BytesPerNPU, 1e-6)
	}

	code, out, errOut = runGuarded("themis", "run", "--dims", themisTwoDims, "--chunks", "8", "--workload", wl, "--csv")
	require.Equal(t, 0, code, errOut)
	rows, err := csv.NewReader(strings.NewReader(out)).ReadAll()
	require.NoError(t, err)
	require.Len(t, rows, 1+3*3) // header; (2 dims + all) × (2 collectives + total)
	assert.Equal(t, []string{"total", "", "all"}, rows[len(rows)-1][:3])
}

// TestThemisRunPlatform: on a Table 2 platform the paper's ordering of
// the methods (Fig. 8/10: Themis+SCF ≥ Themis+FIFO ≥ baseline in average
// utilisation for a large all-reduce) comes out of the command; a 1 GiB
// all-reduce in 64 chunks is the default.
func TestThemisRunPlatform(t *testing.T) {
	util := func(args ...string) float64 {
		code, out, errOut := runGuarded(append([]string{"themis", "run", "--platform", "3D-SW_SW_SW_hetero", "--json"}, args...)...)
		require.Equal(t, 0, code, errOut)
		var d struct {
			Utilisation float64 `json:"utilisation"`
			Chunks      int     `json:"chunks"`
			NPUs        int     `json:"npus"`
		}
		themisJSON(t, out, &d)
		assert.Equal(t, 64, d.Chunks)
		assert.Equal(t, 1024, d.NPUs)
		return d.Utilisation
	}
	b := util("--scheduler", "baseline")
	f := util("--policy", "fifo")
	s := util("--policy", "scf")
	t.Logf("baseline %.4f, themis+fifo %.4f, themis+scf %.4f", b, f, s)
	assert.Greater(t, f, b)
	assert.GreaterOrEqual(t, s, f)
	code, out, errOut := runGuarded("themis", "run", "--platform", "2D-SW_SW", "--size", "100MB")
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "2D-SW_SW (16x64 = 1024 NPUs")
	assert.Contains(t, out, "average utilisation")
}

// TestThemisBadInput: the and the brief's bad inputs, each one
// line naming the flag, exit 2, nothing on stdout.
func TestThemisBadInput(t *testing.T) {
	dir := t.TempDir()
	file := func(name, body string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	d := []string{"--dims", themisTwoDims}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"no platform", []string{"themis", "schedule"}, []string{"--platform", "--dims"}},
		{"both platforms", []string{"themis", "run", "--platform", "2D-SW_SW", "--dims", themisTwoDims}, []string{"--platform and --dims"}},
		{"unknown platform", []string{"themis", "run", "--platform", "5D-Torus"}, []string{"--platform", `"5D-Torus"`, "3D-SW_SW_SW_homo"}},
		{"zero chunks", append([]string{"themis", "schedule", "--chunks", "0"}, d...), []string{"--chunks 0"}},
		{"dim of one NPU", []string{"themis", "run", "--dims", "ring:1:100GB/s"}, []string{"--dims", "dim1", "at least 2"}},
		{"unknown kind", []string{"themis", "schedule", "--dims", "ring:4:100GB/s,torus:4:100GB/s"}, []string{"--dims", "dim2", `"torus"`}},
		{"switch not a power of two", []string{"themis", "schedule", "--dims", "switch:6:100GB/s"}, []string{"--dims", "power of two"}},
		{"bad bandwidth", []string{"themis", "schedule", "--dims", "ring:4:lots"}, []string{"--dims", "bandwidth"}},
		{"no active chunk", append([]string{"themis", "run", "--active", "0"}, d...), []string{"--active 0"}},
		{"unknown policy", append([]string{"themis", "run", "--policy", "lifo"}, d...), []string{"--policy", `"lifo"`}},
		{"unknown scheduler", append([]string{"themis", "run", "--scheduler", "random"}, d...), []string{"--scheduler", `"random"`}},
		{"unknown collective", append([]string{"themis", "schedule", "--collective", "all-to-all"}, d...), []string{"--collective", `"all-to-all"`}},
		{"size 0", append([]string{"themis", "schedule", "--size", "0"}, d...), []string{"--size", "size 0"}},
		{"json and csv", append([]string{"themis", "schedule", "--json", "--csv"}, d...), []string{"--json and --csv"}},
		{"less than a byte per chunk", append([]string{"themis", "schedule", "--size", "10", "--chunks", "11"}, d...), []string{"chunk"}},
		{"workload and size", append([]string{"themis", "run", "--workload", file("ok.yaml", "collectives: [{collective: all-reduce, size: 1MiB}]\n"), "--size", "1MiB"}, d...), []string{"--workload", "--size"}},
		{"workload missing", append([]string{"themis", "run", "--workload", filepath.Join(dir, "none.yaml")}, d...), []string{"--workload", "none.yaml"}},
		{"workload unknown field", append([]string{"themis", "run", "--workload", file("f.yaml", "collectives:\n  - {collective: all-reduce, size: 1MiB, when: 3}\n")}, d...), []string{"--workload", `unknown key "when"`}},
		{"workload empty list", append([]string{"themis", "schedule", "--workload", file("e.yaml", "collectives: []\n")}, d...), []string{"--workload", "empty"}},
		{"workload empty file", append([]string{"themis", "schedule", "--workload", file("z.yaml", "")}, d...), []string{"--workload", "empty workload"}},
		{"workload unknown collective", append([]string{"themis", "run", "--workload", file("c.json", `{"collectives": [{"collective": "broadcast", "size": "1MiB"}]}`)}, d...), []string{"collective 1", `"broadcast"`}},
		{"workload size 0", append([]string{"themis", "run", "--workload", file("s.yaml", "collectives: [{collective: all-reduce, size: 0}]\n")}, d...), []string{"collective 1", "size 0"}},
		{"workload dims out of range", append([]string{"themis", "run", "--workload", file("d.yaml", "collectives: [{collective: all-reduce, size: 1MiB, dims: [3]}]\n")}, d...), []string{"collective 1", "dimension 3", "1..2"}},
		{"no subcommand", []string{"themis"}, []string{"'schedule' or 'run'"}},
		{"unknown subcommand", []string{"themis", "plot"}, []string{`"plot"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runGuarded(c.args...)
			assert.Empty(t, out)
			prefix := "inaemu " + strings.Join(c.args[:min(2, len(c.args))], " ")
			if len(c.args) == 1 || !strings.HasPrefix(c.args[1], "s") && !strings.HasPrefix(c.args[1], "r") {
				prefix = "inaemu themis"
			}
			oneLine(t, code, errOut, prefix, c.want...)
		})
	}
}
