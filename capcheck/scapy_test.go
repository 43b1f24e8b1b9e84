package capcheck_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/internal/testtool"
)

// The lab captures of issue 13, built frame by frame by scapy (its
// contrib/roce BTH and AETH layers compute the ICRCs), so that neither
// the frames nor their checksums come from the code under test. Each
// capture is a classic pcap of one interface: a single vantage point
// whose position the checker must infer.

// scapyWriter turns a JSON list of frames into a pcap: a WRITE FIRST,
// MIDDLE, LAST or ONLY (a raw RETH on FIRST/ONLY), or an ACK/NAK; "snap"
// cuts the captured bytes (a snaplen) while keeping the original length.
const scapyWriter = `
import json, struct, sys
from scapy.all import Ether, Raw
from scapy.layers.inet import IP, UDP
from scapy.utils import PcapWriter
from scapy.contrib.roce import BTH, AETH
ops = {"first": 6, "middle": 7, "last": 8, "only": 10, "ack": 17}
def mac(h): return "02:00:00:00:00:%02x" % h
spec = json.load(open(sys.argv[1]))
w = PcapWriter(sys.argv[2], linktype=1, sync=True)
w.write_header(None)
for f in spec:
    a, b = f["src"], f["dst"]
    e = Ether(src=mac(a), dst=mac(b)) / IP(src="10.0.0.%d" % a, dst="10.0.0.%d" % b, flags="DF", ttl=64) / UDP(sport=49152 + f["qp"], dport=4791, chksum=0)
    bth = BTH(opcode=ops[f["op"]], dqpn=f["qp"], psn=f["psn"] % (1 << 24), ackreq=1 if f["op"] in ("last", "only") else 0)
    if f["op"] == "ack":
        p = e / bth / AETH(syndrome=f.get("syn", 0x1f), msn=f.get("msn", 0))
    else:
        body = b""
        if f["op"] in ("first", "only"):
            body += struct.pack("!QII", 0x10000, 0x1234, 256 * f.get("pkts", 1))
        body += bytes([f["psn"] % 251]) * 256
        p = e / bth / Raw(body)
    raw = bytes(p)
    cut = raw[: f["snap"]] if "snap" in f else raw
    w.write_packet(cut, sec=f["t"] // 1000000, usec=f["t"] % 1000000, wirelen=len(raw))
w.close()
`

// sf is one frame for scapyWriter: time in µs, hosts 1.., QPN, PSN.
type sf struct {
	T    int    `json:"t"`
	Src  int    `json:"src"`
	Dst  int    `json:"dst"`
	Op   string `json:"op"`
	QP   int    `json:"qp"`
	PSN  int    `json:"psn"`
	Syn  int    `json:"syn,omitempty"`
	Pkts int    `json:"pkts,omitempty"`
	Snap int    `json:"snap,omitempty"`
}

const (
	synACK = 0x1f
	synNAK = 0x60 // NAK, PSN sequence error
)

// scapyCapture writes frames with scapy and returns the pcap's path.
func scapyCapture(t *testing.T, name string, fs []sf) string {
	t.Helper()
	testtool.Need(t, "scapy", testtool.HaveScapy)
	dir := t.TempDir()
	spec, err := json.Marshal(fs)
	require.NoError(t, err)
	in, out := filepath.Join(dir, name+".json"), filepath.Join(dir, name+".pcap")
	require.NoError(t, os.WriteFile(in, spec, 0o644))
	_, errOut, err := testtool.Run(t, testtool.SystemPython, "-c", scapyWriter, in, out)
	require.NoError(t, err, errOut)
	return out
}

// write is a WRITE of n packets from 1 to 2 on QP qp starting at PSN
// first, one packet per µs from time t, PSNs in the order given.
func write(t0, qp int, psns ...int) []sf {
	var fs []sf
	for i, p := range psns {
		fs = append(fs, sf{T: t0 + i, Src: 1, Dst: 2, Op: "middle", QP: qp, PSN: p})
	}
	return fs
}

func ack(t, qp, psn, syn int) sf {
	return sf{T: t, Src: 2, Dst: 1, Op: "ack", QP: qp, PSN: psn, Syn: syn}
}

func seq(from, to int) []int {
	var s []int
	for p := from; p <= to; p++ {
		s = append(s, p)
	}
	return s
}

func cat(parts ...[]sf) []sf {
	var all []sf
	for _, p := range parts {
		all = append(all, p...)
	}
	return all
}

// responderView: PSNs 100..109 of one WRITE, PSN 102 lost before a
// capture taken at the responder: it sees 100, 101, 103..107 (sent before
// the NAK reached the requester), the NAK for 102, and then the
// retransmission from resume on, and the final ACK.
func responderView(resume int) []sf {
	fs := write(0, 0x12, 100, 101)
	fs = append(fs, write(2, 0x12, 103)...)
	fs = append(fs, ack(3, 0x11, 102, synNAK))
	fs = append(fs, write(4, 0x12, 104, 105, 106, 107)...)
	fs = append(fs, write(20, 0x12, seq(resume, 109)...)...)
	fs = append(fs, ack(40, 0x11, 109, synACK))
	fs[0].Op, fs[0].Pkts = "first", 10
	return fs
}

// TestScapyResponderCaptureConforms: the most common lab capture, a
// correct go-back-N recovery seen at the responder, conforms by default:
// the NAK for a PSN the capture never showed proves the loss was before
// it, so the capture is the receiver side, and the verdict says it
// inferred that. (On main before this it failed: "skips PSN 102".)
func TestScapyResponderCaptureConforms(t *testing.T) {
	path := scapyCapture(t, "responder", responderView(102))
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.Conforms, "%v", rep.Violations)
	require.Len(t, rep.Inferences, 1)
	assert.Contains(t, rep.Inferences[0], "receiver side")
	assert.Contains(t, rep.Inferences[0], "frame 4") // the NAK, as Wireshark numbers it
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	assert.Contains(t, b.String(), "inferred ")
}

// TestScapyResponderCaptureWrongResume: the same capture, but the
// requester resumes at PSN 104 after the NAK for 102. Default (auto)
// finds it; declaring the capture a receiver's finds it too. The old
// --downstream switched the rule off and called this conforming.
func TestScapyResponderCaptureWrongResume(t *testing.T) {
	path := scapyCapture(t, "wrong_resume", responderView(104))
	for _, v := range []capcheck.Vantage{capcheck.VantageAuto, capcheck.VantageReceiver, capcheck.VantageTap} {
		rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{Vantage: v})
		require.NoError(t, err)
		require.Len(t, rep.Violations, 1, "vantage %v: %v", v, rep.Violations)
		got := rep.Violations[0]
		assert.Equal(t, capcheck.RulePSNOrder, got.Rule)
		assert.EqualValues(t, 104, got.PSN)
		assert.Equal(t, 9, got.Frame, "the first retransmitted packet, Wireshark's frame 9")
		assert.Contains(t, got.Detail, "PSN 102")
		assert.NotEmpty(t, got.Inferred, "a verdict at a receiver-side capture rests on an assumption")
	}
}

// senderView: the requester's own capture. It sends 100..107; PSN 102 is
// lost after the capture point, the responder NAKs it, and the requester
// resumes at resume.
func senderView(resume int) []sf {
	fs := write(0, 0x12, seq(100, 107)...)
	fs = append(fs, ack(9, 0x11, 102, synNAK))
	fs = append(fs, write(10, 0x12, seq(resume, 109)...)...)
	fs = append(fs, ack(30, 0x11, 109, synACK))
	fs[0].Op, fs[0].Pkts = "first", 10
	return fs
}

// TestScapySenderCapture: data seen before its loss (PSN 102 passed the
// capture, yet the responder NAKs it) proves the capture is on the
// sender's side of the loss; psn-order then judges the requester fully.
func TestScapySenderCapture(t *testing.T) {
	rep, err := capcheck.CheckFile(scapyCapture(t, "sender", senderView(102)), capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.True(t, rep.Conforms, "%v", rep.Violations)
	require.Len(t, rep.Inferences, 1)
	assert.Contains(t, rep.Inferences[0], "sender side")

	rep, err = capcheck.CheckFile(scapyCapture(t, "sender_wrong", senderView(103)), capcheck.CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1, "%v", rep.Violations)
	assert.EqualValues(t, 103, rep.Violations[0].PSN)
	assert.Contains(t, rep.Violations[0].Detail, "asks for PSN 102")
}

// twoQPs: two WRITEs between the same hosts on two QPs (perftest -q 2):
// requests to QPN 0x12 answered on 0x11, to 0x22 on 0x21, with disjoint
// PSN spaces (base and base2). The responder of the second QP sends a
// NAK for a PSN beyond anything that reached it.
func twoQPs(base, base2 int) []sf {
	var fs []sf
	for i := 0; i < 6; i++ {
		fs = append(fs, sf{T: 2 * i, Src: 1, Dst: 2, Op: "middle", QP: 0x12, PSN: base + i})
		fs = append(fs, sf{T: 2*i + 1, Src: 1, Dst: 2, Op: "middle", QP: 0x22, PSN: base2 + i})
	}
	fs = append(fs, ack(20, 0x11, base+5, synACK))
	fs = append(fs, ack(21, 0x21, base2+9, synNAK)) // wrong: nothing past base2+5 was sent
	return fs
}

// TestScapyTwoQPsPairThemselves: the wrong NAK is found without --pair
// (on main: "4 connections ... conforms").
func TestScapyTwoQPsPairThemselves(t *testing.T) {
	rep, err := capcheck.CheckFile(scapyCapture(t, "two_qps", twoQPs(1000, 7000000)), capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Equal(t, 2, rep.Connections)
	require.Len(t, rep.Violations, 1, "%v", rep.Violations)
	assert.Equal(t, capcheck.RuleNAKPSN, rep.Violations[0].Rule)
	assert.EqualValues(t, 0x21, rep.Violations[0].QP)
	assert.Empty(t, rep.Unpaired)
}

// TestScapyTwoQPsAmbiguous: when the two PSN spaces overlap (and the
// ports are not rxe's), nothing tells the responses apart: both
// pairings are tried, and the NAK past everything either QP sent is a
// violation under both (on main: unpaired, NOT CHECKED, and exit 0 with
// --vantage receiver).
func TestScapyTwoQPsAmbiguous(t *testing.T) {
	path := scapyCapture(t, "two_qps_same", twoQPs(1000, 1000))
	for _, v := range []capcheck.Vantage{capcheck.VantageAuto, capcheck.VantageReceiver} {
		rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{Vantage: v})
		require.NoError(t, err)
		assert.Empty(t, rep.Unpaired)
		assert.Empty(t, rep.Unchecked)
		require.Len(t, rep.Violations, 1, "%v", rep.Violations)
		assert.Equal(t, capcheck.RuleNAKPSN, rep.Violations[0].Rule)
		assert.Equal(t, 14, rep.Violations[0].Frame)
		assert.Equal(t, "violations", rep.Verdict)
		var b strings.Builder
		require.NoError(t, rep.WriteText(&b))
		assert.Contains(t, b.String(), "2 consistent pairings tried")
	}
}

// TestScapySnaplenCut: a capture cut at 60 bytes per frame (tcpdump -s
// 60) keeps the headers but not the ICRC: such frames are counted as cut
// and excluded, never reported (on main: a false nak-psn).
func TestScapySnaplenCut(t *testing.T) {
	fs := responderView(102)
	for i := range fs {
		if fs[i].Op != "ack" {
			fs[i].Snap = 60
		}
	}
	rep, err := capcheck.CheckFile(scapyCapture(t, "snaplen", fs), capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, len(fs)-2, rep.Snapped)
}
