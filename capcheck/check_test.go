package capcheck_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/tensor"
)

// Golden captures of the checker live in testdata/check. Rewrite the
// hand-built ones, and agg_sum.pcapng from netreduce_clean.pcapng, with
//
//	go test ./capcheck -run TestCheckGolden -update
//
// The emulator's captures (netreduce_clean, netreduce_faults, ring_fault)
// are written by the conformance package's TestCheckEmulatorCaptures
// -update, since this package never runs the emulator: rewrite those
// first, then agg_sum.pcapng here.
const chkDir = "../testdata/check"

var chkUpdate = flag.Bool("update", false, "rewrite the hand-built golden captures in testdata/check")

// ---- hand-built captures ----

// chkHost i has MAC 02:00:00:00:00:0i and IP 10.0.0.i.
func chkHost(i int) (net.HardwareAddr, netip.Addr) {
	return net.HardwareAddr{2, 0, 0, 0, 0, byte(i)}, netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})
}

// chkConn builds the frames of one RC connection: SEND_ONLY requests from
// host a to host b (destination QPN reqQP) and ACK/NAKs back (respQP).
type chkConn struct {
	req, resp *frames.Builder
	buf       []byte
}

func chkNewConn(t testing.TB, a, b int, reqQP, respQP uint32) *chkConn {
	ma, ia := chkHost(a)
	mb, ib := chkHost(b)
	req, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib,
		SrcPort: frames.UDPSourcePort(respQP), DestQP: reqQP})
	require.NoError(t, err)
	resp, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mb, DstMAC: ma, SrcIP: ib, DstIP: ia,
		SrcPort: frames.UDPSourcePort(reqQP), DestQP: respQP})
	require.NoError(t, err)
	return &chkConn{req: req, resp: resp, buf: make([]byte, 2048)}
}

func (c *chkConn) build(b *frames.Builder, p *frames.Packet) []byte {
	n, err := b.Build(c.buf, p)
	if err != nil {
		panic(err)
	}
	return append([]byte(nil), c.buf[:n]...)
}

func (c *chkConn) data(psn uint32, ackReq bool) []byte {
	pay := bytes.Repeat([]byte{byte(psn)}, 32)
	return c.build(c.req, &frames.Packet{Opcode: wire.SendOnly, PSN: psn, AckReq: ackReq, Payload: pay})
}

func (c *chkConn) ack(psn uint32) []byte {
	return c.build(c.resp, &frames.Packet{Opcode: wire.Acknowledge, PSN: psn, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK}})
}

func (c *chkConn) nak(psn uint32) []byte {
	return c.build(c.resp, &frames.Packet{Opcode: wire.Acknowledge, PSN: psn, AETH: frames.AETHFields{Syndrome: wire.SyndromeNAKPSNSeqErr}})
}

const chkGhost = "inaemu: fault=loss (not delivered)"

// chkCapture collects frames on named interfaces with a running clock.
type chkCapture struct {
	names []string
	now   int64
	recs  []chkRec
}

type chkRec struct {
	iface    string
	ns       int64
	data     []byte
	comments []string
}

func chkNewCapture(names ...string) *chkCapture {
	return &chkCapture{names: names, now: 1_000_000}
}

// add appends a frame dt after the previous one.
func (c *chkCapture) add(iface string, dt time.Duration, frame []byte, comments ...string) {
	c.now += int64(dt)
	c.recs = append(c.recs, chkRec{iface, c.now, frame, comments})
}

func (c *chkCapture) pcapng(t testing.TB) []byte {
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, c.names...)
	require.NoError(t, err)
	for _, r := range c.recs {
		require.NoError(t, w.Write(r.iface, r.ns, r.data, r.comments...))
	}
	require.NoError(t, w.Flush())
	return buf.Bytes()
}

func (c *chkCapture) pcap(t *testing.T) []byte {
	var buf bytes.Buffer
	w := pcapgo.NewWriterNanos(&buf)
	require.NoError(t, w.WriteFileHeader(65536, layers.LinkTypeEthernet))
	for _, r := range c.recs {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, r.ns).UTC(), CaptureLength: len(r.data), Length: len(r.data)}
		require.NoError(t, w.WritePacket(ci, r.data))
	}
	return buf.Bytes()
}

const us = time.Microsecond

// chkICRCCapture: classic pcap, one frame corrupted on the wire; the gap
// it leaves is excused (it may have been the missing PSN).
func chkICRCCapture(t *testing.T) []byte {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, a.data(100, false))
	c.add("tap0", us, a.data(101, false))
	bad := a.data(102, false)
	bad[len(bad)-10] ^= 0x01 // a payload bit
	c.add("tap0", us, bad)
	c.add("tap0", us, a.data(103, true))
	c.add("tap0", us, a.nak(102))
	c.add("tap0", us, a.data(102, false))
	c.add("tap0", us, a.data(103, true))
	c.add("tap0", us, a.ack(103))
	return c.pcap(t)
}

// chkPSNOrderCapture: a skip ahead without NAK; a retransmission that does
// not start at the NAK's PSN; a timeout retransmission of an acknowledged
// PSN.
func chkPSNOrderCapture(t *testing.T) []byte {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	for p := uint32(100); p <= 104; p++ {
		c.add("tap0", us, a.data(p, false)) // frames 0-4
	}
	c.add("tap0", us, a.data(106, false)) // 5: skips 105
	c.add("tap0", us, a.nak(105))         // 6
	c.add("tap0", us, a.data(105, false)) // 7
	c.add("tap0", us, a.data(106, true))  // 8
	c.add("tap0", us, a.ack(106))         // 9

	b := chkNewConn(t, 3, 4, 0x22, 0x21)
	for p := uint32(200); p <= 207; p++ {
		c.add("tap0", us, b.data(p, p == 207)) // 10-17
	}
	c.add("tap0", us, b.nak(204))             // 18
	c.add("tap0", 100*us, b.data(202, false)) // 19: not from 204
	for p := uint32(203); p <= 207; p++ {
		c.add("tap0", us, b.data(p, p == 207)) // 20-24
	}
	c.add("tap0", us, b.ack(207)) // 25

	d := chkNewConn(t, 5, 6, 0x32, 0x31)
	for p := uint32(300); p <= 307; p++ {
		c.add("tap0", us, d.data(p, p == 303 || p == 307)) // 26-33
	}
	c.add("tap0", us, d.ack(303))             // 34
	c.add("tap0", 200*us, d.data(302, false)) // 35: 302 was acknowledged
	for p := uint32(303); p <= 307; p++ {
		c.add("tap0", us, d.data(p, p == 307)) // 36-40
	}
	c.add("tap0", us, d.ack(307)) // 41
	return c.pcapng(t)
}

// chkNAKPSNCapture: taps and a receiver's link; NAKs past the first
// missing PSN, behind an ACK, and a NAK for a PSN lost after the tap (no
// violation).
func chkNAKPSNCapture(t *testing.T) []byte {
	c := chkNewCapture("tap0", "h8-in", "h8-out")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, a.data(100, false))           // 0
	c.add("tap0", us, a.data(101, false))           // 1
	c.add("tap0", us, a.data(102, false), chkGhost) // 2: lost before the tap
	c.add("tap0", us, a.data(103, false))           // 3
	c.add("tap0", us, a.data(104, true))            // 4
	c.add("tap0", us, a.nak(103))                   // 5: 102 is missing
	c.add("tap0", 100*us, a.data(102, false))       // 6: timeout retransmission
	c.add("tap0", us, a.data(103, false))           // 7
	c.add("tap0", us, a.data(104, true))            // 8
	c.add("tap0", us, a.ack(104))                   // 9

	b := chkNewConn(t, 3, 4, 0x22, 0x21)
	for p := uint32(200); p <= 204; p++ {
		c.add("tap0", us, b.data(p, p == 204)) // 10-14
	}
	c.add("tap0", us, b.nak(202)) // 15: 202 lost after the tap: fine
	for p := uint32(202); p <= 204; p++ {
		c.add("tap0", us, b.data(p, p == 204)) // 16-18
	}
	c.add("tap0", us, b.ack(204)) // 19

	d := chkNewConn(t, 5, 6, 0x32, 0x31)
	for p := uint32(300); p <= 303; p++ {
		c.add("tap0", us, d.data(p, p == 303)) // 20-23
	}
	c.add("tap0", us, d.ack(303))         // 24
	c.add("tap0", us, d.data(304, false)) // 25
	c.add("tap0", us, d.data(305, true))  // 26
	c.add("tap0", us, d.nak(303))         // 27: 303 was acknowledged
	c.add("tap0", us, d.ack(305))         // 28

	// The responder's link: it receives what h8-out shows, in order.
	e := chkNewConn(t, 7, 8, 0x42, 0x41)
	c.add("h8-out", us, e.data(400, false)) // 29
	c.add("h8-out", us, e.data(402, false)) // 30: 401 lost upstream
	c.add("h8-in", us, e.nak(401))          // 31: fine
	c.add("h8-out", us, e.data(403, false)) // 32: dropped (out of sequence)
	c.add("h8-out", us, e.data(401, false)) // 33: expected PSN now 402
	c.add("h8-out", us, e.data(404, true))  // 34
	c.add("h8-in", us, e.nak(404))          // 35: should be 402
	c.add("h8-out", us, e.data(402, false)) // 36
	c.add("h8-out", us, e.data(403, false)) // 37
	c.add("h8-out", us, e.data(404, true))  // 38
	c.add("h8-in", us, e.ack(404))          // 39
	return c.pcapng(t)
}

// chkExtraNAKCapture: a second NAK for an unrepaired gap, and two NAKs
// for two gaps (no violation).
func chkExtraNAKCapture(t *testing.T) []byte {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, a.data(100, false))           // 0
	c.add("tap0", us, a.data(101, false))           // 1
	c.add("tap0", us, a.data(102, false), chkGhost) // 2
	c.add("tap0", us, a.data(103, false))           // 3
	c.add("tap0", us, a.data(104, false))           // 4
	c.add("tap0", us, a.nak(102))                   // 5
	c.add("tap0", us, a.data(105, true))            // 6: in flight
	c.add("tap0", us, a.nak(102))                   // 7: 102 not repaired
	for p := uint32(102); p <= 105; p++ {
		c.add("tap0", us, a.data(p, p == 105)) // 8-11
	}
	c.add("tap0", us, a.ack(105)) // 12

	b := chkNewConn(t, 3, 4, 0x22, 0x21)
	c.add("tap0", us, b.data(200, false))           // 13
	c.add("tap0", us, b.data(201, false))           // 14
	c.add("tap0", us, b.data(202, false), chkGhost) // 15
	c.add("tap0", us, b.data(203, false))           // 16
	c.add("tap0", us, b.data(204, false))           // 17
	c.add("tap0", us, b.nak(202))                   // 18
	c.add("tap0", us, b.data(202, false))           // 19
	c.add("tap0", us, b.data(203, false))           // 20
	c.add("tap0", us, b.data(204, false))           // 21
	c.add("tap0", us, b.data(205, false), chkGhost) // 22
	c.add("tap0", us, b.data(206, true))            // 23
	c.add("tap0", us, b.nak(205))                   // 24: a new gap
	c.add("tap0", us, b.data(205, false))           // 25
	c.add("tap0", us, b.data(206, true))            // 26
	c.add("tap0", us, b.ack(206))                   // 27
	return c.pcapng(t)
}

// chkACKRegressCapture: an ACK behind an earlier one (after a re-ACK,
// which is fine), and the same on an unpaired response stream.
func chkACKRegressCapture(t *testing.T) []byte {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	for p := uint32(100); p <= 103; p++ {
		c.add("tap0", us, a.data(p, p == 103)) // 0-3
	}
	c.add("tap0", us, a.ack(103)) // 4
	for p := uint32(104); p <= 107; p++ {
		c.add("tap0", us, a.data(p, p == 107)) // 5-8
	}
	c.add("tap0", us, a.ack(107)) // 9
	c.add("tap0", us, a.ack(107)) // 10: re-ACK
	c.add("tap0", us, a.ack(105)) // 11: behind 107

	u := chkNewConn(t, 8, 9, 0x52, 0x51)
	c.add("tap0", us, u.ack(50)) // 12
	c.add("tap0", us, u.ack(49)) // 13: behind 50, unpaired
	return c.pcapng(t)
}

// ---- a result changed ----

// chkAggSumCapture: the first frames of the clean NetReduce capture with
// one result's data changed and its ICRC recomputed. It returns the
// capture and the changed frame's index.
func chkAggSumCapture(t *testing.T, clean string) ([]byte, int) {
	recs, names, err := pcapio.ReadAllNamed(clean)
	require.NoError(t, err)
	recs = recs[:300]
	changed := -1
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, names...)
	require.NoError(t, err)
	for i, r := range recs {
		data := append([]byte(nil), r.Data...)
		var v frames.View
		if changed < 0 && strings.HasSuffix(names[r.Info.InterfaceIndex], "-out") && v.Parse(data) == nil && v.Opcode() == wire.WriteMiddle && i > 100 {
			data[v.PayloadOffset()+6] ^= 0x20 // element 1, a mantissa bit
			require.NoError(t, frames.FixICRC(data))
			changed = i
		}
		require.NoError(t, w.WriteIndex(r.Info.InterfaceIndex, r.Info.Timestamp.UnixNano(), data, r.Comments...))
	}
	require.NoError(t, w.Flush())
	require.Positive(t, changed)
	return buf.Bytes(), changed
}

// ---- goldens ----

type chkWant struct {
	Rule  string
	Frame int
	PSN   uint32
}

func chkViolations(r *capcheck.Report) []chkWant {
	out := []chkWant{}
	for _, v := range r.Violations {
		// Frame is Wireshark's number, Index decode's.
		if v.Frame != v.Index+1 || v.Interface == "" {
			panic(fmt.Sprintf("violation %+v: frame must be index+1 and name its interface", v))
		}
		out = append(out, chkWant{v.Rule, v.Index, v.PSN})
	}
	return out
}

type chkGolden struct {
	file string
	make func(t *testing.T) []byte // nil: the emulator's, written by the conformance package
	want []chkWant
	// exactBytes: regenerating gives the same bytes (hand-built captures).
	exactBytes bool
}

func chkGoldens() []chkGolden {
	return []chkGolden{
		// The emulator's (see chkDir).
		{file: "netreduce_clean.pcapng", want: []chkWant{}},
		{file: "netreduce_faults.pcapng", want: []chkWant{}},
		{file: "ring_fault.pcapng", want: []chkWant{}},
		{file: "icrc.pcap", make: chkICRCCapture, exactBytes: true, want: []chkWant{{"icrc", 2, 102}}},
		{file: "psn_order.pcapng", make: chkPSNOrderCapture, exactBytes: true,
			// Frame 5's skip of PSN 105 is NAK'd by the responder: from a
			// single tap that is a loss before the capture, not a skip
			// (TestCheckPSNOrderVantage declares the tap a sender's).
			want: []chkWant{{"psn-order", 19, 202}, {"psn-order", 35, 302}}},
		{file: "nak_psn.pcapng", make: chkNAKPSNCapture, exactBytes: true,
			want: []chkWant{{"nak-psn", 5, 103}, {"nak-psn", 27, 303}, {"nak-psn", 35, 404}}},
		{file: "extra_nak.pcapng", make: chkExtraNAKCapture, exactBytes: true, want: []chkWant{{"extra-nak", 7, 102}}},
		{file: "ack_regress.pcapng", make: chkACKRegressCapture, exactBytes: true,
			want: []chkWant{{"ack-regress", 11, 105}, {"ack-regress", 13, 49}}},
	}
}

func chkGoldenPath(name string) string { return filepath.Join(chkDir, name) }

// TestCheckGolden checks every golden capture and asserts exactly which
// violations (rule, frame, PSN) are reported.
func TestCheckGolden(t *testing.T) {
	if *chkUpdate {
		require.NoError(t, os.MkdirAll(chkDir, 0o755))
		for _, g := range chkGoldens() {
			if g.make != nil {
				require.NoError(t, os.WriteFile(chkGoldenPath(g.file), g.make(t), 0o644))
			}
		}
		b, _ := chkAggSumCapture(t, chkGoldenPath("netreduce_clean.pcapng"))
		require.NoError(t, os.WriteFile(chkGoldenPath("agg_sum.pcapng"), b, 0o644))
	}
	for _, g := range chkGoldens() {
		t.Run(g.file, func(t *testing.T) {
			path := chkGoldenPath(g.file)
			rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
			require.NoError(t, err, "run go test ./capcheck -run TestCheckGolden -update to create it")
			assert.Equal(t, g.want, chkViolations(rep))
			assert.Equal(t, len(g.want) == 0, rep.Conforms)
			if g.exactBytes {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				assert.True(t, bytes.Equal(b, g.make(t)), "golden differs from its generator: run with -update")
			}
		})
	}
}

func TestCheckGoldenNetReduceClean(t *testing.T) {
	rep, err := capcheck.CheckFile(chkGoldenPath("netreduce_clean.pcapng"), capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Violations)
	assert.Positive(t, rep.AggChecked, "every result is checked against the sum")
	assert.Zero(t, rep.AggUnchecked)
	assert.Equal(t, 4, rep.Connections)
	assert.Equal(t, []string{"port0", "port1", "port2", "port3"}, rep.VantagePoints)
	// Each connection is seen from its sender's link and its receiver's
	// link, paired both times.
	pos := map[string]int{}
	for _, s := range rep.Streams {
		pos[s.Position]++
		require.NotNil(t, s.QP)
		require.NotNil(t, s.RespQP, "%+v", s)
	}
	assert.Equal(t, map[string]int{"sender": 4, "receiver": 4}, pos)
}

// TestCheckGoldenNetReduceFaults: loss, drops, duplicates, reordering on
// the switch's egress and corruption. The frames the faults corrupted
// (and delivered) have bad ICRCs, counted as injected.
func TestCheckGoldenNetReduceFaults(t *testing.T) {
	path := chkGoldenPath("netreduce_faults.pcapng")
	recs, err := pcapio.ReadAll(path)
	require.NoError(t, err)
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	// The corrupted frames: those with a corrupt comment, and byte-exact
	// copies of them further on (the switch forwards an ACK unchanged).
	var corrupted []int
	var bad [][]byte
	ghosts := 0
	for i, r := range recs {
		switch {
		case len(r.Comments) > 0 && strings.Contains(r.Comments[0], "(not delivered)"):
			ghosts++
		case len(r.Comments) > 0 && strings.Contains(r.Comments[0], "corrupt"):
			corrupted = append(corrupted, i)
			bad = append(bad, r.Data)
		default:
			for _, b := range bad {
				if bytes.Equal(b, r.Data) {
					corrupted = append(corrupted, i)
					break
				}
			}
		}
	}
	// The faults are injected, not violations: three annotated frames
	// and the ACK the switch forwarded unchanged. Everything else
	// (recovery included) conforms.
	assert.Empty(t, rep.Violations)
	assert.Len(t, corrupted, 4)
	assert.Equal(t, 3, rep.InjectedKinds["corrupt"])
	assert.Equal(t, 1, rep.InjectedKinds["corrupt (forwarded)"])
	assert.Equal(t, ghosts, rep.Ghosts)
	assert.Positive(t, rep.Ghosts)
	assert.Equal(t, 4, rep.BadICRC)
	assert.Positive(t, rep.AggChecked)
	assert.Positive(t, rep.RetransLatency.Count)
	assert.Positive(t, rep.NAKGenLatency.Count)
	assert.Positive(t, rep.NAKRespLatency.Count)
	retx := 0
	naks := map[string]int{}
	for _, s := range rep.Streams {
		retx += s.Retransmissions
		naks[s.Position] += s.NAKs
	}
	assert.Positive(t, retx)
	// NAKs were judged from the sender's link and from the receiver's link
	// without a false nak-psn or extra-nak.
	assert.Positive(t, naks["sender"])
	assert.Positive(t, naks["receiver"])
}

func TestCheckGoldenRing(t *testing.T) {
	rep, err := capcheck.CheckFile(chkGoldenPath("ring_fault.pcapng"), capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Violations)
	assert.Zero(t, rep.AggChecked+rep.AggUnchecked, "a ring job carries no INA traffic")
	assert.Positive(t, rep.Ghosts)
	assert.Positive(t, rep.RetransLatency.Count)
}

// TestCheckGoldenGoBackN: the roce package's two-host capture (interfaces
// hostA and hostB, each its sender's own transmissions) conforms.
func TestCheckGoldenGoBackN(t *testing.T) {
	rep, err := capcheck.CheckFile("../testdata/roce_gbn_drop_psn104.pcapng", capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, 22, rep.Frames)
	assert.Equal(t, 1, rep.Connections)
	assert.Equal(t, []string{"hostA", "hostB"}, rep.VantagePoints)
	assert.Equal(t, 8, rep.RetransLatency.Count, "PSNs 104..111 were sent twice")
}

func TestCheckGoldenAggSum(t *testing.T) {
	clean := chkGoldenPath("netreduce_clean.pcapng")
	want, changed := chkAggSumCapture(t, clean)
	path := chkGoldenPath("agg_sum.pcapng")
	b, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./capcheck -run TestCheckGolden -update to create it")
	assert.True(t, bytes.Equal(want, b), "golden differs from its generator: run with -update")
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1)
	v := rep.Violations[0]
	assert.Equal(t, "agg-sum", v.Rule)
	assert.Equal(t, changed, v.Index)
	assert.Equal(t, changed+1, v.Frame)
	assert.Contains(t, v.Detail, "element 1")
	assert.Zero(t, rep.BadICRC, "the changed result carries a good ICRC")
	assert.Positive(t, rep.AggChecked)
	// The same capture read as i32 fails everywhere: the dtype matters.
	rep, err = capcheck.CheckFile(path, capcheck.CheckOptions{DType: tensor.I32})
	require.NoError(t, err)
	assert.Greater(t, len(rep.Violations), 10)
}

// ---- options and corner cases (in memory) ----

func chkRecords(t testing.TB, c *chkCapture) ([]pcapio.Record, []string) {
	path := filepath.Join(t.TempDir(), "c.pcapng")
	require.NoError(t, os.WriteFile(path, c.pcapng(t), 0o644))
	recs, err := pcapio.ReadAll(path)
	require.NoError(t, err)
	return recs, c.names
}

// chkPairCapture: two request streams between the same hosts, told
// apart by their PSN spaces (100.. and 200..); QP 0x12's responder NAKs a
// PSN past the first missing one.
func chkPairCapture(t *testing.T) *chkCapture {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	b := chkNewConn(t, 1, 2, 0x22, 0x21)
	for p := uint32(100); p <= 104; p++ {
		c.add("tap0", us, a.data(p, false)) // 0-4
	}
	c.add("tap0", us, a.nak(107)) // 5: nothing after 104 was sent
	for p := uint32(200); p <= 202; p++ {
		c.add("tap0", us, b.data(p, p == 202)) // 6-8
	}
	c.add("tap0", us, b.ack(202)) // 9
	return c
}

func TestCheckPair(t *testing.T) {
	recs, names := chkRecords(t, chkPairCapture(t))
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []chkWant{{"nak-psn", 5, 107}}, chkViolations(rep), "paired by PSN space")
	assert.Equal(t, 2, rep.Connections)
	assert.Empty(t, rep.Unpaired)

	// Overlapping PSN spaces: the PSNs do not tell the responses apart,
	// but the UDP source ports do (rxe's, hashed from each side's QPN, as
	// chkNewConn builds them): the NAK past everything sent is found.
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	b := chkNewConn(t, 1, 2, 0x22, 0x21)
	for p := uint32(100); p <= 104; p++ {
		c.add("tap0", us, a.data(p, false))
		c.add("tap0", us, b.data(p, false))
	}
	c.add("tap0", us, a.nak(107))
	c.add("tap0", us, b.ack(104))
	recs2, names2 := chkRecords(t, c)
	rep = capcheck.Check(recs2, capcheck.CheckOptions{Interfaces: names2})
	assert.Equal(t, []chkWant{{"nak-psn", 10, 107}}, chkViolations(rep))
	assert.Equal(t, 2, rep.Connections)
	assert.Empty(t, rep.Unpaired)
	assert.Empty(t, rep.Unchecked)
	require.Len(t, rep.Streams, 2)
	for _, s := range rep.Streams {
		require.NotNil(t, s.QP)
		require.NotNil(t, s.RespQP)
		assert.Equal(t, *s.QP-1, *s.RespQP, "paired by the UDP source ports")
	}

	p, err := capcheck.ParseQPPair("10.0.0.1,10.0.0.2,0x12=0x11")
	require.NoError(t, err)
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, Pairs: []capcheck.QPPair{p}})
	assert.Equal(t, []chkWant{{"nak-psn", 5, 107}}, chkViolations(rep))
	// With 0x12 named, 0x22 is the only request stream left and pairs
	// automatically with 0x21.
	assert.Equal(t, 2, rep.Connections)
	require.Len(t, rep.Streams, 2)
	for _, s := range rep.Streams {
		require.NotNil(t, s.QP)
		require.NotNil(t, s.RespQP)
		assert.Equal(t, *s.QP-1, *s.RespQP)
	}
}

func TestParseQPPair(t *testing.T) {
	p, err := capcheck.ParseQPPair("10.0.0.1,10.0.0.2,0x12=17")
	require.NoError(t, err)
	assert.Equal(t, capcheck.QPPair{Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), ReqQP: 0x12, RespQP: 17}, p)
	assert.Equal(t, "10.0.0.1,10.0.0.2,0x12=0x11", p.String())
	p, err = capcheck.ParseQPPair("fd00::1,fd00::2,1=2")
	require.NoError(t, err)
	assert.True(t, p.Src.Is6())
	for _, bad := range []string{"", "10.0.0.1,10.0.0.2", "10.0.0.1,10.0.0.2,0x12", "x,10.0.0.2,1=2", "10.0.0.1,y,1=2",
		"10.0.0.1,10.0.0.2,0x1000000=1", "10.0.0.1,10.0.0.2,1=-1", "10.0.0.1,10.0.0.2,1=2,3"} {
		_, err := capcheck.ParseQPPair(bad)
		assert.Error(t, err, bad)
	}
}

// TestCheckGhosts: frames a fault dropped are counted and never judged: a
// corrupted ghost is no ICRC violation, a ghost NAK past every PSN sent is
// no nak-psn, a ghost is no repair of a gap.
func TestCheckGhosts(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, a.data(100, false)) // 0
	bad := a.data(101, false)
	bad[len(bad)-8] ^= 1
	c.add("tap0", us, bad, chkGhost)                // 1
	c.add("tap0", us, a.nak(101))                   // 2
	c.add("tap0", us, a.data(101, false), chkGhost) // 3: not a repair
	c.add("tap0", us, a.nak(150), chkGhost)         // 4
	c.add("tap0", us, a.nak(101))                   // 5: extra-nak
	c.add("tap0", us, a.data(101, true))            // 6
	c.add("tap0", us, a.ack(101))                   // 7
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []chkWant{{"extra-nak", 5, 101}}, chkViolations(rep))
	assert.Equal(t, 8, rep.Frames)
	assert.Equal(t, 3, rep.Ghosts)
	assert.Equal(t, 5, rep.RoCEFrames)
	assert.Zero(t, rep.BadICRC)
}

// TestCheckPSNOrderVantage: declared a sender's capture, the tap judges
// the skip of frame 5 too, without an inference.
func TestCheckPSNOrderVantage(t *testing.T) {
	rep, err := capcheck.CheckFile(chkGoldenPath("psn_order.pcapng"), capcheck.CheckOptions{Vantage: capcheck.VantageSender})
	require.NoError(t, err)
	assert.Equal(t, []chkWant{{"psn-order", 5, 106}, {"psn-order", 19, 202}, {"psn-order", 35, 302}}, chkViolations(rep))
	for _, v := range rep.Violations {
		assert.Empty(t, v.Inferred)
	}
	assert.Empty(t, rep.Inferences)
	// By default the three connections' positions are inferred: the
	// first from a loss before the tap, the second from one after it,
	// the third (no loss) taken as the sender's side.
	rep, err = capcheck.CheckFile(chkGoldenPath("psn_order.pcapng"), capcheck.CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Inferences, 2)
	assert.Contains(t, rep.Inferences[0], "10.0.0.1→10.0.0.2 qp 0x000012: the receiver side: the NAK of frame 7 asks for PSN 105")
	assert.Contains(t, rep.Inferences[1], "10.0.0.3→10.0.0.4 qp 0x000022: the sender side: PSN 204 passed here before the NAK of frame 19")
	require.Len(t, rep.Violations, 2)
	assert.Contains(t, rep.Violations[0].Inferred, "the sender side")
	assert.Contains(t, rep.Violations[1].Inferred, "no loss evidence")
}

// TestCheckDownstream: a tap behind a loss sees a hole that is not the
// sender's doing: inferred from the NAK (or declared), psn-order is not
// applied there; declared a sender's, the hole is a skip.
func TestCheckDownstream(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, a.data(100, false))
	c.add("tap0", us, a.data(101, false))
	c.add("tap0", us, a.data(103, false)) // 102 lost before the tap
	c.add("tap0", us, a.nak(102))
	c.add("tap0", us, a.data(102, false))
	c.add("tap0", us, a.data(103, true))
	c.add("tap0", us, a.ack(103))
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, Vantage: capcheck.VantageSender})
	assert.Equal(t, []chkWant{{"psn-order", 2, 103}}, chkViolations(rep))
	assert.Equal(t, "tap-sender", rep.Streams[0].Position)
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Empty(t, rep.Violations)
	assert.Equal(t, "tap-receiver", rep.Streams[0].Position)
	assert.Len(t, rep.Inferences, 1)
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, Vantage: capcheck.VantageReceiver})
	assert.Empty(t, rep.Violations)
	assert.Empty(t, rep.Inferences)
	assert.Equal(t, "tap-receiver", rep.Streams[0].Position)
	assert.Equal(t, 1, rep.NAKGenLatency.Count)
	assert.Equal(t, int64(us), rep.NAKGenLatency.MinNS)
}

// TestCheckInFlight: a retransmission of an acknowledged PSN captured
// right after the ACK may have left before the ACK arrived; an
// in-flight window of zero judges it by capture order alone.
func TestCheckInFlight(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	for p := uint32(100); p <= 105; p++ {
		c.add("tap0", us, a.data(p, p == 103 || p == 105))
	}
	c.add("tap0", us, a.ack(103))
	c.add("tap0", 2*us, a.data(102, false)) // 5: timeout retransmission crossing the ACK
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Empty(t, rep.Violations)
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, InFlight: -1})
	assert.Equal(t, []chkWant{{"psn-order", 7, 102}}, chkViolations(rep))
}

// TestCheckLatencies: the roce capture's NAK and retransmission, seen
// from one tap holding both directions.
func TestCheckLatencies(t *testing.T) {
	recs, err := pcapio.ReadAll("../testdata/roce_gbn_drop_psn104.pcapng")
	require.NoError(t, err)
	for i := range recs {
		recs[i].Info.InterfaceIndex = 0 // one tap, after the loss of PSN 104
		recs[i].Comments = nil
	}
	recs[4].Comments = []string{"dropped before the tap (not delivered)"}
	rep := capcheck.Check(recs, capcheck.CheckOptions{})
	assert.Empty(t, rep.Violations)
	assert.Equal(t, []string{"if0"}, rep.VantagePoints)
	require.Len(t, rep.Streams, 1)
	s := rep.Streams[0]
	assert.Equal(t, 19, s.DataPackets)
	assert.Equal(t, 8, s.Retransmissions)
	assert.Equal(t, 1, s.NAKs)
	assert.Equal(t, 1, s.ACKs)
	nakAt := recs[12].Info.Timestamp.UnixNano()
	assert.Equal(t, capcheck.LatencySummary{Count: 1, MinNS: recs[13].Info.Timestamp.UnixNano() - nakAt,
		MedianNS: recs[13].Info.Timestamp.UnixNano() - nakAt, MaxNS: recs[13].Info.Timestamp.UnixNano() - nakAt}, rep.NAKRespLatency)
	gen := nakAt - recs[5].Info.Timestamp.UnixNano() // 105 revealed the gap
	assert.Equal(t, capcheck.LatencySummary{Count: 1, MinNS: gen, MedianNS: gen, MaxNS: gen}, rep.NAKGenLatency)
	assert.Equal(t, 8, rep.RetransLatency.Count)
	assert.Equal(t, recs[13].Info.Timestamp.UnixNano()-recs[4].Info.Timestamp.UnixNano(), rep.RetransLatency.MinNS)
}

func TestCheckJSONShape(t *testing.T) {
	rep := capcheck.Check(nil, capcheck.CheckOptions{})
	b, err := json.Marshal(rep)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(b, &m))
	assert.Equal(t, []any{}, m["violations"], "no violations is [], not null")
	assert.Equal(t, true, m["conforms"])
	for _, k := range []string{"frames", "roce_frames", "bad_icrc", "malformed", "not_delivered", "connections", "agg_checked",
		"agg_unchecked", "agg_forwarded", "retransmission_latency", "nak_generation_latency", "nak_response_latency", "streams", "vantage_points"} {
		assert.Contains(t, m, k)
	}
	assert.NotContains(t, m, "file")
}

// TestCheckMalformed: a frame that looks like RoCE but is broken is
// counted, and excuses a hole in the sender's stream like a bad ICRC.
func TestCheckMalformed(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, a.data(100, false))
	broken := a.data(101, false)
	c.add("tap0", us, broken[:40]) // IPv4 header promises more
	c.add("tap0", us, a.data(102, true))
	c.add("tap0", us, a.ack(102))
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Empty(t, rep.Violations)
	assert.Equal(t, 1, rep.Malformed)
	assert.Equal(t, 3, rep.RoCEFrames)
}

func TestCheckTextOutput(t *testing.T) {
	rep, err := capcheck.CheckFile(chkGoldenPath("psn_order.pcapng"), capcheck.CheckOptions{Vantage: capcheck.VantageSender})
	require.NoError(t, err)
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	// Frame numbers, interfaces and times as tshark shows them
	// (frame.number, frame.interface_name, frame.time_relative).
	assert.Equal(t, "psn-order frame 6 (tap0, 0.000005000s) qp 0x000012 psn 106: skips PSN 105 (expected PSN 105 next)", lines[0])
	assert.Equal(t, "psn-order frame 20 (tap0, 0.000118000s) qp 0x000022 psn 202: retransmission starts at PSN 202, but the NAK of frame 19 asks for PSN 204", lines[1])
	assert.Equal(t, "psn-order frame 36 (tap0, 0.000333000s) qp 0x000032 psn 302: retransmits PSN 302, already acknowledged up to PSN 303 (frame 35)", lines[2])
	assert.Contains(t, b.String(), "result       3 violations (psn-order 3)")
}

// TestCheckPacked: a frame marked as carrying a compressed payload (DSCP
// 10) whose payload, under a good ICRC, does not unpack is a packed
// violation; well-packed ones are counted; a corrupt one is an ICRC
// matter only.
func TestCheckPacked(t *testing.T) {
	ma, ia := chkHost(1)
	mb, ib := chkHost(2)
	req, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib,
		SrcPort: frames.UDPSourcePort(0x11), TClass: frames.CompressedDSCP << 2, DestQP: 0x12})
	require.NoError(t, err)
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	codec, err := inceptionn.New(10)
	require.NoError(t, err)
	good, err := codec.AppendPacked(nil, make([]byte, 256), nil)
	require.NoError(t, err)
	send := func(psn uint32, p []byte) []byte {
		return a.build(req, &frames.Packet{Opcode: wire.SendOnly, PSN: psn, AckReq: true, Payload: p})
	}
	c := chkNewCapture("tap0")
	c.add("tap0", us, send(100, good))
	c.add("tap0", us, a.ack(100))
	c.add("tap0", us, send(101, good[:len(good)-3])) // cut short: frame index 2
	c.add("tap0", us, a.ack(101))
	bad := send(102, good)
	bad[len(bad)-6] ^= 0x80 // corrupt on the wire: not unpacked, not judged as packed
	c.add("tap0", us, bad)
	c.add("tap0", us, a.nak(102))
	c.add("tap0", us, send(102, good))
	c.add("tap0", us, a.ack(102))
	fn := filepath.Join(t.TempDir(), "packed.pcap")
	require.NoError(t, os.WriteFile(fn, c.pcap(t), 0o644))
	rep, err := capcheck.CheckFile(fn, capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Equal(t, []chkWant{{"packed", 2, 101}, {"icrc", 4, 102}}, chkViolations(rep))
	assert.Equal(t, 3, rep.Compressed, "the good-ICRC marked frames")
	assert.Contains(t, rep.Violations[0].Detail, "does not unpack: not a packed INCEPTIONN payload: cut in group 6 of 8")
}
