package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tap"
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
