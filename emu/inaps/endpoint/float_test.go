package endpoint

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/inaemu/inaemu/emu/inaps"
)

// floats is a fragment of 62 small values with x at i.
func floats(i int, x float32) *[inaps.Values]float32 {
	var v [inaps.Values]float32
	for k := range v {
		v[k] = float32(k%7-3) * 0.125
	}
	v[i] = x
	return &v
}

// Quantise: round(x·Scale) as an int32 unless some |round(x·Scale)|
// reaches 2^31/fanIn; then every value's float32 bits, and the overflow
// flag. Scale 1024, fan-in 8: the bound is 2^28, reached by x = 2^18; the
// float32 just below 2^18 is 2^18 − 2^-6 (its ulp there), 2^28 − 16
// once scaled.
func TestQuantiseBound(t *testing.T) {
	f := Floats{Scale: 1024}
	const fanIn = 8
	below := float32(math.Nextafter32(1<<18, 0))
	assert.Equal(t, float32(1<<18-1.0/64), below)

	for _, c := range []struct {
		x        float32
		overflow bool
	}{
		{below, false},
		{-below, false},
		{1 << 18, true},
		{-(1 << 18), true},
		{1 << 20, true},
		{float32(math.Inf(1)), true},
	} {
		v := floats(17, c.x)
		var out inaps.Vec
		got := f.Quantise(v, fanIn, &out)
		assert.Equal(t, c.overflow, got, "x = %g", c.x)
		for i, x := range v {
			if c.overflow {
				assert.Equal(t, int32(math.Float32bits(x)), out[i], "x = %g: value %d as raw bits", c.x, i)
			} else {
				assert.Equal(t, int32(math.Round(float64(x)*1024)), out[i], "x = %g: value %d", c.x, i)
			}
		}
	}
	// Below the bound, the largest value is exactly 2^28 − 16.
	var out inaps.Vec
	f.Quantise(floats(0, below), fanIn, &out)
	assert.Equal(t, int32(1<<28-16), out[0])
	// The bound scales with the fan-in: 2^18 fits 2^31/4 = 2^29.
	assert.False(t, f.Quantise(floats(0, 1<<18), 4, &out))
	assert.Equal(t, int32(1<<28), out[0])
}

func TestQuantiseRounds(t *testing.T) {
	f := Floats{Scale: 10}
	var out inaps.Vec
	v := floats(0, 0.26)
	v[1], v[2], v[3] = -0.26, 0.24, -0.24
	assert.False(t, f.Quantise(v, 2, &out))
	assert.Equal(t, []int32{3, -3, 2, -2}, out[0:4])
}

// FloatResult: the fixed-point sum back in floats, plus the raw values
// in worker order, in float64, rounded once to float32.
func TestFloatResultOrderAndRounding(t *testing.T) {
	const scale = 256
	f := Floats{Scale: scale}
	bits := func(x float32) int32 { return int32(math.Float32bits(x)) }
	raw := map[int]*inaps.Vec{0: {}, 1: {}, 2: {}, 5: {}}
	var ints inaps.Vec
	// Value 0: order matters. Worker 0 2^60, worker 1 −2^60, worker 2 1: in
	// worker order (2^60 − 2^60) + 1 = 1; 2^60 + 1 first would lose the 1.
	raw[0][0], raw[1][0], raw[2][0] = bits(1<<60), bits(-(1 << 60)), bits(1)
	// Value 1: one rounding. 1 + 2^-24 + 2^-24 is 1 + 2^-23 in float64, a
	// float32; summed in float32 each 2^-24 would be a tie rounded away.
	raw[0][1], raw[1][1], raw[5][1] = bits(1), bits(1.0/(1<<24)), bits(1.0/(1<<24))
	// Value 2: the fixed-point part, 3·256 → 3, plus 0.5 raw.
	ints[2] = 3 * scale
	raw[2][2] = bits(0.5)
	// Value 3: a negative fixed-point part alone.
	ints[3] = -scale / 4

	var out inaps.Vec
	f.FloatResult(&ints, raw, &out)

	for i := range out {
		s := float64(ints[i]) / scale
		for _, w := range []int{0, 1, 2, 5} {
			s += float64(math.Float32frombits(uint32(raw[w][i])))
		}
		assert.Equal(t, math.Float32bits(float32(s)), uint32(out[i]), "value %d", i)
	}
	got := func(i int) float32 { return math.Float32frombits(uint32(out[i])) }
	assert.Equal(t, float32(1), got(0), "worker order")
	assert.Equal(t, float32(1+1.0/(1<<23)), got(1), "rounded once")
	assert.Equal(t, float32(3.5), got(2))
	assert.Equal(t, float32(-0.25), got(3))
	assert.Equal(t, float32(0), got(4))
}
