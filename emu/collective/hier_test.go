package collective

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/tensor"
)

// refDim is a dimension as the reference sees it.
type refDim struct {
	size int
	kind string // ring, fc or switch
}

// refHierElem is element e's all-reduce in the order a hierarchical
// all-reduce sums it, written from the algorithms' definitions alone:
// every rank holds e at first; an RS stage on dimension d cuts the region
// the holders share into P equal blocks (block k: [lo+n·k/P,
// lo+n·(k+1)/P)), and the member at coordinate b, where b is e's block,
// ends holding e, summed over its group as the dimension's algorithm adds:
//
//   - ring: starting from member b+1's value, each next member round the
//     ring adds its own (b+2, ..., b+P = b);
//   - direct (fc): member 0's value, plus member 1's, ..., in coordinate
//     order;
//   - halving-doubling (switch): the butterfly, each step every member
//     adding its partner's (partner k xor P/2, then xor P/4, ..., 1).
//
// After the RS stages one rank holds e; the AG stages copy it, so every
// rank ends with that value.
func refHierElem[T float32 | int32](dims []refDim, order []int, lo, hi, e int, x func(rank int) T) T {
	n := 1
	for _, d := range dims {
		n *= d.size
	}
	stride := make([]int, len(dims))
	s := 1
	for i, d := range dims {
		stride[i], s = s, s*d.size
	}
	coord := func(r, d int) int { return r / stride[d] % dims[d].size }
	val := make([]T, n)
	hold := make([]bool, n)
	for r := range n {
		val[r], hold[r] = x(r), true
	}
	for _, d := range order {
		P := dims[d].size
		blk := -1
		for k := range P {
			if lo+(hi-lo)*k/P <= e && e < lo+(hi-lo)*(k+1)/P {
				blk = k
			}
		}
		nlo, nhi := lo+(hi-lo)*blk/P, lo+(hi-lo)*(blk+1)/P
		nval, nhold := make([]T, n), make([]bool, n)
		for r := range n {
			if !hold[r] || coord(r, d) != blk {
				continue
			}
			m := func(k int) int { return r + (((k%P)+P)%P-blk)*stride[d] }
			var acc T
			switch dims[d].kind {
			case "ring":
				acc = val[m(blk+1)]
				for i := 2; i <= P; i++ {
					acc = val[m(blk+i)] + acc
				}
			case "fc":
				acc = val[m(0)]
				for k := 1; k < P; k++ {
					acc += val[m(k)]
				}
			default:
				v := make([]T, P)
				for k := range P {
					v[k] = val[m(k)]
				}
				for dist := P / 2; dist >= 1; dist /= 2 {
					w := make([]T, P)
					for k := range P {
						w[k] = v[k] + v[k^dist]
					}
					v = w
				}
				acc = v[blk]
			}
			nval[r], nhold[r] = acc, true
		}
		val, hold, lo, hi = nval, nhold, nlo, nhi
	}
	for r := range n {
		if hold[r] {
			return val[r]
		}
	}
	panic("no rank holds the element")
}

// hierCase is a run of the hier job on a dims topology.
type hierCase struct {
	flag   string
	dims   []refDim
	dtype  tensor.DType
	elems  int
	chunks int
}

func hierConfig(t *testing.T, c hierCase) job.Config {
	cfg := job.DefaultConfig()
	cfg.Topology = flagTopo(t, c.flag)
	cfg.Mode, cfg.DType, cfg.Seed = Hier, c.dtype, 11
	cfg.Workers = len(cfg.Topology.Hosts())
	cfg.TensorBytes = int64(c.elems * c.dtype.Size())
	cfg.MsgLen, cfg.MTU = 2, 256 // several messages per block
	cfg.Hier = &job.Hier{Chunks: c.chunks}
	return cfg
}

// runHier runs cfg and returns each rank's data as the network left it,
// and the run's result.
func runHier(t *testing.T, cfg job.Config) ([][]byte, *job.Result) {
	t.Helper()
	require.NoError(t, cfg.Validate())
	u := startJob(t, cfg)
	res := u.Loop()
	require.NoError(t, u.Err())
	require.Len(t, res.Jobs, 1)
	hj := u.Jobs[0].Alg.(*hierJob)
	require.Nil(t, hj.Check())
	out := make([][]byte, len(hj.ranks))
	for i, hr := range hj.ranks {
		out[i] = hr.data
	}
	return out, res
}

// checkHierRef compares every rank's data with refHierElem under the
// baseline order (RS dim 1..D) for every element.
func checkHierRef(t *testing.T, c hierCase, data [][]byte, seed uint64) {
	t.Helper()
	n := len(data)
	in := make([][]byte, n)
	for r := range n {
		in[r] = make([]byte, c.elems*c.dtype.Size())
		s := workload.NewStream(c.dtype, workload.Pattern{}, r, seed)
		s.Fill(in[r])
	}
	var order []int
	for d, dm := range c.dims {
		if dm.size > 1 {
			order = append(order, d)
		}
	}
	for ch := range c.chunks {
		lo, hi := c.elems*ch/c.chunks, c.elems*(ch+1)/c.chunks
		for e := lo; e < hi; e++ {
			var want uint32
			switch c.dtype {
			case tensor.F32:
				v := refHierElem(c.dims, order, lo, hi, e, func(r int) float32 {
					return math.Float32frombits(binary.LittleEndian.Uint32(in[r][4*e:]))
				})
				want = math.Float32bits(v)
			case tensor.I32:
				want = uint32(refHierElem(c.dims, order, lo, hi, e, func(r int) int32 {
					return int32(binary.LittleEndian.Uint32(in[r][4*e:]))
				}))
			}
			for r := range n {
				require.Equal(t, want, binary.LittleEndian.Uint32(data[r][4*e:]), "rank %d element %d (chunk %d)", r, e, ch)
			}
		}
	}
}

// TestHierMatchesTheReference: every rank of a hierarchical all-reduce
// ends with every element summed in the order the schedule defines, bit
// for bit, for float32 and int32, on ring, full-mesh and switch
// dimensions, one chunk and several.
func TestHierMatchesTheReference(t *testing.T) {
	for _, c := range []hierCase{
		{flag: "dims:4x4,kinds=ring/switch", dims: []refDim{{4, "ring"}, {4, "switch"}}, dtype: tensor.F32, elems: 1000, chunks: 1},
		{flag: "dims:4x4,kinds=ring/switch", dims: []refDim{{4, "ring"}, {4, "switch"}}, dtype: tensor.I32, elems: 1000, chunks: 3},
		{flag: "dims:4x2x2,kinds=fc/ring/switch", dims: []refDim{{4, "fc"}, {2, "ring"}, {2, "switch"}}, dtype: tensor.F32, elems: 777, chunks: 4},
		{flag: "dims:8x2,kinds=switch/fc", dims: []refDim{{8, "switch"}, {2, "ring"}}, dtype: tensor.F32, elems: 4096, chunks: 2},
		{flag: "dims:5x3,kinds=ring/ring", dims: []refDim{{5, "ring"}, {3, "ring"}}, dtype: tensor.I32, elems: 300, chunks: 2},
		{flag: "dims:2x4x1,kinds=ring/fc/switch", dims: []refDim{{2, "ring"}, {4, "fc"}, {1, "switch"}}, dtype: tensor.F32, elems: 64, chunks: 8},
	} {
		t.Run(c.flag+"/"+c.dtype.String(), func(t *testing.T) {
			cfg := hierConfig(t, c)
			data, _ := runHier(t, cfg)
			checkHierRef(t, c, data, cfg.Seed)
		})
	}
}

// TestHierSurvivesFaults: with loss, corruption, duplication and
// reordering on every link the job ends exact (go-back-N resends what
// was lost), bit for bit as without faults.
func TestHierSurvivesFaults(t *testing.T) {
	c := hierCase{flag: "dims:4x2,kinds=ring/switch", dims: []refDim{{4, "ring"}, {2, "switch"}}, dtype: tensor.F32, elems: 2000, chunks: 3}
	for _, nm := range []struct {
		name  string
		netem faults.Netem
	}{
		{"loss", faults.Netem{Loss: 0.02}},
		{"corrupt", faults.Netem{Corrupt: 0.02}},
		{"duplicate", faults.Netem{Duplicate: 0.05}},
		{"reorder", faults.Netem{Reorder: 0.1, Delay: 5e3}},
	} {
		t.Run(nm.name, func(t *testing.T) {
			cfg := hierConfig(t, c)
			cfg.Netem = nm.netem
			cfg.Timeout = 8
			data, res := runHier(t, cfg)
			checkHierRef(t, c, data, cfg.Seed)
			f := res.Faults
			require.NotZero(t, f.Lost+f.Corrupted+f.Duplicated+f.Reordered, "the faults happened: %+v", f)
			if nm.name == "loss" || nm.name == "corrupt" {
				require.NotZero(t, res.Retransmissions, "go-back-N resent what was lost")
			}
		})
	}
}
