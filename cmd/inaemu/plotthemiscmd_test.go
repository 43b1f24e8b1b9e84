package main

import (
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/themis/flow"
)

// plotThemisJSON is plot themis --json's points.
type plotThemisJSON struct {
	Schema string `json:"schema"`
	Out    string `json:"out"`
	Title  string `json:"title"`
	Panels []struct {
		Source string `json:"source"`
		Title  string `json:"title"`
		BinNS  int64  `json:"bin_ns"`
		Dims   []struct {
			Dim    int    `json:"dim"`
			Name   string `json:"name"`
			Points []struct {
				Bin         int     `json:"bin"`
				StartMs     float64 `json:"start_ms"`
				ActivityPct float64 `json:"activity_pct"`
			} `json:"points"`
		} `json:"dims"`
	} `json:"panels"`
}

func plotThemis(t *testing.T, args ...string) plotThemisJSON {
	t.Helper()
	code, out, errOut := runCLI(append([]string{"plot", "themis", "--json"}, args...)...)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	var got plotThemisJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "inaemu.plot.themis/1", got.Schema)
	return got
}

// wantBins asserts a panel's points are the bins given: bin k at k × bin,
// its share × 100 %.
func wantBins(t *testing.T, got plotThemisJSON, panel int, bin float64, bins [][]float64) {
	t.Helper()
	p := got.Panels[panel]
	require.Len(t, p.Dims, len(bins))
	for d, want := range bins {
		s := p.Dims[d]
		assert.Equal(t, d+1, s.Dim)
		assert.Equal(t, "dim "+strconv.Itoa(d+1), s.Name)
		require.Len(t, s.Points, len(want), "dim %d", d+1)
		for k, v := range want {
			assert.Equal(t, k, s.Points[k].Bin)
			assert.InDelta(t, float64(k)*bin/1e6, s.Points[k].StartMs, 1e-9, "dim %d bin %d", d+1, k)
			assert.InDelta(t, 100*v, s.Points[k].ActivityPct, 1e-9, "dim %d bin %d", d+1, k)
		}
	}
}

// A hand-written hier report: the points drawn are its bins; the picture
// has the legend's dimensions.
func TestPlotThemis(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "run.json")
	require.NoError(t, os.WriteFile(in, []byte(`{"schema":"inaemu.run/1","jobs":[{"name":"job0","mode":"hier","hier":{"chunks":2,"scheduler":"baseline","policy":"fifo",
	"dims":[{"dim":1,"kind":"ring","timeline_chunks":[1,1,0.3]},{"dim":2,"kind":"switch","timeline_chunks":[0.25,0,0.75]}],"bin_ns":100000}}]}`), 0o644))
	svg := filepath.Join(dir, "fig9.svg")
	code, out, errOut := runCLI("plot", "themis", in, "--out", svg)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Equal(t, "inaemu plot: "+svg+": 1 panels, up to 3 bins\n", out)
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	for _, s := range []string{"<svg", "dim 1", "dim 2", "job0, baseline/fifo, 2 chunks", "time (ms)"} {
		assert.Contains(t, string(b), s)
	}
	png := filepath.Join(dir, "fig9.png")
	got := plotThemis(t, in, "--out", png, "--title", "by hand")
	assert.Equal(t, png, got.Out)
	assert.Equal(t, "by hand", got.Title)
	require.Len(t, got.Panels, 1)
	assert.Equal(t, in, got.Panels[0].Source)
	wantBins(t, got, 0, 100e3, [][]float64{{1, 1, 0.3}, {0.25, 0, 0.75}})
	b, err = os.ReadFile(png)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(b[:4]))
}

// A real hier run (dims:2x2, 64 KiB) and a real flow-level run (its
// --timeline CSV, and its flow.Result as JSON) each draw a panel whose
// points are the bins the run reported, read here from the run's own
// output.
func TestPlotThemisRealRuns(t *testing.T) {
	dir := t.TempDir()
	run := filepath.Join(dir, "hier.json")
	code, out, errOut := runCLI("run", "--mode", "hier", "--topology", "dims:2x2", "--tensor", "64KiB", "--chunks", "2", "--json")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.NoError(t, os.WriteFile(run, []byte(out), 0o644))
	var rep struct {
		Jobs []struct {
			Hier struct {
				BinNS int64 `json:"bin_ns"`
				Dims  []struct {
					Timeline []float64 `json:"timeline_chunks"`
				} `json:"dims"`
			} `json:"hier"`
		} `json:"jobs"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	require.Len(t, rep.Jobs, 1)
	h := rep.Jobs[0].Hier
	var hierBins [][]float64
	for _, d := range h.Dims {
		hierBins = append(hierBins, d.Timeline)
	}
	require.Len(t, hierBins, 2)

	csvFile := filepath.Join(dir, "timeline.csv")
	code, out, errOut = runCLI("themis", "run", "--dims", "switch:4:50e9,switch:4:25e9", "--size", "4MiB", "--timeline", csvFile)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	f, err := os.Open(csvFile)
	require.NoError(t, err)
	rows, err := csv.NewReader(f).ReadAll()
	f.Close()
	require.NoError(t, err)
	csvBins := [][]float64{nil, nil}
	for _, r := range rows[1:] {
		for d := range csvBins {
			v, err := strconv.ParseFloat(r[3+d], 64)
			require.NoError(t, err)
			csvBins[d] = append(csvBins[d], v)
		}
	}

	topo := themis.Topology{{Kind: "switch", Size: 4, BW: 50e9}, {Kind: "switch", Size: 4, BW: 25e9}}
	scheds, _, err := themis.Schedule(topo, "all-reduce", 4<<20, themis.Config{Scheduler: "themis", Chunks: 4})
	require.NoError(t, err)
	res, err := flow.Run(topo, scheds, flow.Config{})
	require.NoError(t, err)
	fj, err := json.Marshal(res)
	require.NoError(t, err)
	flowFile := filepath.Join(dir, "flow.json")
	require.NoError(t, os.WriteFile(flowFile, fj, 0o644))
	var flowBins [][]float64
	for _, d := range res.Dims {
		flowBins = append(flowBins, d.Activity)
	}

	got := plotThemis(t, run, csvFile, flowFile, "--out", filepath.Join(dir, "fig9.pdf"))
	require.Len(t, got.Panels, 3)
	assert.Equal(t, h.BinNS, got.Panels[0].BinNS)
	wantBins(t, got, 0, float64(h.BinNS), hierBins)
	wantBins(t, got, 1, 100e3, csvBins)
	wantBins(t, got, 2, float64(res.Bin.Nanoseconds()), flowBins)
	assert.Greater(t, len(csvBins[0]), 1, "the flow run spans several bins")
}

// Each bad input to plot themis is one line and exit 2, and no picture is
// written.
func TestPlotThemisBadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, []byte(body), 0o644))
		return f
	}
	svg := filepath.Join(dir, "x.svg")
	good := write("good.json", `{"jobs":[{"name":"j","mode":"hier","hier":{"bin_ns":100000,"dims":[{"dim":1,"timeline_chunks":[1]}]}}]}`)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plot", "themis", good}, "need --out"},
		{[]string{"plot", "themis", "--out", svg}, "need a run with an activity timeline"},
		{[]string{"plot", "themis", good, "--out", filepath.Join(dir, "x.gif")}, "want a .svg, .png or .pdf file"},
		{[]string{"plot", "themis", filepath.Join(dir, "missing.json"), "--out", svg}, "missing.json"},
		{[]string{"plot", "themis", write("text.json", "not json\n"), "--out", svg}, "text.json: neither JSON nor a timeline CSV"},
		{[]string{"plot", "themis", write("empty.json", ""), "--out", svg}, "empty.json: empty"},
		{[]string{"plot", "themis", write("ring.json", `{"schema":"inaemu.run/1","jobs":[{"name":"job0","mode":"ring"}]}`), "--out", svg}, "ring.json: no activity timeline: no job of mode hier"},
		{[]string{"plot", "themis", write("none.json", `{"jobs":[{"name":"j","hier":{"bin_ns":100000,"dims":[{"dim":1,"timeline_chunks":[]}]}}]}`), "--out", svg}, "no activity: every dimension's timeline is empty"},
		{[]string{"plot", "themis", good, write("trunc.json", `{"jobs":[{"name"`), "--out", svg}, "trunc.json: not JSON"},
	} {
		code, out, errOut := runGuarded(c.args...)
		oneLine(t, code, errOut, "inaemu plot", c.want)
		assert.Empty(t, out, c.args)
	}
	_, err := os.Stat(svg)
	assert.True(t, os.IsNotExist(err), "no picture is written from bad input")
}
