package endpoint

import (
	"math"

	"github.com/inaemu/inaemu/emu/inaps"
)

// Floats is how a job's gradients are float32 and carried as fixed point
// (ATP and SwitchML quantise at the host; the switch adds integers):
// value × Scale rounded to an int32, unless some value of the fragment
// would reach the bound at which fan-in of them could wrap; then the
// whole fragment is sent with the overflow flag as raw floats, and the
// PS sums it (ATP's overflow path).
type Floats struct {
	Scale float64 // 0: the job's gradients are int32
}

// On reports whether the job's gradients are floats.
func (f Floats) On() bool { return f.Scale > 0 }

// bound is the magnitude a quantised value must stay under so that the
// sum of fanIn of them cannot wrap an int32.
func bound(fanIn int) int64 { return (int64(1) << 31) / int64(max(fanIn, 1)) }

// GradientFloats are worker rank's float gradients of fragment (iter,
// seq): random signs, magnitudes e^N(−8, 3) (most near 3e-4, a few above
// 16 so that fragments overflow now and then), from a hash of the
// fragment's place.
func GradientFloats(v *[inaps.Values]float32, seed uint64, job uint16, rank int, iter, seq uint32) {
	x := place(seed^0xf10a7, job, rank, iter, seq)
	for i := range v {
		x += 0x9e3779b97f4a7c15
		z := mix(x)
		// Box-Muller from two 26-bit uniforms in (0, 1].
		u1 := (float64(z>>38) + 1) / (1 << 26)
		u2 := float64(z>>12&(1<<26-1)) / (1 << 26)
		n := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
		m := math.Exp(-8 + 3*n)
		if z&1 == 1 {
			m = -m
		}
		v[i] = float32(m)
	}
}

// Quantise writes a fragment's values as the wire carries them: int32
// fixed point, or (overflow true) the raw floats' bits.
func (f Floats) Quantise(v *[inaps.Values]float32, fanIn int, out *inaps.Vec) (overflow bool) {
	b := bound(fanIn)
	for i, x := range v {
		q := math.Round(float64(x) * f.Scale)
		if q >= float64(b) || q <= -float64(b) {
			overflow = true
			break
		}
		out[i] = int32(q)
	}
	if overflow {
		for i, x := range v {
			out[i] = int32(math.Float32bits(x))
		}
	}
	return overflow
}

// FloatResult is the result of a fragment some worker sent as raw
// floats: the fixed-point sum of the others back in floats, plus the raw
// ones in worker order, in float64, rounded once to float32; as bits.
func (f Floats) FloatResult(ints *inaps.Vec, raw map[int]*inaps.Vec, out *inaps.Vec) {
	for i := range out {
		s := float64(ints[i]) / f.Scale
		for w := 0; w < 32; w++ {
			if r := raw[w]; r != nil {
				s += float64(math.Float32frombits(uint32(r[i])))
			}
		}
		out[i] = int32(math.Float32bits(float32(s)))
	}
}
