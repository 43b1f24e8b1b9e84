package main

import (
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
)

// conformanceArgs are conformance's flags.
type conformanceArgs struct {
	suite, release, out, shard string
	program                    string // --switch-program
	dutMode                    string // --dut-mode
	junit                      string
	count, jobs                int
	seed                       uint64
	asJSON                     bool
	allowInconclusive          bool // --allow-inconclusive
}

// conformanceCommand is 'inaemu conformance': the property suites.
func conformanceCommand(stdout, stderr io.Writer) *cobra.Command {
	var a conformanceArgs
	var names []string
	var df *dutFlags
	for _, s := range conformance.Suites {
		names = append(names, s.Name)
	}
	c := newCommand("conformance", "run the property suites (aggregation, go-back-N, checksum) with shrunk counterexamples", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runConformance(e, a, df, names) })
	c.Args = noArgs
	c.Long = `Sharding: --shard I/N runs the cases i with i mod N = I (I from 0) and records in its --json
report what 'inaemu merge' needs to turn the N shard reports into exactly the report of the
unsharded run with the same seed (wall times are summed). --shard N takes I from the batch
system: JOB_COMPLETION_INDEX (a Kubernetes Indexed Job), else SLURM_ARRAY_TASK_ID minus
SLURM_ARRAY_TASK_MIN (a Slurm job array). -j N runs N shards in this process, one per core,
and merges them (the same report as -j 1).

Report: a line per property, holds or FAILS, with its cases and wall time (--json
properties[]{name,passed,cases,wall_ns}); for a failure the first failing case and what it shrank
to (failure), the shrunk case as a scenario file with its pcapng (counterexample) and the command
that replays it (replay). --junit writes the same as JUnit XML. Every field: docs/reports.md.

Against a device (--dut) a case whose job failed in its transport twice with no fault to explain
it and no evidence against the device is inconclusive; a property with no failing case and some
inconclusive ones is INCONCLUSIVE (--json "verdict":"inconclusive", passed false), neither held nor
failed. Exit status: 1 when a property fails, else 5 when one is inconclusive
(--allow-inconclusive: 0, still reported), else 0.`
	f := c.Flags()
	f.StringVar(&a.suite, "suite", "all", "which property suite: "+strings.Join(names, ", ")+" or all")
	f.IntVar(&a.count, "count", 100, "generated cases per property")
	f.Uint64Var(&a.seed, "seed", 0, "the suite's seed (default: a fresh one, printed)")
	f.StringVar(&a.release, "release", "safe", "aggregator release rule the aggregation suite runs against: safe or paper")
	f.StringVar(&a.program, "switch-program", netreduce.ProgramName, "the switch program the suites' NetReduce jobs aggregate on: "+strings.Join(netreduce.RingPrograms(), " or ")+"; cases are drawn within its limits, and a suite it cannot run is skipped with the reason")
	f.StringVar(&a.out, "out", "counterexamples", "directory for shrunk counterexamples (a scenario file and its pcapng each)")
	f.StringVar(&a.shard, "shard", "", "run shard `I/N` of the cases (or N: I from JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID); merge the --json reports with 'inaemu merge'")
	f.IntVarP(&a.jobs, "jobs", "j", 1, "run the cases in `N` shards at once in this process (one per core) and merge them")
	df = addDUTFlags(c)
	f.StringVar(&a.dutMode, "dut-mode", "netreduce", "with --dut: what the device does with the jobs' frames: netreduce (it aggregates them) or ring (it only forwards them by destination MAC, as an Ethernet switch does: the suites run ring all-reduce jobs through it and judge its forwarding)")
	f.BoolVar(&a.allowInconclusive, "allow-inconclusive", false, "exit 0, not 5, when no property fails but one is inconclusive against a device (still reported as INCONCLUSIVE)")
	f.StringVar(&a.junit, "junit", "", fmt.Sprintf(junitHelp, "a testcase per property, its failure with the counterexample and replay command"))
	f.BoolVar(&a.asJSON, "json", false, `print one JSON object: {"seed","release","suite","count","shard","switch_program","dut","dut_mode","device_log","calibration","properties":[{"name","passed","cases","counterexample","failure","replay","notes","wall_ns","shard","skipped","inconclusive","first_inconclusive","verdict"},...],"verdict"}`)
	completeWords(c, map[string][]string{"suite": append(names, "all"), "release": {"safe", "paper"}, "switch-program": netreduce.RingPrograms(), "dut-mode": {"netreduce", "ring"}})
	c.MarkFlagsMutuallyExclusive("shard", "jobs")
	_ = c.MarkFlagDirname("out")
	return c
}

// parseShard reads --shard: I/N, or N with I from the batch system's
// environment (getenv).
func parseShard(s string, getenv func(string) string) (conformance.Shard, error) {
	idx, of, explicit := strings.Cut(s, "/")
	if !explicit {
		of = idx
		idx = ""
	}
	n, err := strconv.Atoi(of)
	if err != nil || n < 1 {
		return conformance.Shard{}, fmt.Errorf("--shard %s: want I/N with N a whole number of shards from 1 (or N alone, with the index from JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID)", s)
	}
	from := "--shard"
	if !explicit {
		switch {
		case getenv("JOB_COMPLETION_INDEX") != "":
			idx, from = getenv("JOB_COMPLETION_INDEX"), "JOB_COMPLETION_INDEX"
		case getenv("SLURM_ARRAY_TASK_ID") != "":
			idx, from = getenv("SLURM_ARRAY_TASK_ID"), "SLURM_ARRAY_TASK_ID"
			if lo := getenv("SLURM_ARRAY_TASK_MIN"); lo != "" {
				id, err1 := strconv.Atoi(idx)
				min, err2 := strconv.Atoi(lo)
				if err1 != nil || err2 != nil {
					return conformance.Shard{}, fmt.Errorf("SLURM_ARRAY_TASK_ID %q, SLURM_ARRAY_TASK_MIN %q: want whole numbers", idx, lo)
				}
				idx, from = strconv.Itoa(id-min), "SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN"
			}
		default:
			return conformance.Shard{}, fmt.Errorf("--shard %s: no shard index: give I/N, or set JOB_COMPLETION_INDEX (Kubernetes Indexed Job) or SLURM_ARRAY_TASK_ID (Slurm job array)", s)
		}
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 || i >= n {
		return conformance.Shard{}, fmt.Errorf("--shard %s: index %q (from %s) is not a whole number from 0 to %d", s, idx, from, n-1)
	}
	return conformance.Shard{Index: i, Of: n}, nil
}

func runConformance(fs *cmdEnv, a conformanceArgs, df *dutFlags, names []string) int {
	stdout, stderr := fs.stdout, fs.stderr
	rel, err := netreduce.ParseRelease(a.release)
	if err != nil {
		fs.usageError("%v", err)
		return exitUsage
	}
	if err := switching.CheckProgram(a.program); err != nil {
		fs.usageError("--switch-program: %v", err)
		return exitUsage
	}
	if a.count < 1 {
		fs.usageError("--count %d: want at least 1", a.count)
		return exitUsage
	}
	if a.jobs < 1 || a.jobs > 1024 {
		fs.usageError("--jobs %d: want 1..1024", a.jobs)
		return exitUsage
	}
	var shard conformance.Shard
	if fs.changed("shard") {
		if shard, err = parseShard(a.shard, os.Getenv); err != nil {
			fs.usageError("%v", err)
			return exitUsage
		}
	}
	var run []func(conformance.SuiteOptions) []conformance.PropertyResult
	props := 0
	for _, s := range conformance.Suites {
		if a.suite == "all" || a.suite == s.Name {
			run = append(run, s.Run)
			props += s.Properties
		}
	}
	if len(run) == 0 {
		fs.usageError("--suite %q: want %s or all", a.suite, strings.Join(names, ", "))
		return exitUsage
	}
	seed := a.seed
	if !fs.changed("seed") {
		var b [8]byte
		_, _ = crand.Read(b[:])
		seed = binary.LittleEndian.Uint64(b[:]) >> 16
	}
	head := conformance.Report{Seed: seed, Release: rel.String(), Suite: a.suite, Count: a.count}
	opts := conformance.SuiteOptions{Count: a.count, Seed: seed, Release: rel, OutDir: a.out, Shard: shard, SwitchProgram: a.program}
	if a.program != netreduce.ProgramName {
		head.SwitchProgram = a.program
	}
	var writeErr firstError // the first counterexample that could not be written
	opts.WriteFailed = writeErr.set
	dutMode := emu.NetReduce
	if a.dutMode != "netreduce" {
		if a.dutMode != "ring" {
			fs.usageError("--dut-mode %q: want netreduce (the device aggregates) or ring (it only forwards)", a.dutMode)
			return exitUsage
		}
		dutMode = emu.Ring
	}
	if fs.changed("dut-mode") && !df.given(fs) {
		fs.usageError("--dut-mode: only with --dut tap:PREFIX")
		return exitUsage
	}
	if df.given(fs) {
		if head.SwitchProgram != "" {
			fs.usageError("--switch-program %s: with --dut the device aggregates, not an inaemu switch program", a.program)
			return exitUsage
		}
		var code int
		if !conformanceDUT(fs, df, a.jobs, dutMode, &opts, &code) {
			return code
		}
		head.DUT = df.spec
		if dutMode == emu.Ring {
			head.DUTMode = "ring"
		}
		head.Calibration = &opts.DUT.Calibration
		if l := df.logFile; l != nil {
			head.DeviceLog = l.Path
			defer closeLog(stderr, fs.name, l)
		}
	}
	bar := startProgress(fs, "conformance", "cases", a.asJSON)
	var done atomic.Int64
	opts.Progress = func(name string) {
		n := done.Add(1)
		interruptNote.Store(fmt.Sprintf("inaemu conformance: interrupted in %s after %d cases of the run (seed %d)", name, n, seed))
		bar.observe(n, int64(props*a.count/max(shard.Of, 1)))
	}
	if !a.asJSON {
		what := ""
		if shard.Of > 1 {
			what = fmt.Sprintf(", shard %v", shard)
		} else if a.jobs > 1 {
			what = fmt.Sprintf(", %d shards at once", a.jobs)
		}
		if head.SwitchProgram != "" {
			what += ", switch program " + head.SwitchProgram
		}
		if opts.DUT != nil {
			what += fmt.Sprintf(", against the device on %s..%s", opts.DUT.Port(0), opts.DUT.Port(opts.DUT.Ports-1))
			if dutMode == emu.Ring {
				what += " (it forwards: ring jobs)"
			}
		}
		fmt.Fprintf(stdout, "inaemu conformance: seed %d, %d cases per property, release %s%s\n", seed, a.count, rel, what)
		if opts.DUT != nil {
			fmt.Fprintf(stdout, "  %s\n", opts.DUT.Calibration)
		}
	}
	start := time.Now()
	runAll := func(o conformance.SuiteOptions) []conformance.PropertyResult {
		var out []conformance.PropertyResult
		for _, s := range run {
			out = append(out, s(o)...)
		}
		return out
	}
	rep := head
	switch {
	case a.jobs > 1:
		parts := make([]conformance.Report, a.jobs)
		var wg sync.WaitGroup
		for k := range parts {
			o := opts
			o.Shard = conformance.Shard{Index: k, Of: a.jobs}
			parts[k] = head
			parts[k].Shard = &o.Shard
			wg.Add(1)
			go func() {
				defer wg.Done()
				parts[k].Properties = runAll(o)
			}()
		}
		wg.Wait()
		if rep, err = conformance.Merge(parts); err != nil {
			fmt.Fprintf(stderr, "inaemu conformance: merging the %d shards: %v\n", a.jobs, err) // a bug
			return exitFail
		}
	default:
		if shard.Of > 1 {
			rep.Shard = &shard
		}
		rep.Properties = runAll(opts)
		rep.Judge()
	}
	bar.stop()
	took := time.Since(start)
	code := printConformance(fs, rep, a.asJSON, a.allowInconclusive, took)
	if c := writeJUnit(fs, a.junit, conformanceJUnit(rep, took, start)); c != exitOK {
		return c
	}
	if code == exitFail {
		logTail(stderr, fs.name, df.logFile)
	}
	if err := writeErr.get(); err != nil {
		// A counterexample lost is the machine's failure: exit 74, over
		// the failure it would have recorded (the report still names it).
		what := "--out " + a.out
		if pe := (*os.PathError)(nil); errors.As(err, &pe) {
			what += ": " + pe.Path
		}
		return ioError(stderr, fs.name, what, err)
	}
	return code
}

// printConformance prints a report (a run's, a shard's or a merge's) and
// returns the exit status: 1 when a property fails, else 5 when one is
// inconclusive (0 with allowInconclusive).
func printConformance(fs *cmdEnv, rep conformance.Report, asJSON, allowInconclusive bool, elapsed time.Duration) int {
	stdout := fs.stdout
	failed, undecided := 0, 0
	for _, r := range rep.Properties {
		switch {
		case r.Undecided():
			undecided++
		case r.Failed():
			failed++
		}
	}
	if asJSON {
		if code := fs.writeJSONAs(reportSchema("conformance"), &rep); code != exitOK { // merge's too
			return code
		}
	} else {
		for _, r := range rep.Properties {
			verdict := "holds"
			if !r.Passed {
				verdict = "FAILS"
			}
			if r.Skipped != "" {
				fmt.Fprintf(stdout, "  %-40s skipped: %s\n", r.Name, r.Skipped)
				continue
			}
			if r.Undecided() {
				fmt.Fprintf(stdout, "  %-40s INCONCLUSIVE: %d of %d cases inconclusive (%s) (%v)\n", r.Name, r.Inconclusive, r.Cases, r.FirstInconclusive, r.Wall.Round(time.Millisecond))
				for _, n := range r.Notes {
					fmt.Fprintf(stdout, "      note: %s\n", n)
				}
				continue
			}
			fmt.Fprintf(stdout, "  %-40s %s (%d cases, %v)\n", r.Name, verdict, r.Cases, r.Wall.Round(time.Millisecond))
			for _, n := range r.Notes {
				fmt.Fprintf(stdout, "      note: %s\n", n)
			}
			if !r.Passed {
				fmt.Fprintf(stdout, "      %s\n", r.Failure)
				if r.Counterexample != nil {
					fmt.Fprintf(stdout, "      counterexample: %s (and its .pcapng)\n", *r.Counterexample)
				}
				fmt.Fprintf(stdout, "      replay: %s\n", r.Replay)
			}
		}
		if rep.DeviceLog != "" {
			fmt.Fprintf(stdout, "  device log: %s\n", rep.DeviceLog)
		}
		// A skipped property is not one that holds: the count says so.
		skipped := 0
		for _, r := range rep.Properties {
			if r.Skipped != "" {
				skipped++
			}
		}
		ran := len(rep.Properties) - skipped
		also := ""
		if undecided > 0 {
			also += fmt.Sprintf(", %d inconclusive", undecided)
		}
		if skipped > 0 {
			also += fmt.Sprintf(", %d skipped", skipped)
		}
		fmt.Fprintf(stdout, "  %d of %d properties hold%s (%v)\n", ran-failed-undecided, ran, also, elapsed.Round(time.Millisecond))
	}
	switch {
	case failed > 0:
		return exitFail
	case undecided > 0 && !allowInconclusive:
		fmt.Fprintf(fs.stderr, "inaemu %s: inconclusive: no property fails, but %d neither held nor failed (their cases failed in the transport with nothing to blame): exit %d (--allow-inconclusive accepts it)\n", fs.name, undecided, exitUndecidable)
		return exitUndecidable
	}
	return exitOK
}

// firstError keeps the first of the errors set, from any goroutine, of
// whatever types (an atomic.Value panics when a later value's concrete
// type differs from the first's).
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err == nil {
		f.err = err
	}
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}
