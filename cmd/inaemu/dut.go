package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/roce"
)

// dutFlags are the flags that name a device under test (run, conformance).
type dutFlags struct {
	spec, command, ready, log string
	// logFile is the device's log, once openLog made it.
	logFile *dut.LogFile
}

func addDUTFlags(c *cobra.Command) *dutFlags {
	d := &dutFlags{}
	f := c.Flags()
	f.StringVar(&d.spec, "dut", "", "run against a device under test on `tap:PREFIX`: its ports are PREFIX-sw0, PREFIX-sw1, ... ('inaemu tap up --wired'); faults act on a wire between inaemu's hosts and it")
	f.StringVar(&d.command, "dut-cmd", "", "with --dut: a shell `COMMAND` that starts the device for each run (env INAEMU_DUT_PREFIX, INAEMU_DUT_WORKERS, INAEMU_DUT_FLAGS); default: it is already running")
	f.StringVar(&d.ready, "dut-ready", dut.DefaultReady.String(), "with --dut-cmd: the `REGEX` a line of the command's output matches when the device is ready")
	f.StringVar(&d.log, "dut-log", "", "with --dut-cmd: write the device's output to `FILE` (default: a new inaemu-dut-PREFIX-*.log in the temporary directory); the report names it, and shows its last lines only when the run fails")
	return d
}

// given reports whether any --dut flag was given (device refuses
// --dut-cmd and --dut-ready without --dut).
func (d *dutFlags) given(e *cmdEnv) bool {
	return d.spec != "" || e.changed("dut-cmd") || e.changed("dut-ready") || e.changed("dut-log")
}

// device reads the flags; false after printing a usage error.
func (d *dutFlags) device(e *cmdEnv) (dut.Device, bool) {
	for _, f := range []string{"dut-cmd", "dut-ready", "dut-log"} {
		if e.changed(f) && d.spec == "" {
			e.usageError("--%s: only with --dut tap:PREFIX", f)
			return dut.Device{}, false
		}
	}
	dev, err := dut.Parse(d.spec)
	if err != nil {
		e.usageError("%v", err)
		return dut.Device{}, false
	}
	if dev.Ready, err = regexp.Compile(d.ready); err != nil {
		e.usageError("--dut-ready %q: %v", d.ready, err)
		return dut.Device{}, false
	}
	if e.changed("dut-log") && d.command == "" {
		e.usageError("--dut-log: only with --dut-cmd (inaemu starts no device to log)")
		return dut.Device{}, false
	}
	dev.Command = d.command
	return dev, true
}

// openLog makes the device's log file (with --dut-cmd) and points dev at
// it: the device's output stays out of the report. nil without a command.
func (d *dutFlags) openLog(e *cmdEnv, dev *dut.Device) (*dut.LogFile, int) {
	if dev.Command == "" {
		return nil, exitOK
	}
	l, err := dut.CreateLog(d.log, dev.Prefix)
	if err != nil {
		what := "--dut-log " + d.log
		if d.log == "" {
			what = "the device's log"
		}
		return nil, ioError(e.stderr, e.name, what, err)
	}
	dev.Log, d.logFile = l, l
	return l, exitOK
}

// logTail prints the last lines of the device's output, after a failure.
func logTail(w io.Writer, name string, l *dut.LogFile) {
	if l == nil {
		return
	}
	tail := l.Tail()
	if len(tail) == 0 {
		fmt.Fprintf(w, "inaemu %s: the device printed nothing (%s)\n", name, l.Path)
		return
	}
	fmt.Fprintf(w, "inaemu %s: the device's last %d lines of %d (all in %s):\n", name, len(tail), l.Lines(), l.Path)
	for _, line := range tail {
		fmt.Fprintf(w, "  | %s\n", line)
	}
}

// closeLog closes the device's log (nil: none). A write that failed (a
// full disk) left the log the report names short: one warning line says
// so; the run's exit status stays its own.
func closeLog(w io.Writer, name string, l *dut.LogFile) {
	if l == nil {
		return
	}
	err := l.Close()
	if err == nil {
		return
	}
	if pe := (*os.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err // the path is said already
	}
	fmt.Fprintf(w, "inaemu %s: warning: device log %s: %v\n", name, l.Path, err)
}

// replay is the flags that name the same device in a replay command.
func (d *dutFlags) replay() string {
	s := "--dut " + d.spec
	if d.command != "" {
		s += " --dut-cmd " + shellQuote(d.command)
	}
	if d.ready != dut.DefaultReady.String() {
		s += " --dut-ready " + shellQuote(d.ready)
	}
	return s
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// devicePorts counts the device's ports PREFIX-sw0, PREFIX-sw1, ...
func devicePorts(dev dut.Device) int {
	n := 0
	for {
		if _, err := net.InterfaceByName(dev.Port(n)); err != nil {
			return n
		}
		n++
	}
}

// conformanceDUT fills opts.DUT from the flags; false after printing why
// not (the exit code in *code).
func conformanceDUT(e *cmdEnv, d *dutFlags, jobs int, mode emu.Mode, opts *conformance.SuiteOptions, code *int) bool {
	*code = exitUsage
	dev, ok := d.device(e)
	if !ok {
		return false
	}
	if jobs > 1 {
		e.usageError("-j %d: a device under test takes one run at a time (shard across devices with --shard instead)", jobs)
		return false
	}
	if c := needTAP(e); c != 0 {
		*code = c
		return false
	}
	ports := devicePorts(dev)
	if ports < 2 {
		e.usageError("--dut %s: found %d ports (%s, ...); a ring needs 2 (make them with 'inaemu tap up --wired --prefix %s --workers N')", d.spec, ports, dev.Port(0), dev.Prefix)
		return false
	}
	if _, c := d.openLog(e, &dev); c != exitOK {
		*code = c
		return false
	}
	// The path's speed, measured once before the cases (a burst of the
	// cases' mode; a device said to aggregate that only forwards gets a
	// ring one), fits their shapes.
	workers := min(ports, 4)
	cal, err := dut.Calibrate(dev, mode, workers)
	if err != nil && mode != emu.Ring {
		if ring, rerr := dut.Calibrate(dev, emu.Ring, workers); rerr == nil {
			cal = ring
		}
	}
	opts.DUT = &conformance.DUT{Device: dev, Ports: ports, Replay: d.replay(), Calibration: cal, Mode: mode}
	return true
}

// runOnDUT is 'inaemu run --dut': the job's hosts here, the device
// across a wire that carries the job's faults and capture.
func runOnDUT(e *cmdEnv, d *dutFlags, cfg emu.Config, timed bool, pcap string, asJSON bool) int {
	dev, ok := d.device(e)
	if !ok {
		return exitUsage
	}
	if code := needTAP(e); code != 0 {
		return code
	}
	log, code := d.openLog(e, &dev)
	if code != exitOK {
		return code
	}
	defer closeLog(e.stderr, e.name, log)
	// The path's speed first: a timeout the flags or the scenario give is
	// kept as it is (a counterexample replays with exactly its settings);
	// otherwise it is the one the calibration fits to the job's shape.
	cal, calErr := dut.Calibrate(dev, cfg.Mode, cfg.Workers)
	if !timed {
		cfg.Timeout = uint8(cal.Timeout(cfg.Workers, cfg.Window*cfg.MsgLen))
	}
	if !asJSON {
		fmt.Fprintf(e.stdout, "inaemu run: %s\n", cal)
		if !timed {
			fmt.Fprintf(e.stdout, "inaemu run: ACK timeout %d (%v), fitted to the calibration (--timeout sets it)\n", cfg.Timeout, roce.AckTimeout(cfg.Timeout))
		}
	}
	_ = calErr // said in cal's line; the job runs anyway and is judged on its own
	capFile, err := createPcap(pcap)
	if err != nil {
		return ioError(e.stderr, e.name, "--pcap "+pcap, err)
	}
	if capFile != nil {
		cfg.Capture = capFile
	}
	if !asJSON {
		fmt.Fprintf(e.stdout, "inaemu run: %s allreduce, %d workers, against the device on %s..%s, seed %d\n",
			cfg.Mode, cfg.Workers, dev.Port(0), dev.Port(cfg.Workers-1), cfg.Seed)
	}
	res, err := dut.Run(cfg, dev)
	capErr := capFile.close()
	if capErr != nil && errors.Is(err, capErr) {
		err = nil // the wire's capture failed, not the job: said below
	}
	if cerr := (*emu.ConfigError)(nil); errors.As(err, &cerr) {
		e.usageError("%v", err)
		return exitUsage
	}
	if res == nil {
		fmt.Fprintf(e.stderr, "inaemu run: %v\n", err)
		logTail(e.stderr, e.name, log)
		return exitFail
	}
	if log != nil {
		res.DeviceLog = log.Path
	}
	res.Calibration = cal
	if !asJSON {
		fmt.Fprintf(e.stdout, "  wire: %s\n", wireSummary(res.Wire))
		if n := res.HostQueueDrops; n > 0 {
			fmt.Fprintf(e.stdout, "  host queues  %d frames the device sent were dropped: the hosts fell behind (marked not delivered in the capture)\n", n)
		}
		if log != nil {
			fmt.Fprintf(e.stdout, "  device log  %s\n", log.Summary())
		}
	}
	code = reportJob(e, res.Result, err, capFile.written(pcap), asJSON)
	if code != exitOK && code != exitInterrupted {
		logTail(e.stderr, e.name, log)
	}
	return reportCapture(e, code, pcap, capErr)
}
