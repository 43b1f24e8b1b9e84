package conformance

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
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
// suites' options for the simulated switch with bug.
func rtlDevice(t *testing.T, bin, bug string) SuiteOptions {
	t.Helper()
	prefix := taptest.Prefix(t, "rt")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 4, Wired: true})
	require.NoError(t, err)
	cmd := "exec " + bin + " --prefix $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS --bug " + bug
	d := dut.Device{Prefix: prefix, Command: cmd, StartTimeout: testtool.Budget(30 * time.Second)}
	return SuiteOptions{Count: 6, Seed: 11, OutDir: t.TempDir(),
		DUT: &DUT{Device: d, Ports: 4, Replay: "--dut tap:" + prefix + " --dut-cmd '" + cmd + "'"}}
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
	t.Run("none", func(t *testing.T) {
		o := rtlDevice(t, bin, "none")
		var all []PropertyResult
		all = append(all, AggregationSuite(o)...)
		all = append(all, GBNSuite(o)...)
		all = append(all, ICRCSuite(o)...)
		ran := 0
		for _, r := range all {
			require.True(t, r.Passed, "%s: %s", r.Name, r.Failure)
			if r.Skipped == "" {
				ran++
				t.Logf("%s: %d cases hold in %v", r.Name, r.Cases, r.Wall.Round(time.Millisecond))
			}
		}
		require.Equal(t, 4, ran, "aggregation, gbn, icrc/emitted-frames-verify, icrc/no-aggregate-from-corruption")
	})
	for _, tc := range []struct {
		bug  string
		prop string // the property that catches it
		want string // in its failure
	}{
		// A middle packet lands one slot on: the last two packets of a
		// message share a slot, and the last gets the sum of the one before.
		{"psn-off-by-one", "aggregation/release=safe", "shrunk to"},
		// A corrupted gradient is summed.
		{"no-icrc-check", "icrc/no-aggregate-from-corruption", ""},
		// int32 lanes of 21 bits, float lanes short of mantissa bits.
		{"lane-overflow", "aggregation/release=safe", "WRONG RESULT"},
		// The ring of message rows wraps one row early: a message the window
		// admits meets the done slots of one still held.
		{"early-wrap", "aggregation/release=safe", "shrunk to"},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			o := rtlDevice(t, bin, tc.bug)
			var results []PropertyResult
			if strings.HasPrefix(tc.prop, "icrc/") {
				results = ICRCSuite(o)
			} else {
				results = AggregationSuite(o)
			}
			res := property(t, results, tc.prop)
			require.False(t, res.Passed, "the %s switch passed %d cases of %s (%d inconclusive; notes %q)", tc.bug, res.Cases, tc.prop, res.Inconclusive, res.Notes)
			t.Logf("%s: caught by %s after %d cases in %v: %s", tc.bug, tc.prop, res.Cases, res.Wall.Round(time.Millisecond), res.Failure)
			require.Contains(t, res.Failure, tc.want)
			require.NotNil(t, res.Counterexample, "a shrunk counterexample scenario")
			require.Contains(t, res.Replay, "--dut tap:"+o.DUT.Prefix)
		})
	}
}
