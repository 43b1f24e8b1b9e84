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
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/testtool"
)

// READ and atomic captures built frame by frame by scapy (its contrib
// roce BTH and AETH layers; RETH, AtomicETH and AtomicAckETH packed by
// hand after IBTA Vol. 1 §9.3: RETH VA 64, R_Key 32, DMA length 32;
// AtomicETH VA 64, R_Key 32, swap/add 64, compare 64; AtomicAckETH
// original remote data 64), so neither the frames nor their ICRCs come
// from the code under test. One interface at the requester's side: host
// 1 is the requester (requests to QPN 0x12), host 2 the responder
// (responses to QPN 0x11). The expectations are written from the spec's
// PSN rules, not from the checker.
const scapyRAWriter = `
import json, struct, sys
from scapy.all import Ether, Raw
from scapy.layers.inet import IP, UDP
from scapy.utils import PcapWriter
from scapy.contrib.roce import BTH, AETH
ops = {"write": 10, "read": 12, "rfirst": 13, "rmiddle": 14, "rlast": 15, "ronly": 16,
       "ack": 17, "aack": 18, "cas": 19, "faa": 20, "ucsend": 0x24}
def mac(h): return "02:00:00:00:00:%02x" % h
spec = json.load(open(sys.argv[1]))
w = PcapWriter(sys.argv[2], linktype=1, sync=True)
w.write_header(None)
for f in spec:
    op = f["op"]
    resp = op in ("rfirst", "rmiddle", "rlast", "ronly", "ack", "aack")
    a, b = (2, 1) if resp else (1, 2)
    qp = 0x11 if resp else 0x12
    e = Ether(src=mac(a), dst=mac(b)) / IP(src="10.0.0.%d" % a, dst="10.0.0.%d" % b, flags="DF", ttl=64) / UDP(sport=49152 + qp, dport=4791, chksum=0)
    bth = BTH(opcode=ops[op], dqpn=qp, psn=f["psn"] % (1 << 24), ackreq=1 if op in ("write", "read", "cas", "faa") else 0)
    if op in ("rfirst", "rlast", "ronly", "ack"):
        p = e / bth / AETH(syndrome=f.get("syn", 0x1f), msn=0)
    elif op == "aack":
        p = e / bth / AETH(syndrome=0x1f, msn=0) / Raw(struct.pack("!Q", f["orig"]))
    else:
        p = e / bth
    body = b""
    if op == "write":
        body = struct.pack("!QII", 0x10000, 0x1234, f.get("len", 64))
    elif op == "read":
        body = struct.pack("!QII", f.get("va", 0x20000), 0x4321, f["len"])
    elif op in ("cas", "faa"):
        body = struct.pack("!QIQQ", 0x30000, 0x5678, f.get("swap", 1), f.get("cmp", 0))
    if op in ("write", "rfirst", "rmiddle", "rlast", "ronly", "ucsend"):
        body += bytes([f["psn"] % 251]) * f.get("len", 64)
    if body:
        p = p / Raw(body)
    w.write_packet(bytes(p), sec=f["t"] // 1000000, usec=f["t"] % 1000000)
w.close()
`

// rf is one frame for scapyRAWriter (frame i at 100·i µs): opcode name, PSN, and
// the READ's VA and length, a response's payload length, an Atomic
// Acknowledge's original value, an ACK's syndrome.
type rf struct {
	T    int    `json:"t"`
	Op   string `json:"op"`
	PSN  int    `json:"psn"`
	VA   int    `json:"va,omitempty"`
	Len  int    `json:"len,omitempty"`
	Orig uint64 `json:"orig,omitempty"`
	Syn  int    `json:"syn,omitempty"`
}

func raCapture(t *testing.T, name string, fs []rf) string {
	t.Helper()
	testtool.Need(t, "scapy", testtool.HaveScapy)
	for i := range fs {
		fs[i].T = 100 * i // µs: beyond the in-flight tolerance of one another
	}
	dir := t.TempDir()
	spec, err := json.Marshal(fs)
	require.NoError(t, err)
	in, out := filepath.Join(dir, name+".json"), filepath.Join(dir, name+".pcap")
	require.NoError(t, os.WriteFile(in, spec, 0o644))
	_, errOut, err := testtool.Run(t, testtool.SystemPython, "-c", scapyRAWriter, in, out)
	require.NoError(t, err, errOut)
	return out
}

func raCheck(t *testing.T, path string, opt capcheck.CheckOptions) *capcheck.Report {
	t.Helper()
	rep, err := capcheck.CheckFile(path, opt)
	require.NoError(t, err)
	return rep
}

// raRules is the (rule, frame) of each violation, frames as Wireshark
// numbers them.
func raRules(rep *capcheck.Report) []string {
	out := []string{}
	for _, v := range rep.Violations {
		out = append(out, v.Rule+" "+itoa(v.Frame))
	}
	return out
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// readOf4 is a READ of 1024 bytes at PSN 100 with a 256-byte MTU: PSNs
// 100..103, answered FIRST, MIDDLE, MIDDLE, LAST (frames 1-5).
func readOf4() []rf {
	return []rf{
		{Op: "read", PSN: 100, Len: 1024},
		{Op: "rfirst", PSN: 100, Len: 256}, {Op: "rmiddle", PSN: 101, Len: 256},
		{Op: "rmiddle", PSN: 102, Len: 256}, {Op: "rlast", PSN: 103, Len: 256},
	}
}

// TestScapyReadAtomicConforms: a READ, the WRITE after it at the PSN after
// the READ's range, a compare-and-swap and a fetch-and-add, the latter
// resent and answered again from the replay cache with the same value:
// all conform, and the path MTU is inferred from the FIRST and MIDDLE
// payloads.
func TestScapyReadAtomicConforms(t *testing.T) {
	fs := append(readOf4(),
		rf{Op: "write", PSN: 104, Len: 64}, rf{Op: "ack", PSN: 104},
		rf{Op: "cas", PSN: 105}, rf{Op: "aack", PSN: 105, Orig: 7},
		rf{Op: "faa", PSN: 106}, rf{Op: "faa", PSN: 106}, // a duplicate
		rf{Op: "aack", PSN: 106, Orig: 9}, rf{Op: "aack", PSN: 106, Orig: 9},
		rf{Op: "read", PSN: 107, Len: 100}, rf{Op: "ronly", PSN: 107, Len: 100})
	rep := raCheck(t, raCapture(t, "ra_clean", fs), capcheck.CheckOptions{})
	assert.Empty(t, raRules(rep), "%v", rep.Violations)
	assert.Equal(t, "conforms", rep.Verdict)
	assert.Empty(t, rep.Unchecked)
	assert.Equal(t, 256, rep.PathMTU)
	assert.Equal(t, 2, rep.ReadRequests)
	assert.Equal(t, 3, rep.AtomicRequests)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	assert.Contains(t, b.String(), "\n  read/atomic  2 READ requests (path MTU 256 bytes, inferred")
}

// TestScapyReadResponseOutsideRange: issue 33's case: a READ of 512
// bytes (PSNs 100, 101) answered FIRST 100 and LAST 102: PSN 102 is in
// no READ's range (on main: conforms, exit 0).
func TestScapyReadResponseOutsideRange(t *testing.T) {
	fs := []rf{{Op: "read", PSN: 100, Len: 512}, {Op: "rfirst", PSN: 100, Len: 256}, {Op: "rlast", PSN: 102, Len: 256}}
	rep := raCheck(t, raCapture(t, "ra_outside", fs), capcheck.CheckOptions{})
	assert.Equal(t, []string{"read-psn 3"}, raRules(rep))
	require.Len(t, rep.Violations, 1)
	assert.Contains(t, rep.Violations[0].Detail, "PSNs 100..101")
	assert.EqualValues(t, 0x11, rep.Violations[0].QP)
}

// TestScapyReadResponsePlace: each response opcode in a place the spec
// does not allow: ONLY for a READ of four packets, MIDDLE at the last
// PSN, LAST at the first, FIRST mid-range (MTU given: a lone ONLY or
// LAST says nothing of it).
func TestScapyReadResponsePlace(t *testing.T) {
	for _, tc := range []struct {
		name string
		op   string
		psn  int
	}{{"only", "ronly", 100}, {"middle", "rmiddle", 103}, {"last", "rlast", 100}, {"first", "rfirst", 102}} {
		fs := []rf{{Op: "read", PSN: 100, Len: 1024}, {Op: tc.op, PSN: tc.psn, Len: 256}}
		rep := raCheck(t, raCapture(t, "ra_place_"+tc.name, fs), capcheck.CheckOptions{MTU: 256})
		assert.Equal(t, []string{"read-psn 2"}, raRules(rep), tc.name)
	}
}

// TestScapyReadGoBackN: a MIDDLE response (PSN 102) lost before the
// requester; it re-issues the READ from PSN 102 for the last 512 bytes,
// and the responder executes it again from there: conforms. A responder
// that sends PSN 101 again with no READ asking for it does not.
func TestScapyReadGoBackN(t *testing.T) {
	good := []rf{
		{Op: "read", PSN: 100, Len: 1024},
		{Op: "rfirst", PSN: 100, Len: 256}, {Op: "rmiddle", PSN: 101, Len: 256}, {Op: "rlast", PSN: 103, Len: 256},
		{Op: "read", PSN: 102, VA: 0x20000 + 512, Len: 512}, // re-issued from the first missing PSN
		{Op: "rfirst", PSN: 102, Len: 256}, {Op: "rlast", PSN: 103, Len: 256},
		{Op: "write", PSN: 104, Len: 64}, {Op: "ack", PSN: 104},
	}
	rep := raCheck(t, raCapture(t, "ra_gbn", good), capcheck.CheckOptions{})
	assert.Empty(t, raRules(rep), "%v", rep.Violations)
	assert.Equal(t, "conforms", rep.Verdict)

	bad := append(append([]rf{}, good[:4]...), rf{Op: "rmiddle", PSN: 101, Len: 256}) // frame 5: nobody asked
	rep = raCheck(t, raCapture(t, "ra_gbn_bad", bad), capcheck.CheckOptions{})
	assert.Equal(t, []string{"read-psn 5"}, raRules(rep))

	// A requester that re-issues from PSN 102 without moving its RETH on
	// (VA and length of the whole READ) asks for the wrong bytes.
	unmoved := append([]rf{}, good...)
	unmoved[4] = rf{Op: "read", PSN: 102, VA: 0x20000, Len: 1024}
	rep = raCheck(t, raCapture(t, "ra_gbn_unmoved", unmoved), capcheck.CheckOptions{})
	assert.Equal(t, []string{"read-psn 5"}, raRules(rep))
	assert.Contains(t, rep.Violations[0].Detail, "VA 0x20200 length 512")
	assert.EqualValues(t, 0x12, rep.Violations[0].QP, "the requester's READ")
}

// TestScapyReadPSNCount: the request after a READ of 1024 bytes (4 PSNs
// at a 256-byte MTU) must carry PSN 104: 106 skips two (psn-order), and
// a NAK for 107 after 104 and 105 asks past what the responder can have
// received (nak-psn). On main the READ switched both rules off.
func TestScapyReadPSNCount(t *testing.T) {
	skip := append(readOf4(), rf{Op: "write", PSN: 106, Len: 64})
	rep := raCheck(t, raCapture(t, "ra_skip", skip), capcheck.CheckOptions{})
	assert.Equal(t, []string{"psn-order 6"}, raRules(rep))
	assert.Contains(t, rep.Violations[0].Detail, "skips PSNs 104..105")

	nak := append(readOf4(), rf{Op: "write", PSN: 104, Len: 64}, rf{Op: "write", PSN: 105, Len: 64},
		rf{Op: "ack", PSN: 107, Syn: synNAK})
	rep = raCheck(t, raCapture(t, "ra_nak", nak), capcheck.CheckOptions{})
	assert.Equal(t, []string{"nak-psn 8"}, raRules(rep))
}

// TestScapyAtomics: an Atomic Acknowledge for a PSN no atomic carried
// (atomic-psn), and a duplicate fetch-and-add answered with another
// original value: executed again instead of replayed (atomic-replay).
func TestScapyAtomics(t *testing.T) {
	fs := []rf{
		{Op: "cas", PSN: 100}, {Op: "aack", PSN: 101, Orig: 1}, // frame 2: no atomic at 101
		{Op: "faa", PSN: 101}, {Op: "aack", PSN: 101, Orig: 5},
		{Op: "faa", PSN: 101}, {Op: "aack", PSN: 101, Orig: 6}, // frame 6: value changed
	}
	rep := raCheck(t, raCapture(t, "ra_atomic", fs), capcheck.CheckOptions{})
	assert.Equal(t, []string{"atomic-psn 2", "atomic-replay 6"}, raRules(rep))
	assert.Contains(t, rep.Violations[1].Detail, "0x5")
	assert.Contains(t, rep.Violations[1].Detail, "0x6")
}

// TestScapyUncoveredOpcodeUnchecked: frames of an opcode the rules do not
// cover (a UC SEND ONLY) are counted and make the verdict undecidable,
// never a silent "conforms".
func TestScapyUncoveredOpcodeUnchecked(t *testing.T) {
	fs := []rf{{Op: "write", PSN: 100, Len: 64}, {Op: "ack", PSN: 100}, {Op: "ucsend", PSN: 7, Len: 32}, {Op: "ucsend", PSN: 8, Len: 32}}
	rep := raCheck(t, raCapture(t, "ra_uc", fs), capcheck.CheckOptions{})
	assert.Empty(t, rep.Violations)
	assert.Equal(t, "undecidable", rep.Verdict)
	assert.Equal(t, map[string]int{"UC_SEND_ONLY": 2}, rep.UncheckedOpcodes)
	require.Len(t, rep.Unchecked, 1)
	assert.Contains(t, rep.Unchecked[0], "UC_SEND_ONLY (0x24): 2 frames outside the rules")
}

// TestScapyReadMTUUnknown: a READ of 1024 bytes whose responses the
// capture lacks, then a WRITE at PSN 104: with no FIRST or MIDDLE packet
// the MTU is unknown and the largest payload (64) says only that it is at
// least 256, so the READ's PSN count is unknown: listed as unchecked
// (undecidable), until --mtu says it: at 256 the READ takes 100..103 and
// all conforms, at 1024 it takes 100 alone and the WRITE skips 101..103.
// A READ of 1024 bytes answered by one ONLY of 1024 bytes takes one PSN
// whatever the MTU (no packet carries more than one).
func TestScapyReadMTUUnknown(t *testing.T) {
	fs := []rf{{Op: "read", PSN: 100, Len: 1024}, {Op: "write", PSN: 104, Len: 64}}
	path := raCapture(t, "ra_mtu", fs)
	rep := raCheck(t, path, capcheck.CheckOptions{})
	assert.Empty(t, rep.Violations)
	assert.Equal(t, "undecidable", rep.Verdict)
	require.Len(t, rep.Unchecked, 1)
	assert.Contains(t, rep.Unchecked[0], "READ of frame 1 (1024 bytes)")
	assert.Contains(t, rep.PathMTUWhy, "at least 256 bytes")
	rep = raCheck(t, path, capcheck.CheckOptions{MTU: 256})
	assert.Equal(t, "conforms", rep.Verdict, "%v", rep.Violations)
	rep = raCheck(t, path, capcheck.CheckOptions{MTU: 1024})
	assert.Equal(t, []string{"psn-order 2"}, raRules(rep))

	only := []rf{{Op: "read", PSN: 100, Len: 1024}, {Op: "ronly", PSN: 100, Len: 1024}, {Op: "write", PSN: 101, Len: 64}}
	rep = raCheck(t, raCapture(t, "ra_mtu_only", only), capcheck.CheckOptions{})
	assert.Equal(t, "conforms", rep.Verdict, "%v %v", rep.Violations, rep.Unchecked)
	assert.Contains(t, rep.PathMTUWhy, "at least 1024 bytes")
}

// TestScapyReadNoFalseGap: the PSNs a READ occupies are no gap. A READ
// of 4 PSNs (100..103) and its responses, WRITEs 104 and 105, a NAK for
// 104 (which passed: lost after the capture, so the capture is the
// requester's side), and the requester going back to PSN 102 instead of
// 104: psn-order. Were the READ's PSNs taken for a gap, the NAK after it
// would say loss before the capture too, and the wrong resume would be
// judged only as a tap's (which cannot tell).
func TestScapyReadNoFalseGap(t *testing.T) {
	fs := append(readOf4(), rf{Op: "write", PSN: 104, Len: 64}, rf{Op: "write", PSN: 105, Len: 64},
		rf{Op: "ack", PSN: 104, Syn: synNAK}, rf{Op: "write", PSN: 102, Len: 64})
	rep := raCheck(t, raCapture(t, "ra_nogap", fs), capcheck.CheckOptions{})
	assert.Equal(t, []string{"psn-order 9"}, raRules(rep))
	require.Len(t, rep.Inferences, 1)
	assert.Contains(t, rep.Inferences[0], "the sender side")
}

// TestScapyReadPendingRetried: a READ (PSNs 100..103) whose LAST response
// was lost stays pending: a later READ's responses and a NAK for PSN 108
// acknowledge it not, and the requester re-issues it from PSN 103 (the
// rest of it, 256 bytes at VA + 768) before going back to 108, as rxe's
// completer retries a pending READ. Conforms; on the transport's first
// lossy READ runs the checker called the re-issue a retransmission that
// did not start at the NAK's PSN.
func TestScapyReadPendingRetried(t *testing.T) {
	fs := []rf{
		{Op: "read", PSN: 100, Len: 1024},
		{Op: "rfirst", PSN: 100, Len: 256}, {Op: "rmiddle", PSN: 101, Len: 256}, {Op: "rmiddle", PSN: 102, Len: 256}, // 103 lost
		{Op: "read", PSN: 104, VA: 0x30000, Len: 1024},
		{Op: "rfirst", PSN: 104, Len: 256}, {Op: "rmiddle", PSN: 105, Len: 256}, {Op: "rmiddle", PSN: 106, Len: 256}, {Op: "rlast", PSN: 107, Len: 256},
		{Op: "write", PSN: 108, Len: 64}, {Op: "write", PSN: 109, Len: 64}, // 108 lost after the capture
		{Op: "ack", PSN: 108, Syn: synNAK},
		{Op: "read", PSN: 103, VA: 0x20000 + 768, Len: 256}, // frame 13
		{Op: "write", PSN: 108, Len: 64}, {Op: "write", PSN: 109, Len: 64},
		{Op: "ronly", PSN: 103, Len: 256}, {Op: "ack", PSN: 109},
	}
	rep := raCheck(t, raCapture(t, "ra_pending", fs), capcheck.CheckOptions{})
	assert.Empty(t, raRules(rep), "%v", rep.Violations)
	assert.Equal(t, "conforms", rep.Verdict)

	// A requester may ask for the whole READ again instead (a duplicate,
	// the same RETH), answered whole again: conforms too, although its
	// first three responses had arrived.
	whole := append([]rf{}, fs[:12]...)
	whole = append(whole, rf{Op: "read", PSN: 100, Len: 1024},
		rf{Op: "rfirst", PSN: 100, Len: 256}, rf{Op: "rmiddle", PSN: 101, Len: 256}, rf{Op: "rmiddle", PSN: 102, Len: 256}, rf{Op: "rlast", PSN: 103, Len: 256},
		rf{Op: "write", PSN: 104, Len: 64})
	rep = raCheck(t, raCapture(t, "ra_pending_whole", whole), capcheck.CheckOptions{})
	assert.Empty(t, raRules(rep), "%v", rep.Violations)
}

// TestCheckReadDuplicatedDownstream: a READ the network duplicated after
// one vantage point (seen once at the requester's tap, twice at the
// responder's) is executed twice: its responses come twice to the
// requester, and that is no read-psn. Likewise an atomic duplicated
// there is answered twice, from the replay cache.
func TestCheckReadDuplicatedDownstream(t *testing.T) {
	c := chkNewCapture("near", "far")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	read := a.build(a.req, &frames.Packet{Opcode: wire.ReadRequest, PSN: 100, AckReq: true, RETH: frames.RETHFields{VA: 0x1000, RKey: 1, DMALen: 512}})
	faa := a.build(a.req, &frames.Packet{Opcode: wire.FetchAdd, PSN: 102, AckReq: true, AtomicETH: frames.AtomicETHFields{VA: 0x2000, RKey: 1, SwapAdd: 1}})
	c.add("near", us, read)
	c.add("far", us, read)
	c.add("far", us, read) // the network's copy
	c.add("near", us, faa)
	c.add("far", us, faa)
	c.add("far", us, faa)
	for range 2 {
		c.add("near", 100*us, a.build(a.resp, &frames.Packet{Opcode: wire.ReadResponseFirst, PSN: 100, Payload: make([]byte, 256)}))
		c.add("near", us, a.build(a.resp, &frames.Packet{Opcode: wire.ReadResponseLast, PSN: 101, Payload: make([]byte, 256)}))
		c.add("near", us, a.build(a.resp, &frames.Packet{Opcode: wire.AtomicAcknowledge, PSN: 102, AtomicAck: 41}))
	}
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []chkWant{}, chkViolations(rep))
	assert.Equal(t, 256, rep.PathMTU)
}

// TestCheckReadHiddenByCorruption: a READ request whose bits a fault
// flipped (bad ICRC: unreadable) may have been a READ of any number of
// PSNs: the next READ after it skips none as far as the capture proves.
func TestCheckReadHiddenByCorruption(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	rd := func(psn uint32, n uint32) []byte {
		return a.build(a.req, &frames.Packet{Opcode: wire.ReadRequest, PSN: psn, AckReq: true, RETH: frames.RETHFields{VA: 0x1000, RKey: 1, DMALen: 256 * n}})
	}
	c.add("tap0", us, rd(100, 4))
	bad := rd(104, 9)
	bad[len(bad)-6] ^= 0x40 // in the RETH: unreadable
	c.add("tap0", us, bad)
	c.add("tap0", us, rd(113, 2))
	c.add("tap0", us, a.build(a.resp, &frames.Packet{Opcode: wire.ReadResponseMiddle, PSN: 101, Payload: make([]byte, 256)}))
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []chkWant{{"icrc", 1, 104}}, chkViolations(rep))
}

// TestCheckReadOvertaken: within a reorder window a READ overtaken by
// the next one fills the hole of every PSN it occupies.
func TestCheckReadOvertaken(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	rd := func(psn uint32, n uint32) []byte {
		return a.build(a.req, &frames.Packet{Opcode: wire.ReadRequest, PSN: psn, AckReq: true, RETH: frames.RETHFields{VA: 0x1000, RKey: 1, DMALen: 256 * n}})
	}
	c.add("tap0", us, rd(100, 4))
	c.add("tap0", us, rd(108, 2)) // overtook the READ at 104
	c.add("tap0", us, rd(104, 4))
	c.add("tap0", 100*us, a.build(a.resp, &frames.Packet{Opcode: wire.ReadResponseFirst, PSN: 100, Payload: make([]byte, 256)})) // past the window
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, ReorderWindow: 20 * us})
	assert.Equal(t, []chkWant{}, chkViolations(rep))
	assert.Positive(t, rep.Reordered)
}
