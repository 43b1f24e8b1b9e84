// Package tensor holds the element types the aggregating switch adds:
// float32 (IEEE binary32), int32 (two's complement fixed point, wrapping)
// and float16 (IEEE binary16), their sums, and how an element is printed.
// It imports nothing of the module, so the emulator and the capture
// checker share it without the checker depending on the emulator; what
// values the workers' tensors hold is emu/workload's.
//
// Elements travel little-endian, the order of host memory: an RDMA WRITE
// copies memory verbatim, so the switch reads gradients as the GPU/CPU
// stored them.
package tensor

import (
	"encoding/binary"
	"fmt"
	"math"
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
