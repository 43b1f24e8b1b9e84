package graphs

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hierJSON is a run report as 'inaemu run --mode hier --json' prints it,
// cut to what matters: a job that is not hier, then a hier job of two
// dimensions, three 100 µs bins.
const hierJSON = `{"schema":"inaemu.run/1","mode":"hier","jobs":[
 {"name":"bg","mode":"traffic"},
 {"name":"job0","mode":"hier","hier":{"chunks":4,"scheduler":"themis","policy":"scf","schedule":["RS1 RS2 AG2 AG1"],
  "dims":[{"dim":1,"kind":"ring","size":2,"timeline_chunks":[1,0.5,0.25]},
          {"dim":2,"kind":"switch","size":2,"timeline_chunks":[0,1.5,0.125]}],"links":[],"bin_ns":100000}}]}`

// The points drawn are the input's bins: bin k at k × 0.1 ms, its
// activity × 100 %; a hier bin above 1 (stages of two chunks at once at
// different ranks) is drawn as it is and stretches the axis.
func TestThemisHier(t *testing.T) {
	runs, err := ReadThemisActivity("hier.json", strings.NewReader(hierJSON))
	require.NoError(t, err)
	require.Len(t, runs, 1)
	assert.Equal(t, "hier.json: job0, themis/scf, 4 chunks", runs[0].Label)
	c, err := NewThemisChart(runs, ThemisOptions{})
	require.NoError(t, err)
	assert.Equal(t, "Activity per dimension, share of each 100 µs (Themis Fig. 9)", c.Title)
	require.Len(t, c.Panels, 1)
	p := c.Panels[0]
	assert.Equal(t, int64(100000), p.BinNS)
	want := [][]float64{{1, 0.5, 0.25}, {0, 1.5, 0.125}}
	require.Len(t, p.Dims, 2)
	for d, s := range p.Dims {
		assert.Equal(t, d+1, s.Dim)
		assert.Equal(t, []string{"dim 1", "dim 2"}[d], s.Name)
		assert.Equal(t, []string{"ring", "switch"}[d], s.Kind)
		require.Len(t, s.Points, 3)
		for k, pt := range s.Points {
			assert.Equal(t, k, pt.Bin)
			assert.InDelta(t, 0.1*float64(k), pt.StartMs, 1e-12)
			assert.InDelta(t, 100*want[d][k], pt.ActivityPct, 1e-12)
		}
	}
	var b bytes.Buffer
	require.NoError(t, c.Write(&b, "svg"))
	svg := b.String()
	for _, s := range []string{"<svg", "dim 1", "dim 2", "hier.json: job0, themis/scf, 4 chunks", "time (ms)", "150"} {
		assert.Contains(t, svg, s)
	}
	for _, f := range []struct{ format, magic string }{{"png", "\x89PNG"}, {"pdf", "%PDF"}} {
		b.Reset()
		require.NoError(t, c.Write(&b, f.format))
		assert.Equal(t, f.magic, b.String()[:len(f.magic)], f.format)
	}
}

// A flow.Result as encoding/json writes it (Go field names, durations in
// ns) and the executor's --timeline CSV: two collectives, the second's
// windows at its start; every run its own panel, dims coloured alike.
func TestThemisFlowAndCSV(t *testing.T) {
	flow := `{"Time":250000,"Seconds":0.00025,"Dims":[{"Bytes":1,"Busy":250000,"Utilisation":0.5,"Activity":[1,1,0.5],"Serving":[1,1,0.5]},
	 {"Bytes":1,"Busy":1000,"Utilisation":0.1,"Activity":[0,0.01,0],"Serving":[0,0,0]}],"Utilisation":0.3,"Bin":100000,"Stages":[]}`
	csv := "collective,window,start_us,d1_activity,d2_activity,d1_serving,d2_serving\n" +
		"1,0,0.000,1.000000,0.000000,1.000000,0.000000\n" +
		"1,1,100.000,0.400000,0.600000,0.400000,0.600000\n" +
		"2,0,150.000,0.000000,1.000000,0.000000,1.000000\n"
	var runs []ThemisRun
	for _, in := range []struct{ name, body string }{{"flow.json", flow}, {"timeline.csv", csv}} {
		r, err := ReadThemisActivity(in.name, strings.NewReader(in.body))
		require.NoError(t, err, in.name)
		runs = append(runs, r...)
	}
	c, err := NewThemisChart(runs, ThemisOptions{Title: "baseline and Themis"})
	require.NoError(t, err)
	assert.Equal(t, "baseline and Themis", c.Title)
	require.Len(t, c.Panels, 2)
	type pt = ThemisPoint
	assert.Equal(t, []pt{{0, 0, 100}, {1, 0.1, 100}, {2, 0.2, 50}}, c.Panels[0].Dims[0].Points)
	assert.Equal(t, []pt{{0, 0, 0}, {1, 0.1, 1}, {2, 0.2, 0}}, c.Panels[0].Dims[1].Points)
	assert.Equal(t, int64(100000), c.Panels[1].BinNS, "the CSV's bin: the step between a collective's windows")
	assert.Equal(t, []pt{{0, 0, 100}, {1, 0.1, 40}, {2, 0.15, 0}}, c.Panels[1].Dims[0].Points)
	assert.Equal(t, []pt{{0, 0, 0}, {1, 0.1, 60}, {2, 0.15, 100}}, c.Panels[1].Dims[1].Points)
	var b bytes.Buffer
	require.NoError(t, c.Write(&b, "svg"))
	svg := b.String()
	assert.Equal(t, 1, strings.Count(svg, ">dim 1<"), "one legend for all panels")
	for _, s := range []string{"flow.json", "timeline.csv", "baseline and Themis"} {
		assert.Contains(t, svg, s)
	}
}

// Inputs with no timeline, or values no activity has, are refused with
// the file named.
func TestThemisBadInput(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"empty.json", " \n", "empty.json: empty"},
		{"text.txt", "hello\n", "text.txt: neither JSON nor a timeline CSV"},
		{"broken.json", `{"jobs":[`, "broken.json: not JSON"},
		{"ring.json", `{"schema":"inaemu.run/1","mode":"ring","jobs":[{"name":"job0","mode":"ring"}]}`, "ring.json: no activity timeline: no job of mode hier"},
		{"themis.json", `{"schema":"inaemu.themis.run/1","dims":[{"dim":1}]}`, "themis.json: 'inaemu themis run --json' carries no activity timeline"},
		{"other.json", `{"schema":"inaemu.check/1"}`, "other.json: no activity timeline"},
		{"nodims.json", `{"jobs":[{"name":"j","hier":{"bin_ns":100000,"dims":[]}}]}`, "no dimension"},
		{"nobins.json", `{"jobs":[{"name":"j","hier":{"bin_ns":100000,"dims":[{"dim":1,"timeline_chunks":[]}]}}]}`, "no activity: every dimension's timeline is empty"},
		{"nobin.json", `{"jobs":[{"name":"j","hier":{"bin_ns":0,"dims":[{"dim":1,"timeline_chunks":[1]}]}}]}`, "job j: bin_ns 0"},
		{"neg.json", `{"jobs":[{"name":"j","hier":{"bin_ns":100000,"dims":[{"dim":1,"timeline_chunks":[1,-0.5]}]}}]}`, "dim 1, bin 1: activity -0.5"},
		{"flow.json", `{"Dims":[{"Activity":[0.5,1.5]}],"Bin":100000}`, "flow.json: dim 1, bin 1: activity 1.5: want 0 to 1"},
		{"flowbin.json", `{"Dims":[{"Activity":[0.5]}]}`, "flowbin.json: flow result: Bin 0"},
		{"bad.csv", "collective,window,start_us,d1_activity,d1_serving\n1,0,0.000,x,1\n", "bad.csv: line 2: d1_activity \"x\": not a number"},
		{"short.csv", "collective,window,start_us,d1_activity,d1_serving\n1,0,0.000\n", "short.csv: timeline CSV"},
		{"nodim.csv", "collective,window,start_us,x\n1,0,0,1\n", "nodim.csv: timeline CSV: no d1_activity column"},
		{"header.csv", "collective,window,start_us,d1_activity\n", "header.csv: no activity"},
	} {
		_, err := ReadThemisActivity(c.name, strings.NewReader(c.body))
		if assert.Error(t, err, c.name) {
			assert.Contains(t, err.Error(), c.want, c.name)
			assert.NotContains(t, err.Error(), "\n", c.name)
		}
	}
	_, err := NewThemisChart(nil, ThemisOptions{})
	assert.Error(t, err)
}
