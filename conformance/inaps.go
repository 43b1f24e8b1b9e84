package conformance

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/experiment"
	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/faults"
)

// inapsLayer is one row of a generated model file.
type inapsLayer struct {
	Numel             int64
	Forward, Backward int64 // ns
	Partitions        int
}

// inapsModel is a generated model: its layers and the job's Comm/Comp
// (0: unset, measured).
type inapsModel struct {
	Layers   []inapsLayer
	CommComp float64
}

// csv is the model in the format train.ParseModel (and --models FILE)
// reads.
func (m inapsModel) csv() string {
	var b strings.Builder
	b.WriteString("layer_index, numel, forward_pass_ns, backward_pass_ns, partitions, comm_comp\n")
	for i, l := range m.Layers {
		fmt.Fprintf(&b, "%d, %d, %d, %d, %d, %s\n", i, l.Numel, l.Forward, l.Backward, l.Partitions, strconv.FormatFloat(m.CommComp, 'f', -1, 64))
	}
	return b.String()
}

// fragments is the model's fragments per iteration (62 values each,
// every partition packetised apart).
func (m inapsModel) fragments() int64 {
	var f int64
	for _, l := range m.Layers {
		q, r := l.Numel/int64(l.Partitions), l.Numel%int64(l.Partitions)
		for i := range int64(l.Partitions) {
			n := q
			if i < r {
				n++
			}
			f += (n + train.Values - 1) / train.Values
		}
	}
	return f
}

func (m inapsModel) String() string {
	var ls []string
	for _, l := range m.Layers {
		ls = append(ls, fmt.Sprintf("%d/%d", l.Numel, l.Partitions))
	}
	return "[" + strings.Join(ls, " ") + "]"
}

// inapsEvent is a deterministic fault on one hop, named by job and worker
// (Worker -1: the job's PS) so it keeps its hop when shrinking takes jobs
// or workers away; the port is worked out when the case is written.
type inapsEvent struct {
	Action      string // drop, dup, corrupt, delay=D, hold=K
	Job, Worker int
	Dir         string // in: host to switch; out: switch to host
	Nth, Every  int
	Prob        string // "" or a percentage
}

// inapsCase is one INA-PS experiment as `inaemu inaps run` takes it:
// every field is one of its flags.
type inapsCase struct {
	Seed                                 uint64
	Policy                               string
	Jobs, Workers                        int
	Models                               []inapsModel // repeated over the jobs (--models)
	Aggregators                          int
	Iterations                           int
	Order                                string
	Window, MaxWindow                    int // frames
	NoAIMD                               bool
	RTOMin                               time.Duration
	DupAck                               int
	Spread, Jitter, PSDelay, SwitchDelay time.Duration
	Queue, ECN                           int      // frames, bytes
	Netem                                []string // netem options, each with its values
	Events                               []inapsEvent
	MaxTime                              time.Duration
}

// port is the host port of an event's hop: the workers job by job, then
// the PSes.
func (c inapsCase) port(e inapsEvent) int {
	if e.Worker < 0 {
		return c.Jobs*c.Workers + e.Job
	}
	return e.Job*c.Workers + e.Worker
}

func (c inapsCase) eventSpec(e inapsEvent) string {
	s := fmt.Sprintf("%s port=%d dir=%s", e.Action, c.port(e), e.Dir)
	if e.Nth > 0 {
		s += fmt.Sprintf(" nth=%d", e.Nth)
	}
	if e.Every > 0 {
		s += fmt.Sprintf(" every=%d", e.Every)
	}
	if e.Prob != "" {
		s += " prob=" + e.Prob
	}
	return s
}

// events are the case's events in --fault form; an event on a job,
// worker or PS the case no longer has is left out.
func (c inapsCase) events() []string {
	var out []string
	for _, e := range c.Events {
		if e.Job < c.Jobs && e.Worker < c.Workers && (e.Worker >= 0 || inapsHasPS(c.Policy)) {
			out = append(out, c.eventSpec(e))
		}
	}
	return out
}

func inapsHasPS(policy string) bool { return policy != "static" }

func nsText(d time.Duration) string { return fmt.Sprintf("%dns", d.Nanoseconds()) }

// flags are the case as `inaemu inaps run` flags, every setting spelled
// out (no default relied on), models the given files.
func (c inapsCase) flags(models []string) []string {
	a := []string{"--policy", c.Policy, "--jobs", strconv.Itoa(c.Jobs), "--workers", strconv.Itoa(c.Workers),
		"--models", strings.Join(models, ","), "--switch-memory", fmt.Sprintf("%dB", c.Aggregators*inaps.AggregatorBytes),
		"--iterations", strconv.Itoa(c.Iterations), "--order", c.Order,
		"--window", fmt.Sprintf("%dB", c.Window*inaps.FrameLen), "--max-window", strconv.Itoa(c.MaxWindow)}
	if c.NoAIMD {
		a = append(a, "--no-aimd")
	}
	a = append(a, "--rto-min", nsText(c.RTOMin), "--dupack", strconv.Itoa(c.DupAck), "--start-spread", nsText(c.Spread),
		"--jitter", nsText(c.Jitter), "--ps-delay", nsText(c.PSDelay), "--switch-delay", nsText(c.SwitchDelay),
		"--queue", strconv.Itoa(c.Queue), "--ecn", fmt.Sprintf("%dB", c.ECN))
	if len(c.Netem) > 0 {
		a = append(a, "--netem", strings.Join(c.Netem, " "))
	}
	for _, ev := range c.events() {
		a = append(a, "--fault", ev)
	}
	return append(a, "--max-time", nsText(c.MaxTime), "--seed", strconv.FormatUint(c.Seed, 10))
}

// command is the replay command line, its arguments quoted for a shell.
func (c inapsCase) command(models []string) string {
	s := "inaemu inaps run"
	for _, a := range c.flags(models) {
		if strings.ContainsAny(a, " %'\"$\\") || a == "" {
			a = "'" + a + "'"
		}
		s += " " + a
	}
	return s
}

func (c inapsCase) String() string {
	return fmt.Sprintf("%s jobs=%d workers=%d models=%v aggregators=%d iterations=%d window=%d/%d aimd=%v rto-min=%v ps-delay=%v netem=%q faults=%q seed=%d",
		c.Policy, c.Jobs, c.Workers, c.Models, c.Aggregators, c.Iterations, c.Window, c.MaxWindow, !c.NoAIMD, c.RTOMin, c.PSDelay,
		strings.Join(c.Netem, " "), c.events(), c.Seed)
}

// config is the experiment the case's command line runs, read from the
// same text by the same parsers as `inaemu inaps run` reads its flags.
func (c inapsCase) config() (experiment.Config, error) {
	var cfg experiment.Config
	var err error
	if cfg.Policy, err = inaps.ParsePolicy(c.Policy); err != nil {
		return cfg, err
	}
	if cfg.Order, err = train.ParseSendOrder(c.Order); err != nil {
		return cfg, err
	}
	cfg.Aggregators, cfg.Iterations = c.Aggregators, c.Iterations
	cfg.LinkRate, cfg.Latency, cfg.Queue, cfg.ECNBytes = 100e9, 2500*time.Nanosecond, c.Queue, c.ECN
	cfg.InitWindowBytes, cfg.MaxWindow, cfg.NoAIMD = c.Window*inaps.FrameLen, c.MaxWindow, c.NoAIMD
	cfg.RTOMin, cfg.DupThresh, cfg.StartSpread, cfg.Jitter = c.RTOMin, c.DupAck, c.Spread, c.Jitter
	cfg.PSDelay, cfg.SwitchDelay, cfg.MaxTime, cfg.Seed = c.PSDelay, c.SwitchDelay, c.MaxTime, c.Seed
	cfg.PriorityScale, cfg.Estimator = train.DefaultScale, train.RemainingCommComp
	if len(c.Netem) > 0 {
		if cfg.Netem, err = faults.ParseNetem(strings.Join(c.Netem, " ")); err != nil {
			return cfg, err
		}
	}
	for _, s := range c.events() {
		ev, err := faults.Parse(s)
		if err != nil {
			return cfg, err
		}
		cfg.Events = append(cfg.Events, ev)
	}
	models := make([]*train.Model, len(c.Models))
	for i, m := range c.Models {
		if models[i], err = train.ParseModel(fmt.Sprintf("m%d.csv", i+1), strings.NewReader(m.csv())); err != nil {
			return cfg, err
		}
	}
	for i := range c.Jobs {
		cfg.Jobs = append(cfg.Jobs, experiment.JobSpec{Name: fmt.Sprintf("job%d", i+1), Model: models[i%len(models)], Workers: c.Workers})
	}
	return cfg, nil
}

// inapsPolicies are the policies a case is drawn from.
var inapsPolicies = []string{"static", "fcfs", "esa", "straw1", "straw2"}

// inapsWrapFragments is where the 16-bit sequence number wraps inside an
// iteration.
const inapsWrapFragments = 1 << 16

// inapsCaseGen draws an INA-PS experiment where its bugs live: any policy;
// 1-6 jobs of 1-8 workers, sometimes 1-2 jobs of up to 32 (the bitmap's
// width); a pool from static's least (2 a job, sometimes exactly that) or
// a handful of aggregators, so nearly every packet collides and
// preempts, up to ATP's 20,000; 1-2 models of 1-3 layers of 1-3
// partitions, a few to a few hundred fragments, and now and then one
// job's 2 workers on a model of more than 65,536 fragments (the sequence
// number wraps inside the iteration); 1-3 iterations; windows of 1-256
// frames, AIMD on or off; an RTO floor of 20 µs (spurious timeouts) to
// 1 ms; sometimes a PS slower than the RTO, a slow switch, short queues
// (queue drops) and a low ECN mark; netem loss, duplicates, reordering,
// corruption (dropped by the MAC's FCS) and delay on every link; and up
// to six deterministic faults on the workers' and PSes' links either way
// (the gradient, the result, the diverted and evicted partials, the
// PS's multicasts, reminders and channel).
func inapsCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		pick := func(xs ...int) int { return xs[r.Intn(len(xs))] }
		c := inapsCase{Seed: seed, Policy: inapsPolicies[r.Intn(len(inapsPolicies))], Jobs: 1 + r.Intn(6), Workers: 1 + r.Intn(8),
			Iterations: 1 + r.Intn(3), Order: []string{"esa", "reverse"}[r.Intn(2)], NoAIMD: r.Intn(2) == 0,
			RTOMin: time.Duration(pick(20, 50, 100, 300, 1000)) * time.Microsecond, DupAck: pick(1, 2, 3, 3, 3, 4),
			Queue: 1000, ECN: 125000}
		wrap := r.Intn(15) == 0
		switch {
		case wrap:
			c.Jobs, c.Workers, c.Iterations = 1, 2, 1
			c.Models = []inapsModel{{Layers: []inapsLayer{{Numel: (inapsWrapFragments + 1 + int64(r.Intn(2000))) * train.Values,
				Forward: int64(r.Intn(50_000)), Partitions: 1 + r.Intn(2)}}}}
		case r.Intn(8) == 0:
			c.Jobs, c.Workers = 1+r.Intn(2), 9+r.Intn(24)
		}
		if !wrap {
			for range 1 + r.Intn(2) {
				var m inapsModel
				for range 1 + r.Intn(3) {
					l := inapsLayer{Partitions: 1 + r.Intn(3), Forward: int64(r.Intn(50_000)), Backward: int64(r.Intn(20_000))}
					switch r.Intn(3) {
					case 0:
						l.Numel = 1 + int64(r.Intn(4*train.Values))
					case 1:
						l.Numel = 1 + int64(r.Intn(40*train.Values))
					default:
						l.Numel = 1 + int64(r.Intn(300*train.Values))
					}
					l.Partitions = int(min(int64(l.Partitions), l.Numel))
					m.Layers = append(m.Layers, l)
				}
				if r.Intn(2) == 0 {
					m.CommComp = float64(1+r.Intn(30)) / 10
				}
				c.Models = append(c.Models, m)
			}
		}
		switch r.Intn(4) {
		case 0: // static's least: a slot and its shadow a job
			c.Aggregators = 2 * c.Jobs
		case 1: // a handful: nearly every packet collides
			c.Aggregators = 2*c.Jobs + r.Intn(16)
		case 2:
			c.Aggregators = 2*c.Jobs + r.Intn(2000)
		default:
			c.Aggregators = inaps.DefaultAggregators
		}
		if c.Policy != "static" && r.Intn(3) == 0 && !wrap {
			// (Not with the wrapping model: 66,000 fragments each
			// colliding is a run of minutes, not a test of the wrap.)
			c.Aggregators = 1 + r.Intn(8)
			// A handful of aggregators for at most 16 workers: with one
			// aggregator for 5 jobs × 7 workers, ATP-style sends nearly
			// every packet to its PS and recovers each corrupted ACK by a
			// 1 ms timeout (6,679 of them), 9 s of virtual time an
			// iteration: past the 30 s budget while still progressing.
			for c.Jobs*c.Workers > 16 {
				if c.Jobs > 1 {
					c.Jobs--
				} else {
					c.Workers--
				}
			}
		}
		c.MaxWindow = pick(1, 2, 4, 8, 16, 64, inaps.Slots)
		c.Window = 1 + r.Intn(c.MaxWindow)
		if wrap {
			c.MaxWindow = max(c.MaxWindow, 64)
			c.Window = max(c.Window, 16)
		}
		if r.Intn(2) == 0 {
			c.Spread = time.Duration(r.Intn(1_000_000))
		}
		if r.Intn(2) == 0 {
			c.Jitter = time.Duration(r.Intn(300_000))
		}
		frags := int64(0) // the most fragments an iteration of a job has
		for _, m := range c.Models {
			frags = max(frags, m.fragments())
		}
		switch r.Intn(6) {
		case 0: // a PS slower than the RTO: the workers time out on it
			if inapsHasPS(c.Policy) && frags*int64(c.Iterations) <= 200 {
				c.PSDelay = c.RTOMin + time.Duration(r.Int63n(int64(c.RTOMin)))
			}
		case 1:
			c.PSDelay = time.Duration(1 + r.Intn(5_000))
		}
		if r.Intn(5) == 0 {
			c.SwitchDelay = time.Duration(1 + r.Intn(2_000))
		}
		if r.Intn(5) == 0 && !wrap {
			c.Queue = 2 + r.Intn(63)
		}
		if r.Intn(4) == 0 {
			c.ECN = inaps.FrameLen * (1 + r.Intn(20))
		}
		if !wrap || r.Intn(2) == 0 {
			// Many workers, a handful of aggregators (every packet through
			// the PS: 2 jobs × 7 workers on one aggregator at 2.2 %
			// corruption ran 30 s still progressing), or the wrapping
			// model draw a tenth of the rates: a fragment's round crosses two frames per worker, so
			// with 21 workers at 3 % per link most fragments need a
			// recovery, and a recovery's query round needs every worker's
			// answer: minutes of virtual time, not a sharper test.
			c.Netem = genINAPSNetem(r, wrap || c.Workers > 8 || c.Aggregators <= 8)
		}
		hopFrames := int(frags) * c.Iterations
		for range r.Intn(maxBoundedEvents + 1) {
			c.Events = append(c.Events, genINAPSEvent(r, c, hopFrames))
		}
		c.MaxTime = inapsMaxTime
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// genINAPSNetem draws netem impairments of every link, or none (a third
// of the cases): loss, duplicates, reordering behind a delay, corruption
// and delay with jitter, each on its own or together.
func genINAPSNetem(r interface {
	Intn(int) int
}, wrap bool) []string {
	if r.Intn(3) == 0 {
		return nil
	}
	pct := func(max int) string { return fmt.Sprintf("%.1f%%", float64(1+r.Intn(max))/10) }
	if wrap {
		// The wrapping model's 66,000 fragments cross six frames each:
		// at the other cases' rates (up to 3 % per link) a tenth of them
		// would need a recovery, minutes of virtual time under ATP's
		// timeouts; a tenth of those rates still loses hundreds.
		pct = func(max int) string { return fmt.Sprintf("%.2f%%", float64(1+r.Intn(max))/100) }
	}
	var n []string
	if r.Intn(2) == 0 {
		n = append(n, "loss "+pct(30))
	}
	if r.Intn(3) == 0 {
		n = append(n, "duplicate "+pct(30))
	}
	if r.Intn(3) == 0 {
		n = append(n, "corrupt "+pct(30))
	}
	if r.Intn(3) == 0 {
		d := fmt.Sprintf("delay %dns", 500+r.Intn(20_000))
		if r.Intn(2) == 0 {
			d += fmt.Sprintf(" %dns", 100+r.Intn(5_000))
		}
		n = append(n, d)
		if r.Intn(2) == 0 {
			n = append(n, "reorder "+pct(250))
		}
	}
	return n
}

// genINAPSEvent draws one deterministic fault: mostly a drop, else a
// duplicate, corruption, delay or hold; on a worker's uplink (its
// gradients: loss case 1) or downlink (its results: case 2), or its
// job's PS's downlink (diverted gradients, evicted partials: cases 3
// and 4) or uplink (multicasts, reminders, the channel); once at frame
// nth of the hop, sometimes again every K frames, or with a probability.
func genINAPSEvent(r interface{ Intn(int) int }, c inapsCase, frames int) inapsEvent {
	e := inapsEvent{Job: r.Intn(c.Jobs), Worker: r.Intn(c.Workers), Dir: []string{"in", "out"}[r.Intn(2)]}
	if inapsHasPS(c.Policy) && r.Intn(3) == 0 {
		e.Worker = -1
		frames = min(frames, 64) // what reaches the PS is a share of the gradients
	}
	switch r.Intn(10) {
	case 0:
		e.Action = "dup"
	case 1:
		e.Action = "corrupt"
	case 2:
		e.Action = fmt.Sprintf("delay=%dns", 1000+r.Intn(3_000_000))
	case 3:
		e.Action = fmt.Sprintf("hold=%d", 1+r.Intn(8))
	default:
		e.Action = "drop"
	}
	switch r.Intn(8) {
	case 0:
		e.Prob = fmt.Sprintf("%d%%", 1+r.Intn(10))
	case 1:
		e.Nth, e.Every = 1+r.Intn(max(frames, 1)), 50+r.Intn(450)
	default:
		e.Nth = 1 + r.Intn(max(frames, 1))
	}
	return e
}

// inapsMaxTime is a case's virtual time limit. A run that stops making
// progress fails sooner, as stalled (experiment.Config.StallTime: no
// result for 1,000 RTO floors); one that progresses may take this long: a
// window of one or two frames under 2 % loss on every hop recovers each
// loss by a timeout, and a recovery crosses eight hops, any of which may
// lose it again (a 621-fragment, three-iteration case takes 2.2 s). Such
// runs are sparse in events: 30 s of virtual time is under a second of
// wall time.
const inapsMaxTime = 30 * time.Second

// inapsOutcome classifies a run's failures: "wrong" (a wrong result),
// "lost" (the switch freed a contribution that never left it), "stall"
// (a result never arrived), "leak" (an aggregator held or a PS entry
// open at the end), "setup"; "" when it was exact.
func inapsOutcome(res *experiment.Result, err error) aggOutcome {
	if err != nil {
		return aggOutcome{fail: "setup", detail: err.Error()}
	}
	if res.Exact && res.Finished {
		return aggOutcome{}
	}
	all := strings.Join(res.Failures, "; ")
	kind := "other"
	switch {
	case strings.Contains(all, "wrong results"):
		kind = "wrong"
	case strings.Contains(all, "contributions that never left"):
		kind = "lost"
	case !res.Finished || strings.Contains(all, " results ("):
		kind = "stall"
	case strings.Contains(all, "still allocated") || strings.Contains(all, "PS entries still open"):
		kind = "leak"
	}
	if len(all) > 600 {
		all = all[:600] + "…"
	}
	return aggOutcome{fail: kind, detail: all}
}

// runINAPSCase runs the case (with the mutations the suite re-introduces).
func runINAPSCase(c inapsCase, mut inaps.Mutations) aggOutcome {
	cfg, err := c.config()
	if err != nil {
		return aggOutcome{fail: "setup", detail: err.Error()}
	}
	cfg.Mutations = mut
	return inapsOutcome(experiment.Run(cfg))
}

// INAPSSuite checks, for generated INA-PS experiments (every policy,
// many jobs on a tiny or large pool, faults on every hop), that every
// worker ends with every result, each the exact sum, with no aggregator
// held, no PS entry open and no contribution lost in the switch.
func INAPSSuite(o SuiteOptions) []PropertyResult {
	const name = "inaps/exact"
	if o.DUT != nil {
		return []PropertyResult{skipped(name, "needs the emulator's INA-PS hosts and switch program")}
	}
	res := PropertyResult{Name: name, Passed: true}
	if o.program() != "" {
		res.Notes = append(res.Notes, "INA-PS jobs run on the ina-ps program, not "+o.SwitchProgram)
	}
	run := func(c inapsCase) aggOutcome {
		out := runINAPSCase(c, o.inapsMutations)
		if out.fail != "" && o.inapsMutations != (inaps.Mutations{}) && runINAPSCase(c, inaps.Mutations{}).fail != "" {
			// With a bug put back, a case fails by it only if the real
			// switch holds on it: what the power test asks is whether
			// the cases tell the two apart.
			return aggOutcome{}
		}
		return out
	}
	eachCase(o, name, &res, func(i int, seed uint64) bool {
		c := sample(inapsCaseGen(seed), seed).(inapsCase)
		out := run(c)
		if out.fail == "" {
			return true
		}
		small, sout := shrinkINAPS(c, out, run, o.shrinkBudget(150))
		res.Failure = fmt.Sprintf("case %d (%s) fails: %s; shrunk to %s: %s", i, c, out.detail, small, sout.detail)
		file := fmt.Sprintf("inaps-%s-%d", sout.fail, seed)
		models, err := writeINAPSCounterexample(o, file, small)
		if err != nil {
			o.writeFailed(err)
			res.Notes = append(res.Notes, "writing the counterexample: "+err.Error())
		}
		if p := filepath.Join(o.OutDir, file+".sh"); err == nil && o.OutDir != "" {
			res.Counterexample = &p
		}
		res.Replay = small.command(models)
		return false
	})
	return []PropertyResult{res}
}

// writeINAPSCounterexample writes the case's models as DIR/NAME-mK.csv,
// its command line as DIR/NAME.sh and a pcapng of its run (as it failed)
// as DIR/NAME.pcapng; it returns the model files' paths (as the command
// names them, also without OutDir).
func writeINAPSCounterexample(o SuiteOptions, name string, c inapsCase) ([]string, error) {
	var paths []string
	for i := range c.Models {
		paths = append(paths, filepath.Join(o.OutDir, fmt.Sprintf("%s-m%d.csv", name, i+1)))
	}
	if o.OutDir == "" {
		return paths, nil
	}
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return paths, err
	}
	for i, m := range c.Models {
		if err := os.WriteFile(paths[i], []byte(m.csv()), 0o644); err != nil {
			return paths, err
		}
	}
	sh := "#!/bin/sh\n# " + c.String() + "\n" + c.command(paths) + " --pcap " + filepath.Join(o.OutDir, name+".replay.pcapng") + "\n"
	if err := os.WriteFile(filepath.Join(o.OutDir, name+".sh"), []byte(sh), 0o755); err != nil {
		return paths, err
	}
	cfg, err := c.config()
	if err != nil {
		return paths, err
	}
	cfg.Mutations = o.inapsMutations
	var buf bytes.Buffer
	cfg.Capture = &buf
	if _, err := experiment.Run(cfg); err != nil {
		return paths, err
	}
	return paths, os.WriteFile(filepath.Join(o.OutDir, name+".pcapng"), buf.Bytes(), 0o644)
}

// shrinkINAPS makes a failing case smaller while it fails the same way:
// fewer faults and netem impairments, fewer jobs, workers, iterations
// and models, smaller models (fewer layers and partitions, fewer
// values), no PS or switch delay, no start spread or jitter, default
// queues.
func shrinkINAPS(c inapsCase, out aggOutcome, run func(inapsCase) aggOutcome, budget int) (inapsCase, aggOutcome) {
	shrinkCase(&c, budget, failsAs(run, &out), func(try func(inapsCase) bool) bool {
		changed := false
		for i := 0; i < len(c.Events); i++ {
			d := c
			d.Events = append(append([]inapsEvent(nil), c.Events[:i]...), c.Events[i+1:]...)
			if try(d) {
				i--
				changed = true
			}
		}
		changed = dropEachEvent(c.Netem, func(fewer []string) bool {
			d := c
			d.Netem = fewer
			return try(d)
		}) || changed
		steps := []func(d *inapsCase) bool{
			func(d *inapsCase) bool { d.Jobs--; return d.Jobs >= 1 },
			func(d *inapsCase) bool { d.Workers /= 2; return d.Workers >= 1 },
			func(d *inapsCase) bool { d.Workers--; return d.Workers >= 1 },
			func(d *inapsCase) bool { d.Iterations--; return d.Iterations >= 1 },
			func(d *inapsCase) bool { d.Models = d.Models[:len(d.Models)-1]; return len(d.Models) >= 1 },
			func(d *inapsCase) bool { ok := d.PSDelay > 0; d.PSDelay = 0; return ok },
			func(d *inapsCase) bool { ok := d.SwitchDelay > 0; d.SwitchDelay = 0; return ok },
			func(d *inapsCase) bool { ok := d.Spread > 0 || d.Jitter > 0; d.Spread, d.Jitter = 0, 0; return ok },
			func(d *inapsCase) bool {
				ok := d.Queue != 1000 || d.ECN != 125000
				d.Queue, d.ECN = 1000, 125000
				return ok
			},
		}
		for k := range c.Models {
			// A step on model k, once an earlier step of the pass took
			// it away, has nothing to do.
			steps = append(steps,
				func(d *inapsCase) bool { // one layer fewer
					if k >= len(d.Models) {
						return false
					}
					m := &d.Models[k]
					m.Layers = m.Layers[:len(m.Layers)-1]
					return len(m.Layers) >= 1
				},
				func(d *inapsCase) bool { // half the values, fewer partitions
					ok := false
					for i := range d.Models[k%len(d.Models)].Layers {
						l := &d.Models[k%len(d.Models)].Layers[i]
						if l.Numel > 1 {
							l.Numel, ok = l.Numel/2, true
						}
						l.Partitions = int(min(int64(l.Partitions), l.Numel))
					}
					return ok
				},
				func(d *inapsCase) bool {
					ok := false
					for i := range d.Models[k%len(d.Models)].Layers {
						if l := &d.Models[k%len(d.Models)].Layers[i]; l.Partitions > 1 {
							l.Partitions, ok = l.Partitions-1, true
						}
					}
					return ok
				})
		}
		for _, step := range steps {
			d := c.clone()
			if step(&d) {
				if d.Policy == "static" && d.Aggregators/d.Jobs < 2 {
					continue
				}
				if try(d) {
					changed = true
				}
			}
		}
		return changed
	})
	return c, out
}

// clone is c with its own models, so a shrinking step edits a copy.
func (c inapsCase) clone() inapsCase {
	d := c
	d.Models = make([]inapsModel, len(c.Models))
	for i, m := range c.Models {
		d.Models[i] = inapsModel{Layers: append([]inapsLayer(nil), m.Layers...), CommComp: m.CommComp}
	}
	return d
}
