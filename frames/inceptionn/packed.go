package inceptionn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// The packed form of a payload, as the NIC's compression engine emits it
// (§VI-A packs groups of eight values, each a 16-bit tag vector and the
// eight fields, into 256-bit bursts; the paper leaves the bit order and
// the framing open, so they are fixed here):
//
//	 0               1
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  L: uncompressed bytes (BE)   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| t0| t1| t2| t3| t4| t5| t6| t7|  group 0: tag vector,
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| field 0 | field 1 | ... (0, 8, 16 or 32 bits each, sign first)
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| group 1 ... | zero pad to a byte | the L mod 4 tail bytes
//
// The payload is read as floor(L/4) little-endian float32s, eight to a
// group; a last group of fewer than eight has tag 00 for the missing
// ones. Groups follow one another as one bit stream, most significant bit
// of each byte first. L leads so that a frame decodes without the
// connection's state (a capture checker can).

// MaxPayload is the largest payload the 16-bit length describes.
const MaxPayload = 0xFFFF

// Histogram counts values per class.
type Histogram [4]int64

// Add counts another histogram's values in h.
func (h *Histogram) Add(o Histogram) {
	for i := range h {
		h[i] += o[i]
	}
}

// Values is how many values h counts.
func (h Histogram) Values() int64 { return h[0] + h[1] + h[2] + h[3] }

// Bits is what h's values take compressed: tag and field, without group
// or packet framing (Table III's "bitwidth" summed).
func (h Histogram) Bits() int64 {
	var b int64
	for c, n := range h {
		b += n * int64(2+Class(c).Bits())
	}
	return b
}

// bitWriter appends bits to a byte slice, most significant first, 32 at
// a time.
type bitWriter struct {
	out  []byte
	acc  uint64 // pending bits in the low nacc (higher bits are stale)
	nacc uint   // < 32 between calls
}

// put appends the low n bits of v (n <= 32).
func (w *bitWriter) put(v uint32, n int) {
	w.acc = w.acc<<uint(n) | uint64(v)&(1<<uint(n)-1)
	w.nacc += uint(n)
	if w.nacc >= 32 {
		w.nacc -= 32
		w.out = binary.BigEndian.AppendUint32(w.out, uint32(w.acc>>w.nacc))
	}
}

// flush writes the pending bits, zero-padded to a byte.
func (w *bitWriter) flush() []byte {
	for w.nacc >= 8 {
		w.nacc -= 8
		w.out = append(w.out, byte(w.acc>>w.nacc))
	}
	if w.nacc > 0 {
		w.out = append(w.out, byte(w.acc<<(8-w.nacc)))
		w.nacc = 0
	}
	return w.out
}

// AppendPacked appends payload's packed form to dst and counts its
// values' classes in h (if not nil).
func (c Codec) AppendPacked(dst, payload []byte, h *Histogram) ([]byte, error) {
	if len(payload) > MaxPayload {
		return dst, fmt.Errorf("payload of %d bytes: the packed form's 16-bit length takes at most %d", len(payload), MaxPayload)
	}
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(payload)))
	dst = slices.Grow(dst, len(payload)/32*34+len(payload)%32*2+4) // the most it can take
	w := bitWriter{out: dst}
	n := len(payload) / 4
	var tags [8]Class
	var fields [8]uint32
	for g := 0; g < n; g += 8 {
		var tv uint32
		for i := range 8 {
			tags[i], fields[i] = Zero, 0
			if g+i < n {
				tags[i], fields[i] = c.Encode(binary.LittleEndian.Uint32(payload[4*(g+i):]))
			}
			tv = tv<<2 | uint32(tags[i])
			if h != nil && g+i < n {
				h[tags[i]]++
			}
		}
		w.put(tv, 16)
		for i := range 8 {
			if b := tags[i].Bits(); b > 0 {
				w.put(fields[i], b)
			}
		}
	}
	return append(w.flush(), payload[4*n:]...), nil
}

// refill reads src[pos:] into the bit accumulator (nacc < 32 on entry):
// 32 bits at once, or what bytes are left.
func refill(src []byte, acc uint64, nacc uint, pos int) (uint64, uint, int) {
	if pos+4 <= len(src) {
		return acc<<32 | uint64(binary.BigEndian.Uint32(src[pos:])), nacc + 32, pos + 4
	}
	for nacc <= 56 && pos < len(src) {
		acc = acc<<8 | uint64(src[pos])
		pos++
		nacc += 8
	}
	return acc, nacc, pos
}

// ErrPacked is a packed payload that is not one.
var ErrPacked = errors.New("not a packed INCEPTIONN payload")

// Unpack appends the payload that packed holds to dst and counts its
// values' classes in h (if not nil).
func Unpack(dst, packed []byte, h *Histogram) ([]byte, error) {
	keep := len(dst)
	bad := func(f string, a ...any) ([]byte, error) {
		return dst[:keep], fmt.Errorf("%w: "+f, append([]any{ErrPacked}, a...)...)
	}
	if len(packed) < 2 {
		return bad("%d bytes, shorter than its 2-byte length", len(packed))
	}
	l := int(binary.BigEndian.Uint16(packed))
	n := l / 4
	src := packed[2:]
	var acc uint64 // unread bits in the low nacc (locals, not a closure's, so they stay in registers)
	var nacc uint
	pos := 0
	base := len(dst)
	dst = slices.Grow(dst, l)[:base+4*n]
	vals := dst[base:]
	for g := 0; g < n; g += 8 {
		if nacc < 16 {
			acc, nacc, pos = refill(src, acc, nacc, pos)
			if nacc < 16 {
				return bad("cut in group %d of %d", g/8, (n+7)/8)
			}
		}
		nacc -= 16
		tv := uint32(acc >> nacc)
		for i := range 8 {
			t := Class(tv >> (14 - 2*i) & 3)
			if g+i >= n {
				if t != Zero {
					return bad("the last group's element %d is past the payload's %d values but tagged %s", i, n, t)
				}
				continue
			}
			if h != nil {
				h[t]++
			}
			var v uint32
			if b := uint(t.Bits()); b > 0 {
				if nacc < b {
					acc, nacc, pos = refill(src, acc, nacc, pos)
					if nacc < b {
						return bad("cut in value %d", g+i)
					}
				}
				nacc -= b
				v = uint32(acc>>nacc) & (1<<b - 1)
			}
			binary.LittleEndian.PutUint32(vals[4*(g+i):], Decode(t, v))
		}
	}
	pos -= int(nacc / 8) // whole bytes read ahead (the rest of nacc is the last byte's padding)
	if len(src)-pos != l%4 {
		return bad("%d bytes after the values, want the %d tail bytes of a %d-byte payload", len(src)-pos, l%4, l)
	}
	return append(dst, src[pos:]...), nil
}

// PackedLen is the length of payload's packed form.
func (c Codec) PackedLen(payload []byte) int {
	n := len(payload) / 4
	bits := 16 * ((n + 7) / 8)
	for i := 0; i < n; i++ {
		t, _ := c.Encode(binary.LittleEndian.Uint32(payload[4*i:]))
		bits += t.Bits()
	}
	return 2 + (bits+7)/8 + len(payload)%4
}

// Measure counts payload's values per class in h and returns the length
// of its packed form and the largest |Decode(Encode(f)) - f| of its
// values (0 for Inf and NaN, which pass whole).
func (c Codec) Measure(payload []byte, h *Histogram) (packedLen int, maxErr float64) {
	n := len(payload) / 4
	bits := 16 * ((n + 7) / 8)
	for i := 0; i < n; i++ {
		f := binary.LittleEndian.Uint32(payload[4*i:])
		t, v := c.Encode(f)
		h[t]++
		bits += t.Bits()
		if t != Raw {
			a, b := float64(math.Float32frombits(f)), float64(math.Float32frombits(Decode(t, v)))
			maxErr = max(maxErr, math.Abs(a-b))
		}
	}
	return 2 + (bits+7)/8 + len(payload)%4, maxErr
}

// Project replaces every whole float32 of p (little-endian) by what
// decompressing its compressed form gives: Decode(Encode(f)). It is what
// a value is after one trip through the engines.
func (c Codec) Project(p []byte) {
	for i := 0; i+4 <= len(p); i += 4 {
		binary.LittleEndian.PutUint32(p[i:], Decode(c.Encode(binary.LittleEndian.Uint32(p[i:]))))
	}
}

// Table3 is INCEPTIONN's Table III (§VIII-C): per network and bound
// 2^-k, the percentage of values compressed to 2, 10, 18 and 34 bits
// (tag included), i.e. of the 0-, 8-, 16- and 32-bit classes, as
// printed (three rows sum to 100.1 %).
var Table3 = map[string]map[int][4]float64{
	"alexnet":  {10: {74.9, 3.9, 21.1, 0.1}, 8: {82.5, 14.8, 2.6, 0.1}, 6: {93.0, 7.0, 0.0, 0.1}},
	"hdc":      {10: {92.0, 6.5, 1.5, 0.0}, 8: {95.7, 3.4, 0.9, 0.0}, 6: {98.1, 1.6, 0.4, 0.0}},
	"resnet50": {10: {81.6, 17.9, 0.5, 0.0}, 8: {92.3, 7.7, 0.1, 0.0}, 6: {97.6, 2.4, 0.0, 0.0}},
	"vgg16":    {10: {94.2, 0.9, 4.9, 0.0}, 8: {96.2, 3.8, 0.0, 0.0}, 6: {97.3, 2.7, 0.0, 0.0}},
}
