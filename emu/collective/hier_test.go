package collective

import (
	"encoding/binary"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/themis"
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
	var order []int
	for d, dm := range c.dims {
		if dm.size > 1 {
			order = append(order, d)
		}
	}
	orders := make([][]int, c.chunks)
	for i := range orders {
		orders[i] = order
	}
	checkHierOrders(t, c, data, seed, orders)
}

// checkHierOrders compares every rank's data with refHierElem, chunk ch
// reduce-scattered along orders[ch] (0-based dimensions).
func checkHierOrders(t *testing.T, c hierCase, data [][]byte, seed uint64, orders [][]int) {
	t.Helper()
	n := len(data)
	in := make([][]byte, n)
	for r := range n {
		in[r] = make([]byte, c.elems*c.dtype.Size())
		s := workload.NewStream(c.dtype, workload.Pattern{}, r, seed)
		s.Fill(in[r])
	}
	for ch := range c.chunks {
		order := orders[ch]
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

// rsOrder reads a chunk's RS order from the report's schedule ("RS2 RS1
// AG1 AG2" is [1, 0]), checking that its AG stages reverse it.
func rsOrder(t *testing.T, sched string) []int {
	t.Helper()
	var rs, ag []int
	for _, f := range strings.Fields(sched) {
		d, err := strconv.Atoi(f[2:])
		require.NoError(t, err, sched)
		if strings.HasPrefix(f, "RS") {
			rs = append(rs, d-1)
		} else {
			require.True(t, strings.HasPrefix(f, "AG"), sched)
			ag = append(ag, d-1)
		}
	}
	require.Equal(t, len(rs), len(ag), sched)
	for i := range rs {
		require.Equal(t, rs[i], ag[len(ag)-1-i], "AG reverses RS: %s", sched)
	}
	return rs
}

// TestHierThemis: on a platform whose second dimension is four times as
// fast as its first, Themis's scheduler gives chunks other orders than
// the baseline's, every rank still ends with every element summed in its
// chunk's order, bit for bit; each dimension carries what the orders put
// on it, 2(P_K-1)/P_K · S/Q per NPU for a chunk of S whose earlier RS
// stages' sizes multiply to Q (Themis §3.1), exactly; and the job is
// faster than the baseline's (the paper's point: the baseline leaves the
// fast dimension idle), with SCF no slower than FIFO.
func TestHierThemis(t *testing.T) {
	c := hierCase{flag: "dims:4x4,kinds=ring/switch,links=10G/40G", dims: []refDim{{4, "ring"}, {4, "switch"}}, dtype: tensor.F32, elems: 64 << 10, chunks: 8}
	times := map[string]int64{}
	for _, run := range []struct{ sched, policy string }{{"baseline", "fifo"}, {"themis", "fifo"}, {"themis", "scf"}} {
		cfg := hierConfig(t, c)
		cfg.MsgLen, cfg.MTU = 4, 1024
		cfg.Hier.Scheduler, cfg.Hier.Policy = run.sched, run.policy
		data, res := runHier(t, cfg)
		jr := res.Jobs[0]
		require.NotNil(t, jr.Hier)
		require.Len(t, jr.Hier.Schedule, c.chunks)
		orders := make([][]int, c.chunks)
		payload := make([]int64, len(c.dims))
		chunkBytes := int64(c.elems / c.chunks * 4)
		n := int64(16)
		other := false
		for ch, s := range jr.Hier.Schedule {
			orders[ch] = rsOrder(t, s)
			other = other || orders[ch][0] != 0
			q := int64(1)
			for _, d := range orders[ch] {
				p := int64(c.dims[d].size)
				payload[d] += 2 * (p - 1) * chunkBytes * n / (q * p) // per NPU times N NPUs
				q *= p
			}
		}
		require.Equal(t, run.sched == "themis", other, "themis reorders some chunk, the baseline none: %v", jr.Hier.Schedule)
		checkHierOrders(t, c, data, cfg.Seed, orders)
		for d, hd := range jr.Hier.Dims {
			assert.Equal(t, payload[d], hd.PayloadBytes, "dim %d payload (%s)", d+1, run.sched)
			assert.Greater(t, hd.WireBytes, hd.PayloadBytes, "headers and ACKs ride on top")
			assert.True(t, hd.Utilisation > 0 && hd.Utilisation <= 100, "dim %d utilisation %v", d+1, hd.Utilisation)
			var busy float64
			for _, x := range hd.Timeline {
				assert.LessOrEqual(t, x, float64(c.chunks))
				busy += x
			}
			assert.Positive(t, busy)
		}
		times[run.sched+"/"+run.policy] = jr.VirtualNS
	}
	assert.Less(t, float64(times["themis/fifo"]), 0.8*float64(times["baseline/fifo"]), "%v", times)
	assert.LessOrEqual(t, times["themis/scf"], times["themis/fifo"], "%v", times)
}

// TestHierRefusals: what hier cannot run is refused with one line, a
// ConfigError (exit 2), before anything is built.
func TestHierRefusals(t *testing.T) {
	base := func(flag string) job.Config {
		cfg := job.DefaultConfig()
		cfg.Mode, cfg.TensorBytes = Hier, 64<<10
		if flag != "" {
			cfg.Topology = flagTopo(t, flag)
			cfg.Workers = len(cfg.Topology.Hosts())
		}
		return cfg
	}
	for _, c := range []struct {
		name string
		cfg  func() job.Config
		want string
	}{
		{"star", func() job.Config { return base("") }, "dims topology"},
		{"spine-leaf", func() job.Config { return base("spine-leaf:leaves=2,hosts=2,spines=1") }, "dims topology"},
		{"switch of 3", func() job.Config { return base("dims:3x2,kinds=switch/ring") }, "power of two"},
		{"fewer workers", func() job.Config { c := base("dims:2x2"); c.Workers = 3; return c }, "every host"},
		{"tiny tensor", func() job.Config { c := base("dims:4x4"); c.TensorBytes = 60; return c }, "at least one element per rank and chunk"},
		{"too many chunks", func() job.Config { c := base("dims:2x2"); c.Hier = &job.Hier{Chunks: 8192}; return c }, "--chunks"},
		{"scheduler", func() job.Config { c := base("dims:2x2"); c.Hier = &job.Hier{Scheduler: "greedy"}; return c }, "--scheduler"},
		{"policy", func() job.Config { c := base("dims:2x2"); c.Hier = &job.Hier{Policy: "lifo"}; return c }, "--policy"},
		{"collective", func() job.Config { c := base("dims:2x2"); c.Hier = &job.Hier{Collective: "broadcast"}; return c }, `--collective "broadcast": want all-reduce, reduce-scatter or all-gather`},
		{"settings without hier", func() job.Config { c := base("dims:2x2"); c.Mode = Ring; c.Hier = &job.Hier{Chunks: 2}; return c }, "hier job's"},
		{"compress", func() job.Config { c := base("dims:2x2"); c.Compress = 10; return c }, "--compress"},
		{"ranks elsewhere", func() job.Config {
			c := base("dims:2x2")
			c.Jobs = []job.JobSpec{{Ranks: []string{"h1", "h0", "h2", "h3"}}}
			return c
		}, "rank r on host hr"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg()
			err := cfg.Validate()
			var ce *job.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
}

// refShard is rank r's shard of elements [lo, hi) after RS stages along
// order (0-based dimensions), as docs/themis.md defines it: the region
// cut into P equal blocks along the first dimension of the order (block
// k: [lo+n·k/P, lo+n·(k+1)/P)), r keeping the block at its coordinate
// there, that block cut along the next dimension, and so on.
func refShard(dims []refDim, order []int, lo, hi, r int) (int, int) {
	stride := 1
	strides := make([]int, len(dims))
	for d, dm := range dims {
		strides[d], stride = stride, stride*dm.size
	}
	for _, d := range order {
		P := dims[d].size
		k := r / strides[d] % P
		lo, hi = lo+(hi-lo)*k/P, lo+(hi-lo)*(k+1)/P
	}
	return lo, hi
}

// halfOrder reads a reduce-scatter's or all-gather's chunk schedule from
// the report ("RS2 RS1" is [1, 0] for op "RS"), every stage of op.
func halfOrder(t *testing.T, sched, op string) []int {
	t.Helper()
	var o []int
	for _, f := range strings.Fields(sched) {
		require.True(t, strings.HasPrefix(f, op), "%s: only %s stages", sched, op)
		d, err := strconv.Atoi(f[2:])
		require.NoError(t, err, sched)
		o = append(o, d-1)
	}
	return o
}

// refInputs are the ranks' tensors as the job's workload makes them.
func refInputs(c hierCase, n int, seed uint64) [][]byte {
	in := make([][]byte, n)
	for r := range n {
		in[r] = make([]byte, c.elems*c.dtype.Size())
		workload.NewStream(c.dtype, workload.Pattern{}, r, seed).Fill(in[r])
	}
	return in
}

// checkReduceScatter: in every chunk, every element sits in exactly one
// rank's shard (refShard along the chunk's RS order), and that rank
// holds it summed over every rank in the order the algorithms add
// (refHierElem); for int32 that is also the plain wrapping sum.
func checkReduceScatter(t *testing.T, c hierCase, data [][]byte, seed uint64, orders [][]int) {
	t.Helper()
	n := len(data)
	in := refInputs(c, n, seed)
	word := func(b []byte, e int) uint32 { return binary.LittleEndian.Uint32(b[4*e:]) }
	for ch := range c.chunks {
		lo, hi := c.elems*ch/c.chunks, c.elems*(ch+1)/c.chunks
		covered := 0
		for r := range n {
			slo, shi := refShard(c.dims, orders[ch], lo, hi, r)
			covered += shi - slo
			for e := slo; e < shi; e++ {
				var want uint32
				switch c.dtype {
				case tensor.F32:
					want = math.Float32bits(refHierElem(c.dims, orders[ch], lo, hi, e, func(q int) float32 { return math.Float32frombits(word(in[q], e)) }))
				case tensor.I32:
					want = uint32(refHierElem(c.dims, orders[ch], lo, hi, e, func(q int) int32 { return int32(word(in[q], e)) }))
					var sum int32
					for q := range n {
						sum += int32(word(in[q], e))
					}
					require.Equal(t, uint32(sum), want, "element %d: int32 sums in any order", e)
				}
				require.Equal(t, want, word(data[r], e), "rank %d element %d (chunk %d, shard [%d,%d))", r, e, ch, slo, shi)
			}
		}
		require.Equal(t, hi-lo, covered, "chunk %d: the shards tile it", ch)
	}
}

// checkAllGather: in every chunk, rank q's input is its tensor at its
// shard (refShard along the reverse of the chunk's AG order, the RS the
// gathers undo), and every rank ends with every q's input at q's shard:
// the whole chunk, the shards' concatenation.
func checkAllGather(t *testing.T, c hierCase, data [][]byte, seed uint64, orders [][]int) {
	t.Helper()
	n := len(data)
	in := refInputs(c, n, seed)
	sz := c.dtype.Size()
	for ch := range c.chunks {
		lo, hi := c.elems*ch/c.chunks, c.elems*(ch+1)/c.chunks
		rs := slices.Clone(orders[ch])
		slices.Reverse(rs)
		covered := 0
		for q := range n {
			slo, shi := refShard(c.dims, rs, lo, hi, q)
			covered += shi - slo
			for r := range n {
				require.Equal(t, in[q][slo*sz:shi*sz], data[r][slo*sz:shi*sz], "rank %d: rank %d's shard [%d,%d) of chunk %d", r, q, slo, shi, ch)
			}
		}
		require.Equal(t, hi-lo, covered, "chunk %d: the shards tile it", ch)
	}
}

// TestHierReduceScatterAndAllGather: --collective reduce-scatter and
// all-gather run one half of the all-reduce's stages each, in the
// orders emu/themis gives (baseline and Themis): after a reduce-scatter
// each rank holds its shard of the sum, after an all-gather every rank
// every rank's shard, bit for bit, f32 and i32, on ring, full-mesh and
// switch dimensions; each dimension carries what the orders put on it
// (Themis §2.3: an RS of what an NPU holds, S, sends (P-1)/P·S; an AG
// (P-1)·S).
func TestHierReduceScatterAndAllGather(t *testing.T) {
	for _, c := range []struct {
		hierCase
		sched string
	}{
		{hierCase{flag: "dims:4x4,kinds=ring/switch,links=10G/40G", dims: []refDim{{4, "ring"}, {4, "switch"}}, dtype: tensor.F32, elems: 64 << 10, chunks: 8}, "themis"},
		{hierCase{flag: "dims:4x4,kinds=ring/switch", dims: []refDim{{4, "ring"}, {4, "switch"}}, dtype: tensor.I32, elems: 4096, chunks: 2}, "baseline"},
		{hierCase{flag: "dims:4x2x2,kinds=fc/ring/switch", dims: []refDim{{4, "fc"}, {2, "ring"}, {2, "switch"}}, dtype: tensor.F32, elems: 777, chunks: 3}, "baseline"},
		{hierCase{flag: "dims:5x3,kinds=ring/ring", dims: []refDim{{5, "ring"}, {3, "ring"}}, dtype: tensor.I32, elems: 301, chunks: 2}, "themis"},
		{hierCase{flag: "dims:2x4x1,kinds=ring/fc/switch", dims: []refDim{{2, "ring"}, {4, "fc"}, {1, "switch"}}, dtype: tensor.F32, elems: 64, chunks: 8}, "baseline"},
	} {
		for _, coll := range []string{"reduce-scatter", "all-gather"} {
			t.Run(c.flag+"/"+c.dtype.String()+"/"+c.sched+"/"+coll, func(t *testing.T) {
				cfg := hierConfig(t, c.hierCase)
				cfg.Hier.Scheduler, cfg.Hier.Collective = c.sched, coll
				if c.elems >= 64<<10 {
					cfg.MsgLen, cfg.MTU = 4, 1024
				}
				data, res := runHier(t, cfg)
				jr := res.Jobs[0]
				require.NotNil(t, jr.Hier)
				assert.Equal(t, coll, jr.Hier.Collective)
				require.Len(t, jr.Hier.Schedule, c.chunks)
				op := map[string]string{"reduce-scatter": "RS", "all-gather": "AG"}[coll]
				orders := make([][]int, c.chunks)
				var base []int
				for d, dm := range c.dims {
					if dm.size > 1 {
						base = append(base, d)
					}
				}
				if op == "AG" {
					slices.Reverse(base)
				}
				other := false
				for ch, s := range jr.Hier.Schedule {
					orders[ch] = halfOrder(t, s, op)
					require.ElementsMatch(t, base, orders[ch], "one stage per dimension of more than one host: %s", s)
					other = other || !slices.Equal(base, orders[ch])
				}
				if c.sched == "baseline" || len(base) < 2 {
					require.False(t, other, "the baseline order (RS dim 1..D, AG dim D..1): %v", jr.Hier.Schedule)
				}
				if op == "RS" {
					checkReduceScatter(t, c.hierCase, data, cfg.Seed, orders)
				} else {
					checkAllGather(t, c.hierCase, data, cfg.Seed, orders)
				}
				// Payload per dimension, where every cut is even.
				n := int64(len(data))
				chunkBytes := int64(c.elems / c.chunks * c.dtype.Size())
				if int64(c.elems)%(int64(c.chunks)*n) != 0 {
					return
				}
				if c.sched == "themis" && c.elems >= 64<<10 {
					require.True(t, other, "Themis reorders some chunk on the unbalanced platform: %v", jr.Hier.Schedule)
				}
				payload := make([]int64, len(c.dims))
				for ch := range c.chunks {
					held := chunkBytes // RS: what an NPU holds; AG: it times N
					if op == "AG" {
						held = chunkBytes / n
					}
					for _, d := range orders[ch] {
						p := int64(c.dims[d].size)
						if op == "RS" {
							payload[d] += (p - 1) * held / p * n
							held /= p
						} else {
							payload[d] += (p - 1) * held * n
							held *= p
						}
					}
				}
				for d, hd := range jr.Hier.Dims {
					assert.Equal(t, payload[d], hd.PayloadBytes, "dim %d payload", d+1)
				}
			})
		}
	}
}

// TestHierHalvesSurviveFaults: a reduce-scatter and an all-gather with
// loss or corruption on every link end exact, go-back-N resending what
// was lost or dropped for a bad ICRC.
func TestHierHalvesSurviveFaults(t *testing.T) {
	c := hierCase{flag: "dims:4x2,kinds=ring/switch", dims: []refDim{{4, "ring"}, {2, "switch"}}, dtype: tensor.F32, elems: 2000, chunks: 3}
	for _, coll := range []string{"reduce-scatter", "all-gather"} {
		for _, nm := range []struct {
			name  string
			netem faults.Netem
		}{
			{"loss", faults.Netem{Loss: 0.02}},
			{"corrupt", faults.Netem{Corrupt: 0.02}},
		} {
			t.Run(coll+"/"+nm.name, func(t *testing.T) {
				cfg := hierConfig(t, c)
				cfg.Hier.Collective = coll
				cfg.Netem = nm.netem
				cfg.Timeout = 8
				data, res := runHier(t, cfg)
				orders := make([][]int, c.chunks)
				for ch := range orders {
					orders[ch] = []int{0, 1}
					if coll == "all-gather" {
						orders[ch] = []int{1, 0}
					}
				}
				if coll == "reduce-scatter" {
					checkReduceScatter(t, c, data, cfg.Seed, orders)
				} else {
					checkAllGather(t, c, data, cfg.Seed, orders)
				}
				f := res.Faults
				require.NotZero(t, f.Lost+f.Corrupted, "the faults happened: %+v", f)
				require.NotZero(t, res.Retransmissions, "go-back-N resent what was lost")
			})
		}
	}
}

// TestHierRefusesAnARStage: a schedule with an AR stage (an ina
// dimension's in-network all-reduce, emu/themis/ina.go) is refused in
// one line rather than read as a reduce-scatter.
func TestHierRefusesAnARStage(t *testing.T) {
	dims := []hierDim{{kind: "ring", alg: algRing, size: 4, stride: 1}, {kind: "switch", alg: algHD, size: 4, stride: 4}}
	sched := []themis.ChunkSchedule{{Chunk: 0, Stages: []themis.Stage{{Dim: 0, Op: themis.RS}, {Dim: 1, Op: themis.AR}, {Dim: 0, Op: themis.AG}}}}
	_, err := hierStages(dims, sched, []int{0, 1}, themis.AllReduce)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "stage 2 is an AR on dimension 2")
	assert.Contains(t, err.Error(), "ina")
	assert.NotContains(t, err.Error(), "\n")
	// The same schedule with RS/AG in its place is taken.
	sched[0].Stages = []themis.Stage{{Dim: 0, Op: themis.RS}, {Dim: 1, Op: themis.RS}, {Dim: 1, Op: themis.AG}, {Dim: 0, Op: themis.AG}}
	st, err := hierStages(dims, sched, []int{0, 1}, themis.AllReduce)
	require.NoError(t, err)
	assert.Equal(t, "RS1 RS2 AG2 AG1", scheduleString(st[0]))
	// A half of the wrong collective is refused too.
	_, err = hierStages(dims, sched, []int{0, 1}, themis.ReduceScatter)
	require.ErrorContains(t, err, "want 2 stages for a reduce-scatter")
}
