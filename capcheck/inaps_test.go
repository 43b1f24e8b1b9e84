package capcheck_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// INA-PS frames are written here byte by byte from ATP's struct agghdr
// layout (bitmap u32, fan-in u8, flags u8, job u16, seq u16, aggregator
// u16, priority u8, level u8, 62 × int32, key u64, tensor length u32; all
// big-endian), not with frames/wire's setters, so that a mistake there
// cannot hide one here.

type ipsHdr struct {
	bitmap       uint32
	fanIn, flags uint8
	job, seq     uint16
	key          uint64
	vals         [62]int32
}

const (
	ipsACK       = 0x01
	ipsCollision = 0x02
	ipsReminder  = 0x06
)

func (h ipsHdr) bytes() []byte {
	b := make([]byte, 274)
	binary.BigEndian.PutUint32(b[0:], h.bitmap)
	b[4], b[5] = h.fanIn, h.flags
	binary.BigEndian.PutUint16(b[6:], h.job)
	binary.BigEndian.PutUint16(b[8:], h.seq)
	binary.BigEndian.PutUint16(b[10:], 7) // aggregator
	for i, v := range h.vals {
		binary.BigEndian.PutUint32(b[14+4*i:], uint32(v))
	}
	binary.BigEndian.PutUint64(b[262:], h.key)
	binary.BigEndian.PutUint32(b[270:], 4096)
	return b
}

func ipsMAC(n int) []byte { return []byte{0x02, 0, 0, 0, 0, byte(n)} }

// ipsIPv4 is an Ethernet and IPv4 header (host n's addresses 10.0.0.n)
// for a payload of n bytes.
func ipsIPv4(etherType uint16, proto byte, src, dst, n int) []byte {
	b := append(append(append([]byte{}, ipsMAC(dst)...), ipsMAC(src)...), byte(etherType>>8), byte(etherType))
	ip := make([]byte, 20)
	ip[0], ip[8], ip[9] = 0x45, 64, proto
	binary.BigEndian.PutUint16(ip[2:], uint16(20+n))
	copy(ip[12:], []byte{10, 0, 0, byte(src)})
	copy(ip[16:], []byte{10, 0, 0, byte(dst)})
	return append(b, ip...)
}

// ipsFrame is a 308-byte INA-PS frame from host src to host dst.
func ipsFrame(src, dst int, h ipsHdr) []byte {
	f := append(ipsIPv4(0x0700, 0xFD, src, dst, 274), h.bytes()...)
	if len(f) != 308 {
		panic(len(f))
	}
	return f
}

// ipsChannel is a reliable-channel datagram (UDP to port 4792): the
// 10-byte channel header, then h.
func ipsChannel(src, dst int, kind byte, chSeq uint32, h ipsHdr) []byte {
	pay := make([]byte, 10)
	pay[0] = kind
	binary.BigEndian.PutUint32(pay[2:], chSeq)
	pay = append(pay, h.bytes()...)
	udp := make([]byte, 8)
	binary.BigEndian.PutUint16(udp[0:], 50000)
	binary.BigEndian.PutUint16(udp[2:], 4792)
	binary.BigEndian.PutUint16(udp[4:], uint16(8+len(pay)))
	return append(append(ipsIPv4(0x0800, 17, src, dst, 8+len(pay)), udp...), pay...)
}

// ipsJob is a job of three workers (hosts 0..2, ports port0..port2) and a
// parameter server (host 3, port3) behind a star switch.
const ipsWorkers, ipsPS = 3, 3

// grad is worker w's gradient for seq: values that differ per worker,
// seq and element, some near the int32 limits so that the sum wraps.
func grad(w int, seq uint16) ipsHdr {
	h := ipsHdr{bitmap: 1 << w, fanIn: ipsWorkers, job: 1, seq: seq}
	for i := range h.vals {
		h.vals[i] = int32(1000*w + 10*int(seq) + i)
	}
	h.vals[61] = 0x7FFFFFF0 // three of them wrap
	return h
}

// sumOf is the result (or, with a partial's flags, the partial) over
// the workers in mask.
func sumOf(mask uint32, seq uint16, flags uint8) ipsHdr {
	h := ipsHdr{bitmap: mask, fanIn: ipsWorkers, flags: flags, job: 1, seq: seq}
	for w := range ipsWorkers {
		if mask&(1<<w) != 0 {
			g := grad(w, seq)
			for i := range h.vals {
				h.vals[i] += g.vals[i]
			}
		}
	}
	return h
}

type ipsRec struct {
	iface string
	frame []byte
}

// ipsExchange is a correct exchange of two fragments: every worker's
// gradient, the results to every worker, worker 1's seq 2 diverted to
// the parameter server as a raw gradient (Collision), a reminder's
// return of what the switch held of seq 1, and worker 2's seq 2
// retransmitted on the reliable channel.
func ipsExchange() []ipsRec {
	var recs []ipsRec
	for _, seq := range []uint16{1, 2} {
		for w := range ipsWorkers {
			recs = append(recs, ipsRec{fmt.Sprintf("port%d-in", w), ipsFrame(w, ipsPS, grad(w, seq))})
		}
		for w := range ipsWorkers {
			recs = append(recs, ipsRec{fmt.Sprintf("port%d-out", w), ipsFrame(ipsPS, w, sumOf(0b111, seq, ipsACK))})
		}
	}
	raw := grad(1, 2)
	raw.flags = ipsCollision
	recs = append(recs, ipsRec{"port3-out", ipsFrame(1, ipsPS, raw)})
	recs = append(recs, ipsRec{"port3-out", ipsFrame(ipsPS, ipsPS, sumOf(0b011, 1, ipsReminder))})
	recs = append(recs, ipsRec{"port2-in", ipsChannel(2, ipsPS, 1, 9, grad(2, 2))})
	return recs
}

var ipsNames = []string{"port0-in", "port0-out", "port1-in", "port1-out", "port2-in", "port2-out", "port3-in", "port3-out"}

// ipsCheck writes recs as a pcapng, 1µs apart, and checks the file.
func ipsCheck(t *testing.T, recs []ipsRec) (*capcheck.Report, string) {
	t.Helper()
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, ipsNames...)
	require.NoError(t, err)
	for i, r := range recs {
		require.NoError(t, w.Write(r.iface, int64(1_000_000+1000*i), r.frame))
	}
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "inaps.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text))
	return rep, text.String()
}

// frameOf is the Wireshark number of the first record matching f.
func frameOf(recs []ipsRec, f func(r ipsRec) bool) int {
	for i, r := range recs {
		if f(r) {
			return i + 1
		}
	}
	return 0
}

func TestINAPSCorrectExchangeConforms(t *testing.T) {
	rep, text := ipsCheck(t, ipsExchange())
	assert.Equal(t, "conforms", rep.Verdict, text)
	assert.True(t, rep.Conforms)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, 15, rep.INAPSFrames)
	assert.Equal(t, 6, rep.INAPSResults)
	assert.Equal(t, 2, rep.INAPSPartials)
	assert.Zero(t, rep.INAPSUnchecked)
	assert.Zero(t, rep.Malformed)
	assert.Contains(t, text, "  ina-ps       15 INA-PS frames: 6 results and 2 partials judged against their contributions' wrapping int32 sum, 0 not checked\n")
	assert.Contains(t, text, "  result       conforms\n")
}

// A result seen before the contributions (a merged capture's order) is
// judged when they are in.
func TestINAPSResultBeforeContributions(t *testing.T) {
	recs := ipsExchange()
	early := sumOf(0b111, 1, ipsACK)
	early.vals[3]++
	recs = append([]ipsRec{{"port0-out", ipsFrame(ipsPS, 0, early)}}, recs...)
	rep, text := ipsCheck(t, recs)
	require.Len(t, rep.Violations, 1, text)
	v := rep.Violations[0]
	assert.Equal(t, capcheck.RuleINAPSSum, v.Rule)
	assert.Equal(t, 1, v.Frame)
	assert.Contains(t, v.Detail, "value 3 is")
	assert.Equal(t, 7, rep.INAPSResults)
}

func TestINAPSResultOffByOne(t *testing.T) {
	recs := ipsExchange()
	bad := sumOf(0b111, 2, ipsACK)
	bad.vals[5]++
	n := frameOf(recs, func(r ipsRec) bool { return r.iface == "port2-out" && binary.BigEndian.Uint16(r.frame[34+8:]) == 2 })
	require.Positive(t, n)
	recs[n-1].frame = ipsFrame(ipsPS, 2, bad)
	rep, text := ipsCheck(t, recs)
	require.Len(t, rep.Violations, 1, text)
	v := rep.Violations[0]
	assert.Equal(t, capcheck.RuleINAPSSum, v.Rule)
	assert.Equal(t, n, v.Frame)
	assert.Equal(t, "port2-out", v.Interface)
	want := sumOf(0b111, 2, ipsACK).vals[5]
	assert.Equal(t, fmt.Sprintf("result of seq 2 (job 1, key 0) is not the wrapping int32 sum of the 3 workers' contributions (worker 0 frame 7, worker 1 frame 8, worker 2 frame 9): value 5 is %d, want %d", want+1, want), v.Detail)
	assert.Equal(t, "violations", rep.Verdict)
	assert.Contains(t, text, fmt.Sprintf("inaps-sum frame %d (port2-out, ", n))
	assert.NotContains(t, text, " qp ", "an INA-PS frame has no QP")
	assert.Contains(t, text, "result       1 violation (inaps-sum 1)")
}

func TestINAPSResultBitmapNotFull(t *testing.T) {
	recs := ipsExchange()
	bad := sumOf(0b111, 1, ipsACK)
	bad.bitmap = 0b011
	recs[3].frame = ipsFrame(ipsPS, 0, bad) // seq 1's first result
	rep, text := ipsCheck(t, recs)
	require.Len(t, rep.Violations, 1, text)
	assert.Equal(t, 4, rep.Violations[0].Frame)
	assert.Contains(t, rep.Violations[0].Detail, "has bitmap 0x3, want the full mask 0x7 of the job's 3 workers")
}

// A contribution lost before the capture point leaves its results not
// checked: the verdict is undecidable, never conforms.
func TestINAPSMissingContributionNotChecked(t *testing.T) {
	recs := ipsExchange()
	var kept []ipsRec
	for _, r := range recs {
		if r.iface == "port0-in" && binary.BigEndian.Uint16(r.frame[34+8:]) == 2 {
			continue // worker 0's seq 2
		}
		kept = append(kept, r)
	}
	require.Len(t, kept, len(recs)-1)
	rep, text := ipsCheck(t, kept)
	assert.Empty(t, rep.Violations, text)
	assert.Equal(t, 3, rep.INAPSUnchecked, "seq 2's three results")
	assert.Equal(t, 3, rep.INAPSResults)
	assert.Equal(t, 2, rep.INAPSPartials, "the partials name workers 1 and 2, 0 and 1 of seq 1")
	assert.Equal(t, "undecidable", rep.Verdict)
	assert.False(t, rep.Conforms)
	assert.Contains(t, text, "  unchecked    3 INA-PS frames NOT CHECKED by inaps-sum and inaps-partial: ")
	assert.Contains(t, text, "result       undecidable")
}

// Copies of one gradient (a retransmission) must carry the same values.
func TestINAPSDifferingCopies(t *testing.T) {
	recs := ipsExchange()
	g := grad(2, 2)
	g.vals[10] = -4
	recs[len(recs)-1].frame = ipsChannel(2, ipsPS, 1, 9, g)
	rep, text := ipsCheck(t, recs)
	require.Len(t, rep.Violations, 1, text)
	v := rep.Violations[0]
	assert.Equal(t, capcheck.RuleINAPSSum, v.Rule)
	assert.Equal(t, len(recs), v.Frame)
	assert.Equal(t, fmt.Sprintf("worker 2's two copies of seq 2 (job 1, key 0) differ: value 10 is -4 here, %d in frame 9", grad(2, 2).vals[10]), v.Detail)
}

// A gradient retransmitted on the reliable channel is a contribution: a
// worker's gradient lost before the capture point and sent again there
// completes its fragment.
func TestINAPSChannelRetransmissionContributes(t *testing.T) {
	recs := ipsExchange()
	var kept []ipsRec
	for _, r := range recs {
		if r.iface == "port1-in" && binary.BigEndian.Uint16(r.frame[34+8:]) == 2 {
			// worker 1's seq 2 crosses the capture only on the channel,
			// after the results
			continue
		}
		kept = append(kept, r)
	}
	kept = append(kept, ipsRec{"port1-in", ipsChannel(1, ipsPS, 1, 4, grad(1, 2))})
	rep, text := ipsCheck(t, kept)
	assert.Equal(t, "conforms", rep.Verdict, text)
	assert.Equal(t, 6, rep.INAPSResults)
	assert.Zero(t, rep.INAPSUnchecked)

	// And it is judged: a result to worker 0 that leaves out worker 1's
	// retransmitted gradient is reported.
	bad := sumOf(0b101, 2, ipsACK)
	bad.bitmap = 0b111
	require.Equal(t, "port0-out", kept[8].iface)
	kept[8].frame = ipsFrame(ipsPS, 0, bad)
	rep, text = ipsCheck(t, kept)
	require.Len(t, rep.Violations, 1, text)
	assert.Equal(t, 9, rep.Violations[0].Frame)
	assert.Contains(t, rep.Violations[0].Detail, "worker 1 frame 15")

	// A channel parameter (kind 7) is a result too.
	kept = append(kept[:8:8], kept[9:]...)
	kept = append(kept, ipsRec{"port0-out", ipsChannel(ipsPS, 0, 7, 1, bad)})
	rep, text = ipsCheck(t, kept)
	require.Len(t, rep.Violations, 1, text)
	assert.Equal(t, len(kept), rep.Violations[0].Frame)
}

func TestINAPSPartialWrongSum(t *testing.T) {
	recs := ipsExchange()
	// The raw diverted gradient (one bit): it must equal worker 1's.
	n := frameOf(recs, func(r ipsRec) bool { return r.frame[34+5] == ipsCollision })
	raw := grad(1, 2)
	raw.flags, raw.vals[0] = ipsCollision, raw.vals[0]+1
	recs[n-1].frame = ipsFrame(1, ipsPS, raw)
	// The reminder's return of workers 0 and 1's partial sum.
	m := frameOf(recs, func(r ipsRec) bool { return r.frame[34+5] == ipsReminder })
	part := sumOf(0b011, 1, ipsReminder)
	part.vals[61] = sumOf(0b111, 1, ipsReminder).vals[61] // all three workers' sum there
	recs[m-1].frame = ipsFrame(ipsPS, ipsPS, part)
	rep, text := ipsCheck(t, recs)
	require.Len(t, rep.Violations, 2, text)
	assert.Equal(t, capcheck.RuleINAPSPartial, rep.Violations[0].Rule)
	assert.Equal(t, n, rep.Violations[0].Frame)
	assert.Contains(t, rep.Violations[0].Detail, "partial of seq 2 (job 1, key 0) is not the wrapping int32 sum of the contributions its bitmap 0x2 names (worker 1 frame 8): value 0 is")
	assert.Equal(t, capcheck.RuleINAPSPartial, rep.Violations[1].Rule)
	assert.Equal(t, m, rep.Violations[1].Frame)
	assert.Contains(t, rep.Violations[1].Detail, "bitmap 0x3 names (worker 0 frame 1, worker 1 frame 2): value 61 is")
	assert.Contains(t, text, "result       2 violations (inaps-partial 2)")
}

// A gradient seen leaving the switch is no contribution (only where it
// leaves its worker does it say what the worker sent): without the
// host → switch copies, the results are not checked.
func TestINAPSGradientOnlyFromHosts(t *testing.T) {
	var recs []ipsRec
	for w := range ipsWorkers {
		recs = append(recs, ipsRec{"port3-out", ipsFrame(w, ipsPS, grad(w, 1))})
	}
	recs = append(recs, ipsRec{"port0-out", ipsFrame(ipsPS, 0, sumOf(0b111, 1, ipsACK))})
	rep, text := ipsCheck(t, recs)
	assert.Empty(t, rep.Violations, text)
	assert.Equal(t, 1, rep.INAPSUnchecked)
	assert.Equal(t, "undecidable", rep.Verdict)
}

// The rules are listed with the others (JUnit testcases, docs).
func TestINAPSRulesListed(t *testing.T) {
	names := capcheck.RuleNames()
	assert.Contains(t, names, capcheck.RuleINAPSSum)
	assert.Contains(t, names, capcheck.RuleINAPSPartial)
}
