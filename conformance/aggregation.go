package conformance

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/tensor"
)

// aggCase is one generated NetReduce job and its fault schedule.
type aggCase struct {
	Workers, Window, MsgLen, MTU int
	Elems                        int // tensor elements per worker
	DType                        tensor.DType
	Seed                         uint64
	Events                       []string // one-shot deterministic events (nth=K)
	Netem                        string   // random impairments on every link, or ""
}

// bounded: a finite schedule of at most maxBoundedEvents one-shot faults,
// which the transport's retry budget must always absorb. Random netem has
// no bound: a case may legitimately exhaust the retries.
func (c aggCase) bounded() bool { return c.Netem == "" && len(c.Events) <= maxBoundedEvents }

const maxBoundedEvents = 6

func (c aggCase) scenario(rel netreduce.Release) *emu.Scenario {
	w, n, l, m := c.Workers, c.Window, c.MsgLen, c.MTU
	seed := c.Seed
	return &emu.Scenario{Workers: &w, Mode: "netreduce", Window: &n, MsgLen: &l, MTU: &m,
		Tensor: fmt.Sprint(c.Elems * c.DType.Size()), DType: c.DType.String(), Seed: &seed,
		Release: rel.String(), Netem: c.Netem, Faults: append([]string(nil), c.Events...), MaxTime: "10s"}
}

func (c aggCase) String() string {
	return fmt.Sprintf("workers=%d window=%d msg-len=%d mtu=%d tensor=%d×%s seed=%d netem=%q faults=%q",
		c.Workers, c.Window, c.MsgLen, c.MTU, c.Elems, c.DType, c.Seed, c.Netem, c.Events)
}

var (
	faultActions = []string{"drop", "dup", "corrupt", "delay=%dus", "hold=%d"}
	faultClasses = []string{"data", "ack", "nak", "any"}
	mtus         = []int{256, 512, 1024, 2048, 4096}
)

// genFaultEvent draws one one-shot event for a job of h workers.
func genFaultEvent(r interface{ Intn(int) int }, h int) string {
	act := faultActions[r.Intn(len(faultActions))]
	switch act {
	case "delay=%dus":
		act = fmt.Sprintf(act, 1+r.Intn(2000)) // up to twice the default ACK timeout
	case "hold=%d":
		act = fmt.Sprintf(act, 1+r.Intn(8))
	}
	dir := "in"
	if r.Intn(2) == 1 {
		dir = "out"
	}
	return fmt.Sprintf("%s port=%d dir=%s class=%s nth=%d", act, r.Intn(h), dir, faultClasses[r.Intn(len(faultClasses))], 1+r.Intn(80))
}

// aggCaseGen generates jobs of 2-16 workers, window 1-8, MsgLen 1-32, any
// MTU and dtype, up to 16384 elements per worker, with up to six one-shot
// faults on any link and direction (lost, duplicated, corrupted, delayed
// or held gradient, result, ACK and NAK frames) and, in a quarter of the
// cases, light random loss, duplication and corruption on every link.
func aggCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := aggCase{Workers: 2 + r.Intn(15), Window: 1 + r.Intn(8), MsgLen: 1 + r.Intn(32), MTU: mtus[r.Intn(len(mtus))],
			Elems: 1 + r.Intn(16384), DType: tensor.DType(r.Intn(3)), Seed: seed}
		for i, n := 0, r.Intn(maxBoundedEvents+1); i < n; i++ {
			c.Events = append(c.Events, genFaultEvent(r, c.Workers))
		}
		if r.Intn(4) == 0 {
			c.Netem = fmt.Sprintf("loss %.2f%% duplicate %.2f%% corrupt %.2f%%", r.Float64()*0.5, r.Float64(), r.Float64()*0.3)
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// aggOutcome classifies a run: "" holds, otherwise why the property fails.
type aggOutcome struct {
	fail      string // "wrong" or "transport"; "" when the property holds
	detail    string
	transport bool // ended in an allowed transport failure
}

func runAggCase(c aggCase, rel netreduce.Release) aggOutcome {
	cfg := emu.DefaultConfig()
	if err := c.scenario(rel).Apply(&cfg); err != nil {
		return aggOutcome{fail: "setup", detail: err.Error()}
	}
	res, err := emu.Run(cfg)
	var je *emu.JobError
	switch {
	case errors.As(err, &je):
		if c.bounded() {
			return aggOutcome{fail: "transport", detail: "a bounded fault schedule exhausted the transport: " + je.Msg}
		}
		return aggOutcome{transport: true}
	case err != nil:
		return aggOutcome{fail: "setup", detail: err.Error()}
	case !res.Exact:
		m := res.Mismatch
		return aggOutcome{fail: "wrong", detail: fmt.Sprintf("WRONG RESULT: rank %d element %d is %s, want %s", m.Rank, m.Element, m.Got, m.Want)}
	}
	return aggOutcome{}
}

// AggregationSuite checks, for generated jobs and fault schedules, that
// every worker ends with the bit-exact rank-order sum. With random values,
// a contribution counted twice or not at all changes the sum, so an exact
// result also shows each rank counted exactly once. A job may end in a
// transport error only when its schedule is unbounded (random netem);
// under a bounded schedule (at most six one-shot faults) that is a failure
// too. A wrong result is never acceptable.
func AggregationSuite(o SuiteOptions) []PropertyResult {
	name := "aggregation/release=" + o.Release.String()
	start := time.Now()
	res := PropertyResult{Name: name, Passed: true}
	transport := 0
	for i := 0; i < o.Count; i++ {
		seed := caseSeed(o.Seed, name, i)
		c := sample(aggCaseGen(seed), seed).(aggCase)
		out := runAggCase(c, o.Release)
		res.Cases++
		if out.transport {
			transport++
		}
		if o.Progress != nil {
			o.Progress(name, i+1, o.Count)
		}
		if out.fail == "" {
			continue
		}
		small, sout := shrinkAgg(c, o.Release, out)
		res.Passed = false
		res.Failure = fmt.Sprintf("case %d (%s) fails: %s; shrunk to %s: %s", i, c, out.detail, small, sout.detail)
		file := fmt.Sprintf("aggregation-%s-%d", o.Release, seed)
		if p, err := writeCounterexample(o.OutDir, file, small.scenario(o.Release)); err != nil {
			res.Notes = append(res.Notes, "writing the counterexample: "+err.Error())
		} else if p != "" {
			res.Counterexample = &p
			res.Replay = "inaemu run --scenario " + p
		}
		if res.Replay == "" {
			res.Replay = fmt.Sprintf("inaemu conformance --suite aggregation --release %s --seed %d --count %d", o.Release, o.Seed, i+1)
		}
		break
	}
	if transport > 0 {
		res.Notes = append(res.Notes, fmt.Sprintf("%d of %d cases had random loss beyond the retry budget and ended in a transport error (allowed: unbounded schedule)", transport, res.Cases))
	}
	res.Wall = time.Since(start)
	return []PropertyResult{res}
}

// shrinkAgg makes a failing case smaller while it fails the same way:
// fewer faults, no random part, fewer workers, a smaller tensor, shorter
// messages, a smaller window and MTU.
func shrinkAgg(c aggCase, rel netreduce.Release, out aggOutcome) (aggCase, aggOutcome) {
	budget := 300
	try := func(d aggCase) bool {
		if budget == 0 {
			return false
		}
		budget--
		if o := runAggCase(d, rel); o.fail == out.fail {
			c, out = d, o
			return true
		}
		return false
	}
	for changed := true; changed && budget > 0; {
		changed = false
		if c.Netem != "" {
			d := c
			d.Netem = ""
			changed = try(d) || changed
		}
		for i := 0; i < len(c.Events); i++ {
			d := c
			d.Events = append(append([]string(nil), c.Events[:i]...), c.Events[i+1:]...)
			if try(d) {
				changed, i = true, i-1
			}
		}
		for _, w := range []int{2, c.Workers - 1} {
			if w >= 2 && w < c.Workers && portsFit(c.Events, w) {
				d := c
				d.Workers = w
				if try(d) {
					changed = true
					break
				}
			}
		}
		for _, e := range []int{1, c.Elems / 2} {
			if e >= 1 && e < c.Elems {
				d := c
				d.Elems = e
				if try(d) {
					changed = true
					break
				}
			}
		}
		for _, l := range []int{1, c.MsgLen / 2} {
			if l >= 1 && l < c.MsgLen {
				d := c
				d.MsgLen = l
				if try(d) {
					changed = true
					break
				}
			}
		}
		for _, n := range []int{1, c.Window - 1} {
			if n >= 1 && n < c.Window {
				d := c
				d.Window = n
				if try(d) {
					changed = true
					break
				}
			}
		}
		if c.MTU > 256 {
			d := c
			d.MTU = 256
			changed = try(d) || changed
		}
		if c.DType != tensor.F32 {
			d := c
			d.DType = tensor.F32
			changed = try(d) || changed
		}
	}
	return c, out
}

// portsFit: every event's port exists with w workers.
func portsFit(events []string, w int) bool {
	for _, e := range events {
		for _, f := range strings.Fields(e) {
			var p int
			if _, err := fmt.Sscanf(f, "port=%d", &p); err == nil && p >= w {
				return false
			}
		}
	}
	return true
}
