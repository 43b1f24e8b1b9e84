// Package workload makes the workers' tensors: the fill patterns
// (random, constant, ramp, gradient-like), a Stream that generates a
// rank's tensor a piece at a time, and Ahead, which generates it a few
// blocks ahead of the reader. The element types and their sums are
// package tensor's; this package only decides what values go in.
package workload

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"

	"github.com/inaemu/inaemu/tensor"
)

// Pattern is how a worker's tensor is filled: a kind and, for the
// gradient-like kinds, its parameters. Patterns compare with ==.
type Pattern struct {
	Kind PatternKind
	// LogNormal: magnitudes e^N(Mu, Sigma), random signs.
	Mu, Sigma float64
	// Classes: each value falls in class c (INCEPTIONN's codec classes
	// for the bound 2^-Bound: below 2^-Bound, below 2^-floor(Bound/2),
	// below 1, from 1) with probability Shares[c]/sum(Shares), then a
	// magnitude log-uniform within the class ([2^-(Bound+10), 2^-Bound),
	// [2^-Bound, 2^-floor(Bound/2)), [2^-floor(Bound/2), 1), [1, 2)) and
	// a random sign. Name is where the shares come from (alexnet, ...),
	// or a LogNormal preset's name.
	Shares [4]float64
	Bound  int
	Name   string
}

// PatternKind is a Pattern's kind.
type PatternKind uint8

const (
	KindRandom    PatternKind = iota // pseudo-random from the run seed and rank
	KindZeros                        // all zero
	KindOnes                         // all one
	KindRamp                         // element i is i mod 256, plus the rank
	KindLogNormal                    // float32 gradients with log-normal magnitudes
	KindClasses                      // float32 gradients with given codec class shares
)

// The parameterless patterns.
var (
	Random = Pattern{Kind: KindRandom}
	Zeros  = Pattern{Kind: KindZeros}
	Ones   = Pattern{Kind: KindOnes}
	Ramp   = Pattern{Kind: KindRamp}
)

var patternNames = [...]string{"random", "zeros", "ones", "ramp"}

func (p Pattern) String() string {
	switch p.Kind {
	case KindLogNormal:
		if p.Name != "" {
			return "lognormal:" + p.Name
		}
		return "lognormal:" + strconv.FormatFloat(p.Mu, 'g', -1, 64) + "," + strconv.FormatFloat(p.Sigma, 'g', -1, 64)
	case KindClasses:
		if p.Bound == 0 {
			return "table3:" + p.Name
		}
		return "table3:" + p.Name + "," + strconv.Itoa(p.Bound)
	}
	if int(p.Kind) < len(patternNames) {
		return patternNames[p.Kind]
	}
	return fmt.Sprintf("pattern(%d)", p.Kind)
}

// Gradient reports whether p makes float32 gradients only.
func (p Pattern) Gradient() bool { return p.Kind == KindLogNormal || p.Kind == KindClasses }

// LogNormalPresets are log-normal magnitudes fitted to INCEPTIONN's
// Table III (log2|g| ~ N(-13.2, 3.6) for ResNet-50, N(-19.0, 6.4) for
// HDC), as natural-log parameters.
var LogNormalPresets = map[string][2]float64{
	"resnet50": {-13.2 * math.Ln2, 3.6 * math.Ln2},
	"hdc":      {-19.0 * math.Ln2, 6.4 * math.Ln2},
}

// ParsePattern reads random, zeros, ones, ramp, or lognormal:MU,SIGMA
// (or a preset: lognormal:resnet50, lognormal:hdc). Class-share
// patterns need their table (frames/inceptionn's Table III) and are read
// above this package.
func ParsePattern(s string) (Pattern, error) {
	for i, n := range patternNames {
		if s == n {
			return Pattern{Kind: PatternKind(i)}, nil
		}
	}
	if rest, ok := strings.CutPrefix(s, "lognormal:"); ok {
		if ps, ok := LogNormalPresets[rest]; ok {
			return Pattern{Kind: KindLogNormal, Mu: ps[0], Sigma: ps[1], Name: rest}, nil
		}
		mu, sigma, ok := strings.Cut(rest, ",")
		m, err1 := strconv.ParseFloat(mu, 64)
		sd, err2 := strconv.ParseFloat(sigma, 64)
		if !ok || err1 != nil || err2 != nil || !(sd >= 0) || math.IsNaN(m) || math.IsInf(m, 0) || math.IsInf(sd, 0) {
			return Pattern{}, fmt.Errorf("tensor pattern %q: want lognormal:MU,SIGMA (magnitudes e^N(MU,SIGMA), SIGMA >= 0, e.g. lognormal:-7,2) or lognormal:resnet50|hdc", s)
		}
		return Pattern{Kind: KindLogNormal, Mu: m, Sigma: sd}, nil
	}
	return Pattern{}, fmt.Errorf("tensor pattern %q: want random, zeros, ones, ramp or lognormal:MU,SIGMA", s)
}

// Fill writes rank's tensor into buf (len a multiple of d.Size()). Random
// values are uniform in [-1, 1) for the float types and in [-2^20, 2^20)
// for int32 (so eight ranks never wrap), drawn from a generator seeded by
// seed and rank.
func Fill(d tensor.DType, p Pattern, buf []byte, rank int, seed uint64) {
	s := NewStream(d, p, rank, seed)
	s.Fill(buf)
}

// A Stream generates rank's tensor front to back, a piece at a time, the
// same bytes Fill writes whole: a job that sends a large tensor generates
// each message as it sends it instead of holding the tensor.
type Stream struct {
	d    tensor.DType
	p    Pattern
	rank int
	pcg  pcg
	seed uint64
	elem int64 // elements generated so far
}

// NewStream starts rank's tensor at element 0.
func NewStream(d tensor.DType, p Pattern, rank int, seed uint64) *Stream {
	return &Stream{d: d, p: p, rank: rank, seed: seed, pcg: pcg{seed, 0x7E45_0000 + uint64(rank)}}
}

// MoveTo moves the stream to element e of the tensor, so a piece anywhere
// in it is made without generating what comes before. Random tensors
// draw once per element from a PCG, a 128-bit linear congruential
// generator: e draws ahead is one affine map, made from the
// multiplier's squares in log2(e) steps.
func (s *Stream) MoveTo(e int64) {
	if (s.p == Random || s.p.Gradient()) && e != s.elem {
		s.pcg.hi, s.pcg.lo = pcgJump(s.seed, 0x7E45_0000+uint64(s.rank), uint64(e))
	}
	s.elem = e
}

// pcg is math/rand/v2's PCG (a 128-bit LCG with the DXSM output
// function) written out so a tensor's loop keeps the state in registers:
// the same draws as rand.NewPCG(hi, lo), which the tests compare.
type pcg struct{ hi, lo uint64 }

// The generator's constants: state = state×mul + inc (mod 2^128), and
// the multiplier of the DXSM output function.
const (
	pcgMulHi    = 2549297995355413924
	pcgMulLo    = 4865540595714422341
	pcgIncHi    = 6364136223846793005
	pcgIncLo    = 1442695040888963407
	pcgCheapMul = 0xda942042e4dd58b5
)

func (p *pcg) Uint64() uint64 {
	hi, lo := affine128(p.hi, p.lo, pcgMulHi, pcgMulLo, pcgIncHi, pcgIncLo)
	p.hi, p.lo = hi, lo
	return pcgOut(hi, lo)
}

// pcgOut is the DXSM output function: the draw a state gives.
func pcgOut(hi, lo uint64) uint64 {
	hi ^= hi >> 32
	hi *= pcgCheapMul
	hi ^= hi >> 48
	return hi * (lo | 1)
}

// affine128 is x×m + a (mod 2^128).
func affine128(xHi, xLo, mHi, mLo, aHi, aLo uint64) (uint64, uint64) {
	hi, lo := bits.Mul64(xLo, mLo)
	hi += xHi*mLo + xLo*mHi
	lo, c := bits.Add64(lo, aLo, 0)
	hi, _ = bits.Add64(hi, aHi, c)
	return hi, lo
}

// The generator's map four steps at a time, x -> lane4M·x + lane4A
// (mod 2^128). draws runs four interleaved copies of the generator, each
// four steps apart: a step's 128-bit multiply is a chain of dependent
// instructions, and four independent chains keep the multiplier busy
// where one leaves it waiting.
var lane4MHi, lane4MLo, lane4AHi, lane4ALo = pcgMap(4)

// draws writes the generator's next len(out) values into out: the same
// values, in the same order, as len(out) calls of Uint64.
func (p *pcg) draws(out []uint64) {
	i := 0
	if len(out) >= 8 {
		// Lane j holds state s(i+1+j), whose output is draw i+j; lastHi
		// and lastLo keep s(i), the state after the draws written so far.
		h0, l0 := affine128(p.hi, p.lo, pcgMulHi, pcgMulLo, pcgIncHi, pcgIncLo)
		h1, l1 := affine128(h0, l0, pcgMulHi, pcgMulLo, pcgIncHi, pcgIncLo)
		h2, l2 := affine128(h1, l1, pcgMulHi, pcgMulLo, pcgIncHi, pcgIncLo)
		h3, l3 := affine128(h2, l2, pcgMulHi, pcgMulLo, pcgIncHi, pcgIncLo)
		mHi, mLo, aHi, aLo := lane4MHi, lane4MLo, lane4AHi, lane4ALo
		lastHi, lastLo := p.hi, p.lo
		for ; i+4 <= len(out); i += 4 {
			o := out[i : i+4 : i+4]
			o[0], o[1], o[2], o[3] = pcgOut(h0, l0), pcgOut(h1, l1), pcgOut(h2, l2), pcgOut(h3, l3)
			lastHi, lastLo = h3, l3
			h0, l0 = affine128(h0, l0, mHi, mLo, aHi, aLo)
			h1, l1 = affine128(h1, l1, mHi, mLo, aHi, aLo)
			h2, l2 = affine128(h2, l2, mHi, mLo, aHi, aLo)
			h3, l3 = affine128(h3, l3, mHi, mLo, aHi, aLo)
		}
		p.hi, p.lo = lastHi, lastLo
	}
	for ; i < len(out); i++ {
		out[i] = p.Uint64()
	}
}

// pcgJump is the state of math/rand/v2's PCG seeded (hi, lo) after n
// steps.
func pcgJump(hi, lo, n uint64) (uint64, uint64) {
	mHi, mLo, aHi, aLo := pcgMap(n)
	return affine128(hi, lo, mHi, mLo, aHi, aLo)
}

// pcgMap is the affine map of n steps of the generator, x -> m·x + a
// (mod 2^128), made from the multiplier's squares in log2(n) steps.
func pcgMap(n uint64) (mHi, mLo, aHi, aLo uint64) {
	// (accM, accA) is the map of the steps taken so far; (m, a) that of
	// the next power-of-two number of steps.
	accMHi, accMLo, accAHi, accALo := uint64(0), uint64(1), uint64(0), uint64(0)
	mHi, mLo, aHi, aLo = pcgMulHi, pcgMulLo, pcgIncHi, pcgIncLo
	for ; n > 0; n >>= 1 {
		if n&1 == 1 {
			accMHi, accMLo = mul128(accMHi, accMLo, mHi, mLo)
			accAHi, accALo = mul128(accAHi, accALo, mHi, mLo)
			accAHi, accALo = add128(accAHi, accALo, aHi, aLo)
		}
		// Two applications of x -> m x + a: m² x + (m+1) a.
		p1Hi, p1Lo := add128(mHi, mLo, 0, 1)
		aHi, aLo = mul128(p1Hi, p1Lo, aHi, aLo)
		mHi, mLo = mul128(mHi, mLo, mHi, mLo)
	}
	return accMHi, accMLo, accAHi, accALo
}

func mul128(aHi, aLo, bHi, bLo uint64) (uint64, uint64) {
	hi, lo := bits.Mul64(aLo, bLo)
	return hi + aHi*bLo + aLo*bHi, lo
}

func add128(aHi, aLo, bHi, bLo uint64) (uint64, uint64) {
	lo, c := bits.Add64(aLo, bLo, 0)
	hi, _ := bits.Add64(aHi, bHi, c)
	return hi, lo
}

// Fill writes the next len(buf)/d.Size() elements into buf.
func (s *Stream) Fill(buf []byte) {
	d, p, rank := s.d, s.p, s.rank
	rng := s.pcg // a local copy, stored back
	sz := d.Size()
	first := s.elem // the index of buf's first element in the tensor
	s.elem += int64(len(buf) / sz)
	// The common cases draw 256 values at a time and switch once per
	// 256 elements; the general loop below keeps F16 and the other
	// patterns.
	if p == Random && d != tensor.F16 || p.Gradient() { // 4-byte elements, one draw each
		var g gradientGen
		if p.Gradient() {
			g = p.gradients()
		}
		for i := 0; i+4 <= len(buf); {
			var draw [256]uint64
			u := draw[:min(len(draw), (len(buf)-i)/4)]
			rng.draws(u)
			switch {
			case p.Gradient():
				for _, u := range u {
					binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(g.value(u)))
					i += 4
				}
			case d == tensor.F32:
				for _, u := range u {
					// A 24-bit integer is exact in float32 and scaling by
					// a power of two is exact.
					v := float32(int32(u>>40)-1<<23) * (1.0 / (1 << 23))
					binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(v))
					i += 4
				}
			default: // I32: 21 bits, so eight ranks never wrap
				for _, u := range u {
					binary.LittleEndian.PutUint32(buf[i:], uint32(int32(u>>43)-1<<20))
					i += 4
				}
			}
		}
		s.pcg = rng
		return
	}
	for i := 0; i+sz <= len(buf); i += sz {
		var v float64
		var iv int32
		switch p.Kind {
		case KindRandom: // F16 only: F32 and I32 take the loops above
			// One draw per element: 11 bits are exact in float16, so
			// rounding never reaches 1.
			v = float64(int64(rng.Uint64()>>53)-1<<10) / (1 << 10)
		case KindOnes:
			v, iv = 1, 1
		case KindRamp:
			iv = int32((first+int64(i/sz))%256 + int64(rank))
			v = float64(iv)
		}
		switch d {
		case tensor.F32:
			binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(float32(v)))
		case tensor.I32:
			binary.LittleEndian.PutUint32(buf[i:], uint32(iv))
		case tensor.F16:
			binary.LittleEndian.PutUint16(buf[i:], tensor.F32ToF16(float32(v)))
		}
	}
	s.pcg = rng
}

// gradientGen makes a gradient pattern's values; its constants are
// worked out once per Fill, not per element.
type gradientGen struct {
	logNormal bool
	mu, sigma float64
	shares    [4]float64
	total     float64
	lo, hi    [4]float64 // log2 of each class's range
	edge      [4]float32 // 2^hi: the next class's first value
}

func (p *Pattern) gradients() gradientGen {
	g := gradientGen{logNormal: p.Kind == KindLogNormal, mu: p.Mu, sigma: p.Sigma, shares: p.Shares}
	k := p.Bound
	g.total = p.Shares[0] + p.Shares[1] + p.Shares[2] + p.Shares[3]
	g.lo = [4]float64{float64(-(k + 10)), float64(-k), float64(-(k / 2)), 0}
	g.hi = [4]float64{float64(-k), float64(-(k / 2)), 0, 1}
	for c, h := range g.hi {
		g.edge[c] = float32(math.Exp2(h))
	}
	return g
}

// value is the pattern's value for one 64-bit draw (one draw per
// element, so a stream moves to any element at once): the low bit is the
// sign; a log-normal magnitude takes two 24-bit uniforms (Box-Muller), a
// class-share magnitude 24 bits for the class and 39 for its place.
func (g *gradientGen) value(u uint64) float32 {
	var v float32
	if g.logNormal {
		u1 := (float64(u>>40) + 0.5) / (1 << 24)
		u2 := float64(u>>16&0xFFFFFF) / (1 << 24)
		z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
		v = float32(math.Exp(g.mu + g.sigma*z))
	} else {
		x := float64(u>>40) / (1 << 24) * g.total
		c := 0
		for ; c < 3 && x >= g.shares[c]; c++ {
			x -= g.shares[c]
		}
		for c > 0 && g.shares[c] == 0 { // rounding past the last class with a share
			c--
		}
		f := float64(u>>1&(1<<39-1)) / (1 << 39)
		v = float32(math.Exp2(g.lo[c] + f*(g.hi[c]-g.lo[c])))
		if v >= g.edge[c] { // rounded up to the next class's edge
			v = math.Nextafter32(v, 0)
		}
	}
	if u&1 != 0 {
		v = -v
	}
	return v
}
