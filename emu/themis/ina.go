package themis

import "time"

// In-network aggregation as a dimension (the paper's §4.5: "Switch
// collective offload reduces the collective's network traffic (i.e.,
// n_K^i) and fixed delay (i.e., A_K)", and Themis still balances the
// dimensions; docs/themis.md, "In-network aggregation as a dimension").
//
// An ina dimension is a switch running NetReduce's aggregation program
// (emu/netreduce): every NPU streams its s bytes up once, the switch sums
// each packet of the p contributions as they arrive and sends the sum
// down to every NPU, so an all-reduce on the dimension is one step that
// sends s per NPU (and receives s, on the other direction of the link),
// where Halving-Doubling's RS + AG sends 2(p-1)/p·s in 2·log2 p steps.
//
// The sum leaves every NPU of the dimension with the whole s: the switch
// does not scatter. So an AR stage shrinks nothing for the dimensions
// after it, and its only place in a hierarchical all-reduce is the
// middle, where a chunk's RS on its last dimension is followed at once
// by the AG on that same dimension (the AG order is the RS order
// reversed): that pair is an all-reduce of the chunk on that dimension,
// and an ina dimension runs it as one AR stage. Anywhere else in the
// order an ina dimension is a plain switch (the NetReduce switch
// forwards ordinary RoCE traffic) and runs Halving-Doubling. This
// leaves Observation 1's orders and Algorithm 1 as they are: the
// scheduler picks the order, and the tracker charges the AR's s/BW.

// INA is an in-network aggregation dimension: a switch that sums (see
// above). Its size is a power of two, as a switch's, since off the
// middle of an order it runs Halving-Doubling.
const INA DimKind = "ina"

// AR is an all-reduce stage: the switch's aggregation on an ina
// dimension; each NPU holds the same bytes before and after it.
const AR Op = "AR"

// DefaultAggregation is the time an ina switch spends aggregating a
// packet beyond the forwarding it replaces: NetReduce's switch program
// emits a floating-point sum AllReduce-Switch's measured 2.4 µs after the
// last contribution, where a forwarded frame takes 250 ns (Liu et al.,
// "AllReduce-Switch", IEEE TCSI 2021, Fig. 17; emu/switching's
// DefaultTiming). A step's Latency (NPU to NPU through the switch: two
// links and a forwarding pass) plus this is the AR's one step: two links
// and an aggregation pass.
const DefaultAggregation = 2400*time.Nanosecond - 250*time.Nanosecond

// MaxINASize is the most NPUs an ina dimension aggregates: NetReduce
// tracks a ring's contributions in one 64-bit bitmap word
// (netreduce.MaxWorkers).
const MaxINASize = 64

// aggregation is d's aggregation time beyond forwarding.
func (d Dim) aggregation() time.Duration {
	if d.Aggregation == 0 {
		return DefaultAggregation
	}
	return d.Aggregation
}

// FixedSeconds is a stage's fixed delay in seconds (§4.4's A for one
// stage): steps × step latency for an RS or AG; for the AR of an ina
// dimension, its one step, Latency + the switch's aggregation time.
func FixedSeconds(d Dim, op Op) float64 {
	if op == AR {
		return (d.Latency + d.aggregation()).Seconds()
	}
	return float64(Steps(d.Kind, d.Size)) * d.Latency.Seconds()
}

// fuseINA turns an all-reduce's RS on an ina dimension followed at once
// by the AG on the same dimension (the middle of the order) into one AR
// stage.
func (t Topology) fuseINA(ops []Stage) []Stage {
	for j := 0; j+1 < len(ops); j++ {
		a, b := ops[j], ops[j+1]
		if a.Op == RS && b.Op == AG && a.Dim == b.Dim && t[a.Dim].Kind == INA {
			ops[j].Op = AR
			ops = append(ops[:j+1], ops[j+2:]...)
		}
	}
	return ops
}
