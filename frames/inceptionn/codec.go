// Package inceptionn is INCEPTIONN's lossy float32 gradient codec (Li et
// al., "A Network-Centric Hardware/Algorithm Co-Design to Accelerate
// Distributed Training of Deep Neural Networks", MICRO 2018, §V,
// Algorithms 2 and 3) and the packed form a NIC puts on the wire.
//
// Every float32 f = (s, e, m) becomes a 2-bit tag and a field of 0, 8, 16
// or 32 bits, for an error bound of 2^-k (the algorithm's error_bound is
// the biased exponent 127-k):
//
//	tag 11 NO_COMPRESS     e >= 127 (|f| >= 1, Inf, NaN)     the 32 bits of f
//	tag 00 0BIT_COMPRESS   e < 127-k (|f| < 2^-k, 0, subnormals)   nothing
//	tag 10 16BIT_COMPRESS  e >= 127-k + ceil(k/2)             s, then bits 22..8 of (1.m >> (127-e))
//	tag 01 8BIT_COMPRESS   otherwise                          s, then bits 22..16 of (1.m >> (127-e))
//
// so the compressed classes keep |f| truncated toward zero to 15 or 7
// fraction bits. Decoding rebuilds the exponent from the field's leading
// one. Two things the algorithm leaves open are decided here: a field of
// zero (an 8-bit-class value below 2^-7, possible for k >= 8) decodes to
// +0, whatever its sign bit, so decoding then encoding again is a
// projection bit for bit; and the worst error for |f| < 1 is therefore
// max(2^-k, 2^-7) — for k = 8 and 10, 2^-7, not the 2^-k the paper calls
// the bound.
package inceptionn

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Class is a value's compressed width, the 2-bit tag.
type Class uint8

const (
	Zero   Class = 0 // 0BIT_COMPRESS: nothing stored, decodes to +0
	Bits8  Class = 1 // 8BIT_COMPRESS: sign and 7 fraction bits
	Bits16 Class = 2 // 16BIT_COMPRESS: sign and 15 fraction bits
	Raw    Class = 3 // NO_COMPRESS: the 32 bits as they are
)

// Bits is the width of the class's field.
func (c Class) Bits() int { return [4]int{0, 8, 16, 32}[c&3] }

func (c Class) String() string { return [4]string{"0bit", "8bit", "16bit", "32bit"}[c&3] }

// MinBound and MaxBound are the exponents k of the error bounds 2^-k the
// codec takes: error_bound = 127-k must be a normal biased exponent below
// 127.
const (
	MinBound = 1
	MaxBound = 126
)

// Codec compresses with error bound 2^-K.
type Codec struct {
	K       int
	lo, mid uint32 // error_bound, and the 16-bit class's lowest exponent
}

// New is the codec of error bound 2^-k.
func New(k int) (Codec, error) {
	if k < MinBound || k > MaxBound {
		return Codec{}, fmt.Errorf("error bound 2^-%d: want k in %d..%d", k, MinBound, MaxBound)
	}
	lo := uint32(127 - k)
	return Codec{K: k, lo: lo, mid: lo + uint32((k+1)/2)}, nil
}

// ParseBound reads an error bound as 2^-K (or K alone) and returns K.
func ParseBound(s string) (int, error) {
	t := strings.TrimPrefix(strings.TrimSpace(s), "2^-")
	k, err := strconv.Atoi(t)
	if err != nil || k < MinBound || k > MaxBound {
		return 0, fmt.Errorf("error bound %q: want 2^-K with K in %d..%d, e.g. 2^-10", s, MinBound, MaxBound)
	}
	return k, nil
}

// Encode is Algorithm 2: f's tag and field (in the low Bits() bits).
func (c Codec) Encode(f uint32) (Class, uint32) {
	e := f >> 23 & 0xFF
	switch {
	case e >= 127:
		return Raw, f
	case e < c.lo:
		return Zero, 0
	}
	s := f >> 31
	shifted := (1<<23 | f&0x7FFFFF) >> (127 - e) // 24 bits
	if e >= c.mid {
		return Bits16, s<<15 | shifted>>8&0x7FFF
	}
	return Bits8, s<<7 | shifted>>16&0x7F
}

// Decode is Algorithm 3 (a zero field decodes to +0).
func Decode(t Class, v uint32) uint32 {
	var s, x uint32
	var w int // the field's width after the sign
	switch t & 3 {
	case Raw:
		return v
	case Zero:
		return 0
	case Bits8:
		s, x, w = v>>7&1, v&0x7F, 7
	case Bits16:
		s, x, w = v>>15&1, v&0x7FFF, 15
	}
	if x == 0 {
		return 0
	}
	shift := w - bits.Len32(x) + 1 // first1_loc_from_MSB, from 1
	m := x << shift & (1<<w - 1) << (23 - w)
	return s<<31 | uint32(127-shift)<<23 | m
}
