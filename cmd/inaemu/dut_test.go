package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// TestDUTAndWireBadInput: nonsense --dut, --pair and fault flags are one
// line and exit 2, before anything touches an interface.
func TestDUTAndWireBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--dut", "ina"}, `--dut "ina": want tap:PREFIX`},
		{[]string{"run", "--dut", "veth:ina"}, `want tap:PREFIX`},
		{[]string{"run", "--dut", "tap:a/b"}, `plain interface-name prefix`},
		{[]string{"run", "--dut-cmd", "true"}, `--dut-cmd: only with --dut tap:PREFIX`},
		{[]string{"run", "--dut", "tap:ina", "--dut-ready", "("}, `--dut-ready "("`},
		{[]string{"run", "--dut-log", "x.log"}, `--dut-log: only with --dut tap:PREFIX`},
		{[]string{"run", "--dut", "tap:ina", "--dut-log", "x.log"}, `--dut-log: only with --dut-cmd`},
		{[]string{"run", "--dut", "tap:ina", "--backend", "tap"}, `no --backend, no --prefix`},
		{[]string{"run", "--dut", "tap:ina", "--topology", "star:hosts=4"}, `--topology: a device under test runs on the star`},
		{[]string{"conformance", "--dut", "tap:ina", "-j", "2"}, `-j 2: a device under test takes one run at a time`},
		{[]string{"conformance", "--dut", "nonsense"}, `want tap:PREFIX`},
		{[]string{"conformance", "--dut", "tap:ina", "--dut-mode", "forward"}, `--dut-mode "forward": want netreduce (the device aggregates) or ring (it only forwards)`},
		{[]string{"conformance", "--dut-mode", "ring"}, `--dut-mode: only with --dut tap:PREFIX`},
		{[]string{"wire"}, `--workers: say how many ranks to join`},
		{[]string{"wire", "--pair", "a"}, `--pair "a": want HOSTIF=DEVIF`},
		{[]string{"wire", "--pair", "a=a"}, `two different interfaces`},
		{[]string{"wire", "--pair", "a=b", "--workers", "2"}, `give it or --prefix/--workers, not both`},
		{[]string{"wire", "--workers", "0"}, `--workers 0: want 1..250`},
		{[]string{"wire", "--workers", "2", "--duration", "-1s"}, `--duration -1s`},
		{[]string{"wire", "--workers", "2", "--fault", "drop nth=x"}, `bad token "nth=x"`},
	} {
		code, _, errOut := runGuarded(c.args...)
		oneLine(t, code, errOut, "inaemu "+c.args[0], c.want)
	}
}

// TestWireBetweenProcesses needs root: inaemu switch, three inaemu hosts
// and inaemu wire, each in its own process, the wire dropping one
// gradient frame and corrupting one result; every host ends exact, the
// wire reports both faults, and its capture conforms.
func TestWireBetweenProcesses(t *testing.T) {
	prefix := taptest.Prefix(t, "wp")
	bin := inaemuBinary(t)
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 3, Wired: true})
	require.NoError(t, err)
	pcap := filepath.Join(t.TempDir(), "wire.pcapng")
	job := []string{"--workers", "3", "--tensor", "256KiB", "--seed", "5", "--max-time", fmt.Sprintf("%ds", int(testtool.Budget(time.Minute).Seconds()))}
	sw := taptest.Command(bin, append([]string{"switch", "--tap", prefix}, job...)...)
	require.NoError(t, sw.Start())
	wire := taptest.Command(bin, "wire", "--prefix", prefix, "--workers", "3", "--seed", "4", "--json", "--pcap", pcap,
		"--fault", "drop port=1 dir=in class=data nth=3", "--fault", "corrupt port=0 dir=out class=data nth=7")
	var wireOut strings.Builder
	wire.Stdout = &wireOut
	require.NoError(t, wire.Start())
	var hosts []*exec.Cmd
	for r := range 3 {
		h := taptest.Command(bin, append([]string{"host", "--tap", prefix + "-h" + string(rune('0'+r)), "--rank", string(rune('0' + r))}, job...)...)
		require.NoError(t, h.Start())
		hosts = append(hosts, h)
	}
	for r, h := range hosts {
		require.NoError(t, h.Wait(), "host %d", r)
	}
	for _, p := range []*exec.Cmd{wire, sw} {
		require.NoError(t, p.Process.Signal(os.Interrupt))
		require.NoError(t, p.Wait())
	}
	require.Contains(t, wireOut.String(), `"dropped":1`)
	require.Contains(t, wireOut.String(), `"corrupted":1`)
	out, err := exec.Command(bin, "check", "--in-flight", "1s", pcap).CombinedOutput() // wall-clock capture (README)
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "result       conforms")
	require.Contains(t, string(out), "results equal the rank-order sum")
}

// TestDUTOutputStaysInItsLog needs root: what the device command prints
// goes to the log file the report names (text and JSON), never into the
// report; a failed run shows the log's last 20 lines, and only then.
func TestDUTOutputStaysInItsLog(t *testing.T) {
	prefix := taptest.Prefix(t, "dl")
	bin := inaemuBinary(t)
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 3, Wired: true})
	require.NoError(t, err)
	noisy := func(n int, sw string) string {
		return fmt.Sprintf(`for i in $(seq 1 %d); do echo "noise $i"; echo "noise on stderr $i" >&2; done; exec %s switch --tap $INAEMU_DUT_PREFIX %s`, n, bin, sw)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "device.log")

	code, out, errOut := runCLI("run", "--dut", "tap:"+prefix, "--dut-cmd", noisy(75, "$INAEMU_DUT_FLAGS"), "--dut-log", log,
		"--workers", "3", "--tensor", "16KiB", "--seed", "2")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "  device log  "+log+" (")
	for _, s := range []string{out, errOut} {
		require.NotContains(t, s, "noise")
		require.NotContains(t, s, "ready on")
	}
	b, err := os.ReadFile(log)
	require.NoError(t, err)
	require.Contains(t, string(b), "noise 75\n")
	require.Contains(t, string(b), "noise on stderr 75\n")
	require.Contains(t, string(b), "inaemu switch: ready on "+prefix+"-sw0.."+prefix+"-sw2")

	code, out, errOut = runCLI("run", "--dut", "tap:"+prefix, "--dut-cmd", noisy(75, "$INAEMU_DUT_FLAGS"), "--dut-log", log,
		"--workers", "3", "--tensor", "16KiB", "--seed", "2", "--json")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	require.Contains(t, out, `"device_log":"`+log+`"`)
	require.NotContains(t, out+errOut, "noise")

	// A device that only forwards (a ring switch for a NetReduce job): each
	// rank's gradient comes back as its "result", a wrong one. The failure
	// shows the output's last 20 lines, no more.
	code, out, errOut = runCLI("run", "--dut", "tap:"+prefix, "--dut-cmd", noisy(75, "$INAEMU_DUT_FLAGS --mode ring"), "--dut-log", log,
		"--workers", "3", "--tensor", "16KiB", "--seed", "2")
	require.Equal(t, exitFail, code, "%s\n%s", out, errOut)
	require.Contains(t, errOut, "RESULT DIFFERS")
	require.NotContains(t, out, "noise")
	require.Contains(t, errOut, "inaemu run: the device's last 20 lines of ")
	require.Contains(t, errOut, "(all in "+log+")")
	require.Equal(t, 20, strings.Count(errOut, "\n  | "), errOut)
	require.NotContains(t, errOut, "noise 1\n", "only the last lines")

	code, out, errOut = runCLI("conformance", "--suite", "icrc", "--dut", "tap:"+prefix, "--dut-cmd", noisy(5, "$INAEMU_DUT_FLAGS"),
		"--dut-log", log, "--count", "1", "--seed", "3")
	require.Equal(t, exitOK, code, "%s\n%s", out, errOut)
	require.Contains(t, out, "  device log: "+log+"\n")
	require.NotContains(t, out+errOut, "noise")
	b, err = os.ReadFile(log)
	require.NoError(t, err)
	// Each case's runs are introduced by a marker naming the property, the
	// case and its seed; the calibration's run by its own.
	require.Contains(t, string(b), "--- inaemu: starting the device for the calibration: INAEMU_DUT_PREFIX="+prefix)
	require.Regexp(t, `--- inaemu: starting the device for icrc/emitted-frames-verify case 0 \(seed \d+\), run 1: INAEMU_DUT_PREFIX=`+prefix, string(b))
	require.Regexp(t, `\n  calibration: \d+ host frames/s, first round trip `, out)
}

// TestDocsDeviceExampleTenTimes needs root: the device example of
// docs/dut.md, inaemu's own switch as the device under test, passes as
// written ten times in a row (on its own prefix: `tap:dut` would be every
// run's on a shared machine). On a busy machine it failed here before the
// wall-clock hosts' ACK timer adapted to the round trips (roce/rto.go):
// gbn's cases of 170-packet messages timed out with nothing lost until the
// retries ran out (RETRY_EXC_ERR).
func TestDocsDeviceExampleTenTimes(t *testing.T) {
	prefix := taptest.Prefix(t, "dx")
	bin := inaemuBinary(t)
	page, err := os.ReadFile(filepath.Join("..", "..", "docs", "dut.md"))
	require.NoError(t, err)
	var example string
	for _, line := range strings.Split(string(page), "\n") {
		if strings.HasPrefix(line, "inaemu conformance --dut tap:dut ") {
			example = line
			break
		}
	}
	require.NotEmpty(t, example, "docs/dut.md's conformance --dut example")
	require.Contains(t, example, "--count 4 --seed 1")
	_, err = tap.Up(tap.Topology{Prefix: prefix, Workers: 4, Wired: true}) // the page's 'inaemu tap up --wired --prefix dut --workers 4'
	require.NoError(t, err)
	script := strings.Replace(example, "tap:dut ", "tap:"+prefix+" ", 1) + " --dut-log " + filepath.Join(t.TempDir(), "device.log")
	for i := range 10 {
		start := time.Now()
		cmd := taptest.Command("bash", "-c", script)
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "run %d of 10: %s\n%s", i+1, script, out)
		require.Contains(t, string(out), "4 of 4 properties hold, 8 skipped", "run %d", i+1)
		require.NotContains(t, string(out), "inaemu switch:", "run %d: the device's output is in its log", i+1)
		t.Logf("run %d of 10: %v", i+1, time.Since(start).Round(time.Millisecond))
	}
}
