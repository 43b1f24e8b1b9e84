package frames

import (
	"encoding/binary"
	"hash/crc32"
	"sync/atomic"
)

// The ICRC (docs/roce.md §2) is the IEEE CRC-32 over a pseudo-packet: 8 bytes of
// 0xFF standing in for the IB LRH, then the network header (IPv4, IPv6 or
// GRH), the UDP header (RoCEv2), the BTH and everything after it up to the
// ICRC, with the fields routers may change replaced by ones. The four wire
// bytes are the CRC value least-significant byte first.
//
// Speed: copying the headers into a masked scratch buffer would escape to
// the heap (hash/crc32 dispatches through a function pointer), and masking
// in place makes the CRC's wide loads stall on the narrow stores (measured:
// +35 ns per 1 KiB frame) and forbids read-only frames. So the frame is
// hashed as it is, in one hardware-accelerated pass, and the masking is
// folded into the starting value. The CRC register is linear: replacing byte
// b at offset k of the covered region by b' changes the final register
// exactly as starting from a register changed by S^-(k+1)(T[b^b']) would,
// where T is the CRC byte table and S the one-zero-byte step. seedFix holds
// those starting-value changes per offset and byte, so masking costs about
// eight table lookups.

// lrhSeed is the CRC state after the 8 bytes of 0xFF (rxe's seed 0xDEBB20E3
// is the raw register; this is the same state in crc32.Update's convention).
var lrhSeed = crc32.Update(0, crc32.IEEETable, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})

// maxMaskedOffset bounds the offset of a masked byte from the start of the
// network header: a 60-byte IPv4 header (IHL 15), UDP, and BTH byte 4.
const maxMaskedOffset = 60 + 8 + 4

// seedFix[k][x] is the change to the starting register equivalent to
// XORing x into the byte at offset k of the covered region.
var seedFix [maxMaskedOffset + 1][256]uint32

func init() {
	// unstep inverts the zero-byte step r -> T[r&0xFF] ^ r>>8. The top bytes
	// of the 256 table entries are distinct, so they name the low byte.
	var lowByte [256]byte
	for i := 0; i < 256; i++ {
		lowByte[crc32.IEEETable[i]>>24] = byte(i)
	}
	unstep := func(t uint32) uint32 {
		i := lowByte[t>>24]
		return (t^crc32.IEEETable[i])<<8 | uint32(i)
	}
	for x := 0; x < 256; x++ {
		r := crc32.IEEETable[x]
		for k := 0; k <= maxMaskedOffset; k++ {
			r = unstep(r)
			seedFix[k][x] = r
		}
	}
}

// ICRC computes the ICRC value of a parsed RoCE frame. The result is the
// CRC as a number; on the wire it is written little-endian. The frame is
// only read.
func (v *View) ICRC() uint32 {
	return icrcUpdate(lrhSeed^v.maskFix(), v.frame[v.l3:v.icrc])
}

// maskFix is the change to the CRC's starting state equivalent to reading
// the variant fields as ones (seedFix).
func (v *View) maskFix() uint32 {
	n := v.frame[v.l3:]
	var fx uint32
	switch v.transport {
	case V2IPv4:
		// TOS, TTL and header checksum read as ones.
		fx = seedFix[1][^n[1]] ^ seedFix[8][^n[8]] ^ seedFix[10][^n[10]] ^ seedFix[11][^n[11]]
	case V2IPv6, V1:
		// Traffic class, flow label and hop limit read as ones.
		fx = seedFix[0][^n[0]&0x0F] ^ seedFix[1][^n[1]] ^ seedFix[2][^n[2]] ^ seedFix[3][^n[3]] ^ seedFix[7][^n[7]]
	}
	if v.transport != V1 {
		u := v.udp - v.l3 + 6 // UDP checksum reads as ones
		fx ^= seedFix[u][^n[u]] ^ seedFix[u+1][^n[u+1]]
	}
	b := v.bth - v.l3 + 4 // BTH FECN/BECN/reserved byte reads as ones
	return fx ^ seedFix[b][^n[b]]
}

// icrcUpdate is crc32.Update(crc, crc32.IEEETable, p) for the ICRC's
// covered bytes. hash/crc32 folds 16-byte blocks with carry-less
// multiplication but finishes a tail of up to 15 bytes with one dependent
// table lookup per byte; here the blocks go to hash/crc32 and the tail is
// finished with independent lookups in slicing-by-16 tables.
func icrcUpdate(crc uint32, p []byte) uint32 {
	if len(p) < 64 {
		return crc32.Update(crc, crc32.IEEETable, p)
	}
	body := len(p) &^ 15
	crc = crc32.Update(crc, crc32.IEEETable, p[:body])
	return crcTail(crc, p[body:])
}

// tailTables[j][b] is the CRC register contribution of byte b followed
// by 15-j zero bytes: a tail of n bytes uses tailTables[16-n:], its byte i
// row 16-n+i.
var tailTables = func() (t [16][256]uint32) {
	t[15] = *crc32.IEEETable
	for j := 14; j >= 0; j-- {
		for b := range 256 {
			r := t[j+1][b]
			t[j][b] = r>>8 ^ t[15][r&0xFF]
		}
	}
	return t
}()

// crcTail continues crc (crc32.Update's convention) over at most 15
// bytes (icrcUpdate's tail): byte i of the tail, XORed with register byte
// i for the first four, moves through the bytes after it by one lookup;
// the lookups are independent of each other.
func crcTail(crc uint32, p []byte) uint32 {
	n := len(p)
	if n < 4 {
		return crc32.Update(crc, crc32.IEEETable, p)
	}
	rows := tailTables[16-n:]
	p = p[:len(rows)]
	r := ^crc ^ binary.LittleEndian.Uint32(p)
	out := rows[0][byte(r)] ^ rows[1][byte(r>>8)] ^ rows[2][byte(r>>16)] ^ rows[3][r>>24]
	for i := 4; i < len(rows); i++ {
		out ^= rows[i][p[i]]
	}
	return ^out
}

// WireICRC is the ICRC value the frame carries.
func (v *View) WireICRC() uint32 { return binary.LittleEndian.Uint32(v.frame[v.icrc:]) }

// ICRCOK reports whether the frame carries the correct ICRC.
func (v *View) ICRCOK() bool { return v.ICRC() == v.WireICRC() }

// SetICRC recomputes the ICRC and writes it into the frame, as a switch must
// after it rewrites any covered byte.
func (v *View) SetICRC() {
	binary.LittleEndian.PutUint32(v.frame[v.icrc:], v.ICRC())
}

// ComputeICRC parses frame and returns its correct ICRC value.
func ComputeICRC(frame []byte) (uint32, error) {
	var v View
	if err := v.Parse(frame); err != nil {
		return 0, err
	}
	return v.ICRC(), nil
}

// VerifyICRC parses frame and reports whether its ICRC is correct.
func VerifyICRC(frame []byte) (bool, error) {
	var v View
	if err := v.Parse(frame); err != nil {
		return false, err
	}
	return v.ICRCOK(), nil
}

// A TailCRC is the CRC contribution of the last bytes a frame's ICRC
// covers (from some offset up to the ICRC field), computed once and used
// for every frame that ends with the same bytes: an aggregating switch
// sends one result payload on every connection, each behind its own
// headers, and need not hash the payload once per connection.
type TailCRC struct {
	n int    // the bytes' length
	c uint32 // their contribution to the CRC register, from a zero register
}

// NewTailCRC is the contribution of p, the last len(p) covered bytes.
func NewTailCRC(p []byte) TailCRC {
	return TailCRC{n: len(p), c: ^icrcUpdate(0xFFFFFFFF, p)}
}

// ICRCWithTail is v.ICRC() for a frame whose last t.n covered bytes are
// the ones t was made of: only the bytes before them are hashed, and the
// register is carried across the tail by a shift table (CRC linearity:
// CRC(A‖B) = Z^|B|(CRC(A)) ⊕ CRC₀(B)). Without a table for the length yet
// (see zeroShiftFor) it hashes the whole frame.
func (v *View) ICRCWithTail(t TailCRC) uint32 {
	head := v.icrc - v.l3 - t.n
	z := zeroShiftFor(t.n)
	if z == nil || head < v.bth-v.l3+5 { // the tail must not hold a variant field
		return v.ICRC()
	}
	s := ^icrcUpdate(lrhSeed^v.maskFix(), v.frame[v.l3:v.l3+head])
	return ^(z.apply(s) ^ t.c)
}

// A zeroShift moves a CRC register through n zero bytes: Z^n(d) is d
// times x^(8n) modulo the CRC polynomial, linear in d, so four byte
// tables hold it. Tables are kept per length in a small direct-mapped
// cache; a length gets its table the second time in a row its slot sees
// it (a run of ever-changing lengths builds nothing).
type zeroShift struct {
	n int
	t [4][256]uint32
}

func (z *zeroShift) apply(d uint32) uint32 {
	return z.t[0][byte(d)] ^ z.t[1][byte(d>>8)] ^ z.t[2][byte(d>>16)] ^ z.t[3][d>>24]
}

const zeroShiftSlots = 64

var zeroShifts [zeroShiftSlots]struct {
	tab  atomic.Pointer[zeroShift]
	seen atomic.Int64 // the length last looked up here
}

// zeroShiftFor is the table for n bytes, or nil (not yet).
func zeroShiftFor(n int) *zeroShift {
	s := &zeroShifts[n%zeroShiftSlots]
	if z := s.tab.Load(); z != nil && z.n == n {
		return z
	}
	if s.seen.Swap(int64(n)) != int64(n) {
		return nil
	}
	z := newZeroShift(n)
	s.tab.Store(z) // a table never changes once stored
	return z
}

func newZeroShift(n int) *zeroShift {
	c := xPow8(n)
	z := &zeroShift{n: n}
	for j := range 4 {
		for b := range 256 {
			z.t[j][b] = gfMul(c, uint32(b)<<(8*j))
		}
	}
	return z
}

// crcPoly is the IEEE polynomial bit-reversed (x^0 is bit 31), as the
// register holds it.
const crcPoly = 0xEDB88320

// gfMul multiplies a and b modulo the CRC polynomial, both bit-reversed.
func gfMul(a, b uint32) uint32 {
	var p uint32
	for m := uint32(1) << 31; m != 0; m >>= 1 {
		if a&m != 0 {
			p ^= b
		}
		if b&1 != 0 {
			b = b>>1 ^ crcPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8 is x^(8n) modulo the CRC polynomial, bit-reversed.
func xPow8(n int) uint32 {
	p, base := uint32(1)<<31, uint32(1)<<(31-8) // x^0, x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			p = gfMul(p, base)
		}
		base = gfMul(base, base)
	}
	return p
}
