package train

import (
	"math"
	"time"
)

// DefaultScale is the fixed point's default S: P in ms⁻¹ × 32, so ESA's
// DNN A at the start of an iteration (T_j = 1.92 ms) encodes layer 1 as
// 67 and layer 2 as 33, well inside 1 … 255.
const DefaultScale = 32

// Priority is ESA's Eq. (1), P = (1/T_j) × (L/l) × (Comm/Comp), in ms⁻¹
// (T_j in ms). A T_j of zero or less is "nothing left" and gives +Inf,
// which encodes to the highest priority.
func Priority(tj time.Duration, layers, layer int, commComp float64) float64 {
	ms := float64(tj) / float64(time.Millisecond)
	if ms <= 0 {
		return math.Inf(1)
	}
	return 1 / ms * float64(layers) / float64(layer) * commComp
}

// Encode is the priority field: q = min(255, max(1, round(P × scale))),
// linear so that the switch's ">> 1" downgrade halves the priority; 0 is
// reserved for "empty" and for reminders. A scale of 0 or less is
// DefaultScale; a NaN P encodes as 1.
func Encode(p, scale float64) uint8 {
	if scale <= 0 {
		scale = DefaultScale
	}
	q := math.Round(p * scale)
	switch {
	case q >= 255:
		return 255
	case q >= 1:
		return uint8(q)
	}
	return 1 // q < 1 or NaN
}
