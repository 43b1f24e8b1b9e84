// Package dut runs inaemu's jobs against a device under test: a switch
// somebody else built (a P4 program on BMv2, a Verilator-simulated FPGA
// design, a DPDK or kernel data path, or `inaemu switch` in its own
// process) whose ports are Linux interfaces. inaemu's hosts run in this
// process; a fault-injecting wire (package faultwire) joins each rank's
// host to the device's port through a raw socket on the interface, so the
// job's fault schedule hits the frames between hosts and device, and the
// wire's capture shows both sides.
//
// The device's port r is the interface PREFIX-swR. Either the device holds
// it (a TAP it opened, as `inaemu switch --tap PREFIX` does; make them with
// `inaemu tap up --wired`) or it is one end of a veth pair whose other end
// the device attaches to by raw socket (BMv2, DPDK's af_packet). The
// device is already running, or a shell command starts it for each run.
package dut

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/faultwire"
	"github.com/inaemu/inaemu/tap"
)

// Device is a device under test.
type Device struct {
	// Prefix names its ports: PREFIX-sw0, PREFIX-sw1, ...
	Prefix string
	// Command, if set, starts the device for each run (sh -c), with the
	// run's parameters in its environment (see Env); the run waits for a
	// line of its output matching Ready, and stops it with SIGTERM after.
	// Empty: the device is already running.
	Command string
	// Ready is the pattern a line of the command's output (stdout or
	// stderr) must match before the run starts (default DefaultReady).
	Ready *regexp.Regexp
	// StartTimeout bounds the wait for the command to say it is ready and
	// for every port to be up (default 30 s).
	StartTimeout time.Duration
	// Log, if set, receives the command's output, each run's introduced
	// by a marker line naming the run (Label).
	Log io.Writer
	// Label names the run in the log's marker line (e.g. "aggregation/
	// release=safe case 3 (seed 123), run 2"; "": "a run").
	Label string
	// Observe, if set, sees every frame inaemu's hosts send and are handed,
	// in the order they act (live.Devices.Observe): a trace that does not
	// depend on when the wire saw the frames.
	Observe func(rank int, sent bool, frame []byte)
}

// DefaultReady matches `inaemu switch`'s "ready on ..." line.
var DefaultReady = regexp.MustCompile(`\bready\b`)

// Parse reads a --dut value: tap:PREFIX.
func Parse(s string) (Device, error) {
	kind, prefix, ok := strings.Cut(s, ":")
	if !ok || kind != "tap" {
		return Device{}, fmt.Errorf("--dut %q: want tap:PREFIX (the device's ports are PREFIX-sw0, PREFIX-sw1, ...)", s)
	}
	if err := (tap.Topology{Prefix: prefix, Workers: 1}).Validate(); err != nil {
		return Device{}, fmt.Errorf("--dut %q: %v", s, err)
	}
	return Device{Prefix: prefix}, nil
}

// Port is the interface of the device's port r.
func (d Device) Port(r int) string { return tap.Topology{Prefix: d.Prefix}.SwitchPort(r) }

// Env is what a device command finds in its environment for a run:
// INAEMU_DUT_PREFIX, INAEMU_DUT_WORKERS, and INAEMU_DUT_FLAGS, the run's
// job flags as `inaemu switch` takes them (so `inaemu switch --tap
// $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS` is a device command).
func Env(cfg emu.Config, prefix string) []string {
	return []string{
		"INAEMU_DUT_PREFIX=" + prefix,
		fmt.Sprintf("INAEMU_DUT_WORKERS=%d", cfg.Workers),
		"INAEMU_DUT_FLAGS=" + JobFlags(cfg),
	}
}

// JobFlags are cfg's job flags as `inaemu switch` (and `inaemu host`)
// take them.
func JobFlags(cfg emu.Config) string {
	return fmt.Sprintf("--workers %d --mode %s --window %d --msg-len %d --mtu %d --dtype %s --transport %s --release %s --tensor %d --seed %d",
		cfg.Workers, cfg.Mode, cfg.Window, cfg.MsgLen, cfg.MTU, cfg.DType, cfg.Transport, cfg.Release, cfg.TensorBytes, cfg.Seed)
}

// Result is a run against a device. Its Faults are the wire's, summed
// over every direction (Wire has them per direction).
type Result struct {
	*emu.Result
	Wire faultwire.Report
	// HostQueueDrops counts the frames the wire handed a host that the
	// host's full queue dropped (it fell behind): each is in the capture,
	// marked not delivered (faultwire.QueueKind). What the hosts send is
	// never dropped: a host waits for room in the wire's queue.
	HostQueueDrops uint64 `json:"host_queue_drops,omitempty"`
}

// Run runs cfg's job against the device: inaemu's hosts here, cfg's
// faults (Netem, Events) on the wire, cfg.Capture receiving the wire's
// capture. The job must be one ring or NetReduce job on the plain star.
// An error that is an *emu.JobError is the job's failure (the device's
// doing, or the faults'); others say the run could not be made.
func Run(cfg emu.Config, d Device) (*Result, error) {
	switch {
	case cfg.Mode != emu.NetReduce && cfg.Mode != emu.Ring:
		return nil, &emu.ConfigError{Err: fmt.Errorf("--mode %s: a device under test runs ring and netreduce jobs", cfg.Mode)}
	case cfg.Topology != nil || len(cfg.Jobs) > 0:
		return nil, &emu.ConfigError{Err: errors.New("a device under test is one switch: its job runs on the plain star (no --topology, no jobs)")}
	case cfg.Devices != nil:
		return nil, &emu.ConfigError{Err: errors.New("the job already has devices")}
	}
	wcfg := faultwire.Config{Netem: cfg.Netem, Events: cfg.Events, Seed: cfg.Seed, Capture: cfg.Capture, DType: cfg.DType.String()}
	cfg.Netem, cfg.Events, cfg.Capture = faults.Netem{}, nil, nil
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	timeout := d.StartTimeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	var stop func()
	if d.Command != "" {
		var err error
		if stop, err = d.start(cfg, timeout); err != nil {
			return nil, err
		}
	}
	res, err := d.run(cfg, wcfg, timeout)
	if stop != nil {
		stop()
	}
	return res, err
}

func (d Device) run(cfg emu.Config, wcfg faultwire.Config, timeout time.Duration) (*Result, error) {
	var names []string
	for r := 0; r < cfg.Workers; r++ {
		names = append(names, d.Port(r))
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	err := tap.WaitUp(ctx, names...)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("device ports: %w (is the device running on %s..%s?)", err, names[0], names[len(names)-1])
	}
	hosts := make([]tap.Device, cfg.Workers)
	stall := newWatch(cfg)
	closeAll := func() { // on failure before the wire serves (which closes its own side)
		for r, p := range wcfg.Pairs {
			hosts[r].Close()
			p.Host.Close()
			p.Device.Close()
		}
	}
	for r, n := range names {
		s, err := tap.OpenSocket(n)
		if err != nil {
			closeAll()
			return nil, err
		}
		// A host's writes wait for room (none is lost); the wire's to the
		// host never wait, and one a full queue drops is recorded (see
		// faultwire's put: the wire never waits on a host, so a host's
		// wait always ends).
		h, w := tap.HostPipe(fmt.Sprintf("h%d", r), fmt.Sprintf("w%d", r), pipeDepth)
		hosts[r] = h
		wcfg.Pairs = append(wcfg.Pairs, faultwire.Pair{Host: w, Device: stall.port(r, s)})
	}
	w, err := faultwire.New(wcfg)
	if err != nil {
		closeAll()
		return nil, &emu.ConfigError{Err: err}
	}
	wctx, stopWire := context.WithCancel(context.Background())
	werr := make(chan error, 1)
	go func() { werr <- w.Serve(wctx) }()
	observe := stall.observe
	if d.Observe != nil {
		observe = func(rank int, sent bool, frame []byte) {
			d.Observe(rank, sent, frame)
			stall.observe(rank, sent, frame)
		}
	}
	cfg.Devices = &live.Devices{Hosts: hosts, Observe: observe}
	watching := make(chan struct{})
	go stall.run(watching, func() {
		for _, h := range hosts { // the job's loop ends at its next read
			h.Close()
		}
	})
	res, err := emu.Run(cfg)
	close(watching)
	if s := stall.stalled(); s != nil && err != nil {
		err = s // not the closed pipes' error: why they were closed
	}
	stopWire()
	if e := <-werr; e != nil {
		// The wire stopped (a write to a device port failed: a frame
		// larger than the port's MTU, a port gone): frames stopped
		// reaching the device, so a job failure or stall that followed
		// says nothing about the device. The run could not be made.
		if err != nil {
			e = fmt.Errorf("%w; the job then failed: %v", e, err)
		}
		err = fmt.Errorf("wire: %w", e)
	}
	for _, h := range hosts {
		h.Close()
	}
	rep := w.Report()
	if res != nil { // the faults a run reports are those of its links: here, the wire's
		res.Faults = rep.Faults()
	}
	out := &Result{Result: res, Wire: rep}
	for _, p := range wcfg.Pairs { // as the pipes counted them (the wire's count is rep.QueueDrops())
		out.HostQueueDrops += p.Host.(tap.Dropper).Dropped()
	}
	return out, err
}

// pipeDepth is how many frames each way a host's pipe to the wire holds:
// more than a job's windows put in flight. A host whose queue from the
// wire fills (a loaded machine, a device answering retransmissions with
// storms of results) loses what the wire writes next, recorded
// (Result.HostQueueDrops); its own writes wait.
const pipeDepth = 1 << 14
