package inceptionn_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames/inceptionn"
)

func codec(t testing.TB, k int) inceptionn.Codec {
	t.Helper()
	c, err := inceptionn.New(k)
	require.NoError(t, err)
	return c
}

// The worked vectors for bound 2^-10: Algorithms 2 and 3 applied by hand
// to the binary32 values nearest the decimals.
func TestVectors(t *testing.T) {
	c := codec(t, 10)
	for _, v := range []struct {
		f       uint32
		tag     inceptionn.Class
		field   uint32
		decoded uint32
	}{
		{0x3F400000, inceptionn.Bits16, 0x6000, 0x3F400000},  // 0.75
		{0x3E99999A, inceptionn.Bits16, 0x2666, 0x3E999800},  // 0.3 -> 0.29998779296875
		{0xBD800000, inceptionn.Bits16, 0x8800, 0xBD800000},  // -0.0625
		{0x3CA3D70A, inceptionn.Bits8, 0x02, 0x3C800000},     // 0.02 -> 0.015625
		{0x3B83126F, inceptionn.Bits8, 0x00, 0x00000000},     // 0.004: a zero field, +0
		{0x3A6BEDFA, inceptionn.Zero, 0, 0x00000000},         // 0.0009
		{0x3FC00000, inceptionn.Raw, 0x3FC00000, 0x3FC00000}, // 1.5
		{0x7F800000, inceptionn.Raw, 0x7F800000, 0x7F800000}, // +Inf
	} {
		tag, field := c.Encode(v.f)
		assert.Equal(t, v.tag, tag, "%#08x", v.f)
		assert.Equal(t, v.field, field, "%#08x", v.f)
		assert.Equal(t, v.decoded, inceptionn.Decode(tag, field), "%#08x", v.f)
	}
}

// reference is the codec written from the classes' value ranges instead
// of the algorithm's bit operations: |f| < 2^-k is zero, below
// 2^-floor(k/2) sign and floor(|f|·2^7), below 1 sign and floor(|f|·2^15),
// the rest (and Inf, NaN) as it is; a compressed value decodes to
// ±field/2^7 or ±field/2^15, a zero field to +0.
func reference(k int, f uint32) (inceptionn.Class, uint32, uint32) {
	x := math.Float32frombits(f)
	a := math.Abs(float64(x))
	s := f >> 31
	switch {
	case math.IsNaN(float64(x)) || a >= 1:
		return inceptionn.Raw, f, f
	case a < math.Ldexp(1, -k):
		return inceptionn.Zero, 0, 0
	}
	c, w := inceptionn.Bits8, 7
	if a >= math.Ldexp(1, -(k/2)) {
		c, w = inceptionn.Bits16, 15
	}
	q := uint32(math.Floor(math.Ldexp(a, w)))
	d := float32(math.Ldexp(float64(q), -w))
	if s == 1 {
		d = -d
	}
	if q == 0 {
		d = 0
	}
	return c, s<<w | q, math.Float32bits(d)
}

// edgeValues are the values around every class boundary and special
// case, both signs.
func edgeValues() []uint32 {
	var v []uint32
	for e := uint32(0); e < 256; e++ {
		for _, m := range []uint32{0, 1, 0x400000, 0x7FFFFF, 0x12345} {
			v = append(v, e<<23|m, 1<<31|e<<23|m)
		}
	}
	return v
}

// The codec against the reference on every exponent's edges and a
// million random patterns, for every bound from 2^-1 to 2^-30.
func TestCodecMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	vals := edgeValues()
	for range 1 << 20 {
		vals = append(vals, r.Uint32())
	}
	for k := 1; k <= 30; k++ {
		c := codec(t, k)
		bad := 0
		for _, f := range vals {
			tag, field := c.Encode(f)
			rt, rf, rd := reference(k, f)
			if (tag != rt || field != rf || inceptionn.Decode(tag, field) != rd) && bad < 5 {
				bad++
				t.Errorf("k=%d f=%#08x: codec %s %#x -> %#08x, reference %s %#x -> %#08x", k, f, tag, field, inceptionn.Decode(tag, field), rt, rf, rd)
			}
		}
	}
}

// All 2^32 float32 patterns for the paper's bounds (2^-6, 2^-8, 2^-10):
// decoding then encoding again gives the same tag and field, except for
// exactly the 8-bit-class values whose field is zero (2^-k <= |f| <
// 2^-7, (k-7)·2^24 patterns for k >= 8), which decode to +0 and re-encode
// as tag 00; and for |f| < 1 the error is below max(2^-k, 2^-7), which
// for k = 8 and 10 is 2^-7, not 2^-k. About 10 s a bound on two cores.
func TestAllPatterns(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 3 × 2^32 patterns")
	}
	for _, k := range []int{6, 8, 10} {
		c := codec(t, k)
		workers := runtime.GOMAXPROCS(0)
		zeroField := make([]int64, workers)
		other := make([]string, workers)
		worst := make([]float32, workers)
		var wg sync.WaitGroup
		for w := range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var zeros int64 // locals: the workers share no cache line
				var bad string
				var top float32
				for hi := uint32(w); hi < 1<<16; hi += uint32(workers) {
					for lo := uint32(0); lo < 1<<16; lo++ {
						f := hi<<16 | lo
						t1, v1 := c.Encode(f)
						d := inceptionn.Decode(t1, v1)
						t2, v2 := c.Encode(d)
						if t1 == inceptionn.Bits8 && v1&0x7F == 0 && t2 == inceptionn.Zero && d == 0 {
							zeros++
						} else if (t1 != t2 || v1 != v2) && bad == "" {
							bad = fmt.Sprintf("%#08x: %s %#x, again %s %#x", f, t1, v1, t2, v2)
						}
						if f>>23&0xFF < 127 {
							// d is f truncated toward zero (or 0): the
							// difference is exact in float32.
							diff := math.Float32frombits(f) - math.Float32frombits(d)
							if a := math.Float32frombits(math.Float32bits(diff) & 0x7FFFFFFF); a > top {
								top = a
							}
						}
					}
				}
				zeroField[w], other[w], worst[w] = zeros, bad, top
			}()
		}
		wg.Wait()
		var zeros int64
		var bound float64
		for w := range workers {
			assert.Empty(t, other[w], "k=%d", k)
			zeros += zeroField[w]
			bound = max(bound, float64(worst[w]))
		}
		assert.Equal(t, int64(max(0, k-7))<<24, zeros, "k=%d: zero fields", k)
		limit := math.Max(math.Ldexp(1, -k), math.Ldexp(1, -7))
		assert.Less(t, bound, limit, "k=%d", k)
		assert.Greater(t, bound, 0.99*limit, "k=%d: the bound is approached", k)
		t.Logf("k=%d: %d zero fields, worst error %g (bound %g)", k, zeros, bound, limit)
	}
}

// The packed form: vectors written out bit by bit, and round trips of
// every length 0..70 (short last groups, tail bytes) and the MTU sizes.
func TestPacked(t *testing.T) {
	c := codec(t, 10)
	le := func(v ...uint32) []byte {
		var b []byte
		for _, x := range v {
			b = binary.LittleEndian.AppendUint32(b, x)
		}
		return b
	}
	// 0.75 (16-bit 0x6000), 0.02 (8-bit 0x02), 1.5 (raw), 0.0009 (0-bit):
	// tags 10 01 11 00 then 00 00 00 00 = 0x9C00; fields 0x6000, 0x02,
	// 0x3FC00000; 72 bits, no pad; then the tail byte 0xAB.
	got, err := c.AppendPacked(nil, append(le(0x3F400000, 0x3CA3D70A, 0x3FC00000, 0x3A6BEDFA), 0xAB), nil)
	require.NoError(t, err)
	assert.Equal(t, []byte{0x00, 0x11, 0x9C, 0x00, 0x60, 0x00, 0x02, 0x3F, 0xC0, 0x00, 0x00, 0xAB}, got)
	// One 8-bit value: 16 + 8 bits; nine values: two tag vectors.
	got, _ = c.AppendPacked(nil, le(0x3CA3D70A), nil)
	assert.Equal(t, []byte{0x00, 0x04, 0x40, 0x00, 0x02}, got)
	var h inceptionn.Histogram
	got, _ = c.AppendPacked(nil, le(0, 0, 0, 0, 0, 0, 0, 0, 0x3CA3D70A), &h)
	assert.Equal(t, []byte{0x00, 0x24, 0x00, 0x00, 0x40, 0x00, 0x02}, got)
	assert.Equal(t, inceptionn.Histogram{8, 1, 0, 0}, h)

	r := rand.New(rand.NewPCG(3, 4))
	for _, n := range append([]int{1024, 4096, inceptionn.MaxPayload}, func() []int {
		var s []int
		for i := range 71 {
			s = append(s, i)
		}
		return s
	}()...) {
		p := make([]byte, n)
		for i := 0; i+4 <= n; i += 4 {
			// Gradient-like: mostly small, some large, some special.
			v := float32(r.NormFloat64() * math.Ldexp(1, -r.IntN(12)))
			binary.LittleEndian.PutUint32(p[i:], math.Float32bits(v))
		}
		for i := n - n%4; i < n; i++ {
			p[i] = byte(r.Uint32())
		}
		var hp, hu inceptionn.Histogram
		packed, err := c.AppendPacked(nil, p, &hp)
		require.NoError(t, err)
		require.Equal(t, len(packed), c.PackedLen(p), "n=%d: PackedLen", n)
		back, err := inceptionn.Unpack(nil, packed, &hu)
		require.NoError(t, err, "n=%d", n)
		require.Equal(t, hp, hu, "n=%d: the classes unpacked are those packed", n)
		require.Len(t, back, n)
		for i := 0; i+4 <= n; i += 4 {
			tag, field := c.Encode(binary.LittleEndian.Uint32(p[i:]))
			require.Equal(t, inceptionn.Decode(tag, field), binary.LittleEndian.Uint32(back[i:]), "n=%d element %d", n, i/4)
		}
		assert.Equal(t, string(p[n-n%4:]), string(back[n-n%4:]))
		projected := append([]byte(nil), p...)
		c.Project(projected)
		require.Equal(t, back, projected, "n=%d: Project is one trip through pack and unpack", n)
		// What came out goes through again unchanged: a projection (its
		// packed form may be shorter: a zero 8-bit field becomes tag 00).
		again, _ := c.AppendPacked(nil, back, nil)
		back2, err := inceptionn.Unpack(nil, again, nil)
		require.NoError(t, err)
		assert.Equal(t, string(back), string(back2), "n=%d", n)
	}
}

// A packed payload cut short, with bytes to spare, or tagging values past
// its length is refused with a reason, never read past.
func TestUnpackRefusesDamage(t *testing.T) {
	c := codec(t, 10)
	p := make([]byte, 40)
	for i := 0; i < 40; i += 4 {
		binary.LittleEndian.PutUint32(p[i:], math.Float32bits(0.3))
	}
	packed, err := c.AppendPacked(nil, p, nil)
	require.NoError(t, err)
	for cut := range len(packed) {
		_, err := inceptionn.Unpack(nil, packed[:cut], nil)
		assert.ErrorIs(t, err, inceptionn.ErrPacked, "cut at %d", cut)
	}
	_, err = inceptionn.Unpack(nil, append(append([]byte(nil), packed...), 0), nil)
	assert.ErrorContains(t, err, "1 bytes after the values, want the 0 tail bytes")
	// One value, its group's seven missing ones tagged 01.
	_, err = inceptionn.Unpack(nil, []byte{0x00, 0x04, 0x15, 0x55, 0x02, 0, 0, 0, 0, 0, 0, 0}, nil)
	assert.ErrorContains(t, err, "past the payload's 1 values but tagged 8bit")
	_, err = c.AppendPacked(nil, make([]byte, inceptionn.MaxPayload+1), nil)
	assert.Error(t, err)
	for _, k := range []int{0, 127, -1} {
		_, err := inceptionn.New(k)
		assert.ErrorContains(t, err, "want k in 1..126")
	}
}

// Encoding allocates nothing and runs at about a nanosecond a value.
func BenchmarkAppendPacked4KiB(b *testing.B) {
	c := codec(b, 10)
	p := make([]byte, 4096)
	r := rand.New(rand.NewPCG(5, 6))
	for i := 0; i < len(p); i += 4 {
		binary.LittleEndian.PutUint32(p[i:], math.Float32bits(float32(r.NormFloat64()*0.01)))
	}
	out := make([]byte, 0, 8192)
	b.SetBytes(int64(len(p)))
	b.ReportAllocs()
	for b.Loop() {
		out, _ = c.AppendPacked(out[:0], p, nil)
	}
}
