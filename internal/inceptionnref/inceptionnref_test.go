package inceptionnref

import (
	"math"
	"testing"
)

// The bound 2^-10 vectors of the INCEPTIONN specification (§2.7, derived
// by applying Algorithms 2 and 3 as printed): input bits, field width,
// decoded bits.
func TestVectors(t *testing.T) {
	for _, v := range []struct {
		in, width, out uint32
	}{
		{0x3F400000, 16, 0x3F400000}, // 0.75
		{0x3E99999A, 16, 0x3E999800}, // 0.3
		{0xBD800000, 16, 0xBD800000}, // -0.0625
		{0x3CA3D70A, 8, 0x3C800000},  // 0.02
		{0x3B83126F, 8, 0x00000000},  // 0.004: a zero 8-bit field
		{0x3A6BEDFA, 0, 0x00000000},  // 0.0009
		{0x3FC00000, 32, 0x3FC00000}, // 1.5
		{0x7F800000, 32, 0x7F800000}, // +Inf
	} {
		f := math.Float32frombits(v.in)
		if got := math.Float32bits(Trip(10, f)); got != v.out {
			t.Errorf("Trip(%v) = %#08x, want %#08x", f, got, v.out)
		}
		if got := FieldBits(10, f); got != int(v.width) {
			t.Errorf("FieldBits(%v) = %d, want %d", f, got, v.width)
		}
	}
	// Eight 16-bit values and one 8-bit: 2 + (2·16 + 8·16 + 8)/8 bytes.
	v := make([]float32, 9)
	for i := range v {
		v[i] = 0.5
	}
	v[8] = 0.02
	if got := PackedLen(10, v, 3); got != 2+21+3 {
		t.Errorf("PackedLen = %d, want 26", got)
	}
}
