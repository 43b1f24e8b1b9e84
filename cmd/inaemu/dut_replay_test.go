package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// TestDUTRunKeepsTheScenariosTimeout: `run --dut` runs with the ACK
// timeout a scenario gives (the printed replay of a counterexample must
// run as the case did), a --timeout flag over it wins, and with neither
// the calibration decides (at least 2^14). The stall detector's message
// names the period the hosts ran with; the device here forwards nothing.
func TestDUTRunKeepsTheScenariosTimeout(t *testing.T) {
	prefix := taptest.Prefix(t, "rt")
	mute := testtool.Build(t, "../../dut/testdata/mute", "mute")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 2, Wired: true})
	require.NoError(t, err)
	dir := t.TempDir()
	sc := filepath.Join(dir, "case.yaml")
	require.NoError(t, os.WriteFile(sc, []byte("workers: 2\nmode: netreduce\ntensor: \"4096\"\nseed: 5\ntimeout: 12\nmax_time: 120s\n"), 0o644))
	plain := filepath.Join(dir, "plain.yaml")
	require.NoError(t, os.WriteFile(plain, []byte("workers: 2\nmode: netreduce\ntensor: \"4096\"\nseed: 5\nmax_time: 120s\n"), 0o644))
	for _, c := range []struct {
		args   []string
		period string
	}{
		{[]string{"--scenario", sc}, "8 ACK timeouts of 16.777216ms"},
		{[]string{"--scenario", sc, "--timeout", "13"}, "8 ACK timeouts of 33.554432ms"},
		{[]string{"--scenario", plain}, "8 ACK timeouts of 67.108864ms"}, // the calibration failed: 2^14
	} {
		args := append([]string{"run", "--dut", "tap:" + prefix, "--dut-cmd", "exec " + mute + " --prefix $INAEMU_DUT_PREFIX --workers $INAEMU_DUT_WORKERS"}, c.args...)
		code, out, errOut := runCLI(args...)
		require.Equal(t, exitJobFailed, code, "%v\n%s\n%s", c.args, out, errOut)
		require.Contains(t, out+errOut, "stalled: no progress for ", c.args)
		require.Contains(t, out+errOut, c.period, c.args)
	}
}

// TestPrintedReplayReproduces: a counterexample against a faulty device
// (the toy switch that sends each result out of the wrong port) is
// written as a scenario with every setting the shrunk case ran with, its
// timeout included, and the printed replay command, run as printed,
// fails the same way.
func TestPrintedReplayReproduces(t *testing.T) {
	prefix := taptest.Prefix(t, "rp")
	bin := inaemuBinary(t)
	toy := testtool.Build(t, "../../dut/testdata/toyswitch", "toyswitch")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 4, Wired: true})
	require.NoError(t, err)
	dir := t.TempDir()
	code, out, errOut := runCLI("conformance", "--suite", "aggregation", "--dut", "tap:"+prefix,
		"--dut-cmd", "exec "+toy+" --prefix $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS --bug wrong-port", "--count", "1", "--seed", "11", "--out", dir)
	require.Equal(t, exitFail, code, "%s\n%s", out, errOut)
	m := regexp.MustCompile(`shrunk to workers=(\d+) window=(\d+) msg-len=(\d+) mtu=(\d+) tensor=(\d+)×(\w+) timeout=(\d+) seed=(\d+) netem="" faults=\[([^\]]*)\]: (.*)`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	require.Contains(t, m[10], "misdelivered: the device sent a ")
	ce := regexp.MustCompile(`counterexample: (\S+\.yaml)`).FindStringSubmatch(out)
	require.NotNil(t, ce, out)
	s, err := scenario.Load(ce[1])
	require.NoError(t, err)
	num := func(i int) int { n, _ := strconv.Atoi(m[i]); return n }
	require.Equal(t, num(1), *s.Workers)
	require.Equal(t, num(2), *s.Window)
	require.Equal(t, num(3), *s.MsgLen)
	require.Equal(t, num(4), *s.MTU)
	require.Equal(t, m[6], s.DType)
	require.Equal(t, num(7), *s.Timeout, "the timeout the case ran with")
	require.Equal(t, m[8], strconv.FormatUint(*s.Seed, 10))
	require.Equal(t, m[9] == "", len(s.Faults) == 0)
	require.Equal(t, "120s", s.MaxTime)

	replay := regexp.MustCompile(`(?m)^      replay: (inaemu run --scenario .*)$`).FindStringSubmatch(out)
	require.NotNil(t, replay, out)
	cmd := taptest.Command("bash", "-c", replay[1])
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	got, err := cmd.CombinedOutput()
	require.Error(t, err, "the replay fails as the case did:\n%s", got)
	period := regexp.MustCompile(`stalled: no progress for [0-9.]+m?s \((8 ACK timeouts of [0-9.]+m?s)\)`).FindStringSubmatch(m[10])
	require.NotNil(t, period, m[10])
	require.Contains(t, string(got), period[1], "the replay runs with the case's timeout")
	require.Contains(t, string(got), "result    FAILED: stalled: no progress for ")
}

// TestICRCPropertiesShrinkAndSayWhy: against a device that only forwards
// (inaemu's switch in ring mode, for NetReduce jobs: each rank's gradient
// comes back as its "result"), icrc/no-aggregate-from-corruption fails,
// shrinks, and says its failure in words, not as a Go struct.
func TestICRCPropertiesShrinkAndSayWhy(t *testing.T) {
	prefix := taptest.Prefix(t, "ic")
	bin := inaemuBinary(t)
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 3, Wired: true})
	require.NoError(t, err)
	code, out, errOut := runCLI("conformance", "--suite", "icrc", "--dut", "tap:"+prefix,
		"--dut-cmd", "exec "+bin+" switch --tap $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS --mode ring", "--count", "2", "--seed", "4", "--out", t.TempDir())
	require.Equal(t, exitFail, code, "%s\n%s", out, errOut)
	line := regexp.MustCompile(`(?m)^  icrc/no-aggregate-from-corruption +FAILS .*\n      (.*)$`).FindStringSubmatch(out)
	require.NotNil(t, line, out)
	require.Regexp(t, `^case 0 \(workers=\d+ .*\) fails: WRONG RESULT: rank \d+ element \d+ is \S+, want \S+; shrunk to workers=2 .*: WRONG RESULT: rank \d+ element \d+ is `, line[1])
	require.NotContains(t, line[1], "{", "no Go struct")
	require.Regexp(t, `(?m)^      replay: inaemu run --scenario \S+icrc-corrupt-\d+\.yaml --dut tap:`+prefix, out)
}
