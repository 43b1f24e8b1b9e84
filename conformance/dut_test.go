package conformance

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// deviceUnderTest builds program pkg, makes the wired TAPs of a device
// with ports ports, and returns the suites' options for the device the
// command (with $BIN for the program) starts.
func deviceUnderTest(t *testing.T, prefix string, ports int, pkg, command string) SuiteOptions {
	t.Helper()
	testtool.Require(t, "tap", tap.Usable())
	bin := testtool.Build(t, pkg, "device")
	t.Cleanup(func() { tap.Down(prefix) })
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: ports, Wired: true})
	require.NoError(t, err)
	d := dut.Device{Prefix: prefix, Command: strings.ReplaceAll(command, "$BIN", bin)}
	return SuiteOptions{Count: 6, Seed: 11, OutDir: t.TempDir(), DUT: &DUT{Device: d, Ports: ports, Replay: "--dut tap:" + prefix}}
}

// TestSuitesHoldOnInaemuSwitch: inaemu's own switch, in its own process
// and attached to the TAPs like any device, passes every property that
// runs against a device; those that cannot run say why.
func TestSuitesHoldOnInaemuSwitch(t *testing.T) {
	o := deviceUnderTest(t, "itcs", 4, "github.com/inaemu/inaemu/cmd/inaemu", "exec $BIN switch --tap $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS")
	var all []PropertyResult
	for _, s := range Suites {
		all = append(all, s.Run(o)...)
	}
	ran := 0
	for _, r := range all {
		require.True(t, r.Passed, "%s: %s", r.Name, r.Failure)
		if r.Skipped == "" {
			ran++
			require.Equal(t, o.Count, r.Cases, r.Name)
		} else {
			require.Zero(t, r.Cases, r.Name)
		}
	}
	require.Equal(t, 4, ran, "aggregation, gbn, icrc/emitted-frames-verify, icrc/no-aggregate-from-corruption")
}

// TestSuitesCatchFaultySwitches: an aggregating switch written
// independently for this test (dut/testdata/toyswitch, no inaemu code)
// passes with no bug and is caught, with a shrunk counterexample that
// names the device, for each of its four bugs: three by the aggregation
// property, and one that every result survives (a switch that swallows
// NAKs: the hosts recover by timeout) by the go-back-N property alone.
func TestSuitesCatchFaultySwitches(t *testing.T) {
	for _, bug := range []string{"none", "double-add", "stale-icrc", "wrong-port", "drop-nak"} {
		t.Run(bug, func(t *testing.T) {
			o := deviceUnderTest(t, "itfs", 4, "../dut/testdata/toyswitch", "exec $BIN --prefix $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS --bug "+bug)
			if bug == "double-add" {
				// Only a retransmission or duplicate that reaches a slot still
				// waiting for another rank is added twice: on the wall clock
				// that takes a few faulted cases.
				o.Count = 30
			}
			suite := AggregationSuite
			switch bug {
			case "none":
				res := GBNSuite(o)[0]
				require.True(t, res.Passed, res.Failure)
			case "drop-nak":
				res := AggregationSuite(o)[0]
				require.True(t, res.Passed, "every result survives a switch that swallows NAKs: %s", res.Failure)
				suite = GBNSuite
			}
			res := suite(o)[0]
			if bug == "none" {
				require.True(t, res.Passed, res.Failure)
				return
			}
			require.False(t, res.Passed, "the %s switch passed %d cases", bug, res.Cases)
			t.Logf("%s: %s", bug, res.Failure)
			require.Contains(t, res.Failure, "shrunk to")
			require.NotNil(t, res.Counterexample)
			require.FileExists(t, strings.TrimSuffix(*res.Counterexample, ".yaml")+".pcapng")
			require.Contains(t, res.Replay, "--dut tap:itfs")
			switch bug {
			case "double-add":
				require.Contains(t, res.Failure, "WRONG RESULT", "a sum counted twice is a wrong result")
			case "drop-nak":
				require.Contains(t, res.Failure, "response-lost: rank")
				require.Contains(t, res.Failure, "NAK_PSN_SEQ_ERR")
			}
			b, err := os.ReadFile(*res.Counterexample)
			require.NoError(t, err)
			require.Contains(t, string(b), "seed:")
		})
	}
}
