package emu

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
)

// TestRandomPlacementsAreExact draws runs where the graph's new bugs would
// live: stars (some with GPUs) and spine-leafs (one or two spines, so
// ECMP; blocking and not), one to three jobs of either algorithm on shared
// or disjoint host NICs (rings also on GPUs) with staggered starts, random dtypes, windows and message lengths,
// and netem loss, reordering and duplication on every link, plus a drop on
// a named link. Every job of every run must end bit-exact. Each case's
// seed is printed; a failing one replays alone with -run and its seed.
func TestRandomPlacementsAreExact(t *testing.T) {
	cases := 100
	if testing.Short() {
		cases = 16
	}
	for seed := uint64(1); seed <= uint64(cases); seed++ {
		cfg, desc := randomPlacement(t, seed)
		res, err := Run(cfg)
		require.NoError(t, err, "seed %d: %s", seed, desc)
		for _, j := range res.Jobs {
			require.True(t, j.Exact, "seed %d: %s: job %s %+v", seed, desc, j.Name, j.Mismatch)
		}
		t.Logf("seed %d: %s: %d jobs exact, %d retransmissions", seed, desc, len(res.Jobs), res.Retransmissions)
	}
}

func randomPlacement(t *testing.T, seed uint64) (Config, string) {
	rng := rand.New(rand.NewPCG(seed, 0xC0FFEE))
	cfg := DefaultConfig()
	cfg.Seed, cfg.Timeout = seed, uint8(8+rng.IntN(3))
	cfg.MaxVirtual = 30 * time.Second
	link := topo.LinkParams{Rate: 10e9, Latency: time.Microsecond}
	var tp *topo.Topology
	var err error
	var groups [][]string // hosts under one switch (NetReduce needs its ranks in one)
	var gpuSlots []string // ranks a ring may also take: GPUs of the star's hosts
	if rng.IntN(2) == 0 {
		n := 4 + rng.IntN(5)
		if g := rng.IntN(4); g >= 2 {
			var spec *topo.Spec
			if spec, err = topo.ParseFlag(fmt.Sprintf("star:hosts=%d,gpus=%d,intra=100G,alpha=500ns", n, g)); err == nil {
				tp, err = spec.Build(link)
			}
			for h := range n {
				for i := range g {
					gpuSlots = append(gpuSlots, fmt.Sprintf("h%d:gpu%d", h, i))
				}
			}
		} else {
			tp, err = topo.Star(n, link)
		}
		groups = [][]string{hostNames(0, n)}
	} else {
		leaves, per, spines := 2+rng.IntN(2), 2+rng.IntN(3), 1+rng.IntN(2)
		up := link
		up.Rate = []float64{10e9, 20e9, 40e9}[rng.IntN(3)]
		tp, err = topo.SpineLeaf(leaves, per, spines, link, up)
		for l := range leaves {
			groups = append(groups, hostNames(l*per, per))
		}
	}
	require.NoError(t, err)
	cfg.Topology = tp
	all := hostNames(0, len(tp.Hosts()))
	jobs := 1 + rng.IntN(3)
	desc := fmt.Sprintf("%s of %d hosts", tp.Kind, len(all))
	for j := range jobs {
		js := JobSpec{Name: fmt.Sprintf("j%d", j), Start: time.Duration(rng.IntN(3)) * 20 * time.Microsecond,
			TensorBytes: int64(16+rng.IntN(240)) << 10, MsgLen: []int{1, 4, 16, 170}[rng.IntN(4)], Window: 1 + rng.IntN(4)}
		d := tensorDType(t, []string{"f32", "i32", "f16"}[rng.IntN(3)])
		js.DType = &d
		pool := all
		if rng.IntN(2) == 0 {
			js.Mode, pool = NetReduce, groups[rng.IntN(len(groups))]
		} else {
			js.Mode = Ring
		}
		switch {
		case js.Mode == Ring && len(gpuSlots) > 0 && rng.IntN(3) > 0:
			// A run of GPUs in host order (most hops on an interconnect),
			// or GPUs and NICs mixed at random.
			k := 2 + rng.IntN(min(len(gpuSlots), 12)-1)
			if rng.IntN(2) == 0 {
				at := rng.IntN(len(gpuSlots) - k + 1)
				js.Ranks = append(js.Ranks, gpuSlots[at:at+k]...)
				break
			}
			// Per host its NIC or its GPUs: a NIC rank and a GPU rank of
			// one host share the NIC, and a hop between them would go
			// from the NIC to itself (refused as having no path).
			pool = nil
			for h, name := range all {
				if rng.IntN(2) == 0 {
					pool = append(pool, name)
					continue
				}
				for _, g := range gpuSlots {
					if strings.HasPrefix(g, fmt.Sprintf("h%d:", h)) {
						pool = append(pool, g)
					}
				}
			}
			fallthrough
		default:
			perm := rng.Perm(len(pool))
			k := 2 + rng.IntN(min(len(pool), 12)-1)
			for _, i := range perm[:k] {
				js.Ranks = append(js.Ranks, pool[i])
			}
		}
		cfg.Jobs = append(cfg.Jobs, js)
		desc += fmt.Sprintf("; %s %s %s on %s", js.Name, js.Mode, d, strings.Join(js.Ranks, ","))
	}
	n, err := faults.ParseNetem([]string{"", "loss 0.3%", "loss 0.3% reorder 2% gap 3 duplicate 1%"}[rng.IntN(3)])
	require.NoError(t, err)
	cfg.Netem = n
	names := tp.DirectionNames()
	ev, err := faults.Parse(fmt.Sprintf("drop link=%s class=data nth=%d", names[rng.IntN(len(names))], 1+rng.IntN(5)))
	require.NoError(t, err)
	cfg.Events = []faults.Event{ev}
	return cfg, desc + "; " + ev.Spec
}

func hostNames(from, n int) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = fmt.Sprintf("h%d", from+i)
	}
	return s
}
