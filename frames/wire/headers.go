package wire

import (
	"encoding/binary"
	"net/netip"
)

// PSNMask keeps the 24 bits of a PSN, QPN or MSN.
const PSNMask = 0xFFFFFF

// BTH is a view over the 12-byte Base Transport Header.
type BTH []byte

func (b BTH) Opcode() Opcode       { return Opcode(b[0]) }
func (b BTH) SE() bool             { return b[1]&0x80 != 0 }
func (b BTH) MigReq() bool         { return b[1]&0x40 != 0 }
func (b BTH) PadCnt() int          { return int(b[1]>>4) & 3 }
func (b BTH) TVer() uint8          { return b[1] & 0x0F }
func (b BTH) PKey() uint16         { return binary.BigEndian.Uint16(b[2:]) }
func (b BTH) FECN() bool           { return b[4]&0x80 != 0 }
func (b BTH) BECN() bool           { return b[4]&0x40 != 0 }
func (b BTH) Resv6() uint8         { return b[4] & 0x3F }
func (b BTH) DestQP() uint32       { return uint24(b[5:]) }
func (b BTH) AckReq() bool         { return b[8]&0x80 != 0 }
func (b BTH) Resv7() uint8         { return b[8] & 0x7F }
func (b BTH) PSN() uint32          { return uint24(b[9:]) }
func (b BTH) SetOpcode(o Opcode)   { b[0] = byte(o) }
func (b BTH) SetPKey(k uint16)     { binary.BigEndian.PutUint16(b[2:], k) }
func (b BTH) SetDestQP(q uint32)   { putUint24(b[5:], q) }
func (b BTH) SetPSN(p uint32)      { putUint24(b[9:], p) }
func (b BTH) SetPadCnt(n int)      { b[1] = b[1]&^0x30 | byte(n&3)<<4 }
func (b BTH) SetSE(v bool)         { setBit(&b[1], 0x80, v) }
func (b BTH) SetMigReq(v bool)     { setBit(&b[1], 0x40, v) }
func (b BTH) SetFECN(v bool)       { setBit(&b[4], 0x80, v) }
func (b BTH) SetBECN(v bool)       { setBit(&b[4], 0x40, v) }
func (b BTH) SetAckReq(v bool)     { setBit(&b[8], 0x80, v) }
func (b BTH) SetTVer(v uint8)      { b[1] = b[1]&0xF0 | v&0x0F }
func (b BTH) SetResv7(v uint8)     { b[8] = b[8]&0x80 | v&0x7F }
func (b BTH) SetResv6(v uint8)     { b[4] = b[4]&0xC0 | v&0x3F }
func uint24(b []byte) uint32       { return uint32(b[0])<<16 | uint32(b[1])<<8 | uint32(b[2]) }
func putUint24(b []byte, v uint32) { b[0], b[1], b[2] = byte(v>>16), byte(v>>8), byte(v) }
func setBit(b *byte, m byte, v bool) {
	if v {
		*b |= m
	} else {
		*b &^= m
	}
}

// RETH is a view over the 16-byte RDMA Extended Transport Header.
type RETH []byte

func (r RETH) VA() uint64         { return binary.BigEndian.Uint64(r) }
func (r RETH) RKey() uint32       { return binary.BigEndian.Uint32(r[8:]) }
func (r RETH) DMALen() uint32     { return binary.BigEndian.Uint32(r[12:]) }
func (r RETH) SetVA(v uint64)     { binary.BigEndian.PutUint64(r, v) }
func (r RETH) SetRKey(k uint32)   { binary.BigEndian.PutUint32(r[8:], k) }
func (r RETH) SetDMALen(n uint32) { binary.BigEndian.PutUint32(r[12:], n) }

// AETH is a view over the 4-byte ACK Extended Transport Header.
type AETH []byte

func (a AETH) Syndrome() Syndrome     { return Syndrome(a[0]) }
func (a AETH) MSN() uint32            { return uint24(a[1:]) }
func (a AETH) SetSyndrome(s Syndrome) { a[0] = byte(s) }
func (a AETH) SetMSN(m uint32)        { putUint24(a[1:], m) }

// Syndrome is the AETH syndrome byte (docs/roce.md §1, §4).
type Syndrome uint8

// Syndromes rxe sends. ACK syndromes carry a credit count in bits 4..0 and
// rxe always uses 0x1F ("invalid"); RNR NAKs carry a timer code.
const (
	SyndromeACK            Syndrome = 0x1F
	SyndromeRNRNAK         Syndrome = 0x20
	SyndromeNAKPSNSeqErr   Syndrome = 0x60
	SyndromeNAKInvalidReq  Syndrome = 0x61
	SyndromeNAKRemAccess   Syndrome = 0x62
	SyndromeNAKRemOpErr    Syndrome = 0x63
	SyndromeNAKInvalidRDRq Syndrome = 0x64
)

// Kind of AETH syndrome, from bits 6..5.
type SyndromeKind uint8

const (
	KindACK      SyndromeKind = 0
	KindRNRNAK   SyndromeKind = 1
	KindReserved SyndromeKind = 2
	KindNAK      SyndromeKind = 3
)

func (s Syndrome) Kind() SyndromeKind { return SyndromeKind(s>>5) & 3 }
func (s Syndrome) IsACK() bool        { return s&0x80 == 0 && s.Kind() == KindACK }
func (s Syndrome) IsNAK() bool        { return s&0x80 == 0 && s.Kind() == KindNAK }
func (s Syndrome) IsRNRNAK() bool     { return s&0x80 == 0 && s.Kind() == KindRNRNAK }

// Value is the low 5 bits: credit count, RNR timer code or NAK code.
func (s Syndrome) Value() uint8 { return uint8(s) & 0x1F }

func (s Syndrome) String() string {
	if s&0x80 != 0 {
		return "RESERVED"
	}
	switch s.Kind() {
	case KindACK:
		return "ACK"
	case KindRNRNAK:
		return "RNR_NAK"
	case KindNAK:
		switch s {
		case SyndromeNAKPSNSeqErr:
			return "NAK_PSN_SEQ_ERR"
		case SyndromeNAKInvalidReq:
			return "NAK_INVALID_REQUEST"
		case SyndromeNAKRemAccess:
			return "NAK_REMOTE_ACCESS_ERR"
		case SyndromeNAKRemOpErr:
			return "NAK_REMOTE_OP_ERR"
		case SyndromeNAKInvalidRDRq:
			return "NAK_INVALID_RD_REQUEST"
		}
		return "NAK_RESERVED"
	}
	return "RESERVED"
}

// DETH is a view over the 8-byte Datagram Extended Transport Header.
type DETH []byte

func (d DETH) QKey() uint32      { return binary.BigEndian.Uint32(d) }
func (d DETH) SrcQP() uint32     { return uint24(d[5:]) }
func (d DETH) SetQKey(k uint32)  { binary.BigEndian.PutUint32(d, k) }
func (d DETH) SetSrcQP(q uint32) { d[4] = 0; putUint24(d[5:], q) }

// AtomicETH is a view over the 28-byte Atomic Extended Transport Header.
type AtomicETH []byte

func (a AtomicETH) VA() uint64          { return binary.BigEndian.Uint64(a) }
func (a AtomicETH) RKey() uint32        { return binary.BigEndian.Uint32(a[8:]) }
func (a AtomicETH) SwapAdd() uint64     { return binary.BigEndian.Uint64(a[12:]) }
func (a AtomicETH) Compare() uint64     { return binary.BigEndian.Uint64(a[20:]) }
func (a AtomicETH) SetVA(v uint64)      { binary.BigEndian.PutUint64(a, v) }
func (a AtomicETH) SetRKey(k uint32)    { binary.BigEndian.PutUint32(a[8:], k) }
func (a AtomicETH) SetSwapAdd(v uint64) { binary.BigEndian.PutUint64(a[12:], v) }
func (a AtomicETH) SetCompare(v uint64) { binary.BigEndian.PutUint64(a[20:], v) }

// GRH is a view over the 40-byte Global Route Header of RoCEv1. Its layout
// is that of an IPv6 header with NxtHdr 0x1B.
type GRH []byte

// GRHNextHeaderIBA is the GRH NxtHdr value for an IBA transport header.
const GRHNextHeaderIBA = 0x1B

func (g GRH) IPVer() uint8       { return g[0] >> 4 }
func (g GRH) TClass() uint8      { return g[0]<<4 | g[1]>>4 }
func (g GRH) FlowLabel() uint32  { return uint32(g[1]&0x0F)<<16 | uint32(g[2])<<8 | uint32(g[3]) }
func (g GRH) PayLen() uint16     { return binary.BigEndian.Uint16(g[4:]) }
func (g GRH) NxtHdr() uint8      { return g[6] }
func (g GRH) HopLmt() uint8      { return g[7] }
func (g GRH) SGID() netip.Addr   { return netip.AddrFrom16([16]byte(g[8:24])) }
func (g GRH) DGID() netip.Addr   { return netip.AddrFrom16([16]byte(g[24:40])) }
func (g GRH) SetPayLen(n uint16) { binary.BigEndian.PutUint16(g[4:], n) }

// SetVersionClassFlow writes IPVer, TClass and FlowLabel (the first 4 bytes).
func (g GRH) SetVersionClassFlow(ver, tclass uint8, flow uint32) {
	binary.BigEndian.PutUint32(g, uint32(ver)<<28|uint32(tclass)<<20|flow&0xFFFFF)
}

// INA is a view over the 8-byte in-network-aggregation header of NetReduce
// (Fig. 4 of the paper): InetTag 32 bits, then RingID, MsgID, MsgLen and
// Rank, 8 bits each, big-endian. It starts the payload of the first packet
// (RDMA WRITE FIRST or ONLY) of every message a NetReduce worker sends.
type INA []byte

// INATag is inaemu's InetTag magic: ASCII "INA1" (0x494E4131). The paper
// leaves the value open; a readable constant makes captures easy to eyeball
// and its last byte leaves room for a header version.
const INATag uint32 = 0x494E4131

func (h INA) Tag() uint32       { return binary.BigEndian.Uint32(h) }
func (h INA) RingID() uint8     { return h[4] }
func (h INA) MsgID() uint8      { return h[5] }
func (h INA) MsgLen() uint8     { return h[6] }
func (h INA) Rank() uint8       { return h[7] }
func (h INA) SetTag(t uint32)   { binary.BigEndian.PutUint32(h, t) }
func (h INA) SetRingID(v uint8) { h[4] = v }
func (h INA) SetMsgID(v uint8)  { h[5] = v }
func (h INA) SetMsgLen(v uint8) { h[6] = v }
func (h INA) SetRank(v uint8)   { h[7] = v }

// IsINA reports whether payload begins with an INA header carrying INATag.
func IsINA(payload []byte) bool {
	return len(payload) >= INALen && binary.BigEndian.Uint32(payload) == INATag
}

// PadCount is the number of pad bytes that follow a payload of n bytes.
func PadCount(n int) int { return -n & 3 }

// PSNDiff is the signed distance a-b in 24-bit PSN space, as rxe's
// psn_compare computes it: > 0 when a is ahead of b.
func PSNDiff(a, b uint32) int32 { return int32((a-b)<<8) >> 8 }

// PSNAdd adds n to a PSN modulo 2^24.
func PSNAdd(p uint32, n int) uint32 { return (p + uint32(n)) & PSNMask }

// Multi-rack NetReduce's switch-to-switch frames. NetReduce (ASPLOS '23
// §3.3) joins a leaf and its spine by virtual connections but leaves their
// wire format open; inaemu's is a RoCEv2 packet whose BTH opcode is in the
// manufacturer-specific range (IBA 9.2: 0xC0-0xFF, unknown to every RC
// responder, so a host drops one that reaches it), followed by the INA
// header, the 16-byte INATree header and the data:
//
//	INA | INATree | data (a partial or total sum, or a notification's header block) | pad | ICRC
const (
	// OpINAPartial carries a leaf's partial sum up to its spine.
	OpINAPartial Opcode = 0xE0
	// OpINATotal carries the spine's total down to a leaf.
	OpINATotal Opcode = 0xE1
	// OpINANotify carries the headers of a connection's first or last
	// packet of a message from the sender's leaf to the receiver's (the
	// CTT populating notification).
	OpINANotify Opcode = 0xE2
)

// IsINATree reports whether op is one of the switch-to-switch opcodes.
func IsINATree(op Opcode) bool { return op >= OpINAPartial && op <= OpINANotify }

// INATreeLen is the size of the INATree header.
const INATreeLen = 16

// INATree is a view over the header that follows the INA header on a
// switch-to-switch frame, big-endian:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------------------------------------------------------+
//	|            Msg: the message's number (not wrapping at 8 bits)  |
//	+-------------------------------+---------------+---------------+
//	|  Offset: PSN - the message's  |     Flags     |   (zero)      |
//	|  first PSN                    |               |               |
//	+-------------------------------+---------------+---------------+
//	|  Ranks: partial/total: bit r set when rank r is in the sum;   |
//	|  notification: header block length (16 bits), then the       |
//	|  original frame's length through its ICRC (16 bits), then 0  |
//	+---------------------------------------------------------------+
type INATree []byte

// INATree flags.
const (
	INATreeLast       = 1 << 0 // the message's last packet
	INATreeNotifyLast = 1 << 1 // a notification of a last packet (else of a first)
)

func (h INATree) Msg() uint32        { return binary.BigEndian.Uint32(h) }
func (h INATree) Offset() uint16     { return binary.BigEndian.Uint16(h[4:]) }
func (h INATree) Flags() uint8       { return h[6] }
func (h INATree) Ranks() uint64      { return binary.BigEndian.Uint64(h[8:]) }
func (h INATree) BlockLen() int      { return int(binary.BigEndian.Uint16(h[8:])) }
func (h INATree) FrameLen() int      { return int(binary.BigEndian.Uint16(h[10:])) }
func (h INATree) SetMsg(v uint32)    { binary.BigEndian.PutUint32(h, v) }
func (h INATree) SetOffset(v uint16) { binary.BigEndian.PutUint16(h[4:], v) }
func (h INATree) SetFlags(v uint8)   { h[6], h[7] = v, 0 }
func (h INATree) SetRanks(v uint64)  { binary.BigEndian.PutUint64(h[8:], v) }
func (h INATree) SetBlock(block, frame int) {
	binary.BigEndian.PutUint16(h[8:], uint16(block))
	binary.BigEndian.PutUint16(h[10:], uint16(frame))
	binary.BigEndian.PutUint32(h[12:], 0)
}
