package graphs

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// esaReport makes a figure report by hand: every policy on every jobs ×
// workers of every mix, JCT and utilisation made up from the cell.
func esaReport(fig int, pols []string, jobs, workers []int, mixes []string) ESAFigure {
	f := ESAFigure{Schema: "inaemu.inaps.figure/1", Figure: fig, Doc: "made by hand", Seed: 1, Seeds: 2, Source: "hand.json"}
	for mi, m := range mixes {
		for _, j := range jobs {
			for _, w := range workers {
				for pi, p := range pols {
					f.Cells = append(f.Cells, ESACell{Point: len(f.Cells), Policy: p, Jobs: j, Workers: w, Mix: m, Runs: 2, Exact: 2,
						MeanJCTNs: float64(1e6 * (j + w + pi + mi)), MeanUtilisation: 0.1 * float64(pi+1), MeanUtilisationWire: 0.1 * float64(pi+2)})
				}
			}
		}
	}
	f.Points = len(f.Cells)
	return f
}

func writeESA(t *testing.T, f ESAFigure) (*ESAChart, string) {
	t.Helper()
	m, err := MergeESA([]ESAFigure{f})
	require.NoError(t, err)
	c, err := NewESAChart(m, ESAOptions{})
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, c.Write(&b, "svg"))
	require.Contains(t, b.String(), "<svg")
	return c, b.String()
}

// fills counts the SVG's shapes filled with a policy's colour: its bars
// and its legend's one.
func fills(svg, policy string) int {
	r, g, b, _ := esaColour(policy).RGBA()
	return strings.Count(svg, fmt.Sprintf(`style="fill:#%02X%02X%02X"`, r>>8, g>>8, b>>8))
}

// glyphs counts the SVG's glyphs (drawn with thin lines) in a policy's
// colour: its points and its legend's one.
func glyphs(svg, policy string) int {
	r, g, b, _ := esaColour(policy).RGBA()
	return strings.Count(svg, fmt.Sprintf(`stroke:#%02X%02X%02X;stroke-width:0.5"`, r>>8, g>>8, b>>8))
}

// Fig. 8: a panel per mix (ESA's names), a line per policy with a point
// per jobs count, at the cell's mean JCT in ms.
func TestESAFigure8(t *testing.T) {
	c, svg := writeESA(t, esaReport(8, []string{"esa", "fcfs", "static"}, []int{2, 4, 6, 8}, []int{8}, []string{"A", "B", "AB"}))
	assert.Len(t, c.Points, 36)
	assert.Equal(t, []string{"A", "B", "AB"}, c.Mixes)
	assert.Equal(t, []string{"esa", "fcfs", "static"}, c.Policies)
	assert.Equal(t, ESAPoint{Mix: "B", Policy: "fcfs", Name: "ATP-style", X: 4, Y: 4 + 8 + 1 + 1}, c.Points[12+4+1])
	for _, s := range []string{"ESA", "ATP-style", "SwitchML-style", "all A", "all B", "A:B = 1:1", "jobs", "average JCT (ms)"} {
		assert.Contains(t, svg, s)
	}
	for _, p := range c.Policies {
		assert.Equal(t, 3*4+1, glyphs(svg, p), "%s: a point per jobs count in each panel, and the legend's", p)
	}
}

// Fig. 9 puts the workers per job on the x axis.
func TestESAFigure9(t *testing.T) {
	c, svg := writeESA(t, esaReport(9, []string{"esa", "fcfs", "static"}, []int{8}, []int{2, 4}, []string{"A", "B", "AB"}))
	assert.Len(t, c.Points, 18)
	assert.Equal(t, 4, c.Points[1*3+0].X)
	assert.Contains(t, svg, "workers per job")
	for _, p := range c.Policies {
		assert.Equal(t, 3*2+1, glyphs(svg, p), p)
	}
}

// Fig. 10: a bar per policy and mix, the payload's utilisation in %
// (--wire: the wire bytes').
func TestESAFigure10(t *testing.T) {
	c, svg := writeESA(t, esaReport(10, []string{"static", "fcfs", "esa"}, []int{8}, []int{8}, []string{"AB", "A"}))
	assert.Equal(t, []string{"A", "AB"}, c.Mixes, "ESA's order")
	assert.Equal(t, []string{"esa", "fcfs", "static"}, c.Policies, "ESA's order")
	require.Len(t, c.Points, 6)
	assert.Equal(t, ESAPoint{Mix: "A", Policy: "esa", Name: "ESA"}, ESAPoint{Mix: c.Points[0].Mix, Policy: c.Points[0].Policy, Name: c.Points[0].Name})
	assert.InDelta(t, 30, c.Points[0].Y, 1e-9, "the report's third policy: 0.3")
	for _, p := range []string{"esa", "fcfs", "static"} {
		assert.Equal(t, 2+1, fills(svg, p), "%s: a bar per mix and the legend's", p)
	}
	for _, s := range []string{"ESA", "ATP-style", "SwitchML-style", "all A", "A:B = 1:1", "utilisation (%)"} {
		assert.Contains(t, svg, s)
	}
	w, err := NewESAChart(esaReport(10, []string{"esa"}, []int{8}, []int{8}, []string{"A"}), ESAOptions{Wire: true})
	require.NoError(t, err)
	assert.InDelta(t, 20, w.Points[0].Y, 1e-9)
}

// Fig. 11: ESA's and the straw men's speed-ups over ATP-style (fcfs) in
// each mix; ATP-style itself is the line at 1, not a bar.
func TestESAFigure11(t *testing.T) {
	c, svg := writeESA(t, esaReport(11, []string{"esa", "straw1", "straw2", "fcfs"}, []int{8}, []int{8}, []string{"A", "AB"}))
	require.Len(t, c.Points, 6)
	assert.Equal(t, []string{"esa", "straw1", "straw2"}, c.Policies)
	// fcfs is policy 3 of the report: its JCT (16+3+mix) over each's.
	assert.InDelta(t, 19.0/16, c.Points[0].Y, 1e-9)
	assert.InDelta(t, 20.0/19, c.Points[5].Y, 1e-9)
	for _, p := range []string{"esa", "straw1", "straw2"} {
		assert.Equal(t, 2+1, fills(svg, p), "%s: a bar per mix and the legend's", p)
	}
	for _, s := range []string{"ESA", "Straw1", "Straw2", "ATP-style (1)", "JCT speed-up over ATP-style"} {
		assert.Contains(t, svg, s)
	}
	f := esaReport(11, []string{"esa"}, []int{8}, []int{8}, []string{"A"})
	_, err := NewESAChart(f, ESAOptions{})
	assert.ErrorContains(t, err, "no fcfs (ATP-style) cell")
}

// A cell without an exact run has no mean: it is left out and named, not
// drawn at 0.
func TestESALeavesOutCellsWithoutExactRuns(t *testing.T) {
	f := esaReport(10, []string{"esa", "fcfs"}, []int{8}, []int{8}, []string{"A"})
	f.Cells[1].Exact = 0
	c, _ := writeESA(t, f)
	assert.Len(t, c.Points, 1)
	assert.Equal(t, []string{"fcfs 8×8 A: no exact run of 2"}, c.LeftOut)
	f = esaReport(11, []string{"esa", "fcfs"}, []int{8}, []int{8}, []string{"A"})
	f.Cells[1].Exact = 0
	_, err := NewESAChart(f, ESAOptions{})
	assert.ErrorContains(t, err, "no point to draw")
}

// Shards' reports merge into the figure; a report that is not a figure,
// another run's shard, a cell twice or a missing one are refused.
func TestESAReadAndMerge(t *testing.T) {
	const shards = `{"schema":"inaemu.inaps.figure/1","figure":10,"seed":1,"seeds":2,"shard":{"index":1,"of":2},"points":3,"cells":[{"point":1,"policy":"fcfs","mix":"A","jobs":8,"workers":8,"runs":2,"exact":2,"mean_utilisation":0.4}]}
{"schema":"inaemu.inaps.figure/1","figure":10,"seed":1,"seeds":2,"shard":{"index":0,"of":2},"points":3,"cells":[{"point":0,"policy":"esa","mix":"A","jobs":8,"workers":8,"runs":2,"exact":2,"mean_utilisation":0.5},{"point":2,"policy":"static","mix":"A","jobs":8,"workers":8,"runs":2,"exact":2,"mean_utilisation":0.6}]}`
	figs, err := ReadESAFigures("s.json", strings.NewReader(shards))
	require.NoError(t, err)
	m, err := MergeESA(figs)
	require.NoError(t, err)
	require.Len(t, m.Cells, 3)
	assert.Equal(t, "fcfs", m.Cells[1].Policy)
	assert.Nil(t, m.Shard)

	for _, bad := range []struct{ in, want string }{
		{"", "empty"},
		{"not json", "not an 'inaemu inaps figure --json' report"},
		{`{"schema":"inaemu.run/1","workers":8}`, `schema "inaemu.run/1"`},
		{`{"figure":10,"cells":[]}`, `schema ""`},
	} {
		_, err := ReadESAFigures("bad.json", strings.NewReader(bad.in))
		assert.ErrorContains(t, err, "bad.json: ", bad.in)
		assert.ErrorContains(t, err, bad.want, bad.in)
	}
	_, err = MergeESA(figs[:1])
	assert.ErrorContains(t, err, "2 of the figure's 3 cells are missing (points 0, 2): give every shard's report")
	other := figs[0]
	other.Seed = 7
	_, err = MergeESA([]ESAFigure{figs[1], other})
	assert.ErrorContains(t, err, "not the same run")
	_, err = MergeESA([]ESAFigure{figs[0], figs[0], figs[1]})
	assert.ErrorContains(t, err, "point 1 is also in s.json")
	empty := figs[0]
	empty.Cells, empty.Points = nil, 0
	_, err = MergeESA([]ESAFigure{empty})
	assert.ErrorContains(t, err, "no cells")
	unknown := esaReport(7, []string{"esa"}, []int{8}, []int{8}, []string{"A"})
	_, err = MergeESA([]ESAFigure{unknown})
	assert.ErrorContains(t, err, "figure 7: want ESA's 8, 9, 10 or 11")
	out := esaReport(10, []string{"esa"}, []int{8}, []int{8}, []string{"A"})
	out.Cells[0].Point = 5
	_, err = MergeESA([]ESAFigure{out})
	assert.ErrorContains(t, err, "point 5 is not one of the figure's 1")
}
