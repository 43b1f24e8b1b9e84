// Package wire holds the RoCE wire constants and zero-copy header views:
// opcodes and which extension headers each one carries, header sizes, and
// byte-slice types (BTH, RETH, AETH, ...) with getters and setters in the
// style of gVisor's header package. It knows nothing about gopacket, queue
// pairs or time; everything here is safe to call on a hot path.
//
// Layouts follow docs/roce.md §1 (Linux rxe rxe_hdr.h / rxe_opcode.c,
// include/rdma/ib_pack.h).
package wire

import "strconv"

// Opcode is the 8-bit BTH opcode. Bits 7..5 are the transport class, bits
// 4..0 the operation.
type Opcode uint8

// Transport classes (BTH opcode bits 7..5).
const (
	ClassRC   Opcode = 0x00
	ClassUC   Opcode = 0x20
	ClassRD   Opcode = 0x40
	ClassUD   Opcode = 0x60
	ClassCNP  Opcode = 0x80
	ClassXRC  Opcode = 0xA0
	classMask        = 0xE0
)

// RC opcodes (ib_pack.h). UC opcodes are the same operations | ClassUC.
const (
	SendFirst              Opcode = 0x00
	SendMiddle             Opcode = 0x01
	SendLast               Opcode = 0x02
	SendLastWithImm        Opcode = 0x03
	SendOnly               Opcode = 0x04
	SendOnlyWithImm        Opcode = 0x05
	WriteFirst             Opcode = 0x06
	WriteMiddle            Opcode = 0x07
	WriteLast              Opcode = 0x08
	WriteLastWithImm       Opcode = 0x09
	WriteOnly              Opcode = 0x0A
	WriteOnlyWithImm       Opcode = 0x0B
	ReadRequest            Opcode = 0x0C
	ReadResponseFirst      Opcode = 0x0D
	ReadResponseMiddle     Opcode = 0x0E
	ReadResponseLast       Opcode = 0x0F
	ReadResponseOnly       Opcode = 0x10
	Acknowledge            Opcode = 0x11
	AtomicAcknowledge      Opcode = 0x12
	CompareSwap            Opcode = 0x13
	FetchAdd               Opcode = 0x14
	SendLastWithInvalidate Opcode = 0x16
	SendOnlyWithInvalidate Opcode = 0x17
	Flush                  Opcode = 0x1C
	AtomicWrite            Opcode = 0x1D
	UDSendOnly             Opcode = 0x64
	UDSendOnlyWithImm      Opcode = 0x65
	CNP                    Opcode = 0x81
)

// Ext is a set of extension headers, one bit per header. The order of the
// bits is the order the headers appear on the wire after the BTH.
type Ext uint16

// Extension headers, in wire order (IBA 9.2: DETH, RETH/FETH, AtomicETH,
// AETH, AtomicAckETH, ImmDt, IETH).
const (
	ExtDETH Ext = 1 << iota
	ExtFETH
	ExtRETH
	ExtAtomicETH
	ExtAETH
	ExtAtomicAckETH
	ExtImmDt
	ExtIETH
	extCount = iota
)

// Extension header sizes in bytes (ib_pack.h).
const (
	BTHLen          = 12
	DETHLen         = 8
	FETHLen         = 4
	RETHLen         = 16
	AtomicETHLen    = 28
	AETHLen         = 4
	AtomicAckETHLen = 8
	ImmDtLen        = 4
	IETHLen         = 4
	ICRCLen         = 4
	GRHLen          = 40
	CNPLen          = 16 // reserved bytes after the BTH of a CNP
	INALen          = 8
)

var extLens = [extCount]int{DETHLen, FETHLen, RETHLen, AtomicETHLen, AETHLen, AtomicAckETHLen, ImmDtLen, IETHLen}

var extNames = [extCount]string{"DETH", "FETH", "RETH", "AtomicETH", "AETH", "AtomicAckETH", "ImmDt", "IETH"}

// Len is the total size of the headers in the set.
func (e Ext) Len() int {
	n := 0
	for i := 0; i < extCount; i++ {
		if e&(1<<i) != 0 {
			n += extLens[i]
		}
	}
	return n
}

// Offset is the byte offset of header h after the end of the BTH, given the
// set e it belongs to.
func (e Ext) Offset(h Ext) int {
	n := 0
	for i := 0; i < extCount; i++ {
		b := Ext(1 << i)
		if b == h {
			return n
		}
		if e&b != 0 {
			n += extLens[i]
		}
	}
	return n
}

// Next returns the header that follows h in the set, or 0 when h is last.
func (e Ext) Next(h Ext) Ext {
	for b := h << 1; b != 0 && b < 1<<extCount; b <<= 1 {
		if e&b != 0 {
			return b
		}
	}
	return 0
}

// First returns the first header of the set, or 0 for an empty set.
func (e Ext) First() Ext { return e & -e }

func (e Ext) String() string {
	s := ""
	for i := 0; i < extCount; i++ {
		if e&(1<<i) != 0 {
			if s != "" {
				s += "+"
			}
			s += extNames[i]
		}
	}
	return s
}

// opInfo describes one opcode: its name, its extension headers, whether a
// payload may follow, and its place in a message.
type opInfo struct {
	name    string
	ext     Ext
	known   bool
	payload bool
	first   bool
	last    bool
}

var opTable [256]opInfo

func defOp(op Opcode, name string, ext Ext, payload, first, last bool) {
	opTable[op] = opInfo{name: name, ext: ext, known: true, payload: payload, first: first, last: last}
}

func init() {
	for _, c := range []struct {
		class  Opcode
		prefix string
	}{{ClassRC, "RC_"}, {ClassUC, "UC_"}} {
		p := c.prefix
		defOp(c.class|SendFirst, p+"SEND_FIRST", 0, true, true, false)
		defOp(c.class|SendMiddle, p+"SEND_MIDDLE", 0, true, false, false)
		defOp(c.class|SendLast, p+"SEND_LAST", 0, true, false, true)
		defOp(c.class|SendLastWithImm, p+"SEND_LAST_WITH_IMMEDIATE", ExtImmDt, true, false, true)
		defOp(c.class|SendOnly, p+"SEND_ONLY", 0, true, true, true)
		defOp(c.class|SendOnlyWithImm, p+"SEND_ONLY_WITH_IMMEDIATE", ExtImmDt, true, true, true)
		defOp(c.class|WriteFirst, p+"RDMA_WRITE_FIRST", ExtRETH, true, true, false)
		defOp(c.class|WriteMiddle, p+"RDMA_WRITE_MIDDLE", 0, true, false, false)
		defOp(c.class|WriteLast, p+"RDMA_WRITE_LAST", 0, true, false, true)
		defOp(c.class|WriteLastWithImm, p+"RDMA_WRITE_LAST_WITH_IMMEDIATE", ExtImmDt, true, false, true)
		defOp(c.class|WriteOnly, p+"RDMA_WRITE_ONLY", ExtRETH, true, true, true)
		defOp(c.class|WriteOnlyWithImm, p+"RDMA_WRITE_ONLY_WITH_IMMEDIATE", ExtRETH|ExtImmDt, true, true, true)
	}
	defOp(ReadRequest, "RC_RDMA_READ_REQUEST", ExtRETH, false, true, true)
	defOp(ReadResponseFirst, "RC_RDMA_READ_RESPONSE_FIRST", ExtAETH, true, true, false)
	defOp(ReadResponseMiddle, "RC_RDMA_READ_RESPONSE_MIDDLE", 0, true, false, false)
	defOp(ReadResponseLast, "RC_RDMA_READ_RESPONSE_LAST", ExtAETH, true, false, true)
	defOp(ReadResponseOnly, "RC_RDMA_READ_RESPONSE_ONLY", ExtAETH, true, true, true)
	defOp(Acknowledge, "RC_ACKNOWLEDGE", ExtAETH, false, true, true)
	defOp(AtomicAcknowledge, "RC_ATOMIC_ACKNOWLEDGE", ExtAETH|ExtAtomicAckETH, false, true, true)
	defOp(CompareSwap, "RC_COMPARE_SWAP", ExtAtomicETH, false, true, true)
	defOp(FetchAdd, "RC_FETCH_ADD", ExtAtomicETH, false, true, true)
	defOp(SendLastWithInvalidate, "RC_SEND_LAST_WITH_INVALIDATE", ExtIETH, true, false, true)
	defOp(SendOnlyWithInvalidate, "RC_SEND_ONLY_WITH_INVALIDATE", ExtIETH, true, true, true)
	defOp(Flush, "RC_FLUSH", ExtFETH|ExtRETH, false, true, true)
	defOp(AtomicWrite, "RC_ATOMIC_WRITE", ExtRETH, true, true, true)
	defOp(UDSendOnly, "UD_SEND_ONLY", ExtDETH, true, true, true)
	defOp(UDSendOnlyWithImm, "UD_SEND_ONLY_WITH_IMMEDIATE", ExtDETH|ExtImmDt, true, true, true)
	// The CNP's 16 reserved bytes are reported as its payload, as tshark
	// and the test-vector manifest do.
	defOp(CNP, "CNP", 0, true, true, true)
	// Named, not known: no RC responder takes them (headers.go).
	opTable[OpINAPartial].name = "OPCODE_0xe0_INA_PARTIAL"
	opTable[OpINATotal].name = "OPCODE_0xe1_INA_TOTAL"
	opTable[OpINANotify].name = "OPCODE_0xe2_INA_NOTIFY"
}

// Known reports whether the opcode is one this package can lay out.
func (o Opcode) Known() bool { return opTable[o].known }

// Ext is the set of extension headers that follow the BTH.
func (o Opcode) Ext() Ext { return opTable[o].ext }

// HasPayload reports whether packets with this opcode may carry data.
func (o Opcode) HasPayload() bool { return opTable[o].payload }

// IsFirst is true for FIRST and ONLY packets (and single-packet operations).
func (o Opcode) IsFirst() bool { return opTable[o].first }

// IsLast is true for LAST and ONLY packets (and single-packet operations).
func (o Opcode) IsLast() bool { return opTable[o].last }

// Class is the transport class (ClassRC, ClassUC, ...).
func (o Opcode) Class() Opcode { return o & classMask }

// Op is the operation without the transport class.
func (o Opcode) Op() Opcode { return o &^ classMask }

// IsWrite is true for RDMA WRITE packets of RC or UC.
func (o Opcode) IsWrite() bool {
	c := o.Class()
	return (c == ClassRC || c == ClassUC) && o.Op() >= WriteFirst && o.Op() <= WriteOnlyWithImm
}

// IsSend is true for SEND packets of RC or UC (with immediate or invalidate).
func (o Opcode) IsSend() bool {
	c, op := o.Class(), o.Op()
	if c != ClassRC && c != ClassUC {
		return false
	}
	return op <= SendOnlyWithImm || (c == ClassRC && (op == SendLastWithInvalidate || op == SendOnlyWithInvalidate))
}

// IsReadResponse is true for the four RDMA READ response opcodes.
func (o Opcode) IsReadResponse() bool { return o >= ReadResponseFirst && o <= ReadResponseOnly }

// IsAck is true for opcodes that go to the completer: ACKs and responses.
func (o Opcode) IsAck() bool {
	return o == Acknowledge || o == AtomicAcknowledge || o.IsReadResponse()
}

// String is the rxe/tshark-style name, e.g. RC_RDMA_WRITE_FIRST, or
// OPCODE_0xNN for an unknown opcode.
func (o Opcode) String() string {
	if n := opTable[o].name; n != "" {
		return n
	}
	return "OPCODE_0x" + strconv.FormatUint(uint64(o)|0x100, 16)[1:]
}
