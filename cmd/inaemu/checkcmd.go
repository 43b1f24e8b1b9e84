package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tensor"
)

// linkRateFlags collects repeated --link-rate values: RATE for every
// link, NAME=RATE for one interface or link (X, A~B).
type linkRateFlags struct {
	all   float64
	named map[string]float64
	text  []string
}

func (l *linkRateFlags) String() string { return strings.Join(l.text, " ") }

// Type is the value's name in pflag's messages.
func (l *linkRateFlags) Type() string { return "rate" }

func (l *linkRateFlags) Set(v string) error {
	name, rate, named := strings.Cut(v, "=")
	if !named {
		rate = v
	}
	r, err := units.ParseRate(rate)
	if err != nil {
		return err
	}
	if named {
		if name == "" {
			return fmt.Errorf("%q: want RATE or NAME=RATE", v)
		}
		if l.named == nil {
			l.named = map[string]float64{}
		}
		l.named[name] = r
	} else {
		l.all = r
	}
	l.text = append(l.text, v)
	return nil
}

// pairFlags collects repeated --pair values.
type pairFlags []capcheck.QPPair

func (p *pairFlags) String() string {
	s := make([]string, len(*p))
	for i, x := range *p {
		s[i] = x.String()
	}
	return strings.Join(s, " ")
}

// Type is the value's name in pflag's messages.
func (p *pairFlags) Type() string { return "pair" }

func (p *pairFlags) Set(v string) error {
	x, err := capcheck.ParseQPPair(v)
	if err != nil {
		return err
	}
	*p = append(*p, x)
	return nil
}

// checkCommand is 'inaemu check FILE': the capture checker's verdict.
func checkCommand(stdout, stderr io.Writer) *cobra.Command {
	var a checkArgs
	c := newCommand("check FILE", "check a capture: ICRCs, go-back-N on both sides, latencies, NetReduce sums", stdout, stderr,
		func(e *cmdEnv, pos []string) int {
			a.inFlightSet = e.changed("in-flight")
			a.dtypeSet = e.changed("dtype")
			return runCheck(e, pos[0], a)
		})
	c.Args = oneCapture
	f := c.Flags()
	c.Long = `Exit status: 0 the capture conforms; 1 a violation was found; 2 a usage error, an unreadable
file, a capture with nothing to check, or a file cut short or damaged (a capture killed
mid-write: its frames before the cut or the damage are checked and reported, as tshark reads
them, with a warning; a violation among them still exits 1); 5 undecidable: no violation was
found, but part of the capture went unchecked (responses no pairing attributes, a violation
under some consistent pairings of ambiguous responses but not all, opcodes outside the rules),
each listed on an "unchecked" line (JSON: unchecked, verdict "undecidable"), so that a CI gate
never passes an unchecked stream by default; --allow-unchecked exits 0 on it instead.
Frame numbers are Wireshark's (1 for the first frame); JSON gives decode's 0-based index too.
Latencies are n, min, median, max over the capture (JSON {count,min_ns,median_ns,max_ns}; per
connection in streams[]): retransmission latency, from the frame that first carried a PSN to its
first retransmission, where the requester's frames are seen; NAK generation latency, from the
first out-of-sequence data packet to the responder's NAK for it; NAK response latency, from a NAK
to the first data packet with the PSN it asks for. "not delivered" (not_delivered): frames a
fault dropped before the capture point, excluded from the rules. Every field: docs/reports.md.`
	f.BoolVar(&a.asJSON, "json", false, "print one JSON object (conforms, frames, roce_frames, bad_icrc, malformed, not_delivered, injected, injected_kinds, reordered, reorder_window_ns, snapped, skipped, skipped_why, truncated, vantage_points, inferences, unpaired, unchecked, verdict, unchecked_opcodes, read_requests, atomic_requests, path_mtu, path_mtu_why, clock, in_flight_ns, in_flight_why, connections, agg_checked, agg_unchecked, agg_forwarded, pfc_frames, pfc_pauses, cnp_frames, cnps_judged, ce_judged, ce_unjudged, retransmission_latency, nak_generation_latency, nak_response_latency, streams, violations[{rule,frame,index,interface,time_ns,qp,psn,detail,inferred}])")
	f.StringVar(&a.junit, "junit", "", fmt.Sprintf(junitHelp, "a testcase per rule, a failure per violation with its frame number, a testcase unchecked"))
	f.IntVar(&a.mtu, "mtu", 0, "the path MTU in `BYTES` (256, 512, 1024, 2048 or 4096) that says how many PSNs a READ request occupies (its length / MTU, rounded up); default: inferred from the capture's FIRST and MIDDLE payloads, which carry exactly one MTU (the report's read/atomic line says which)")
	f.BoolVar(&a.allowUnchecked, "allow-unchecked", false, "exit 0, not 5, when no violation was found but part of the capture went unchecked (the report still lists what)")
	f.Var(&a.pairs, "pair", "pair a request stream with its response stream (`SRC,DST,REQQPN=RESPQPN`): requests SRC→DST with destination QPN REQQPN are answered by ACKs DST→SRC with destination QPN RESPQPN, e.g. 10.0.0.1,10.0.0.2,0x12=0x11 (repeatable; overrides automatic pairing)")
	f.StringVar(&a.dtype, "dtype", "", "element `TYPE` of NetReduce payloads for the agg-sum rule: f32, i32 or f16 (default: the type the capture's section comment names, as inaemu's captures of f16 and i32 runs do; else f32)")
	f.StringVar(&a.vantage, "vantage", "auto", "`WHERE` a single-interface capture (a pcap file, a mirror port, tcpdump on one host) was taken: sender (at the requester), receiver (at the responder), tap (anywhere on the path) or auto (inferred per connection from the evidence); named link directions say it themselves")
	f.BoolVar(&a.linkTaps, "link-taps", false, "every interface is the link of one host (a capture per host link): agg-sum tells directions apart by the host's MAC; interfaces named PREFIX-brN (the TAP backend's bridges) are taken so without it")
	f.DurationVar(&a.inFlight, "in-flight", 0, "how long frames may be on the way between the capture point and a requester, both ways: psn-order lets a requester act on responses captured within this window before its packet as if they had not reached it yet (default 50µs; 1s for a capture taken on the wall clock between software hosts: inaemu wire, run --dut, the TAP backend's bridges, which the report says in a clock line)")
	f.StringVar(&a.reorder, "reorder-window", "auto", "how far apart in time (`D`) a frame may have been overtaken on the way by a later one: auto (from the capture's fault annotations; none without), 0 (none) or a duration such as 20us")
	f.StringVar(&a.program, "switch-program", "", "the switch program whose aggregation the capture shows, for the agg-sum rule's header length: "+strings.Join(capcheck.SwitchPrograms(), " or ")+" (default: the one the capture's section comment names, else netreduce)")
	f.StringVar(&a.inaTag, "ina-tag", "INA1", "the InetTag of the switch's INA headers: four ASCII characters or a 32-bit number (0x494E4131 is inaemu's INA1)")
	f.Var(&a.linkRate, "link-rate", "the links' rate for the pfc rules (a pause quantum is 512 bit times at it): `RATE` for every link (e.g. 100G, 25gbit) or NAME=RATE for one interface or link (port3, leaf0~spine0; repeatable); without it, each interface's pcapng if_speed (inaemu writes it when a run has congestion settings), and PAUSE/PFC frames of a link with neither are listed as unchecked")
	f.DurationVar(&a.linkDelay, "link-delay", 0, "how long a PAUSE/PFC frame may take, after its capture, to stop its link partner, beyond the frame then on the line (propagation and the MAC's response): pfc-paused-send's tolerance (default: the link's propagation delay when the capture states it, as inaemu's do with congestion settings, else --in-flight's)")
	f.DurationVar(&a.deadlock, "pfc-deadlock", capcheck.DefaultDeadlockAfter, "how long every direction of a cycle between switches must have been paused for one priority, together, at the end of the capture for pfc-deadlock (0: never)")
	f.StringVar(&a.cnp, "cnp", "auto", "when cnp-missing judges a receiver's CE-marked packets: auto (when it sent any CNP in the capture), on (its DCQCN NP is on) or off")
	f.DurationVar(&a.cnpInterval, "cnp-interval", capcheck.DefaultCNPInterval, "the NP's least time between two CNPs for one QP (DCQCN's N)")
	f.DurationVar(&a.cnpTolerance, "cnp-tolerance", capcheck.DefaultCNPTolerance, "how much closer than --cnp-interval cnp-rate lets two CNPs for one QP be captured")
	_ = c.RegisterFlagCompletionFunc("cnp", cobra.FixedCompletions([]string{"auto", "on", "off"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("dtype", cobra.FixedCompletions([]string{"f32", "i32", "f16"}, cobra.ShellCompDirectiveNoFileComp))
	_ = c.RegisterFlagCompletionFunc("vantage", cobra.FixedCompletions([]string{"auto", "sender", "receiver", "tap"}, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// checkArgs are check's flags.
type checkArgs struct {
	asJSON, linkTaps       bool
	allowUnchecked         bool
	mtu                    int
	pairs                  pairFlags
	dtype, vantage, inaTag string
	program                string // --switch-program
	reorder, junit         string
	inFlight               time.Duration
	inFlightSet            bool // --in-flight given: it wins over the capture's clock
	dtypeSet               bool // --dtype given: it wins over the type the capture names
	linkRate               linkRateFlags
	linkDelay, deadlock    time.Duration
	cnp                    string
	cnpInterval            time.Duration
	cnpTolerance           time.Duration
}

// runCheck checks one capture file with check's flags.
func runCheck(fs *cmdEnv, file string, a checkArgs) int {
	stdout, stderr := fs.stdout, fs.stderr
	dt, err := tensor.F32, error(nil)
	if a.dtypeSet {
		dt, err = tensor.ParseDType(a.dtype)
	}
	if err != nil {
		fs.usageError("--dtype: %v", err)
		return exitUsage
	}
	vt, err := capcheck.ParseVantage(a.vantage)
	if err != nil {
		fs.usageError("--vantage: %v", err)
		return exitUsage
	}
	if a.inFlight < 0 {
		fs.usageError("--in-flight %v: want a duration of 0 or more", a.inFlight)
		return exitUsage
	}
	switch a.mtu {
	case 0, 256, 512, 1024, 2048, 4096:
	default:
		fs.usageError("--mtu %d: want 256, 512, 1024, 2048 or 4096", a.mtu)
		return exitUsage
	}
	if a.program != "" && !slices.Contains(capcheck.SwitchPrograms(), a.program) {
		fs.usageError("--switch-program %q: want %s", a.program, strings.Join(capcheck.SwitchPrograms(), " or "))
		return exitUsage
	}
	tag, err := parseINATag(a.inaTag)
	if err != nil {
		fs.usageError("--ina-tag %q: %v", a.inaTag, err)
		return exitUsage
	}
	cnp, err := capcheck.ParseCNPMode(a.cnp)
	if err != nil {
		fs.usageError("--cnp: %v", err)
		return exitUsage
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--link-delay", a.linkDelay}, {"--pfc-deadlock", a.deadlock}, {"--cnp-tolerance", a.cnpTolerance}} {
		if d.v < 0 {
			fs.usageError("%s %v: want a duration of 0 or more", d.name, d.v)
			return exitUsage
		}
	}
	if a.cnpInterval <= 0 || a.cnpTolerance >= a.cnpInterval {
		fs.usageError("--cnp-interval %v: want a duration above 0 and above --cnp-tolerance (%v)", a.cnpInterval, a.cnpTolerance)
		return exitUsage
	}
	cnpTol := a.cnpTolerance // CheckOptions: 0 is the default, negative none
	if cnpTol == 0 {
		cnpTol = -1
	}
	deadlock := a.deadlock // CheckOptions: 0 is the default, negative never
	if deadlock == 0 {
		deadlock = -1
	}
	var w time.Duration // CheckOptions: 0 is from the capture's clock, negative is no window
	if a.inFlightSet {
		w = a.inFlight
		if w == 0 {
			w = -1
		}
	}
	var rw time.Duration // CheckOptions: 0 is auto, negative is none
	if a.reorder != "auto" {
		d, err := time.ParseDuration(a.reorder)
		if err != nil || d < 0 {
			fs.usageError("--reorder-window %q: want auto or a duration of 0 or more, such as 20us", a.reorder)
			return exitUsage
		}
		rw = d
		if d == 0 {
			rw = -1
		}
	}
	debug.SetGCPercent(capcheck.GCPercent)
	start := time.Now()
	rep, err := capcheck.CheckFile(file, capcheck.CheckOptions{Pairs: a.pairs, DType: dt, DTypeFixed: a.dtypeSet, Vantage: vt, InFlight: w, LinkTaps: a.linkTaps, INATag: tag, ReorderWindow: rw, MTU: a.mtu, SwitchProgram: a.program,
		LinkRate: a.linkRate.all, LinkRates: a.linkRate.named, LinkDelay: a.linkDelay, DeadlockAfter: deadlock,
		CNP: cnp, CNPInterval: a.cnpInterval, CNPTolerance: cnpTol})
	if err != nil {
		fmt.Fprintf(stderr, "inaemu check: %v\n", err)
		return exitUsage
	}
	// Nothing to judge is not a capture that conforms.
	switch {
	case rep.Frames == 0 && rep.Truncated != "":
		fmt.Fprintf(stderr, "inaemu check: %s, and no frame before it: nothing to check\n", rep.Truncated)
		return exitUsage
	case rep.Frames == 0:
		fmt.Fprintf(stderr, "inaemu check: %s: the capture has no frames: nothing to check\n", file)
		return exitUsage
	case rep.RoCEFrames == 0 && rep.INAPSFrames == 0 && rep.Truncated != "":
		fmt.Fprintf(stderr, "inaemu check: %s, and none of the %d frames before it is RoCE or INA-PS: nothing to check\n", rep.Truncated, rep.Frames)
		return exitUsage
	case rep.RoCEFrames == 0 && rep.INAPSFrames == 0:
		fmt.Fprintf(stderr, "inaemu check: %s: none of its %d frames is RoCE or INA-PS: nothing to check\n", file, rep.Frames)
		return exitUsage
	}
	if a.asJSON {
		if code := fs.writeJSON(rep); code != exitOK {
			return code
		}
	} else if err := rep.WriteText(stdout); err != nil {
		return ioError(stderr, fs.name, "standard output", err)
	}
	if rep.Truncated != "" {
		fmt.Fprintf(stderr, "inaemu check: warning: %s: the %d frames before it were checked\n", rep.Truncated, rep.Frames)
	}
	if rep.AggError != "" {
		fmt.Fprintf(stderr, "inaemu check: warning: agg-sum stopped: %s\n", rep.AggError)
	}
	if code := writeJUnit(fs, a.junit, checkJUnit(file, rep, rep.Unchecked, a.allowUnchecked, time.Since(start), start)); code != exitOK {
		return code
	}
	switch {
	case len(rep.Violations) > 0:
		return exitFail
	case rep.Truncated != "" || rep.AggError != "":
		return exitUsage
	case len(rep.Unchecked) > 0 && !a.allowUnchecked:
		fmt.Fprintf(stderr, "inaemu check: undecidable: no violation found, but %d unchecked (listed in the report): exit %d (--allow-unchecked accepts it)\n", len(rep.Unchecked), exitUndecidable)
		return exitUndecidable
	}
	return exitOK
}

// exitUndecidable: check found no violation, but part of the capture went
// unchecked (capcheck.Report.Unchecked).
const exitUndecidable = 5

// parseINATag reads an InetTag: four ASCII characters ("INA1") or a
// number ("0x494E4131", "1229869361").
func parseINATag(s string) (uint32, error) {
	if v, err := strconv.ParseUint(s, 0, 32); err == nil {
		if v == 0 {
			return 0, fmt.Errorf("the tag must not be 0")
		}
		return uint32(v), nil
	}
	if len(s) == 4 {
		return binary.BigEndian.Uint32([]byte(s)), nil
	}
	return 0, fmt.Errorf("want four ASCII characters (INA1) or a 32-bit number (0x494E4131)")
}
