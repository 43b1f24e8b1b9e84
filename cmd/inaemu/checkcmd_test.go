package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/experiment"
	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// The golden captures are made by the capture checker's tests (see
// capcheck/check_test.go; the emulator's by conformance/capcheck_test.go);
// these tests run the CLI on them.
func checkGolden(name string) string { return filepath.Join("..", "..", "testdata", "check", name) }

var checkLineRE = regexp.MustCompile(`^(icrc|psn-order|nak-psn|extra-nak|ack-regress|agg-sum) frame \d+ \([^ ,]+, \d+\.\d{9}s\) qp 0x[0-9a-f]{6} psn \d+: \S.*$`)

func TestCheckHelp(t *testing.T) {
	code, out, errOut := runCLI("check", "--help")
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	assert.Contains(t, out, "Usage: inaemu check FILE")
	for _, f := range []string{"--json", "--pair SRC,DST,REQQPN=RESPQPN", "--dtype", "--vantage", "--in-flight"} {
		assert.Contains(t, out, f)
	}
	_, out, _ = runCLI("--help")
	assert.Contains(t, out, "check ")
}

func TestCheckExitCodes(t *testing.T) {
	for _, tc := range []struct {
		file  string
		code  int
		rules map[string]int
	}{
		{"netreduce_clean.pcapng", 0, nil},
		{"ring_fault.pcapng", 0, nil},
		{"netreduce_faults.pcapng", 0, nil}, // its four bad ICRCs are injected faults
		{"icrc.pcap", 1, map[string]int{"icrc": 1}},
		{"psn_order.pcapng", 1, map[string]int{"psn-order": 2}}, // the third is a loss before the tap (inferred)
		{"nak_psn.pcapng", 1, map[string]int{"nak-psn": 3}},
		{"extra_nak.pcapng", 1, map[string]int{"extra-nak": 1}},
		{"ack_regress.pcapng", 1, map[string]int{"ack-regress": 2}},
		{"agg_sum.pcapng", 1, map[string]int{"agg-sum": 1}},
		{"../roce_gbn_drop_psn104.pcapng", 0, nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			code, out, errOut := runCLI("check", checkGolden(tc.file))
			assert.Equal(t, tc.code, code, out)
			assert.Empty(t, errOut)
			got := map[string]int{}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			for _, l := range lines {
				if m := checkLineRE.FindStringSubmatch(l); m != nil {
					got[m[1]]++
				}
			}
			if tc.rules == nil {
				assert.Empty(t, got)
				assert.Contains(t, out, "result       conforms")
			} else {
				assert.Equal(t, tc.rules, got)
				assert.Regexp(t, `result       \d+ violations? \(`, out)
			}
			assert.True(t, strings.HasPrefix(lines[len(lines)-1], "  result"), out)
		})
	}
}

func TestCheckUsageAndInputErrors(t *testing.T) {
	dir := t.TempDir()
	junk := filepath.Join(dir, "junk.pcap")
	require.NoError(t, os.WriteFile(junk, []byte("this is not a capture at all"), 0o644))
	good := checkGolden("psn_order.pcapng")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no file", []string{"check"}, "need exactly one capture file"},
		{"two files", []string{"check", good, good}, "need exactly one capture file"},
		{"unknown flag", []string{"check", good, "--bogus"}, "bogus"},
		{"bad pair", []string{"check", good, "--pair", "10.0.0.1,10.0.0.2"}, "SRC,DST,REQQPN=RESPQPN"},
		{"bad pair qpn", []string{"check", good, "--pair", "10.0.0.1,10.0.0.2,0x12=zz"}, "24-bit"},
		{"bad dtype", []string{"check", good, "--dtype", "f64"}, "f64"},
		{"negative in-flight", []string{"check", good, "--in-flight", "-1us"}, "in-flight"},
		{"missing", []string{"check", filepath.Join(dir, "nope.pcapng")}, "nope.pcapng"},
		{"not a capture", []string{"check", junk}, "not a pcap or pcapng file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(tc.args...)
			assert.Equal(t, 2, code)
			assert.Empty(t, out)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
			assert.True(t, strings.HasPrefix(errOut, "inaemu check: "), errOut)
			assert.Contains(t, errOut, tc.want)
		})
	}
}

// TestCheckJSON: one object, the documented keys, and exactly what the
// capcheck package's Report marshals to.
func TestCheckJSON(t *testing.T) {
	path := checkGolden("netreduce_faults.pcapng")
	code, out, errOut := runCLI("check", path, "--json")
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line")
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	for _, k := range []string{"file", "conforms", "frames", "roce_frames", "bad_icrc", "malformed", "not_delivered", "vantage_points",
		"connections", "agg_checked", "agg_unchecked", "agg_forwarded", "retransmission_latency", "nak_generation_latency",
		"nak_response_latency", "streams", "violations", "injected", "injected_kinds", "reordered", "reorder_window_ns"} {
		assert.Contains(t, m, k)
	}
	assert.Equal(t, true, m["conforms"])
	assert.EqualValues(t, 1366, m["frames"])
	assert.EqualValues(t, 4, m["bad_icrc"])
	// As tshark counts the fault kinds in the frame comments (and the
	// corrupted ACK the switch forwarded unchanged).
	assert.EqualValues(t, map[string]any{"corrupt": 3.0, "corrupt (forwarded)": 1.0, "drop": 9.0, "duplicate": 8.0, "hold": 4.0, "loss": 14.0}, m["injected_kinds"])
	assert.EqualValues(t, 4, m["connections"])
	for _, k := range []string{"retransmission_latency", "nak_generation_latency", "nak_response_latency"} {
		l := m[k].(map[string]any)
		keys := make([]string, 0, len(l))
		for kk := range l {
			keys = append(keys, kk)
		}
		sort.Strings(keys)
		assert.Equal(t, []string{"count", "max_ns", "median_ns", "min_ns"}, keys, k)
		assert.Positive(t, l["count"])
		assert.LessOrEqual(t, l["min_ns"], l["median_ns"])
		assert.LessOrEqual(t, l["median_ns"], l["max_ns"])
	}
	assert.Empty(t, m["violations"])
	s0 := m["streams"].([]any)[0].(map[string]any)
	for _, k := range []string{"vantage", "src", "dst", "qp", "resp_qp", "position", "data_packets", "retransmissions", "acks", "naks"} {
		assert.Contains(t, s0, k)
	}
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	want, err := json.Marshal(rep)
	require.NoError(t, err)
	assert.Equal(t, string(withSchema("inaemu.check/1", want))+"\n", out)

	// Violations: Wireshark's frame number, decode's index, the
	// interface and the time since the first frame.
	code, out, _ = runCLI("check", checkGolden("psn_order.pcapng"), "--json", "--vantage", "sender")
	assert.Equal(t, 1, code)
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	vs := m["violations"].([]any)
	require.Len(t, vs, 3)
	assert.EqualValues(t, 6, vs[0].(map[string]any)["frame"])
	assert.EqualValues(t, 5, vs[0].(map[string]any)["index"])
	assert.EqualValues(t, 5000, vs[0].(map[string]any)["time_ns"])
	for _, v := range vs {
		o := v.(map[string]any)
		keys := make([]string, 0, len(o))
		for kk := range o {
			keys = append(keys, kk)
		}
		sort.Strings(keys)
		assert.Equal(t, []string{"detail", "frame", "index", "interface", "psn", "qp", "rule", "time_ns"}, keys)
		assert.Equal(t, "psn-order", o["rule"])
		assert.Equal(t, "tap0", o["interface"])
	}

	// A conforming capture: violations is an empty list.
	code, out, _ = runCLI("check", checkGolden("netreduce_clean.pcapng"), "--json")
	assert.Equal(t, 0, code)
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	assert.Equal(t, []any{}, m["violations"])
	assert.Equal(t, true, m["conforms"])
	assert.Positive(t, m["agg_checked"])
}

// checkPairCapture: two QPs from 10.0.0.1 to 10.0.0.2, so their response
// streams cannot be paired automatically; QP 0x12's NAK asks for a PSN
// past everything sent.
func checkPairCapture(t *testing.T) string {
	ma, mb := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ia, ib := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	mk := func(fwd bool, qp uint32) *frames.Builder {
		p := frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib, DestQP: qp}
		if !fwd {
			p.SrcMAC, p.DstMAC, p.SrcIP, p.DstIP = mb, ma, ib, ia
		}
		b, err := frames.NewBuilder(p)
		require.NoError(t, err)
		return b
	}
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, "tap0")
	require.NoError(t, err)
	frame := make([]byte, 256)
	ns := int64(1000)
	put := func(b *frames.Builder, p frames.Packet) {
		n, err := b.Build(frame, &p)
		require.NoError(t, err)
		ns += 1000
		require.NoError(t, w.Write("tap0", ns, frame[:n]))
	}
	reqA, respA, reqB, respB := mk(true, 0x12), mk(false, 0x11), mk(true, 0x22), mk(false, 0x21)
	for p := uint32(100); p <= 104; p++ {
		put(reqA, frames.Packet{Opcode: wire.SendOnly, PSN: p, Payload: []byte{1, 2, 3, 4}})
	}
	put(respA, frames.Packet{Opcode: wire.Acknowledge, PSN: 107, AETH: frames.AETHFields{Syndrome: wire.SyndromeNAKPSNSeqErr}})
	put(reqB, frames.Packet{Opcode: wire.SendOnly, PSN: 200, AckReq: true, Payload: []byte{1, 2, 3, 4}})
	put(respB, frames.Packet{Opcode: wire.Acknowledge, PSN: 200, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK}})
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "pair.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

func TestCheckPairFlag(t *testing.T) {
	path := checkPairCapture(t)
	decode := func(out string) (conns int, violations []any, streams []any) {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &m), out)
		return int(m["connections"].(float64)), m["violations"].([]any), m["streams"].([]any)
	}
	// The two QPs pair themselves by their PSN spaces (100.. and 200..).
	code, out, errOut := runCLI("check", path, "--json")
	assert.Equal(t, 1, code, errOut)
	conns, vs, streams := decode(out)
	assert.Equal(t, 2, conns)
	require.Len(t, vs, 1)
	assert.Equal(t, "nak-psn", vs[0].(map[string]any)["rule"])
	assert.Len(t, streams, 2)

	code, out, errOut = runCLI("check", path, "--json", "--pair", "10.0.0.1,10.0.0.2,0x12=0x11")
	assert.Equal(t, 1, code, errOut)
	conns, vs, streams = decode(out)
	assert.Equal(t, 2, conns, "0x12 named; 0x22 then pairs by itself")
	require.Len(t, vs, 1)
	assert.Equal(t, "nak-psn", vs[0].(map[string]any)["rule"])
	assert.EqualValues(t, 6, vs[0].(map[string]any)["frame"])
	require.Len(t, streams, 2)
	for _, s := range streams {
		o := s.(map[string]any)
		assert.Equal(t, o["qp"].(float64)-1, o["resp_qp"], "%v", o)
	}

	// Repeatable, and the human form says the same.
	code, out, _ = runCLI("check", path, "--pair", "10.0.0.1,10.0.0.2,0x12=0x11", "--pair", "10.0.0.1,10.0.0.2,0x22=0x21")
	assert.Equal(t, 1, code)
	assert.Contains(t, out, "nak-psn frame 6 (tap0, 0.000005000s) qp 0x000011 psn 107: ")
	assert.Contains(t, out, "2 connections")
}

func TestCheckVantageAndInFlightFlags(t *testing.T) {
	// psn_order.pcapng frame 35 retransmits an acknowledged PSN 200 µs
	// after the ACK: an in-flight window of 1 ms forgives it.
	code, out, _ := runCLI("check", checkGolden("psn_order.pcapng"), "--in-flight", "1ms")
	assert.Equal(t, 1, code)
	assert.NotContains(t, out, "frame 35 ")
	assert.Contains(t, out, "frame 19 ")
	// Declared at the receiver, the tap no longer judges the sender.
	code, out, _ = runCLI("check", checkGolden("psn_order.pcapng"), "--vantage", "receiver")
	assert.Equal(t, 0, code, out)
	code, _, errOut := runGuarded("check", checkGolden("psn_order.pcapng"), "--vantage", "upstream")
	oneLine(t, code, errOut, "inaemu check: ", "--vantage")
}

func TestCheckDType(t *testing.T) {
	code, out, _ := runCLI("check", checkGolden("netreduce_clean.pcapng"), "--dtype", "i32")
	assert.Equal(t, 1, code, "the sums are f32")
	assert.Contains(t, out, "agg-sum frame ")
	code, _, _ = runCLI("check", checkGolden("netreduce_clean.pcapng"), "--dtype", "f32")
	assert.Equal(t, 0, code)
}

// A capture with nothing to judge does not "conform": an empty capture
// and one without a RoCE frame say so in one line and exit 2.
func TestCheckNothingToCheck(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, frames ...[]byte) string {
		var b bytes.Buffer
		w, err := pcapio.NewWriter(&b, "eth0")
		require.NoError(t, err)
		for i, f := range frames {
			require.NoError(t, w.Write("eth0", int64(i+1)*1000, f))
		}
		require.NoError(t, w.Flush())
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		return path
	}
	arp := append(append(bytes.Repeat([]byte{0xff}, 6), emu.HostMAC(0)...), 0x08, 0x06)
	arp = append(arp, make([]byte, 46)...)
	code, _, errOut := runGuarded("check", write("empty.pcapng"))
	oneLine(t, code, errOut, "inaemu check: ", "the capture has no frames")
	code, _, errOut = runGuarded("check", write("arp.pcapng", arp), "--json")
	oneLine(t, code, errOut, "inaemu check: ", "none of its 1 frames is RoCE or INA-PS")
}

// A capture of INA-PS traffic alone (frames with EtherType 0x0700 and
// the reliable channel's datagrams, no RoCE) is checked, not refused as
// one with nothing to check: it conforms, exit 0, and a switch that adds a
// retransmitted gradient twice fails inaps-sum, exit 1.
func TestCheckINAPSOnlyCapture(t *testing.T) {
	dir := t.TempDir()
	m, err := train.ParseModel("tiny", strings.NewReader("layer_index, numel, forward_pass_ns, backward_pass_ns, partitions\n"+
		"0, 12400, 10000, 0, 2\n1, 12400, 10000, 0, 2\n"))
	require.NoError(t, err)
	dup, err := faults.ParseNetem("duplicate 5%")
	require.NoError(t, err)
	capture := func(name string, mut inaps.Mutations) string {
		var b bytes.Buffer
		res, err := experiment.Run(experiment.Config{Policy: inaps.ESA, Jobs: []experiment.JobSpec{{Name: "a", Model: m, Workers: 3}, {Name: "b", Model: m, Workers: 3}},
			Aggregators: 40, Seed: 7, StartSpread: time.Millisecond, Jitter: 300 * time.Microsecond, Netem: dup, Mutations: mut, Capture: &b})
		require.NoError(t, err)
		require.Equal(t, mut == inaps.Mutations{}, res.Exact, "%v", res.Failures)
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
		return path
	}
	good := capture("esa.pcapng", inaps.Mutations{})
	code, out, errOut := runCLI("check", good)
	require.Equal(t, 0, code, "stdout %s\nstderr %s", out, errOut)
	require.Empty(t, errOut)
	require.Regexp(t, `(?m)^  ina-ps +\d+ INA-PS frames: [1-9]\d* results and [1-9]\d* partials judged .*, 0 not checked$`, out)
	code, out, errOut = runCLI("check", good, "--json")
	require.Equal(t, 0, code, errOut)
	var rep capcheck.Report
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Zero(t, rep.RoCEFrames)
	assert.Equal(t, rep.Frames, rep.INAPSFrames)
	assert.Positive(t, rep.INAPSResults)
	assert.Equal(t, "conforms", rep.Verdict)
	assert.Empty(t, rep.AggError)

	code, out, errOut = runCLI("check", capture("readd.pcapng", inaps.Mutations{ReAddRetransmitted: true}))
	require.Equal(t, 1, code, "stdout %s\nstderr %s", out, errOut)
	require.Contains(t, out, "inaps-sum frame ")
}

// --ina-tag: a switch that tags its INA headers otherwise (here "NRD0")
// has its sums checked when told the tag, and none without it.
func TestCheckINATag(t *testing.T) {
	dir := t.TempDir()
	orig := filepath.Join(dir, "run.pcapng")
	code, _, errOut := runCLI("run", "--workers", "3", "--tensor", "32KiB", "--msg-len", "4", "--seed", "4", "--pcap", orig)
	require.Equal(t, 0, code, errOut)
	recs, names, err := pcapio.ReadAllNamed(orig)
	require.NoError(t, err)
	var b bytes.Buffer
	w, err := pcapio.NewWriter(&b, names...)
	require.NoError(t, err)
	retagged := 0
	var v frames.View
	for _, r := range recs {
		f := append([]byte(nil), r.Data...)
		if v.Parse(f) == nil {
			if h := v.INA(); h != nil {
				h.SetTag(0x4E524430) // "NRD0"
				v.SetICRC()
				retagged++
			}
		}
		require.NoError(t, w.Write(names[r.Info.InterfaceIndex], r.Info.Timestamp.UnixNano(), f, r.Comments...))
	}
	require.NoError(t, w.Flush())
	require.Greater(t, retagged, 0)
	other := filepath.Join(dir, "nrd0.pcapng")
	require.NoError(t, os.WriteFile(other, b.Bytes(), 0o644))
	report := func(args ...string) capcheck.Report {
		code, out, errOut := runCLI(append([]string{"check", "--json"}, args...)...)
		require.Equal(t, 0, code, "%s%s", out, errOut)
		var rep capcheck.Report
		require.NoError(t, json.Unmarshal([]byte(out), &rep))
		return rep
	}
	want := report(orig).AggChecked
	require.Greater(t, want, 0)
	assert.Zero(t, report(other).AggChecked, "INA1 expected: no INA header found")
	assert.Equal(t, want, report(other, "--ina-tag", "NRD0").AggChecked)
	assert.Equal(t, want, report(other, "--ina-tag", "0x4E524430").AggChecked)
	for _, bad := range []string{"NRD", "0", "0x1FFFFFFFF"} {
		code, _, errOut := runGuarded("check", other, "--ina-tag", bad)
		oneLine(t, code, errOut, "inaemu check: ", "--ina-tag")
	}
}
