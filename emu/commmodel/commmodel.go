// Package commmodel is the communication model of NetReduce's Appendix A
// (Shuo Liu et al., "In-Network Aggregation with Transport Transparency
// for Distributed Training", ASPLOS '23; docs/model.md): the time one all-reduce of M bytes
// takes on P GPUs, n per machine, for a flat ring (FR, Eq. 1), Tencent's
// hierarchical all-reduce (TA, Eq. 2), parallel NetReduce (PN, Eq. 3) and
// PN with Ring-AllReduce across machines (PR, which the paper names but
// does not model).
//
// Eq. (2) is printed in two forms that disagree on the intra-machine
// reduce: the bracketed form charges stage 1 (2(n-1)/n)·M/(n·B_intra),
// the closed form (2(n-1)/n)·M/B_intra, 2n/(n+1) times more on that term.
// Eq. (4) follows the closed form, which is also the usual cost of
// Rabenseifner's reduce; it is the default, the bracketed one selectable.
package commmodel

import (
	"fmt"
	"math"
	"math/bits"
)

// Scheme is an all-reduce scheme of §3.4.
type Scheme string

const (
	FR Scheme = "fr" // one ring over all P GPUs
	TA Scheme = "ta" // reduce to a master per machine, ring of masters, broadcast
	PN Scheme = "pn" // n NetReduce rings, intra-machine reduce-scatter before and all-gather after
	PR Scheme = "pr" // PN with Ring-AllReduce across machines
)

// Schemes are the schemes in the order reports list them.
var Schemes = []Scheme{FR, TA, PN, PR}

// TAForm selects one of Eq. (2)'s two printed forms.
type TAForm string

const (
	Closed    TAForm = "closed"
	Bracketed TAForm = "bracketed"
)

// Params are the model's inputs (Table 4 of the paper).
type Params struct {
	GPUs    int     // P
	PerHost int     // n
	Alpha   float64 // α, seconds: the per-hop latency of a ring step
	Size    float64 // M, bytes
	BIntra  float64 // bytes per second inside a machine
	BInter  float64 // bytes per second between machines (the NIC)
	TAForm  TAForm
}

// Validate says what is wrong with p, if anything, in one line.
func (p Params) Validate() error {
	switch {
	case p.PerHost < 1:
		return fmt.Errorf("GPUs per machine %d: want at least 1", p.PerHost)
	case p.GPUs < 2 || p.GPUs%p.PerHost != 0:
		return fmt.Errorf("%d GPUs with %d per machine: want at least 2 GPUs, a whole number of machines", p.GPUs, p.PerHost)
	case p.GPUs == p.PerHost:
		return fmt.Errorf("%d GPUs on one machine: the schemes need at least two machines", p.GPUs)
	case !(p.Alpha >= 0) || math.IsInf(p.Alpha, 0):
		return fmt.Errorf("alpha %v: want a duration of 0 or more", p.Alpha)
	case !(p.Size > 0) || math.IsInf(p.Size, 0):
		return fmt.Errorf("size %v: want more than 0 bytes", p.Size)
	case !(p.BIntra > 0) || !(p.BInter > 0) || math.IsInf(p.BIntra, 0) || math.IsInf(p.BInter, 0):
		return fmt.Errorf("bandwidths %v and %v: want more than 0", p.BIntra, p.BInter)
	case p.TAForm != Closed && p.TAForm != Bracketed:
		return fmt.Errorf("TA form %q: want closed or bracketed", p.TAForm)
	}
	return nil
}

// PowerOfTwo reports whether n is one (TA's model assumes it, Appendix A).
func PowerOfTwo(n int) bool { return n > 0 && bits.OnesCount(uint(n)) == 1 }

// Time is a scheme's time in seconds, by stage (FR has one stage).
type Time struct {
	Scheme Scheme
	Stages []float64
	Total  float64
}

// Eval is scheme s's all-reduce time under p (p valid; for TA, n a power
// of two).
func Eval(s Scheme, p Params) Time {
	P, n := float64(p.GPUs), float64(p.PerHost)
	a, M, bA, bE := p.Alpha, p.Size, p.BIntra, p.BInter
	machines := P / n
	ring := func(k float64) float64 { return 2*(k-1)*a + 2*((k-1)/k)*(M/bE) } // Ring-AllReduce over k NICs
	var st []float64
	switch s {
	case FR: // Eq. (1)
		st = []float64{ring(P)}
	case TA: // Eq. (2)
		l := math.Log2(n)
		s1 := 2*a*l + (2*(n-1)/n)*(M/bA)
		if p.TAForm == Bracketed {
			s1 = 2*a*l + (2*(n-1)/n)*(M/(n*bA))
		}
		st = []float64{s1, ring(machines), (l+n-1)*a + 2*((n-1)/n)*(M/bA)}
	case PN, PR: // Eq. (3); PR's stage 2 is a ring of the machines
		intra := (n-1)*a + (n-1)*M/(n*bA)
		s2 := a + M/bE
		if s == PR {
			s2 = ring(machines)
		}
		st = []float64{intra, s2, intra}
	default:
		panic("commmodel: unknown scheme " + string(s))
	}
	t := Time{Scheme: s, Stages: st}
	for _, x := range st {
		t.Total += x
	}
	return t
}

// FRPNThreshold is the B_intra/B_inter at and above which PN's bandwidth
// term is no larger than FR's (the M-term of Eq. (5) is >= 0):
// 2P(n-1)/(n(P-2)). Eq. (6), 2P/(P-2), drops the factor (n-1)/n: it is
// sufficient, not tight.
func FRPNThreshold(P, n int) (exact, eq6 float64) {
	p, m := float64(P), float64(n)
	return 2 * p * (m - 1) / (m * (p - 2)), 2 * p / (p - 2)
}
