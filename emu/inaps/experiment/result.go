package experiment

import (
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/endpoint"
	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/faults"
)

// Result is what an experiment measured and whether it held.
type Result struct {
	Policy      string        `json:"policy"`
	Seed        uint64        `json:"seed"`
	Aggregators int           `json:"aggregators"`
	Jobs        []JobResult   `json:"jobs"`
	MeanJCT     time.Duration `json:"mean_jct_ns"`
	// MeanUtilisation averages the jobs' (payload over t_comm).
	MeanUtilisation     float64              `json:"mean_utilisation"`
	MeanUtilisationWire float64              `json:"mean_utilisation_wire"`
	Switch              inaps.Stats          `json:"switch"`
	PS                  endpoint.PSStats     `json:"ps"`
	Workers             endpoint.WorkerStats `json:"workers"`
	ECNMarks            uint64               `json:"ecn_marks"`
	FCSDrops            uint64               `json:"fcs_drops"`
	Faults              faults.Stats         `json:"faults"`
	Links               fabric.LinkStats     `json:"links"`
	// StaleAggregators are aggregators the jobs still held when they
	// ended (tasks a late or duplicate contribution started after the
	// result was out), freed by the jobs' teardown.
	StaleAggregators int           `json:"stale_aggregators"`
	OpenPSEntries    int           `json:"open_ps_entries"`
	Virtual          time.Duration `json:"virtual_ns"`
	Wall             time.Duration `json:"wall_ns"`
	Finished         bool          `json:"finished"`
	// Exact: every worker holds every result, each the exact sum; no
	// aggregator left allocated, no PS entry open.
	Exact    bool     `json:"exact"`
	Failures []string `json:"failures,omitempty"`
}

// JobResult is one job's measurements.
type JobResult struct {
	Name        string                 `json:"name"`
	Model       string                 `json:"model"`
	Workers     int                    `json:"workers"`
	Fragments   uint32                 `json:"fragments_per_iteration"`
	Iterations  []train.IterationStats `json:"iterations"`
	MeanJCT     time.Duration          `json:"mean_jct_ns"`
	Utilisation float64                `json:"utilisation"`
	// UtilisationWire counts the results' frames with Ethernet's
	// overhead (preamble, FCS, gap) instead of their payload.
	UtilisationWire float64 `json:"utilisation_wire"`
	UtilisationJCT  float64 `json:"utilisation_jct"`
	HeldNs          int64   `json:"aggregator_ns_held"`
	// WaitingNs is the part of HeldNs during which a task still missed
	// contributions.
	WaitingNs int64  `json:"aggregator_ns_waiting"`
	Results   uint64 `json:"results_checked"`
	Wrong     uint64 `json:"wrong_results"`
	MinWindow int    `json:"min_window"`
	MaxWindow int    `json:"max_window"`
	// Cwnd is each worker's window trace (frames from a time on).
	Cwnd [][]endpoint.CwndPoint `json:"cwnd_trace"`
}

func collect(cfg Config, f *fabric.Fabric, prog *inaps.Program, jobs []*job, end time.Duration) *Result {
	r := &Result{Policy: cfg.Policy.String(), Seed: cfg.Seed, Aggregators: cfg.Aggregators, Virtual: end,
		ECNMarks: f.ECNMarks(), FCSDrops: f.FCSDrops(), Faults: f.FaultStats(), Links: f.LinkStats()}
	held, wait := prog.HeldByJob(), prog.WaitingByJob()
	for _, j := range jobs {
		loops := make([]*train.Loop, len(j.workers))
		jr := JobResult{Name: j.spec.Name, Model: j.spec.Model.Name, Workers: j.spec.Workers, MinWindow: 1 << 30}
		for i, w := range j.workers {
			loops[i] = w.loop
			jr.Fragments = w.total
			s := w.t.Stats
			r.Workers.Add(s)
			r.Workers.ChannelRetry += w.t.ChannelRetries()
			jr.MinWindow = min(jr.MinWindow, s.MinWindow)
			jr.MaxWindow = max(jr.MaxWindow, s.MaxWindowSeen)
			jr.Cwnd = append(jr.Cwnd, w.t.Cwnd)
			want := uint64(w.total) * uint64(cfg.Iterations)
			if s.Results != want {
				r.Failures = append(r.Failures, fmt.Sprintf("job %s worker %d holds %d of its %d results (%s)", j.spec.Name, i, s.Results, want, w.t.Describe()))
			}
		}
		payload := int64(jr.Fragments) * inaps.AggregatorBytes
		st := train.JobStats(loops, payload, cfg.LinkRate)
		jr.Iterations, jr.MeanJCT, jr.Utilisation, jr.UtilisationJCT = st.Iterations, st.MeanJCT, st.MeanUtilisation, st.MeanUtilisationJCT
		jr.UtilisationWire = jr.Utilisation * float64(inaps.FrameLen+fabric.WireOverhead) / inaps.AggregatorBytes
		jr.Results, jr.Wrong = j.oracle.Checked, j.oracle.Wrong
		jr.HeldNs, jr.WaitingNs = held[j.id], wait[j.id]
		if j.oracle.Wrong > 0 {
			r.Failures = append(r.Failures, fmt.Sprintf("%d wrong results: first %s", j.oracle.Wrong, j.oracle.First))
		}
		if j.ps != nil {
			r.PS.Add(j.ps.Stats)
			r.PS.ChannelRetries += j.ps.Retries()
			if n := j.ps.Open(); n > 0 {
				r.OpenPSEntries += n
				r.Failures = append(r.Failures, fmt.Sprintf("job %s: %d PS entries still open:%s", j.spec.Name, n, j.ps.Describe()))
			}
		}
		if n := prog.Teardown(j.id); cfg.Policy != inaps.Static {
			// A static job's region is its own for its life: its slots
			// keep the last rounds' results (shadow copies) by design.
			r.StaleAggregators += n
		}
		r.Jobs = append(r.Jobs, jr)
		r.MeanJCT += jr.MeanJCT
		r.MeanUtilisation += jr.Utilisation
		r.MeanUtilisationWire += jr.UtilisationWire
	}
	r.MeanJCT /= time.Duration(len(jobs))
	r.MeanUtilisation /= float64(len(jobs))
	r.MeanUtilisationWire /= float64(len(jobs))
	r.Switch = prog.Stats()
	if n := r.Switch.LostContributions; n > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("the switch freed %d contributions that never left it in a frame", n))
	}
	if n := r.Switch.InUse; n > 0 {
		r.Failures = append(r.Failures, fmt.Sprintf("%d aggregators still allocated after every job's teardown", n))
	}
	r.Exact = len(r.Failures) == 0
	return r
}
