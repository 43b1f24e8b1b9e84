package emu

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/commmodel"
	"github.com/inaemu/inaemu/emu/topo"
)

// The stages of NetReduce's Appendix A schemes that run in packet mode
// today, against the model (emu/commmodel) where its assumptions hold
// (bandwidth-bound: 16 MiB per job): FR, one ring over all P GPUs host by
// host (Eq. 1), and the inter-machine stage of PN (n NetReduce rings, GPU i
// of every machine on ring i, sharing each machine's NIC: α + M/B_inter,
// Eq. 3's middle term), of TA (a ring of the machines' first GPUs,
// 2(m-1)α + 2(m-1)/m·M/B_inter) and of PR (n rings of the machines). B_inter
// is the NIC's goodput: 10 Gbit/s × payload/(payload + 58 B of RoCEv2
// headers and ICRC + 24 B of preamble, FCS and gap); α is the emulator's
// measured cost of one step (a one-element job's time over its steps).
// Each agrees within 5 %.
func TestSchemeStagesAgreeWithModel(t *testing.T) {
	const hosts, n = 4, 2
	spec, err := topo.ParseFlag(fmt.Sprintf("star:hosts=%d,gpus=%d,intra=300G,alpha=1us", hosts, n))
	require.NoError(t, err)
	tp, err := spec.Build(tenG())
	require.NoError(t, err)
	gpu := func(h, g int) string { return fmt.Sprintf("h%d:gpu%d", h, g) }
	var fr []string
	rings := make([][]string, n)
	for h := range hosts {
		for g := range n {
			fr = append(fr, gpu(h, g))
			rings[g] = append(rings[g], gpu(h, g))
		}
	}
	run := func(bytes int64, jobs ...JobSpec) int64 {
		t.Helper()
		cfg := DefaultConfig()
		cfg.Topology, cfg.TensorBytes, cfg.Seed, cfg.Jobs = tp, bytes, 1, jobs
		var end int64
		for _, j := range runOK(t, cfg).Jobs {
			end = max(end, j.StartNS+j.VirtualNS)
		}
		return end
	}
	const M = 16 << 20
	bInter := 10e9 / 8 * 1024 / (1024 + 58 + 24)
	P, m := hosts*n, hosts
	for _, c := range []struct {
		name  string
		jobs  func(mode Mode) []JobSpec
		mode  Mode
		bytes int64   // per job
		steps float64 // α's in the model's time
		model func(alpha float64) float64
	}{
		{"fr (Eq. 1)", func(mode Mode) []JobSpec { return []JobSpec{{Name: "fr", Mode: mode, Ranks: fr}} }, Ring, M, float64(2 * (P - 1)),
			func(a float64) float64 {
				return commmodel.Eval(commmodel.FR, commmodel.Params{GPUs: P, PerHost: n, Alpha: a, Size: M, BIntra: 300e9 / 8, BInter: bInter, TAForm: commmodel.Closed}).Total
			}},
		{"pn's inter-machine stage", func(mode Mode) []JobSpec {
			var js []JobSpec
			for g := range n {
				js = append(js, JobSpec{Name: fmt.Sprint("ring", g), Mode: mode, Ranks: rings[g]})
			}
			return js
		}, NetReduce, M / n, 1, func(a float64) float64 { return a + M/bInter }},
		{"ta's inter-machine stage", func(mode Mode) []JobSpec { return []JobSpec{{Name: "masters", Mode: mode, Ranks: rings[0]}} }, Ring, M, float64(2 * (m - 1)),
			func(a float64) float64 { return float64(2*(m-1))*a + 2*float64(m-1)/float64(m)*M/bInter }},
		{"pr's inter-machine stage", func(mode Mode) []JobSpec {
			var js []JobSpec
			for g := range n {
				js = append(js, JobSpec{Name: fmt.Sprint("ring", g), Mode: mode, Ranks: rings[g]})
			}
			return js
		}, Ring, M / n, float64(2 * (m - 1)), func(a float64) float64 { return float64(2*(m-1))*a + 2*float64(m-1)/float64(m)*M/bInter }},
	} {
		t.Run(c.name, func(t *testing.T) {
			jobs := c.jobs(c.mode)
			for i := range jobs {
				jobs[i].TensorBytes = c.bytes
			}
			got := float64(run(0, jobs...)) / 1e9
			tiny := c.jobs(c.mode)
			for i := range tiny {
				tiny[i].TensorBytes = int64(4 * len(tiny[i].Ranks)) // an element per rank
			}
			alpha := float64(run(0, tiny...)) / 1e9 / c.steps
			want := c.model(alpha)
			t.Logf("emulated %.3f ms, model %.3f ms (α = %.2f µs measured), ratio %.4f", got*1e3, want*1e3, alpha*1e6, got/want)
			assert.InDelta(t, 1, got/want, 0.05)
		})
	}
}
