package collective

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/tensor"
)

// refINAElem is element e's all-reduce when a chunk reduce-scatters
// along rs (ring dimensions here: each holder's block summed from the
// next member's value round the ring, as refHierElem's ring case) and
// then all-reduces along ina in its switch: NetReduce's sum of the
// group's values in rank (coordinate) order, member 0's plus member
// 1's, ..., on every member; the AG stages then copy it everywhere.
func refINAElem[T float32 | int32](dims []refDim, rs []int, ina, lo, hi, e int, x func(rank int) T) T {
	n, stride := 1, make([]int, len(dims))
	for i, d := range dims {
		stride[i], n = n, n*d.size
	}
	coord := func(r, d int) int { return r / stride[d] % dims[d].size }
	val, hold := make([]T, n), make([]bool, n)
	for r := range n {
		val[r], hold[r] = x(r), true
	}
	for _, d := range rs {
		P := dims[d].size
		blk := 0
		for k := range P {
			if lo+(hi-lo)*k/P <= e && e < lo+(hi-lo)*(k+1)/P {
				blk = k
			}
		}
		nval, nhold := make([]T, n), make([]bool, n)
		for r := range n {
			if !hold[r] || coord(r, d) != blk {
				continue
			}
			m := func(k int) int { return r + (((k%P)+P)%P-blk)*stride[d] }
			acc := val[m(blk+1)]
			for i := 2; i <= P; i++ {
				acc = val[m(blk+i)] + acc
			}
			nval[r], nhold[r] = acc, true
		}
		val, hold = nval, nhold
		lo, hi = lo+(hi-lo)*blk/P, lo+(hi-lo)*(blk+1)/P
	}
	for r := range n {
		if hold[r] {
			base := r - coord(r, ina)*stride[ina]
			acc := val[base]
			for k := 1; k < dims[ina].size; k++ {
				acc += val[base+k*stride[ina]]
			}
			return acc
		}
	}
	panic("no rank holds the element")
}

// TestHierINA: on dims:4x4 with dimension 2 an ina switch, every chunk's
// AR stage on it is one NetReduce aggregation per group (four rings, one
// per switch), every rank ends with every element as the reference sums
// it, f32 and i32, baseline and Themis's scheduler, and under loss; the
// ina dimension carries each AR stage's s once up per NPU (the switch
// sends it down), where Halving-Doubling would carry 2(P-1)/P·s.
func TestHierINA(t *testing.T) {
	dims := []refDim{{4, "ring"}, {4, "ina"}}
	for _, tc := range []struct {
		name  string
		dtype tensor.DType
		sched string
		loss  float64
	}{
		{"f32/baseline", tensor.F32, "baseline", 0},
		{"i32/baseline", tensor.I32, "baseline", 0},
		{"f32/themis", tensor.F32, "themis", 0},
		{"i32/themis/loss", tensor.I32, "themis", 0.02},
		{"f32/baseline/loss", tensor.F32, "baseline", 0.02},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := hierCase{flag: "dims:4x4,kinds=ring/switch,links=10G/40G", dims: dims, dtype: tc.dtype, elems: 3001, chunks: 4}
			cfg := hierConfig(t, c)
			cfg.Hier.Scheduler, cfg.Hier.INADims = tc.sched, []int{2}
			if tc.loss > 0 {
				cfg.Netem, cfg.Timeout = faults.Netem{Loss: tc.loss}, 8
			}
			data, res := runHier(t, cfg)
			if tc.loss > 0 {
				require.NotZero(t, res.Faults.Lost)
				require.NotZero(t, res.Retransmissions)
			}
			rep := res.Jobs[0].Hier
			require.NotNil(t, rep)
			assert.Equal(t, "ina", rep.Dims[1].Kind)
			n := len(data)
			in := make([][]byte, n)
			for r := range n {
				in[r] = make([]byte, c.elems*4)
				workload.NewStream(c.dtype, workload.Pattern{}, r, cfg.Seed).Fill(in[r])
			}
			var results int64 // the switches' results the AR stages want (baseline: RS1 then AR2)
			sawAR := 0
			for ch, s := range rep.Schedule {
				var rs []int
				ina := -1
				for _, f := range strings.Fields(s) {
					switch {
					case strings.HasPrefix(f, "RS"):
						rs = append(rs, int(f[2]-'1'))
					case strings.HasPrefix(f, "AR"):
						ina = int(f[2] - '1')
					}
				}
				lo, hi := c.elems*ch/c.chunks, c.elems*(ch+1)/c.chunks
				if ina < 0 {
					continue // Themis may put the ina dimension first: a plain switch then
				}
				require.Equal(t, 1, ina, s)
				sawAR++
				for e := lo; e < hi; e++ {
					var want uint32
					switch c.dtype {
					case tensor.F32:
						want = math.Float32bits(refINAElem(dims, rs, ina, lo, hi, e, func(r int) float32 {
							return math.Float32frombits(binary.LittleEndian.Uint32(in[r][4*e:]))
						}))
					default:
						want = uint32(refINAElem(dims, rs, ina, lo, hi, e, func(r int) int32 {
							return int32(binary.LittleEndian.Uint32(in[r][4*e:]))
						}))
					}
					for r := range n {
						require.Equal(t, want, binary.LittleEndian.Uint32(data[r][4*e:]), "rank %d element %d (chunk %d, %s)", r, e, ch, s)
					}
				}
				// The AR stage's results: one per message and member, a
				// message one packet of the MTU less the INA header.
				per := (cfg.MTU - netreduce.HeaderLen("")) / 4 * 4
				for blk := range 4 {
					b := (lo + (hi-lo)*(blk+1)/4 - (lo + (hi-lo)*blk/4)) * 4
					results += int64(4 * ((b + per - 1) / per))
				}
			}
			require.NotZero(t, sawAR, "some chunk ran an AR stage")
			// Every byte sent up came back down summed, on every NPU;
			// the ring dimension runs no AR.
			assert.Equal(t, rep.Dims[1].ARUpBytes, rep.Dims[1].ARDownBytes)
			assert.NotZero(t, rep.Dims[1].ARUpBytes)
			assert.Zero(t, rep.Dims[0].ARUpBytes+rep.Dims[0].ARDownBytes)
			if tc.sched == "baseline" {
				// RS1 AR2 AG1 for every chunk: on dimension 2 each NPU
				// sends its partial s (a quarter of the chunk) up once,
				// and the four members of a group hold the same quarter:
				// 16 NPUs send 4x the tensor's bytes. The same comes down
				// (the switch's results).
				assert.Equal(t, int64(4*c.elems*4), rep.Dims[1].PayloadBytes)
				assert.Equal(t, int64(4*c.elems*4), rep.Dims[1].ARUpBytes)
				assert.Equal(t, []string{"RS1 AR2 AG1"}, uniq(rep.Schedule))
				if tc.loss == 0 {
					assert.Equal(t, uint64(results), res.Switch.Emitted, "the switches summed every message")
				}
			}
		})
	}
}

func uniq(s []string) []string {
	var out []string
	for _, x := range s {
		if len(out) == 0 || out[len(out)-1] != x {
			out = append(out, x)
		}
	}
	return out
}

// TestHierINARefusals: an ina dimension must be a switch dimension of
// the topology, needs schedule consistency, and an AR stage is taken on
// an ina dimension of an all-reduce only; each refusal is one line.
func TestHierINARefusals(t *testing.T) {
	c := hierCase{flag: "dims:4x4,kinds=ring/switch", dims: []refDim{{4, "ring"}, {4, "switch"}}, dtype: tensor.F32, elems: 1000, chunks: 2}
	for _, tc := range []struct {
		ina   []int
		local bool
		want  string
	}{
		{[]int{1}, false, "--ina-dims 1: dimension 1 is a ring"},
		{[]int{3}, false, "--ina-dims 3: the topology has dimensions 1..2"},
		{[]int{2}, true, "needs --consistency on"},
	} {
		cfg := hierConfig(t, c)
		cfg.Hier.INADims, cfg.Hier.LocalOrder = tc.ina, tc.local
		err := cfg.Validate()
		require.Error(t, err, tc.want)
		assert.Contains(t, err.Error(), tc.want)
		assert.NotContains(t, err.Error(), "\n")
	}
	dims := []hierDim{{kind: "ring", alg: algRing, size: 4, stride: 1}, {kind: kindINA, alg: algHD, size: 4, stride: 4}}
	st := []hierStage{{dim: 0}, {dim: 1, ar: true}, {dim: 0, ag: true}}
	require.NoError(t, checkSchedule(dims, st, "all-reduce"))
	assert.ErrorContains(t, checkSchedule(dims, st, "reduce-scatter"), "an AR stage belongs to an all-reduce")
	assert.ErrorContains(t, checkSchedule(dims, []hierStage{{dim: 1, ar: true}, {dim: 0}, {dim: 0, ag: true}}, "all-reduce"), "the AR where the last meets its AG")
	dims[1].kind = "switch"
	assert.ErrorContains(t, checkSchedule(dims, st, "all-reduce"), "an AR stage runs on an ina dimension only")
}
