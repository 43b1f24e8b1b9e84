package endpoint

import (
	"encoding/binary"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/frames/wire"
)

// Gradient writes worker rank's values of fragment (iter, seq) of job
// into h: full-range int32 from a hash of the run's seed and the
// fragment's place, so every sum wraps and any contribution counted
// twice or missed changes it.
func Gradient(h wire.INAPS, seed uint64, job uint16, rank int, iter, seq uint32) {
	v := h.Vector()
	x := place(seed, job, rank, iter, seq)
	for i := 0; i < len(v); i += 8 {
		x += 0x9e3779b97f4a7c15
		z := mix(x)
		binary.BigEndian.PutUint64(v[i:], z)
	}
}

// GradientVec is Gradient into a Vec.
func GradientVec(v *inaps.Vec, seed uint64, job uint16, rank int, iter, seq uint32) {
	x := place(seed, job, rank, iter, seq)
	for i := 0; i < len(v); i += 2 {
		x += 0x9e3779b97f4a7c15
		z := mix(x)
		v[i], v[i+1] = int32(z>>32), int32(z)
	}
}

// place is the hash a fragment's values start from: each field mixed in
// by itself, so no two places share it (packing them side by side in one
// word let iteration 256 + x of worker r meet iteration x of r ^ 1).
func place(seed uint64, job uint16, rank int, iter, seq uint32) uint64 {
	x := mix(seed ^ 0x6a09e667f3bcc908)
	x = mix(x ^ uint64(job)<<32 ^ uint64(uint32(rank)))
	return mix(x ^ uint64(iter)<<32 ^ uint64(seq))
}

// mix is splitmix64's finaliser.
func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
