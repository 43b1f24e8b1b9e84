// Package fluid is DCQCN's fluid model (Zhu et al., "Congestion Control
// for Large-Scale RDMA Deployments", SIGCOMM '15, §5), integrated with a
// fixed step: N identical flows through one bottleneck of capacity C whose
// switch marks packets with RED's probability on the queue, each flow's
// current rate Rc, target rate Rt and α driven by the marks it saw one
// feedback delay τ* ago. It is a test oracle for the emulator's DCQCN
// (emu/nic/dcqcn): what the paper's analysis says an N:1 incast settles
// to.
//
// The model, with rates in packets per second where they count events
// (p(t) = p(q(t−τ*)), R'c = Rc(t−τ*), τ the CNP interval, τ' the α
// period, T the timer, B the byte counter in packets):
//
//	dq/dt  = N·Rc − C                        (q ≥ 0)
//	dα/dt  = g/τ' · ((1 − (1−p)^(τ'·R'c)) − α)
//	dRt/dt = −(Rt − Rc)/τ · (1 − (1−p)^(τ·R'c))
//	         + R_AI·R'c · p(1−p)^(F·B) / ((1−p)^−B − 1)
//	         + R_AI·R'c · p(1−p)^(F·T·R'c) / ((1−p)^(−T·R'c) − 1)
//	dRc/dt = −Rc·α/(2τ) · (1 − (1−p)^(τ·R'c))
//	         + (Rt − Rc)/2 · R'c · p / ((1−p)^−B − 1)
//	         + (Rt − Rc)/2 · R'c · p / ((1−p)^(−T·R'c) − 1)
//
// The terms p/((1−p)^−x − 1) tend to 1/x as p → 0 (no marks: the counters
// alone raise the rate), which is how they are evaluated near 0.
package fluid

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/inaemu/inaemu/emu/nic/dcqcn"
)

// RED is the switch's marking: none below Kmin bytes of queue, all above
// Kmax, and Pmax·(q−Kmin)/(Kmax−Kmin) between.
type RED struct {
	Kmin, Kmax float64 // bytes
	Pmax       float64
}

// PaperRED is the marking the paper settles on for 40 Gb/s (§5: Kmin
// 5 KB, Kmax 200 KB, Pmax 1%).
var PaperRED = RED{Kmin: 5e3, Kmax: 200e3, Pmax: 0.01}

// p is the marking probability at queue q bytes.
func (r RED) p(q float64) float64 {
	switch {
	case q <= r.Kmin:
		return 0
	case q > r.Kmax:
		return 1
	}
	return (q - r.Kmin) / (r.Kmax - r.Kmin) * r.Pmax
}

// Config is one integration.
type Config struct {
	N      int     // flows
	C      float64 // bottleneck capacity, bit/s
	Params dcqcn.Params
	RED    RED
	Delay  time.Duration // τ*, the feedback delay
	// PacketBytes is the packets' size (the unit of the event terms); 0
	// means 1000.
	PacketBytes float64
	// Step is the integration step (0: 100 ns), Duration how long to run
	// (0: 300 ms), Window the tail measured (0: the last 100 ms).
	Step, Duration, Window time.Duration
}

// Result is what the flows and the queue did over the measured window.
type Result struct {
	QueueMean, QueueMin, QueueMax float64 // bytes
	RateMean                      float64 // per flow, bit/s
	RateMin, RateMax              float64
	Alpha                         float64 // α at the end
}

// Run integrates the model (explicit Euler) from every flow at line rate,
// α = 1 and an empty queue.
func Run(c Config) (Result, error) {
	if c.N < 1 {
		return Result{}, fmt.Errorf("fluid: %d flows: want 1 or more", c.N)
	}
	if !(c.C > 0) {
		return Result{}, fmt.Errorf("fluid: capacity %g bit/s: want a positive rate", c.C)
	}
	if err := c.Params.Validate(); err != nil {
		return Result{}, err
	}
	if !(c.RED.Kmax > c.RED.Kmin) || c.RED.Kmin < 0 || !(c.RED.Pmax > 0 && c.RED.Pmax <= 1) {
		return Result{}, errors.New("fluid: RED wants 0 <= Kmin < Kmax and 0 < Pmax <= 1")
	}
	if c.Delay < 0 {
		return Result{}, errors.New("fluid: negative feedback delay")
	}
	pkt := c.PacketBytes
	if pkt == 0 {
		pkt = 1000
	}
	step, dur, win := c.Step, c.Duration, c.Window
	if step == 0 {
		step = 100 * time.Nanosecond
	}
	if dur == 0 {
		dur = 300 * time.Millisecond
	}
	if win == 0 {
		win = 100 * time.Millisecond
	}
	if step <= 0 || win > dur {
		return Result{}, errors.New("fluid: want a positive step and a window no longer than the run")
	}
	p := c.Params
	dt := step.Seconds()
	tau, tauA, timer := p.CNPInterval.Seconds(), p.K.Seconds(), p.T.Seconds()
	if tau == 0 {
		tau = dt // a CNP per marked packet: the interval is the step
	}
	bPkts := float64(p.B) / pkt
	F := float64(p.F)
	line := p.LineRate
	pps := func(bps float64) float64 { return bps / (8 * pkt) }

	// The delayed queue and rate: a ring of one feedback delay's steps.
	lag := int(c.Delay / step)
	histQ := make([]float64, lag+1)
	histR := make([]float64, lag+1)
	rc, rt, alpha, q := line, line, 1.0, 0.0
	for i := range histR {
		histR[i] = rc
	}
	steps := int(dur / step)
	from := steps - int(win/step)
	res := Result{QueueMin: math.Inf(1), RateMin: math.Inf(1)}
	var sumQ, sumR float64
	for k := 0; k < steps; k++ {
		slot := k % (lag + 1)
		qd, rd := histQ[slot], histR[slot] // (t − τ*): written lag steps ago
		histQ[slot], histR[slot] = q, rc
		if lag == 0 {
			qd, rd = q, rc
		}
		pr := c.RED.p(qd)
		r := pps(rd)
		a := 1 - math.Pow(1-pr, tau*r)
		bb := perEvent(pr, bPkts)
		dd := perEvent(pr, timer*r)
		cc := bb * math.Pow(1-pr, F*bPkts)
		ee := dd * math.Pow(1-pr, F*timer*r)
		dAlpha := p.G / tauA * ((1 - math.Pow(1-pr, tauA*r)) - alpha)
		dRt := -(rt-rc)/tau*a + p.RAI*r*cc + p.RAI*r*ee
		dRc := -rc*alpha/(2*tau)*a + (rt-rc)/2*r*bb + (rt-rc)/2*r*dd
		dq := (float64(c.N)*rc - c.C) / 8 // bytes per second

		alpha = min(max(alpha+dAlpha*dt, 0), 1)
		rt = min(max(rt+dRt*dt, p.MinRate), line)
		rc = min(max(rc+dRc*dt, p.MinRate), line)
		q = max(q+dq*dt, 0)

		if k >= from {
			sumQ += q
			sumR += rc
			res.QueueMin, res.QueueMax = min(res.QueueMin, q), max(res.QueueMax, q)
			res.RateMin, res.RateMax = min(res.RateMin, rc), max(res.RateMax, rc)
		}
	}
	n := float64(steps - from)
	res.QueueMean, res.RateMean, res.Alpha = sumQ/n, sumR/n, alpha
	return res, nil
}

// perEvent is p / ((1−p)^−x − 1): the rate of increase events per packet
// when an event comes every x unmarked packets; 1/x without marks.
func perEvent(p, x float64) float64 {
	if x <= 0 {
		return 0
	}
	den := math.Expm1(-x * math.Log1p(-p))
	if p == 0 || den == 0 {
		return 1 / x
	}
	if math.IsInf(den, 1) {
		return 0
	}
	return p / den
}

// SteadyState is the mean queue (bytes) and per-flow rate (bit/s) n flows
// of DCQCN with params settle to through a bottleneck of c bit/s marking
// with red, the feedback taking delay: the model run for 300 ms, the last
// 100 ms averaged.
func SteadyState(n int, c float64, params dcqcn.Params, red RED, delay time.Duration) (queueBytes, ratePerFlow float64, err error) {
	r, err := Run(Config{N: n, C: c, Params: params, RED: red, Delay: delay})
	return r.QueueMean, r.RateMean, err
}
