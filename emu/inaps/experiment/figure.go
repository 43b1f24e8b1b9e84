package experiment

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/train"
)

// Mix is how a run's jobs take their models: every job model A, every
// job B, or A and B alternately (A:B = 1:1 with an even number of jobs).
type Mix string

// Jobs makes n jobs of w workers each with the mix's models.
func (m Mix) Jobs(n, w int) ([]JobSpec, error) {
	a, err := train.LoadModel("A")
	if err != nil {
		return nil, err
	}
	b, err := train.LoadModel("B")
	if err != nil {
		return nil, err
	}
	var out []JobSpec
	for i := range n {
		var model *train.Model
		switch m {
		case "A":
			model = a
		case "B":
			model = b
		case "AB":
			model = a
			if i%2 == 1 {
				model = b
			}
		default:
			return nil, fmt.Errorf("mix %q: want A, B or AB", string(m))
		}
		out = append(out, JobSpec{Name: fmt.Sprintf("job%d", i+1), Model: model, Workers: w})
	}
	return out, nil
}

// Cell is one point of a figure: a policy on jobs × workers of a mix.
type Cell struct {
	Policy  string `json:"policy"`
	Jobs    int    `json:"jobs"`
	Workers int    `json:"workers"`
	Mix     Mix    `json:"mix"`
}

func (c Cell) String() string {
	return fmt.Sprintf("%s %d×%d %s", c.Policy, c.Jobs, c.Workers, c.Mix)
}

// Figures are ESA's evaluation's figures (its §7.2.1) as grids of cells:
// the values the paper does not print (the x axes of Figs. 8 and 9) are
// inaemu's: 1, 2, 4, 6 and 8 jobs (one job of the 1:1 mix is an A job;
// the even ones keep the mix exact), 2, 4, 6 and 8 workers.
var Figures = map[int]struct {
	Doc   string
	Cells func() []Cell
}{
	8: {"average JCT against the number of jobs (8 workers each)", func() []Cell {
		return grid([]string{"esa", "fcfs", "static"}, []int{1, 2, 4, 6, 8}, []int{8}, []Mix{"A", "B", "AB"})
	}},
	9: {"average JCT against the workers per job (8 jobs)", func() []Cell {
		return grid([]string{"esa", "fcfs", "static"}, []int{8}, []int{2, 4, 6, 8}, []Mix{"A", "B", "AB"})
	}},
	10: {"utilisation at 8 jobs × 8 workers", func() []Cell {
		return grid([]string{"esa", "fcfs", "static"}, []int{8}, []int{8}, []Mix{"A", "B", "AB"})
	}},
	11: {"the priority ablation at 8 × 8: ESA against its straw men and ATP", func() []Cell {
		return grid([]string{"esa", "straw1", "straw2", "fcfs"}, []int{8}, []int{8}, []Mix{"A", "AB"})
	}},
}

func grid(pols []string, jobs, workers []int, mixes []Mix) []Cell {
	var out []Cell
	for _, m := range mixes {
		for _, j := range jobs {
			for _, w := range workers {
				for _, p := range pols {
					out = append(out, Cell{Policy: p, Jobs: j, Workers: w, Mix: m})
				}
			}
		}
	}
	return out
}

// FigureNumbers are the figures' numbers, ascending.
func FigureNumbers() []int {
	var n []int
	for k := range Figures {
		n = append(n, k)
	}
	sort.Ints(n)
	return n
}

// CellResult is a cell over its seeds.
type CellResult struct {
	Cell
	Point int `json:"point"` // the cell's index in its figure's grid
	Runs  int `json:"runs"`
	Exact int `json:"exact"`
	// Means over the runs: the jobs' average JCT, utilisation (payload
	// and wire), and the counters that say where the time went.
	MeanJCT             time.Duration `json:"mean_jct_ns"`
	MeanUtilisation     float64       `json:"mean_utilisation"`
	MeanUtilisationWire float64       `json:"mean_utilisation_wire"`
	Collisions          float64       `json:"collisions"`
	Preemptions         float64       `json:"preemptions"`
	FailedPreemptions   float64       `json:"failed_preemptions"`
	Diverted            float64       `json:"diverted"`
	PSCompleted         float64       `json:"ps_completed"`
	Reminders           float64       `json:"reminders"`
	WorkerReminders     float64       `json:"worker_reminders"`
	Timeouts            float64       `json:"timeouts"`
	ECNWindows          float64       `json:"ecn_windows"`
	MaxInUse            float64       `json:"max_aggregators_in_use"`
	Seeds               []uint64      `json:"seeds"`
	Errors              []string      `json:"errors,omitempty"`
}

// RunCell runs a cell at seeds seed, seed+1, ... on base's settings.
func RunCell(base Config, c Cell, seed uint64, seeds int) CellResult {
	r := CellResult{Cell: c}
	pol, err := inaps.ParsePolicy(c.Policy)
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
		return r
	}
	jobs, err := c.Mix.Jobs(c.Jobs, c.Workers)
	if err != nil {
		r.Errors = append(r.Errors, err.Error())
		return r
	}
	for s := range seeds {
		cfg := base
		cfg.Policy, cfg.Jobs, cfg.Seed, cfg.Capture = pol, jobs, seed+uint64(s), nil
		res, err := Run(cfg)
		r.Runs++
		r.Seeds = append(r.Seeds, cfg.Seed)
		if err != nil {
			r.Errors = append(r.Errors, fmt.Sprintf("seed %d: %v", cfg.Seed, err))
			continue
		}
		if !res.Exact {
			r.Errors = append(r.Errors, fmt.Sprintf("seed %d: %s", cfg.Seed, strings.Join(res.Failures, "; ")))
			continue
		}
		r.Exact++
		r.MeanJCT += res.MeanJCT
		r.MeanUtilisation += res.MeanUtilisation
		r.MeanUtilisationWire += res.MeanUtilisationWire
		r.Collisions += float64(res.Switch.Collisions)
		r.Preemptions += float64(res.Switch.Preemptions)
		r.FailedPreemptions += float64(res.Switch.FailedPreempts)
		r.Diverted += float64(res.Switch.Diverted)
		r.PSCompleted += float64(res.PS.Completed)
		r.Reminders += float64(res.PS.Reminders)
		r.WorkerReminders += float64(res.PS.WorkerReminder)
		r.Timeouts += float64(res.Workers.Timeouts)
		r.ECNWindows += float64(res.Workers.ECNWindows)
		r.MaxInUse += float64(res.Switch.MaxInUse)
	}
	if n := r.Exact; n > 0 {
		f := float64(n)
		r.MeanJCT /= time.Duration(n)
		r.MeanUtilisation /= f
		r.MeanUtilisationWire /= f
		for _, p := range []*float64{&r.Collisions, &r.Preemptions, &r.FailedPreemptions, &r.Diverted, &r.PSCompleted, &r.Reminders, &r.WorkerReminders, &r.Timeouts, &r.ECNWindows, &r.MaxInUse} {
			*p /= f
		}
	}
	return r
}
