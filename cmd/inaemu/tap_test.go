package main

// Integration tests on real TAP interfaces and Linux bridges. They need
// root (CAP_NET_ADMIN and /dev/net/tun): elsewhere they skip with a loud
// reason, under CI (which runs as root) they must run. Every interface a
// test makes is removed in its Cleanup, pass or fail.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
)

// needTAPs skips (or, under CI, fails) a test that needs TAP privileges.
func needTAPs(t *testing.T) {
	t.Helper()
	testtool.Require(t, "tap", tap.Usable())
}

// topology makes the TAPs and bridges of a test under a prefix of its
// own, unique to this run (taptest.Prefix, tagged tag), and removes them
// when the test ends, whatever happens (a killed run's are swept by the
// next).
func topology(t *testing.T, tag string, workers int) tap.Topology {
	t.Helper()
	topo := tap.Topology{Prefix: taptest.Prefix(t, tag), Workers: workers}
	_, err := tap.Up(topo)
	require.NoError(t, err)
	return topo
}

func requireNoInterfaces(t *testing.T, prefix string) {
	t.Helper()
	links, err := netlink.LinkList()
	require.NoError(t, err)
	for _, l := range links {
		require.False(t, strings.HasPrefix(l.Attrs().Name, prefix+"-"), "interface %s left behind", l.Attrs().Name)
	}
}

// inaemuBinary builds the command once for the tests that run it as
// separate processes.
func inaemuBinary(t *testing.T) string { return testtool.Build(t, ".", "inaemu") }

// process is a background command whose stderr is watched for a line.
type process struct {
	cmd    *exec.Cmd
	stdout strings.Builder
	lines  chan string
	done   chan error
}

// start runs a command in the background and waits (up to a minute) for a
// stderr line containing ready; it is killed when the test ends.
func start(t *testing.T, ready string, name string, args ...string) *process {
	t.Helper()
	p := &process{cmd: taptest.Command(name, args...), lines: make(chan string, 100), done: make(chan error, 1)}
	p.cmd.Stdout = &p.stdout
	errPipe, err := p.cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, p.cmd.Start())
	t.Cleanup(func() {
		if p.cmd.ProcessState == nil {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	go func() {
		sc := bufio.NewScanner(errPipe)
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		close(p.lines)
		p.done <- p.cmd.Wait()
	}()
	deadline := time.After(testtool.Budget(time.Minute))
	var seen []string
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("%s exited before %q; stderr: %q", name, ready, seen)
			}
			seen = append(seen, l)
			if strings.Contains(l, ready) {
				return p
			}
		case <-deadline:
			t.Fatalf("%s: no %q within a minute; stderr: %q", name, ready, seen)
		}
	}
}

// waitCapturing returns once the capture file shows a frame on every
// bridge of the topology. tshark says "Capturing on" before dumpcap's
// socket on each interface is live (a late one missed the first half of a
// job), so a probe frame (broadcast, local experimental EtherType 0x88B5)
// is written into each host's TAP every 100 ms until the file holds one
// from each bridge. (A frame sent out of the bridge itself would be
// dropped unseen: a bridge none of whose ports has carrier has no queue.)
// This waits on a real process; it asserts nothing about time.
func waitCapturing(t *testing.T, pcap string, topo tap.Topology) {
	t.Helper()
	probe := append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02, 0, 0, 0, 0, 0xfe, 0x88, 0xb5}, []byte("inaemu capture probe")...)
	probe = append(probe, make([]byte, 60-len(probe))...)
	bridges := topo.Bridges()
	hosts := make([]tap.Device, len(bridges))
	for r := range hosts {
		d, err := tap.Open(topo.Host(r))
		require.NoError(t, err)
		defer d.Close() // before the host process opens it
		hosts[r] = d
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(testtool.Budget(30 * time.Second)); ; <-tick.C {
		require.True(t, time.Now().Before(deadline), "the capture of %v shows no probe on every bridge within 30 s", bridges)
		seen := map[string]bool{}
		if r, err := pcapio.Open(pcap); err == nil {
			for {
				rec, err := r.Next()
				if err != nil {
					break // the end, or a block dumpcap is still writing
				}
				if bytes.Equal(rec.Data, probe) {
					if names := r.Interfaces(); rec.Info.InterfaceIndex < len(names) {
						seen[names[rec.Info.InterfaceIndex]] = true
					}
				}
			}
			r.Close()
		}
		all := true
		for r, name := range bridges {
			if !seen[name] {
				all = false
				require.NoError(t, hosts[r].WriteFrame(probe))
			}
		}
		if all {
			return
		}
	}
}

// stop signals the process and waits for it to exit.
func (p *process) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	require.NoError(t, p.cmd.Process.Signal(sig))
	select {
	case <-p.done:
	case <-time.After(testtool.Budget(time.Minute)):
		t.Fatalf("%v: still running %v after %v", p.cmd.Args, testtool.Budget(time.Minute), sig)
	}
}

// scapyINASender is an independent sender and receiver: scapy builds
// RoCEv2 RDMA WRITE FIRST / WRITE LAST WITH IMMEDIATE frames with the INA
// header for every rank of a ring (int32 gradients from a seed), sends
// each out of the switch's TAP port for that rank, and collects what the
// switch sends back out of its ports. It checks each result against its
// own wrapping int32 sum and its own ICRC computation, and prints one JSON
// object.
const scapyINASender = `
import json, random, select, socket, struct, sys
from scapy.layers.l2 import Ether
from scapy.layers.inet import IP, UDP
from scapy.packet import Raw
from scapy.contrib.roce import BTH

prefix, H, seed, MSGS = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
MTU, MSGLEN, RECV_QPN = 256, 2, 0x12
WRITE_FIRST, WRITE_LAST_IMM = 6, 9
mac = lambda r: "02:1a:e0:00:%02x:%02x" % (r >> 8, (r + 1) & 0xff)
ip = lambda r: "10.0.0.%d" % (r + 1)
rng = random.Random(seed)
psn0 = [rng.randrange(1 << 24) for _ in range(H)]

def ints(n):
    return [rng.randrange(-2**31, 2**31) for _ in range(n)]

ports = []
for r in range(H):
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(3))  # ETH_P_ALL
    s.bind(("%s-sw%d" % (prefix, r), 0))
    ports.append(s)

grads = {}   # (rank, msg, pkt) -> list of int32
sent = {}    # (src ip, dst ip, psn) -> (rank, msg, pkt)
for m in range(MSGS):
    for r in range(H):
        succ = (r + 1) % H
        first = ints((MTU - 16 - 8) // 4)
        last = ints(MTU // 4)
        grads[(r, m, 0)], grads[(r, m, 1)] = first, last
        reth = struct.pack("!QII", 0x7f0000000000 + m * MSGLEN * MTU, 0x1000 + succ, 2 * MTU - 16)
        ina = struct.pack("!IBBBB", 0x494E4131, 0, m, MSGLEN, r)
        for k, (op, pay) in enumerate([(WRITE_FIRST, reth + ina + struct.pack("<%di" % len(first), *first)),
                                       (WRITE_LAST_IMM, struct.pack("!I", m) + struct.pack("<%di" % len(last), *last))]):
            psn = (psn0[r] + m * MSGLEN + k) & 0xFFFFFF
            f = (Ether(src=mac(r), dst=mac(succ)) / IP(src=ip(r), dst=ip(succ), flags="DF", ttl=64) /
                 UDP(sport=0xC000 + r, dport=4791, chksum=0) /
                 BTH(opcode=op, dqpn=RECV_QPN, psn=psn, ackreq=int(k == 1)) / Raw(pay))
            sent[(ip(r), ip(succ), psn)] = (r, m, k)
            ports[r].send(bytes(f))

want = H * MSGS * MSGLEN
out = {"sent": len(sent), "results": 0, "sum_ok": 0, "icrc_ok": 0, "frames": [], "problems": []}
while out["results"] < want:
    ready, _, _ = select.select(ports, [], [], 20)
    if not ready:
        out["problems"].append("timed out waiting for results")
        break
    for s in ready:
        data, addr = s.recvfrom(65535)
        if addr[2] == socket.PACKET_OUTGOING:
            continue  # our own frames going into the switch
        p = Ether(data)
        if BTH not in p:
            continue
        b = p[BTH]
        key = (p[IP].src, p[IP].dst, b.psn)
        if key not in sent:
            out["problems"].append("unknown frame %s" % (key,))
            continue
        r, m, k = sent[key]
        out["results"] += 1
        out["frames"].append({"port": ports.index(s), "hex": data.hex()})
        if struct.pack("!I", b.icrc) == b.compute_icrc(None):
            out["icrc_ok"] += 1
        pay = bytes(b.payload)
        body = pay[16 + 8:] if k == 0 else pay[4:]
        total = [sum(col) for col in zip(*[grads[(q, m, k)] for q in range(H)])]
        total = [((x + 2**31) % 2**32) - 2**31 for x in total]
        if body == struct.pack("<%di" % len(total), *total) and (k != 0 or pay[16:24] == struct.pack("!IBBBB", 0x494E4131, 0, m, MSGLEN, r)):
            out["sum_ok"] += 1
        else:
            out["problems"].append("wrong sum in rank %d message %d packet %d" % (r, m, k))
print(json.dumps(out))
`

func TestSwitchOnTAPsAggregatesScapyFrames(t *testing.T) {
	needTAPs(t)
	testtool.Need(t, "scapy", testtool.HaveScapy)
	const workers, msgs = 3, 3
	prefix := topology(t, "sc", workers).Prefix
	sw := start(t, "ready", inaemuBinary(t), "switch", "--tap", prefix, "--workers", fmt.Sprint(workers),
		"--msg-len", "2", "--mtu", "256", "--dtype", "i32", "--window", "2", "--json")
	out, errOut, err := testtool.Run(t, testtool.SystemPython, "-c", scapyINASender, prefix, fmt.Sprint(workers), "7", fmt.Sprint(msgs))
	require.NoError(t, err, errOut)
	var got struct {
		Sent, Results int
		SumOK         int `json:"sum_ok"`
		ICRCOK        int `json:"icrc_ok"`
		Frames        []struct {
			Port int
			Hex  string
		}
		Problems []string
	}
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	want := workers * msgs * 2
	require.Empty(t, got.Problems)
	require.Equal(t, want, got.Sent)
	require.Equal(t, want, got.Results, "one result per packet of every rank")
	require.Equal(t, want, got.SumOK, "every result is scapy's own int32 sum of the ranks' gradients")
	require.Equal(t, want, got.ICRCOK, "scapy accepts every result's ICRC")
	// Our own view of the same frames: a result leaves the port of the
	// connection's receiver, with a good ICRC.
	for _, f := range got.Frames {
		b := make([]byte, len(f.Hex)/2)
		_, err := fmt.Sscanf(f.Hex, "%x", &b)
		require.NoError(t, err)
		var v frames.View
		require.NoError(t, v.Parse(b))
		require.True(t, v.ICRCOK())
		require.Equal(t, []byte(emu.HostMAC(f.Port)), b[0:6], "a result for rank %d left port %d", int(b[5])-1, f.Port)
	}
	sw.stop(t, syscall.SIGTERM)
	var rep struct {
		Switch switching.Report `json:"switch"`
	}
	require.NoError(t, json.Unmarshal([]byte(sw.stdout.String()), &rep), sw.stdout.String())
	require.EqualValues(t, want, netreduce.StatsOf(rep.Switch).Packets)
	require.EqualValues(t, msgs*2, netreduce.StatsOf(rep.Switch).Aggregations)
	require.EqualValues(t, want, netreduce.StatsOf(rep.Switch).ResultPackets)
}

// TestMultiProcessJobOverTAPs runs a NetReduce job as separate processes,
// one switch and one per host, over TAPs and bridges while tshark captures
// every bridge; every host must end exact and the capture pass check with
// every result's sum verified.
func TestMultiProcessJobOverTAPs(t *testing.T) {
	needTAPs(t)
	testtool.Need(t, "tshark", testtool.HaveTshark)
	const workers = 3
	topo := topology(t, "mp", workers)
	bin := inaemuBinary(t)
	// tshark says "Capturing on" before every interface is open, so the
	// job starts only once a probe frame shows up from every bridge
	// (waitCapturing). Should dumpcap still miss frames of a job this
	// short (a few ms), a capture is taken as incomplete, and the job run
	// again (at most 3 times), only when every host ended exact with no
	// retransmission: then every frame crossed the bridges in order, and
	// what the capture lacks it lost.
	for attempt := 1; ; attempt++ {
		if multiProcessJobOverTAPs(t, topo, bin, attempt < 3) {
			return
		}
		t.Logf("attempt %d: the capture missed frames of a job that lost none; running it again", attempt)
	}
}

// multiProcessJobOverTAPs runs the job once; it returns false, asserting
// nothing more, when retry is set and the capture is incomplete although
// no host retransmitted anything.
func multiProcessJobOverTAPs(t *testing.T, topo tap.Topology, bin string, retry bool) bool {
	prefix, workers := topo.Prefix, topo.Workers
	pcap := filepath.Join(t.TempDir(), "bridges.pcapng")
	if d := os.Getenv("INAEMU_KEEP"); d != "" {
		pcap = filepath.Join(d, "bridges.pcapng")
	}
	capArgs := []string{"-q", "-w", pcap}
	for _, b := range topo.Bridges() {
		capArgs = append(capArgs, "-i", b)
	}
	shark := start(t, "Capturing on", "tshark", capArgs...)
	waitCapturing(t, pcap, topo)
	job := []string{"--workers", fmt.Sprint(workers), "--tensor", "256KiB", "--msg-len", "16", "--seed", "11"}
	sw := start(t, "ready", bin, append([]string{"switch", "--tap", prefix, "--json"}, job...)...)

	type hostOut struct {
		code int
		out  string
		err  string
	}
	res := make([]hostOut, workers)
	var wg sync.WaitGroup
	for r := 0; r < workers; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := taptest.Tie(exec.CommandContext(ctx, bin, append([]string{"host", "--tap", topo.Host(r), "--rank", fmt.Sprint(r), "--json"}, job...)...))
			var o, e strings.Builder
			cmd.Stdout, cmd.Stderr = &o, &e
			err := cmd.Run()
			res[r] = hostOut{cmd.ProcessState.ExitCode(), o.String(), e.String()}
			if err != nil && res[r].code == 0 {
				res[r].code = -1
			}
		}()
	}
	wg.Wait()
	var retransmitted uint64
	for r, h := range res {
		require.Equal(t, 0, h.code, "rank %d: %s", r, h.err)
		var got emu.Result
		require.NoError(t, json.Unmarshal([]byte(h.out), &got))
		require.True(t, got.Exact, "rank %d", r)
		require.Equal(t, "tap", got.Backend)
		retransmitted += got.Retransmissions
	}
	sw.stop(t, syscall.SIGTERM)
	var rep struct {
		Switch switching.Report `json:"switch"`
	}
	require.NoError(t, json.Unmarshal([]byte(sw.stdout.String()), &rep))
	require.Positive(t, netreduce.StatsOf(rep.Switch).Aggregations)
	// dumpcap hands the kernel's capture blocks over late (a second or
	// more after the last frame): stop it once the file holds every result
	// the switch sent, or after 20 s. This waits on a real process; it
	// asserts nothing about time.
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(testtool.Budget(20 * time.Second)); time.Now().Before(deadline); <-tick.C {
		if c, err := capcheck.CheckFile(pcap, capcheck.CheckOptions{}); err == nil && c.AggChecked >= int(netreduce.StatsOf(rep.Switch).ResultPackets) {
			break
		}
	}
	shark.stop(t, syscall.SIGINT)
	chk, err := capcheck.CheckFile(pcap, capcheck.CheckOptions{})
	require.NoError(t, err)
	if retry && retransmitted == 0 && (!chk.Conforms || chk.AggUnchecked > 0 || chk.AggChecked < int(netreduce.StatsOf(rep.Switch).ResultPackets)) {
		return false
	}
	require.True(t, chk.Conforms, "%+v", chk.Violations)
	require.Equal(t, []string(topo.Bridges()), chk.VantagePoints)
	require.EqualValues(t, netreduce.StatsOf(rep.Switch).ResultPackets, chk.AggChecked, "every result the switch sent is verified in the bridge capture (%d unchecked, %d frames)", chk.AggUnchecked, chk.Frames)
	require.Zero(t, chk.AggUnchecked)
	code, stdout, stderr := runCLI("check", pcap)
	require.Equal(t, 0, code, stdout+stderr)
	// The capture holds the host-to-switch frames of every rank, intact.
	recs, names, err := pcapio.ReadAllNamed(pcap)
	require.NoError(t, err)
	require.Len(t, names, workers)
	bad := 0
	for _, r := range recs {
		if ok, err := frames.VerifyICRC(r.Data); err == nil && !ok {
			bad++
		}
	}
	require.Zero(t, bad)
	return true
}

func TestRunBackendTAP(t *testing.T) {
	needTAPs(t)
	for _, tc := range []struct {
		tag  string
		args []string
	}{
		{"rn", []string{"--mode", "netreduce", "--dtype", "f16"}},
		{"rr", []string{"--mode", "ring", "--transport", "v2-ipv6"}},
		{"rv", []string{"--mode", "netreduce", "--transport", "v1", "--mtu", "4096", "--msg-len", "4"}},
	} {
		t.Run(tc.tag, func(t *testing.T) {
			prefix := taptest.Prefix(t, tc.tag)
			args := append([]string{"run", "--backend", "tap", "--prefix", prefix, "--workers", "3", "--tensor", "512KiB",
				"--msg-len", "16", "--seed", "4", "--json"}, tc.args...)
			code, stdout, stderr := runCLI(args...)
			require.Equal(t, 0, code, stderr)
			var res emu.Result
			require.NoError(t, json.Unmarshal([]byte(stdout), &res))
			require.True(t, res.Exact)
			require.Equal(t, "tap", res.Backend)
			require.Positive(t, res.FramesSent)
			requireNoInterfaces(t, prefix) // it made them, it removed them
		})
	}
	t.Run("keeps what tap up made", func(t *testing.T) {
		topo := topology(t, "rk", 2)
		code, _, stderr := runCLI("run", "--backend", "tap", "--prefix", topo.Prefix, "--workers", "2", "--tensor", "64KiB", "--msg-len", "4", "--seed", "1")
		require.Equal(t, 0, code, stderr)
		for r := 0; r < 2; r++ {
			for _, n := range []string{topo.Host(r), topo.SwitchPort(r), topo.Bridge(r)} {
				_, err := netlink.LinkByName(n)
				require.NoError(t, err, "%s was made by tap up: run must leave it", n)
			}
		}
	})
}

func TestTapUpDownCommands(t *testing.T) {
	needTAPs(t)
	prefix := taptest.Prefix(t, "ud")
	code, out, stderr := runCLI("tap", "up", "--workers", "2", "--prefix", prefix, "--json")
	require.Equal(t, 0, code, stderr)
	var made struct {
		Schema  string   `json:"schema"`
		Created []string `json:"created"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &made))
	require.Equal(t, "inaemu.tap.up/1", made.Schema)
	require.ElementsMatch(t, []string{prefix + "-br0", prefix + "-sw0", prefix + "-h0", prefix + "-br1", prefix + "-sw1", prefix + "-h1"}, made.Created)
	code, out, _ = runCLI("tap", "up", "--workers", "2", "--prefix", prefix, "--json")
	require.Equal(t, 0, code)
	require.JSONEq(t, `{"schema":"inaemu.tap.up/1","created":[]}`, out, "up is idempotent")
	for _, n := range made.Created {
		b, err := os.ReadFile("/proc/sys/net/ipv6/conf/" + n + "/disable_ipv6")
		require.NoError(t, err)
		require.Equal(t, "1\n", string(b), "%s: IPv6 (and its chatter) off", n)
		l, err := netlink.LinkByName(n)
		require.NoError(t, err)
		require.Equal(t, tap.DefaultMTU, l.Attrs().MTU)
	}
	// An interface with the prefix that inaemu did not make is not removed.
	foreign := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: prefix + "-br9"}}
	require.NoError(t, netlink.LinkAdd(foreign))
	t.Cleanup(func() { netlink.LinkDel(foreign) })
	code, out, _ = runCLI("tap", "down", "--prefix", prefix, "--json")
	require.Equal(t, 0, code)
	var removed struct {
		Removed []string `json:"removed"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &removed))
	require.ElementsMatch(t, made.Created, removed.Removed)
	_, err := netlink.LinkByName(prefix + "-br9")
	require.NoError(t, err, "down removed an interface inaemu did not make")
	code, out, _ = runCLI("tap", "down", "--prefix", prefix, "--json")
	require.Equal(t, 0, code)
	require.JSONEq(t, `{"schema":"inaemu.tap.down/1","removed":[]}`, out, "down is idempotent")
	for _, args := range [][]string{{"tap"}, {"tap", "sideways"}, {"tap", "up", "--prefix", "much-too-long-prefix"}, {"tap", "up", "--workers", "0"}} {
		code, _, stderr := runCLI(args...)
		require.Equal(t, 2, code, "%v", args)
		require.Equal(t, 1, strings.Count(stderr, "\n"), "%v: %q", args, stderr)
	}
}

// TestTAPCommandsWithoutPrivilegeExit4 runs the commands as an
// unprivileged user (setpriv drops root and every capability).
func TestTAPCommandsWithoutPrivilegeExit4(t *testing.T) {
	needTAPs(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatalf("setpriv (util-linux) is needed to drop privileges: %v", err)
	}
	bin := inaemuBinary(t)
	require.NoError(t, os.Chmod(filepath.Dir(bin), 0o755))
	capture := filepath.Join(t.TempDir(), "c.pcapng") // unreadable to the unprivileged user: privileges are checked first
	code, _, stderr := runCLI("run", "--workers", "2", "--tensor", "4KiB", "--msg-len", "1", "--seed", "1", "--pcap", capture)
	require.Equal(t, 0, code, stderr)
	for _, args := range [][]string{
		{"tap", "up", "--workers", "2", "--prefix", "itnp"},
		{"tap", "down", "--prefix", "itnp"},
		{"switch", "--tap", "itnp", "--workers", "2"},
		{"host", "--tap", "itnp-h0", "--rank", "0", "--workers", "2", "--seed", "1"},
		{"run", "--backend", "tap", "--prefix", "itnp", "--workers", "2"},
		{"replay", capture, "--tap", "lo"},
	} {
		cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", "--inh-caps=-all", "--bounding-set=-all", bin}, args...)...)
		var errb strings.Builder
		cmd.Stderr, cmd.Stdout = &errb, io.Discard
		err := cmd.Run()
		require.Error(t, err, "%v", args)
		require.Equal(t, exitNoPrivilege, cmd.ProcessState.ExitCode(), "%v: %s", args, errb.String())
		require.Equal(t, 1, strings.Count(errb.String(), "\n"), "%v: one line, got %q", args, errb.String())
		require.Contains(t, errb.String(), "CAP_NET_ADMIN")
	}
	requireNoInterfaces(t, "itnp")
}

// TestReplayOntoTAP sends a capture out of a bridge, as tcpreplay would,
// and reads what reaches the switch port's TAP: the frames of one
// interface of the capture, byte for byte and in order, at the pace asked.
func TestReplayOntoTAP(t *testing.T) {
	needTAPs(t)
	topo := topology(t, "rp", 1)
	dir := t.TempDir()
	capture := filepath.Join(dir, "run.pcapng")
	code, _, stderr := runCLI("run", "--workers", "2", "--tensor", "16KiB", "--msg-len", "4", "--seed", "2", "--loss", "2%", "--pcap", capture)
	require.Equal(t, 0, code, stderr)
	recs, names, err := pcapio.ReadAllNamed(capture)
	require.NoError(t, err)
	var want [][]byte
	var span time.Duration
	var first time.Time
	for _, r := range recs {
		if names[r.Info.InterfaceIndex] == "port0-in" && !pcapio.IsGhost(r.Comments) {
			if first.IsZero() {
				first = r.Info.Timestamp
			}
			span = r.Info.Timestamp.Sub(first)
			want = append(want, r.Data)
		}
	}
	require.Greater(t, len(want), 20)

	port, err := tap.Open(topo.SwitchPort(0))
	require.NoError(t, err)
	defer port.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, tap.WaitUp(ctx, topo.SwitchPort(0)))
	for _, pacing := range [][]string{{"--topspeed"}, {"--pps", "5000"}, {"--timing"}, {}} {
		t.Run(strings.Join(append([]string{"default"}, pacing...)[min(len(pacing), 1):], " "), func(t *testing.T) {
			got := make(chan []byte, len(want)+10)
			go func() {
				buf := make([]byte, tap.MaxFrame)
				for i := 0; i < len(want); i++ {
					n, err := port.ReadFrame(buf)
					if err != nil {
						close(got)
						return
					}
					got <- append([]byte(nil), buf[:n]...)
				}
			}()
			code, out, stderr := runCLI(append([]string{"replay", capture, "--tap", topo.Bridge(0), "--from", "port0-in", "--json"}, pacing...)...)
			require.Equal(t, 0, code, stderr)
			var rep TapReplay
			require.NoError(t, json.Unmarshal([]byte(out), &rep))
			require.Equal(t, len(want), rep.Frames)
			require.Equal(t, len(recs)-len(want), rep.Skipped)
			for i := range want {
				select {
				case f, ok := <-got:
					require.True(t, ok, "the TAP closed after %d frames", i)
					require.Equal(t, want[i], f, "frame %d", i)
				case <-time.After(time.Minute):
					t.Fatalf("only %d of %d frames reached %s", i, len(want), topo.SwitchPort(0))
				}
			}
			// Pacing can only make a replay slower than its schedule.
			switch {
			case len(pacing) > 0 && pacing[0] == "--pps":
				require.GreaterOrEqual(t, rep.WallNS, int64(time.Duration(len(want)-1)*time.Second/5000))
			case len(pacing) == 0 || pacing[0] == "--timing":
				require.Equal(t, "timing", rep.Pacing)
				require.GreaterOrEqual(t, rep.WallNS, int64(span))
			}
		})
	}
}

// replay --tap into an interface that is down fails with one line and
// exit 2: frames sent out of it would go nowhere, and success would lie.
func TestReplayOntoDownInterface(t *testing.T) {
	needTAPs(t)
	const name = "itdown0" // a persistent TAP, never set up
	d, err := tap.Open(name)
	require.NoError(t, err)
	require.NoError(t, d.Close())
	t.Cleanup(func() {
		if l, err := netlink.LinkByName(name); err == nil {
			_ = netlink.LinkDel(l)
		}
	})
	l, err := netlink.LinkByName(name)
	require.NoError(t, err)
	require.NoError(t, netlink.LinkSetDown(l))
	dir := t.TempDir()
	capture := filepath.Join(dir, "run.pcapng")
	code, _, stderr := runCLI("run", "--workers", "2", "--tensor", "16KiB", "--msg-len", "4", "--seed", "2", "--pcap", capture)
	require.Equal(t, 0, code, stderr)
	code, _, errOut := runGuarded("replay", capture, "--tap", name, "--topspeed")
	oneLine(t, code, errOut, "inaemu replay: ", "interface itdown0: interface is down")
}

// tcpreplay's --loop, --limit, --mbps and --multiplier: the frame counts
// are exact (the pacing is real time, so its speed is not asserted), and
// contradictory or impossible values are usage errors.
func TestReplayOntoTAPLoopLimitRates(t *testing.T) {
	dir := t.TempDir()
	capture := filepath.Join(dir, "run.pcapng")
	code, _, stderr := runCLI("run", "--workers", "2", "--tensor", "16KiB", "--msg-len", "4", "--seed", "2", "--pcap", capture)
	require.Equal(t, 0, code, stderr)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--pps", "10", "--mbps", "5"}, "choose one"},
		{[]string{"--topspeed", "--multiplier", "2"}, "choose one"},
		{[]string{"--multiplier", "-1"}, "--multiplier -1"},
		{[]string{"--mbps", "NaN"}, "--mbps NaN"},
		{[]string{"--loop", "0"}, "--loop 0"},
		{[]string{"--limit", "-3"}, "--limit -3"},
	} {
		code, _, errOut := runGuarded(append([]string{"replay", capture, "--tap", "lo"}, c.args...)...)
		oneLine(t, code, errOut, "inaemu replay: ", c.want)
	}
	needTAPs(t)
	topo := topology(t, "rl", 1)
	// The bridge passes frames on once a port of it is held (replay
	// refuses an interface without a carrier).
	port, err := tap.Open(topo.SwitchPort(0))
	require.NoError(t, err)
	defer port.Close()
	recs, names, err := pcapio.ReadAllNamed(capture)
	require.NoError(t, err)
	sent := 0
	for _, r := range recs {
		if names[r.Info.InterfaceIndex] == "port0-in" && !pcapio.IsGhost(r.Comments) {
			sent++
		}
	}
	for _, c := range []struct {
		args   []string
		frames int
		pacing string
	}{
		{[]string{"--topspeed", "--loop", "3"}, 3 * sent, "topspeed"},
		{[]string{"--topspeed", "--loop", "3", "--limit", "7"}, 7, "topspeed"},
		{[]string{"--mbps", "1000", "--limit", "10"}, 10, "mbps 1000"},
		{[]string{"--multiplier", "1000", "--limit", "10"}, 10, "timing x1000"},
	} {
		code, out, stderr := runCLI(append([]string{"replay", capture, "--tap", topo.Bridge(0), "--from", "port0-in", "--json"}, c.args...)...)
		require.Equal(t, 0, code, stderr)
		var rep TapReplay
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		require.Equal(t, c.frames, rep.Frames, "%v", c.args)
		require.Equal(t, c.pacing, rep.Pacing, "%v", c.args)
	}
}
