package conformance

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// Open vSwitch as a device under test: a forwarding switch written by
// nobody here, started for each run by examples/devices/ovs/ovs-dut.sh on
// its userspace datapath (docs/dut-ovs.md).

// ovsScript is the device script's absolute path.
func ovsScript(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "examples", "devices", "ovs", "ovs-dut.sh"))
	require.NoError(t, err)
	return p
}

// needOVS skips (or, under CI, fails) a test that cannot make TAPs or
// finds no Open vSwitch.
func needOVS(t *testing.T) {
	t.Helper()
	testtool.Require(t, "tap", tap.Usable())
	for _, tool := range []string{"ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			if _, err := os.Stat(filepath.Join("/usr/sbin", tool)); err != nil {
				testtool.Require(t, "interop", fmt.Errorf("%s not installed (apt-get install openvswitch-switch)", tool))
			}
		}
	}
}

// ovsLeftovers lists what a stopped script left: entries of its
// temporary directory tmp, and processes whose command line names tmp
// (its daemons' --pidfile and --log-file are under it).
func ovsLeftovers(t *testing.T, tmp string) []string {
	t.Helper()
	var left []string
	ents, err := os.ReadDir(tmp)
	require.NoError(t, err)
	for _, e := range ents {
		left = append(left, filepath.Join(tmp, e.Name()))
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Contains(b, []byte(tmp)) {
			continue
		}
		if st, err := os.ReadFile(filepath.Join(filepath.Dir(p), "stat")); err == nil && bytes.Contains(st, []byte(") Z ")) {
			continue // a zombie holds nothing
		}
		left = append(left, "process "+filepath.Base(filepath.Dir(p))+": "+strings.ReplaceAll(string(bytes.TrimRight(b, "\x00")), "\x00", " "))
	}
	return left
}

// waitGone polls until no process names tmp (a killed daemon takes a
// moment to go) or the budget is spent, and returns what is left.
func waitGone(t *testing.T, tmp string, d time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(testtool.Budget(d))
	for {
		left := ovsLeftovers(t, tmp)
		procs := false
		for _, l := range left {
			procs = procs || strings.HasPrefix(l, "process ")
		}
		if !procs || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// misdelivered counts the RoCE frames the device sent out of a rank's
// port that are addressed to another rank (flooded copies), from the
// wire's capture (interface 4p+3: what the device sent out of port p).
func misdelivered(workers int, recs []pcapio.Record) int {
	n := 0
	var v frames.View
	for _, rec := range recs {
		iface := int(rec.Info.InterfaceIndex)
		port := iface / 4
		if iface%4 != 3 || port >= workers || pcapio.IsGhost(rec.Comments) || v.Parse(rec.Data) != nil {
			continue
		}
		for r := 0; r < workers; r++ {
			if r != port && bytes.Equal(v.DstMAC(), emu.HostMAC(r)) {
				n++
			}
		}
	}
	return n
}

// TestRingThroughOpenVSwitch: ring all-reduce jobs of 2-4 ranks through
// Open vSwitch's userspace datapath, on one bridge and on two joined by a
// patch port, end bit-exact under faults of every kind on the wire, and
// what go-back-N needs of a device holds on the wire's capture (deviceGBN)
// and in the hosts' own view (checkGBN on every connection). As a
// learning switch OVS sends no RoCE frame out of a port whose rank it is
// not addressed to (the start barrier's ARPs taught it every MAC); as a
// hub (--hub: every frame flooded) it sends each to every port, and the
// device judgement still holds: copies addressed to another rank are
// neither forged data nor forged responses nor misdelivered frames
// (deviceEmitted: each also left by its addressee's port). Each stop leaves no daemon,
// temporary file or interface.
func TestRingThroughOpenVSwitch(t *testing.T) {
	needOVS(t)
	prefix := taptest.Prefix(t, "ov")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 4, Wired: true})
	require.NoError(t, err)
	ports := taptest.Interfaces(t, prefix)
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp) // the script's directory: empty again after each stop
	script := ovsScript(t)
	type ovsCase struct {
		name    string
		flags   string
		workers int
		events  []string
	}
	cases := []ovsCase{
		{"one-bridge/2", "", 2, []string{"drop port=0 dir=in class=data nth=5", "drop port=1 dir=out class=ack nth=2"}},
		{"one-bridge/3", "", 3, []string{"corrupt port=1 dir=in class=data nth=40", "dup port=0 dir=out class=data nth=7", "hold=3 port=2 dir=in class=data nth=60"}},
		{"one-bridge/4", "", 4, []string{"delay=80000us port=3 dir=in class=data nth=90", "drop port=0 dir=in class=nak nth=1", "drop port=2 dir=in class=data nth=11"}},
		{"two-bridges/2", "--bridges 2", 2, []string{"corrupt port=0 dir=out class=data nth=30", "drop port=1 dir=in class=ack nth=3"}},
		{"two-bridges/3", "--bridges 2", 3, []string{"drop port=2 dir=in class=data nth=20", "dup port=1 dir=in class=ack nth=4", "hold=2 port=0 dir=out class=data nth=50"}},
		{"two-bridges/4", "--bridges 2", 4, []string{"drop port=3 dir=out class=data nth=9", "corrupt port=2 dir=in class=ack nth=2", "delay=80000us port=0 dir=in class=data nth=70"}},
		{"hub/3", "--hub", 3, []string{"drop port=1 dir=in class=data nth=8", "dup port=2 dir=out class=ack nth=5"}},
		{"hub-two-bridges/4", "--hub --bridges 2", 4, []string{"drop port=0 dir=in class=data nth=12", "corrupt port=3 dir=out class=data nth=25"}},
		{"netdev-two-bridges/3", "--datapath netdev --bridges 2", 3, []string{"drop port=1 dir=in class=data nth=6", "drop port=2 dir=out class=ack nth=3"}},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(c.flags, "netdev") {
				if _, err := os.Stat("/sys/class/net/ovs-netdev"); err == nil {
					t.Skip("SKIP: ovs-netdev exists: another Open vSwitch runs a netdev datapath on this host (one per host)")
				}
			}
			var log bytes.Buffer
			d := dut.Device{Prefix: prefix, Command: "exec " + script + " " + c.flags, Log: &log, StartTimeout: testtool.Budget(30 * time.Second)}
			cfg := emu.DefaultConfig()
			cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MTU, cfg.Timeout, cfg.Seed = emu.Ring, c.workers, 256<<10, 1024, 14, uint64(21+i)
			for _, s := range c.events {
				e, err := faults.Parse(s)
				require.NoError(t, err)
				cfg.Events = append(cfg.Events, e)
			}
			var capture bytes.Buffer
			cfg.Capture = &capture
			var tr hostTrace
			d.Observe = tr.observe
			start := time.Now()
			res, err := dut.Run(cfg, d)
			wall := time.Since(start)
			require.NoError(t, err, "the device's output:\n%s", log.String())
			require.Contains(t, log.String(), "ready: Open vSwitch")
			require.True(t, res.Exact, "%v", c.events)
			require.NotZero(t, res.Faults.Injected(), "%v", c.events)
			recs, err := readRecords(&capture)
			require.NoError(t, err)
			require.Empty(t, deviceGBN(c.workers, recs), "%v", c.events)
			require.Empty(t, deviceEmitted(c.workers, recs), "%v: flooding is no misdelivery", c.events)
			for r := range c.workers {
				ev, first, ok := tr.connection(r, c.workers)
				require.True(t, ok)
				require.Empty(t, checkGBN(ev, first), "%v: connection %d", c.events, r)
			}
			copies := misdelivered(c.workers, recs)
			if strings.Contains(c.flags, "--hub") {
				require.NotZero(t, copies, "a hub floods every frame to every port")
			} else {
				require.Zero(t, copies, "a learning switch that knows every MAC floods no RoCE frame")
			}
			require.Empty(t, waitGone(t, tmp, 5*time.Second), "what the stopped script left")
			require.ElementsMatch(t, ports, taptest.Interfaces(t, prefix), "the device ports and nothing else")
			t.Logf("%v: %d host frames, %d retransmissions, %d NAKs, %d timeouts, %d flooded copies; %v from barrier to result, %v with the device's start and stop",
				c.events, res.FramesSent, res.Retransmissions, res.NAKs, res.Timeouts, copies, time.Duration(res.VirtualNS).Round(time.Microsecond), wall.Round(time.Millisecond))
		})
	}
}

// TestOVSScriptKilled: when the script's shell is killed (SIGKILL, as
// inaemu's parent-death signal does when inaemu dies), its daemons die
// with it (their own parent-death signal), and the next start removes the
// temporary directory the killed one could not, and gives the TAPs back
// the MTU the killed one's --mtu changed.
func TestOVSScriptKilled(t *testing.T) {
	needOVS(t)
	prefix := taptest.Prefix(t, "ok")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 2, Wired: true})
	require.NoError(t, err)
	tmp := t.TempDir()
	mtu := func() string {
		b, err := os.ReadFile("/sys/class/net/" + prefix + "-sw1/mtu")
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	require.Equal(t, fmt.Sprint(tap.DefaultMTU), mtu())
	start := func(args ...string) (*exec.Cmd, *bufio.Scanner) {
		cmd := taptest.Command(ovsScript(t), append([]string{"--bridges", "2"}, args...)...)
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "INAEMU_DUT_PREFIX="+prefix, "INAEMU_DUT_WORKERS=2")
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready: ") {
				return cmd, sc
			}
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatal("the script exited before it was ready")
		return nil, nil
	}
	cmd, _ := start("--mtu", "1500")
	require.Equal(t, "1500", mtu(), "mtu_request sets the TAP's own MTU")
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	_ = cmd.Wait()
	left := waitGone(t, tmp, 5*time.Second)
	require.Len(t, left, 1, "only the killed script's directory: %v", left)
	require.Contains(t, left[0], "inaemu-ovs.")
	require.Equal(t, "1500", mtu(), "no cleanup ran")
	// The next start sweeps it and restores the MTU; a clean stop
	// (SIGTERM) leaves nothing.
	cmd, _ = start()
	_, err = os.Stat(left[0])
	require.ErrorIs(t, err, os.ErrNotExist, "the killed run's directory, swept by the next start")
	require.Equal(t, fmt.Sprint(tap.DefaultMTU), mtu(), "the killed run's --mtu undone by the next start")
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, cmd.Wait(), "a stopped script exits 0")
	require.Empty(t, waitGone(t, tmp, 5*time.Second))
}

// TestOVSScriptBadFlags: a bad flag or value is refused before anything
// is looked at (no Open vSwitch needed): one line on stderr, exit 2.
func TestOVSScriptBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mtu", "0"}, "--mtu 0: want a whole number of bytes, 68..65521"},
		{[]string{"--mtu", "67"}, "--mtu 67: want 68..65521 (a TAP's range)"},
		{[]string{"--mtu", "65522"}, "--mtu 65522: want 68..65521"},
		{[]string{"--mtu", "99999999999999999999"}, "--mtu 99999999999999999999: want 68..65521"},
		{[]string{"--mtu", "1e3"}, "--mtu 1e3: want a whole number"},
		{[]string{"--mtu"}, "--mtu needs a value (usage: ovs-dut.sh ["},
		{[]string{"--bogus"}, "unknown argument --bogus (usage: ovs-dut.sh ["},
		{[]string{"--bridges", "3"}, "--bridges 3: want 1 or 2"},
		{[]string{"--datapath", "x"}, "--datapath x: want dummy or netdev"},
		{[]string{"--mac-aging", "-1"}, "--mac-aging -1: want seconds"},
	} {
		cmd := exec.Command("sh", append([]string{ovsScript(t)}, c.args...)...)
		cmd.Env = []string{"PATH=/usr/bin:/bin"} // no INAEMU_DUT_*: flags first
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "%v: %v", c.args, err)
		require.Equal(t, 2, ee.ExitCode(), "%v: %s", c.args, stderr.String())
		require.Equal(t, 1, strings.Count(stderr.String(), "\n"), "%v: one line: %q", c.args, stderr.String())
		require.Contains(t, stderr.String(), "ovs-dut.sh: "+c.want, c.args)
	}
}

// TestOVSDocsExample: the commands of docs/dut-ovs.md's first block, from
// `inaemu tap up --wired` to `inaemu tap down`, run as written (in
// network, mount and PID namespaces of their own, so its prefix ovs is
// nobody else's): every run ends exact, every capture conforms, and the
// gbn suite with --dut-mode ring holds.
func TestOVSDocsExample(t *testing.T) {
	needOVS(t)
	page, err := os.ReadFile(filepath.Join("..", "docs", "dut-ovs.md"))
	require.NoError(t, err)
	_, rest, ok := strings.Cut(string(page), "```text\n")
	require.True(t, ok, "docs/dut-ovs.md has a text block")
	block, _, ok := strings.Cut(rest, "```")
	require.True(t, ok)
	require.True(t, strings.HasPrefix(block, "inaemu tap up --wired "), "the page's first block starts with the TAPs:\n%s", block)
	require.Contains(t, block, "inaemu tap down")
	bin := testtool.Build(t, "github.com/inaemu/inaemu/cmd/inaemu", "inaemu")
	repo, err := filepath.Abs("..")
	require.NoError(t, err)
	work := t.TempDir() // laid out as a clone's root is for the commands
	require.NoError(t, os.Symlink(filepath.Join(repo, "examples"), filepath.Join(work, "examples")))
	cmd, err := taptest.Isolated("bash", "-e", "-c", block)
	testtool.Require(t, "the docs/dut-ovs.md example", err)
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"), "TMPDIR="+t.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	runs := strings.Count(block, "inaemu run ")
	require.Equal(t, 2, runs)
	require.Equal(t, runs, strings.Count(string(out), "result    EXACT"), "%s", out)
	require.Equal(t, runs, strings.Count(string(out), "result       conforms"), "%s", out)
	require.Equal(t, 1, strings.Count(block, "inaemu conformance "))
	require.Contains(t, block, "--dut-mode ring")
	require.Contains(t, string(out), "1 of 1 properties hold", "%s", out)
	require.Regexp(t, `gbn +holds \(20 cases`, string(out))
	t.Logf("docs/dut-ovs.md's commands: %v", time.Since(start).Round(time.Millisecond))
}

// TestOVSPortMTUTooSmall: with Open vSwitch's usual port MTU of 1500
// (--mtu 1500: mtu_request, which sets the TAPs' own MTU), a job of
// 4096-byte packets cannot cross the wire: its writes of 4170-byte frames
// to the device port fail. The run says so (a wire error, not the job's
// failure, and no evidence against the device: the device never saw the
// frames), and the script gives the TAPs their MTU back when it stops.
func TestOVSPortMTUTooSmall(t *testing.T) {
	needOVS(t)
	prefix := taptest.Prefix(t, "om")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 2, Wired: true})
	require.NoError(t, err)
	t.Setenv("TMPDIR", t.TempDir())
	mtu := func() string {
		b, err := os.ReadFile("/sys/class/net/" + prefix + "-sw0/mtu")
		require.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	before := mtu()
	require.Equal(t, fmt.Sprint(tap.DefaultMTU), before)
	var log bytes.Buffer
	d := dut.Device{Prefix: prefix, Command: "exec " + ovsScript(t) + " --mtu 1500", Log: &log, StartTimeout: testtool.Budget(30 * time.Second)}
	cfg := emu.DefaultConfig()
	cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MTU, cfg.Timeout, cfg.Seed = emu.Ring, 2, 64<<10, 4096, 14, 2
	var capture bytes.Buffer
	cfg.Capture = &capture
	_, err = dut.Run(cfg, d)
	require.Error(t, err, "the device's output:\n%s", log.String())
	require.Contains(t, err.Error(), "wire: ")
	require.Contains(t, err.Error(), "message too long")
	var je *emu.JobError
	require.False(t, errors.As(err, &je), "not the job's failure: %v", err)
	recs, rerr := readRecords(&capture)
	require.NoError(t, rerr)
	ev, _ := deviceEvidence(2, recs, err)
	require.Empty(t, ev, "no evidence against a device that never saw the frames")
	require.Equal(t, before, mtu(), "the TAP's MTU, restored when the script stopped")
}

// TestSuitesThroughOpenVSwitch: what `inaemu conformance --dut-mode ring
// --dut-cmd 'exec examples/devices/ovs/ovs-dut.sh'` runs. With DUT.Mode
// ring, Open vSwitch on one bridge and on two joined by a patch port
// passes the device properties at six cases each: every ring job ends
// exact under its faults (aggregation), go-back-N holds on every ring
// connection (gbn, each case with at least one fault), and every frame
// OVS sends verifies and no corrupted gradient reaches a result (icrc).
// Every run the cases start is a ring job (the device log's markers).
// Said to aggregate (the default netreduce), the same switch fails the
// gbn suite by agg-sum at once: it forwarded a rank's gradient as its
// result.
func TestSuitesThroughOpenVSwitch(t *testing.T) {
	needOVS(t)
	prefix := taptest.Prefix(t, "os")
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: 4, Wired: true})
	require.NoError(t, err)
	ports := taptest.Interfaces(t, prefix)
	out := t.TempDir() // the counterexamples, outside the script's TMPDIR
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	device := func(flags string, log *bytes.Buffer) dut.Device {
		return dut.Device{Prefix: prefix, Command: "exec " + ovsScript(t) + flags, Log: log, StartTimeout: testtool.Budget(30 * time.Second)}
	}
	for _, c := range []struct{ name, flags string }{{"one-bridge", ""}, {"two-bridges", " --bridges 2"}} {
		t.Run(c.name, func(t *testing.T) {
			var log bytes.Buffer
			d := device(c.flags, &log)
			cal, err := dut.Calibrate(d, emu.Ring, 4)
			require.NoError(t, err, "the device's output:\n%s", log.String())
			t.Log(cal)
			o := SuiteOptions{Count: 6, Seed: 38, OutDir: filepath.Join(out, c.name), DUT: &DUT{Device: d, Ports: 4, Replay: "--dut tap:" + prefix, Calibration: cal, Mode: emu.Ring}}
			start := time.Now()
			var ran []string
			for _, suite := range []func(SuiteOptions) []PropertyResult{AggregationSuite, GBNSuite, ICRCSuite} {
				for _, r := range suite(o) {
					require.True(t, r.Passed, "%s: %s\nthe device's last output:\n%s", r.Name, r.Failure, tail(log.String(), 20))
					if r.Skipped != "" {
						continue
					}
					require.Equal(t, o.Count, r.Cases, r.Name)
					ran = append(ran, r.Name)
					t.Logf("%s: %d cases in %v, %d inconclusive %v", r.Name, r.Cases, r.Wall.Round(time.Millisecond), r.Inconclusive, r.Notes)
				}
			}
			require.Equal(t, []string{"aggregation/release=safe", "gbn", "icrc/emitted-frames-verify", "icrc/no-aggregate-from-corruption"}, ran)
			starts := regexp.MustCompile(`(?m)^--- inaemu: starting the device for (\S+) case .*INAEMU_DUT_FLAGS=(.*)$`).FindAllStringSubmatch(log.String(), -1)
			require.GreaterOrEqual(t, len(starts), 4*o.Count, "a run per case at least")
			for _, m := range starts {
				require.Contains(t, m[2], "--mode ring ", m[0])
			}
			// The gbn cases' faults (each has one at least), drawn as the
			// suite draws them.
			faults := 0
			for i := range o.Count {
				gc := gbnDeviceCase(o, caseSeed(o.Seed, "gbn", i))
				require.True(t, gc.Ring)
				require.NotEmpty(t, gc.Events, gc.String())
				faults += len(gc.Events)
			}
			require.Contains(t, log.String(), "ready: Open vSwitch")
			require.Empty(t, waitGone(t, tmp, 5*time.Second), "what the stopped script left")
			require.ElementsMatch(t, ports, taptest.Interfaces(t, prefix), "the device ports and nothing else")
			t.Logf("%d runs of ring jobs through OVS (%d faults in the gbn cases) in %v", len(starts), faults, time.Since(start).Round(time.Millisecond))
		})
	}
	t.Run("said-to-aggregate", func(t *testing.T) {
		var log bytes.Buffer
		d := device("", &log)
		o := SuiteOptions{Count: 6, Seed: 38, OutDir: filepath.Join(out, "netreduce"), DUT: &DUT{Device: d, Ports: 4, Replay: "--dut tap:" + prefix}}
		start := time.Now()
		res := GBNSuite(o)[0]
		require.False(t, res.Passed, "a switch that forwards passed %d NetReduce cases", res.Cases)
		require.Equal(t, 1, res.Cases, "the first case fails")
		_, shrunk, ok := strings.Cut(res.Failure, "shrunk to")
		require.True(t, ok, res.Failure)
		require.Contains(t, shrunk, "agg-sum: the device sent")
		require.Contains(t, shrunk, "result is not the rank-order")
		require.NotContains(t, shrunk, "mode=ring")
		require.Empty(t, waitGone(t, tmp, 5*time.Second), "what the stopped script left")
		t.Logf("said to aggregate: failed in %v: %s", time.Since(start).Round(time.Millisecond), res.Failure)
	})
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
