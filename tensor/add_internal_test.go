package tensor

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// Add's in-place path gives the bits of the element-by-element path over
// encoding/binary for every length (including a ragged end), every byte
// offset (unaligned slices), and values that stress IEEE addition: signed
// zeros, subnormals, infinities, NaNs with payloads, wrapping integers.
func TestAddFastPathIsScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	special := []uint32{0, 0x80000000, 1, 0x80000001, 0x007fffff, 0x7f800000, 0xff800000, 0x7fc00001, 0xffc12345, 0x7f7fffff, 0xff7fffff, 0x3f800000, 0xbf800000}
	for _, d := range []DType{F32, I32} {
		for trial := range 2000 {
			n := rng.IntN(300)
			off1, off2 := rng.IntN(4), rng.IntN(4)
			a := make([]byte, n+off1)[off1:]
			b := make([]byte, n+off2)[off2:]
			for i := 0; i+4 <= n; i += 4 {
				for _, s := range [][]byte{a, b} {
					v := rng.Uint32()
					if rng.IntN(3) == 0 {
						v = special[rng.IntN(len(special))]
					}
					binary.LittleEndian.PutUint32(s[i:], v)
				}
			}
			want := append([]byte(nil), a...)
			addScalar(d, want, b)
			Add(d, a, b)
			if !bytes.Equal(a, want) {
				t.Fatalf("%v trial %d (n=%d, offsets %d,%d): fast path differs from the scalar one", d, trial, n, off1, off2)
			}
		}
	}
}

func BenchmarkAdd1KiB(b *testing.B) {
	for _, d := range []DType{F32, I32, F16} {
		x, y := make([]byte, 1024), make([]byte, 1024)
		for i := range x {
			x[i], y[i] = byte(i*7), byte(i*13)
		}
		b.Run(d.String()+"/fast", func(b *testing.B) {
			b.SetBytes(1024)
			for range b.N {
				Add(d, x, y)
			}
		})
		b.Run(d.String()+"/scalar", func(b *testing.B) {
			b.SetBytes(1024)
			for range b.N {
				addScalar(d, x, y)
			}
		})
	}
}

// The portable addLanes (what other architectures run) agrees with the
// scalar path too, tested here on every architecture.
func TestAddLanesPortableIsScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for trial := range 500 {
		k := rng.IntN(80)
		d, s := make([]float32, k), make([]float32, k)
		u, v := make([]uint32, k), make([]uint32, k)
		want, wantU := make([]byte, 4*k), make([]byte, 4*k)
		src := make([]byte, 4*k)
		for i := range k {
			x, y := rng.Uint32(), rng.Uint32()
			d[i], s[i], u[i], v[i] = math.Float32frombits(x), math.Float32frombits(y), x, y
			binary.LittleEndian.PutUint32(want[4*i:], x)
			binary.LittleEndian.PutUint32(src[4*i:], y)
		}
		copy(wantU, want)
		addScalar(F32, want, src)
		addScalar(I32, wantU, src)
		x := slices.Clone(u)
		addLanes(d, s)
		addLanes(u, v)
		for i := range k {
			got, w := math.Float32bits(d[i]), binary.LittleEndian.Uint32(want[4*i:])
			if got != w && !eitherNaN(got, w, x[i], v[i]) || u[i] != binary.LittleEndian.Uint32(wantU[4*i:]) {
				t.Fatalf("trial %d element %d: portable addLanes differs from the scalar path: %#x + %#x gives %#x, the scalar path %#x", trial, i, x[i], v[i], got, w)
			}
		}
	}
}

// eitherNaN: x + y of two NaNs is one of them, quieted, and which one
// follows the operand order the compiler picks for a commutative add
// (race instrumentation changes it), so got and want may each be either.
func eitherNaN(got, want, x, y uint32) bool {
	const quiet = 1 << 22
	isNaN := func(b uint32) bool { return b&0x7f800000 == 0x7f800000 && b&0x7fffff != 0 }
	either := func(b uint32) bool { return b == x|quiet || b == y|quiet }
	return isNaN(x) && isNaN(y) && either(got) && either(want)
}
