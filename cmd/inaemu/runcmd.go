package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tap"
)

// exitJobFailed: the job failed with a transport error (retries exhausted...).
const exitJobFailed = 3

// runCommand is 'inaemu run': one run of the emulator (or of real TAPs).
func runCommand(stdout, stderr io.Writer) *cobra.Command {
	var pcap, backend, prefix string
	var asJSON bool
	var jf *jobFlags
	var df *dutFlags
	c := newCommand("run", "emulate a job through the switches, with faults: NetReduce, Ring, the GPU schemes, worker-aggregator, RDMA verbs", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runRun(e, jf, df, pcap, backend, prefix, asJSON) })
	c.Args = noArgs
	c.Long = runLong
	jf = addJobFlags(c, scenario.JobGroup, scenario.LinkGroup, scenario.FaultGroup)
	jf.addScenarioFlag()
	jf.addMemoryFlag()
	for _, o := range scenario.Options() {
		if o.Group == scenario.NetworkGroup {
			jf.addOption(o)
		}
	}
	f := c.Flags()
	f.StringVar(&pcap, "pcap", "", "write a pcapng capture to `FILE`: one interface per link direction (on the star portR-in, portR-out), faults as comments")
	f.StringVar(&backend, "backend", "emu", "emu (emulated links in virtual time) or tap (real TAP interfaces and Linux bridges, wall-clock time; needs root)")
	f.StringVar(&prefix, "prefix", tap.DefaultPrefix, "with --backend tap: the interfaces' name prefix (see 'inaemu tap up')")
	df = addDUTFlags(c)
	f.BoolVar(&asJSON, "json", false, "print one JSON object (exact, mode, workers, bytes, virtual_ns, algbw_gbytes_per_s, busbw_gbytes_per_s, frames_sent, retransmissions, naks, timeouts, icrc_drops, fault_drops, switch{...}, seed, ...)")
	addUnitsFlag(c)
	completeWords(c, map[string][]string{"mode": emu.AlgorithmNames(), "dtype": {"f32", "i32", "f16"}, "pattern": {"random", "zeros", "ones", "ramp"},
		"transport": {"v2-ipv4", "v2-ipv6", "v1"}, "release": {"safe", "paper"}, "nic": {"commodity", "rxe"}, "backend": {"emu", "tap"},
		"verb": {"write", "read", "fetch-add", "cmp-swap"}})
	return c
}

// completeWords registers the words a flag takes for shell completion.
func completeWords(c *cobra.Command, words map[string][]string) {
	for flag, w := range words {
		_ = c.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(w, cobra.ShellCompDirectiveNoFileComp))
	}
}

func runRun(e *cmdEnv, jf *jobFlags, df *dutFlags, pcap, backend, prefix string, asJSON bool) int {
	stderr := e.stderr
	interruptible.Store(true) // from here on Ctrl-C stops the run cleanly (e.ctx)
	cfg, ok := jf.config(e)
	if !ok {
		return exitUsage
	}
	if df.given(e) {
		if backend != "emu" || e.changed("prefix") {
			e.usageError("--dut runs against a device on its own interfaces: no --backend, no --prefix")
			return exitUsage
		}
		if jf.refuseTopology(e, "a device under test") {
			return exitUsage
		}
		return runOnDUT(e, df, cfg, jf.timed, pcap, asJSON)
	}
	switch backend {
	case "emu":
	case "tap":
		if jf.refuseTopology(e, "the TAP backend") {
			return exitUsage
		}
		if cfg.Topology != nil || cfg.SwitchMemory != 0 {
			e.usageError("scenario %s: topology, switch_memory: the TAP backend runs on the star of TAP ports (one per rank); topologies and switch memory are emulated only", jf.scenario)
			return exitUsage
		}
		if pcap != "" {
			e.usageError("--pcap records emulated links; on TAPs capture on the bridges (see the README)")
			return exitUsage
		}
		if !e.changed("timeout") {
			cfg.Timeout = tapTimeout
		}
		return runOnTAPs(e, cfg, prefix, asJSON)
	default:
		e.usageError("--backend %q: want emu or tap", backend)
		return exitUsage
	}
	capFile, err := createPcap(pcap)
	if err != nil {
		return ioError(stderr, e.name, "--pcap "+pcap, err)
	}
	if capFile != nil {
		cfg.Capture = capFile
	}
	if !asJSON {
		printHeader(e.stdout, cfg)
	}
	bar := startProgress(e, "run", "results", asJSON)
	cfg.Context, cfg.Progress = e.ctx, bar.observe
	res, runErr := emu.Run(cfg)
	bar.stop()
	capErr := capFile.close()
	if errors.As(runErr, new(*emu.CaptureError)) {
		runErr = nil // the run is judged; capErr says what failed
	}
	return reportCapture(e, reportJob(e, res, runErr, capFile.written(pcap), asJSON), pcap, capErr)
}

// reportCapture says on stderr that the capture could not be written, if
// so, and returns the run's exit code: exitIO where it was 0 (the run's
// own failure comes first).
func reportCapture(e *cmdEnv, code int, pcap string, capErr error) int {
	if capErr == nil {
		return code
	}
	ioCode := ioError(e.stderr, e.name, "--pcap "+pcap, capErr)
	if code != exitOK {
		return code
	}
	return ioCode
}

// pcapFile is a capture file written through a buffer (nil: no capture).
// The file's first write error is kept: whoever writes the capture (the
// emulator, the fault wire) may report it in words of its own, or not.
type pcapFile struct {
	*bufio.Writer
	f   *os.File
	rec *recorder
	err error // of close
}

// createPcap creates the capture file path; "" is no capture (nil).
func createPcap(path string) (*pcapFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	rec := &recorder{w: f}
	return &pcapFile{Writer: bufio.NewWriterSize(rec, 1<<20), f: f, rec: rec}, nil
}

// close flushes and closes the file (nothing for no capture) and reports
// the first error writing it.
func (p *pcapFile) close() error {
	if p == nil {
		return nil
	}
	err := p.Flush()
	if cerr := p.f.Close(); err == nil {
		err = cerr
	}
	if p.rec.err != nil {
		err = p.rec.err
	}
	p.err = err
	return err
}

// written is path if the capture was written whole (after close), "" if
// there was none or it failed: the summary offers only a capture to open.
func (p *pcapFile) written(path string) string {
	if p == nil || p.err != nil {
		return ""
	}
	return path
}

// reportJob prints a job's result (text or JSON) and maps it to the exit
// code: 0 exact, 1 wrong result, 2 usage, 3 the job failed.
func reportJob(fs *cmdEnv, res *emu.Result, runErr error, pcap string, asJSON bool) int {
	stdout, stderr := fs.stdout, fs.stderr
	name := "inaemu " + fs.name
	var cerr *emu.ConfigError
	if errors.As(runErr, &cerr) {
		fs.usageError("%v", cerr)
		return exitUsage
	}
	if res == nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, runErr)
		return exitJobFailed
	}
	var stopped *emu.Interrupted
	if errors.As(runErr, &stopped) {
		// Ctrl-C: one line of what was done; the JSON (with its error)
		// for programs that asked for it.
		if asJSON {
			_ = fs.writeJSON(res)
		}
		capture := ""
		if pcap != "" {
			capture = fmt.Sprintf("; capture %s closed", pcap)
		}
		if stopped.Want == 0 { // on TAPs: wall-clock time, the devices closed
			fmt.Fprintf(stderr, "%s: interrupted: %d frames sent (seed %d)\n", name, res.FramesSent, res.Seed)
			return exitInterrupted
		}
		fmt.Fprintf(stderr, "%s: interrupted at %v of virtual time: %d of %d results received (%.0f%%), %d frames sent%s (seed %d)\n",
			name, stopped.At, stopped.Results, stopped.Want, 100*float64(stopped.Results)/float64(stopped.Want), res.FramesSent, capture, res.Seed)
		return exitInterrupted
	}
	if asJSON {
		if code := fs.writeJSON(res); code != exitOK {
			return code
		}
	} else {
		printSummary(stdout, fs.bw, res, pcap, runErr)
	}
	switch {
	case runErr != nil:
		fmt.Fprintf(stderr, "%s: job failed: %v (replay: --seed %d)\n", name, runErr, res.Seed)
		return exitJobFailed
	case !res.Exact:
		job := ""
		if len(res.Jobs) > 1 {
			job = "job " + wrongJob(res) + " "
		}
		fmt.Fprintf(stderr, "%s: RESULT DIFFERS: %srank %d element %d is %s, want %s (seed %d)\n",
			name, job, res.Mismatch.Rank, res.Mismatch.Element, res.Mismatch.Got, res.Mismatch.Want, res.Seed)
		return exitFail
	}
	return exitOK
}

// printHeader says what is about to run: the job, or the number of jobs,
// and the network.
func printHeader(w io.Writer, cfg emu.Config) {
	net := fmt.Sprintf("%s links, %v latency", units.FormatRate(cfg.Link.Rate), cfg.Link.Latency)
	if t := cfg.Topology; t != nil {
		net = fmt.Sprintf("on %s (%s, %s; default link %s, %v)", t.Kind, count(len(t.Hosts()), "host"), count(len(t.Switches()), "switch"),
			units.FormatRate(cfg.Link.Rate), cfg.Link.Latency)
	}
	if len(cfg.Jobs) == 0 {
		who := fmt.Sprintf("%d workers", cfg.Workers)
		if t := cfg.Topology; t != nil && emu.IsGPUScheme(cfg.Mode) && t.Hosts()[0].GPUs > 0 {
			who = fmt.Sprintf("%d machines × %d GPUs", cfg.Workers, t.Hosts()[0].GPUs)
		}
		what := string(cfg.Mode) + " allreduce"
		if cfg.Mode == emu.Verbs {
			what = "verbs " + cfg.Verb.String() + " (rank i to rank i+1)"
		}
		if cfg.Mode == collective.Traffic {
			what = trafficWhat(cfg)
		}
		if cfg.Mode == collective.Traffic {
			fmt.Fprintf(w, "inaemu run: %s, %d hosts, %s per flow, %s, seed %d\n",
				what, cfg.Workers, units.FormatSize(cfg.TensorBytes), net, cfg.Seed)
			return
		}
		fmt.Fprintf(w, "inaemu run: %s, %s × %s %s, %s, seed %d\n",
			what, who, units.FormatSize(cfg.TensorBytes), cfg.DType, net, cfg.Seed)
		return
	}
	if cfg.Topology == nil {
		net = fmt.Sprintf("on the star of %d hosts, %s", cfg.Workers, net)
	}
	fmt.Fprintf(w, "inaemu run: %s %s, seed %d\n", count(len(cfg.Jobs), "job"), net, cfg.Seed)
}

// printJobs writes one line per job: name, mode, ranks, verdict, time and
// bandwidths, in aligned columns.
func printJobs(w io.Writer, bw units.BandwidthUnit, r *emu.Result, runErr error) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, j := range r.Jobs {
		verdict := "exact"
		switch {
		case j.Error != "":
			verdict = "FAILED"
		case j.Mismatch != nil:
			verdict = "WRONG"
		case runErr != nil || !j.Exact:
			verdict = "not checked" // the run stopped before results were compared
		}
		at := time.Duration(j.VirtualNS).String()
		if j.StartNS > 0 {
			at += fmt.Sprintf(" from %v", time.Duration(j.StartNS))
		}
		fmt.Fprintf(tw, "  job       %s\t%s\t%d ranks\t%s\t%s\talgbw %s\tbusbw %s\n",
			j.Name, j.Mode, j.Workers, verdict, at, bw.Format(j.AlgBWGbps), bw.Format(j.BusBWGbps))
	}
	_ = tw.Flush()
}

// topJobs counts the run's jobs that are not a scheme's stages.
func topJobs(r *emu.Result) int {
	n := 0
	for _, j := range r.Jobs {
		if j.PartOf == "" {
			n++
		}
	}
	return n
}

// ranNetReduce reports whether a switch of the run ran the NetReduce
// program (a job aggregated on it).
func ranNetReduce(s switching.Report) bool {
	_, ok := s.Programs[netreduce.ProgramName]
	return ok
}

// programLines are the text report's lines of the switch programs other
// than NetReduce that ran, by name ("ars: 16387 aggregations, ..."): each
// report that says itself in a line (switching.ReportLine), one line per
// switch for a report that does not sum over switches.
func programLines(s switching.Report) []string {
	var lines []string
	for _, name := range slices.Sorted(maps.Keys(s.Programs)) {
		if name == netreduce.ProgramName {
			continue
		}
		reps := []any{s.Programs[name]}
		if ps, ok := reps[0].(switching.PerSwitch); ok {
			reps = ps
		}
		for _, rep := range reps {
			if l, ok := rep.(switching.ReportLine); ok {
				lines = append(lines, name+": "+l.Line())
			}
		}
	}
	return lines
}

// wrongJob is the name of the first job whose result differs ("" for
// none).
func wrongJob(r *emu.Result) string {
	for _, j := range r.Jobs {
		if j.Mismatch != nil {
			return j.Name
		}
	}
	return ""
}

func printSummary(w io.Writer, bw units.BandwidthUnit, r *emu.Result, pcap string, runErr error) {
	multi := len(r.Jobs) > 1
	if multi {
		printJobs(w, bw, r, runErr)
	}
	switch {
	case runErr != nil:
		fmt.Fprintf(w, "  result    FAILED: %v\n", runErr)
	case multi && r.Exact && topJobs(r) == 1:
		fmt.Fprintf(w, "  result    EXACT: all %d GPUs hold the bit-exact sum in the scheme's order\n", r.Workers)
	case multi && r.Exact:
		fmt.Fprintf(w, "  result    EXACT: all %d ranks of the %d jobs hold the bit-exact sum\n", r.Workers, topJobs(r))
	case multi:
		fmt.Fprintf(w, "  result    WRONG: job %s rank %d element %d is %s, want %s\n", wrongJob(r), r.Mismatch.Rank, r.Mismatch.Element, r.Mismatch.Got, r.Mismatch.Want)
	case r.Exact && len(r.Ranks) < r.Workers:
		fmt.Fprintf(w, "  result    EXACT: rank %v holds the bit-exact sum (the other ranks ran elsewhere)\n", r.Ranks)
	case r.Exact && len(r.Jobs) == 1 && r.Jobs[0].Compression != nil:
		fmt.Fprintf(w, "  result    EXACT: all %d workers hold, bit for bit, the sum the compressing hops define (max |error| %.3g against the exact sum)\n",
			r.Workers, r.Jobs[0].Compression.MaxAbsErr)
	case r.Exact && len(r.Jobs) == 1 && r.Jobs[0].Mode == string(collective.Traffic):
		fmt.Fprintf(w, "  result    EXACT: every flow's writes checked bit for bit at its destination\n")
	case r.Exact && len(r.Jobs) == 1 && r.Jobs[0].Mode == string(emu.Verbs):
		fmt.Fprintf(w, "  result    EXACT: every rank's verbs on the next rank checked, data bit for bit, atomics in serial order\n")
	case r.Exact:
		fmt.Fprintf(w, "  result    EXACT: all %d workers hold the bit-exact sum\n", r.Workers)
	default:
		fmt.Fprintf(w, "  result    WRONG: rank %d element %d is %s, want %s\n", r.Mismatch.Rank, r.Mismatch.Element, r.Mismatch.Got, r.Mismatch.Want)
	}
	switch {
	case runErr == nil && topJobs(r) > 1:
		fmt.Fprintf(w, "  time      %v virtual until the last job's end, %v wall\n", time.Duration(r.VirtualNS), r.Wall.Round(time.Millisecond))
	case runErr == nil && r.Backend == "tap":
		fmt.Fprintf(w, "  time      %v from start barrier to last result (algbw %s, busbw %s), %v wall in all\n",
			time.Duration(r.VirtualNS).Round(time.Microsecond), bw.Format(r.AlgBWGbps), bw.Format(r.BusBWGbps), r.Wall.Round(time.Millisecond))
	case runErr == nil:
		fmt.Fprintf(w, "  time      %v virtual (algbw %s, busbw %s), %v wall\n",
			time.Duration(r.VirtualNS), bw.Format(r.AlgBWGbps), bw.Format(r.BusBWGbps), r.Wall.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "  frames    %d sent, %d retransmissions, %d NAKs, %d timeouts, %d ICRC drops (NIC profile %s)\n",
		r.FramesSent, r.Retransmissions, r.NAKs, r.Timeouts, r.ICRCDrops, r.NIC)
	if hint := queueingHint(r); hint != "" {
		fmt.Fprintf(w, "  note      %s\n", hint)
	}
	if r.Backend != "tap" { // on TAPs there are no emulated links to fault
		f := r.Faults
		fmt.Fprintf(w, "  faults    %d lost, %d dropped by events, %d duplicated, %d corrupted, %d delayed, %d reordered, %d held, %d spoofed; %d queue drops\n",
			f.Lost, f.Dropped, f.Duplicated, f.Corrupted, f.Delayed, f.Reordered, f.Held, f.Spoofed, r.QueueDrops)
	}
	for _, j := range r.Jobs {
		if c := j.Compression; c != nil {
			name := ""
			if multi {
				name = " (job " + j.Name + ")"
			}
			fmt.Fprintf(w, "  compress  bound 2^-%d%s: payload %.2fx, wire %.2fx; %d packets compressed, %d sent as they were; values 0/8/16/32-bit %d/%d/%d/%d\n",
				c.K, name, c.PayloadRatio, c.WireRatio, c.Compressed, c.Uncompressed, c.Classes[0], c.Classes[1], c.Classes[2], c.Classes[3])
			for _, h := range c.Carried {
				fmt.Fprintf(w, "  hops      %s: payload %.2fx, wire %.2fx, max |change| %.3g; values 0/8/16/32-bit %d/%d/%d/%d\n",
					h.Carries, h.PayloadRatio, h.WireRatio, h.MaxAbsErr, h.Classes[0], h.Classes[1], h.Classes[2], h.Classes[3])
			}
		}
	}
	printCongestion(w, r)
	if n := r.Switch.PortSecurity; n > 0 {
		fmt.Fprintf(w, "  security  %d frames dropped by port security (a host port's frame from another host's MAC or address, or a host's from another port)\n", n)
	}
	if ranNetReduce(r.Switch) && r.Switch.Frames > 0 {
		s := netreduce.StatsOf(r.Switch)
		release := ""
		if r.Release != "" {
			release = " (release " + r.Release + ")"
		}
		fmt.Fprintf(w, "  switch    %d aggregations, %d result re-sends, %d CLT misses, %d first-lost drops, %d stale forwards, %d port drops%s\n",
			s.Aggregations, s.ResultResends, s.CLTMisses, s.FirstLostDrops, s.StaleForwards, s.PortDrops, release)
		for _, j := range r.Jobs {
			if j.Ring == nil || len(j.Ring.Tree) == 0 {
				continue
			}
			var at []string
			for _, t := range j.Ring.Tree[1:] {
				at = append(at, fmt.Sprintf("%s %v", t.Switch, t.Ranks))
			}
			c := j.Ring.Counters
			fmt.Fprintf(w, "  racks     job %s: %s under %s: %d partials up (%d again), %d totals down (%d again), %d results translated, %d notifications, %d untranslatable (CTTs in --json)\n",
				j.Name, strings.Join(at, ", "), j.Ring.Switch, c.PartialsSent, c.PartialResends, c.TotalsSent, c.TotalResends, c.Translated, c.NotifySent, c.Untranslatable)
		}
	}
	if r.Switch.Frames > 0 {
		for _, l := range programLines(r.Switch) {
			fmt.Fprintf(w, "  switch    %s\n", l)
		}
	}
	if pcap != "" {
		fmt.Fprintf(w, "  capture   %s (one interface per link direction; open it in Wireshark)\n", pcap)
	}
	fmt.Fprintf(w, "  seed      %d\n", r.Seed)
}

// queueingHint explains timeouts on TAPs that no loss explains: no NAK
// (nothing arrived out of order, so nothing was lost before later frames)
// and no fault injected. The kernel's queues held frames longer than the
// ACK timeout: a window of frames takes its count over the path's rate to
// drain (the live hosts' one event loop moves some 65 k frames/s on two
// cores), and a go-back-N resend of the window only deepens the queue.
func queueingHint(r *emu.Result) string {
	if r.Backend != "tap" || r.Timeouts == 0 || r.NAKs > 0 || r.Faults.Injected() > 0 {
		return ""
	}
	return fmt.Sprintf("%d timeouts, no NAKs and no faults injected: frames waited in the kernel's queues longer than the ACK timeout (queueing, not loss); raise --timeout or lower --window or --msg-len", r.Timeouts)
}
