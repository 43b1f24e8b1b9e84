package main

import (
	"encoding/binary"
	"math"
)

// Element types of the gradients (little-endian on the wire).
const (
	dtF32 = iota // IEEE binary32
	dtI32        // two's complement, wrapping
	dtF16        // IEEE binary16; each addition is done in binary32 and rounded back
)

func dtypeSize(d int) int {
	if d == dtF16 {
		return 2
	}
	return 4
}

// addInto sets dst[i] = dst[i] + src[i] element by element.
func addInto(d int, dst, src []byte) {
	n := min(len(dst), len(src))
	switch d {
	case dtF32:
		for i := 0; i+4 <= n; i += 4 {
			a := math.Float32frombits(binary.LittleEndian.Uint32(dst[i:]))
			b := math.Float32frombits(binary.LittleEndian.Uint32(src[i:]))
			binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(float32(a+b)))
		}
	case dtI32:
		for i := 0; i+4 <= n; i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], binary.LittleEndian.Uint32(dst[i:])+binary.LittleEndian.Uint32(src[i:]))
		}
	case dtF16:
		for i := 0; i+2 <= n; i += 2 {
			a := halfToFloat(binary.LittleEndian.Uint16(dst[i:]))
			b := halfToFloat(binary.LittleEndian.Uint16(src[i:]))
			binary.LittleEndian.PutUint16(dst[i:], floatToHalf(float32(a+b)))
		}
	}
}

// fillIdentity writes the additive identity into b: -0.0 for the float
// types (-0 + x is x for every x, +0 and -0 included), 0 for i32.
func fillIdentity(d int, b []byte) {
	clear(b)
	switch d {
	case dtF32:
		for i := 3; i < len(b); i += 4 {
			b[i] = 0x80
		}
	case dtF16:
		for i := 1; i < len(b); i += 2 {
			b[i] = 0x80
		}
	}
}

// halfToFloat widens a binary16 value; every binary16 value is exact in
// binary32.
func halfToFloat(h uint16) float32 {
	neg := h&0x8000 != 0
	exp := int(h>>10) & 0x1F
	frac := uint32(h & 0x3FF)
	var v float32
	switch exp {
	case 0: // zero or subnormal: frac units of 2^-24
		v = float32(math.Ldexp(float64(frac), -24))
		if neg {
			v = -v
		}
		return v
	case 0x1F: // infinity or NaN: keep the payload
		s := uint32(0)
		if neg {
			s = 1 << 31
		}
		return math.Float32frombits(s | 0xFF<<23 | frac<<13)
	}
	v = float32(math.Ldexp(float64(1024+frac), exp-25)) // (1.frac) × 2^(exp-15)
	if neg {
		v = -v
	}
	return v
}

// floatToHalf rounds a binary32 value to binary16, to nearest with ties
// to even; too large gives infinity, NaN gives the quiet NaN 0x7E00.
func floatToHalf(f float32) uint16 {
	bits := math.Float32bits(f)
	sign := uint16(bits>>16) & 0x8000
	mag := bits &^ (1 << 31)
	switch {
	case mag > 0x7F800000: // NaN
		return sign | 0x7E00
	case mag >= 0x477FF000: // ≥ 65520: halfway above 65504 or more, rounds to infinity
		return sign | 0x7C00
	case mag >= 0x38800000: // ≥ 2^-14: a normal binary16
		// Rebias the exponent (127 → 15) in place, then drop 13
		// fraction bits with rounding; a carry moves into the exponent.
		v := mag - (127-15)<<23
		h, rest := v>>13, v&0x1FFF
		if rest > 0x1000 || (rest == 0x1000 && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	// A subnormal (or zero): a count of 2^-24 units, rounded to even.
	// Scaling by 2^24 is exact in float64.
	units := math.RoundToEven(float64(math.Float32frombits(mag)) * (1 << 24))
	return sign | uint16(units)
}
