package themis

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

// Scheduler names an inter-dimension scheduler.
type Scheduler string

const (
	// Baseline is the multi-rail hierarchical order of today's libraries
	// (§2.3): every chunk runs RS on dim1 … dimD, then AG on dimD … dim1.
	Baseline Scheduler = "baseline"
	// Themis is Algorithm 1: each chunk's order is chosen greedily from
	// the dimensions' current loads.
	Themis Scheduler = "themis"
)

// DefaultThresholdDivisor is the paper's threshold: the time of an RS
// (AG) of chunkSize/16 on the least-loaded dimension (§5.3).
const DefaultThresholdDivisor = 16

// Config is a scheduler's parameters.
type Config struct {
	Scheduler Scheduler
	// Chunks is the number of equal chunks the collective is cut into
	// (ChunksPerCollective; the paper uses 64).
	Chunks int
	// ChargeAK starts every dimension's load at its fixed delay A_K for
	// the collective (Algorithm 1 line 2). ASTRA-sim's public code starts
	// them at zero; the paper's Fig. 7 neglects A_K.
	ChargeAK bool
	// LoadRSOnly charges an all-reduce chunk's RS half only, as ASTRA-sim
	// does; by default both halves are charged, as Fig. 7's loads show.
	// The reversed AG sends what the RS sent on every dimension, so this
	// halves every increment: it changes no order, only the threshold
	// test against the loads' gap.
	LoadRSOnly bool
	// ThresholdDivisor: the threshold is the time of a
	// chunkSize/ThresholdDivisor RS (AG for an all-gather) on the
	// least-loaded dimension; 0 means DefaultThresholdDivisor.
	ThresholdDivisor int
	// Mutations re-introduce known scheduler bugs for the tests' power
	// checks; zero in every real run.
	Mutations Mutations
}

// Mutations are scheduler and checker bugs the tests must catch.
type Mutations struct {
	ForgetAK      bool // the tracker starts at zero even with ChargeAK
	AGNotReversed bool // an all-reduce's AG stages visit the dimensions in the RS order instead of its reverse
	IgnorePeers   bool // the consistency checker lets a rank serve its head without its peers agreeing
}

// Stage is one RS or AG of a chunk on one dimension.
type Stage struct {
	Dim int // index into the Topology (0 = the paper's dim1)
	Op  Op
	// InBytes and OutBytes are what each NPU holds of the chunk entering
	// and leaving the stage; SentBytes is what each NPU sends in it.
	InBytes, OutBytes, SentBytes float64
	// Time is the stage's time alone on its dimension: SentBytes/BW plus
	// its steps × step latency.
	Time time.Duration
}

// ChunkSchedule is one chunk's stages in the order it runs them.
type ChunkSchedule struct {
	Chunk  int     // 0-based
	Bytes  float64 // the chunk's size per NPU (CollectiveSize / Chunks)
	Stages []Stage
}

// Decision is the scheduler's choice for one chunk, with the tracker's
// loads around it (seconds per dimension).
type Decision struct {
	Chunk  int
	Before []float64 // the dimensions' loads before the chunk
	// Gap is max(Before) - min(Before); Threshold the time it was
	// compared with (Themis only; 0 for the baseline scheduler).
	Gap, Threshold float64
	// Baseline is true when the chunk took the baseline order (the
	// baseline scheduler, or Themis with Gap < Threshold).
	Baseline bool
	// Order is the chunk's dimension order for its first half: the RS
	// order of an all-reduce or reduce-scatter (the AG runs it
	// reversed), the AG order of an all-gather.
	Order []int
	Added []float64 // what the chunk charged each dimension
	After []float64 // Before + Added
}

// Log is the scheduler's decisions, one per chunk, in chunk order.
type Log []Decision

// Schedule cuts a collective of bytesPerNPU bytes per NPU (an
// all-reduce's or reduce-scatter's input, an all-gather's output) into
// cfg.Chunks equal chunks and gives each its stages. An all-gather's
// chunk enters its first AG stage with Bytes/NPUs.
func Schedule(t Topology, c Collective, bytesPerNPU float64, cfg Config) ([]ChunkSchedule, Log, error) {
	if err := t.Validate(); err != nil {
		return nil, nil, err
	}
	if !c.valid() {
		return nil, nil, fmt.Errorf("themis: unknown collective %q (want all-reduce, reduce-scatter or all-gather)", c)
	}
	if !(bytesPerNPU > 0) || math.IsInf(bytesPerNPU, 0) {
		return nil, nil, fmt.Errorf("themis: collective size %v bytes: want a positive finite size", bytesPerNPU)
	}
	if cfg.Scheduler != Baseline && cfg.Scheduler != Themis {
		return nil, nil, fmt.Errorf("themis: unknown scheduler %q (want baseline or themis)", cfg.Scheduler)
	}
	if cfg.Chunks < 1 {
		return nil, nil, fmt.Errorf("themis: %d chunks: want at least 1", cfg.Chunks)
	}
	div := cfg.ThresholdDivisor
	if div == 0 {
		div = DefaultThresholdDivisor
	}
	if div < 0 {
		return nil, nil, fmt.Errorf("themis: threshold divisor %d: want a positive divisor", div)
	}

	D := len(t)
	first := RS // the op of the order the scheduler chooses
	if c == AllGather {
		first = AG
	}
	// Dim Load Tracker.reset(CT): each dimension starts at its A_K.
	loads := make([]float64, D)
	if cfg.ChargeAK && !cfg.Mutations.ForgetAK {
		for k, d := range t {
			loads[k] = AK(d, c)
		}
	}
	chunk := bytesPerNPU / float64(cfg.Chunks)
	scheds := make([]ChunkSchedule, cfg.Chunks)
	log := make(Log, cfg.Chunks)
	for i := range scheds {
		dec := Decision{Chunk: i, Before: append([]float64(nil), loads...)}
		lo, hi := 0, 0
		for k := range loads {
			if loads[k] < loads[lo] {
				lo = k
			}
			if loads[k] > loads[hi] {
				hi = k
			}
		}
		dec.Gap = loads[hi] - loads[lo]
		if cfg.Scheduler == Themis {
			dec.Threshold = StageSeconds(t[lo], first, chunk/float64(div), false)
		}
		if cfg.Scheduler == Baseline || dec.Gap < dec.Threshold {
			dec.Baseline = true
			dec.Order = baselineOrder(D, first)
		} else {
			dec.Order = sortedOrder(loads, first)
		}
		stages := t.stages(c, chunk, dec.Order, cfg.Mutations.AGNotReversed)
		dec.Added = make([]float64, D)
		for _, s := range stages {
			if c == AllReduce && s.Op == AG && cfg.LoadRSOnly {
				continue
			}
			// Lines 28-29: the Latency Model charges n_K × B_K only.
			add := s.SentBytes / t[s.Dim].BW
			if s.Op == AR && cfg.LoadRSOnly {
				// An ina AR is both halves of its dimension's
				// all-reduce: charge half, as the others'.
				add /= 2
			}
			dec.Added[s.Dim] += add
		}
		for k := range loads {
			loads[k] += dec.Added[k]
		}
		dec.After = append([]float64(nil), loads...)
		scheds[i] = ChunkSchedule{Chunk: i, Bytes: chunk, Stages: stages}
		log[i] = dec
	}
	return scheds, log, nil
}

// baselineOrder is getBaselineScheduling: RS dim1 … dimD, AG dimD … dim1.
func baselineOrder(D int, op Op) []int {
	o := make([]int, D)
	for k := range o {
		o[k] = k
		if op == AG {
			o[k] = D - 1 - k
		}
	}
	return o
}

// sortedOrder is getIndexofSortedList: for an RS the dimensions by load
// ascending (the least loaded first, where the chunk is largest), ties
// by index; for an AG the reverse of that list (the least loaded last,
// where an AG's chunk is largest), so that equal loads give each op its
// baseline order.
func sortedOrder(loads []float64, op Op) []int {
	o := make([]int, len(loads))
	for k := range o {
		o[k] = k
	}
	sort.SliceStable(o, func(a, b int) bool { return loads[o[a]] < loads[o[b]] })
	if op == AG {
		for a, b := 0, len(o)-1; a < b; a, b = a+1, b-1 {
			o[a], o[b] = o[b], o[a]
		}
	}
	return o
}

// stages lays a chunk's stages out from its first-half order: an
// all-reduce runs its AG stages in the reverse of its RS order
// (Algorithm 1 line 8), so that every dimension gets back what it
// scattered; the middle RS/AG pair on an ina dimension is its switch's
// one AR (ina.go).
func (t Topology) stages(c Collective, chunk float64, order []int, agNotReversed bool) []Stage {
	var ops []Stage
	add := func(k int, op Op) { ops = append(ops, Stage{Dim: k, Op: op}) }
	in := chunk
	switch c {
	case ReduceScatter:
		for _, k := range order {
			add(k, RS)
		}
	case AllGather:
		in = chunk / float64(t.NPUs())
		for _, k := range order {
			add(k, AG)
		}
	case AllReduce:
		for _, k := range order {
			add(k, RS)
		}
		for j := range order {
			k := order[len(order)-1-j]
			if agNotReversed {
				k = order[j]
			}
			add(k, AG)
		}
		ops = t.fuseINA(ops)
	}
	for j := range ops {
		s := &ops[j]
		d := t[s.Dim]
		s.InBytes = in
		s.OutBytes = OutBytes(d.Size, s.Op, in)
		s.SentBytes = SentBytes(d.Size, s.Op, in)
		s.Time = StageTime(d, s.Op, in, true)
		in = s.OutBytes
	}
	return ops
}

// String is the log as a table, one line per chunk: loads in
// microseconds, orders with dimensions numbered from 1 as the paper
// does.
func (l Log) String() string {
	var b strings.Builder
	us := func(v []float64) string {
		f := make([]string, len(v))
		for k, x := range v {
			f[k] = fmt.Sprintf("%.3f", x*1e6)
		}
		return "(" + strings.Join(f, ", ") + ")"
	}
	b.WriteString("chunk  loads before (µs)  gap  threshold  order  added  loads after\n")
	for _, d := range l {
		o := make([]string, len(d.Order))
		for k, x := range d.Order {
			o[k] = fmt.Sprint(x + 1)
		}
		kind := "greedy"
		if d.Baseline {
			kind = "baseline"
		}
		fmt.Fprintf(&b, "%d  %s  %.3f  %.3f  (%s) %s  %s  %s\n", d.Chunk, us(d.Before), d.Gap*1e6, d.Threshold*1e6,
			strings.Join(o, ", "), kind, us(d.Added), us(d.After))
	}
	return b.String()
}
