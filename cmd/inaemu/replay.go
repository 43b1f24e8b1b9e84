package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/replay"
	"github.com/inaemu/inaemu/emu/tensor"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tap"
)

func runReplay(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("replay", "FILE (--tap IFACE [--pps N | --topspeed | --timing] | --through-switch --out FILE) [flags]", stdout, stderr)
	through := fs.Bool("through-switch", false, "feed the capture's frames into the emulated switch offline and write what it emits")
	out := fs.String("out", "", "the capture to write (pcapng, one interface per switch port and direction)")
	tapName := fs.String("tap", "", "send the capture's frames out of this interface, as tcpreplay does (a TAP, a bridge, any interface; needs root)")
	pps := fs.Float64("pps", 0, "with --tap: send at this many frames per second")
	topspeed := fs.Bool("topspeed", false, "with --tap: send as fast as the interface takes them")
	timing := fs.Bool("timing", false, "with --tap: keep the capture's own gaps between frames (the default)")
	from := fs.String("from", "", "with --tap: send only the frames captured on this pcapng interface (e.g. port0-in)")
	workers := fs.Int("workers", 0, "ring size (default: the highest INA rank seen + 1)")
	window := fs.Int("window", 0, "NetReduce window N the aggregator array is sized for (default 2)")
	msgLen := fs.Int("msg-len", 0, "packets per message (default: the longest INA MsgLen seen)")
	mtu := fs.Int("mtu", 0, "path MTU (default: the smallest that holds every payload)")
	dtype := fs.String("dtype", "f32", "element type the switch adds: f32, i32 or f16")
	release := fs.String("release", "safe", "aggregator release rule: safe or paper")
	link := fs.String("link", "100G", "egress link rate")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	switch {
	case len(pos) != 1:
		fs.usageError("need exactly one capture file, got %d arguments", len(pos))
		return exitUsage
	case *tapName != "" && *through:
		fs.usageError("--tap and --through-switch: choose one")
		return exitUsage
	case *tapName != "":
		return replayOnto(fs, pos[0], *tapName, *from, *pps, *topspeed, *timing, *asJSON)
	case !*through || *out == "":
		fs.usageError("need --tap IFACE, or --through-switch and --out FILE")
		return exitUsage
	}
	opt := replay.Options{Workers: *workers, Window: *window, MsgLen: *msgLen, MTU: *mtu}
	if opt.DType, err = tensor.ParseDType(*dtype); err == nil {
		if opt.Release, err = netreduce.ParseRelease(*release); err == nil {
			opt.Rate, err = units.ParseRate(*link)
		}
	}
	if err != nil {
		fs.usageError("%v", err)
		return exitUsage
	}
	recs, names, err := pcapio.ReadAllNamed(pos[0]) // pcap files have no interface names
	if err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	if name := topologyInterface(names); name != "" {
		fs.usageError("%s: interface %q is a link direction of an emulated topology; replay --through-switch models one switch and needs a star's capture (interfaces portR-in, portR-out)", pos[0], name)
		return exitUsage
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	w := bufio.NewWriter(f)
	opt.Out = w
	rep, err := replay.ThroughSwitch(recs, names, opt)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(stderr, "inaemu replay: %v\n", err)
		return exitUsage
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(rep); err != nil {
			return exitFail
		}
		return exitOK
	}
	fmt.Fprintf(stdout, "inaemu replay: %d frames through the switch on %d ports (%d switch-output frames of the input skipped, %d a fault dropped before the switch not fed)\n", rep.Frames, rep.Ports, rep.Ignored, rep.NotDelivered)
	if rep.Ring != "" {
		fmt.Fprintf(stdout, "  ring      %s\n", rep.Ring)
	}
	s := rep.Switch
	fmt.Fprintf(stdout, "  switch    %d aggregations, %d result re-sends, %d ICRC drops, %d first-lost drops, %d CLT misses, %d forwarded, %d flooded\n",
		s.Aggregations, s.ResultResends, s.ICRCDrops, s.FirstLostDrops, s.CLTMisses, s.Forwarded, s.Flooded)
	fmt.Fprintf(stdout, "  output    %s: %d frames\n", *out, rep.Emitted)
	return exitOK
}

// TapReplay is what 'inaemu replay --tap' did.
type TapReplay struct {
	Interface string  `json:"interface"`
	Frames    int     `json:"frames"`  // frames sent
	Bytes     int64   `json:"bytes"`   // their bytes
	Skipped   int     `json:"skipped"` // ghosts (never delivered) and frames of other interfaces (--from)
	Pacing    string  `json:"pacing"`  // timing, pps N or topspeed
	WallNS    int64   `json:"wall_ns"`
	PPS       float64 `json:"pps"` // frames per second achieved
}

// replayOnto sends a capture's frames out of an interface: with the
// capture's own gaps (--timing, the default, like tcpreplay), at a fixed
// rate (--pps) or as fast as possible (--topspeed). Frames a fault dropped
// (ghosts) were never on the wire and are skipped.
func replayOnto(fs *cmdFlags, file, iface, from string, pps float64, topspeed, timing, asJSON bool) int {
	modes := 0
	for _, on := range []bool{pps != 0, topspeed, timing} {
		if on {
			modes++
		}
	}
	switch {
	case modes > 1:
		fs.usageError("--pps, --topspeed and --timing: choose one")
		return exitUsage
	case pps < 0 || math.IsNaN(pps) || math.IsInf(pps, 0):
		fs.usageError("--pps %v: want a positive rate", pps)
		return exitUsage
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
	rep := TapReplay{Interface: iface, Pacing: "timing"}
	switch {
	case topspeed:
		rep.Pacing = "topspeed"
	case pps > 0:
		rep.Pacing = fmt.Sprintf("pps %g", pps)
	}
	start := time.Now()
	var first time.Time
	for _, r := range recs {
		if pcapio.IsGhost(r.Comments) || (from != "" && (r.Info.InterfaceIndex >= len(names) || names[r.Info.InterfaceIndex] != from)) {
			rep.Skipped++
			continue
		}
		// Pacing: wait until this frame's moment (a real-time tool, so it
		// sleeps; tests never depend on how long).
		var due time.Duration
		switch {
		case topspeed:
		case pps > 0:
			due = time.Duration(float64(rep.Frames) / pps * float64(time.Second))
		default:
			if first.IsZero() {
				first = r.Info.Timestamp
			}
			due = r.Info.Timestamp.Sub(first)
		}
		if wait := due - time.Since(start); wait > 0 {
			time.Sleep(wait)
		}
		if err := in.Send(r.Data); err != nil {
			fmt.Fprintf(fs.stderr, "inaemu replay: frame %d: %v\n", rep.Frames+rep.Skipped, err)
			return exitFail
		}
		rep.Frames++
		rep.Bytes += int64(len(r.Data))
	}
	rep.WallNS = int64(time.Since(start))
	if rep.WallNS > 0 {
		rep.PPS = float64(rep.Frames) / time.Duration(rep.WallNS).Seconds()
	}
	if asJSON {
		_ = json.NewEncoder(fs.stdout).Encode(rep)
		return exitOK
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
	has := map[string]bool{}
	for _, n := range names {
		has[n] = true
	}
	for _, n := range names {
		base, par, _ := strings.Cut(n, "#")
		a, b, ok := strings.Cut(base, "-")
		if !ok || strings.Contains(b, "-") || isStarPort(n) {
			continue
		}
		back := b + "-" + a
		if par != "" {
			back += "#" + par
		}
		if has[back] {
			return n
		}
	}
	return ""
}

// isStarPort tells the star's direction names, portR-in and portR-out.
func isStarPort(name string) bool {
	var r int
	var dir string
	n, _ := fmt.Sscanf(name, "port%d-%s", &r, &dir)
	return n == 2 && (dir == "in" || dir == "out") && name == fmt.Sprintf("port%d-%s", r, dir)
}
