// Package f16ref is an independent binary16 reference for tests: values
// from the IEEE 754 definition and rounding by brute-force search, written
// without looking at package tensor, so tests of that package (and of the
// switch's float16 sums) never compare it with itself.
package f16ref

import (
	"math"
	"sort"
)

// Decode is the value of a binary16 encoding, from the IEEE 754
// definition.
func Decode(h uint16) float64 {
	neg := h&0x8000 != 0
	exp := int(h>>10) & 0x1f
	mant := int(h & 0x3ff)
	var v float64
	switch {
	case exp == 0x1f && mant != 0:
		return math.NaN()
	case exp == 0x1f:
		v = math.Inf(1)
	case exp == 0:
		v = math.Ldexp(float64(mant), -24) // subnormal: mant × 2^-24
	default:
		v = math.Ldexp(float64(1024+mant), exp-25) // 1.mant × 2^(exp-15)
	}
	if neg {
		v = -v
	}
	return v
}

// Table holds the values of encodings 0x0000..0x7c00 (all finite
// non-negative values, then +inf). For rounding, 0x7c00 stands for 65536,
// the next value of an unbounded exponent range: IEEE overflow rounds to
// infinity exactly when the unbounded rounding would give 65536 or more.
var Table = func() []float64 {
	t := make([]float64, 0x7c01)
	for c := range t[:0x7c00] {
		t[c] = Decode(uint16(c))
	}
	t[0x7c00] = 65536
	return t
}()

// Round rounds a float64 to binary16 by brute force: find the two
// neighbouring binary16 values and take the nearer, ties to the even
// encoding. Comparisons are exact: 2x and lo+hi are exact in float64.
func Round(x float64) uint16 {
	if math.IsNaN(x) {
		return 0x7e00
	}
	var sign uint16
	if math.Signbit(x) {
		sign = 0x8000
		x = -x
	}
	if x >= 65536 { // includes +inf
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(Table, x) // first value >= x
	if Table[i] == x {
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	mid := Table[lo] + Table[hi]
	switch {
	case 2*x < mid:
		return sign | uint16(lo)
	case 2*x > mid:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	default:
		return sign | uint16(hi)
	}
}
