package conformance

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/scenario"
)

// SuiteOptions say how hard and where a property suite runs.
type SuiteOptions struct {
	Count   int               // generated cases per property
	Seed    uint64            // the suite's seed: case i's inputs come from (Seed, i)
	Release netreduce.Release // the release rule the aggregation suite runs against
	// SwitchProgram is the switch program the NetReduce jobs aggregate on
	// ("": netreduce); the cases are drawn within its limits (see fit).
	SwitchProgram string
	OutDir        string // where counterexamples are written ("" = nowhere)
	// Progress, if set, is told after every case, with its property.
	Progress func(property string)
	// Shard, if set, runs only the shard's cases (case i when i mod Of is
	// Index) and records what Merge needs in each result.
	Shard Shard
	// DUT, if set, runs the suites against a device under test instead
	// of inaemu's switch model (see DUT).
	DUT *DUT
	// WriteFailed, if set, is told when a counterexample file in OutDir
	// cannot be created or written (a full disk, a read-only directory):
	// the failure is still reported, without the file.
	WriteFailed func(error)
	// inapsMutations re-introduce bugs in the INA-PS switch for the inaps
	// suite's power test (unexported: no run of the command sets them).
	inapsMutations inaps.Mutations
}

// writeFailed passes err, if any, to WriteFailed.
func (o SuiteOptions) writeFailed(err error) {
	if err != nil && o.WriteFailed != nil {
		o.WriteFailed(err)
	}
}

// DUT is a device under test the suites run against: inaemu's hosts on
// one side of a fault-injecting wire, the device on the other (package
// dut). Its cases are the emulator's, fitted to the device (see
// forDevice); properties that need the emulator's internals are skipped
// and say why.
type DUT struct {
	dut.Device
	// Ports is how many ports the device has (PREFIX-sw0 ..): no case
	// uses more workers.
	Ports int
	// Replay is what a replay command adds to name the device
	// ("--dut tap:ina --dut-cmd '...'").
	Replay string
	// Calibration is the path's measured speed (dut.Calibrate): the
	// cases' shapes and timeouts are fitted to it (forDevice). Zero: the
	// fixed defaults.
	Calibration dut.Calibration
	// Mode is what the device does with the jobs' frames: emu.NetReduce
	// (or ""), it aggregates them; emu.Ring, it only forwards them by
	// destination MAC (an Ethernet switch: Open vSwitch, DPDK testpmd),
	// so the suites run Ring-AllReduce jobs through it (the hosts add)
	// and judge its forwarding (aggCase.Ring).
	Mode emu.Mode
	// cur names the case being run, for the device log's marker lines
	// (shared by copies of the DUT, as gbn's).
	cur *runLabel
}

// forwards reports whether the device only forwards (Mode ring).
func (d *DUT) forwards() bool { return d != nil && d.Mode == emu.Ring }

// fitCase fits a generated case to the device (forDevice), as a ring
// job when the device only forwards.
func (o SuiteOptions) fitCase(c aggCase) aggCase {
	c.Ring = o.DUT.forwards()
	return c.forDevice(o.DUT.Ports, o.DUT.Calibration)
}

// runLabel is the case a device runs: its property, number and seed, and
// how many runs it took so far (shrinking's and reruns included).
type runLabel struct {
	name string
	i    int
	seed uint64
	runs int
}

// startCase says which case the device's next runs are, in its log.
func (o SuiteOptions) startCase(name string, i int, seed uint64) {
	if o.DUT != nil {
		o.DUT.cur = &runLabel{name: name, i: i, seed: seed}
	}
}

// runJob runs cfg in the emulator or, with o.DUT, against the device;
// cfg.Capture then receives the wire's capture.
func (o SuiteOptions) runJob(cfg emu.Config) (*emu.Result, error) {
	if o.DUT == nil {
		return emu.Run(cfg)
	}
	dev := o.DUT.Device
	if l := o.DUT.cur; l != nil {
		l.runs++
		dev.Label = fmt.Sprintf("%s case %d (seed %d), run %d", l.name, l.i, l.seed, l.runs)
	}
	res, err := dut.Run(cfg, dev)
	if res == nil {
		return nil, err
	}
	return res.Result, err
}

// replay is the command that reruns a counterexample scenario file.
func (o SuiteOptions) replay(path string) string {
	if o.DUT == nil {
		return "inaemu run --scenario " + path
	}
	return "inaemu run --scenario " + path + " " + o.DUT.Replay
}

// rerun is the conformance command that reruns cases up to case i of a
// suite (args: its suite and other flags), against the device if any.
func (o SuiteOptions) rerun(args string, i int) string {
	s := fmt.Sprintf("inaemu conformance %s --seed %d --count %d", args, o.Seed, i+1)
	if o.program() != "" {
		s += " --switch-program " + o.SwitchProgram
	}
	if o.DUT != nil {
		s += " " + o.DUT.Replay
		if o.DUT.forwards() {
			s += " --dut-mode ring"
		}
	}
	return s
}

// shrinkBudget is how many runs shrinking may take: against a device each
// run takes wall time (and a device command's start), so fewer.
func (o SuiteOptions) shrinkBudget(emulated int) int {
	if o.DUT != nil {
		return min(emulated, dutShrinkRuns)
	}
	return emulated
}

const dutShrinkRuns = 40

// skipped is a property not run against a device, and why.
func skipped(name, why string) PropertyResult {
	return PropertyResult{Name: name, Passed: true, Skipped: why}
}

// PropertyResult is one property's verdict.
type PropertyResult struct {
	Name   string `json:"name"`
	Passed bool   `json:"passed"`
	Cases  int    `json:"cases"`
	// Counterexample is the scenario file of the shrunk failing case
	// (a pcapng of it sits beside it), or nil.
	Counterexample *string `json:"counterexample"`
	Failure        string  `json:"failure,omitempty"`
	Replay         string  `json:"replay,omitempty"`
	// Notes say what else the suite saw, e.g. how many cases ended in an
	// allowed transport failure.
	Notes []string      `json:"notes,omitempty"`
	Wall  time.Duration `json:"wall_ns"`
	// Shard is set in a shard's result (SuiteOptions.Shard).
	Shard *ShardRecord `json:"shard,omitempty"`
	// Skipped says why the property was not run (against a device under
	// test, one that needs the emulator's internals); it then has no cases.
	Skipped string `json:"skipped,omitempty"`
	// Inconclusive counts the cases against a device that failed in their
	// transport twice with nothing to blame (see settle): neither holds
	// nor fails.
	Inconclusive int `json:"inconclusive,omitempty"`
	// FirstInconclusive is the first of them: its case number and why.
	FirstInconclusive string `json:"first_inconclusive,omitempty"`
	// Verdict is "inconclusive" (VerdictInconclusive) when no case failed
	// but Inconclusive did not hold either: Passed is false then, with no
	// Failure. Empty otherwise: Passed says it.
	Verdict string `json:"verdict,omitempty"`
}

// Suites are the property suites by name, in the order `all` runs them.
var Suites = []struct {
	Name       string
	Run        func(SuiteOptions) []PropertyResult
	Properties int // results Run returns
}{
	{"aggregation", AggregationSuite, 1},
	{"gbn", GBNSuite, 1},
	{"icrc", ICRCSuite, 4},
	{"tenants", TenantSuite, 1},
	{"multirack", MultiRackSuite, 1},
	{"schemes", SchemesSuite, 1},
	{"inaps", INAPSSuite, 1},
	{"congestion", CongestionSuite, 1},
	{"hier", HierSuite, 1},
}

// eachCase runs the cases of property name that o's shard owns: case i
// with its seed, counted in res and told to o.Progress. check says
// whether the case holds; the first that does not is recorded in the
// shard record and ends the run. res.Wall is set at the end.
func eachCase(o SuiteOptions, name string, res *PropertyResult, check func(i int, seed uint64) bool) {
	start := time.Now()
	o.record(res)
	for i := 0; i < o.Count; i++ {
		if !o.Shard.Owns(i) {
			continue
		}
		seed := caseSeed(o.Seed, name, i)
		o.startCase(name, i, seed)
		ok := check(i, seed)
		res.Cases++
		if o.Progress != nil {
			o.Progress(name)
		}
		if !ok {
			res.Passed = false
			res.Shard.failed(i)
			break
		}
	}
	res.Wall = time.Since(start)
}

// dropEachEvent is a shrinking step: the case without each of its events
// in turn, try keeping every removal under which it still fails the same
// way; it reports whether one was kept.
func dropEachEvent(events []string, try func(fewer []string) bool) bool {
	changed := false
	for i := 0; i < len(events); i++ {
		fewer := append(append([]string(nil), events[:i]...), events[i+1:]...)
		if try(fewer) {
			events, changed, i = fewer, true, i-1
		}
	}
	return changed
}

// tryEach tries each step on its own copy of c (a step that reports
// false made no valid case, which is not tried) and reports whether any
// of the smaller cases still failed: a shrinker's list of moves.
func tryEach[C any](c C, try func(C) bool, steps ...func(*C) bool) bool {
	changed := false
	for _, step := range steps {
		d := c
		if step(&d) && try(d) {
			changed = true
		}
	}
	return changed
}

// shrinkCase makes the failing case *c smaller: each pass offers smaller
// cases to try, which runs one (at most budget in all) and keeps it in *c
// when same says it fails the way the original did; passes repeat until
// one changes nothing.
func shrinkCase[C any](c *C, budget int, same func(C) bool, pass func(try func(C) bool) bool) {
	try := func(d C) bool {
		if budget == 0 {
			return false
		}
		budget--
		if same(d) {
			*c = d
			return true
		}
		return false
	}
	for changed := true; changed && budget > 0; {
		changed = pass(try)
	}
}

// failsAs is shrinkCase's same for suites whose runs give an aggOutcome:
// d fails the way *out says (and *out becomes d's outcome).
func failsAs[C any](run func(C) aggOutcome, out *aggOutcome) func(C) bool {
	return func(d C) bool {
		o := run(d)
		if o.fail != out.fail {
			return false
		}
		if o.silent {
			// Its only evidence is the device's silence, which a device
			// process starved of the CPU shows for a while too: a
			// candidate is accepted only when it fails so once more.
			if o = run(d); o.fail != out.fail {
				return false
			}
		}
		*out = o
		return true
	}
}

// caseSeed derives case i's seed from the suite seed.
func caseSeed(seed uint64, name string, i int) uint64 {
	x := seed ^ uint64(i)*0x9E3779B97F4A7C15
	for _, c := range name {
		x = (x ^ uint64(c)) * 0x100000001B3
	}
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return (x ^ x>>31) >> 16 // short enough to type in a replay command
}

// genParams are gopter generator parameters drawing from seed.
func genParams(seed uint64) *gopter.GenParameters {
	p := gopter.DefaultGenParameters()
	p.Rng = rand.New(gopter.NewLockedSource(int64(seed)))
	return p
}

// sample draws one value from g with seed.
func sample(g gopter.Gen, seed uint64) any {
	r := g(genParams(seed))
	v, ok := r.Retrieve()
	if !ok {
		panic(fmt.Sprintf("conformance: generator gave no value for seed %d", seed))
	}
	return v
}

// writeCounterexample saves a failing scenario as DIR/NAME.yaml, reruns it
// with a capture into DIR/NAME.pcapng, and returns the scenario's path.
func writeCounterexample(o SuiteOptions, name string, sc *scenario.Scenario) (string, error) {
	p, err := writeCounterexampleFiles(o, name, sc)
	o.writeFailed(err)
	return p, err
}

func writeCounterexampleFiles(o SuiteOptions, name string, sc *scenario.Scenario) (string, error) {
	dir := o.OutDir
	if dir == "" {
		return "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := sc.Marshal()
	if err != nil {
		return "", err
	}
	yml := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(yml, b, 0o644); err != nil {
		return "", err
	}
	cfg := emu.DefaultConfig()
	if err := sc.Apply(&cfg); err != nil {
		return yml, err
	}
	f, err := os.Create(filepath.Join(dir, name+".pcapng"))
	if err != nil {
		return yml, err
	}
	cfg.Capture = f
	// The run is expected to misbehave; the capture is what matters.
	_, err = o.runJob(cfg)
	cerr := f.Close()
	if ce := (*emu.CaptureError)(nil); errors.As(err, &ce) {
		return yml, ce.Err
	}
	return yml, cerr
}

func writeFiles(dir, path string, b []byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// runExact runs a scenario whose fault schedule is bounded: it must end,
// every job exact. The outcome says why not ("" when it did); res is the
// run's report when it ran to its end.
func runExact(sc *scenario.Scenario) (*emu.Result, aggOutcome) {
	cfg := emu.DefaultConfig()
	if err := sc.Apply(&cfg); err != nil {
		return nil, aggOutcome{fail: "setup", detail: err.Error()}
	}
	res, err := emu.Run(cfg) // the suites that use it are the emulator's own
	var je *emu.JobError
	switch {
	case errors.As(err, &je):
		return nil, aggOutcome{fail: "transport", detail: "a bounded schedule broke the job: " + je.Msg}
	case err != nil:
		return nil, aggOutcome{fail: "setup", detail: err.Error()}
	case !res.Exact:
		return nil, wrongResult(res.Mismatch)
	}
	return res, aggOutcome{}
}

// wrongResult is the outcome of a job that ended with m wrong.
func wrongResult(m *emu.Mismatch) aggOutcome {
	return aggOutcome{fail: "wrong", detail: fmt.Sprintf("WRONG RESULT: rank %d element %d is %s, want %s", m.Rank, m.Element, m.Got, m.Want)}
}

// exactSuite runs property name of suite over cases drawn by gen: each
// must hold (run says why not). The first that does not is shrunk and
// written as a counterexample scenario, which `inaemu run --scenario`
// replays unless replays (nil: always) says that failure takes more.
func exactSuite[C fmt.Stringer](o SuiteOptions, suite, name string, gen func(seed uint64) gopter.Gen, run func(C) aggOutcome,
	shrink func(C, aggOutcome) (C, aggOutcome), scenarioOf func(C) *scenario.Scenario, replays func(aggOutcome) bool) []PropertyResult {
	res := PropertyResult{Name: name, Passed: true}
	eachCase(o, name, &res, func(i int, seed uint64) bool {
		c := sample(gen(seed), seed).(C)
		out := run(c)
		if out.fail == "" {
			return true
		}
		reportShrunk(o, &res, i, c, out, shrink, scenarioOf, replays, fmt.Sprintf("%s-%s-%d", suite, out.fail, seed),
			o.rerun("--suite "+suite, i))
		return false
	})
	return []PropertyResult{res}
}

// reportShrunk fails res with case i's outcome out: the case shrunk,
// written as the counterexample file (the scenario scenarioOf gives),
// and the command that replays it when replays (nil: always) says the
// shrunk failure replays as a run, else the command given.
func reportShrunk[C fmt.Stringer](o SuiteOptions, res *PropertyResult, i int, c C, out aggOutcome, shrink func(C, aggOutcome) (C, aggOutcome),
	scenarioOf func(C) *scenario.Scenario, replays func(aggOutcome) bool, file, replay string) {
	small, sout := shrink(c, out)
	res.Passed = false
	res.Failure = fmt.Sprintf("case %d (%s) fails: %s; shrunk to %s: %s", i, c, out.detail, small, sout.detail)
	if p, err := writeCounterexample(o, file, scenarioOf(small)); err != nil {
		res.Notes = append(res.Notes, "writing the counterexample: "+err.Error())
	} else if p != "" {
		res.Counterexample = &p
		if replays == nil || replays(sout) {
			res.Replay = o.replay(p)
		}
	}
	if res.Replay == "" {
		res.Replay = replay
	}
}

// forgeryDrops says, for a run that ended exact, how its drops of frames
// as forgeries disagree with its faults, or "" when they agree: every
// forged frame dropped by the check that should drop it (a switch's port
// security or, with it off, an accelerator's binding of each ring
// connection to its member's port), and nothing else dropped as a
// forgery but frames a fault corrupted (a corrupted source address looks
// forged, and port security drops it before any ICRC check).
func forgeryDrops(res *emu.Result, openPorts bool) string {
	forged, corrupted := res.Faults.Spoofed, res.Faults.Corrupted
	_, binding := res.Switch.AggregationDrops() // whichever program aggregated
	security := res.Switch.PortSecurity
	by, other := security, binding
	if openPorts {
		by, other = binding, security
	}
	if by < forged || security+binding > forged+corrupted || openPorts && other > 0 {
		check := "port security"
		if openPorts {
			check = "the accelerators' connection binding (port security off)"
		}
		return fmt.Sprintf("%d frames forged and %d corrupted; port security dropped %d, the accelerators %d as forgeries (want every forgery dropped by %s, and no other drop but of corrupted frames)",
			forged, corrupted, security, binding, check)
	}
	return ""
}
