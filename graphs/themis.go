package graphs

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// Themis's Fig. 9 (Rashidi et al., "Themis: A Network Bandwidth-Aware
// Collective Scheduling Policy for Distributed Training of DL Models",
// ISCA '22, §6.2): per network dimension, its "frontend activity rate",
// the share of each 100 µs period during which at least one chunk is at
// the dimension, over the collective's run. graphs reads the three
// outputs that carry such a timeline as wire formats of its own, so that
// it never imports the emulator or the flow executor that made them:
//
//   - `inaemu run --mode hier --json`: jobs[].hier.dims[].timeline_chunks,
//     per bin of jobs[].hier.bin_ns from the job's start, the chunks with a
//     stage under way on the dimension at some rank, time-weighted (a
//     chunk under way half the bin counts 0.5). Stages of different
//     chunks may overlap at different ranks, so a bin can exceed 1;
//   - `inaemu themis run --timeline FILE.csv`: columns collective, window,
//     start_us, d1_activity .. dD_activity, d1_serving .. dD_serving, a
//     row per window of each collective of the run, start_us its start
//     in the run;
//   - emu/themis/flow's Result encoded as JSON by encoding/json (field
//     names as Go spells them): Bin in ns, Dims[].Activity per window.

// ThemisRun is one activity timeline: a panel of the picture.
type ThemisRun struct {
	Source string // the file it came from
	Label  string // what it is: the file, and the job's name and schedule for a hier run
	BinNS  int64
	Dims   []ThemisDim
}

// ThemisDim is one dimension's timeline: per bin its start (ns from the
// run's start) and its activity (a share; 1 = busy the whole bin).
type ThemisDim struct {
	Dim      int    // from 1, as the paper numbers them
	Kind     string // ring, fc, switch, ... when the input says
	StartNS  []float64
	Activity []float64
}

// themisReport is what graphs reads of a JSON input: a run report's hier
// jobs, or a flow.Result (encoding/json matches its Go field names; the
// run report has neither Dims nor Bin at its top level).
type themisReport struct {
	Schema string `json:"schema"`
	Jobs   []struct {
		Name string          `json:"name"`
		Mode string          `json:"mode"`
		Hier *themisHierWire `json:"hier"`
	} `json:"jobs"`
	Dims []struct {
		Activity []float64 `json:"Activity"`
	} `json:"Dims"`
	Bin int64 `json:"Bin"`
}

type themisHierWire struct {
	Chunks    int    `json:"chunks"`
	Scheduler string `json:"scheduler"`
	Policy    string `json:"policy"`
	BinNS     int64  `json:"bin_ns"`
	Dims      []struct {
		Dim      int       `json:"dim"`
		Kind     string    `json:"kind"`
		Timeline []float64 `json:"timeline_chunks"`
	} `json:"dims"`
}

// themisInputs names the inputs in errors.
const themisInputs = "want 'inaemu run --mode hier --json' output, an 'inaemu themis run --timeline' CSV or an emu/themis/flow Result as JSON"

// ReadThemisActivity reads one input's activity timelines (a run report
// gives one per hier job; a file may hold several reports one after
// another) and names the file in errors.
func ReadThemisActivity(name string, r io.Reader) ([]ThemisRun, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", name, err)
	}
	t := bytes.TrimSpace(b)
	switch {
	case len(t) == 0:
		return nil, fmt.Errorf("%s: empty: %s", name, themisInputs)
	case t[0] == '{':
		return readThemisJSON(name, t)
	case bytes.HasPrefix(t, []byte("collective,window,start_us,")):
		return readThemisCSV(name, t)
	}
	return nil, fmt.Errorf("%s: neither JSON nor a timeline CSV: %s", name, themisInputs)
}

func readThemisJSON(name string, b []byte) ([]ThemisRun, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	var out []ThemisRun
	for {
		var rep themisReport
		if err := dec.Decode(&rep); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: not JSON: %v: %s", name, err, themisInputs)
		}
		switch {
		case strings.HasPrefix(rep.Schema, "inaemu.themis.run/"):
			return nil, fmt.Errorf("%s: 'inaemu themis run --json' carries no activity timeline: give the CSV its --timeline FILE writes", name)
		case rep.Jobs != nil:
			n := 0
			for _, j := range rep.Jobs {
				if j.Hier == nil {
					continue
				}
				n++
				run, err := hierRun(name, j.Name, j.Hier)
				if err != nil {
					return nil, err
				}
				out = append(out, run)
			}
			if n == 0 {
				return nil, fmt.Errorf("%s: no activity timeline: no job of mode hier in the run report", name)
			}
		case rep.Dims != nil || rep.Bin != 0:
			run := ThemisRun{Source: name, Label: name, BinNS: rep.Bin}
			if rep.Bin <= 0 {
				return nil, fmt.Errorf("%s: flow result: Bin %d: want the timeline's window in ns, > 0", name, rep.Bin)
			}
			for d, x := range rep.Dims {
				run.Dims = append(run.Dims, ThemisDim{Dim: d + 1, Activity: x.Activity, StartNS: binStarts(len(x.Activity), rep.Bin, 0)})
			}
			if err := run.check(1); err != nil {
				return nil, err
			}
			out = append(out, run)
		default:
			return nil, fmt.Errorf("%s: no activity timeline (no jobs[].hier, no Dims[].Activity): %s", name, themisInputs)
		}
	}
	return out, nil
}

// hierRun is a hier job's timeline, labelled with its schedule.
func hierRun(name, job string, h *themisHierWire) (ThemisRun, error) {
	label := fmt.Sprintf("%s: %s, %s/%s, %d chunks", name, job, h.Scheduler, h.Policy, h.Chunks)
	run := ThemisRun{Source: name, Label: label, BinNS: h.BinNS}
	if h.BinNS <= 0 {
		return run, fmt.Errorf("%s: job %s: bin_ns %d: want the timeline's bin in ns, > 0", name, job, h.BinNS)
	}
	for _, d := range h.Dims {
		run.Dims = append(run.Dims, ThemisDim{Dim: d.Dim, Kind: d.Kind, Activity: d.Timeline, StartNS: binStarts(len(d.Timeline), h.BinNS, 0)})
	}
	// A bin's chunks under way may exceed 1 (stages of different chunks at
	// different ranks), never its share of a dimension's own time.
	return run, run.check(math.Inf(1))
}

func binStarts(n int, bin int64, from float64) []float64 {
	s := make([]float64, n)
	for k := range s {
		s[k] = from + float64(int64(k)*bin)
	}
	return s
}

// check refuses a timeline with nothing to draw or values no activity
// has: negative, not finite, above max.
func (r ThemisRun) check(max float64) error {
	if len(r.Dims) == 0 {
		return fmt.Errorf("%s: no dimension in the activity timeline", r.Label)
	}
	bins := 0
	for _, d := range r.Dims {
		if d.Dim < 1 {
			return fmt.Errorf("%s: dimension %d: want dimensions numbered from 1", r.Label, d.Dim)
		}
		for k, v := range d.Activity {
			if math.IsNaN(v) || v < 0 || v > max {
				return fmt.Errorf("%s: dim %d, bin %d: activity %v: want 0 to %v", r.Label, d.Dim, k, v, max)
			}
		}
		bins = maxInt(bins, len(d.Activity))
	}
	if bins == 0 {
		return fmt.Errorf("%s: no activity: every dimension's timeline is empty", r.Label)
	}
	return nil
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// readThemisCSV reads `inaemu themis run --timeline`'s CSV: one panel for
// the run, its collectives one after another at their start_us.
func readThemisCSV(name string, b []byte) ([]ThemisRun, error) {
	rows, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: timeline CSV: %v", name, err)
	}
	head := rows[0]
	var cols []int // the activity columns, dim 1 first
	for i, h := range head[3:] {
		if h == fmt.Sprintf("d%d_activity", len(cols)+1) {
			cols = append(cols, 3+i)
		}
	}
	run := ThemisRun{Source: name, Label: name}
	if len(cols) == 0 {
		return nil, fmt.Errorf("%s: timeline CSV: no d1_activity column", name)
	}
	for d := range cols {
		run.Dims = append(run.Dims, ThemisDim{Dim: d + 1})
	}
	var prev []string
	for i, row := range rows[1:] {
		line := i + 2
		w, err1 := strconv.Atoi(row[1])
		us, err2 := strconv.ParseFloat(row[2], 64)
		if err1 != nil || err2 != nil || w < 0 || math.IsNaN(us) || math.IsInf(us, 0) || us < 0 {
			return nil, fmt.Errorf("%s: line %d: window %q, start_us %q: want a window index and its start in µs", name, line, row[1], row[2])
		}
		// The bin is the step between a collective's windows.
		if prev != nil && prev[0] == row[0] {
			p, _ := strconv.ParseFloat(prev[2], 64)
			if bin := int64(math.Round((us - p) * 1e3)); bin > 0 && run.BinNS == 0 {
				run.BinNS = bin
			}
		}
		prev = row
		for d, c := range cols {
			v, err := strconv.ParseFloat(row[c], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: line %d: d%d_activity %q: not a number", name, line, d+1, row[c])
			}
			run.Dims[d].StartNS = append(run.Dims[d].StartNS, us*1e3)
			run.Dims[d].Activity = append(run.Dims[d].Activity, v)
		}
	}
	if run.BinNS == 0 {
		// One window per collective: the executor's window, 100 µs.
		run.BinNS = int64(100 * time.Microsecond)
	}
	if err := run.check(1); err != nil {
		return nil, err
	}
	return []ThemisRun{run}, nil
}

// ThemisChart is what the picture draws: a panel per timeline, in each a
// line per dimension, its points the bins' activity in percent.
type ThemisChart struct {
	Title  string        `json:"title"`
	X      string        `json:"x"`
	Y      string        `json:"y"`
	Panels []ThemisPanel `json:"panels"`
}

// ThemisPanel is one timeline drawn.
type ThemisPanel struct {
	Source string         `json:"source"`
	Title  string         `json:"title"`
	BinNS  int64          `json:"bin_ns"`
	Dims   []ThemisSeries `json:"dims"`
}

// ThemisSeries is one dimension's line.
type ThemisSeries struct {
	Dim    int           `json:"dim"`
	Name   string        `json:"name"` // the legend's: "dim 1"
	Kind   string        `json:"kind,omitempty"`
	Points []ThemisPoint `json:"points"`
}

// ThemisPoint is one bin: from its start for its width, the dimension
// active ActivityPct percent of it.
type ThemisPoint struct {
	Bin         int     `json:"bin"`
	StartMs     float64 `json:"start_ms"`
	ActivityPct float64 `json:"activity_pct"`
}

// ThemisOptions choose what the picture says.
type ThemisOptions struct {
	Title string // default: what it shows, and the bin
}

// NewThemisChart computes the points of runs (ReadThemisActivity's).
func NewThemisChart(runs []ThemisRun, o ThemisOptions) (*ThemisChart, error) {
	if len(runs) == 0 {
		return nil, fmt.Errorf("no activity timeline")
	}
	c := &ThemisChart{Title: o.Title, X: "time (ms)", Y: "activity (% of each bin)"}
	bin := runs[0].BinNS
	for _, r := range runs {
		if err := r.check(math.Inf(1)); err != nil {
			return nil, err
		}
		p := ThemisPanel{Source: r.Source, Title: r.Label, BinNS: r.BinNS}
		if r.BinNS != bin {
			bin = 0
		}
		for _, d := range r.Dims {
			s := ThemisSeries{Dim: d.Dim, Name: fmt.Sprintf("dim %d", d.Dim), Kind: d.Kind}
			for k, v := range d.Activity {
				s.Points = append(s.Points, ThemisPoint{Bin: k, StartMs: d.StartNS[k] / 1e6, ActivityPct: 100 * v})
			}
			p.Dims = append(p.Dims, s)
		}
		c.Panels = append(c.Panels, p)
	}
	if c.Title == "" {
		c.Title = "Activity per dimension (Themis Fig. 9)"
		if bin > 0 {
			c.Title = fmt.Sprintf("Activity per dimension, share of each %s µs (Themis Fig. 9)", strconv.FormatFloat(float64(bin)/1e3, 'f', -1, 64))
		}
	}
	return c, nil
}

// themisWidth is a dimension's line width: dim 1 widest, each next one
// narrower, so that lines on top of each other (every dimension busy, at
// 100 %) show as nested stripes rather than hide one another.
func themisWidth(d, dims int) vg.Length { return vg.Points(1 + 1.25*float64(dims-d)) }

// Write draws the chart: one panel per timeline stacked in a column on
// one time scale and one activity scale, so that a faster schedule ends
// further left; in each a step line per dimension (a bin is one
// flat step, its activity held for its width); one legend at the right,
// a dimension the same colour in every panel.
func (c *ThemisChart) Write(w io.Writer, format string) error {
	if format == "" {
		format = "svg"
	}
	dims := 0
	xmax, ymax := 0.0, 100.0
	for _, p := range c.Panels {
		for _, s := range p.Dims {
			dims = maxInt(dims, s.Dim)
			for _, pt := range s.Points {
				xmax = math.Max(xmax, pt.StartMs+float64(p.BinNS)/1e6)
				ymax = math.Max(ymax, pt.ActivityPct)
			}
		}
	}
	legend := plot.NewLegend()
	legend.Top, legend.Left = true, true
	var plots []*plot.Plot
	for i, p := range c.Panels {
		pl := plot.New()
		pl.Title.Text = p.Title
		pl.Y.Label.Text = c.Y
		if i == len(c.Panels)-1 {
			pl.X.Label.Text = c.X
		}
		pl.X.Min, pl.X.Max = 0, xmax
		pl.Y.Min, pl.Y.Max = 0, ymax
		pl.Y.Tick.Marker = plot.ConstantTicks(percentTicks(ymax))
		for _, s := range p.Dims {
			if len(s.Points) == 0 {
				continue
			}
			xy := make(plotter.XYs, 0, len(s.Points)+1)
			for _, pt := range s.Points {
				xy = append(xy, plotter.XY{X: pt.StartMs, Y: pt.ActivityPct})
			}
			// The last bin's step ends where the bin does.
			last := s.Points[len(s.Points)-1]
			xy = append(xy, plotter.XY{X: last.StartMs + float64(p.BinNS)/1e6, Y: last.ActivityPct})
			l, err := plotter.NewLine(xy)
			if err != nil {
				return fmt.Errorf("%s: dim %d: %v", p.Title, s.Dim, err)
			}
			l.StepStyle = plotter.PostStep
			l.Color = plotutil.Color(s.Dim - 1)
			l.Width = themisWidth(s.Dim, dims)
			pl.Add(l)
			if i == 0 || !legendHas(c, s.Dim, i) {
				legend.Add(s.Name, l)
			}
		}
		plots = append(plots, pl)
	}
	const panelH = 6 * vg.Centimeter
	width, height := 20*vg.Centimeter, vg.Length(len(plots))*panelH+2*vg.Centimeter
	cw, err := draw.NewFormattedCanvas(width, height, format)
	if err != nil {
		return err
	}
	dc := draw.New(cw)
	title := plot.New().Title.TextStyle
	title.XAlign, title.YAlign = draw.XCenter, draw.YTop
	dc.FillText(title, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Millimeter*2}, c.Title)
	dc.Max.Y -= title.Height(c.Title) + vg.Millimeter*4
	// The legend's strip at the right, level with the first panel's top.
	strip := dc
	dc.Max.X -= 3 * vg.Centimeter
	strip.Min.X = dc.Max.X + vg.Millimeter*2
	strip.Max.Y -= vg.Millimeter * 8
	legend.Draw(strip)
	tiles := draw.Tiles{Rows: len(plots), Cols: 1, PadY: vg.Millimeter * 4, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	rows := make([][]*plot.Plot, len(plots))
	for i, p := range plots {
		rows[i] = []*plot.Plot{p}
	}
	canvases := plot.Align(rows, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[i][0])
	}
	_, err = cw.WriteTo(w)
	return err
}

// legendHas says whether an earlier panel than i already put dim in the
// legend.
func legendHas(c *ThemisChart, dim, i int) bool {
	for _, p := range c.Panels[:i] {
		for _, s := range p.Dims {
			if s.Dim == dim && len(s.Points) > 0 {
				return true
			}
		}
	}
	return false
}

// percentTicks are the activity axis's ticks: every 25 % up to ymax.
func percentTicks(ymax float64) []plot.Tick {
	step := 25.0
	if ymax > 200 {
		step = 100
	}
	var t []plot.Tick
	for v := 0.0; v <= ymax+1e-9; v += step {
		t = append(t, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', -1, 64)})
	}
	return t
}
