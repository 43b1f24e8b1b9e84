package flow

import (
	"fmt"

	"github.com/inaemu/inaemu/emu/themis"
)

// Method is one of the paper's collective schedulers (Table 3): an
// inter-dimension scheduler with an intra-dimension policy.
type Method struct {
	Name      string
	Scheduler themis.Scheduler
	Policy    themis.Policy
}

// The paper's three executed methods (Table 3; Ideal is a formula, see
// IdealSeconds).
var (
	Baseline   = Method{"baseline", themis.Baseline, themis.FIFO}
	ThemisFIFO = Method{"themis+fifo", themis.Themis, themis.FIFO}
	ThemisSCF  = Method{"themis+scf", themis.Themis, themis.SCF}
)

// Methods are Baseline, ThemisFIFO and ThemisSCF, in Table 3's order.
func Methods() []Method { return []Method{Baseline, ThemisFIFO, ThemisSCF} }

// Setup is one all-reduce experiment's parameters besides the platform,
// the size and the method.
type Setup struct {
	Chunks       int  // chunks per collective (the paper: 64)
	ChargeAK     bool // the scheduler's tracker starts at A_K (Algorithm 1 line 2)
	LoadRSOnly   bool // the tracker charges the RS half only (ASTRA-sim)
	ActivePerDim int  // 0: DefaultActivePerDim
	NoFixedDelay bool // execute without the stages' fixed delays
}

// AllReduce schedules an all-reduce of bytesPerNPU bytes per NPU on t with
// m and runs it.
func AllReduce(t themis.Topology, bytesPerNPU float64, m Method, s Setup) (Result, error) {
	scheds, _, err := themis.Schedule(t, themis.AllReduce, bytesPerNPU, themis.Config{
		Scheduler: m.Scheduler, Chunks: s.Chunks, ChargeAK: s.ChargeAK, LoadRSOnly: s.LoadRSOnly})
	if err != nil {
		return Result{}, fmt.Errorf("flow: %s: %w", m.Name, err)
	}
	return Run(t, scheds, Config{ActivePerDim: s.ActivePerDim, Policy: m.Policy, NoFixedDelay: s.NoFixedDelay})
}

// IdealSeconds is the time of an all-reduce of bytesPerNPU per NPU with
// every dimension's bandwidth used in full: the 2S(N−1)/N bytes each NPU
// must send whatever the schedule, over Σ BW. (Table 3's "collective size
// / total BW" read with the bytes an all-reduce really sends.)
func IdealSeconds(t themis.Topology, bytesPerNPU float64) float64 {
	n := float64(t.NPUs())
	var bw float64
	for _, d := range t {
		bw += d.BW
	}
	return 2 * bytesPerNPU * (n - 1) / n / bw
}
