package tensor

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
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
	for _, d := range []DType{F32, I32} {
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
