package emu

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/commmodel"
	"github.com/inaemu/inaemu/emu/topo"
)

// schemeTopo is a star of hosts machines with gpus GPUs each.
func schemeTopo(t *testing.T, hosts, gpus int, intra string) *topo.Topology {
	t.Helper()
	spec, err := topo.ParseFlag(fmt.Sprintf("star:hosts=%d,gpus=%d,intra=%s,alpha=1us", hosts, gpus, intra))
	require.NoError(t, err)
	tp, err := spec.Build(tenG())
	require.NoError(t, err)
	return tp
}

// bInter is the model's B_inter for the emulator's 10G NICs: the goodput
// of RoCEv2/IPv4 WRITEs at MTU 1024, 10 Gbit/s × 1024/(1024 + 58 B of
// Ethernet, IPv4, UDP, BTH and ICRC + 24 B of preamble, FCS and gap).
const bInter = 10e9 / 8 * 1024 / (1024 + 58 + 24)

// modelStar is a star of machines×gpus on 10G links whose GPUs have an
// interconnect of bIntra bytes/s and step cost alpha.
func modelStar(t *testing.T, machines, gpus int, bIntra float64, alpha time.Duration) *topo.Topology {
	t.Helper()
	tp := schemeTopo(t, machines, gpus, "300G")
	for i := range tp.Nodes {
		if tp.Nodes[i].Kind == topo.KindHost {
			tp.Nodes[i].Intra = topo.Intra{Rate: bIntra * 8, Alpha: alpha}
		}
	}
	return tp
}

// schemeTime is the virtual time of one scheme job of every GPU of the
// topology.
func schemeTime(t *testing.T, tp *topo.Topology, mode Mode, bytes int64) float64 {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Topology, cfg.Workers, cfg.Mode, cfg.TensorBytes, cfg.Seed = tp, len(tp.Hosts()), mode, bytes, 1
	res := runOK(t, cfg)
	return float64(res.VirtualNS) / 1e9
}

// measuredAlpha is the emulator's cost of one ring step between machines:
// a ring over one GPU of each machine with one element per rank, its time
// over its 2(m-1) steps.
func measuredAlpha(t *testing.T, machines int) time.Duration {
	t.Helper()
	tp := modelStar(t, machines, 1, 300e9/8, 0)
	cfg := DefaultConfig()
	cfg.Topology, cfg.Workers, cfg.Mode, cfg.TensorBytes, cfg.Seed = tp, machines, Ring, int64(4*machines), 1
	res := runOK(t, cfg)
	return time.Duration(res.VirtualNS) / time.Duration(2*(machines-1))
}

// Appendix A's schemes, run whole in packet mode (intra-machine stages on
// the interconnect, inter-machine ones as RoCE frames through the switch),
// against the model (emu/commmodel) where its assumptions hold: bandwidth
// bound (16 MiB), the NIC the flat ring's bottleneck (B_intra above
// B_inter), α the emulator's measured cost of a ring step between machines
// and the interconnect's step cost set to the same. Each agrees within
// 5 %.
func TestSchemesAgreeWithModel(t *testing.T) {
	const M = 16 << 20
	alpha := measuredAlpha(t, 4)
	for _, sh := range []struct {
		machines, gpus int
		bIntra         float64
	}{{4, 2, 300e9 / 8}, {4, 4, 4 * bInter}} {
		tp := modelStar(t, sh.machines, sh.gpus, sh.bIntra, alpha)
		p := commmodel.Params{GPUs: sh.machines * sh.gpus, PerHost: sh.gpus, Alpha: alpha.Seconds(), Size: M,
			BIntra: sh.bIntra, BInter: bInter, TAForm: commmodel.Closed}
		for _, s := range commmodel.Schemes {
			t.Run(fmt.Sprintf("%dx%d/%s", sh.machines, sh.gpus, s), func(t *testing.T) {
				got := schemeTime(t, tp, Mode(s), M)
				want := commmodel.Eval(s, p).Total
				t.Logf("emulated %.3f ms, model %.3f ms (α = %v measured), ratio %.4f", got*1e3, want*1e3, alpha, got/want)
				assert.InDelta(t, 1, got/want, 0.05)
			})
		}
	}
}

// For P = 32 GPUs, 8 per machine, flat ring and parallel NetReduce trade
// places where the model says: at B_intra/B_inter = 2P(n-1)/(n(P-2)) ≈
// 1.87 (Eq. (5)'s bandwidth term; α moves it a little, so the point is
// the model's own with the measured α). The packet-mode crossing, found
// by bisection on emulated runs, is within 3 % of it; 15 % either side
// the faster scheme leads by the margin the model gives, within 5 %.
func TestFRPNWinnerFlips(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: 32-GPU runs")
	}
	const P, n, M = 32, 8, 8 << 20
	alpha := measuredAlpha(t, P/n)
	params := func(ratio float64) commmodel.Params {
		return commmodel.Params{GPUs: P, PerHost: n, Alpha: alpha.Seconds(), Size: M, BIntra: ratio * bInter, BInter: bInter, TAForm: commmodel.Closed}
	}
	model := func(ratio float64) (fr, pn float64) {
		p := params(ratio)
		return commmodel.Eval(commmodel.FR, p).Total, commmodel.Eval(commmodel.PN, p).Total
	}
	emulated := func(ratio float64) (fr, pn float64) {
		tp := modelStar(t, P/n, n, ratio*bInter, alpha)
		return schemeTime(t, tp, FR, M), schemeTime(t, tp, PN, M)
	}
	// crossing bisects [1, 3] for the ratio where pn stops being slower.
	crossing := func(times func(float64) (float64, float64), rounds int) float64 {
		lo, hi := 1.0, 3.0
		for range rounds {
			mid := (lo + hi) / 2
			if fr, pn := times(mid); pn > fr {
				lo = mid
			} else {
				hi = mid
			}
		}
		return (lo + hi) / 2
	}
	exact, _ := commmodel.FRPNThreshold(P, n)
	want := crossing(model, 50)
	got := crossing(emulated, 7) // to 1/128
	t.Logf("crossing at B_intra/B_inter = %.3f emulated, %.3f by the model with α = %v (%.3f without)", got, want, alpha, exact)
	require.InDelta(t, exact, want, 0.1)
	assert.InDelta(t, 1, got/want, 0.03)
	for _, f := range []float64{0.85, 1.15} {
		ratio := want * f
		fr, pn := emulated(ratio)
		mfr, mpn := model(ratio)
		t.Logf("B_intra/B_inter %.3f: fr %.3f ms, pn %.3f ms emulated; %.3f, %.3f ms by the model", ratio, fr*1e3, pn*1e3, mfr*1e3, mpn*1e3)
		assert.Equal(t, f > 1, pn < fr, "ratio %.3f: pn faster", ratio)
		assert.InDelta(t, mfr/mpn, fr/pn, 0.05*mfr/mpn)
	}
}
