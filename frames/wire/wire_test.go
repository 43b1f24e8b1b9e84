package wire_test

// Table tests of the wire constants against docs/roce.md §1-§4 (and
// the test-vector manifest's opcode names). Expected values are written out
// here from those documents, never read back from the package.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames/wire"
)

// hdr names an extension header as docs/roce.md's "headers after BTH" column does.
type hdr string

const (
	RETH      hdr = "RETH"
	AETH      hdr = "AETH"
	ImmDt     hdr = "ImmDt"
	IETH      hdr = "IETH"
	DETH      hdr = "DETH"
	AtomicETH hdr = "AtomicETH"
	AtomicAck hdr = "AtomicAckETH"
	FETH      hdr = "FETH"
)

// hdrLen is each header's size (docs/roce.md §1; DETH 8 from ib_pack.h).
var hdrLen = map[hdr]int{RETH: 16, AETH: 4, ImmDt: 4, IETH: 4, DETH: 8, AtomicETH: 28, AtomicAck: 8, FETH: 4}

var hdrBit = map[hdr]wire.Ext{RETH: wire.ExtRETH, AETH: wire.ExtAETH, ImmDt: wire.ExtImmDt, IETH: wire.ExtIETH,
	DETH: wire.ExtDETH, AtomicETH: wire.ExtAtomicETH, AtomicAck: wire.ExtAtomicAckETH, FETH: wire.ExtFETH}

type opRow struct {
	op   uint8
	name string
	hdrs []hdr // in wire order
}

// rcOps is docs/roce.md §1's RC opcode table, names in the manifest's style
// (RC_ prefix, WITH_IMMEDIATE, RDMA_ on every RDMA READ/WRITE opcode).
var rcOps = []opRow{
	{0x00, "RC_SEND_FIRST", nil},
	{0x01, "RC_SEND_MIDDLE", nil},
	{0x02, "RC_SEND_LAST", nil},
	{0x03, "RC_SEND_LAST_WITH_IMMEDIATE", []hdr{ImmDt}},
	{0x04, "RC_SEND_ONLY", nil},
	{0x05, "RC_SEND_ONLY_WITH_IMMEDIATE", []hdr{ImmDt}},
	{0x06, "RC_RDMA_WRITE_FIRST", []hdr{RETH}},
	{0x07, "RC_RDMA_WRITE_MIDDLE", nil},
	{0x08, "RC_RDMA_WRITE_LAST", nil},
	{0x09, "RC_RDMA_WRITE_LAST_WITH_IMMEDIATE", []hdr{ImmDt}},
	{0x0A, "RC_RDMA_WRITE_ONLY", []hdr{RETH}},
	{0x0B, "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE", []hdr{RETH, ImmDt}},
	{0x0C, "RC_RDMA_READ_REQUEST", []hdr{RETH}},
	{0x0D, "RC_RDMA_READ_RESPONSE_FIRST", []hdr{AETH}},
	{0x0E, "RC_RDMA_READ_RESPONSE_MIDDLE", nil},
	{0x0F, "RC_RDMA_READ_RESPONSE_LAST", []hdr{AETH}},
	{0x10, "RC_RDMA_READ_RESPONSE_ONLY", []hdr{AETH}},
	{0x11, "RC_ACKNOWLEDGE", []hdr{AETH}},
	{0x12, "RC_ATOMIC_ACKNOWLEDGE", []hdr{AETH, AtomicAck}},
	{0x13, "RC_COMPARE_SWAP", []hdr{AtomicETH}},
	{0x14, "RC_FETCH_ADD", []hdr{AtomicETH}},
	{0x16, "RC_SEND_LAST_WITH_INVALIDATE", []hdr{IETH}},
	{0x17, "RC_SEND_ONLY_WITH_INVALIDATE", []hdr{IETH}},
	{0x1C, "RC_FLUSH", []hdr{FETH, RETH}},
	{0x1D, "RC_ATOMIC_WRITE", []hdr{RETH}},
}

// allOps is every opcode docs/roce.md names: the RC table; UC = 0x20 | the SEND
// and WRITE ops (0x00-0x0B); UD SEND ONLY (0x64) and with immediate (0x65),
// both with a DETH; and the CNP (0x81), which has no extension header.
func allOps() []opRow {
	ops := append([]opRow(nil), rcOps...)
	for _, r := range rcOps[:12] {
		ops = append(ops, opRow{0x20 | r.op, "UC_" + strings.TrimPrefix(r.name, "RC_"), r.hdrs})
	}
	return append(ops,
		opRow{0x64, "UD_SEND_ONLY", []hdr{DETH}},
		opRow{0x65, "UD_SEND_ONLY_WITH_IMMEDIATE", []hdr{DETH, ImmDt}},
		opRow{0x81, "CNP", nil})
}

func TestOpcodeNames(t *testing.T) {
	for _, r := range allOps() {
		assert.Equal(t, r.name, wire.Opcode(r.op).String(), "opcode %#02x", r.op)
	}
	// The named constants are the table's values.
	for op, name := range map[wire.Opcode]string{
		wire.SendFirst: "RC_SEND_FIRST", wire.SendOnly: "RC_SEND_ONLY", wire.WriteOnlyWithImm: "RC_RDMA_WRITE_ONLY_WITH_IMMEDIATE",
		wire.ReadRequest: "RC_RDMA_READ_REQUEST", wire.Acknowledge: "RC_ACKNOWLEDGE", wire.AtomicAcknowledge: "RC_ATOMIC_ACKNOWLEDGE",
		wire.CompareSwap: "RC_COMPARE_SWAP", wire.FetchAdd: "RC_FETCH_ADD", wire.SendOnlyWithInvalidate: "RC_SEND_ONLY_WITH_INVALIDATE",
		wire.Flush: "RC_FLUSH", wire.AtomicWrite: "RC_ATOMIC_WRITE", wire.UDSendOnly: "UD_SEND_ONLY", wire.CNP: "CNP",
	} {
		assert.Equal(t, name, op.String())
	}
}

// TestOpcodeKnown: exactly the opcodes docs/roce.md names are known; every other
// value gets a distinct name that carries its hex value.
func TestOpcodeKnown(t *testing.T) {
	named := map[uint8]string{}
	for _, r := range allOps() {
		named[r.op] = r.name
	}
	require.Len(t, named, 25+12+2+1)
	seen := map[string]uint8{}
	for i := 0; i < 256; i++ {
		op := wire.Opcode(i)
		_, want := named[uint8(i)]
		assert.Equal(t, want, op.Known(), "Known(%#02x)", i)
		s := op.String()
		if prev, dup := seen[s]; dup {
			t.Errorf("opcodes %#02x and %#02x are both named %q", prev, i, s)
		}
		seen[s] = uint8(i)
		if !want {
			assert.Contains(t, strings.ToLower(s), fmt.Sprintf("%02x", i), "unknown opcode %#02x", i)
			assert.Equal(t, wire.Ext(0), op.Ext(), "unknown opcode %#02x has no extension headers", i)
		}
	}
}

func extOf(hs []hdr) wire.Ext {
	var e wire.Ext
	for _, h := range hs {
		e |= hdrBit[h]
	}
	return e
}

// TestOpcodeExt: the extension headers of every opcode, their total size,
// the offset of each one after the BTH (in table order), and First/Next
// walking them in that order.
func TestOpcodeExt(t *testing.T) {
	for _, r := range allOps() {
		op := wire.Opcode(r.op)
		e := op.Ext()
		assert.Equal(t, extOf(r.hdrs), e, "%s headers", r.name)
		total := 0
		for _, h := range r.hdrs {
			total += hdrLen[h]
		}
		assert.Equal(t, total, e.Len(), "%s header bytes", r.name)

		off := 0
		cur := e.First()
		if len(r.hdrs) == 0 {
			assert.Equal(t, wire.Ext(0), cur, "%s has no first header", r.name)
		}
		for i, h := range r.hdrs {
			assert.Equal(t, off, e.Offset(hdrBit[h]), "%s offset of %s", r.name, h)
			assert.Equal(t, hdrBit[h], cur, "%s header #%d", r.name, i)
			cur = e.Next(cur)
			off += hdrLen[h]
		}
		if len(r.hdrs) > 0 {
			assert.Equal(t, wire.Ext(0), cur, "%s: nothing after the last header", r.name)
		}
	}
}

// TestExtOrder: IBA's wire order (docs/roce.md: FETH then RETH for FLUSH; RETH
// then ImmDt; AETH then AtomicAckETH; DETH first) for a set holding every
// header, and the size of each header alone.
func TestExtOrder(t *testing.T) {
	order := []hdr{DETH, FETH, RETH, AtomicETH, AETH, AtomicAck, ImmDt, IETH}
	all := extOf(order)
	off := 0
	h := all.First()
	for _, want := range order {
		assert.Equal(t, hdrBit[want], h)
		assert.Equal(t, off, all.Offset(hdrBit[want]), "offset of %s", want)
		assert.Equal(t, hdrLen[want], hdrBit[want].Len(), "size of %s", want)
		assert.Equal(t, string(want), hdrBit[want].String())
		off += hdrLen[want]
		h = all.Next(h)
	}
	assert.Equal(t, wire.Ext(0), h)
	assert.Equal(t, off, all.Len())
	assert.Equal(t, 0, wire.Ext(0).Len())
	assert.Equal(t, "RETH+ImmDt", extOf([]hdr{RETH, ImmDt}).String())
	assert.Equal(t, 16+4+28+4+8+4+4+8, all.Len())
}

func TestHeaderSizes(t *testing.T) {
	assert.Equal(t, 12, wire.BTHLen)
	assert.Equal(t, 16, wire.RETHLen)
	assert.Equal(t, 4, wire.AETHLen)
	assert.Equal(t, 4, wire.ImmDtLen)
	assert.Equal(t, 4, wire.IETHLen)
	assert.Equal(t, 28, wire.AtomicETHLen)
	assert.Equal(t, 8, wire.AtomicAckETHLen)
	assert.Equal(t, 8, wire.DETHLen)
	assert.Equal(t, 4, wire.FETHLen)
	assert.Equal(t, 4, wire.ICRCLen)
	assert.Equal(t, 40, wire.GRHLen)
	assert.Equal(t, 16, wire.CNPLen)
	assert.Equal(t, 0x1B, wire.GRHNextHeaderIBA)
}

// TestOpcodeRoles: IsFirst/IsLast follow the FIRST/MIDDLE/LAST/ONLY part of
// the name (single-packet operations are both); IsWrite is the RDMA WRITE
// opcodes of RC and UC; IsSend the SEND opcodes of RC and UC; IsAck the
// opcodes that go to the completer (docs/roce.md §4: ACKs and READ responses).
func TestOpcodeRoles(t *testing.T) {
	for _, r := range allOps() {
		op := wire.Opcode(r.op)
		n := r.name
		first, last := true, true
		switch {
		case strings.Contains(n, "_FIRST"):
			last = false
		case strings.Contains(n, "_MIDDLE"):
			first, last = false, false
		case strings.Contains(n, "_LAST"):
			first = false
		}
		rcuc := strings.HasPrefix(n, "RC_") || strings.HasPrefix(n, "UC_")
		assert.Equal(t, first, op.IsFirst(), "IsFirst(%s)", n)
		assert.Equal(t, last, op.IsLast(), "IsLast(%s)", n)
		assert.Equal(t, rcuc && strings.Contains(n, "_RDMA_WRITE_"), op.IsWrite(), "IsWrite(%s)", n)
		assert.Equal(t, rcuc && strings.Contains(n, "_SEND_"), op.IsSend(), "IsSend(%s)", n)
		assert.Equal(t, strings.Contains(n, "ACKNOWLEDGE") || strings.Contains(n, "READ_RESPONSE"), op.IsAck(), "IsAck(%s)", n)
		assert.Equal(t, strings.Contains(n, "READ_RESPONSE"), op.IsReadResponse(), "IsReadResponse(%s)", n)
	}
	// Transport class: bits 7..5.
	for _, c := range []struct {
		op, class uint8
	}{{0x04, 0x00}, {0x24, 0x20}, {0x64, 0x60}, {0x81, 0x80}, {0xA0, 0xA0}, {0xE5, 0xE0}, {0x5F, 0x40}} {
		assert.Equal(t, wire.Opcode(c.class), wire.Opcode(c.op).Class(), "class of %#02x", c.op)
		assert.Equal(t, wire.Opcode(c.op&0x1F), wire.Opcode(c.op).Op(), "op of %#02x", c.op)
	}
}

// TestSyndrome: docs/roce.md §1/§4 AETH syndromes: bits 6..5 are the kind (00
// ACK, 01 RNR NAK, 10 reserved, 11 NAK), bits 4..0 the credit count, timer
// code or NAK code; bit 7 must be 0.
func TestSyndrome(t *testing.T) {
	for _, c := range []struct {
		s              uint8
		kind           wire.SyndromeKind
		ack, rnr, nak  bool
		value          uint8
		constant       wire.Syndrome
		constantNeeded bool
	}{
		{0x00, wire.KindACK, true, false, false, 0, 0, false},
		{0x1F, wire.KindACK, true, false, false, 31, wire.SyndromeACK, true},
		{0x20, wire.KindRNRNAK, false, true, false, 0, wire.SyndromeRNRNAK, true},
		{0x2E, wire.KindRNRNAK, false, true, false, 14, 0, false},
		{0x40, wire.KindReserved, false, false, false, 0, 0, false},
		{0x60, wire.KindNAK, false, false, true, 0, wire.SyndromeNAKPSNSeqErr, true},
		{0x61, wire.KindNAK, false, false, true, 1, wire.SyndromeNAKInvalidReq, true},
		{0x62, wire.KindNAK, false, false, true, 2, wire.SyndromeNAKRemAccess, true},
		{0x63, wire.KindNAK, false, false, true, 3, wire.SyndromeNAKRemOpErr, true},
		{0x64, wire.KindNAK, false, false, true, 4, wire.SyndromeNAKInvalidRDRq, true},
	} {
		s := wire.Syndrome(c.s)
		assert.Equal(t, c.kind, s.Kind(), "kind of %#02x", c.s)
		assert.Equal(t, c.ack, s.IsACK(), "IsACK(%#02x)", c.s)
		assert.Equal(t, c.rnr, s.IsRNRNAK(), "IsRNRNAK(%#02x)", c.s)
		assert.Equal(t, c.nak, s.IsNAK(), "IsNAK(%#02x)", c.s)
		assert.Equal(t, c.value, s.Value(), "value of %#02x", c.s)
		if c.constantNeeded {
			assert.Equal(t, c.constant, s, "constant for %#02x", c.s)
		}
	}
	// Bit 7 set: not a valid ACK, RNR NAK or NAK, whatever bits 6..5 say.
	for _, b := range []uint8{0x80, 0x9F, 0xA0, 0xE0, 0xFF} {
		s := wire.Syndrome(b)
		assert.False(t, s.IsACK() || s.IsRNRNAK() || s.IsNAK(), "syndrome %#02x has bit 7 set", b)
	}
}

// TestBTHWorkedExample reads docs/roce.md §2's worked example BTH
// (04 00 ffff 00 000011 80 000001) and writes it back with the setters.
func TestBTHWorkedExample(t *testing.T) {
	raw := []byte{0x04, 0x00, 0xff, 0xff, 0x00, 0x00, 0x00, 0x11, 0x80, 0x00, 0x00, 0x01}
	b := wire.BTH(raw)
	assert.Equal(t, wire.SendOnly, b.Opcode())
	assert.False(t, b.SE())
	assert.False(t, b.MigReq())
	assert.Equal(t, 0, b.PadCnt())
	assert.Equal(t, uint8(0), b.TVer())
	assert.Equal(t, uint16(0xFFFF), b.PKey())
	assert.False(t, b.FECN())
	assert.False(t, b.BECN())
	assert.Equal(t, uint32(0x11), b.DestQP())
	assert.True(t, b.AckReq())
	assert.Equal(t, uint32(1), b.PSN())

	w := wire.BTH(make([]byte, 12))
	w.SetOpcode(wire.SendOnly)
	w.SetPKey(0xFFFF)
	w.SetDestQP(0x11)
	w.SetAckReq(true)
	w.SetPSN(1)
	assert.Equal(t, raw, []byte(w))

	// Every flag lands on its own bit (docs/roce.md §1 BTH table).
	w.SetSE(true)
	w.SetMigReq(true)
	w.SetPadCnt(3)
	w.SetTVer(0xF)
	w.SetFECN(true)
	w.SetBECN(true)
	w.SetResv6(0x3F)
	w.SetResv7(0x7F)
	w.SetDestQP(0xFFFFFF)
	w.SetPSN(0xFFFFFF)
	assert.Equal(t, []byte{0x04, 0xFF, 0xff, 0xff, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, []byte(w))
	w.SetSE(false)
	assert.Equal(t, byte(0x7F), w[1])
	w.SetMigReq(false)
	assert.Equal(t, byte(0x3F), w[1])
	w.SetPadCnt(1)
	assert.Equal(t, byte(0x1F), w[1])
	w.SetFECN(false)
	assert.Equal(t, byte(0x7F), w[4])
	w.SetBECN(false)
	assert.Equal(t, byte(0x3F), w[4])
	w.SetAckReq(false)
	assert.Equal(t, byte(0x7F), w[8])
}

// TestExtHeaderViews writes known values through each view and checks the
// big-endian layout of docs/roce.md §1.
func TestExtHeaderViews(t *testing.T) {
	r := wire.RETH(make([]byte, 16))
	r.SetVA(0x0102030405060708)
	r.SetRKey(0x090a0b0c)
	r.SetDMALen(0x0d0e0f10)
	assert.Equal(t, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}, []byte(r))
	assert.Equal(t, uint64(0x0102030405060708), r.VA())
	assert.Equal(t, uint32(0x090a0b0c), r.RKey())
	assert.Equal(t, uint32(0x0d0e0f10), r.DMALen())

	a := wire.AETH(make([]byte, 4))
	a.SetSyndrome(0x61)
	a.SetMSN(0xABCDEF)
	assert.Equal(t, []byte{0x61, 0xAB, 0xCD, 0xEF}, []byte(a))
	assert.Equal(t, wire.Syndrome(0x61), a.Syndrome())
	assert.Equal(t, uint32(0xABCDEF), a.MSN())

	x := wire.AtomicETH(make([]byte, 28))
	x.SetVA(0x1112131415161718)
	x.SetRKey(0x21222324)
	x.SetSwapAdd(0x3132333435363738)
	x.SetCompare(0x4142434445464748)
	assert.Equal(t, []byte{0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x21, 0x22, 0x23, 0x24,
		0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48}, []byte(x))
	assert.Equal(t, uint64(0x1112131415161718), x.VA())
	assert.Equal(t, uint32(0x21222324), x.RKey())
	assert.Equal(t, uint64(0x3132333435363738), x.SwapAdd())
	assert.Equal(t, uint64(0x4142434445464748), x.Compare())

	// DETH: Q_Key u32, a reserved byte, SrcQP u24.
	d := wire.DETH([]byte{9, 9, 9, 9, 9, 9, 9, 9})
	d.SetQKey(0x80010002)
	d.SetSrcQP(0x123456)
	assert.Equal(t, []byte{0x80, 0x01, 0x00, 0x02, 0x00, 0x12, 0x34, 0x56}, []byte(d))
	assert.Equal(t, uint32(0x80010002), d.QKey())
	assert.Equal(t, uint32(0x123456), d.SrcQP())
}

// TestGRH: IPVer 4 | TClass 8 | FlowLabel 20 | PayLen 16 | NxtHdr | HopLmt |
// SGID | DGID (docs/roce.md §1).
func TestGRH(t *testing.T) {
	g := wire.GRH(make([]byte, 40))
	g.SetVersionClassFlow(6, 0xAB, 0xCDEF1)
	g.SetPayLen(0x20)
	g[6], g[7] = 0x1B, 64
	g[8], g[23] = 0xfe, 0x01
	g[24], g[39] = 0xfe, 0x02
	assert.Equal(t, []byte{0x6A, 0xBC, 0xDE, 0xF1, 0x00, 0x20, 0x1B, 0x40}, []byte(g[:8]))
	assert.Equal(t, uint8(6), g.IPVer())
	assert.Equal(t, uint8(0xAB), g.TClass())
	assert.Equal(t, uint32(0xCDEF1), g.FlowLabel())
	assert.Equal(t, uint16(0x20), g.PayLen())
	assert.Equal(t, uint8(0x1B), g.NxtHdr())
	assert.Equal(t, uint8(64), g.HopLmt())
	assert.Equal(t, "fe00::1", g.SGID().String())
	assert.Equal(t, "fe00::2", g.DGID().String())
	// A flow label wider than 20 bits does not spill into the class.
	g.SetVersionClassFlow(6, 0, 0xFFFFFFFF)
	assert.Equal(t, []byte{0x60, 0x0F, 0xFF, 0xFF}, []byte(g[:4]))
}

// TestPadCount: PadCnt = (-len) & 3 (docs/roce.md §1).
func TestPadCount(t *testing.T) {
	for n, want := range map[int]int{0: 0, 1: 3, 2: 2, 3: 1, 4: 0, 5: 3, 1023: 1, 1024: 0, 4095: 1} {
		assert.Equal(t, want, wire.PadCount(n), "PadCount(%d)", n)
	}
}

// TestPSNTable: docs/roce.md §3 edge cases of the 24-bit PSN space.
func TestPSNTable(t *testing.T) {
	for _, c := range []struct {
		p    uint32
		n    int
		want uint32
	}{
		{0xFFFFFF, 1, 0}, {0xFFFFFE, 3, 1}, {0, -1, 0xFFFFFF}, {5, -6, 0xFFFFFF},
		{0, 1 << 24, 0}, {0x123456, 0, 0x123456}, {0x7FFFFF, 1, 0x800000},
	} {
		assert.Equal(t, c.want, wire.PSNAdd(c.p, c.n), "PSNAdd(%#x, %d)", c.p, c.n)
	}
	for _, c := range []struct {
		a, b uint32
		want int32
	}{
		{0, 0xFFFFFF, 1}, {0xFFFFFF, 0, -1}, {1, 0xFFFFFE, 3}, {10, 10, 0},
		{0x7FFFFF, 0, 0x7FFFFF},        // the farthest PSN still ahead
		{0x800000, 0, -0x800000},       // 2^23 away: behind ([e-2^23, e) is behind)
		{0, 0x800000, -0x800000},       // and behind the other way too
		{0x800001, 0, -0x7FFFFF},       // past half the space: behind
		{0xFFFF80, 0xFFFF00, 0x80},     // ahead by 128 (RXE_MAX_UNACKED_PSNS)
		{0x000040, 0xFFFFC0, 0x80},     // the same across the wrap
		{0xFFFFC0, 0x000040, -0x80},    // and behind
		{0x000000, 0x000001, -1},       // one behind
		{0x400000, 0xC00000, -8388608}, // 2^23 apart across the wrap
	} {
		assert.Equal(t, c.want, wire.PSNDiff(c.a, c.b), "PSNDiff(%#x, %#x)", c.a, c.b)
	}
}

func TestINA(t *testing.T) {
	h := wire.INA(make([]byte, 8))
	h.SetTag(wire.INATag)
	h.SetRingID(1)
	h.SetMsgID(2)
	h.SetMsgLen(3)
	h.SetRank(4)
	assert.Equal(t, []byte{'I', 'N', 'A', '1', 1, 2, 3, 4}, []byte(h))
	assert.Equal(t, uint32(0x494E4131), h.Tag())
	assert.Equal(t, [4]uint8{1, 2, 3, 4}, [4]uint8{h.RingID(), h.MsgID(), h.MsgLen(), h.Rank()})
	assert.True(t, wire.IsINA([]byte("INA1\x00\x00\x00\x00")))
	assert.True(t, wire.IsINA([]byte("INA1\x00\x00\x00\x00rest")))
	assert.False(t, wire.IsINA([]byte("INA1\x00\x00\x00")), "7 bytes cannot hold the header")
	assert.False(t, wire.IsINA([]byte("INA2\x00\x00\x00\x00")))
	assert.False(t, wire.IsINA(nil))
}
