package congestion

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic/dcqcn"
)

// DCQCNPaperRED is the switches' marking in Zhu et al.'s testbed and fluid
// model at 40 Gb/s (SIGCOMM '15, §5: Kmin 5 KB, Kmax 200 KB, Pmax 1%),
// the `--red 5KB,200KB,1%` of the commands.
var DCQCNPaperRED = fabric.RED{Kmin: 5000, Kmax: 200000, Pmax: 0.01}

// DCQCNIncast is an N:1 traffic job on a star: hosts h0..h(N−1) each write
// FlowBytes to hN with RDMA WRITEs, every link Rate bit/s with Latency of
// propagation, through one switch. It is `inaemu run --mode traffic
// --workers N+1 --link RATE --tensor BYTES` plus the congestion flags.
type DCQCNIncast struct {
	Senders   int
	Rate      float64       // every link's, bit/s
	Latency   time.Duration // every link's one-way propagation delay
	FlowBytes int64
	// Starts, if set, are the flows' start offsets (flow i from h_i):
	// explicit flows instead of the incast pattern.
	Starts []time.Duration
	DCQCN  bool       // --cc dcqcn
	RED    fabric.RED // --red (zero: none)
	PFC    bool       // --pfc on
	Seed   uint64
	// Bin is the flows' timeline bin (0: 100 µs); Sample the interval of
	// the queue and rate samples (0: 1 µs).
	Bin, Sample time.Duration
}

// Config is the run's emu.Config.
func (c DCQCNIncast) Config() emu.Config {
	cfg := emu.DefaultConfig()
	cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.Seed = "traffic", c.Senders+1, c.FlowBytes, c.Seed
	cfg.Link.Rate, cfg.Link.Latency = c.Rate, c.Latency
	bin := c.Bin
	if bin == 0 {
		bin = 100 * time.Microsecond
	}
	cfg.Traffic = &emu.Traffic{Bin: bin}
	sink := fmt.Sprintf("h%d", c.Senders)
	for i, st := range c.Starts {
		cfg.Traffic.Flows = append(cfg.Traffic.Flows, emu.Flow{From: fmt.Sprintf("h%d", i), To: sink, Bytes: c.FlowBytes, Start: st})
	}
	if c.DCQCN {
		cfg.CC = "dcqcn"
	}
	cfg.Congestion.RED = c.RED
	if c.PFC {
		cfg.Congestion.PFC = "on"
	}
	cfg.MaxVirtual = 10 * time.Second
	return cfg
}

// DCQCNRun is what an DCQCNIncast did: the run's result, the sink's switch
// egress queue sampled every Sample, and each sender QP's DCQCN rate (Rc)
// at the same instants (empty without DCQCN).
type DCQCNRun struct {
	Result *emu.Result
	Queue  *fabric.QueueSampler
	// Rc[i][k] is flow i's sender QP's current rate at Queue's k-th
	// sample, bit/s.
	Rc [][]float64
}

// Run runs the incast to its end, sampling the bottleneck as it goes
// (the sampling only reads: the frames are `inaemu run`'s).
func (c DCQCNIncast) Run() (*DCQCNRun, error) {
	if c.Senders < 1 {
		return nil, errors.New("congestion: an incast needs a sender")
	}
	cfg := c.Config()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	u, err := emu.NewSession(cfg)
	if err != nil {
		return nil, err
	}
	sinkNIC := u.Fab.Hosts[c.Senders]
	dir, _ := u.Fab.DirInto(sinkNIC)
	every := c.Sample
	if every == 0 {
		every = time.Microsecond
	}
	q, err := u.Fab.SampleQueue(dir, every)
	if err != nil {
		return nil, err
	}
	out := &DCQCNRun{Queue: q}
	if c.DCQCN {
		// Each sender's DCQCN and its one sending QP (a traffic job's
		// sender has one QP per flow, and here one flow).
		type rp struct {
			o   *dcqcn.Offload
			qpn uint32
		}
		var rps []rp
		for i := range c.Senders {
			h := u.Fab.Hosts[i]
			for _, o := range h.Offloads() {
				if d, ok := o.(*dcqcn.Offload); ok && len(h.QPs()) > 0 {
					rps = append(rps, rp{d, h.QPs()[0].QPN()})
				}
			}
		}
		out.Rc = make([][]float64, len(rps))
		var tick func()
		t := u.Fab.Clock.AfterFunc(0, func() { tick() })
		tick = func() {
			for i, r := range rps {
				out.Rc[i] = append(out.Rc[i], r.o.Rate(r.qpn))
			}
			t.Reset(every)
		}
	}
	j := u.Jobs[0]
	if err := j.Begin(); err != nil {
		return nil, err
	}
	res := u.Loop()
	q.Stop()
	out.Result = res
	if err := u.Err(); err != nil {
		return out, err
	}
	if m := j.Alg.Check(); m != nil {
		return out, fmt.Errorf("congestion: flow bytes differ at rank %d element %d", m.Rank, m.Element)
	}
	return out, nil
}

// DCQCNFairness is the fairness experiment's numbers over its window.
type DCQCNFairness struct {
	FromNS     int64     `json:"from_ns"`
	ToNS       int64     `json:"to_ns"`
	RatesGbps  []float64 `json:"rates_gbps"` // each flow's goodput in the window
	TotalGbps  float64   `json:"total_gbps"`
	Jain       float64   `json:"jain"`
	QueueMeanB float64   `json:"queue_mean_bytes"` // the sink's egress, sampled
	QueueP5B   int       `json:"queue_p5_bytes"`
	QueueP95B  int       `json:"queue_p95_bytes"`
	QueueMaxB  int       `json:"queue_max_bytes"`
	// InBand is the share of the window's samples with the queue within
	// [0, Kmax] (DCQCN's operating band: RED marks every packet above
	// Kmax).
	InBand float64 `json:"in_band"`
}

// DCQCNFairness measures the flows and the queue over the last half of the
// time every flow ran (from the last flow's start to the first flow's
// end), collective.WindowRates and JainIndex.
func (r *DCQCNRun) Fairness(red fabric.RED) DCQCNFairness {
	j := r.Result.Jobs[0]
	start := time.Duration(j.StartNS)
	var lastStart, firstEnd time.Duration = 0, math.MaxInt64
	for _, f := range j.Flows {
		lastStart = max(lastStart, time.Duration(f.StartNS))
		firstEnd = min(firstEnd, time.Duration(f.StartNS+f.FCTNS))
	}
	from, to := lastStart+(firstEnd-lastStart)/2, firstEnd
	f := DCQCNFairness{FromNS: int64(from), ToNS: int64(to)}
	for _, x := range collective.WindowRates(j.Flows, start, from, to) {
		f.RatesGbps = append(f.RatesGbps, x/1e9)
		f.TotalGbps += x / 1e9
	}
	f.Jain = collective.JainIndex(f.RatesGbps)
	q := dcqcnQueueStats(r.Queue.Window(from, to), red)
	f.QueueMeanB, f.QueueP5B, f.QueueP95B, f.QueueMaxB, f.InBand = q.mean, q.p5, q.p95, q.max, q.inBand
	return f
}

type dcqcnQueue struct {
	mean         float64
	p5, p95, max int
	inBand       float64
}

func dcqcnQueueStats(s []int, red fabric.RED) dcqcnQueue {
	if len(s) == 0 {
		return dcqcnQueue{}
	}
	sorted := append([]int(nil), s...)
	slices.Sort(sorted)
	var sum float64
	in := 0
	for _, b := range s {
		sum += float64(b)
		if b <= red.Kmax {
			in++
		}
	}
	n := len(sorted)
	return dcqcnQueue{mean: sum / float64(n), p5: sorted[n*5/100], p95: sorted[min(n*95/100, n-1)], max: sorted[n-1], inBand: float64(in) / float64(n)}
}
