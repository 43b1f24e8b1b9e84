package conformance

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// needVerilator skips (fails under CI) without the tools the build needs.
func needVerilator(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"verilator", "make", "g++"} {
		if _, err := exec.LookPath(tool); err != nil {
			testtool.Require(t, "rtl", errors.New(tool+" not installed (apt-get install verilator make g++)"))
		}
	}
}

// TestRTLLaneArithmetic: the design's adder lanes (examples/rtl/fpadd.sv)
// agree with the CPU's binary32 addition and with the hosts' binary16 rule
// (written independently in fpadd_check.cpp) on 4 million operand pairs
// of every kind: random, near-cancelling, subnormal, infinite.
func TestRTLLaneArithmetic(t *testing.T) {
	needVerilator(t)
	out, err := exec.Command("make", "-s", "-C", "../examples/rtl", "BUILD="+t.TempDir(), "check").CombinedOutput()
	require.NoError(t, err, "make -C examples/rtl check:\n%s", out)
	require.Contains(t, string(out), "ok 4000000")
}

// buildRTL builds the Verilator-simulated switch of examples/rtl (one
// `make`) into a directory of the test's and returns the binary.
func buildRTL(t *testing.T) string {
	t.Helper()
	testtool.Require(t, "tap", tap.Usable())
	needVerilator(t)
	dir := t.TempDir()
	start := time.Now()
	out, err := exec.Command("make", "-C", "../examples/rtl", "BUILD="+dir).CombinedOutput()
	require.NoError(t, err, "make -C examples/rtl:\n%s", out)
	t.Logf("make -C examples/rtl: built in %v", time.Since(start).Round(100*time.Millisecond))
	return filepath.Join(dir, "rtl-agg")
}

// rtlDevice makes the wired TAPs of a 4-port device and returns the
// suites' options for the simulated switch with bug (and the harness's
// extra flags), calibrated as the command does, and the device's log.
func rtlDevice(t *testing.T, bin, bug, extra string) (SuiteOptions, *bytes.Buffer) {
	t.Helper()
	prefix := taptest.Prefix(t, "rt")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 4, Wired: true})
	require.NoError(t, err)
	cmd := "exec " + bin + " --prefix $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS --bug " + bug + extra
	var log bytes.Buffer // written by one device at a time, read after its stop
	d := dut.Device{Prefix: prefix, Command: cmd, StartTimeout: testtool.Budget(30 * time.Second), Log: &log}
	// As the command does: the path measured first; a design that fails
	// the calibration's job (a bug may) gets the defaults.
	cal, err := dut.Calibrate(d, emu.NetReduce, 4)
	if bug == "none" {
		require.NoError(t, err, "the calibration's job through the bug-free design")
	}
	t.Log(cal, err)
	return SuiteOptions{Count: 6, Seed: 11, OutDir: t.TempDir(),
		DUT: &DUT{Device: d, Ports: 4, Replay: "--dut tap:" + prefix + " --dut-cmd '" + cmd + "'", Calibration: cal}}, &log
}

// harnessDroppedNothing: every device run in log ended with the harness's
// exit line, and none says the harness lost a frame the design sent (a
// lost result would be blamed on the design). It returns the TAP write
// retries the exit lines count.
func harnessDroppedNothing(t *testing.T, log string) int {
	t.Helper()
	require.NotContains(t, log, "HARNESS DROPPED")
	starts := strings.Count(log, "--- inaemu: starting the device")
	ends := regexp.MustCompile(`(\d+) TAP write retries, 0 oversized frames read; no frame the design sent was dropped by the harness`).FindAllStringSubmatch(log, -1)
	require.NotZero(t, starts)
	require.Equal(t, starts, len(ends), "an exit line per device run")
	retries := 0
	for _, m := range ends {
		n, err := strconv.Atoi(m[1])
		require.NoError(t, err)
		retries += n
	}
	return retries
}

// property is the named result of a suite's run.
func property(t *testing.T, results []PropertyResult, name string) PropertyResult {
	t.Helper()
	for _, r := range results {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no property %s in %d results", name, len(results))
	return PropertyResult{}
}

// TestSuitesOnRTLSwitch: the SystemVerilog aggregator of examples/rtl,
// simulated by Verilator and joined to the TAPs by its C++ harness, passes
// the device suites (aggregation, gbn, and the ICRC properties that run
// against a device) and is caught, with a shrunk counterexample, for each
// of its four switchable hardware bugs.
func TestSuitesOnRTLSwitch(t *testing.T) {
	bin := buildRTL(t)
	t.Run("bad-clock", func(t *testing.T) {
		for _, v := range []string{"nan", "inf", "-inf", "0", "-1", "1e400", "x"} {
			out, err := exec.Command(bin, "--prefix", "none", "--clock-mhz", v).CombinedOutput()
			var ee *exec.ExitError
			require.ErrorAs(t, err, &ee, "--clock-mhz %s", v)
			require.Equal(t, 2, ee.ExitCode(), "--clock-mhz %s: %s", v, out)
			require.Equal(t, "rtl-agg: --clock-mhz "+v+": want a positive number\n", string(out))
		}
	})
	t.Run("none", func(t *testing.T) {
		o, log := rtlDevice(t, bin, "none", "")
		var all []PropertyResult
		all = append(all, AggregationSuite(o)...)
		all = append(all, GBNSuite(o)...)
		all = append(all, ICRCSuite(o)...)
		ran := 0
		for _, r := range all {
			require.True(t, r.Passed, "%s: %s", r.Name, r.Failure)
			if r.Skipped == "" {
				ran++
				// Every case ran to a verdict: none held only by being
				// inconclusive.
				require.Zero(t, r.Inconclusive, "%s: %q", r.Name, r.Notes)
				require.Equal(t, o.Count, r.Cases, r.Name)
				t.Logf("%s: %d cases hold in %v", r.Name, r.Cases, r.Wall.Round(time.Millisecond))
			}
		}
		require.Equal(t, 4, ran, "aggregation, gbn, icrc/emitted-frames-verify, icrc/no-aggregate-from-corruption")
		harnessDroppedNothing(t, log.String())
	})
	// A TAP that refuses writes for a while (every third write fails
	// with EAGAIN, as the kernel may under load): the harness queues and
	// retries, every result reaches the hosts, the property holds.
	t.Run("refused-writes", func(t *testing.T) {
		o, log := rtlDevice(t, bin, "none", " --refuse-writes 3")
		r := AggregationSuite(o)[0]
		require.True(t, r.Passed, "%s: %s", r.Name, r.Failure)
		require.Zero(t, r.Inconclusive, "%q", r.Notes)
		require.Equal(t, o.Count, r.Cases)
		retries := harnessDroppedNothing(t, log.String())
		t.Logf("%d TAP writes refused and retried, none lost", retries)
		require.NotZero(t, retries)
	})
	for _, tc := range []struct {
		bug  string
		prop string // the property that catches it
		want string // in its failure
	}{
		// A middle packet lands one slot on: the last two packets of a
		// message share a slot, and the last gets the sum of the one before.
		{"psn-off-by-one", "aggregation/release=safe", "agg-sum"},
		// A corrupted gradient is summed.
		{"no-icrc-check", "icrc/no-aggregate-from-corruption", "WRONG RESULT"},
		// int32 lanes of 21 bits, float lanes short of mantissa bits.
		{"lane-overflow", "aggregation/release=safe", "WRONG RESULT"},
		// The ring of message rows wraps one row early: a message the window
		// admits meets the done slots of one still held.
		{"early-wrap", "aggregation/release=safe", "agg-sum"},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			o, log := rtlDevice(t, bin, tc.bug, "")
			var results []PropertyResult
			if strings.HasPrefix(tc.prop, "icrc/") {
				results = ICRCSuite(o)
			} else {
				results = AggregationSuite(o)
			}
			res := property(t, results, tc.prop)
			require.False(t, res.Passed, "the %s switch passed %d cases of %s (%d inconclusive; notes %q)", tc.bug, res.Cases, tc.prop, res.Inconclusive, res.Notes)
			t.Logf("%s: caught by %s after %d cases in %v: %s", tc.bug, tc.prop, res.Cases, res.Wall.Round(time.Millisecond), res.Failure)
			// Caught by what the design did, in the case and in its
			// shrunk form, not by a run that never started.
			require.Contains(t, res.Failure, "shrunk to")
			require.Regexp(t, `^case \d+ \(.*\) fails: .*`+regexp.QuoteMeta(tc.want)+`.*; shrunk to .*`+regexp.QuoteMeta(tc.want), res.Failure)
			require.NotContains(t, res.Failure, "device command")
			harnessDroppedNothing(t, log.String())
			require.NotNil(t, res.Counterexample, "a shrunk counterexample scenario")
			require.Contains(t, res.Replay, "--dut tap:"+o.DUT.Prefix)
		})
	}
}
