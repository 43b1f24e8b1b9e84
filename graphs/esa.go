package graphs

import (
	"encoding/json"
	"fmt"
	"image/color"
	"io"
	"math"
	"sort"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// ESAFigure is one `inaemu inaps figure N --json` report: one of ESA's
// evaluation figures (§7.2.1 of Wang et al., "Efficient Data-Plane
// Memory Scheduling for In-Network Aggregation", arXiv:2201.06398; see
// docs/esa.md) as cells over seeds. graphs reads the report as a wire
// format of its own, with the fields it draws, so that it never imports
// the emulator that made it.
type ESAFigure struct {
	Schema string    `json:"schema"`
	Figure int       `json:"figure"`
	Doc    string    `json:"doc"`
	Seed   uint64    `json:"seed"`
	Seeds  int       `json:"seeds"`
	Shard  *ESAShard `json:"shard,omitempty"`
	Points int       `json:"points"` // the figure's cells, all shards together
	Cells  []ESACell `json:"cells"`
	Source string    `json:"-"` // the file it came from, for errors
}

// ESAShard is a sharded report's shard: cell k is its when k mod Of = Index.
type ESAShard struct {
	Index int `json:"index"`
	Of    int `json:"of"`
}

// ESACell is one cell of a figure: a policy on jobs × workers of a mix,
// averaged over its seeds' exact runs.
type ESACell struct {
	Point               int     `json:"point"` // the cell's index in the figure's grid
	Policy              string  `json:"policy"`
	Jobs                int     `json:"jobs"`
	Workers             int     `json:"workers"`
	Mix                 string  `json:"mix"`
	Runs                int     `json:"runs"`
	Exact               int     `json:"exact"`
	MeanJCTNs           float64 `json:"mean_jct_ns"`
	MeanUtilisation     float64 `json:"mean_utilisation"`
	MeanUtilisationWire float64 `json:"mean_utilisation_wire"`
}

func (c ESACell) String() string {
	return fmt.Sprintf("%s %d×%d %s", c.Policy, c.Jobs, c.Workers, c.Mix)
}

// esaSchema is the figure report's schema, any version.
const esaSchema = "inaemu.inaps.figure/"

// ReadESAFigures reads one or more figure reports (a file may hold the
// shards' reports one after another) and names the file in errors.
func ReadESAFigures(name string, r io.Reader) ([]ESAFigure, error) {
	dec := json.NewDecoder(r)
	var out []ESAFigure
	for {
		var f ESAFigure
		if err := dec.Decode(&f); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: not an 'inaemu inaps figure --json' report: %v", name, err)
		}
		if !strings.HasPrefix(f.Schema, esaSchema) {
			return nil, fmt.Errorf("%s: not an 'inaemu inaps figure --json' report (schema %q, want %s1)", name, f.Schema, esaSchema)
		}
		f.Source = name
		out = append(out, f)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: not an 'inaemu inaps figure --json' report: empty", name)
	}
	return out, nil
}

// MergeESA makes one figure of reports of the same figure run (the
// shards of one, or the whole one): every point of the figure's grid must
// be there exactly once, so a picture is never drawn from part of a run.
func MergeESA(figs []ESAFigure) (ESAFigure, error) {
	if len(figs) == 0 {
		return ESAFigure{}, fmt.Errorf("no figure report")
	}
	m := figs[0]
	m.Shard, m.Cells = nil, nil
	seen := map[int]string{}
	for _, f := range figs {
		if f.Figure != m.Figure || f.Seed != m.Seed || f.Seeds != m.Seeds || f.Points != m.Points {
			return ESAFigure{}, fmt.Errorf("%s: figure %d, seed %d, %d seeds, %d points: not the same run as %s's (figure %d, seed %d, %d seeds, %d points)",
				f.Source, f.Figure, f.Seed, f.Seeds, f.Points, m.Source, m.Figure, m.Seed, m.Seeds, m.Points)
		}
		for _, c := range f.Cells {
			if c.Point < 0 || c.Point >= m.Points {
				return ESAFigure{}, fmt.Errorf("%s: cell %s: point %d is not one of the figure's %d", f.Source, c, c.Point, m.Points)
			}
			if from, dup := seen[c.Point]; dup {
				return ESAFigure{}, fmt.Errorf("%s: cell %s: point %d is also in %s", f.Source, c, c.Point, from)
			}
			seen[c.Point] = f.Source
			m.Cells = append(m.Cells, c)
		}
	}
	if _, ok := esaFigures[m.Figure]; !ok {
		return ESAFigure{}, fmt.Errorf("%s: figure %d: want ESA's 8, 9, 10 or 11", m.Source, m.Figure)
	}
	if len(m.Cells) == 0 {
		return ESAFigure{}, fmt.Errorf("%s: no cells", m.Source)
	}
	if len(m.Cells) < m.Points {
		var missing []string
		for i := range m.Points {
			if _, ok := seen[i]; !ok {
				missing = append(missing, fmt.Sprint(i))
			}
		}
		if len(missing) > 8 {
			missing = append(missing[:8], "...")
		}
		return ESAFigure{}, fmt.Errorf("%s: %d of the figure's %d cells are missing (points %s): give every shard's report", m.Source, m.Points-len(m.Cells), m.Points, strings.Join(missing, ", "))
	}
	sort.Slice(m.Cells, func(a, b int) bool { return m.Cells[a].Point < m.Cells[b].Point })
	return m, nil
}

// The figures' shapes: ESA draws Figs. 8 and 9 as JCT lines against jobs
// and workers per job, one panel per mix; Fig. 10 as utilisation bars;
// Fig. 11 as the speed-up of ESA and its straw men over ATP.
var esaFigures = map[int]struct {
	x, y string // x: the cell field on the x axis ("" for bars)
}{
	8:  {"jobs", "average JCT (ms)"},
	9:  {"workers", "average JCT (ms)"},
	10: {"", "utilisation (%)"},
	11: {"", "JCT speed-up over ATP-style"},
}

// esaPolicies are the policies in legend order with ESA's names for them
// (inaemu's fcfs is ATP's first-come-first-served aggregator allocation,
// static SwitchML's fixed partition); one colour and glyph each, the same
// in every figure.
var esaPolicies = []struct{ name, legend string }{
	{"esa", "ESA"}, {"fcfs", "ATP-style"}, {"static", "SwitchML-style"}, {"straw1", "Straw1"}, {"straw2", "Straw2"},
}

// ESAPolicyName is a policy's name in ESA's legends (the policy itself
// when ESA has none for it).
func ESAPolicyName(policy string) string {
	for _, p := range esaPolicies {
		if p.name == policy {
			return p.legend
		}
	}
	return policy
}

func policyRank(policy string) int {
	for i, p := range esaPolicies {
		if p.name == policy {
			return i
		}
	}
	return len(esaPolicies)
}

// esaMixes are the mixes in ESA's panel order, with its names for them.
var esaMixes = []struct{ name, label string }{{"A", "all A"}, {"B", "all B"}, {"AB", "A:B = 1:1"}}

func mixLabel(mix string) string {
	for _, m := range esaMixes {
		if m.name == mix {
			return m.label
		}
	}
	return mix
}

func mixRank(mix string) int {
	for i, m := range esaMixes {
		if m.name == mix {
			return i
		}
	}
	return len(esaMixes)
}

// ESAPoint is one point or bar drawn: a policy's value in a mix's panel
// (lines: at X, the jobs or the workers per job) or group (bars).
type ESAPoint struct {
	Mix    string  `json:"mix"`
	Policy string  `json:"policy"`
	Name   string  `json:"name"` // the legend's
	X      int     `json:"x,omitempty"`
	Y      float64 `json:"y"`
}

// ESAChart is what a figure report draws: its points, and the cells left
// out because they have no exact run to average (a mean of none is no
// value; Fig. 11's speed-ups of a mix whose ATP-style cell has none too).
type ESAChart struct {
	Figure   int        `json:"figure"`
	Title    string     `json:"title"`
	X        string     `json:"x,omitempty"` // the cell field on the x axis; "" for bars
	Y        string     `json:"y"`
	Mixes    []string   `json:"mixes"`    // panels (lines) or groups (bars), in order
	Policies []string   `json:"policies"` // in legend order
	Points   []ESAPoint `json:"points"`
	LeftOut  []string   `json:"left_out,omitempty"`
}

// ESAOptions choose what a figure shows.
type ESAOptions struct {
	Title  string // default: the figure's number and doc, and its seeds
	Wire   bool   // Fig. 10: the wire bytes' utilisation instead of the payload's
	Format string // svg (default), png or pdf
}

// NewESAChart computes a merged figure's points (MergeESA's).
func NewESAChart(f ESAFigure, o ESAOptions) (*ESAChart, error) {
	shape, ok := esaFigures[f.Figure]
	if !ok {
		return nil, fmt.Errorf("figure %d: want ESA's 8, 9, 10 or 11", f.Figure)
	}
	c := &ESAChart{Figure: f.Figure, Title: o.Title, X: shape.x, Y: shape.y}
	if c.Title == "" {
		c.Title = fmt.Sprintf("Fig. %d: %s\n(mean over seeds %d to %d)", f.Figure, f.Doc, f.Seed, f.Seed+uint64(f.Seeds)-1)
	}
	if f.Figure == 10 && o.Wire {
		c.Y = "utilisation, wire bytes (%)"
	}
	cells := append([]ESACell(nil), f.Cells...)
	sort.SliceStable(cells, func(a, b int) bool {
		ca, cb := cells[a], cells[b]
		if ra, rb := mixRank(ca.Mix), mixRank(cb.Mix); ra != rb || ca.Mix != cb.Mix {
			return ra < rb || ra == rb && ca.Mix < cb.Mix
		}
		if ra, rb := policyRank(ca.Policy), policyRank(cb.Policy); ra != rb || ca.Policy != cb.Policy {
			return ra < rb || ra == rb && ca.Policy < cb.Policy
		}
		return ca.Jobs < cb.Jobs || ca.Jobs == cb.Jobs && ca.Workers < cb.Workers
	})
	// Fig. 11's baseline: ATP-style's JCT in each mix.
	atp := map[string]ESACell{}
	for _, cl := range cells {
		if cl.Policy == "fcfs" {
			atp[cl.Mix] = cl
		}
	}
	mixes, pols := map[string]bool{}, map[string]bool{}
	for _, cl := range cells {
		if cl.Exact == 0 {
			c.LeftOut = append(c.LeftOut, fmt.Sprintf("%s: no exact run of %d", cl, cl.Runs))
			continue
		}
		p := ESAPoint{Mix: cl.Mix, Policy: cl.Policy, Name: ESAPolicyName(cl.Policy)}
		switch f.Figure {
		case 8, 9:
			p.X, p.Y = cl.Jobs, cl.MeanJCTNs/1e6
			if f.Figure == 9 {
				p.X = cl.Workers
			}
		case 10:
			p.Y = 100 * cl.MeanUtilisation
			if o.Wire {
				p.Y = 100 * cl.MeanUtilisationWire
			}
		case 11:
			if cl.Policy == "fcfs" {
				continue // the baseline: 1 by definition, drawn as a line
			}
			base, ok := atp[cl.Mix]
			if !ok {
				return nil, fmt.Errorf("figure 11: mix %s has no fcfs (ATP-style) cell to take the speed-up over", cl.Mix)
			}
			if base.Exact == 0 || cl.MeanJCTNs <= 0 {
				c.LeftOut = append(c.LeftOut, fmt.Sprintf("%s: no speed-up (its ATP-style cell has no exact run)", cl))
				continue
			}
			p.Y = base.MeanJCTNs / cl.MeanJCTNs
		}
		c.Points = append(c.Points, p)
		if !mixes[cl.Mix] {
			c.Mixes = append(c.Mixes, cl.Mix)
		}
		mixes[cl.Mix] = true
		pols[cl.Policy] = true
	}
	if len(c.Points) == 0 {
		return nil, fmt.Errorf("figure %d: no point to draw (%d cells, none with an exact run)", f.Figure, len(cells))
	}
	for p := range pols {
		c.Policies = append(c.Policies, p)
	}
	sort.Slice(c.Policies, func(a, b int) bool {
		ra, rb := policyRank(c.Policies[a]), policyRank(c.Policies[b])
		return ra < rb || ra == rb && c.Policies[a] < c.Policies[b]
	})
	return c, nil
}

// Write draws the chart: Figs. 8 and 9 as one panel of lines per mix,
// side by side on one y scale; Figs. 10 and 11 as bars grouped by mix.
func (c *ESAChart) Write(w io.Writer, format string) error {
	if format == "" {
		format = "svg"
	}
	var plots []*plot.Plot
	width, height := 14*vg.Centimeter, 11*vg.Centimeter
	if c.X != "" {
		width = vg.Length(len(c.Mixes)) * 10 * vg.Centimeter
		var err error
		if plots, err = c.linePanels(); err != nil {
			return err
		}
	} else {
		p, err := c.bars(width)
		if err != nil {
			return err
		}
		plots = []*plot.Plot{p}
	}
	cw, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return err
	}
	dc := draw.New(cw)
	if len(plots) > 1 {
		// The figure's title over the panels, each panel titled by its mix.
		title := plot.New().Title.TextStyle
		title.XAlign, title.YAlign = draw.XCenter, draw.YTop
		dc.FillText(title, vg.Point{X: dc.Center().X, Y: dc.Max.Y}, c.Title)
		dc.Max.Y -= title.Height(c.Title) + vg.Millimeter*2
	}
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 4}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	_, err = cw.WriteTo(w)
	return err
}

// style is the index of a policy's colour and glyph: its legend rank, so
// a policy looks the same in every figure.
func style(policy string) int { return policyRank(policy) }

// esaColour is a policy's colour.
func esaColour(policy string) color.Color { return plotutil.Color(style(policy)) }

func (c *ESAChart) linePanels() ([]*plot.Plot, error) {
	var plots []*plot.Plot
	ymax := 0.0
	xs := map[int]bool{}
	for _, pt := range c.Points {
		ymax = math.Max(ymax, pt.Y)
		xs[pt.X] = true
	}
	var ticks []plot.Tick
	for x := range xs {
		ticks = append(ticks, plot.Tick{Value: float64(x), Label: fmt.Sprint(x)})
	}
	sort.Slice(ticks, func(a, b int) bool { return ticks[a].Value < ticks[b].Value })
	for i, mix := range c.Mixes {
		p := plot.New()
		p.Title.Text = mixLabel(mix)
		if len(c.Mixes) == 1 {
			p.Title.Text = c.Title + ": " + p.Title.Text
		}
		p.X.Label.Text = map[string]string{"jobs": "jobs", "workers": "workers per job"}[c.X]
		p.Y.Label.Text = c.Y
		p.X.Tick.Marker = plot.ConstantTicks(ticks)
		p.Legend.Top, p.Legend.Left = true, true
		for _, pol := range c.Policies {
			var xy plotter.XYs
			for _, pt := range c.Points {
				if pt.Mix == mix && pt.Policy == pol {
					xy = append(xy, plotter.XY{X: float64(pt.X), Y: pt.Y})
				}
			}
			if len(xy) == 0 {
				continue
			}
			sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
			l, pts, err := plotter.NewLinePoints(xy)
			if err != nil {
				return nil, err
			}
			k := style(pol)
			l.Color, pts.Color, pts.Shape = esaColour(pol), esaColour(pol), plotutil.Shape(k)
			p.Add(l, pts)
			if i == 0 {
				p.Legend.Add(ESAPolicyName(pol), l, pts)
			}
		}
		p.X.Min, p.X.Max = ticks[0].Value-0.5, ticks[len(ticks)-1].Value+0.5
		p.Y.Min, p.Y.Max = 0, 1.1*ymax
		plots = append(plots, p)
	}
	return plots, nil
}

// bars draws one bar per point, grouped by mix, one colour per policy;
// Fig. 11's ATP-style baseline is the dashed line at 1.
func (c *ESAChart) bars(width vg.Length) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.Title
	p.Y.Label.Text = c.Y
	var labels []string
	for _, m := range c.Mixes {
		labels = append(labels, mixLabel(m))
	}
	p.NominalX(labels...)
	p.Legend.Top = true
	n := len(c.Policies)
	// Bars fill 70% of a group's width, the plot area about 80% of the
	// picture's.
	barW := 0.8 * width * 0.7 / vg.Length(len(c.Mixes)*n)
	ymax := 0.0
	for k, pol := range c.Policies {
		var legend *plotter.BarChart
		for g, mix := range c.Mixes {
			for _, pt := range c.Points {
				if pt.Mix != mix || pt.Policy != pol {
					continue
				}
				b, err := plotter.NewBarChart(plotter.Values{pt.Y}, barW)
				if err != nil {
					return nil, err
				}
				b.XMin = float64(g)
				b.Offset = (vg.Length(k) - vg.Length(n-1)/2) * barW
				b.Color = esaColour(pol)
				b.LineStyle.Width = 0
				// Its value over it, to read the figure by.
				lb, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: float64(g), Y: pt.Y}}, Labels: []string{labelValue(pt.Y)}})
				if err != nil {
					return nil, err
				}
				for i := range lb.TextStyle {
					lb.TextStyle[i].XAlign, lb.TextStyle[i].Font.Size = draw.XCenter, vg.Points(8)
				}
				lb.Offset = vg.Point{X: b.Offset, Y: vg.Points(2)}
				p.Add(b, lb)
				legend = b
				ymax = math.Max(ymax, pt.Y)
			}
		}
		if legend != nil {
			p.Legend.Add(ESAPolicyName(pol), legend)
		}
	}
	if c.Figure == 11 {
		one := plotter.NewFunction(func(float64) float64 { return 1 })
		one.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		one.Color = esaColour("fcfs")
		p.Add(one)
		p.Legend.Add("ATP-style (1)", one)
		ymax = math.Max(ymax, 1)
	}
	p.X.Min, p.X.Max = -0.5, float64(len(c.Mixes))-0.5
	p.Y.Min, p.Y.Max = 0, 1.3*ymax // room for the legend over the bars
	return p, nil
}

// labelValue writes a bar's value with three significant digits.
func labelValue(v float64) string { return fmt.Sprintf("%.3g", v) }
