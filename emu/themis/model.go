// Package themis is the system model and the collective schedulers of
// Themis (Rashidi et al., "Themis: A Network Bandwidth-Aware Collective
// Scheduling Policy for Distributed Training of DL Models", ISCA '22;
// docs/themis.md): a platform of D network dimensions, the hierarchical
// all-reduce that runs reduce-scatter (RS) stages on every dimension and
// then all-gather (AG) stages, the paper's load model, the baseline
// schedule and Themis's greedy per-chunk schedule (Algorithm 1), the
// intra-dimension policies (FIFO, smallest-chunk-first) and schedule
// consistency (§4.6): the order every rank serves a dimension's chunks
// in, and a checker that names the wait cycle when ranks disagree.
//
// Everything here is a pure, deterministic function of its inputs, so
// that every rank computes the same schedule locally (the paper's
// §4.6.1) and the executors (flow and packet mode) share one scheduler.
// Sizes are bytes per NPU, bandwidths bytes per second per NPU, loads
// seconds (float64: the worked examples need exact quarters).
package themis

import (
	"errors"
	"fmt"
	"math"
	"math/bits"
	"time"
)

// DimKind is a dimension's topology; it fixes the 1-D algorithm each
// RS or AG stage on it runs (the paper's Table 1).
type DimKind string

const (
	Ring   DimKind = "ring"   // a physical ring: the ring algorithm, P-1 steps per RS or AG
	FC     DimKind = "fc"     // fully connected: Direct, one step (one message to each peer)
	Switch DimKind = "switch" // a switch: Halving-Doubling, log2 P steps
)

// Dim is one network dimension.
type Dim struct {
	Kind DimKind
	// Size is the number of peer NPUs in the dimension (the paper's P_K).
	Size int
	// BW is the dimension's bandwidth per NPU in bytes per second: the
	// paper's "Aggr BW/NPU", BW per link × links per NPU (Table 2), one
	// direction (footnote 1).
	BW float64
	// Latency is the step latency: the NPU-to-NPU latency of a
	// minimum-size message (Table 2's last column, §4.4).
	Latency time.Duration
	// Aggregation is an ina dimension's switch aggregation time beyond
	// the forwarding that Latency counts (0: DefaultAggregation); it
	// must be 0 on other kinds.
	Aggregation time.Duration
}

// Topology is a platform's dimensions, dim 0 first (the paper's dim1,
// usually the fastest). NPU ids number dim 0 fastest (ASTRA-sim's
// analytical backend does the same): rank = Σ c_K · Π_{k<K} P_k.
type Topology []Dim

// maxNPUs bounds a topology so that rank arithmetic cannot overflow.
const maxNPUs = 1 << 24

// NPUs is the number of NPUs, the product of the sizes.
func (t Topology) NPUs() int {
	n := 1
	for _, d := range t {
		n *= d.Size
	}
	return n
}

// Validate refuses a topology the model cannot run, with a one-line
// error naming the dimension (numbered from 1, as the paper does).
func (t Topology) Validate() error {
	if len(t) == 0 {
		return errors.New("themis: the topology has no dimension")
	}
	n := 1
	for i, d := range t {
		switch d.Kind {
		case Ring, FC, Switch, INA:
		default:
			return fmt.Errorf("themis: dim%d: unknown kind %q (want ring, fc, switch or ina)", i+1, d.Kind)
		}
		if d.Size < 2 {
			return fmt.Errorf("themis: dim%d: size %d: a dimension has at least 2 NPUs", i+1, d.Size)
		}
		if (d.Kind == Switch || d.Kind == INA) && bits.OnesCount(uint(d.Size)) != 1 {
			return fmt.Errorf("themis: dim%d: %s size %d: halving-doubling needs a power of two", i+1, d.Kind, d.Size)
		}
		if d.Kind == INA && d.Size > MaxINASize {
			return fmt.Errorf("themis: dim%d: ina size %d: NetReduce's switch aggregates at most %d NPUs", i+1, d.Size, MaxINASize)
		}
		if d.Aggregation < 0 {
			return fmt.Errorf("themis: dim%d: negative aggregation time %v", i+1, d.Aggregation)
		}
		if d.Aggregation != 0 && d.Kind != INA {
			return fmt.Errorf("themis: dim%d: aggregation time %v on a %s dimension: only ina aggregates", i+1, d.Aggregation, d.Kind)
		}
		if !(d.BW > 0) || math.IsInf(d.BW, 0) {
			return fmt.Errorf("themis: dim%d: bandwidth %v B/s: want a positive finite bandwidth", i+1, d.BW)
		}
		if d.Latency < 0 {
			return fmt.Errorf("themis: dim%d: negative step latency %v", i+1, d.Latency)
		}
		if n > maxNPUs/d.Size {
			return fmt.Errorf("themis: more than %d NPUs", maxNPUs)
		}
		n *= d.Size
	}
	return nil
}

// Op is a stage's operation.
type Op string

const (
	RS Op = "RS" // reduce-scatter: the bytes each NPU holds shrink P times
	AG Op = "AG" // all-gather: they grow P times
)

// Collective is what the workload asks for.
type Collective string

const (
	AllReduce     Collective = "all-reduce"     // RS stages on every dimension, then AG stages
	ReduceScatter Collective = "reduce-scatter" // the first half alone
	AllGather     Collective = "all-gather"     // the second half alone
)

func (c Collective) valid() bool { return c == AllReduce || c == ReduceScatter || c == AllGather }

// OutBytes is what each NPU holds after an op on a dimension of size p
// when it held in before (the paper's §2.1: RS divides by P, AG
// multiplies by P).
func OutBytes(p int, op Op, in float64) float64 {
	switch op {
	case RS:
		return in / float64(p)
	case AR: // the switch's sum: as large as each contribution
		return in
	}
	return in * float64(p)
}

// SentBytes is what each NPU sends in one op on a dimension of size p,
// in the pre-stage size convention of the paper's §2.3: an RS sends
// (P-1)/P of what it holds (it keeps one P-th), an AG sends its share to
// each of the P-1 others. Ring, Direct and Halving-Doubling all send this
// much (they are bandwidth-optimal); only their step counts differ.
//
// An AR on an ina dimension sends what the NPU holds, once, to the
// switch (and receives the sum, as much, on the link's other direction).
func SentBytes(p int, op Op, in float64) float64 {
	switch op {
	case RS:
		return in * float64(p-1) / float64(p)
	case AR:
		return in
	}
	return in * float64(p-1)
}

// Steps is the number of communication steps of one RS or one AG on a
// dimension (the paper's Table 1 algorithms): ring P-1, Direct 1,
// Halving-Doubling log2 P. An all-reduce on the dimension takes twice
// as many (§4.4: "ring-based All-Reduce require[s] 2P_K - 2 steps").
func Steps(k DimKind, p int) int {
	switch k {
	case Ring:
		return p - 1
	case FC:
		return 1
	case Switch, INA: // an ina dimension's RS or AG is the switch's Halving-Doubling
		return bits.Len(uint(p)) - 1
	}
	return 0
}

// StageSeconds is the load model's time of one stage (§4.4): the bytes
// sent times the per-byte latency 1/BW, plus, withLatency, the stage's
// fixed delay (FixedSeconds: steps × step latency; an ina AR's one
// step).
func StageSeconds(d Dim, op Op, in float64, withLatency bool) float64 {
	s := SentBytes(d.Size, op, in) / d.BW
	if withLatency {
		s += FixedSeconds(d, op)
	}
	return s
}

// StageTime is StageSeconds as a duration (rounded to the nanosecond).
func StageTime(d Dim, op Op, in float64, withLatency bool) time.Duration {
	return seconds(StageSeconds(d, op, in, withLatency))
}

// AK is a dimension's fixed delay for a collective (§4.4): A_K =
// number_of_steps × step_latency, the steps of one RS, one AG or both
// (all-reduce) with the dimension's algorithm, in seconds. An ina
// dimension's all-reduce is the switch's one AR step (§4.4: "A_K can be
// calculated by running a minimum size collective on dimK").
func AK(d Dim, c Collective) float64 {
	if d.Kind == INA && c == AllReduce {
		return FixedSeconds(d, AR)
	}
	steps := Steps(d.Kind, d.Size)
	if c == AllReduce {
		steps *= 2
	}
	return float64(steps) * d.Latency.Seconds()
}

func seconds(s float64) time.Duration {
	return time.Duration(math.Round(s * 1e9))
}
