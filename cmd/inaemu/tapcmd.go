package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tap"
	"github.com/vishvananda/netlink"
)

// exitNoPrivilege: TAP devices cannot be made or opened here (no
// /dev/net/tun, no CAP_NET_ADMIN, or a system other than Linux).
const exitNoPrivilege = 4

// tapTimeout is the QPs' ACK timeout exponent on TAPs unless --timeout is
// given: 4.096 µs × 2^16 ≈ 268 ms. Wall-clock timers see the scheduling of
// several processes on few cores, and a message's ACK waits for every
// rank's packets to cross the kernel twice; the emulated default (≈1 ms) would
// retransmit for nothing.
const tapTimeout = 16

// needTAP prints the one-line reason and returns exitNoPrivilege when this
// process cannot use TAPs, or 0.
func needTAP(fs *cmdEnv) int {
	if err := tap.Usable(); err != nil {
		fmt.Fprintf(fs.stderr, "inaemu %s: %v\n", fs.name, err)
		return exitNoPrivilege
	}
	return 0
}

// tapFailure maps an error from the tap package to an exit code.
// A missing interface is a usage error (2); other device failures exit 1.
func tapFailure(fs *cmdEnv, err error) int {
	fmt.Fprintf(fs.stderr, "inaemu %s: %v\n", fs.name, err)
	switch {
	case errors.Is(err, tap.ErrNoPrivilege), errors.Is(err, tap.ErrNeedLinux):
		return exitNoPrivilege
	case errors.Is(err, errNoInterface), errors.Is(err, tap.ErrInterfaceDown):
		return exitUsage
	}
	return exitFail
}

var errNoInterface = errors.New("no such interface")

// tapCommand is 'inaemu tap up|down'.
func tapCommand(stdout, stderr io.Writer) *cobra.Command {
	c := parentCommand("tap", "command", "create (up) or remove (down) the TAP interfaces and bridges of a job on real interfaces", stdout, stderr)
	c.Long = "up creates, for each rank r, the switch port PREFIX-swR, the host NIC PREFIX-hR (persistent TAPs) and the\n" +
		"bridge PREFIX-brR joining them, MTU 9000, IPv6 off; down removes every interface with that prefix that\n" +
		"inaemu made. Both are idempotent."
	for _, verb := range []string{"up", "down"} {
		var prefix string
		var workers int
		var asJSON, wired bool
		short := map[string]string{"up": "create the TAPs and bridges of --workers ranks", "down": "remove every interface with the prefix that inaemu made"}[verb]
		sub := newCommand(verb, short, stdout, stderr, func(e *cmdEnv, _ []string) int { return runTap(e, verb, prefix, workers, wired, asJSON) })
		sub.Args = noArgs
		f := sub.Flags()
		if verb == "up" {
			f.IntVar(&workers, "workers", 8, "number of ranks H: H switch ports, H host NICs, H bridges")
			f.BoolVar(&wired, "wired", false, "no bridges: TAPs only, for 'inaemu wire' or a device under test ('--dut tap:PREFIX'); TAPs in a bridge leave it")
		}
		f.StringVar(&prefix, "prefix", tap.DefaultPrefix, "interface name prefix")
		f.BoolVar(&asJSON, "json", false, "print {\"created\": [...]} or {\"removed\": [...]}")
		c.AddCommand(sub)
	}
	return c
}

func runTap(fs *cmdEnv, verb, prefix string, workers int, wired, asJSON bool) int {
	stdout := fs.stdout
	topo := tap.Topology{Prefix: prefix, Workers: workers, Wired: wired}
	if verb == "up" {
		if err := topo.Validate(); err != nil {
			fs.usageError("%v", err)
			return exitUsage
		}
	}
	if code := needTAP(fs); code != 0 {
		return code
	}
	var names []string
	var err error
	key := "created"
	if verb == "up" {
		names, err = tap.Up(topo)
	} else {
		key = "removed"
		names, err = tap.Down(prefix)
	}
	if err != nil {
		return tapFailure(fs, err)
	}
	if names == nil {
		names = []string{}
	}
	if asJSON {
		return fs.writeJSON(map[string][]string{key: names})
	}
	if len(names) == 0 {
		fmt.Fprintf(stdout, "inaemu tap %s: nothing to do (%s)\n", verb, map[string]string{"up": "all interfaces exist", "down": "no interface of inaemu's with prefix " + prefix}[verb])
	} else {
		fmt.Fprintf(stdout, "inaemu tap %s: %s %s\n", verb, key, strings.Join(names, " "))
	}
	if verb == "up" && !wired {
		fmt.Fprintf(stdout, "  watch a link: tshark -i %s   (all: %s)\n", topo.Bridge(0), "-i "+strings.Join(topo.Bridges(), " -i "))
	}
	if verb == "up" && wired {
		fmt.Fprintf(stdout, "  no bridges: join %s..%s to %s..%s with 'inaemu wire', or test a device on %s..%s with '--dut tap:%s'\n",
			topo.Host(0), topo.Host(workers-1), topo.SwitchPort(0), topo.SwitchPort(workers-1), topo.SwitchPort(0), topo.SwitchPort(workers-1), prefix)
	}
	return exitOK
}

// openExisting opens TAPs that must already exist (made by 'inaemu tap up'
// or by the user), so a typo never leaves a stray interface behind.
func openExisting(names []string) ([]tap.Device, error) {
	var devs []tap.Device
	for _, n := range names {
		l, err := netlink.LinkByName(n)
		if err == nil && l.Type() != "tuntap" {
			err = fmt.Errorf("%s is a %s, not a TAP", n, l.Type())
		}
		var d tap.Device
		if err == nil {
			d, err = tap.Open(n)
		}
		if err != nil {
			for _, d := range devs {
				d.Close()
			}
			var nf netlink.LinkNotFoundError
			if errors.As(err, &nf) {
				return nil, fmt.Errorf("%w: %s (create it with 'inaemu tap up')", errNoInterface, n)
			}
			return nil, err
		}
		devs = append(devs, d)
	}
	return devs, nil
}

// switchCommand is 'inaemu switch': the aggregating switch on TAP ports.
func switchCommand(stdout, stderr io.Writer) *cobra.Command {
	var prefix string
	var duration time.Duration
	var asJSON bool
	var jf *jobFlags
	c := newCommand("switch", "run the aggregating switch on TAP ports (one process; hosts join with 'inaemu host')", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runSwitch(e, jf, prefix, duration, asJSON) })
	c.Use = "switch --tap PREFIX"
	c.Args = noArgs
	jf = addJobFlags(c, scenario.JobGroup)
	jf.refuseNetwork()
	f := c.Flags()
	f.StringVar(&prefix, "tap", "", "run on the TAP ports `PREFIX`-sw0 .. PREFIX-sw(H-1) (see 'inaemu tap up')")
	f.DurationVar(&duration, "duration", 0, "stop after this long (default: run until SIGINT or SIGTERM)")
	f.BoolVar(&asJSON, "json", false, "on exit, print the switch's counters as one JSON object")
	_ = c.MarkFlagRequired("tap")
	return c
}

func runSwitch(fs *cmdEnv, jf *jobFlags, prefix string, duration time.Duration, asJSON bool) int {
	stdout, stderr := fs.stdout, fs.stderr
	if duration < 0 {
		fs.usageError("--duration %v: want a positive duration (or none: until SIGINT or SIGTERM)", duration)
		return exitUsage
	}
	cfg, ok := jf.config(fs)
	if !ok {
		return exitUsage
	}
	topo := tap.Topology{Prefix: prefix, Workers: cfg.Workers}
	if err := topo.Validate(); err != nil {
		fs.usageError("%v", err)
		return exitUsage
	}
	if code := needTAP(fs); code != 0 {
		return code
	}
	var names []string
	for r := 0; r < cfg.Workers; r++ {
		names = append(names, topo.SwitchPort(r))
	}
	ports, err := openExisting(names)
	if err != nil {
		return tapFailure(fs, err)
	}
	interruptible.Store(true) // SIGINT and SIGTERM end the switch: fs.ctx
	ctx := fs.ctx
	if duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, duration)
		defer cancel()
	}
	start := time.Now()
	rep, err := emu.ServeSwitch(ctx, cfg, ports, func() {
		// Ready means frames get through: wait (up to 10 s) until the
		// kernel has the ports up and, in a bridge, forwarding.
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := tap.WaitUp(wctx, names...); err != nil {
			fmt.Fprintf(stderr, "inaemu switch: warning: %v\n", err)
		}
		what := "forwarding (ring mode)"
		if cfg.Mode == emu.NetReduce {
			what = fmt.Sprintf("aggregating ring 0: %d workers, window %d, %d-packet messages, MTU %d, %s, release %s",
				cfg.Workers, cfg.Window, cfg.MsgLen, cfg.MTU, cfg.DType, cfg.Release)
		}
		fmt.Fprintf(stderr, "inaemu switch: ready on %s..%s, %s\n", names[0], names[len(names)-1], what)
	})
	if err != nil {
		var cerr *emu.ConfigError
		if errors.As(err, &cerr) {
			fs.usageError("%v", err)
			return exitUsage
		}
		fmt.Fprintf(stderr, "inaemu switch: %v\n", err)
		return exitFail
	}
	if asJSON {
		return fs.writeJSON(struct {
			Ports  []string         `json:"ports"`
			WallNS int64            `json:"wall_ns"`
			Switch switching.Report `json:"switch"`
		}{names, int64(time.Since(start)), rep})
	}
	fmt.Fprintf(stdout, "inaemu switch: %d frames in %v: %d forwarded, %d flooded, %d results emitted\n",
		rep.Frames, time.Since(start).Round(time.Millisecond), rep.Forwarded, rep.Flooded, rep.Emitted)
	nr := netreduce.StatsOf(rep)
	fmt.Fprintf(stdout, "  accelerator %d packets, %d aggregations, %d result re-sends, %d ICRC drops, %d first-lost drops, %d CLT misses\n",
		nr.Packets, nr.Aggregations, nr.ResultResends, nr.ICRCDrops, nr.FirstLostDrops, nr.CLTMisses)
	return exitOK
}

// hostCommand is 'inaemu host': one rank on a TAP interface.
func hostCommand(stdout, stderr io.Writer) *cobra.Command {
	var iface string
	var rank int
	var asJSON bool
	var jf *jobFlags
	c := newCommand("host", "run one worker on a TAP interface, in its own process", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runHost(e, jf, iface, rank, asJSON) })
	c.Use = "host --tap IFACE --rank R --seed S"
	c.Args = noArgs
	jf = addJobFlags(c, scenario.JobGroup)
	jf.refuseNetwork()
	jf.addMemoryFlag()
	f := c.Flags()
	f.StringVar(&iface, "tap", "", "the TAP interface `IFACE` that is this host's NIC (e.g. ina-h0 from 'inaemu tap up')")
	f.IntVar(&rank, "rank", -1, "this host's rank `R` (0..H-1)")
	f.BoolVar(&asJSON, "json", false, "print the result as one JSON object (as 'inaemu run --json'; only this rank is checked)")
	addUnitsFlag(c)
	for _, req := range []string{"tap", "rank", "seed"} { // seed: every host of the job must draw the same tensors and PSNs
		_ = c.MarkFlagRequired(req)
	}
	return c
}

func runHost(fs *cmdEnv, jf *jobFlags, iface string, rank int, asJSON bool) int {
	stdout := fs.stdout
	cfg, ok := jf.config(fs)
	switch {
	case !ok:
		return exitUsage
	case rank < 0 || rank >= cfg.Workers:
		fs.usageError("--rank %d: want 0..%d", rank, cfg.Workers-1)
		return exitUsage
	}
	if !fs.changed("timeout") {
		cfg.Timeout = tapTimeout
	}
	if code := needTAP(fs); code != 0 {
		return code
	}
	devs, err := openExisting([]string{iface})
	if err != nil {
		return tapFailure(fs, err)
	}
	hosts := make([]tap.Device, cfg.Workers)
	hosts[rank] = devs[0]
	cfg.Devices = &live.Devices{Hosts: hosts}
	if !asJSON {
		fmt.Fprintf(stdout, "inaemu host: rank %d of %d on %s, %s allreduce of %s %s, seed %d\n",
			rank, cfg.Workers, iface, cfg.Mode, units.FormatSize(cfg.TensorBytes), cfg.DType, cfg.Seed)
	}
	res, runErr := runInterruptible(fs, cfg, devs)
	return reportJob(fs, res, runErr, "", asJSON)
}

// runInterruptible runs a job on devices; SIGINT or SIGTERM (e.ctx)
// closes the devices, which ends the job with an error (and the caller
// cleans up): exit 130 says it was the signal.
func runInterruptible(e *cmdEnv, cfg emu.Config, devs []tap.Device) (*emu.Result, error) {
	interruptible.Store(true)
	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-e.ctx.Done():
			for _, d := range devs {
				d.Close()
			}
		case <-done:
		}
	}()
	res, err := emu.Run(cfg)
	if err != nil && e.ctx.Err() != nil && res != nil {
		err = &emu.Interrupted{At: time.Duration(res.VirtualNS), Cause: context.Cause(e.ctx)}
	}
	return res, err
}

// runOnTAPs is 'inaemu run --backend tap': the whole job in this process,
// every host and switch port on its own TAP, each link a Linux bridge. It
// creates the interfaces that are missing and removes those it created.
func runOnTAPs(fs *cmdEnv, cfg emu.Config, prefix string, asJSON bool) int {
	topo := tap.Topology{Prefix: prefix, Workers: cfg.Workers}
	if err := topo.Validate(); err != nil {
		fs.usageError("%v", err)
		return exitUsage
	}
	if code := needTAP(fs); code != 0 {
		return code
	}
	made, err := tap.Up(topo)
	defer func() {
		if err := tap.Remove(made); err != nil {
			fmt.Fprintf(fs.stderr, "inaemu run: %v\n", err)
		}
	}()
	if err != nil {
		return tapFailure(fs, err)
	}
	var names []string
	for r := 0; r < cfg.Workers; r++ {
		names = append(names, topo.Host(r))
	}
	for r := 0; r < cfg.Workers; r++ {
		names = append(names, topo.SwitchPort(r))
	}
	devs, err := openExisting(names)
	if err != nil {
		return tapFailure(fs, err)
	}
	cfg.Devices = &live.Devices{Hosts: devs[:cfg.Workers], Switch: devs[cfg.Workers:]}
	if !asJSON {
		fmt.Fprintf(fs.stdout, "inaemu run: %s allreduce, %d workers × %s %s, on TAPs %s..%s (bridges %s..%s), seed %d\n",
			cfg.Mode, cfg.Workers, units.FormatSize(cfg.TensorBytes), cfg.DType, topo.Host(0), topo.SwitchPort(cfg.Workers-1),
			topo.Bridge(0), topo.Bridge(cfg.Workers-1), cfg.Seed)
	}
	res, runErr := runInterruptible(fs, cfg, devs)
	return reportJob(fs, res, runErr, "", asJSON)
}
