package commmodel_test

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/commmodel"
)

// Two rows worked by hand from Eqs. (1)-(3) (M = 10^8 B, n = 8,
// B_inter = 12.5 GB/s): times in ms to the microsecond.
func TestWorkedRows(t *testing.T) {
	for _, r := range []struct {
		P                         int
		bIntra, alpha             float64
		fr, taClosed, taBrack, pn float64
	}{
		{32, 100e9, 1e-6, 15.562, 15.522, 13.991, 9.765},
		{1024, 15.75e9, 10e-6, 36.444, 40.797, 31.075, 19.261},
	} {
		p := commmodel.Params{GPUs: r.P, PerHost: 8, Alpha: r.alpha, Size: 1e8, BIntra: r.bIntra, BInter: 12.5e9, TAForm: commmodel.Closed}
		require.NoError(t, p.Validate())
		ms := func(s commmodel.Scheme, p commmodel.Params) float64 { return commmodel.Eval(s, p).Total * 1e3 }
		assert.InDelta(t, r.fr, ms(commmodel.FR, p), 5e-4)
		assert.InDelta(t, r.taClosed, ms(commmodel.TA, p), 5e-4)
		assert.InDelta(t, r.pn, ms(commmodel.PN, p), 5e-4)
		p.TAForm = commmodel.Bracketed
		assert.InDelta(t, r.taBrack, ms(commmodel.TA, p), 5e-4)
	}
}

// The stage-by-stage evaluation equals the paper's closed forms of (2)
// and (3), and the differences equal Eqs. (4) and (5), over random
// parameters (written out here from the paper, not from the package).
func TestClosedFormsAndDifferences(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		n := 1 << rng.IntN(5)
		P := n * (2 + rng.IntN(200))
		a := rng.Float64() * 100e-6
		M := 1e3 + rng.Float64()*1e9
		bA, bE := 1e9+rng.Float64()*200e9, 1e9+rng.Float64()*50e9
		p := commmodel.Params{GPUs: P, PerHost: n, Alpha: a, Size: M, BIntra: bA, BInter: bE, TAForm: commmodel.Closed}
		require.NoError(t, p.Validate())
		pf, nf, l := float64(P), float64(n), math.Log2(float64(n))
		ta := (nf*nf+3*nf*l-3*nf+2*pf)/nf*a + (4*(nf-1)*pf*bE+2*(pf-nf)*nf*bA)/(nf*pf*bA*bE)*M
		pn := (2*nf-1)*a + (2*(nf-1)*bE+nf*bA)/(nf*bA*bE)*M
		d4 := (2*pf/nf+3*l-nf-2)*a + ((pf-2*nf)*nf*bA+2*(nf-1)*pf*bE)/(nf*pf*bA*bE)*M
		d5 := (2*pf-2*nf-1)*a + ((pf-2)*nf*bA-2*(nf-1)*pf*bE)/(nf*pf*bA*bE)*M
		fr, gotTA, gotPN := commmodel.Eval(commmodel.FR, p).Total, commmodel.Eval(commmodel.TA, p).Total, commmodel.Eval(commmodel.PN, p).Total
		tol := 1e-9 * (fr + gotTA)
		assert.InDelta(t, ta, gotTA, tol, "Eq. (2) closed, P=%d n=%d", P, n)
		assert.InDelta(t, pn, gotPN, tol, "Eq. (3), P=%d n=%d", P, n)
		assert.InDelta(t, d4, gotTA-gotPN, tol, "Eq. (4), P=%d n=%d", P, n)
		assert.InDelta(t, d5, fr-gotPN, tol, "Eq. (5), P=%d n=%d", P, n)
	}
}

// "When n = 1, B_intra = B_inter = B, Eq. (3) reduces to ... α + M/B".
func TestPNOneGPU(t *testing.T) {
	p := commmodel.Params{GPUs: 16, PerHost: 1, Alpha: 3e-6, Size: 5e7, BIntra: 10e9, BInter: 10e9, TAForm: commmodel.Closed}
	assert.InDelta(t, 3e-6+5e7/10e9, commmodel.Eval(commmodel.PN, p).Total, 1e-15)
}

// With no per-hop latency, FR and PN trade places exactly at
// B_intra/B_inter = 2P(n-1)/(n(P-2)) (1.867 for P = 32, n = 8), below
// Eq. (6)'s 2.133.
func TestFRPNCrossover(t *testing.T) {
	exact, eq6 := commmodel.FRPNThreshold(32, 8)
	assert.InDelta(t, 1.8667, exact, 1e-4)
	assert.InDelta(t, 2.1333, eq6, 1e-4)
	p := commmodel.Params{GPUs: 32, PerHost: 8, Size: 1e8, BInter: 12.5e9, TAForm: commmodel.Closed}
	p.BIntra = 12.5e9 * exact * 0.999
	assert.Less(t, commmodel.Eval(commmodel.FR, p).Total, commmodel.Eval(commmodel.PN, p).Total, "just below: FR")
	p.BIntra = 12.5e9 * exact * 1.001
	assert.Greater(t, commmodel.Eval(commmodel.FR, p).Total, commmodel.Eval(commmodel.PN, p).Total, "just above: PN")
}

// PR (not modelled in the paper): PN's stages 1 and 3 around a ring of
// the P/n machines carrying all of M.
func TestPR(t *testing.T) {
	p := commmodel.Params{GPUs: 32, PerHost: 8, Alpha: 1e-6, Size: 1e8, BIntra: 100e9, BInter: 12.5e9, TAForm: commmodel.Closed}
	pr, pn := commmodel.Eval(commmodel.PR, p), commmodel.Eval(commmodel.PN, p)
	assert.Equal(t, pn.Stages[0], pr.Stages[0])
	assert.Equal(t, pn.Stages[2], pr.Stages[2])
	assert.InDelta(t, 2*3*1e-6+2*0.75*8e-3, pr.Stages[1], 1e-12)
}

func TestValidate(t *testing.T) {
	ok := commmodel.Params{GPUs: 32, PerHost: 8, Alpha: 0, Size: 1, BIntra: 1, BInter: 1, TAForm: commmodel.Closed}
	require.NoError(t, ok.Validate())
	for name, f := range map[string]func(*commmodel.Params){
		"ragged":      func(p *commmodel.Params) { p.GPUs = 30 },
		"one machine": func(p *commmodel.Params) { p.GPUs = 8 },
		"no GPUs":     func(p *commmodel.Params) { p.PerHost = 0 },
		"alpha":       func(p *commmodel.Params) { p.Alpha = -1 },
		"alpha NaN":   func(p *commmodel.Params) { p.Alpha = math.NaN() },
		"size":        func(p *commmodel.Params) { p.Size = 0 },
		"rate":        func(p *commmodel.Params) { p.BInter = math.Inf(1) },
		"form":        func(p *commmodel.Params) { p.TAForm = "other" },
	} {
		p := ok
		f(&p)
		assert.Error(t, p.Validate(), name)
	}
	assert.True(t, commmodel.PowerOfTwo(8))
	assert.False(t, commmodel.PowerOfTwo(6))
}

// TestExchangeModel: §VIII-D's terms at p = 4 and 8 (the spec's table):
// WA's β-term 6 and 11 n·β, the ring's 1.5 and 1.75; γ-terms 3, 7 and
// 0.75, 0.875; the tree over aggregator and workers one level more, the
// tree over the workers ceil(log2 p) levels (p = 5: 3, not log2 5).
func TestExchangeModel(t *testing.T) {
	for _, c := range []struct {
		p                                           int
		waB, ringB, waG, ringG, treeB, uni, workerB float64
	}{{4, 6, 1.5, 3, 0.75, 7, 8, 6}, {8, 11, 1.75, 7, 0.875, 12, 16, 11}, {5, 5 + math.Log2(5), 1.6, 4, 0.8, 8, 10, 8}} {
		e := commmodel.Exchange{Workers: c.p, Bytes: 1, Beta: 1, Gamma: 1}
		assert.InDelta(t, c.waB, commmodel.WA(e).Bandwidth, 1e-12)
		assert.InDelta(t, c.waG, commmodel.WA(e).Reduce, 1e-12)
		assert.InDelta(t, c.ringB, commmodel.RingExchange(e).Bandwidth, 1e-12)
		assert.InDelta(t, c.ringG, commmodel.RingExchange(e).Reduce, 1e-12)
		assert.InDelta(t, c.treeB, commmodel.WATree(e).Bandwidth, 1e-12)
		assert.InDelta(t, c.uni, commmodel.WAUnicast(e).Bandwidth, 1e-12)
		assert.InDelta(t, c.workerB, commmodel.WAWorkerTree(e).Bandwidth, 1e-12)
		a := commmodel.Exchange{Workers: c.p, Alpha: 1}
		assert.InDelta(t, 1+math.Log2(float64(c.p)), commmodel.WA(a).Latency, 1e-12)
		assert.InDelta(t, 2*float64(c.p-1), commmodel.RingExchange(a).Total, 1e-12)
	}
}
