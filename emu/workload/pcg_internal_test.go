package workload

import "testing"

// draws (four interleaved generators) gives the draws of Uint64 one at a
// time, for every length around its lanes' edges, and leaves the
// generator where Uint64 would.
func TestDrawsAreUint64(t *testing.T) {
	for n := range 70 {
		a := pcg{uint64(n) * 0x9E3779B97F4A7C15, 12345 + uint64(n)}
		b := a
		got := make([]uint64, n)
		a.draws(got)
		for i := range n {
			if want := b.Uint64(); got[i] != want {
				t.Fatalf("length %d: draw %d is %#x, Uint64 gives %#x", n, i, got[i], want)
			}
		}
		if a != b {
			t.Fatalf("length %d: the generator ends at %v, Uint64 leaves it at %v", n, a, b)
		}
	}
}
