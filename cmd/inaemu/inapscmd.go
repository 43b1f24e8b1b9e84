package main

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/experiment"
	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// inapsFlags are the settings every INA-PS command shares: the fabric,
// the hosts' transport, the training loop, faults.
type inapsFlags struct {
	jobs, workers, iterations, queue, maxWindow, dupack int
	models, memory, order, link, latency, ecn, window   string
	rtoMin, spread, jitter, psDelay, swDelay, maxTime   string
	estimator, loss, netem, dtype                       string
	scale, fixed                                        float64
	noAIMD                                              bool
	fault                                               []string
	seed                                                uint64
}

func addINAPSFlags(c *cobra.Command, a *inapsFlags, figure bool) {
	f := c.Flags()
	if !figure {
		f.IntVar(&a.jobs, "jobs", 8, "jobs sharing the switch (1..64)")
		f.IntVar(&a.workers, "workers", 8, "workers per job (1..32, the bitmap's bits)")
		f.StringVar(&a.models, "models", "A", "each job's model, comma-separated and repeated over the jobs: A or B (ESA's DNN A and DNN B), AB (A and B alternately), or a CSV file (SwitchML's dnn_benchmark columns layer_index, numel, forward_pass_ns, backward_pass_ns, plus partitions and comm_comp)")
	}
	f.StringVar(&a.memory, "switch-memory", "4960000B", "the switch's aggregator memory, shared by every job: a size (5MB, 1MiB, bytes), 248 bytes (62 × int32) per aggregator; the default is ATP's 20,000 aggregators, ESA's 5 MB")
	f.IntVar(&a.iterations, "iterations", 1, "training iterations per job (1..1000)")
	f.StringVar(&a.order, "order", "esa", "partition send order: esa (L2P1, L1P1, L1P2, L2P2 for two layers) or reverse (dnn_benchmark's: last layer first)")
	f.StringVar(&a.link, "link", "100G", "link rate as tc writes it")
	f.StringVar(&a.latency, "latency", "2.5us", "one-way delay of each link (ESA: a 10 µs base RTT over four links)")
	f.IntVar(&a.queue, "queue", 1000, "egress queue per link direction, frames")
	f.StringVar(&a.ecn, "ecn", "125000B", "egress queue depth that marks ECN (one bandwidth-delay product at 100 Gb/s × 10 µs)")
	f.StringVar(&a.window, "window", "60000B", "a worker's initial window (ATP's 60 KB at 100 Gb/s, whole 308-byte frames)")
	f.IntVar(&a.maxWindow, "max-window", inaps.Slots, "a worker's largest window, frames (1..256)")
	f.BoolVar(&a.noAIMD, "no-aimd", false, "keep the initial window (ATP's public client ships with its AIMD off)")
	f.StringVar(&a.rtoMin, "rto-min", "1ms", "the retransmission timer's floor (ESA: 1 ms)")
	f.IntVar(&a.dupack, "dupack", 3, "results past a missing one that declare it lost (1..64)")
	f.StringVar(&a.spread, "start-spread", "1ms", "job start offsets U(0, D)")
	f.StringVar(&a.jitter, "jitter", "300us", "send jitter U(0, D) per worker per partition")
	f.StringVar(&a.psDelay, "ps-delay", "0", "the PS's processing time per fragment it completes")
	f.StringVar(&a.swDelay, "switch-delay", "0", "the switch's processing time per INA-PS packet (a preemption's resubmission costs it again)")
	f.Float64Var(&a.scale, "priority-scale", train.DefaultScale, "the 8-bit priority's scale: Eq. (1) in 1/ms times this, rounded, in 1..255")
	f.StringVar(&a.estimator, "estimator", "remaining", "T_j of Eq. (1): remaining (comm + comp left in the iteration) or attained (time since the job's start)")
	f.StringVar(&a.dtype, "dtype", "i32", "the gradients: i32 (full-range int32, sums wrap) or f32 (float32 carried as fixed point, value × --scale; a fragment with a value past the range goes to the PS as raw floats, ATP's overflow path)")
	f.Float64Var(&a.fixed, "scale", 1<<24, "with --dtype f32: the fixed-point scale of the jobs' gradients")
	f.StringVar(&a.loss, "loss", "", "netem loss on every link, both directions")
	f.StringVar(&a.netem, "netem", "", "netem options for every link direction, e.g. 'loss 0.1% duplicate 0.1% reorder 1% corrupt 0.1%'")
	f.StringArrayVar(&a.fault, "fault", nil, "deterministic fault 'ACTION key=value ...' (repeatable): port=R dir=in|out (host R's link: workers first, then the PSes), nth=K every=K prob=P%")
	f.StringVar(&a.maxTime, "max-time", "10s", "give up after this much virtual time")
	f.Uint64Var(&a.seed, "seed", 0, "seed of every random choice (default: a fresh one, printed)")
}

// config builds the experiment's settings from the flags (jobs too,
// unless figure).
func (a *inapsFlags) config(e *cmdEnv, figure bool) (experiment.Config, bool) {
	bad := func(f string, v ...any) (experiment.Config, bool) {
		e.usageError(f, v...)
		return experiment.Config{}, false
	}
	var c experiment.Config
	if !e.changed("seed") {
		a.seed = freshSeed()
	}
	c.Seed = a.seed
	mem, err := units.ParseSize(a.memory)
	if err != nil {
		return bad("--switch-memory: %v", err)
	}
	c.Aggregators = int(mem / inaps.AggregatorBytes)
	if c.Aggregators < 1 {
		return bad("--switch-memory %s: less than one aggregator (%d bytes)", a.memory, inaps.AggregatorBytes)
	}
	if c.Aggregators > inaps.MaxAggregators {
		return bad("--switch-memory %s: %d aggregators; the 16-bit index addresses %d (%d bytes)", a.memory, c.Aggregators, inaps.MaxAggregators, inaps.MaxAggregators*inaps.AggregatorBytes)
	}
	if c.Order, err = train.ParseSendOrder(a.order); err != nil {
		return bad("--order: %v", err)
	}
	if c.LinkRate, err = units.ParseRate(a.link); err != nil {
		return bad("--link: %v", err)
	}
	durs := []struct {
		flag string
		v    string
		to   *time.Duration
	}{{"latency", a.latency, &c.Latency}, {"rto-min", a.rtoMin, &c.RTOMin}, {"start-spread", a.spread, &c.StartSpread},
		{"jitter", a.jitter, &c.Jitter}, {"ps-delay", a.psDelay, &c.PSDelay}, {"switch-delay", a.swDelay, &c.SwitchDelay}, {"max-time", a.maxTime, &c.MaxTime}}
	for _, d := range durs {
		if *d.to, err = units.ParseDuration(d.v); err != nil {
			return bad("--%s: %v", d.flag, err)
		}
	}
	if c.RTOMin < time.Microsecond || c.MaxTime <= 0 {
		// Below a microsecond the channels' timers would fire faster than
		// a frame leaves a 100 Gb/s port, queueing copies without bound.
		return bad("--rto-min %s: want at least 1us, and --max-time positive", a.rtoMin)
	}
	if c.Latency <= 0 {
		return bad("--latency %s: want a positive delay", a.latency)
	}
	ecn, err := units.ParseSize(a.ecn)
	if err != nil {
		return bad("--ecn: %v", err)
	}
	c.ECNBytes = int(ecn)
	w, err := units.ParseSize(a.window)
	if err != nil {
		return bad("--window: %v", err)
	}
	if w < inaps.FrameLen || w > int64(a.maxWindow)*inaps.FrameLen && a.maxWindow > 0 {
		return bad("--window %s: want one frame (%d bytes) up to --max-window's %d frames", a.window, inaps.FrameLen, a.maxWindow)
	}
	c.InitWindowBytes = int(w)
	if a.maxWindow < 1 || a.maxWindow > inaps.Slots {
		return bad("--max-window %d: want 1..%d", a.maxWindow, inaps.Slots)
	}
	c.MaxWindow, c.NoAIMD = a.maxWindow, a.noAIMD
	if a.queue < 1 || a.queue > 1<<20 {
		return bad("--queue %d: want 1..%d frames", a.queue, 1<<20)
	}
	c.Queue = a.queue
	if a.dupack < 1 || a.dupack > 64 {
		return bad("--dupack %d: want 1..64", a.dupack)
	}
	c.DupThresh = a.dupack
	if a.iterations < 1 || a.iterations > 1000 {
		return bad("--iterations %d: want 1..1000", a.iterations)
	}
	c.Iterations = a.iterations
	if !(a.scale > 0) || a.scale > 1e9 {
		return bad("--priority-scale %v: want a positive number", a.scale)
	}
	c.PriorityScale = a.scale
	switch a.estimator {
	case "remaining":
		c.Estimator = train.RemainingCommComp
	case "attained":
		c.Estimator = train.AttainedService
	default:
		return bad("--estimator %q: want remaining or attained", a.estimator)
	}
	switch a.dtype {
	case "i32":
	case "f32":
		if !(a.fixed > 0) || a.fixed > 1<<40 {
			return bad("--scale %v: want a positive scale up to 2^40", a.fixed)
		}
		c.FloatScale = a.fixed
	default:
		return bad("--dtype %q: want i32 or f32", a.dtype)
	}
	spec := a.netem
	if a.loss != "" {
		spec = strings.TrimSpace("loss " + a.loss + " " + spec)
	}
	if spec != "" {
		if c.Netem, err = faults.ParseNetem(spec); err != nil {
			return bad("--netem: %v", err)
		}
	}
	for _, s := range a.fault {
		ev, err := faults.Parse(s)
		if err != nil {
			return bad("--fault %q: %v", s, err)
		}
		c.Events = append(c.Events, ev)
	}
	if figure {
		return c, true
	}
	if a.jobs < 1 || a.jobs > 64 {
		return bad("--jobs %d: want 1..64", a.jobs)
	}
	if a.workers < 1 || a.workers > 32 {
		return bad("--workers %d: want 1..32 (the bitmap holds 32 workers)", a.workers)
	}
	models := map[string]*train.Model{}
	names := strings.Split(a.models, ",")
	for i := range a.jobs {
		n := strings.TrimSpace(names[i%len(names)])
		if n == "AB" {
			n = []string{"A", "B"}[i%2]
		}
		m := models[n]
		if m == nil {
			if m, err = train.LoadModel(n); err != nil {
				return bad("--models: %v", err)
			}
			models[n] = m
		}
		c.Jobs = append(c.Jobs, experiment.JobSpec{Name: fmt.Sprintf("job%d", i+1), Model: m, Workers: a.workers})
	}
	return c, true
}

// validateFaults refuses fault events that name no host port.
func validateFaults(e *cmdEnv, c experiment.Config, hosts int) bool {
	for _, ev := range c.Events {
		if ev.Port >= hosts {
			e.usageError("--fault %q: port %d: the run has hosts 0..%d (workers first, then the PSes)", ev.SpecText(), ev.Port, hosts-1)
			return false
		}
		if ev.Link != "" {
			e.usageError("--fault %q: name the link by port=R dir=in|out (host R's link)", ev.SpecText())
			return false
		}
	}
	return true
}

// inapsCommand is 'inaemu inaps run|figure'.
func inapsCommand(stdout, stderr io.Writer) *cobra.Command {
	c := parentCommand("inaps", "command", "INA-PS jobs sharing the switch's aggregators: ESA, ATP-style and SwitchML-style (docs/esa.md)", stdout, stderr)
	c.Long = `  run     jobs' training iterations through one switch under an allocation policy, every result checked
  figure  one of ESA's evaluation's figures (8, 9, 10, 11) as a table, cells over seeds, sharded`
	c.AddCommand(inapsRunCommand(stdout, stderr), inapsFigureCommand(stdout, stderr))
	return c
}

type inapsRunArgs struct {
	policy, pcap string
	asJSON       bool
}

func inapsRunCommand(stdout, stderr io.Writer) *cobra.Command {
	var a inapsRunArgs
	var fl inapsFlags
	c := newCommand("run", "run INA-PS jobs through one switch and check every result", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runINAPS(e, &fl, a) })
	c.Args = noArgs
	c.Long = `Every job's workers (hosts h0.. in job order) push their model's partitions to one switch running
the ina-ps program under --policy; the PSes are the hosts after the workers. Each worker's results
are checked against an oracle that sums the workers' gradients apart from the switch and the PS;
at the end no aggregator may be held and no PS entry open. Exit 0: exact; 1: a wrong or missing
result, or an invariant broken; 2: usage. Policies: ` + inaps.PolicyHelp() + `.`
	f := c.Flags()
	f.StringVar(&a.policy, "policy", "esa", "how the jobs share the aggregators: "+strings.Join(inaps.PolicyNames(), ", "))
	addINAPSFlags(c, &fl, false)
	f.StringVar(&a.pcap, "pcap", "", "write a pcapng capture of every link direction to `FILE`")
	f.BoolVar(&a.asJSON, "json", false, "print one JSON object: the result (docs/esa.md)")
	completeWords(c, map[string][]string{"policy": inaps.PolicyNames(), "order": {"esa", "reverse"}, "estimator": {"remaining", "attained"}})
	return c
}

func runINAPS(e *cmdEnv, fl *inapsFlags, a inapsRunArgs) int {
	cfg, ok := fl.config(e, false)
	if !ok {
		return exitUsage
	}
	var err error
	if cfg.Policy, err = inaps.ParsePolicy(a.policy); err != nil {
		e.usageError("--policy: %v", err)
		return exitUsage
	}
	hosts := fl.jobs * fl.workers
	if cfg.Policy.HasPS() {
		hosts += fl.jobs
	}
	if !validateFaults(e, cfg, hosts) {
		return exitUsage
	}
	cfg.Defaults()
	if err := cfg.Validate(); err != nil {
		e.usageError("%v", err)
		return exitUsage
	}
	var out *os.File
	if a.pcap != "" {
		if out, err = os.Create(a.pcap); err != nil {
			return ioError(e.stderr, e.name, a.pcap, err)
		}
		defer out.Close()
		cfg.Capture = out
	}
	if !a.asJSON {
		fmt.Fprintf(e.stdout, "inaemu inaps run: %s, %d jobs × %d workers (%s), %d aggregators (%s), %s links, %v latency, seed %d\n",
			cfg.Policy, len(cfg.Jobs), fl.workers, fl.models, cfg.Aggregators, units.FormatBytes(int64(cfg.Aggregators)*inaps.AggregatorBytes), units.FormatRate(cfg.LinkRate), cfg.Latency, cfg.Seed)
	}
	res, err := experiment.Run(cfg)
	if err != nil {
		e.usageError("%v", err)
		return exitUsage
	}
	if out != nil {
		if err := out.Close(); err != nil {
			return ioError(e.stderr, e.name, a.pcap, err)
		}
	}
	code := exitOK
	if !res.Exact {
		code = exitFail
	}
	if a.asJSON {
		if c := e.writeJSON(res); c != exitOK {
			return c
		}
		return code
	}
	printINAPS(e.stdout, res)
	return code
}

func printINAPS(w io.Writer, r *experiment.Result) {
	if r.Exact {
		fmt.Fprintln(w, "  result    EXACT: every worker holds every result, each the exact sum; no aggregator held, no PS entry open")
	} else {
		fmt.Fprintf(w, "  result    FAILED: %s\n", strings.Join(r.Failures, "; "))
	}
	var per []string
	for _, j := range r.Jobs {
		per = append(per, fmt.Sprintf("%s(%s) %s", j.Name, j.Model, ms(j.MeanJCT)))
	}
	fmt.Fprintf(w, "  jct       mean %s; %s\n", ms(r.MeanJCT), strings.Join(per, ", "))
	fmt.Fprintf(w, "  util      %.3f of the link in payload, %.3f in wire bytes (over each job's communication time)\n", r.MeanUtilisation, r.MeanUtilisationWire)
	var held, waiting int64
	for _, j := range r.Jobs {
		held, waiting = held+j.HeldNs, waiting+j.WaitingNs
	}
	fmt.Fprintf(w, "  memory    %d aggregators, at most %d held at once; %.3f aggregator-ms held, %.3f of them waiting for contributions\n",
		r.Aggregators, r.Switch.MaxInUse, float64(held)/1e6, float64(waiting)/1e6)
	s := r.Switch
	fmt.Fprintf(w, "  switch    %d tasks completed here, results multicast %d times by the switch and %d by the PS; %d collisions: %d preemptions, %d failed (%d downgrades), %d diverted; %d reminders (%d with a value); %d to the PS, %d released by its ACK, %d flushed; %d duplicates, %d stale\n",
		s.Completed, s.Multicasts, s.PSMulticasts, s.Collisions, s.Preemptions, s.FailedPreempts, s.Downgrades, s.Diverted, s.Reminders, s.RemindersValue, s.ToPS, s.Released, s.Flushed, s.Duplicates, s.Stale)
	p := r.PS
	fmt.Fprintf(w, "  ps        %d completed, %d partials taken (%d overlapping, %d late), %d reminders (%d empty), %d worker reminders, %d resend requests, %d queries, %d re-answered; channel retries %d\n",
		p.Completed, p.Partials, p.Overlaps, p.Late, p.Reminders, p.RemindersEmpty, p.WorkerReminder, p.ResendRequests, p.Queries, p.Reanswers, p.ChannelRetries+r.Workers.ChannelRetry)
	k := r.Workers
	fmt.Fprintf(w, "  workers   %d gradients, %d results (%d duplicate), %d dupACK triggers, %d timeouts, %d retransmissions, window %d..%d frames, %d ECN windows\n",
		k.Sent, k.Results, k.DupResults, k.DupACKs, k.Timeouts, k.Retransmits, k.MinWindow, k.MaxWindowSeen, k.ECNWindows)
	f := r.Faults
	fmt.Fprintf(w, "  faults    %d lost, %d dropped by events, %d duplicated, %d corrupted (%d dropped by the FCS), %d reordered; %d queue drops, %d ECN marks; %d stale aggregators freed at teardown\n",
		f.Lost, f.Dropped, f.Duplicated, f.Corrupted, r.FCSDrops, f.Reordered, r.Links.QueueDrops, r.ECNMarks, r.StaleAggregators)
	fmt.Fprintf(w, "  time      %v virtual, %v wall\n", r.Virtual, r.Wall.Round(time.Millisecond))
	fmt.Fprintf(w, "  seed      %d\n", r.Seed)
}

func ms(d time.Duration) string { return fmt.Sprintf("%.3f ms", float64(d)/1e6) }

type inapsFigureArgs struct {
	shard    string
	seeds    int
	parallel int
	asJSON   bool
}

// figureDoc is figure's --json report.
type figureDoc struct {
	Figure int                     `json:"figure"`
	Doc    string                  `json:"doc"`
	Seed   uint64                  `json:"seed"`
	Seeds  int                     `json:"seeds"`
	Shard  *conformance.Shard      `json:"shard,omitempty"`
	Points int                     `json:"points"`
	Cells  []experiment.CellResult `json:"cells"`
}

func inapsFigureCommand(stdout, stderr io.Writer) *cobra.Command {
	var a inapsFigureArgs
	var fl inapsFlags
	c := newCommand("figure N", "one of ESA's figures (8, 9, 10, 11): its cells over seeds, as a table", stdout, stderr,
		func(e *cmdEnv, args []string) int { return runFigure(e, &fl, a, args[0]) })
	c.Args = cobra.ExactArgs(1)
	c.Long = `Figure 8: average JCT against jobs (2, 4, 6, 8; 8 workers each); 9: against workers per job (2..8;
8 jobs); 10: utilisation at 8 × 8; 11: ESA against Straw1, Straw2 and ATP-style at 8 × 8. Each with
all-A, all-B and A:B = 1:1 jobs (11: all-A and mixed), policies esa, fcfs (ATP-style) and static
(SwitchML-style). Every other setting is a flag, so a sweep of what the paper leaves unstated is
one figure per setting. Rows: the mean over the seeds' exact runs; a run that is not exact is
counted and named, never averaged.`
	addINAPSFlags(c, &fl, true)
	f := c.Flags()
	f.IntVar(&a.seeds, "seeds", 10, "runs per cell, seeds --seed, --seed+1, ...")
	f.IntVar(&a.parallel, "parallel", runtime.GOMAXPROCS(0), "cells run at once")
	f.StringVar(&a.shard, "shard", "", "run shard `I/N` of the cells (cell k when k mod N = I; or N: I from JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID)")
	f.BoolVar(&a.asJSON, "json", false, `print one JSON object: {"figure","doc","seed","seeds","shard","points","cells":[{"point","policy","jobs","workers","mix","runs","exact","mean_jct_ns","mean_utilisation",...}]}`)
	return c
}

func runFigure(e *cmdEnv, fl *inapsFlags, a inapsFigureArgs, which string) int {
	var n int
	if _, err := fmt.Sscanf(which, "%d", &n); err != nil || experiment.Figures[n].Cells == nil || fmt.Sprint(n) != which {
		e.usageError("figure %q: want one of %v", which, experiment.FigureNumbers())
		return exitUsage
	}
	if a.seeds < 1 || a.seeds > 1000 {
		e.usageError("--seeds %d: want 1..1000", a.seeds)
		return exitUsage
	}
	if a.parallel < 1 || a.parallel > 256 {
		e.usageError("--parallel %d: want 1..256", a.parallel)
		return exitUsage
	}
	base, ok := fl.config(e, true)
	if !ok {
		return exitUsage
	}
	shard := conformance.Shard{}
	if a.shard != "" {
		var err error
		if shard, err = parseShard(a.shard, os.Getenv); err != nil {
			e.usageError("%v", err)
			return exitUsage
		}
	}
	fig := experiment.Figures[n]
	cells := fig.Cells()
	least := 1 << 30 // a fault must name a host of every cell
	for _, c := range cells {
		h := c.Jobs * c.Workers
		if c.Policy != "static" {
			h += c.Jobs
		}
		least = min(least, h)
	}
	if !validateFaults(e, base, least) {
		return exitUsage
	}
	doc := figureDoc{Figure: n, Doc: fig.Doc, Seed: base.Seed, Seeds: a.seeds, Points: len(cells)}
	if a.shard != "" {
		doc.Shard = &shard
	}
	var mine []int
	for i := range cells {
		if shard.Owns(i) {
			mine = append(mine, i)
		}
	}
	out := make([]experiment.CellResult, len(mine))
	var wg sync.WaitGroup
	sem := make(chan struct{}, a.parallel)
	for k, i := range mine {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := experiment.RunCell(base, cells[i], base.Seed, a.seeds)
			r.Point = i
			out[k] = r
			if !a.asJSON {
				fmt.Fprintf(e.stderr, "  done %s\n", cells[i])
			}
		}()
	}
	wg.Wait()
	doc.Cells = out
	if a.asJSON {
		return e.writeJSON(doc)
	}
	fmt.Fprintf(e.stdout, "Figure %d: %s (seed %d, %d seeds)\n", n, fig.Doc, base.Seed, a.seeds)
	fmt.Fprintf(e.stdout, "%-7s %-3s %4s %7s %5s %10s %6s %6s %10s %11s %8s %9s %9s %8s\n", "policy", "mix", "jobs", "workers", "exact", "jct_ms", "util", "wire", "collisions", "preemptions", "failed", "diverted", "ps_done", "timeouts")
	for _, r := range out {
		fmt.Fprintf(e.stdout, "%-7s %-3s %4d %7d %2d/%-2d %10.3f %6.3f %6.3f %10.0f %11.0f %8.0f %9.0f %9.0f %8.0f\n", r.Policy, r.Mix, r.Jobs, r.Workers, r.Exact, r.Runs,
			float64(r.MeanJCT)/1e6, r.MeanUtilisation, r.MeanUtilisationWire, r.Collisions, r.Preemptions, r.FailedPreemptions, r.Diverted, r.PSCompleted, r.Timeouts)
		for _, m := range r.Errors {
			fmt.Fprintf(e.stdout, "        ! %s\n", m)
		}
	}
	return exitOK
}
