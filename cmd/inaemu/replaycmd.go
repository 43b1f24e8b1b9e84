package main

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/replay"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tap"
	"github.com/inaemu/inaemu/tensor"
)

// replayArgs are replay's flags.
type replayArgs struct {
	through, topspeed, timing, asJSON         bool
	out, tapName, from, dtype, release, link  string
	program                                   string // --switch-program
	pps, mbps, multiplier                     float64
	loop, limit, workers, window, msgLen, mtu int
}

// replayCommand is 'inaemu replay FILE': a capture through the emulated
// switch offline, or out of an interface as tcpreplay sends it.
func replayCommand(stdout, stderr io.Writer) *cobra.Command {
	var a replayArgs
	c := newCommand("replay FILE (--tap IFACE | --through-switch --out FILE)", "feed a capture through the emulated switch offline and write what it emits", stdout, stderr,
		func(e *cmdEnv, pos []string) int { return runReplay(e, pos[0], a) })
	c.Args = oneCapture
	f := c.Flags()
	f.BoolVar(&a.through, "through-switch", false, "feed the capture's frames into the emulated switch offline and write what it emits")
	f.StringVar(&a.out, "out", "", "the capture to write (pcapng, one interface per switch port and direction)")
	f.StringVar(&a.tapName, "tap", "", "send the capture's frames out of this interface, as tcpreplay does (a TAP, a bridge, any interface; needs root)")
	f.Float64Var(&a.pps, "pps", 0, "with --tap: send at this many frames per second")
	f.BoolVar(&a.topspeed, "topspeed", false, "with --tap: send as fast as the interface takes them")
	f.BoolVar(&a.timing, "timing", false, "with --tap: keep the capture's own gaps between frames (the default)")
	f.Float64Var(&a.mbps, "mbps", 0, "with --tap: send at this many megabits per second (frame bytes, as tcpreplay counts them)")
	f.Float64Var(&a.multiplier, "multiplier", 0, "with --tap: keep the capture's gaps divided by this factor (2: twice as fast)")
	f.IntVar(&a.loop, "loop", 1, "with --tap: send the capture this many times")
	f.IntVar(&a.limit, "limit", 0, "with --tap: stop after this many frames (0: no limit)")
	f.StringVar(&a.from, "from", "", "with --tap: send only the frames captured on this pcapng interface (e.g. port0-in)")
	f.IntVar(&a.workers, "workers", 0, "ring size (default: the highest INA rank seen + 1)")
	f.IntVar(&a.window, "window", 0, "NetReduce window N the aggregator array is sized for (default 2)")
	f.IntVar(&a.msgLen, "msg-len", 0, "packets per message (default: the longest INA MsgLen seen)")
	f.IntVar(&a.mtu, "mtu", 0, "path MTU (default: the smallest that holds every payload)")
	f.StringVar(&a.dtype, "dtype", "", "element type the switch adds: f32, i32 or f16 (default: the type the capture's section comment names, as inaemu's captures of f16 and i32 runs do; else f32)")
	f.StringVar(&a.release, "release", "safe", "aggregator release rule: safe or paper")
	f.StringVar(&a.link, "link", "100G", "egress link rate, as tc writes it (100G or 100gbit; 100gbps is bytes)")
	f.BoolVar(&a.asJSON, "json", false, "print the report as one JSON object")
	f.StringVar(&a.program, "switch-program", "", "the switch program to feed the capture through: "+strings.Join(netreduce.RingPrograms(), " or ")+" (default: the one the capture's section comment names, else netreduce)")
	c.MarkFlagsMutuallyExclusive("tap", "through-switch")
	// tcpreplay's pacing: one way at a time (--multiplier scales --timing).
	c.MarkFlagsMutuallyExclusive("pps", "mbps", "topspeed", "timing")
	c.MarkFlagsMutuallyExclusive("pps", "mbps", "topspeed", "multiplier")
	c.MarkFlagsRequiredTogether("through-switch", "out")
	completeWords(c, map[string][]string{"dtype": {"f32", "i32", "f16"}, "release": {"safe", "paper"}})
	return c
}

func runReplay(fs *cmdEnv, file string, a replayArgs) int {
	stdout, stderr := fs.stdout, fs.stderr
	var err error
	switch {
	case a.tapName != "":
		return replayOnto(fs, file, a.tapName, a.from, tapPacing{pps: a.pps, mbps: a.mbps, multiplier: a.multiplier, topspeed: a.topspeed, timing: a.timing, loop: a.loop, limit: a.limit}, a.asJSON)
	case !a.through || a.out == "":
		fs.usageError("need --tap IFACE, or --through-switch and --out FILE")
		return exitUsage
	}
	// The ring's sizes, checked up front so that a refusal names the
	// flag (0: the default, most read from the capture).
	for _, c := range []struct {
		flag      string
		v, lo, hi int
	}{{"workers", a.workers, 2, netreduce.MaxWorkers}, {"window", a.window, 1, netreduce.MaxWindow},
		{"msg-len", a.msgLen, 1, netreduce.MaxMsgLen}, {"mtu", a.mtu, 256, 4096}} {
		if c.v != 0 && (c.v < c.lo || c.v > c.hi) {
			fs.usageError("--%s %d: want %d..%d, or 0 for the default", c.flag, c.v, c.lo, c.hi)
			return exitUsage
		}
	}
	noteValue(fs, "--link ", scenario.Rate, a.link)
	if a.program != "" {
		if err := switching.CheckProgram(a.program); err != nil {
			fs.usageError("--switch-program: %v", err)
			return exitUsage
		}
	}
	opt := replay.Options{Workers: a.workers, Window: a.window, MsgLen: a.msgLen, MTU: a.mtu}
	// --dtype given (even empty, which is refused as check refuses it)
	// wins over the type the capture names.
	dtypeSet := fs.changed("dtype")
	if dtypeSet {
		if opt.DType, err = tensor.ParseDType(a.dtype); err != nil {
			fs.usageError("--dtype: %v", err)
			return exitUsage
		}
	}
	if err == nil {
		if opt.Release, err = netreduce.ParseRelease(a.release); err == nil {
			opt.Rate, err = units.ParseRate(a.link)
		}
	}
	if err != nil {
		fs.usageError("%v", err)
		return exitUsage
	}
	recs, names, comment, err := readWithComment(file) // pcap files have no interface names
	if err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	opt.SwitchProgram = cmp.Or(a.program, pcapio.SwitchProgram(comment))
	if d := pcapio.DType(comment); d != "" && !dtypeSet {
		if opt.DType, err = tensor.ParseDType(d); err != nil {
			fmt.Fprintf(stderr, "inaemu replay: %s: the capture's section comment: %v; give --dtype\n", file, err)
			return exitUsage
		}
	}
	if err := switching.CheckProgram(opt.SwitchProgram); err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %s: the capture's section comment names %v; give --switch-program\n", file, err)
		return exitUsage
	}
	if name := topologyInterface(names); name != "" {
		fs.usageError("%s: interface %q is a link direction of an emulated topology; replay --through-switch models one switch and needs a star's capture (interfaces portR-in, portR-out)", file, name)
		return exitUsage
	}
	var rep *replay.Report
	ioErr, err := writeFile(a.out, func(w io.Writer) (err error) {
		opt.Out = w
		rep, err = replay.ThroughSwitch(recs, names, opt)
		return err
	})
	if ioErr != nil {
		return ioError(stderr, fs.name, "--out "+a.out, ioErr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	if a.asJSON {
		return fs.writeJSONAs(reportSchema("replay.switch"), rep)
	}
	fmt.Fprintf(stdout, "inaemu replay: %d frames through the switch on %d ports (%d switch-output frames of the input skipped, %d a fault dropped before the switch not fed)\n", rep.Frames, rep.Ports, rep.Ignored, rep.NotDelivered)
	if rep.Ring != "" {
		fmt.Fprintf(stdout, "  ring      %s\n", rep.Ring)
	}
	s, nr := rep.Switch, netreduce.StatsOf(rep.Switch)
	other := programLines(s)
	if ranNetReduce(s) || len(other) == 0 {
		fmt.Fprintf(stdout, "  switch    %d aggregations, %d result re-sends, %d ICRC drops, %d first-lost drops, %d CLT misses, %d forwarded, %d flooded\n",
			nr.Aggregations, nr.ResultResends, nr.ICRCDrops, nr.FirstLostDrops, nr.CLTMisses, s.Forwarded, s.Flooded)
	}
	for _, l := range other { // the switch's other program (--switch-program)
		fmt.Fprintf(stdout, "  switch    %s; %d forwarded, %d flooded\n", l, s.Forwarded, s.Flooded)
	}
	fmt.Fprintf(stdout, "  output    %s: %d frames\n", a.out, rep.Emitted)
	return exitOK
}

// TapReplay is what 'inaemu replay --tap' did.
type TapReplay struct {
	Interface string  `json:"interface"`
	Frames    int     `json:"frames"`  // frames sent
	Bytes     int64   `json:"bytes"`   // their bytes
	Skipped   int     `json:"skipped"` // ghosts (never delivered) and frames of other interfaces (--from)
	Pacing    string  `json:"pacing"`  // timing, timing xM, pps N, mbps R or topspeed
	Loops     int     `json:"loops"`   // passes over the capture asked for (--loop)
	WallNS    int64   `json:"wall_ns"`
	PPS       float64 `json:"pps"` // frames per second achieved
}

// tapPacing is how replay --tap paces and repeats, tcpreplay's way.
type tapPacing struct {
	pps, mbps, multiplier float64
	topspeed, timing      bool
	loop, limit           int
}

// replayOnto sends a capture's frames out of an interface: with the
// capture's own gaps (--timing, the default, like tcpreplay; divided by
// --multiplier), at a fixed rate (--pps frames or --mbps megabits per
// second) or as fast as possible (--topspeed), --loop times, stopping
// after --limit frames. Frames a fault dropped (ghosts) were never on the
// wire and are skipped.
func replayOnto(fs *cmdEnv, file, iface, from string, pc tapPacing, asJSON bool) int {
	bad := func(v float64) bool { return v < 0 || math.IsNaN(v) || math.IsInf(v, 0) }
	switch { // one pacing at a time: cobra's exclusive flag groups
	case bad(pc.pps):
		fs.usageError("--pps %v: want a positive rate", pc.pps)
		return exitUsage
	case bad(pc.mbps):
		fs.usageError("--mbps %v: want a positive rate", pc.mbps)
		return exitUsage
	case bad(pc.multiplier):
		fs.usageError("--multiplier %v: want a positive factor", pc.multiplier)
		return exitUsage
	case pc.loop < 1:
		fs.usageError("--loop %d: want 1 or more", pc.loop)
		return exitUsage
	case pc.limit < 0:
		fs.usageError("--limit %d: want 0 (no limit) or more", pc.limit)
		return exitUsage
	}
	if pc.multiplier == 0 {
		pc.multiplier = 1
	}
	if code := needTAP(fs); code != 0 {
		return code
	}
	recs, names, err := pcapio.ReadAllNamed(file)
	if err != nil {
		fmt.Fprintf(fs.stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	if from != "" && !slices.Contains(names, from) {
		fs.usageError("--from %q: the capture's interfaces are %v", from, names)
		return exitUsage
	}
	in, err := tap.NewInjector(iface)
	if err != nil {
		return tapFailure(fs, err)
	}
	defer in.Close()
	if state, ok := waitCarrier(iface, carrierWait); !ok {
		// Up but without a carrier (a bridge whose ports nothing holds,
		// a TAP no process has open): every frame would be dropped
		// there, and "50 frames out" would count frames that reached
		// nothing.
		fs.usageError("--tap %s: no carrier (%s): no frame sent out of it would arrive anywhere; start what reads it first (for inaemu's bridges: 'inaemu switch --tap PREFIX' holds their ports)", iface, state)
		return exitUsage
	}
	rep := TapReplay{Interface: iface, Pacing: "timing", Loops: pc.loop}
	switch {
	case pc.topspeed:
		rep.Pacing = "topspeed"
	case pc.pps > 0:
		rep.Pacing = fmt.Sprintf("pps %g", pc.pps)
	case pc.mbps > 0:
		rep.Pacing = fmt.Sprintf("mbps %g", pc.mbps)
	case pc.multiplier != 1:
		rep.Pacing = fmt.Sprintf("timing x%g", pc.multiplier)
	}
	start := time.Now()
send:
	for pass := 0; pass < pc.loop; pass++ {
		passStart, first := time.Now(), time.Time{}
		for _, r := range recs {
			if pcapio.IsGhost(r.Comments) || (from != "" && (r.Info.InterfaceIndex >= len(names) || names[r.Info.InterfaceIndex] != from)) {
				rep.Skipped++
				continue
			}
			if pc.limit > 0 && rep.Frames == pc.limit {
				break send
			}
			// Pacing: wait until this frame's moment (a real-time tool, so
			// it sleeps; tests never depend on how long).
			var due time.Duration
			base := start
			switch {
			case pc.topspeed:
			case pc.pps > 0:
				due = time.Duration(float64(rep.Frames) / pc.pps * float64(time.Second))
			case pc.mbps > 0:
				due = time.Duration(float64(rep.Bytes*8) / (pc.mbps * 1e6) * float64(time.Second))
			default:
				if first.IsZero() {
					first = r.Info.Timestamp
				}
				due, base = time.Duration(float64(r.Info.Timestamp.Sub(first))/pc.multiplier), passStart
			}
			if wait := due - time.Since(base); wait > 0 {
				time.Sleep(wait)
			}
			if err := in.Send(r.Data); err != nil {
				fmt.Fprintf(fs.stderr, "inaemu replay: frame %d: %v\n", rep.Frames+rep.Skipped, err)
				return exitFail
			}
			rep.Frames++
			rep.Bytes += int64(len(r.Data))
		}
	}
	rep.WallNS = int64(time.Since(start))
	if rep.WallNS > 0 {
		rep.PPS = float64(rep.Frames) / time.Duration(rep.WallNS).Seconds()
	}
	if asJSON {
		return fs.writeJSONAs(reportSchema("replay.tap"), rep)
	}
	fmt.Fprintf(fs.stdout, "inaemu replay: %d frames (%d bytes) out of %s in %v (%.0f frames/s, %s); %d skipped\n",
		rep.Frames, rep.Bytes, iface, time.Duration(rep.WallNS).Round(time.Microsecond), rep.PPS, rep.Pacing, rep.Skipped)
	return exitOK
}

// topologyInterface is the first interface of a capture that is a link
// direction of an emulated topology other than the star: A-B (or A-B#K, a
// parallel link) whose way back, B-A (B-A#K), the capture has too, as the
// emulator writes every direction of every link. Replaying such a capture
// into one switch would feed it each frame once per link it crossed, on
// ports that mean nothing. The star's portR-in/portR-out and other
// captures (a TAP bridge's, a pcap file's) give "".
func topologyInterface(names []string) string {
	links := pcapio.LinkNames(names)
	for _, n := range names {
		if l, ok := links[n]; ok && (l.Side == pcapio.SideFwd || l.Side == pcapio.SideRev) {
			return n
		}
	}
	return ""
}

// carrierWait is how long replay --tap waits for an interface's carrier:
// the kernel applies a just-started holder's carrier asynchronously.
const carrierWait = 3 * time.Second

// waitCarrier waits up to d for the interface to pass frames on, as
// /sys/class/net/NAME says: operstate up, or unknown (a driver that
// reports none) with carrier 1. state is what it last read ("operstate
// down, carrier 0"); an interface sysfs does not describe is taken as
// passing.
func waitCarrier(name string, d time.Duration) (state string, ok bool) {
	deadline := time.Now().Add(d)
	for {
		op, err := os.ReadFile("/sys/class/net/" + name + "/operstate")
		if err != nil {
			return "", true
		}
		c, _ := os.ReadFile("/sys/class/net/" + name + "/carrier") // unreadable while down: EINVAL
		o, car := strings.TrimSpace(string(op)), strings.TrimSpace(string(c))
		if o == "up" || o == "unknown" && car == "1" {
			return "", true
		}
		if car == "" {
			car = "none"
		}
		state = "operstate " + o + ", carrier " + car
		if time.Now().After(deadline) {
			return state, false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// readWithComment reads a capture's records, interface names and section
// comment (which names its switch program, pcapio.SwitchProgram).
func readWithComment(file string) ([]pcapio.Record, []string, string, error) {
	rd, err := pcapio.Open(file)
	if err != nil {
		return nil, nil, "", err
	}
	defer rd.Close()
	recs, names, err := rd.All()
	return recs, names, rd.SectionComment(), err
}
