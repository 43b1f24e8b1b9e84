package train

import "fmt"

// Values is the int32 values a fragment (one INA-PS packet) carries.
const Values = 62

// Partition is one tensor partition: the unit a worker pushes, with one
// priority.
type Partition struct {
	Layer     int    // 1-based layer l, front to back
	Index     int    // 1-based within the layer
	Pos       int    // 0-based position in the send order: PartitionDone's part
	Numel     int64  // values
	Fragments int    // ⌈Numel/Values⌉ packets
	FirstSeq  uint32 // 1-based sequence number of its first fragment, continuous across the send order
	Bytes     int64  // 4 × Numel
}

// SendOrder is the order in which a worker pushes an iteration's
// partitions.
type SendOrder int

const (
	// Reverse is dnn_benchmark's: layers last to first (as backward
	// propagation produces them), each layer's partitions in order.
	Reverse SendOrder = iota
	// ESA is the order of ESA's simulation: the last layer's first
	// partition, then layers 1 … L−1 (all partitions, increasing layer),
	// then the last layer's other partitions. For L = 2 it is the paper's
	// L2P1, L1P1, L1P2, L2P2; for L > 2 it is inaemu's generalisation.
	ESA
)

func (o SendOrder) String() string {
	switch o {
	case Reverse:
		return "reverse"
	case ESA:
		return "esa"
	}
	return fmt.Sprintf("SendOrder(%d)", int(o))
}

// ParseSendOrder reads "reverse" or "esa".
func ParseSendOrder(s string) (SendOrder, error) {
	for _, o := range []SendOrder{Reverse, ESA} {
		if s == o.String() {
			return o, nil
		}
	}
	return 0, fmt.Errorf("send order %q: want reverse or esa", s)
}

// split is a layer's partitions' numel: equal parts, the first
// numel%parts of them one larger.
func split(l Layer) []int64 {
	n := make([]int64, l.Partitions)
	q, r := l.Numel/int64(l.Partitions), l.Numel%int64(l.Partitions)
	for i := range n {
		n[i] = q
		if int64(i) < r {
			n[i]++
		}
	}
	return n
}

// fragments is ⌈numel/Values⌉, written not to overflow near MaxInt64.
func fragments(numel int64) int64 {
	f := numel / Values
	if numel%Values != 0 {
		f++
	}
	return f
}

// layerFragments is the fragments of a layer, its partitions packetised
// separately.
func layerFragments(l Layer) int64 {
	var f int64
	for _, n := range split(l) {
		f += fragments(n)
	}
	return f
}

// Partitions lists an iteration's partitions in the send order, with
// their fragments' sequence numbers.
func (m *Model) Partitions(order SendOrder) []Partition {
	byLayer := make([][]Partition, len(m.Layers))
	for i, l := range m.Layers {
		for j, n := range split(l) {
			byLayer[i] = append(byLayer[i], Partition{Layer: i + 1, Index: j + 1, Numel: n, Fragments: int(fragments(n)), Bytes: 4 * n})
		}
	}
	var out []Partition
	switch last := len(byLayer) - 1; order {
	case ESA:
		out = append(out, byLayer[last][0])
		for _, ps := range byLayer[:last] {
			out = append(out, ps...)
		}
		out = append(out, byLayer[last][1:]...)
	default:
		for i := last; i >= 0; i-- {
			out = append(out, byLayer[i]...)
		}
	}
	seq := uint32(1)
	for i := range out {
		out[i].Pos = i
		out[i].FirstSeq = seq
		seq += uint32(out[i].Fragments)
	}
	return out
}
