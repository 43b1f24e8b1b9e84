package graphs

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/inaemu/inaemu/internal/units"
)

// Sample is one measured point: the run's settings by name, and its
// bandwidths.
type Sample struct {
	Series    string             // what the line is (the mode, and the link when it is not the x axis)
	Params    map[string]float64 // numeric settings: loss (%), link (Gbit/s), workers, bytes, ...
	AlgBWGbps float64
	BusBWGbps float64
}

// ReadResults reads `inaemu sweep --json` objects (one sample per row:
// mode, link, and the loss percentage of its netem setting, 0 without)
// and `inaemu run --json` objects (one sample each, its numeric fields as
// parameters), one or more per input, and names the file in errors.
func ReadResults(name string, r io.Reader) ([]Sample, error) {
	dec := json.NewDecoder(r)
	var out []Sample
	for {
		var obj map[string]any
		if err := dec.Decode(&obj); err == io.EOF {
			break
		} else if err != nil {
			return nil, fmt.Errorf("%s: not inaemu --json output: %v", name, err)
		}
		if rows, ok := obj["rows"].([]any); ok {
			for _, row := range rows {
				m, _ := row.(map[string]any)
				s, err := sweepSample(m)
				if err != nil {
					return nil, fmt.Errorf("%s: %v", name, err)
				}
				out = append(out, s)
			}
			continue
		}
		alg, bus, ok := bandwidths(obj)
		if !ok {
			return nil, fmt.Errorf("%s: not a run or sweep result (no algbw_gbytes_per_s, algbw_gbps or rows)", name)
		}
		s := Sample{Series: fmt.Sprint(obj["mode"]), Params: map[string]float64{}, AlgBWGbps: alg, BusBWGbps: bus}
		for k, v := range obj {
			if f, ok := v.(float64); ok {
				s.Params[k] = f
			}
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no results", name)
	}
	return out, nil
}

func sweepSample(m map[string]any) (Sample, error) {
	mode, _ := m["mode"].(string)
	link, _ := m["link"].(string)
	netem, _ := m["netem"].(string)
	alg, bus, ok := bandwidths(m)
	if mode == "" || !ok {
		return Sample{}, fmt.Errorf("a sweep row without mode or bandwidths")
	}
	s := Sample{Series: mode + " " + link, Params: map[string]float64{"loss": netemLoss(netem)}, AlgBWGbps: alg, BusBWGbps: bus}
	if g, err := gbit(link); err == nil {
		s.Params["link"] = g
	}
	return s, nil
}

// bandwidths are a result's algbw and busbw in Gbit/s: from the keys in
// Gbit/s, or from those in GB/s (algbw_gbytes_per_s, as nccl-tests
// prints) for results that have only them.
func bandwidths(m map[string]any) (alg, bus float64, ok bool) {
	alg, ok1 := m["algbw_gbps"].(float64)
	bus, ok2 := m["busbw_gbps"].(float64)
	if ok1 && ok2 {
		return alg, bus, true
	}
	alg, ok1 = m["algbw_gbytes_per_s"].(float64)
	bus, ok2 = m["busbw_gbytes_per_s"].(float64)
	return alg * 8, bus * 8, ok1 && ok2
}

// netemLoss is the percentage of a netem setting's plain "loss P%" (0
// without one).
func netemLoss(netem string) float64 {
	f := strings.Fields(netem)
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "loss" {
			if v, err := strconv.ParseFloat(strings.TrimSuffix(f[i+1], "%"), 64); err == nil {
				return v
			}
		}
	}
	return 0
}

// gbit reads a rate like 10G, 100G, 400M as Gbit/s.
func gbit(s string) (float64, error) {
	mult := map[byte]float64{'T': 1e3, 'G': 1, 'M': 1e-3, 'K': 1e-6}
	if n := len(s); n > 1 {
		if m, ok := mult[s[n-1]]; ok {
			v, err := strconv.ParseFloat(s[:n-1], 64)
			return v * m, err
		}
	}
	return 0, fmt.Errorf("rate %q", s)
}

// SweepOptions choose the bandwidth graph's axes.
type SweepOptions struct {
	X      string // the parameter on the x axis: loss, link, workers, bytes, ...
	BusBW  bool   // plot busbw instead of algbw
	LogX   bool   // a log x axis (points at x ≤ 0 are left out)
	Title  string
	Format string              // svg (default), png or pdf
	Unit   units.BandwidthUnit // the y axis's: GB/s (default) or Gbit/s, as the reports print it
}

// WriteSweep draws bandwidth against opt.X, one line per series (the
// mode, and the link when it is not the x axis), points sorted by x.
func WriteSweep(w io.Writer, samples []Sample, o SweepOptions) error {
	series := map[string]plotter.XYs{}
	var names []string
	for _, s := range samples {
		x, ok := s.Params[o.X]
		if !ok {
			return fmt.Errorf("--x %s: the results have no such parameter (%s)", o.X, strings.Join(paramNames(samples), ", "))
		}
		if o.LogX && x <= 0 {
			continue
		}
		name := s.Series
		if o.X == "link" {
			name = strings.Fields(name)[0]
		}
		if _, seen := series[name]; !seen {
			names = append(names, name)
		}
		y := o.Unit.FromGbps(s.AlgBWGbps)
		if o.BusBW {
			y = o.Unit.FromGbps(s.BusBWGbps)
		}
		series[name] = append(series[name], plotter.XY{X: x, Y: y})
	}
	if len(names) == 0 {
		return fmt.Errorf("no point to draw")
	}
	p := plot.New()
	p.Title.Text = o.Title
	p.X.Label.Text = map[string]string{"loss": "loss (%)", "link": "link rate (Gbit/s)"}[o.X]
	if p.X.Label.Text == "" {
		p.X.Label.Text = o.X
	}
	p.Y.Label.Text = "algbw (" + o.Unit.String() + ")"
	if o.BusBW {
		p.Y.Label.Text = "busbw (" + o.Unit.String() + ")"
	}
	if o.LogX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{Prec: -1}
	}
	p.Legend.Top = true
	for i, n := range names {
		xy := series[n]
		sort.Slice(xy, func(a, b int) bool { return xy[a].X < xy[b].X })
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return err
		}
		l.Color, pts.Color, pts.Shape = plotutil.Color(i), plotutil.Color(i), plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(n, l, pts)
	}
	p.Y.Min = math.Min(p.Y.Min, 0)
	if o.Format == "" {
		o.Format = "svg"
	}
	wt, err := p.WriterTo(20*vg.Centimeter, 13*vg.Centimeter, o.Format)
	if err != nil {
		return err
	}
	_, err = wt.WriteTo(w)
	return err
}

func paramNames(samples []Sample) []string {
	seen := map[string]bool{}
	for _, s := range samples {
		for k := range s.Params {
			seen[k] = true
		}
	}
	var n []string
	for k := range seen {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}
