package flow_test

import (
	"cmp"
	"math"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/themis/flow"
)

// one is a single-dimension platform: a 4-NPU switch at 100 GB/s with a
// 1 µs step latency (halving-doubling: log2 4 = 2 steps per RS or AG).
var one = themis.Topology{{Kind: themis.Switch, Size: 4, BW: 100e9, Latency: time.Microsecond}}

// rs is a hand-made RS stage of in bytes per NPU on dimension d of size p.
func rs(d, p int, in float64) themis.Stage {
	return themis.Stage{Dim: d, Op: themis.RS, InBytes: in, OutBytes: in / float64(p)}
}

func ag(d, p int, in float64) themis.Stage {
	return themis.Stage{Dim: d, Op: themis.AG, InBytes: in, OutBytes: in * float64(p)}
}

func secs(r flow.StageRecord) (ready, start, end float64) { return r.ReadyS, r.StartS, r.EndS }

// TestOneStageIsTheLoadModel: a stage alone on its dimension takes its
// fixed delay plus its bytes at the dimension's bandwidth: an RS of 4 MB
// on 4 NPUs sends 3 MB (3/4 of it) in 30 µs after 2 steps of 1 µs.
func TestOneStageIsTheLoadModel(t *testing.T) {
	r, err := flow.Run(one, []themis.ChunkSchedule{{Chunk: 0, Bytes: 4e6, Stages: []themis.Stage{rs(0, 4, 4e6)}}}, flow.Config{})
	require.NoError(t, err)
	assert.InDelta(t, 32e-6, r.Seconds, 1e-15)
	assert.Equal(t, 32*time.Microsecond, r.Time)
	assert.InDelta(t, 3e6, r.Dims[0].Bytes, 1e-6)
	assert.InDelta(t, 3e6/(100e9*32e-6), r.Utilisation, 1e-12)
	assert.Equal(t, 32*time.Microsecond, r.Dims[0].Busy)
}

// TestOneActiveChunkQueues: with one chunk served at a time (ASTRA-sim's
// default) two equal chunks run back to back, the second queued for the
// whole first stage: ends at 32 and 64 µs.
func TestOneActiveChunkQueues(t *testing.T) {
	sc := []themis.ChunkSchedule{
		{Chunk: 0, Bytes: 4e6, Stages: []themis.Stage{rs(0, 4, 4e6)}},
		{Chunk: 1, Bytes: 4e6, Stages: []themis.Stage{rs(0, 4, 4e6)}},
	}
	r, err := flow.Run(one, sc, flow.Config{ActivePerDim: 1})
	require.NoError(t, err)
	_, s0, e0 := secs(r.Stages[0])
	_, s1, e1 := secs(r.Stages[1])
	assert.Equal(t, []float64{0, 32e-6}, []float64{s0, s1})
	assert.InDelta(t, 32e-6, e0, 1e-15)
	assert.InDelta(t, 64e-6, e1, 1e-15)
	// Both were at the dimension all along: activity 100 % of the time,
	// in the one (partial) 100 µs window: 64 of its 100 µs.
	require.Len(t, r.Dims[0].Activity, 1)
	assert.InDelta(t, 0.64, r.Dims[0].Activity[0], 1e-9)
}

// TestSharedBandwidthIsFluid: two chunks served at once overlap their
// fixed delays and share the bandwidth equally: a 1 MB and a 4 MB RS
// (0.75 MB and 3 MB sent) both start sending at 2 µs; the small one ends
// when it has had half the link for 0.75 MB (2 + 15 µs), the large one
// then has it alone: 2 + (0.75 + 3) MB / 100 GB/s = 39.5 µs.
func TestSharedBandwidthIsFluid(t *testing.T) {
	sc := []themis.ChunkSchedule{
		{Chunk: 0, Bytes: 4e6, Stages: []themis.Stage{rs(0, 4, 4e6)}},
		{Chunk: 1, Bytes: 1e6, Stages: []themis.Stage{rs(0, 4, 1e6)}},
	}
	r, err := flow.Run(one, sc, flow.Config{ActivePerDim: 2})
	require.NoError(t, err)
	assert.InDelta(t, 17e-6, r.Stages[1].EndS, 1e-15)
	assert.InDelta(t, 39.5e-6, r.Stages[0].EndS, 1e-15)
	assert.InDelta(t, 39.5e-6, r.Seconds, 1e-15)
	assert.InDelta(t, 3.75e6, r.Dims[0].Bytes, 1e-6)
}

// TestPolicies: three chunks queue on one dimension at time 0 with one
// served at a time. FIFO serves them by arrival (chunk order); SCF serves
// the smaller stage first (the 1 MB chunk before the 4 MB one), but a
// chunk on its last stage after every other.
func TestPolicies(t *testing.T) {
	two := themis.Topology{one[0], {Kind: themis.Ring, Size: 2, BW: 50e9, Latency: 0}}
	sc := []themis.ChunkSchedule{
		{Chunk: 0, Bytes: 8e6, Stages: []themis.Stage{rs(0, 4, 8e6)}},                 // last stage, largest
		{Chunk: 1, Bytes: 4e6, Stages: []themis.Stage{rs(0, 4, 4e6), rs(1, 2, 1e6)}},  // 4 MB
		{Chunk: 2, Bytes: 1e6, Stages: []themis.Stage{rs(0, 4, 1e6), rs(1, 2, 25e4)}}, // 1 MB
	}
	order := func(p themis.Policy) []int {
		r, err := flow.Run(two, sc, flow.Config{Policy: p})
		require.NoError(t, err)
		starts := map[float64]int{}
		var ts []float64
		for _, x := range r.Stages {
			if x.Stage == 0 {
				starts[x.StartS] = x.Chunk
				ts = append(ts, x.StartS)
			}
		}
		for i := range ts {
			for j := i + 1; j < len(ts); j++ {
				if ts[j] < ts[i] {
					ts[i], ts[j] = ts[j], ts[i]
				}
			}
		}
		var o []int
		for _, x := range ts {
			o = append(o, starts[x])
		}
		return o
	}
	assert.Equal(t, []int{0, 1, 2}, order(themis.FIFO))
	assert.Equal(t, []int{2, 1, 0}, order(themis.SCF))
}

// TestPipelineOfTwoDims: the baseline pipeline of the paper's Fig. 5 on a
// 4×4 platform with BW(dim1) = 2·BW(dim2), no latency: with a 64 MB chunk's
// RS on dim1 as one unit, a chunk's stages take 1, 0.5, 0.5 and 1 units,
// and dim1 serves every chunk's first and last stage, so 4 chunks take
// 8 units plus the first chunk's 1 unit of dim2 work before its AG on
// dim1 can join the queue behind later RSs: FIFO gives 8 units exactly
// (dim1 never idles once it starts: RS1 RS2 RS3 RS4 then the four AGs).
func TestPipelineOfTwoDims(t *testing.T) {
	unit := 48e6 / 200e9 // a 64 MB RS on 4 NPUs sends 48 MB at 200 GB/s
	top := themis.Topology{
		{Kind: themis.Switch, Size: 4, BW: 200e9},
		{Kind: themis.Switch, Size: 4, BW: 100e9},
	}
	sc, _, err := themis.Schedule(top, themis.AllReduce, 256e6, themis.Config{Scheduler: themis.Baseline, Chunks: 4})
	require.NoError(t, err)
	r, err := flow.Run(top, sc, flow.Config{})
	require.NoError(t, err)
	assert.InDelta(t, 8*unit, r.Seconds, 1e-12)
	// Every NPU sends 2·S·(N−1)/N whatever the schedule (§3.1).
	assert.InDelta(t, 2*256e6*15/16, r.Dims[0].Bytes+r.Dims[1].Bytes, 1e-3)
	assert.InDelta(t, 1, r.Dims[0].Utilisation, 1e-12, "dim1 is the bottleneck and never idles")
}

// TestBandwidthOnlyBaseline: without fixed delays and with many chunks,
// the baseline approaches the bandwidth-only steady state: the slowest
// dimension sets the time, T = max_K bytes_K / BW_K, with bytes_K =
// 2(P_K−1)/P_K · S/(P_1⋯P_{K−1}); utilisation Σ bytes_K / (T Σ BW_K).
func TestBandwidthOnlyBaseline(t *testing.T) {
	for _, name := range flow.Platforms() {
		top, err := flow.Platform(name)
		require.NoError(t, err)
		const S = 1 << 30
		var sumBytes, sumBW, tmax float64
		q := 1.0
		for _, d := range top {
			p := float64(d.Size)
			b := 2 * (p - 1) / p * S / q
			q *= p
			sumBytes += b
			sumBW += d.BW
			tmax = math.Max(tmax, b/d.BW)
		}
		want := sumBytes / (tmax * sumBW)
		r, err := flow.AllReduce(top, S, flow.Baseline, flow.Setup{Chunks: 512, NoFixedDelay: true})
		require.NoError(t, err)
		assert.LessOrEqual(t, r.Utilisation, want*(1+1e-9), name)
		assert.InEpsilon(t, want, r.Utilisation, 0.01, name)
		assert.InEpsilon(t, sumBytes, r.Dims[0].Bytes+sumOthers(r), 1e-9, name)
	}
}

func sumOthers(r flow.Result) float64 {
	var s float64
	for _, d := range r.Dims[1:] {
		s += d.Bytes
	}
	return s
}

// TestBounds: on every platform and method, the time is at least the
// ideal (all bytes over all bandwidth) and the bytes are 2S(N−1)/N; the
// activity windows add up to at least the busy time, and the serving
// windows to exactly it.
func TestBounds(t *testing.T) {
	for _, name := range flow.Platforms() {
		top, _ := flow.Platform(name)
		for _, m := range flow.Methods() {
			for _, act := range []int{1, 3} {
				r, err := flow.AllReduce(top, 300<<20, m, flow.Setup{Chunks: 32, ChargeAK: true, ActivePerDim: act})
				require.NoError(t, err)
				n := float64(top.NPUs())
				assert.GreaterOrEqual(t, r.Seconds, flow.IdealSeconds(top, 300<<20), name)
				var bytes float64
				for k, d := range r.Dims {
					bytes += d.Bytes
					var act, serv float64
					for i := range d.Activity {
						act += d.Activity[i]
						serv += d.Serving[i]
					}
					bin := r.Bin.Seconds()
					assert.InDelta(t, d.Busy.Seconds(), serv*bin, 1e-9, "%s dim%d", name, k+1)
					assert.GreaterOrEqual(t, act*bin, d.Busy.Seconds()-1e-9)
					assert.LessOrEqual(t, d.Utilisation, 1+1e-9)
				}
				assert.InEpsilon(t, 2*float64(300<<20)*(n-1)/n, bytes, 1e-9)
				// Stages run in order, each after its predecessor.
				for i, x := range r.Stages {
					assert.LessOrEqual(t, x.ReadyS, x.StartS)
					assert.LessOrEqual(t, x.StartS, x.EndS)
					if x.Stage > 0 {
						assert.Equal(t, r.Stages[i-1].EndS, x.ReadyS)
					}
				}
			}
		}
	}
}

// TestDeterministic: the same inputs give the same result, field for
// field.
func TestDeterministic(t *testing.T) {
	top, _ := flow.Platform("4D-Ring_FC_Ring_SW")
	a, err := flow.AllReduce(top, 1<<30, flow.ThemisSCF, flow.Setup{Chunks: 64, ChargeAK: true, ActivePerDim: 2})
	require.NoError(t, err)
	b, _ := flow.AllReduce(top, 1<<30, flow.ThemisSCF, flow.Setup{Chunks: 64, ChargeAK: true, ActivePerDim: 2})
	assert.True(t, reflect.DeepEqual(a, b))
}

// TestTable2: the presets are the paper's Table 2: 1024 NPUs, aggregate
// bandwidth = BW/link × links/NPU.
func TestTable2(t *testing.T) {
	links := map[string][][2]float64{ // (BW/link Gb/s, links/NPU)
		"2D-SW_SW":           {{200, 6}, {800, 1}},
		"3D-SW_SW_SW_homo":   {{200, 4}, {200, 4}, {800, 1}},
		"3D-SW_SW_SW_hetero": {{200, 8}, {200, 4}, {400, 1}},
		"3D-FC_Ring_SW":      {{200, 7}, {200, 4}, {400, 1}},
		"4D-Ring_SW_SW_SW":   {{1000, 2}, {200, 8}, {200, 4}, {400, 1}},
		"4D-Ring_FC_Ring_SW": {{1500, 2}, {200, 7}, {200, 6}, {800, 1}},
	}
	require.Len(t, flow.Platforms(), 6)
	for _, name := range flow.Platforms() {
		top, err := flow.Platform(name)
		require.NoError(t, err)
		require.NoError(t, top.Validate())
		assert.Equal(t, 1024, top.NPUs(), name)
		require.Len(t, top, len(links[name]), name)
		for k, d := range top {
			assert.InDelta(t, links[name][k][0]*links[name][k][1]*1e9/8, d.BW, 1e-3, "%s dim%d", name, k+1)
		}
	}
	_, err := flow.Platform("3D-SW_SW_SW")
	assert.ErrorContains(t, err, "no platform")
}

// TestBadInput: one-line errors, never a panic.
func TestBadInput(t *testing.T) {
	ok := []themis.ChunkSchedule{{Chunk: 0, Bytes: 4e6, Stages: []themis.Stage{rs(0, 4, 4e6)}}}
	for name, c := range map[string]struct {
		top themis.Topology
		sc  []themis.ChunkSchedule
		cfg flow.Config
	}{
		"no chunks":  {one, nil, flow.Config{}},
		"bad dim":    {one, []themis.ChunkSchedule{{Stages: []themis.Stage{rs(1, 4, 1)}}}, flow.Config{}},
		"bad sizes":  {one, []themis.ChunkSchedule{{Stages: []themis.Stage{{Dim: 0, Op: themis.RS, InBytes: 4, OutBytes: 2}}}}, flow.Config{}},
		"negative":   {one, []themis.ChunkSchedule{{Stages: []themis.Stage{rs(0, 4, -4)}}}, flow.Config{}},
		"NaN":        {one, []themis.ChunkSchedule{{Stages: []themis.Stage{rs(0, 4, math.NaN())}}}, flow.Config{}},
		"bad op":     {one, []themis.ChunkSchedule{{Stages: []themis.Stage{{Dim: 0, Op: "AR", InBytes: 4, OutBytes: 4}}}}, flow.Config{}},
		"policy":     {one, ok, flow.Config{Policy: "lifo"}},
		"active":     {one, ok, flow.Config{ActivePerDim: -1}},
		"bin":        {one, ok, flow.Config{TimelineBin: -1}},
		"empty topo": {nil, ok, flow.Config{}},
	} {
		_, err := flow.Run(c.top, c.sc, c.cfg)
		if assert.Error(t, err, name) {
			assert.NotContains(t, err.Error(), "\n", name)
		}
	}
}

// TestScale: the paper's scale (1024 NPUs, 64 chunks of a 1 GB
// all-reduce on 4 dimensions: 512 stages) allocates a bounded number of
// times, independent of the chunk count but for the per-chunk arrays.
func TestScale(t *testing.T) {
	top, _ := flow.Platform("4D-Ring_SW_SW_SW")
	sc, _, err := themis.Schedule(top, themis.AllReduce, 1<<30, themis.Config{Scheduler: themis.Themis, Chunks: 64, ChargeAK: true})
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(5, func() {
		if _, err := flow.Run(top, sc, flow.Config{Policy: themis.SCF}); err != nil {
			t.Fatal(err)
		}
	})
	assert.Less(t, allocs, 200.0)
}

func BenchmarkRun1024NPUs64Chunks(b *testing.B) {
	top, _ := flow.Platform("4D-Ring_SW_SW_SW")
	sc, _, _ := themis.Schedule(top, themis.AllReduce, 1<<30, themis.Config{Scheduler: themis.Themis, Chunks: 64, ChargeAK: true})
	b.ReportAllocs()
	for b.Loop() {
		if _, err := flow.Run(top, sc, flow.Config{Policy: themis.SCF}); err != nil {
			b.Fatal(err)
		}
	}
}

// TestServiceOrderIsThemis: with one chunk served per dimension, every
// stage takes its load-model time, so each dimension serves the stages in
// the order themis.ServiceOrder replays (the order every rank enforces,
// §4.6.2): the executor and the consistency replay agree.
func TestServiceOrderIsThemis(t *testing.T) {
	for _, name := range flow.Platforms() {
		top, _ := flow.Platform(name)
		for _, m := range flow.Methods() {
			sc, _, err := themis.Schedule(top, themis.AllReduce, 1<<30, themis.Config{Scheduler: m.Scheduler, Chunks: 16, ChargeAK: true})
			require.NoError(t, err)
			want, err := themis.ServiceOrder(top, sc, m.Policy, 1)
			require.NoError(t, err)
			r, err := flow.Run(top, sc, flow.Config{Policy: m.Policy})
			require.NoError(t, err)
			got := make([][]themis.OpRef, len(top))
			recs := append([]flow.StageRecord(nil), r.Stages...)
			slices.SortStableFunc(recs, func(a, b flow.StageRecord) int { return cmp.Compare(a.StartS, b.StartS) })
			for _, x := range recs {
				got[x.Dim] = append(got[x.Dim], themis.OpRef{Chunk: x.Chunk, Stage: x.Stage})
			}
			assert.Equal(t, want, got, "%s %s", name, m.Name)
		}
	}
}
