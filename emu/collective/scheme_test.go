package collective

import (
	"encoding/binary"
	"fmt"
	"github.com/inaemu/inaemu/emu/job"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/tensor"
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

// schemeResults runs cfg and returns every GPU's result of its (one)
// scheme job, as the job held them when it checked them.
func schemeResults(t *testing.T, cfg job.Config) (*job.Result, [][]byte) {
	t.Helper()
	var got [][]byte
	schemeChecked = func(s *scheme) {
		for _, r := range s.res {
			got = append(got, append([]byte(nil), r...))
		}
	}
	defer func() { schemeChecked = nil }()
	res := runOK(t, cfg)
	return res, got
}

// Every GPU of every scheme ends with the sum in the scheme's order,
// computed here from the GPUs' tensors with Go's own arithmetic (float32
// sums left to right, int32 wrapping), independently of the job's check:
// machines of 1, 2 and 4 GPUs, 2 to 4 machines, f32, f16 and i32, tensors
// that do not divide evenly.
func TestSchemesExact(t *testing.T) {
	for _, sh := range []struct{ hosts, gpus int }{{4, 2}, {2, 4}, {3, 1}, {2, 8}} {
		tp := schemeTopo(t, sh.hosts, sh.gpus, "300G")
		for _, mode := range []job.Mode{PN, PR, TA, FR} {
			for _, d := range []tensor.DType{tensor.F32, tensor.I32, tensor.F16} {
				name := fmt.Sprintf("%dx%d/%s/%s", sh.hosts, sh.gpus, mode, d)
				t.Run(name, func(t *testing.T) {
					cfg := job.DefaultConfig()
					cfg.Topology, cfg.Workers, cfg.Mode, cfg.DType, cfg.Seed = tp, sh.hosts, mode, d, 7
					cfg.TensorBytes = int64(d.Size()) * (40_000 + 13)
					res, got := schemeResults(t, cfg)
					assert.Equal(t, string(mode), res.Mode)
					assert.Equal(t, sh.hosts*sh.gpus, res.Workers)
					if mode == FR {
						return // a ring job: TestRing* check its order
					}
					require.Len(t, got, sh.hosts*sh.gpus)
					if d == tensor.F16 {
						return // the job's own check only
					}
					want := schemeReference(mode, d, sh.hosts, sh.gpus, int(cfg.TensorBytes)/d.Size(), cfg.Seed)
					for g, r := range got {
						require.Equal(t, want, r, "GPU %d", g)
					}
				})
			}
		}
	}
}

// schemeReference is what every GPU of a scheme job of m machines × n
// GPUs must hold, elems elements of d (f32 or i32): the order of each
// scheme written out element by element.
func schemeReference(mode job.Mode, d tensor.DType, m, n, elems int, seed uint64) []byte {
	P := m * n
	x := make([][]byte, P) // GPU h*n+i is GPU i of machine h
	for g := range x {
		x[g] = make([]byte, elems*4)
		workload.Fill(d, workload.Random, x[g], g, seed)
	}
	val := func(g, e int) uint32 { return binary.LittleEndian.Uint32(x[g][4*e:]) }
	add := func(a, b uint32) uint32 {
		if d == tensor.I32 {
			return a + b
		}
		return math.Float32bits(math.Float32frombits(a) + math.Float32frombits(b))
	}
	piece := func(e int) int { // the piece element e is in
		for c := 0; c < n; c++ {
			if e < elems*(c+1)/n {
				return c
			}
		}
		panic("element out of range")
	}
	// machine is machine h's first-stage sum of element e.
	machine := func(h, e int) uint32 {
		c := piece(e)
		if mode == TA {
			t := make([]uint32, n)
			for i := range t {
				t[i] = val(h*n+i, e)
			}
			for dd := n / 2; dd >= 1; dd /= 2 {
				nt := make([]uint32, n)
				for i := range t {
					nt[i] = add(t[i], t[i^dd])
				}
				t = nt
			}
			return t[c]
		}
		acc := val(h*n+(c+1)%n, e)
		for k := 2; k <= n; k++ {
			acc = add(acc, val(h*n+(c+k)%n, e))
		}
		return acc
	}
	out := make([]byte, elems*4)
	for e := range elems {
		var sum uint32
		switch mode {
		case PN: // one switch: machines in rank order
			sum = machine(0, e)
			for h := 1; h < m; h++ {
				sum = add(sum, machine(h, e))
			}
		case PR, TA: // a ring over machines: chunk q starts at machine q
			lo, hi := 0, elems // the inter-machine job's tensor: a piece, or all
			if mode == PR {
				c := piece(e)
				lo, hi = elems*c/n, elems*(c+1)/n
			}
			q := 0
			for ; q < m-1 && e-lo >= (hi-lo)*(q+1)/m; q++ {
			}
			sum = machine(q, e)
			for i := 1; i < m; i++ {
				sum = add(sum, machine((q+i)%m, e))
			}
		}
		binary.LittleEndian.PutUint32(out[4*e:], sum)
	}
	return out
}

// The scheme's order is not the order of one ring or one switch over all
// GPUs: with f32 the results differ from a rank-order sum somewhere, and
// pn's from ta's, so the checks above would see an order mixed up.
func TestSchemeOrdersDiffer(t *testing.T) {
	const elems = 4096
	pn := schemeReference(PN, tensor.F32, 4, 4, elems, 7)
	ta := schemeReference(TA, tensor.F32, 4, 4, elems, 7)
	pr := schemeReference(PR, tensor.F32, 4, 4, elems, 7)
	flat := make([]byte, elems*4)
	for g := range 16 {
		b := make([]byte, elems*4)
		workload.Fill(tensor.F32, workload.Random, b, g, 7)
		if g == 0 {
			copy(flat, b)
		} else {
			tensor.Add(tensor.F32, flat, b)
		}
	}
	assert.NotEqual(t, pn, flat)
	assert.NotEqual(t, pn, ta)
	assert.NotEqual(t, pn, pr)
	assert.NotEqual(t, ta, pr)
}

// A result altered after the last stage is caught: WRONG, naming the GPU
// and element; and the job's check is the scheme's order, not the
// rank-order sum (a run whose stages summed in rank order would fail it).
func TestSchemeCheckCatchesWrongResults(t *testing.T) {
	tp := schemeTopo(t, 2, 4, "300G")
	for _, mode := range []job.Mode{PN, PR, TA} {
		cfg := job.DefaultConfig()
		cfg.Topology, cfg.Workers, cfg.Mode, cfg.Seed, cfg.TensorBytes = tp, 2, mode, 3, 4096*4
		schemeChecked = func(s *scheme) { s.res[5][4*1000] ^= 1 }
		res, err := job.Run(cfg)
		schemeChecked = nil
		require.NoError(t, err)
		require.False(t, res.Exact, "%s", mode)
		require.NotNil(t, res.Mismatch, "%s", mode)
		assert.Equal(t, 5, res.Mismatch.Rank)
		assert.Equal(t, int64(1000), res.Mismatch.Element)
	}
}

// Scheme jobs refuse what they cannot run, saying why.
func TestSchemeRefusals(t *testing.T) {
	tp := schemeTopo(t, 4, 2, "300G")
	six := schemeTopo(t, 2, 6, "300G")
	for _, c := range []struct {
		name  string
		tp    *topo.Topology
		ranks []string
		mode  job.Mode
		bytes int64
		want  string
	}{
		{"NICs", tp, []string{"h0", "h1"}, PN, 4096, `its ranks are GPUs, n on each machine (h0:gpu0, h0:gpu1, h1:gpu0, ...): rank 0 is "h0"`},
		{"uneven", tp, []string{"h0:gpu0", "h0:gpu1", "h1:gpu0"}, PN, 4096, "every machine takes the same number of GPUs: h0 has 2, h1 has 1"},
		{"one machine", tp, []string{"h0:gpu0", "h0:gpu1"}, PR, 4096, "its GPUs are all on h0; the scheme runs across at least two machines"},
		{"ta not a power of two", six, []string{"h0:gpu0", "h0:gpu1", "h0:gpu2", "h1:gpu0", "h1:gpu1", "h1:gpu2"}, TA, 4096, "3 GPUs per machine: ta's reduce and broadcast"},
		{"tiny", tp, []string{"h0:gpu0", "h0:gpu1", "h1:gpu0", "h1:gpu1", "h2:gpu0", "h2:gpu1"}, PR, 20, "--tensor 5 elements: too small to cut into 2 pieces of at least 3 elements"},
	} {
		cfg := job.DefaultConfig()
		cfg.Topology = c.tp
		cfg.Jobs = []job.JobSpec{{Name: "s", Mode: c.mode, Ranks: c.ranks, TensorBytes: c.bytes}}
		_, err := job.Run(cfg)
		var ce *job.ConfigError
		require.ErrorAs(t, err, &ce, c.name)
		assert.Contains(t, err.Error(), "job s: mode "+string(c.mode)+": "+c.want, c.name)
	}
}

// Every scheme recovers from loss, duplicates, reordering and corruption
// on its machines' links (the inter-machine jobs' go-back-N) and ends
// exact; and parallel NetReduce on a spine-leaf fabric aggregates each of
// its rings across the racks.
func TestSchemesUnderFaults(t *testing.T) {
	star := schemeTopo(t, 4, 2, "300G")
	spec, err := topo.ParseFlag("spine-leaf:leaves=2,hosts=2,spines=1,uplink=40G,gpus=2,intra=300G,alpha=1us")
	require.NoError(t, err)
	racks, err := spec.Build(tenG())
	require.NoError(t, err)
	for _, c := range []struct {
		tp   *topo.Topology
		mode job.Mode
	}{{star, PN}, {star, PR}, {star, TA}, {star, FR}, {racks, PN}, {racks, TA}} {
		t.Run(fmt.Sprintf("%s/%s", c.tp.Kind, c.mode), func(t *testing.T) {
			cfg := job.DefaultConfig()
			cfg.Topology, cfg.Workers, cfg.Mode, cfg.Seed, cfg.TensorBytes = c.tp, 4, c.mode, 5, 256<<10
			cfg.Netem = faults.Netem{Loss: 0.01, Duplicate: 0.01, Corrupt: 0.005, Reorder: 0.02, Delay: 2 * time.Microsecond}
			cfg.Timeout = 8 // 1 ms: a tail loss costs a timeout
			res := runOK(t, cfg)
			assert.NotZero(t, res.Retransmissions)
			assert.NotZero(t, res.Faults.Lost)
			assert.NotZero(t, res.Faults.Corrupted)
			if c.mode == PN {
				assert.NotZero(t, netreduce.StatsOf(res.Switch).Aggregations)
			}
		})
	}
}
