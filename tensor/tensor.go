// Package tensor holds the element types the aggregating switch adds and
// the workers' test tensors: float32 (IEEE binary32), int32 (two's
// complement fixed point, wrapping) and float16 (IEEE binary16).
//
// Elements travel little-endian, the order of host memory: an RDMA WRITE
// copies memory verbatim, so the switch reads gradients as the GPU/CPU
// stored them.
package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"unsafe"
)

// DType is an element type.
type DType uint8

const (
	F32 DType = iota
	I32
	F16
)

var dtypeNames = [...]string{"f32", "i32", "f16"}

func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", d)
}

// ParseDType reads f32, i32 or f16.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if s == n {
			return DType(i), nil
		}
	}
	return 0, fmt.Errorf("dtype %q: want f32, i32 or f16", s)
}

// Size is the element size in bytes.
func (d DType) Size() int {
	if d == F16 {
		return 2
	}
	return 4
}

// Float reports whether the type is a floating-point one (the switch's
// floating-point adder is slower than its fixed-point one).
func (d DType) Float() bool { return d != I32 }

// Add sets dst = dst + src element by element in d's arithmetic. Both
// must have the same length, a multiple of d.Size(). Every addition is one
// correctly rounded operation of the type, so a sum formed in a fixed
// order is reproducible bit for bit. For float16 the sum is computed in
// float32 and rounded to float16; float32 carries more than twice
// float16's precision plus two bits, so this double rounding is exact.
func Add(d DType, dst, src []byte) {
	n := min(len(dst), len(src))
	if nativeLE && n >= 4 && (d == F32 || d == I32) {
		// Host memory is the wire's byte order: the bytes are the
		// elements, added in place four at a time with no byte shuffles.
		// The additions are the same IEEE (or wrapping) operations, so
		// the results are the same bits as addScalar's.
		k := n / 4
		if d == F32 {
			addLanesF32(unsafe.Slice((*float32)(unsafe.Pointer(&dst[0])), k), unsafe.Slice((*float32)(unsafe.Pointer(&src[0])), k))
		} else {
			addLanesU32(unsafe.Slice((*uint32)(unsafe.Pointer(&dst[0])), k), unsafe.Slice((*uint32)(unsafe.Pointer(&src[0])), k))
		}
		return
	}
	addScalar(d, dst, src)
}

// nativeLE: this machine stores integers little-endian, as the wire does.
var nativeLE = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// addLanes adds s into d four elements at a time: the portable form of
// addLanesF32 and addLanesU32.
func addLanes[T float32 | uint32](d, s []T) {
	s = s[:len(d)]
	i := 0
	for ; i+4 <= len(d); i += 4 {
		d4, s4 := d[i:i+4:i+4], s[i:i+4:i+4]
		d4[0] += s4[0]
		d4[1] += s4[1]
		d4[2] += s4[2]
		d4[3] += s4[3]
	}
	for ; i < len(d); i++ {
		d[i] += s[i]
	}
}

// addScalar is Add one element at a time through encoding/binary: any
// byte order, and float16.
func addScalar(d DType, dst, src []byte) {
	n := min(len(dst), len(src))
	switch d {
	case F32:
		dst, src = dst[:n&^3], src[:n&^3]
		for i := 0; i+4 <= len(dst); i += 4 {
			a := math.Float32frombits(binary.LittleEndian.Uint32(dst[i:]))
			b := math.Float32frombits(binary.LittleEndian.Uint32(src[i:]))
			binary.LittleEndian.PutUint32(dst[i:], math.Float32bits(a+b))
		}
	case I32:
		dst, src = dst[:n&^3], src[:n&^3]
		for i := 0; i+4 <= len(dst); i += 4 {
			binary.LittleEndian.PutUint32(dst[i:], binary.LittleEndian.Uint32(dst[i:])+binary.LittleEndian.Uint32(src[i:]))
		}
	case F16:
		dst, src = dst[:n&^1], src[:n&^1]
		for i := 0; i+2 <= len(dst); i += 2 {
			a := F16ToF32(binary.LittleEndian.Uint16(dst[i:]))
			b := F16ToF32(binary.LittleEndian.Uint16(src[i:]))
			binary.LittleEndian.PutUint16(dst[i:], F32ToF16(a+b))
		}
	}
}

// F16ToF32 widens a binary16 value (exactly).
func F16ToF32(h uint16) float32 {
	sign := uint32(h&0x8000) << 16
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h & 0x3ff)
	switch exp {
	case 0x1f: // inf, NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case 0: // zero, subnormal: mant × 2^-24
		f := float32(mant) * (1.0 / (1 << 24))
		if sign != 0 {
			f = -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
}

// F32ToF16 rounds a binary32 value to binary16, to nearest, ties to even;
// overflow gives infinity, NaN stays NaN (quiet). Two range tests and
// integer arithmetic, no loop over cases: it runs for every element of
// every f16 result, fill and check. (Tests compare it with an independent
// reference on every binary16 neighbourhood and on random patterns; all
// 2^32 inputs agree with the straightforward case analysis it replaced.)
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	b &= 0x7fffffff
	switch {
	case b >= 0x47800000: // |f| ≥ 2^16: infinity (overflow or Inf), or NaN
		if b > 0x7f800000 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case b < 0x38800000: // |f| < 2^-14, binary16's smallest normal
		// Adding 0.5 (exponent -1) aligns the value so that its binary16
		// subnormal bits (units of 2^-24) are the bottom of the float32
		// mantissa, rounded to nearest even by the addition itself; a
		// carry into 2^-14 gives the smallest normal's encoding.
		return sign | uint16(math.Float32bits(math.Float32frombits(b)+0.5)-0x3f000000)
	}
	// Normal: rebias the exponent ((15-127)<<23 = 0xc8000000, modulo
	// 2^32) and round the 13 dropped bits to nearest, ties to even (add
	// 0xfff plus the kept mantissa's lowest bit). A carry out of the
	// mantissa increments the exponent, up to infinity: the right answer.
	b += 0xc8000fff + (b>>13)&1
	return sign | uint16(b>>13)
}

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
func Fill(d DType, p Pattern, buf []byte, rank int, seed uint64) {
	s := NewStream(d, p, rank, seed)
	s.Fill(buf)
}

// A Stream generates rank's tensor front to back, a piece at a time, the
// same bytes Fill writes whole: a job that sends a large tensor generates
// each message as it sends it instead of holding the tensor.
type Stream struct {
	d    DType
	p    Pattern
	rank int
	pcg  pcg
	seed uint64
	elem int64 // elements generated so far
}

// NewStream starts rank's tensor at element 0.
func NewStream(d DType, p Pattern, rank int, seed uint64) *Stream {
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
	if p == Random && d != F16 || p.Gradient() { // 4-byte elements, one draw each
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
			case d == F32:
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
		case F32:
			binary.LittleEndian.PutUint32(buf[i:], math.Float32bits(float32(v)))
		case I32:
			binary.LittleEndian.PutUint32(buf[i:], uint32(iv))
		case F16:
			binary.LittleEndian.PutUint16(buf[i:], F32ToF16(float32(v)))
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

// Sum returns the element-wise sum of the inputs folded in the order
// given: ((in[0] + in[1]) + in[2]) + ... — the reference a network result
// is compared with bit for bit.
func Sum(d DType, in ...[]byte) []byte {
	if len(in) == 0 {
		return nil
	}
	out := append([]byte(nil), in[0]...)
	for _, b := range in[1:] {
		Add(d, out, b)
	}
	return out
}

// Value formats element i of buf for messages.
func Value(d DType, buf []byte, i int) string {
	off := i * d.Size()
	if off+d.Size() > len(buf) {
		return "?"
	}
	switch d {
	case F32:
		return fmt.Sprint(math.Float32frombits(binary.LittleEndian.Uint32(buf[off:])))
	case I32:
		return fmt.Sprint(int32(binary.LittleEndian.Uint32(buf[off:])))
	default:
		return fmt.Sprint(F16ToF32(binary.LittleEndian.Uint16(buf[off:])))
	}
}
