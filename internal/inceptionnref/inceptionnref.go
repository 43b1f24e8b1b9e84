// Package inceptionnref is an independent reference of INCEPTIONN's
// codec (MICRO '18, Algorithms 2 and 3) for tests: what a value becomes
// after compression and decompression, written from the algorithms in
// terms of values (thresholds and truncated fractions), not from the
// bit manipulations of frames/inceptionn, so tests of that package, of
// the NICs' engines and of the compressing jobs never compare the codec
// with itself. It also makes gradient-like test data.
package inceptionnref

import (
	"encoding/binary"
	"math"
)

// Trip is decompress(compress(f)) for error bound 2^-k: |f| >= 1, Inf
// and NaN pass; |f| < 2^-k is +0; otherwise |f| is cut towards zero to 7
// fraction bits below 2^-floor(k/2) and to 15 from there, with f's sign,
// and a cut to nothing is +0.
func Trip(k int, f float32) float32 {
	a := math.Abs(float64(f))
	switch {
	case math.IsNaN(a) || a >= 1:
		return f
	case a < math.Ldexp(1, -k):
		return 0
	}
	frac := 15
	if a < math.Ldexp(1, -(k/2)) {
		frac = 7
	}
	q := math.Floor(math.Ldexp(a, frac))
	if q == 0 {
		return 0
	}
	return float32(math.Copysign(math.Ldexp(q, -frac), float64(f)))
}

// FieldBits is the width of f's field in the packed form: 0, 8, 16 or 32.
func FieldBits(k int, f float32) int {
	a := math.Abs(float64(f))
	switch {
	case math.IsNaN(a) || a >= 1:
		return 32
	case a < math.Ldexp(1, -k):
		return 0
	case a < math.Ldexp(1, -(k/2)):
		return 8
	}
	return 16
}

// PackedLen is a payload's packed length: 2 bytes of length, 16 bits of
// tags per group of eight values, the fields, padding to a byte, and the
// tail bytes that make no whole float.
func PackedLen(k int, v []float32, tail int) int {
	bits := 16 * ((len(v) + 7) / 8)
	for _, f := range v {
		bits += FieldBits(k, f)
	}
	return 2 + (bits+7)/8 + tail
}

// TripPackets is one trip of a message's floats through a NIC's engines,
// packet by packet (mtu bytes each from the message's start): a packet's
// values are tripped when its packed form is shorter than it, and left
// as they are (the packet goes uncompressed) when not.
func TripPackets(k, mtu int, v []float32) {
	per := mtu / 4
	for lo := 0; lo < len(v); lo += per {
		pkt := v[lo:min(lo+per, len(v))]
		if PackedLen(k, pkt, 0) >= 4*len(pkt) {
			continue
		}
		for i, f := range pkt {
			pkt[i] = Trip(k, f)
		}
	}
}

// TripBytes trips every whole little-endian float32 of b in place.
func TripBytes(k int, b []byte) {
	for i := 0; i+4 <= len(b); i += 4 {
		f := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(Trip(k, f)))
	}
}

// Gradients is n bytes of little-endian float32 gradients: magnitudes
// in [2^-e, 2^-e+1) for e in [0, 16) (every class occurs at the paper's
// bounds), random signs; the n mod 4 tail bytes are arbitrary.
func Gradients(n int, seed uint64) []byte {
	b := make([]byte, n)
	x := seed*0x9E3779B97F4A7C15 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	for i := 0; i+4 <= n; i += 4 {
		r := binary.LittleEndian.Uint32(b[i:])
		f := float32(math.Ldexp(1+float64(r&0xFFFF)/65536, -int(r>>16&15)))
		if r>>31 != 0 {
			f = -f
		}
		binary.LittleEndian.PutUint32(b[i:], math.Float32bits(f))
	}
	return b
}
