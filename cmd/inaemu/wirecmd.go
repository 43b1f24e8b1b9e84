package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/faultwire"
	"github.com/inaemu/inaemu/tap"
)

// wireSummary is a wire report in one line.
func wireSummary(r faultwire.Report) string {
	s := r.Faults()
	return fmt.Sprintf("%d RoCE frames; lost %d, dropped %d, duplicated %d, corrupted %d, delayed %d, reordered %d, held %d, forged %d",
		s.Frames, s.Lost, s.Dropped, s.Duplicated, s.Corrupted, s.Delayed, s.Reordered, s.Held, s.Spoofed)
}

// wireCommand is 'inaemu wire': the fault-injecting wire between TAPs
// (or any interfaces) that other processes hold.
func wireCommand(stdout, stderr io.Writer) *cobra.Command {
	var prefix, pcap string
	var workers int
	var pairs []string
	var duration time.Duration
	var asJSON bool
	var jf *jobFlags
	c := newCommand("wire", "join hosts' interfaces to a device's ports through the emulator's fault stages, capturing both sides", stdout, stderr,
		func(e *cmdEnv, _ []string) int {
			return runWire(e, jf, prefix, workers, pairs, pcap, duration, asJSON)
		})
	c.Use = "wire --prefix PREFIX --workers N | --pair HOSTIF=DEVIF ..."
	c.Long = "For each rank r the wire reads what arrives on PREFIX-hR (a host's TAP, held by 'inaemu host') and sends it out of\n" +
		"PREFIX-swR (a device's port, held by the device), and back, through raw sockets ('inaemu tap up --wired' makes\n" +
		"the TAPs without bridges). Faults are those of 'inaemu run' (--netem words, --fault events by port, direction,\n" +
		"class, QP, PSN and nth; port=R dir=in is host R to the device) and apply to RoCE frames only, decided by the\n" +
		"seed and each direction's frame order. It runs until SIGINT or SIGTERM (or --duration), then reports."
	c.Args = noArgs
	jf = addJobFlags(c, scenario.FaultGroup)
	for _, o := range scenario.Options() {
		if o.Key == "seed" {
			jf.addOption(o)
		}
	}
	f := c.Flags()
	f.StringVar(&prefix, "prefix", tap.DefaultPrefix, "join PREFIX-hR to PREFIX-swR for each rank R")
	f.IntVar(&workers, "workers", 0, "how many ranks (pairs) to join")
	f.StringArrayVar(&pairs, "pair", nil, "join `HOSTIF=DEVIF` (repeatable; the k-th pair is port k), instead of --prefix/--workers")
	f.StringVar(&pcap, "pcap", "", "write a pcapng to `FILE`: per pair hR-wR, wR-hR, wR-swR, swR-wR; faults as comments")
	f.DurationVar(&duration, "duration", 0, "stop after this long (default: run until SIGINT or SIGTERM)")
	f.BoolVar(&asJSON, "json", false, `on exit, print {"seed","pairs":[[host,device],...],"wire":{"dirs":[{"link","frames","bytes","other","faults"}],"written","wall_ns"}}`)
	return c
}

func runWire(e *cmdEnv, jf *jobFlags, prefix string, workers int, pairs []string, pcap string, duration time.Duration, asJSON bool) int {
	var names [][2]string
	switch {
	case len(pairs) > 0 && (e.changed("prefix") || e.changed("workers")):
		e.usageError("--pair names the interfaces itself: give it or --prefix/--workers, not both")
		return exitUsage
	case len(pairs) > 0:
		for _, p := range pairs {
			h, d, ok := strings.Cut(p, "=")
			if !ok || h == "" || d == "" || h == d {
				e.usageError("--pair %q: want HOSTIF=DEVIF, two different interfaces", p)
				return exitUsage
			}
			names = append(names, [2]string{h, d})
		}
	default:
		topo := tap.Topology{Prefix: prefix, Workers: workers}
		if !e.changed("workers") {
			e.usageError("--workers: say how many ranks to join (or give --pair)")
			return exitUsage
		}
		if err := topo.Validate(); err != nil {
			e.usageError("%v", err)
			return exitUsage
		}
		for r := range workers {
			names = append(names, [2]string{topo.Host(r), topo.SwitchPort(r)})
		}
	}
	if duration < 0 {
		e.usageError("--duration %v: want a positive duration", duration)
		return exitUsage
	}
	cfg, ok := jf.config(e)
	if !ok {
		return exitUsage
	}
	if code := needTAP(e); code != 0 {
		return code
	}
	wcfg := faultwire.Config{Netem: cfg.Netem, Events: cfg.Events, Seed: cfg.Seed, DType: cfg.DType.String()}
	closeAll := func() {
		for _, p := range wcfg.Pairs {
			p.Host.Close()
			p.Device.Close()
		}
	}
	for _, n := range names {
		var p faultwire.Pair
		var err error
		if p.Host, err = openInterface(n[0]); err == nil {
			if p.Device, err = openInterface(n[1]); err != nil {
				p.Host.Close()
			}
		}
		if err != nil {
			closeAll()
			return tapFailure(e, err)
		}
		wcfg.Pairs = append(wcfg.Pairs, p)
	}
	capFile, err := createPcap(pcap)
	if err != nil {
		closeAll()
		return ioError(e.stderr, e.name, "--pcap "+pcap, err)
	}
	if capFile != nil {
		wcfg.Capture = capFile
	}
	w, err := faultwire.New(wcfg)
	if err != nil {
		closeAll()
		_ = capFile.close()
		e.usageError("%v", strings.TrimPrefix(err.Error(), "faultwire: "))
		return exitUsage
	}
	interruptible.Store(true) // SIGINT and SIGTERM end the wire: e.ctx
	ctx := e.ctx
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	fmt.Fprintf(e.stderr, "inaemu wire: ready, joining %s=%s .. %s=%s, seed %d\n", names[0][0], names[0][1], names[len(names)-1][0], names[len(names)-1][1], cfg.Seed)
	serveErr := w.Serve(ctx)
	capErr := capFile.close()
	if capErr != nil && errors.Is(serveErr, capErr) {
		serveErr = nil // said below
	}
	rep := w.Report()
	code := exitOK
	if asJSON {
		code = e.writeJSON(struct {
			Seed  uint64           `json:"seed"`
			Pairs [][2]string      `json:"pairs"`
			Wire  faultwire.Report `json:"wire"`
		}{cfg.Seed, names, rep})
	} else {
		fmt.Fprintf(e.stdout, "inaemu wire: %d pairs for %v, seed %d: %s\n", len(names), time.Duration(rep.WallNS).Round(time.Millisecond), cfg.Seed, wireSummary(rep))
	}
	if serveErr != nil {
		fmt.Fprintf(e.stderr, "inaemu wire: %v\n", serveErr)
		return exitFail
	}
	return reportCapture(e, code, pcap, capErr)
}

// openInterface opens a raw socket on an interface that must exist.
func openInterface(name string) (tap.Device, error) {
	if _, err := net.InterfaceByName(name); err != nil {
		return nil, fmt.Errorf("%w: %s (create the TAPs with 'inaemu tap up --wired')", errNoInterface, name)
	}
	return tap.OpenSocket(name)
}
