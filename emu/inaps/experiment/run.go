package experiment

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/endpoint"
	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
)

// worker is one worker: its transport and its training loop, joined.
type worker struct {
	t     *endpoint.Worker
	loop  *train.Loop
	iter  int
	begun bool
	total uint32
	next  uint32 // the next partition's first sequence number, to check the loop's
	err   error
}

// Push is the loop handing a partition to the transport.
func (w *worker) Push(iter int, p train.Partition, prio uint8) {
	if !w.begun || iter != w.iter {
		w.t.Begin(uint32(iter), w.total)
		w.iter, w.begun, w.next = iter, true, 1
	}
	if p.FirstSeq != w.next && w.err == nil {
		w.err = fmt.Errorf("partition %d pushed at sequence number %d, the transport's next is %d", p.Pos, p.FirstSeq, w.next)
	}
	w.next += uint32(p.Fragments)
	w.t.Push(uint32(p.Fragments), prio, p.Pos)
}

// job is a job's hosts.
type job struct {
	spec    JobSpec
	id      uint16
	workers []*worker
	ps      *endpoint.PS
	oracle  *endpoint.Oracle
	hosts   []int // its workers' hosts, then its PS's
}

// Run runs the experiment to the end of every job's iterations and
// checks every result.
func Run(cfg Config) (*Result, error) {
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	wall := time.Now()
	// Placement: each job's workers on hosts of their own, then the PSes
	// (ESA: "no overlapping usage of servers", "8 extra servers as the
	// PSes").
	var jobs []*job
	h := 0
	for i, s := range cfg.Jobs {
		j := &job{spec: s, id: uint16(i + 1)}
		for range s.Workers {
			j.hosts = append(j.hosts, h)
			h++
		}
		jobs = append(jobs, j)
	}
	if cfg.Policy.HasPS() {
		for _, j := range jobs {
			j.hosts = append(j.hosts, h)
			h++
		}
	}
	f, err := fabric.New(fabric.Config{
		Hosts: h, Link: fabric.LinkConfig{Rate: cfg.LinkRate, Latency: cfg.Latency, Queue: cfg.Queue},
		// The forwarding pipeline's own time; the program adds SwitchDelay.
		Timing:       switching.Timing{Forward: time.Nanosecond, AggregateFixed: time.Nanosecond, AggregateFloat: time.Nanosecond, Resend: time.Nanosecond},
		ECNMarkBytes: cfg.ECNBytes, Netem: cfg.Netem, Events: cfg.Events, Seed: cfg.Seed,
		Capture: cfg.Capture, SwitchProgram: inaps.ProgramName,
	})
	if err != nil {
		return nil, err
	}
	pp, err := f.Switch.Program(inaps.ProgramName)
	if err != nil {
		return nil, err
	}
	prog := pp.(*inaps.Program)
	if err := prog.Setup(inaps.Config{Policy: cfg.Policy, Aggregators: cfg.Aggregators, Seed: cfg.Seed ^ 0x5eed, Latency: cfg.SwitchDelay, Resubmit: cfg.SwitchDelay}); err != nil {
		return nil, err
	}
	prog.Mutations = cfg.Mutations
	addr := func(n *nic.NIC) inaps.Addr { return inaps.Addr{MAC: [6]byte(n.MAC), IP: n.IP.As4()} }
	rng := rand.New(rand.NewPCG(cfg.Seed, 0xE5A))
	region := cfg.Aggregators / len(jobs)
	for ji, j := range jobs {
		W := j.spec.Workers
		ws := make([]inaps.Addr, W)
		for w := range W {
			ws[w] = addr(f.Hosts[j.hosts[w]])
		}
		var psAddr inaps.Addr
		if cfg.Policy.HasPS() {
			psAddr = addr(f.Hosts[j.hosts[W]])
		}
		sj := inaps.Job{ID: j.id, Workers: ws, PS: psAddr, First: ji * region, Size: region}
		if err := prog.AddJob(sj); err != nil {
			return nil, err
		}
		fl := endpoint.Floats{Scale: cfg.FloatScale}
		j.oracle = endpoint.NewOracle(cfg.Seed, j.id, W, fl)
		var index []uint16
		if cfg.Policy != inaps.Static {
			index = inaps.IndexTable(j.id, cfg.Aggregators)
		}
		parts := j.spec.Model.Partitions(cfg.Order)
		var total uint32
		for _, p := range parts {
			total += uint32(p.Fragments)
		}
		start := time.Duration(0)
		if cfg.StartSpread > 0 {
			start = time.Duration(rng.Int64N(int64(cfg.StartSpread)))
		}
		for w := range W {
			n := f.Hosts[j.hosts[w]]
			wk := &worker{total: total}
			wc := endpoint.WorkerConfig{Job: j.id, Rank: w, Workers: W, Self: ws[w], PS: psAddr, Policy: cfg.Policy, Index: index,
				First: sj.First, Size: sj.Size, Seed: cfg.Seed, InitWindow: cfg.InitWindowBytes / inaps.FrameLen, MaxWindow: cfg.MaxWindow,
				AIMD: !cfg.NoAIMD && cfg.Policy != inaps.Static, RTOMin: cfg.RTOMin, DupThresh: cfg.DupThresh, Oracle: j.oracle, Floats: fl}
			wk.t = endpoint.NewWorker(wc, f.Clock, n.Kick)
			n.SetRawSource(wk.t)
			n.OnControl = wk.t.Receive
			jr := rand.New(rand.NewPCG(cfg.Seed^uint64(j.id)<<32, uint64(w)))
			draw := func() time.Duration { return 0 }
			if cfg.Jitter > 0 {
				draw = func() time.Duration { return time.Duration(jr.Int64N(int64(cfg.Jitter))) }
			}
			wk.loop = train.NewLoop(train.LoopConfig{Model: j.spec.Model, Order: cfg.Order, Iterations: cfg.Iterations, Start: start,
				Draw: draw, LinkRate: cfg.LinkRate, Scale: cfg.PriorityScale, Estimator: cfg.Estimator}, f.Clock, wk)
			wk.t.OnPartitionDone = func(iter uint32, idx int) { wk.loop.PartitionDone(int(iter), idx) }
			j.workers = append(j.workers, wk)
		}
		if cfg.Policy.HasPS() {
			n := f.Hosts[j.hosts[W]]
			j.ps = endpoint.NewPS(endpoint.PSConfig{Job: j.id, Workers: ws, Self: psAddr, Policy: cfg.Policy, Pool: cfg.Aggregators,
				RTOMin: cfg.RTOMin, DupThresh: cfg.DupThresh, Delay: cfg.PSDelay, Floats: fl, Seed: cfg.Seed}, f.Clock, n.Kick)
			n.SetRawSource(j.ps)
			n.OnControl = j.ps.Receive
		}
	}
	// Run until every loop has ended, then let what is still in flight
	// (duplicates, channel acknowledgements, the PS's last entries) land.
	done := func() bool {
		for _, j := range jobs {
			for _, w := range j.workers {
				if !w.loop.Done() {
					return false
				}
			}
		}
		return true
	}
	// A run that stops making progress (no worker got a result for
	// StallTime) is stalled, whatever MaxTime still allows; one that
	// progresses may run to MaxTime.
	results := func() uint64 {
		var n uint64
		for _, j := range jobs {
			for _, w := range j.workers {
				n += w.t.Stats.Results
			}
		}
		return n
	}
	finished, stalled := false, false
	last, lastAt := uint64(0), time.Duration(0)
	for n := 0; f.Clock.Now() <= cfg.MaxTime; n++ {
		if n%1024 == 0 {
			if done() {
				finished = true
				break
			}
			if r := results(); r != last {
				last, lastAt = r, f.Clock.Now()
			} else if f.Clock.Now()-lastAt > cfg.StallTime {
				stalled = true
				break
			}
		}
		if !f.Clock.Step() {
			finished = done()
			stalled = !finished
			break
		}
	}
	// What is still in flight lands (duplicates, channel acknowledgements,
	// the PS's last entries, which a late copy may have opened): until the
	// hosts are idle, or a second of virtual time.
	end := f.Clock.Now()
	idle := func() bool {
		for _, j := range jobs {
			if j.ps != nil && !j.ps.Idle() {
				return false
			}
			for _, w := range j.workers {
				if !w.t.Idle() {
					return false
				}
			}
		}
		return true
	}
	for n := 0; f.Clock.Now() <= end+time.Second; n++ {
		if n%256 == 0 && idle() {
			break
		}
		if !f.Clock.Step() {
			break
		}
	}
	// Then the wire drains (a frame still on a link).
	for stop := f.Clock.Now() + time.Millisecond; f.Clock.Now() <= stop && f.Clock.Step(); {
	}
	res := collect(cfg, f, prog, jobs, end)
	res.Finished = finished
	switch {
	case stalled:
		res.Failures = append(res.Failures, fmt.Sprintf("stalled: no worker got a result from %v to %v of virtual time", lastAt, end))
	case !finished:
		res.Failures = append(res.Failures, fmt.Sprintf("not every job finished within %v of virtual time (still making progress)", cfg.MaxTime))
	}
	for _, j := range jobs {
		for _, w := range j.workers {
			if w.err != nil {
				res.Failures = append(res.Failures, w.err.Error())
			}
		}
	}
	res.Exact = len(res.Failures) == 0
	if err := f.CloseCapture(); err != nil {
		return nil, err
	}
	res.Wall = time.Since(wall)
	return res, nil
}
