package emu

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// SweepPoint is one cell of a sweep: an algorithm, a link rate and the
// netem impairment on every link ("" for none).
type SweepPoint struct {
	Mode  Mode
	Rate  float64
	Netem string
}

// SweepRow is what the runs of one point did. Bandwidths and per-run
// counts are medians over the runs that ended exact.
type SweepRow struct {
	// Point is the row's index in the grid (modes × links × impairments),
	// which keeps its place when shards of a sweep are merged.
	Point     int      `json:"point"`
	Mode      string   `json:"mode"`
	Link      string   `json:"link"`
	Netem     string   `json:"netem"`
	Runs      int      `json:"runs"`
	Exact     int      `json:"exact"`
	Failed    int      `json:"failed"`             // ended in a transport error
	Wrong     int      `json:"wrong"`              // ended with a result that differs
	AlgBWGBps float64  `json:"algbw_gbytes_per_s"` // GB/s (10^9 bytes/s), as nccl-tests prints
	BusBWGBps float64  `json:"busbw_gbytes_per_s"`
	AlgBWGbps float64  `json:"algbw_gbps"` // Gbit/s
	BusBWGbps float64  `json:"busbw_gbps"`
	Retrans   float64  `json:"retransmissions"`
	Timeouts  float64  `json:"timeouts"`
	Seeds     []uint64 `json:"seeds"`
	Errors    []string `json:"errors,omitempty"` // the first few failures, with their seed
}

// Sweep runs base at every point with each seed (runs in parallel, one
// per core; each run is deterministic, so the rows are too) and reports
// a row per point, in the order of points. progress, if set, is called
// after each run (from one goroutine at a time). When base.Context ends,
// no further run starts, those under way stop, and the error wraps the
// context's cause.
func Sweep(base Config, points []SweepPoint, seeds []uint64, progress func(done, total int)) ([]SweepRow, error) {
	if len(points) == 0 || len(seeds) == 0 {
		return nil, &ConfigError{Err: errors.New("sweep: nothing to run")}
	}
	type job struct{ p, s int }
	cfgs := make([]Config, len(points))
	for i, p := range points {
		c := base
		c.Progress = nil // the runs go in parallel: progress counts runs (the progress argument)
		c.Mode, c.Link.Rate = p.Mode, p.Rate
		n, err := faults.ParseNetem(p.Netem)
		if err != nil {
			return nil, &ConfigError{Err: err}
		}
		c.Netem = n
		c.Seed = seeds[0]
		if err := c.Validate(); err != nil {
			return nil, err
		}
		cfgs[i] = c
	}
	results := make([][]*Result, len(points))
	errs := make([][]error, len(points))
	for i := range points {
		results[i], errs[i] = make([]*Result, len(seeds)), make([]error, len(seeds))
	}
	jobs := make(chan job)
	var mu sync.Mutex
	done, total := 0, len(points)*len(seeds)
	var wg sync.WaitGroup
	// Runs in parallel, one per core, as many as fit in memory together:
	// each run's own check only knows about itself.
	par := max(1, min(runtime.GOMAXPROCS(0), total))
	if avail, ok := AvailableMemory(); ok && base.MaxMemory >= 0 {
		if base.MaxMemory > 0 {
			avail = base.MaxMemory
		}
		var need int64
		for _, c := range cfgs {
			need = max(need, EstimateMemory(c).Total)
		}
		if need > 0 {
			par = max(1, min(par, int(avail/need)))
		}
	}
	for w := 0; w < par; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				c := cfgs[j.p]
				c.Seed = seeds[j.s]
				res, err := Run(c)
				mu.Lock()
				results[j.p][j.s], errs[j.p][j.s] = res, err
				done++
				if progress != nil {
					progress(done, total)
				}
				mu.Unlock()
			}
		}()
	}
	var stop <-chan struct{} // base.Context: no new runs, and those under way end at their next poll
	if base.Context != nil {
		stop = base.Context.Done()
	}
feed:
	for p := range points {
		for s := range seeds {
			select {
			case jobs <- job{p, s}:
			case <-stop:
				break feed
			}
		}
	}
	close(jobs)
	wg.Wait()
	if base.Context != nil && base.Context.Err() != nil {
		return nil, fmt.Errorf("interrupted after %d of %d runs: %w", done, total, context.Cause(base.Context))
	}
	rows := make([]SweepRow, len(points))
	for i, p := range points {
		r := SweepRow{Mode: p.Mode.String(), Link: units.FormatRate(p.Rate), Netem: p.Netem, Runs: len(seeds), Seeds: seeds}
		var alg, bus, re, to []float64
		for s, res := range results[i] {
			var je *JobError
			switch err := errs[i][s]; {
			case errors.As(err, &je):
				r.Failed++
				if len(r.Errors) < 3 {
					r.Errors = append(r.Errors, fmt.Sprintf("seed %d: %v", seeds[s], err))
				}
			case err != nil:
				return nil, err
			case !res.Exact:
				r.Wrong++
				if len(r.Errors) < 3 {
					m := res.Mismatch
					r.Errors = append(r.Errors, fmt.Sprintf("seed %d: WRONG RESULT: rank %d element %d is %s, want %s", seeds[s], m.Rank, m.Element, m.Got, m.Want))
				}
			default:
				r.Exact++
				alg, bus = append(alg, res.AlgBWGbps), append(bus, res.BusBWGbps)
				re, to = append(re, float64(res.Retransmissions)), append(to, float64(res.Timeouts))
			}
		}
		r.AlgBWGbps, r.BusBWGbps, r.Retrans, r.Timeouts = median(alg), median(bus), median(re), median(to)
		r.AlgBWGBps, r.BusBWGBps = r.AlgBWGbps/8, r.BusBWGbps/8
		rows[i] = r
	}
	return rows, nil
}

// median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}
