package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// esaFigureJSON is a figure report as 'inaemu inaps figure N --json'
// prints it (or one shard's of it): cells of the 3 policies × mixes A
// and AB at 8 × 8, point k kept when keep(k).
func esaFigureJSON(fig int, shard string, keep func(int) bool) string {
	var cells []string
	k := 0
	for _, mix := range []string{"A", "AB"} {
		for i, pol := range []string{"esa", "fcfs", "static"} {
			if keep(k) {
				cells = append(cells, fmt.Sprintf(`{"policy":%q,"jobs":8,"workers":8,"mix":%q,"point":%d,"runs":2,"exact":2,"mean_jct_ns":%d,"mean_utilisation":%g,"mean_utilisation_wire":0.7,"collisions":3,"seeds":[1,2]}`,
					pol, mix, k, 2000000+100000*i, 0.5+0.05*float64(i)))
			}
			k++
		}
	}
	return fmt.Sprintf(`{"schema":"inaemu.inaps.figure/1","figure":%d,"doc":"utilisation at 8 jobs × 8 workers","seed":1,"seeds":2,%s"points":6,"cells":[%s]}`+"\n",
		fig, shard, strings.Join(cells, ","))
}

// plot esa draws a figure report (here Fig. 10: six bars) and, with
// --json, says the points it drew; the reports of a figure's shards
// draw the same.
func TestPlotESA(t *testing.T) {
	dir := t.TempDir()
	fig := filepath.Join(dir, "fig10.json")
	require.NoError(t, os.WriteFile(fig, []byte(esaFigureJSON(10, "", func(int) bool { return true })), 0o644))
	svg := filepath.Join(dir, "fig10.svg")
	code, out, errOut := runCLI("plot", "esa", fig, "--out", svg)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Equal(t, "inaemu plot: "+svg+": Fig. 10, 6 points of 6 cells\n", out)
	b, err := os.ReadFile(svg)
	require.NoError(t, err)
	assert.Contains(t, string(b), "<svg")
	for _, s := range []string{"ESA", "ATP-style", "SwitchML-style", "all A", "A:B = 1:1"} {
		assert.Contains(t, string(b), s)
	}

	var shards []string
	for i := range 2 {
		f := filepath.Join(dir, fmt.Sprintf("shard%d.json", i))
		require.NoError(t, os.WriteFile(f, []byte(esaFigureJSON(10, fmt.Sprintf(`"shard":{"index":%d,"of":2},`, i), func(k int) bool { return k%2 == i })), 0o644))
		shards = append(shards, f)
	}
	png := filepath.Join(dir, "fig10.png")
	code, out, errOut = runCLI("plot", "esa", shards[1], shards[0], "--out", png, "--json")
	require.Equal(t, 0, code, "%s%s", out, errOut)
	var got struct {
		Schema   string   `json:"schema"`
		Out      string   `json:"out"`
		Figure   int      `json:"figure"`
		Policies []string `json:"policies"`
		Points   []struct {
			Mix, Policy, Name string
			Y                 float64
		} `json:"points"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got))
	assert.Equal(t, "inaemu.plot.esa/1", got.Schema)
	assert.Equal(t, png, got.Out)
	assert.Equal(t, 10, got.Figure)
	assert.Equal(t, []string{"esa", "fcfs", "static"}, got.Policies)
	require.Len(t, got.Points, 6)
	assert.Equal(t, "SwitchML-style", got.Points[2].Name)
	assert.InDelta(t, 60, got.Points[2].Y, 1e-9)
	b, err = os.ReadFile(png)
	require.NoError(t, err)
	assert.Equal(t, "\x89PNG", string(b[:4]))
}

// Each bad input to plot esa is one line and exit 2: not a figure report,
// a figure ESA does not have, no cells, a shard's report missing.
func TestPlotESABadInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		f := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(f, []byte(body), 0o644))
		return f
	}
	svg := filepath.Join(dir, "x.svg")
	all := func(int) bool { return true }
	good := write("good.json", esaFigureJSON(10, "", all))
	run := write("run.json", `{"schema":"inaemu.run/1","mode":"ring","workers":4}`)
	shard0 := write("shard0.json", esaFigureJSON(10, `"shard":{"index":0,"of":2},`, func(k int) bool { return k%2 == 0 }))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plot", "esa", good}, "need --out"},
		{[]string{"plot", "esa", "--out", svg}, "need a figure report"},
		{[]string{"plot", "esa", good, "--out", filepath.Join(dir, "x.gif")}, "want a .svg, .png or .pdf file"},
		{[]string{"plot", "esa", filepath.Join(dir, "missing.json"), "--out", svg}, "missing.json"},
		{[]string{"plot", "esa", write("text.json", "not json\n"), "--out", svg}, "text.json: not an 'inaemu inaps figure --json' report"},
		{[]string{"plot", "esa", run, "--out", svg}, `run.json: not an 'inaemu inaps figure --json' report (schema "inaemu.run/1"`},
		{[]string{"plot", "esa", write("fig7.json", esaFigureJSON(7, "", all)), "--out", svg}, "figure 7: want ESA's 8, 9, 10 or 11"},
		{[]string{"plot", "esa", write("none.json", `{"schema":"inaemu.inaps.figure/1","figure":10,"seed":1,"seeds":2,"points":0,"cells":[]}`), "--out", svg}, "none.json: no cells"},
		{[]string{"plot", "esa", shard0, "--out", svg}, "shard0.json: 3 of the figure's 6 cells are missing (points 1, 3, 5)"},
		{[]string{"plot", "esa", shard0, good, "--out", svg}, "good.json: cell esa 8×8 A: point 0 is also in " + shard0},
	} {
		code, out, errOut := runGuarded(c.args...)
		oneLine(t, code, errOut, "inaemu plot", c.want)
		assert.Empty(t, out, c.args)
	}
	_, err := os.Stat(svg)
	assert.True(t, os.IsNotExist(err), "no picture is written from bad input")
}
