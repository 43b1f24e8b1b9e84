package dcqcn

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Params are one NIC's DCQCN settings: its notification point's (NP,
// the receiver) and its reaction point's (RP, the sender's per-QP rate
// limiter). Rates are in bits per second of frames on the wire (preamble,
// FCS and inter-frame gap included, as a NIC's rate limiter counts them).
// docs/congestion.md ("DCQCN") gives every default with its source.
type Params struct {
	// LineRate is the NIC's link rate: a QP never sends faster, and a QP
	// at it is never held back (the line paces it).
	LineRate float64
	// MinRate is the lowest rate a CNP can cut a QP to.
	MinRate float64

	// G is α's gain g: on a CNP α = (1−g)α + g, and α = (1−g)α every K
	// without one.
	G float64
	// AlphaInit is α before a QP's first CNP.
	AlphaInit float64
	// K is the α update period: α decays when no CNP came for K.
	K time.Duration

	// T is the rate-increase timer's period, B the byte counter's bytes
	// (frame bytes the QP sent) per rate-increase event; both restart on
	// a CNP.
	T time.Duration
	B int64
	// F is how many increase events of a counter are fast recovery
	// (Rc = (Rt+Rc)/2) before additive increase.
	F int
	// RAI is the additive increase of the target rate per event, RHAI the
	// hyper increase's step (Rt += i·RHAI, i counting events since both
	// counters passed F).
	RAI, RHAI float64

	// CNPInterval is the NP's least time between two CNPs for one QP
	// (the marked packets between are counted as suppressed).
	CNPInterval time.Duration
	// CNPDSCP is the CNPs' DSCP (their ECN field is 00).
	CNPDSCP uint8
}

// DefaultParams are Zhu et al.'s (SIGCOMM '15), the set whose behaviour
// the paper's fluid model and experiments describe, on a link of
// lineRate bit/s.
func DefaultParams(lineRate float64) Params {
	return Params{
		LineRate:    lineRate,
		MinRate:     1e6,
		G:           1.0 / 256,
		AlphaInit:   1,
		K:           55 * time.Microsecond,
		T:           55 * time.Microsecond,
		B:           10 * 1000 * 1000,
		F:           5,
		RAI:         40e6,
		RHAI:        400e6,
		CNPInterval: 50 * time.Microsecond,
		CNPDSCP:     48,
	}
}

// NVIDIAParams are the ConnectX-4 and later firmware defaults as NVIDIA
// documents them (the mlx5 names: dce_tcp_g 1019, dce_tcp_rtt 1 µs,
// initial_alpha_value 1023, rpg_time_reset 300 µs, rpg_byte_reset 32767,
// rpg_threshold 1, rpg_ai_rate 5 Mb/s, rpg_hai_rate 50 Mb/s,
// rpg_min_rate 1 Mb/s, cnp_dscp 48), on a link of lineRate bit/s.
// Unverified: rpg_time_reset, rpg_byte_reset, rpg_threshold, rpg_ai_rate
// and rpg_hai_rate were not read at a source (docs/congestion.md, DCQCN,
// says which are); DefaultParams, the paper's set, is inaemu's default.
func NVIDIAParams(lineRate float64) Params {
	return Params{
		LineRate:    lineRate,
		MinRate:     1e6,
		G:           (1024 - 1019) / 1024.0,
		AlphaInit:   1023 / 1024.0,
		K:           time.Microsecond,
		T:           300 * time.Microsecond,
		B:           32767,
		F:           1,
		RAI:         5e6,
		RHAI:        50e6,
		CNPInterval: 50 * time.Microsecond,
		CNPDSCP:     48,
	}
}

// Validate refuses settings DCQCN cannot run with, in one line.
func (p Params) Validate() error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case !(p.LineRate > 0) || !finite(p.LineRate):
		return fmt.Errorf("dcqcn: line rate %g bit/s: want a positive rate", p.LineRate)
	case !(p.MinRate > 0) || p.MinRate > p.LineRate:
		return fmt.Errorf("dcqcn: minimum rate %g bit/s: want above 0 and at most the line rate %g", p.MinRate, p.LineRate)
	case !(p.G > 0 && p.G <= 1):
		return fmt.Errorf("dcqcn: g %g: want 0 < g <= 1", p.G)
	case !(p.AlphaInit >= 0 && p.AlphaInit <= 1):
		return fmt.Errorf("dcqcn: initial alpha %g: want 0 <= alpha <= 1", p.AlphaInit)
	case p.K <= 0:
		return fmt.Errorf("dcqcn: alpha update period %v: want a positive time", p.K)
	case p.T <= 0:
		return fmt.Errorf("dcqcn: rate increase timer %v: want a positive time", p.T)
	case p.B <= 0:
		return fmt.Errorf("dcqcn: byte counter %d: want a positive byte count", p.B)
	case p.F < 0:
		return fmt.Errorf("dcqcn: fast recovery stages %d: want 0 or more", p.F)
	case !(p.RAI >= 0) || !finite(p.RAI) || !(p.RHAI >= 0) || !finite(p.RHAI):
		return fmt.Errorf("dcqcn: rate increase steps %g and %g bit/s: want finite, 0 or more", p.RAI, p.RHAI)
	case p.CNPInterval < 0:
		return errors.New("dcqcn: CNP interval is negative")
	case p.CNPDSCP > 63:
		return fmt.Errorf("dcqcn: CNP DSCP %d: want 0..63", p.CNPDSCP)
	}
	return nil
}
