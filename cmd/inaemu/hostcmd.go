package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tap"
)

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
