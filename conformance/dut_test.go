package conformance

import (
	"bytes"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// deviceUnderTest builds program pkg, makes the wired TAPs of a device
// with ports ports under a prefix of this run's tagged tag
// (taptest.Prefix), and returns the suites' options for the device the
// command (with $BIN for the program) starts.
func deviceUnderTest(t *testing.T, tag string, ports int, pkg, command string) SuiteOptions {
	t.Helper()
	prefix := taptest.Prefix(t, tag)
	bin := testtool.Build(t, pkg, "device")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: ports, Wired: true})
	require.NoError(t, err)
	d := dut.Device{Prefix: prefix, Command: strings.ReplaceAll(command, "$BIN", bin), StartTimeout: testtool.Budget(30 * time.Second)}
	// As the command does: the path measured first (a device that fails
	// the calibration's job gets the defaults).
	cal, err := dut.Calibrate(d, emu.NetReduce, min(ports, 4))
	t.Log(cal)
	return SuiteOptions{Count: 6, Seed: 11, OutDir: t.TempDir(), DUT: &DUT{Device: d, Ports: ports, Replay: "--dut tap:" + prefix, Calibration: cal}}
}

// TestSuitesHoldOnInaemuSwitch: inaemu's own switch, in its own process
// and attached to the TAPs like any device, passes every property that
// runs against a device; those that cannot run say why.
func TestSuitesHoldOnInaemuSwitch(t *testing.T) {
	o := deviceUnderTest(t, "cs", 4, "github.com/inaemu/inaemu/cmd/inaemu", "exec $BIN switch --tap $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS")
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
			o := deviceUnderTest(t, "fs", 4, "../dut/testdata/toyswitch", "exec $BIN --prefix $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS --bug "+bug)
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
			require.Contains(t, res.Replay, "--dut tap:"+o.DUT.Prefix)
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

// TestRingModeCatchesForwarderDroppingNAKs: with DUT.Mode ring
// (--dut-mode ring) the suites run ring jobs through a device that only
// forwards. The toy switch in --mode ring is such a device: with no bug
// the aggregation and gbn properties hold; with --bug drop-nak (NAKs
// swallowed, the hosts recover by timeout) every result still comes out
// right, so aggregation holds and gbn fails by response-lost, shrunk, its
// counterexample a ring job (mode: ring in the scenario, mode=ring in the
// case) and its rerun command carrying --dut-mode ring.
func TestRingModeCatchesForwarderDroppingNAKs(t *testing.T) {
	for _, bug := range []string{"none", "drop-nak"} {
		t.Run(bug, func(t *testing.T) {
			o := deviceUnderTest(t, "fr", 4, "../dut/testdata/toyswitch", "exec $BIN --prefix $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS --bug "+bug)
			var log bytes.Buffer
			o.DUT.Log = &log
			cal, err := dut.Calibrate(o.DUT.Device, emu.Ring, 4)
			require.NoError(t, err)
			o.DUT.Mode, o.DUT.Calibration = emu.Ring, cal
			agg := AggregationSuite(o)[0]
			require.True(t, agg.Passed, "a forwarding switch's ring ends exact: %s", agg.Failure)
			require.Equal(t, o.Count, agg.Cases)
			res := GBNSuite(o)[0]
			// Every run the cases started was a ring job.
			starts := regexp.MustCompile(`(?m)^--- inaemu: starting the device for (aggregation/release=safe|gbn) case .*INAEMU_DUT_FLAGS=(.*)$`).FindAllStringSubmatch(log.String(), -1)
			require.GreaterOrEqual(t, len(starts), 2*o.Count)
			for _, m := range starts {
				require.Contains(t, m[2], "--mode ring ", m[0])
			}
			require.Contains(t, o.rerun("--suite gbn", 0), "--dut-mode ring")
			if bug == "none" {
				require.True(t, res.Passed, res.Failure)
				require.Equal(t, o.Count, res.Cases)
				return
			}
			require.False(t, res.Passed, "the drop-nak switch passed %d ring cases", res.Cases)
			t.Logf("%s: %s", bug, res.Failure)
			_, shrunk, ok := strings.Cut(res.Failure, "shrunk to")
			require.True(t, ok, res.Failure)
			require.Contains(t, shrunk, "mode=ring")
			require.Contains(t, shrunk, "response-lost: rank")
			require.Contains(t, shrunk, "NAK_PSN_SEQ_ERR")
			require.NotNil(t, res.Counterexample)
			b, err := os.ReadFile(*res.Counterexample)
			require.NoError(t, err)
			require.Regexp(t, `(?m)^mode: ring$`, string(b))
		})
	}
}

// TestSuitesCatchWhatDevicesEmitAndOwe: three toy-switch bugs whose
// hosts may end exact are caught by default (the command's --count, 100
// cases, stopping at the first failure) with a shrunk case, each by the
// rule that names it: late-sum (a late packet of a released message
// answered with a newer message's sum, in an old PSN its receiver drops
// as a duplicate) by agg-sum on the device's side of the wire's capture,
// withhold (one result per message held until the sender resends) by
// result-lost, forge-ack (ACKs on the receiver's behalf, with the key the
// receiver sends later) by response-forged.
func TestSuitesCatchWhatDevicesEmitAndOwe(t *testing.T) {
	for _, tc := range []struct {
		bug, rule string
		suite     func(SuiteOptions) []PropertyResult
	}{
		{"late-sum", "agg-sum: the device sent", AggregationSuite},
		{"withhold", "result-lost: the device was sent", AggregationSuite},
		{"forge-ack", "response-forged: the device sent rank", GBNSuite},
	} {
		t.Run(tc.bug, func(t *testing.T) {
			o := deviceUnderTest(t, "fo", 4, "../dut/testdata/toyswitch", "exec $BIN --prefix $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS --bug "+tc.bug)
			o.Count = 100 // inaemu conformance's default
			start := time.Now()
			res := tc.suite(o)[0]
			require.False(t, res.Passed, "the %s switch passed %d cases", tc.bug, res.Cases)
			t.Logf("%s: caught at case %d in %v: %s", tc.bug, res.Cases, time.Since(start).Round(time.Millisecond), res.Failure)
			require.Contains(t, res.Failure, "shrunk to")
			_, shrunk, _ := strings.Cut(res.Failure, "shrunk to")
			require.Contains(t, shrunk, tc.rule, "the shrunk case fails by the same rule")
			require.NotNil(t, res.Counterexample)
			require.FileExists(t, strings.TrimSuffix(*res.Counterexample, ".yaml")+".pcapng")
		})
	}
}

// testpmdCommand is DPDK's testpmd as a two-port device: its tap driver
// makes the TAPs PREFIX-sw0 and PREFIX-sw1 (and removes them when it
// stops), and io forwarding sends whatever one port receives out of the
// other: a forwarding device for a ring of two, written by nobody here.
// It polls a second core; no hugepages, no PCI.
const testpmdCommand = "exec dpdk-testpmd --no-huge -m 512 --no-pci -l 0-1 " +
	"--vdev=net_tap0,iface=$INAEMU_DUT_PREFIX-sw0 --vdev=net_tap1,iface=$INAEMU_DUT_PREFIX-sw1 " +
	"-- --forward-mode=io --auto-start --stats-period 3600 --total-num-mbufs=4096"

// TestGBNThroughDPDKTestpmd: ring jobs through DPDK's testpmd end exact
// under faults of every kind, and what go-back-N needs of a device holds
// on the wire's capture (deviceGBN) and in the hosts' own view (checkGBN
// on both connections).
func TestGBNThroughDPDKTestpmd(t *testing.T) {
	testtool.Require(t, "tap", tap.Usable())
	testtool.Need(t, "dpdk-testpmd", func() bool { _, err := exec.LookPath("dpdk-testpmd"); return err == nil })
	var log bytes.Buffer
	prefix, err := tap.RunPrefix("dp") // testpmd makes the TAPs, and removes them when it stops (or is killed with this test)
	require.NoError(t, err)
	d := dut.Device{Prefix: prefix, Command: testpmdCommand, Ready: regexp.MustCompile(`forwards packets`), Log: &log}
	for i, events := range [][]string{
		{"drop port=0 dir=in class=data nth=5", "drop port=1 dir=out class=ack nth=2"},
		{"corrupt port=1 dir=in class=data nth=40", "dup port=0 dir=out class=data nth=7", "hold=3 port=0 dir=in class=data nth=60"},
		{"delay=80000us port=1 dir=in class=data nth=90", "drop port=0 dir=in class=nak nth=1"},
	} {
		cfg := emu.DefaultConfig()
		cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MTU, cfg.Timeout, cfg.Seed = emu.Ring, 2, 256<<10, 1024, 14, uint64(7+i)
		for _, s := range events {
			e, err := faults.Parse(s)
			require.NoError(t, err)
			cfg.Events = append(cfg.Events, e)
		}
		var capture bytes.Buffer
		cfg.Capture = &capture
		var tr hostTrace
		d.Observe = tr.observe
		log.Reset()
		res, err := dut.Run(cfg, d)
		require.NoError(t, err, "testpmd's output:\n%s", log.String())
		require.True(t, res.Exact, "%v", events)
		require.NotZero(t, res.Faults.Injected(), "%v", events)
		recs, err := readRecords(&capture)
		require.NoError(t, err)
		require.Empty(t, deviceGBN(2, recs), "%v", events)
		for r := range 2 {
			ev, first, ok := tr.connection(r, 2)
			require.True(t, ok)
			require.Empty(t, checkGBN(ev, first), "%v: connection %d", events, r)
		}
		t.Logf("%v: %d frames, %d retransmissions, %d NAKs, %d timeouts", events, res.FramesSent, res.Retransmissions, res.NAKs, res.Timeouts)
	}
}
