package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/live"
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
func needTAP(fs *cmdFlags) int {
	if err := tap.Usable(); err != nil {
		fmt.Fprintf(fs.stderr, "inaemu %s: %v\n", fs.name, err)
		return exitNoPrivilege
	}
	return 0
}

// tapFailure maps an error from the tap package to an exit code.
// A missing interface is a usage error (2); other device failures exit 1.
func tapFailure(fs *cmdFlags, err error) int {
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

func runTap(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "up" && args[0] != "down") {
		for _, a := range args {
			if a == "-h" || a == "-help" || a == "--help" {
				fmt.Fprintln(stdout, "Usage: inaemu tap up --workers H [--prefix ina] [--json]\n       inaemu tap down [--prefix ina] [--json]\n\n"+
					"up creates, for each rank r, the switch port PREFIX-swR, the host NIC PREFIX-hR (persistent TAPs) and the\n"+
					"bridge PREFIX-brR joining them, MTU 9000, IPv6 off; down removes every interface with that prefix that\n"+
					"inaemu made. Both are idempotent.")
				return exitOK
			}
		}
		fmt.Fprintln(stderr, "inaemu tap: want 'up' or 'down' (see 'inaemu tap --help')")
		return exitUsage
	}
	verb := args[0]
	fs := newFlagSet("tap "+verb, "[flags]", stdout, stderr)
	prefix := fs.String("prefix", tap.DefaultPrefix, "interface name prefix")
	workers := new(int)
	if verb == "up" {
		workers = fs.Int("workers", 8, "number of ranks H: H switch ports, H host NICs, H bridges")
	}
	asJSON := fs.Bool("json", false, "print {\"created\": [...]} or {\"removed\": [...]}")
	if code, ok := fs.parseFlagsOnly(args[1:]); !ok {
		return code
	}
	topo := tap.Topology{Prefix: *prefix, Workers: *workers}
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
		names, err = tap.Down(*prefix)
	}
	if err != nil {
		return tapFailure(fs, err)
	}
	if names == nil {
		names = []string{}
	}
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(map[string][]string{key: names})
		return exitOK
	}
	if len(names) == 0 {
		fmt.Fprintf(stdout, "inaemu tap %s: nothing to do (%s)\n", verb, map[string]string{"up": "all interfaces exist", "down": "no interface of inaemu's with prefix " + *prefix}[verb])
	} else {
		fmt.Fprintf(stdout, "inaemu tap %s: %s %s\n", verb, key, strings.Join(names, " "))
	}
	if verb == "up" {
		fmt.Fprintf(stdout, "  watch a link: tshark -i %s   (all: %s)\n", topo.Bridge(0), "-i "+strings.Join(topo.Bridges(), " -i "))
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

// interrupted is a context that ends on SIGINT or SIGTERM.
func interrupted() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
}

func runSwitch(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("switch", "--tap PREFIX [flags]", stdout, stderr)
	jf := addJobFlags(fs, false)
	jf.addTopologyFlags(true) // refused: the TAP ports are a star
	prefix := fs.String("tap", "", "run on the TAP ports PREFIX-sw0 .. PREFIX-sw(H-1) (see 'inaemu tap up')")
	duration := fs.Duration("duration", 0, "stop after this long (default: run until SIGINT or SIGTERM)")
	asJSON := fs.Bool("json", false, "on exit, print the switch's counters as one JSON object")
	if code, ok := fs.parseFlagsOnly(args); !ok {
		return code
	}
	if *prefix == "" {
		fs.usageError("need --tap PREFIX")
		return exitUsage
	}
	if *duration < 0 {
		fs.usageError("--duration %v: want a positive duration (or none: until SIGINT or SIGTERM)", *duration)
		return exitUsage
	}
	cfg, ok := jf.config()
	if !ok {
		return exitUsage
	}
	topo := tap.Topology{Prefix: *prefix, Workers: cfg.Workers}
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
	ctx, stop := interrupted()
	defer stop()
	if *duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *duration)
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
	if *asJSON {
		_ = json.NewEncoder(stdout).Encode(struct {
			Ports  []string         `json:"ports"`
			WallNS int64            `json:"wall_ns"`
			Switch switching.Report `json:"switch"`
		}{names, int64(time.Since(start)), rep})
		return exitOK
	}
	fmt.Fprintf(stdout, "inaemu switch: %d frames in %v: %d forwarded, %d flooded, %d results emitted\n",
		rep.Frames, time.Since(start).Round(time.Millisecond), rep.Forwarded, rep.Flooded, rep.Emitted)
	fmt.Fprintf(stdout, "  accelerator %d packets, %d aggregations, %d result re-sends, %d ICRC drops, %d first-lost drops, %d CLT misses\n",
		rep.Packets, rep.Aggregations, rep.ResultResends, rep.ICRCDrops, rep.FirstLostDrops, rep.CLTMisses)
	return exitOK
}

func runHost(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("host", "--tap IFACE --rank R --seed S [flags]", stdout, stderr)
	jf := addJobFlags(fs, false)
	jf.addTopologyFlags(true) // refused: the TAP ports are a star
	jf.addMemoryFlag()
	iface := fs.String("tap", "", "the TAP interface that is this host's NIC (e.g. ina-h0 from 'inaemu tap up')")
	rank := fs.Int("rank", -1, "this host's rank (0..H-1)")
	asJSON := fs.Bool("json", false, "print the result as one JSON object (as 'inaemu run --json'; only this rank is checked)")
	if code, ok := fs.parseFlagsOnly(args); !ok {
		return code
	}
	cfg, ok := jf.config()
	switch {
	case !ok:
		return exitUsage
	case *iface == "":
		fs.usageError("need --tap IFACE")
		return exitUsage
	case *rank < 0 || *rank >= cfg.Workers:
		fs.usageError("--rank %d: want 0..%d", *rank, cfg.Workers-1)
		return exitUsage
	case !jf.set["seed"]:
		fs.usageError("need --seed: every host of the job must draw the same tensors and PSNs")
		return exitUsage
	}
	if !jf.set["timeout"] {
		cfg.Timeout = tapTimeout
	}
	if code := needTAP(fs); code != 0 {
		return code
	}
	devs, err := openExisting([]string{*iface})
	if err != nil {
		return tapFailure(fs, err)
	}
	hosts := make([]tap.Device, cfg.Workers)
	hosts[*rank] = devs[0]
	cfg.Devices = &live.Devices{Hosts: hosts}
	if !*asJSON {
		fmt.Fprintf(stdout, "inaemu host: rank %d of %d on %s, %s allreduce of %s %s, seed %d\n",
			*rank, cfg.Workers, *iface, cfg.Mode, units.FormatSize(cfg.TensorBytes), cfg.DType, cfg.Seed)
	}
	res, runErr := runInterruptible(cfg, devs)
	return reportJob(fs, res, runErr, "", *asJSON)
}

// runInterruptible runs a job on devices; SIGINT or SIGTERM closes the
// devices, which ends the job with an error (and the caller cleans up).
func runInterruptible(cfg emu.Config, devs []tap.Device) (*emu.Result, error) {
	ctx, stop := interrupted()
	defer stop()
	go func() {
		<-ctx.Done()
		for _, d := range devs {
			d.Close()
		}
	}()
	return emu.Run(cfg)
}

// runOnTAPs is 'inaemu run --backend tap': the whole job in this process,
// every host and switch port on its own TAP, each link a Linux bridge. It
// creates the interfaces that are missing and removes those it created.
func runOnTAPs(fs *cmdFlags, cfg emu.Config, prefix string, asJSON bool) int {
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
	res, runErr := runInterruptible(cfg, devs)
	return reportJob(fs, res, runErr, "", asJSON)
}
