package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/tap"
)

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
	rep, err := live.ServeSwitch(ctx, cfg, ports, func() {
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
