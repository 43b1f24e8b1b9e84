package tensor_test

// Expected values in these tests never come from the code under test: the
// binary16 reference decodes encodings with math.Ldexp and rounds by
// searching the sorted table of every finite binary16 value (ties to the
// even encoding), using float64 arithmetic that is exact for the sizes
// involved.

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/f16ref"
	"github.com/inaemu/inaemu/tensor"
)

// ---- independent binary16 reference ----

var (
	refDecode16 = f16ref.Decode
	refRound16  = f16ref.Round
)

func isNaN16(h uint16) bool { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }

func TestReferenceSanity(t *testing.T) {
	// The reference itself, against values known from the IEEE 754 tables.
	assert.Equal(t, 65504.0, refDecode16(0x7bff))
	assert.Equal(t, math.Ldexp(1, -24), refDecode16(0x0001))
	assert.Equal(t, math.Ldexp(1, -14), refDecode16(0x0400))
	assert.Equal(t, 1.0, refDecode16(0x3c00))
	assert.Equal(t, -2.0, refDecode16(0xc000))
	assert.Equal(t, uint16(0x3c00), refRound16(1))
	assert.Equal(t, uint16(0x7bff), refRound16(65519))
	assert.Equal(t, uint16(0x7c00), refRound16(65520))
	assert.Equal(t, uint16(0x0000), refRound16(math.Ldexp(1, -25)))
	assert.Equal(t, uint16(0x0001), refRound16(math.Ldexp(1.0000001, -25)))
	assert.Equal(t, uint16(0x8000), refRound16(math.Copysign(0, -1)))
}

// ---- F16ToF32 / F32ToF16 ----

func TestF16ExhaustiveRoundTrip(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := tensor.F16ToF32(h)
		want := refDecode16(h)
		back := tensor.F32ToF16(f)
		if isNaN16(h) {
			if !math.IsNaN(float64(f)) {
				t.Fatalf("F16ToF32(%#04x) = %v, want NaN", h, f)
			}
			if !isNaN16(back) {
				t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x, want a NaN", h, back)
			}
			continue
		}
		if float64(f) != want || math.Signbit(float64(f)) != math.Signbit(want) {
			t.Fatalf("F16ToF32(%#04x) = %v, want %v", h, f, want)
		}
		if back != h {
			t.Fatalf("F32ToF16(F16ToF32(%#04x)) = %#04x", h, back)
		}
	}
}

func checkRound(t *testing.T, f float32) bool {
	t.Helper()
	got := tensor.F32ToF16(f)
	want := refRound16(float64(f))
	if math.IsNaN(float64(f)) {
		if !isNaN16(got) {
			t.Errorf("F32ToF16(NaN %#08x) = %#04x, want NaN", math.Float32bits(f), got)
			return false
		}
		return true
	}
	if got != want {
		t.Errorf("F32ToF16(%v = %#08x) = %#04x (%v), want %#04x (%v)", f, math.Float32bits(f), got, refDecode16(got), want, refDecode16(want))
		return false
	}
	return true
}

func TestF32ToF16EdgeCases(t *testing.T) {
	cases := []float32{
		0, float32(math.Copysign(0, -1)), 1, -1, 65504, -65504, 65519.996, 65520, -65520, 65536, 1e10,
		float32(math.Inf(1)), float32(math.Inf(-1)),
		float32(math.Ldexp(1, -24)), float32(math.Ldexp(1, -25)), float32(math.Ldexp(1, -26)),
		float32(math.Ldexp(1.5, -25)), float32(math.Ldexp(1.5, -24)), float32(math.Ldexp(2.5, -24)),
		math.Nextafter32(float32(math.Ldexp(1, -25)), 1), math.Nextafter32(float32(math.Ldexp(1, -25)), 0),
		-math.Nextafter32(float32(math.Ldexp(1, -25)), 1), -float32(math.Ldexp(1, -25)),
		float32(math.Ldexp(1, -14)), math.Nextafter32(float32(math.Ldexp(1, -14)), 0),
		float32(math.Ldexp(1023.5, -24)), float32(math.Ldexp(1022.5, -24)), // subnormal ties; the first carries into the smallest normal
		math.SmallestNonzeroFloat32, -math.SmallestNonzeroFloat32, math.MaxFloat32, -math.MaxFloat32,
		float32(math.Ldexp(1, -126)), float32(math.Ldexp(1, -127)), // float32 normal / subnormal boundary
		2049, 2051, 4097, 4099, 1 + 1.0/2048, 1 + 3.0/2048, // ties at integer precision and above 1
		float32(math.NaN()), math.Float32frombits(0x7f800001), math.Float32frombits(0xffc00000),
	}
	for _, f := range cases {
		checkRound(t, f)
	}
	assert.Equal(t, uint16(0x7c00), tensor.F32ToF16(65520), "65520 rounds to +inf")
	assert.Equal(t, uint16(0x7bff), tensor.F32ToF16(65519.996))
	assert.Equal(t, uint16(0x8000), tensor.F32ToF16(float32(math.Copysign(0, -1))), "negative zero")
	assert.Equal(t, uint16(0x8000), tensor.F32ToF16(-float32(math.Ldexp(1, -26))), "tiny negative rounds to -0")
}

// TestF32ToF16AllNeighbours checks, for every pair of adjacent binary16
// values (both signs), the two values, the exact midpoint (a tie) and the
// float32 values on either side of it.
func TestF32ToF16AllNeighbours(t *testing.T) {
	bad := 0
	for c := 0; c < 0x7c00 && bad < 10; c++ {
		lo, hi := f16ref.Table[c], f16ref.Table[c+1]
		mid := float32((lo + hi) / 2) // exact: a binary16 midpoint has at most 12 significant bits
		require.Equal(t, (lo+hi)/2, float64(mid))
		for _, f := range []float32{float32(lo), mid, math.Nextafter32(mid, 0), math.Nextafter32(mid, float32(math.Inf(1)))} {
			for _, s := range []float32{f, -f} {
				if !checkRound(t, s) {
					bad++
				}
			}
		}
	}
}

func TestF32ToF16Random(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 200000; i++ {
		var f float32
		switch i % 3 {
		case 0: // any bit pattern
			f = math.Float32frombits(rng.Uint32())
		case 1: // the binary16 range and a bit around it
			f = math.Float32frombits(uint32(rng.IntN(2))<<31 | uint32(100+rng.IntN(45))<<23 | rng.Uint32()&0x7fffff)
		default: // near a binary16 value: low float32 bits random around the rounding point
			h := f16ref.Table[rng.IntN(0x7c00)]
			f = math.Float32frombits(math.Float32bits(float32(h)) ^ rng.Uint32()&0x3fff)
		}
		if !checkRound(t, f) {
			return
		}
	}
}

// ---- Add ----

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func i32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func TestAddF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 4096
	a, b := make([]byte, 4*n), make([]byte, 4*n)
	for i := 0; i < 4*n; i += 4 {
		binary.LittleEndian.PutUint32(a[i:], rng.Uint32())
		binary.LittleEndian.PutUint32(b[i:], rng.Uint32())
	}
	// A few designed elements: cancellation, inf - inf, rounding.
	copy(a, f32s(1e8, float32(math.Inf(1)), 0.1, float32(math.Copysign(0, -1))))
	copy(b, f32s(-1e8, float32(math.Inf(-1)), 0.2, float32(math.Copysign(0, -1))))
	want := make([]byte, len(a))
	for i := 0; i < len(a); i += 4 {
		x := math.Float32frombits(binary.LittleEndian.Uint32(a[i:]))
		y := math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
		binary.LittleEndian.PutUint32(want[i:], math.Float32bits(x+y))
	}
	bCopy := append([]byte(nil), b...)
	tensor.Add(tensor.F32, a, b)
	assert.Equal(t, bCopy, b, "src untouched")
	for i := 0; i < len(a); i += 4 {
		g, w := binary.LittleEndian.Uint32(a[i:]), binary.LittleEndian.Uint32(want[i:])
		gf, wf := math.Float32frombits(g), math.Float32frombits(w)
		if math.IsNaN(float64(wf)) {
			require.True(t, math.IsNaN(float64(gf)), "element %d", i/4)
			continue
		}
		require.Equal(t, w, g, "element %d: %v, want %v", i/4, gf, wf)
	}
	assert.Equal(t, float32(0), math.Float32frombits(binary.LittleEndian.Uint32(a[0:])))
	assert.True(t, math.Signbit(float64(math.Float32frombits(binary.LittleEndian.Uint32(a[12:])))), "-0 + -0 = -0")
}

func TestAddI32Wraps(t *testing.T) {
	a := i32s(math.MaxInt32, math.MinInt32, -1, 5, 1<<30)
	b := i32s(1, -1, 1, -7, 1<<30)
	tensor.Add(tensor.I32, a, b)
	assert.Equal(t, i32s(math.MinInt32, math.MaxInt32, 0, -2, math.MinInt32), a)

	rng := rand.New(rand.NewPCG(5, 6))
	x, y := make([]byte, 4096), make([]byte, 4096)
	for i := range x {
		x[i], y[i] = byte(rng.Uint32()), byte(rng.Uint32())
	}
	want := make([]byte, len(x))
	for i := 0; i < len(x); i += 4 {
		s := int32(binary.LittleEndian.Uint32(x[i:])) + int32(binary.LittleEndian.Uint32(y[i:]))
		binary.LittleEndian.PutUint32(want[i:], uint32(s))
	}
	tensor.Add(tensor.I32, x, y)
	assert.Equal(t, want, x)
}

// refAdd16 is the correctly rounded binary16 sum: the exact sum in float64
// (two binary16 values are multiples of 2^-24 below 2^17, so 41 bits
// suffice) rounded by the brute-force reference.
func refAdd16(a, b uint16) uint16 {
	return refRound16(refDecode16(a) + refDecode16(b))
}

func TestAddF16(t *testing.T) {
	// Interesting operands: zeros, subnormals, boundaries, infinities, and
	// values near 1 and near the top of the range.
	var special []uint16
	for _, h := range []uint16{0x0000, 0x8000, 0x0001, 0x8001, 0x0002, 0x03ff, 0x83ff, 0x0400, 0x8400, 0x0401,
		0x3c00, 0xbc00, 0x3c01, 0xbc01, 0x3bff, 0x1400, 0x1401, 0x7bff, 0xfbff, 0x7bfe, 0x7800, 0xf800,
		0x7c00, 0xfc00, 0x6800, 0x6801, 0xe801, 0x0200, 0x8200} {
		special = append(special, h)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for len(special) < 400 {
		if h := uint16(rng.Uint32()); !isNaN16(h) {
			special = append(special, h)
		}
	}
	var as, bs []uint16
	for _, x := range special {
		for _, y := range special {
			as, bs = append(as, x), append(bs, y)
		}
	}
	for i := 0; i < 200000; i++ {
		x, y := uint16(rng.Uint32()), uint16(rng.Uint32())
		if isNaN16(x) || isNaN16(y) {
			continue
		}
		if i%2 == 0 { // same binade, so that cancellation and ties happen often
			y = y&0x83ff | x&0x7c00
		}
		as, bs = append(as, x), append(bs, y)
	}
	a, b := make([]byte, 2*len(as)), make([]byte, 2*len(bs))
	for i := range as {
		binary.LittleEndian.PutUint16(a[2*i:], as[i])
		binary.LittleEndian.PutUint16(b[2*i:], bs[i])
	}
	tensor.Add(tensor.F16, a, b)
	bad := 0
	for i := range as {
		got := binary.LittleEndian.Uint16(a[2*i:])
		want := refAdd16(as[i], bs[i])
		if isNaN16(want) { // inf + -inf
			if !isNaN16(got) {
				t.Errorf("%#04x + %#04x = %#04x, want NaN", as[i], bs[i], got)
				bad++
			}
		} else if got != want {
			t.Errorf("%#04x (%v) + %#04x (%v) = %#04x (%v), want %#04x (%v)", as[i], refDecode16(as[i]), bs[i], refDecode16(bs[i]),
				got, refDecode16(got), want, refDecode16(want))
			bad++
		}
		if bad > 10 {
			t.FailNow()
		}
	}
}

// ---- Sum ----

func TestSumIsLeftFold(t *testing.T) {
	a, b, c := float32(1e8), float32(-1e8), float32(1)
	require.NotEqual(t, (a+b)+c, a+(b+c), "the example must be non-associative")
	x, y, z := f32s(a, 0.1), f32s(b, 0.2), f32s(c, 0.3)
	xCopy := append([]byte(nil), x...)
	got := tensor.Sum(tensor.F32, x, y, z)
	assert.Equal(t, f32s((a+b)+c, (float32(0.1)+0.2)+0.3), got)
	assert.NotEqual(t, f32s(a+(b+c), float32(0.1)+(float32(0.2)+0.3)), got)
	assert.Equal(t, xCopy, x, "inputs untouched")

	// Order matters: the same inputs in another order give another result.
	assert.NotEqual(t, got, tensor.Sum(tensor.F32, y, z, x))
	assert.Nil(t, tensor.Sum(tensor.F32))
	assert.Equal(t, x, tensor.Sum(tensor.F32, x))

	// i32 and f16 fold the same way.
	assert.Equal(t, i32s(math.MinInt32+1), tensor.Sum(tensor.I32, i32s(math.MaxInt32), i32s(1), i32s(1)))
	h := func(v ...uint16) []byte {
		b := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(b[2*i:], x)
		}
		return b
	}
	// 2048 + 1 + 1: ((2048+1)=2048 by ties-to-even) + 1 = 2048, while 2048 + (1+1) = 2050.
	assert.Equal(t, h(0x6800), tensor.Sum(tensor.F16, h(0x6800), h(0x3c00), h(0x3c00)))
	assert.Equal(t, h(0x6801), tensor.Sum(tensor.F16, h(0x3c00), h(0x3c00), h(0x6800)))
}

// ---- names ----

func TestParseDType(t *testing.T) {
	for _, d := range []tensor.DType{tensor.F32, tensor.I32, tensor.F16} {
		got, err := tensor.ParseDType(d.String())
		require.NoError(t, err)
		assert.Equal(t, d, got)
	}
	for _, s := range []string{"", "F32", "float32", "f64", "i16", "f32 "} {
		_, err := tensor.ParseDType(s)
		assert.Error(t, err, "%q", s)
	}
	assert.Equal(t, 4, tensor.F32.Size())
	assert.Equal(t, 4, tensor.I32.Size())
	assert.Equal(t, 2, tensor.F16.Size())
	assert.True(t, tensor.F32.Float())
	assert.True(t, tensor.F16.Float())
	assert.False(t, tensor.I32.Float())
	assert.Equal(t, "dtype(9)", tensor.DType(9).String())
}

func TestValue(t *testing.T) {
	assert.Equal(t, "1.5", tensor.Value(tensor.F32, f32s(0, 1.5), 1))
	assert.Equal(t, "-7", tensor.Value(tensor.I32, i32s(-7), 0))
	assert.Equal(t, "-2", tensor.Value(tensor.F16, []byte{0x00, 0xc0}, 0))
	assert.Equal(t, "?", tensor.Value(tensor.F32, f32s(1), 1))
}
