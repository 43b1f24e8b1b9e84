package collective

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/job"
)

// trafficCfg is a traffic job of n ranks on the default 10G star, 1 µs
// links, in 4 KiB messages.
func trafficCfg(n int, t job.Traffic, seed uint64) job.Config {
	cfg := job.DefaultConfig()
	cfg.Workers, cfg.Mode, cfg.MsgLen, cfg.MTU, cfg.Seed = n, Traffic, 4, 1024, seed
	cfg.TensorBytes = 256 << 10
	cfg.Traffic = &t
	return cfg
}

func flowEnd(f job.FlowResult) time.Duration { return time.Duration(f.StartNS + f.FCTNS) }

// TestTrafficIncast: 4 ranks write 1 MiB each into a fifth on a 10G star.
// Every byte arrives as sent; no flow can finish before its bytes took
// their fair share of the sink's link (a quarter of 10G, headers not even
// counted), and the bytes of all of them over the time the last took
// cannot exceed the link's rate.
func TestTrafficIncast(t *testing.T) {
	const flowBytes = 1 << 20
	cfg := trafficCfg(5, job.Traffic{Pattern: Incast, Bytes: flowBytes}, 7)
	res := runOK(t, cfg)
	jr := res.Jobs[0]
	require.Len(t, jr.Flows, 4)
	assert.Equal(t, int64(4*flowBytes), jr.Bytes, "the job moved its flows' bytes")
	rate := cfg.Link.Rate
	fairShare := rate / 4
	bound := time.Duration(float64(flowBytes) * 8 / fairShare * 1e9)
	var last time.Duration
	first := time.Duration(1 << 62)
	for i, f := range jr.Flows {
		assert.Equal(t, fmt.Sprintf("h%d", i), f.From)
		assert.Equal(t, "h4", f.To, "the sink is the last rank")
		assert.GreaterOrEqual(t, time.Duration(f.FCTNS), bound, "flow %d: %d bytes at a quarter of 10G take at least %v", i, flowBytes, bound)
		last, first = max(last, flowEnd(f)), min(first, flowEnd(f))
		var sum int64
		for _, b := range f.Timeline {
			sum += b
		}
		assert.Equal(t, int64(flowBytes), sum, "flow %d's timeline adds up to its bytes", i)
		assert.InDelta(t, float64(flowBytes)*8/float64(f.FCTNS), f.GoodputGbps, 1e-9)
	}
	agg := float64(4*flowBytes) * 8 / last.Seconds()
	assert.LessOrEqual(t, agg, rate, "4 MiB over the last completion (%v) is at most the link's rate", last)
	// Fairness over the last half of the time all four are running: they
	// share the sink's FIFO with the same depth, so each gets a quarter.
	rates := WindowRates(jr.Flows, 0, first/2, first)
	assert.Greater(t, JainIndex(rates), 0.99, "rates %v", rates)
	t.Logf("incast: completions %v..%v (bound per flow %v), aggregate %.3g Gb/s, Jain %.4f over [%v, %v), bin %v",
		first, last, bound, agg/1e9, JainIndex(rates), first/2, first, time.Duration(jr.Flows[0].BinNS))
}

// TestJainIndex against values worked out by hand from (Σx)²/(n·Σx²).
func TestJainIndex(t *testing.T) {
	for _, c := range []struct {
		rates []float64
		want  float64
	}{
		{[]float64{5, 5, 5, 5}, 1},
		{[]float64{1, 0, 0, 0}, 0.25},            // 1 / (4·1)
		{[]float64{1, 2, 3}, 36.0 / 42},          // 6² / (3·14)
		{[]float64{10, 20}, 900.0 / 1000},        // 30² / (2·500)
		{[]float64{2.5e9, 2.5e9, 5e9}, 0.888888}, // 10² / (3·37.5) in units of 1e9
		{nil, 1},
	} {
		assert.InDelta(t, c.want, JainIndex(c.rates), 1e-6, "%v", c.rates)
	}
}

// TestTrafficPermutation: for several seeds, each rank is the source of
// exactly one flow and the destination of exactly one, never its own;
// the seed decides which, and the run ends exact.
func TestTrafficPermutation(t *testing.T) {
	seen := map[string]bool{}
	for seed := uint64(1); seed <= 20; seed++ {
		n := 2 + int(seed%7)
		cfg := trafficCfg(n, job.Traffic{Pattern: Permutation}, seed)
		plan, err := PlanFlows(job.JobConfig{Name: "p", Ranks: ranks(n), Cfg: cfg})
		require.NoError(t, err)
		require.Len(t, plan, n)
		src, dst := make([]int, n), make([]int, n)
		for _, f := range plan {
			require.NotEqual(t, f.Src, f.Dst, "seed %d", seed)
			src[f.Src]++
			dst[f.Dst]++
		}
		for r := range n {
			require.Equal(t, 1, src[r], "seed %d: rank %d sends once", seed, r)
			require.Equal(t, 1, dst[r], "seed %d: rank %d receives once", seed, r)
		}
		if n == 5 {
			seen[fmt.Sprint(Derangement(seed, n))] = true
		}
	}
	assert.Greater(t, len(seen), 1, "seeds draw different permutations")
	res := runOK(t, trafficCfg(6, job.Traffic{Pattern: Permutation}, 3))
	assert.Len(t, res.Jobs[0].Flows, 6)
}

func ranks(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("h%d", i)
	}
	return out
}

// TestTrafficAllToAll: n ranks make n(n-1) flows, every ordered pair
// once, all exact.
func TestTrafficAllToAll(t *testing.T) {
	const n = 4
	res := runOK(t, trafficCfg(n, job.Traffic{Pattern: AllToAll, Bytes: 64 << 10}, 5))
	flows := res.Jobs[0].Flows
	require.Len(t, flows, n*(n-1))
	pairs := map[[2]string]bool{}
	for _, f := range flows {
		require.NotEqual(t, f.From, f.To)
		pairs[[2]string{f.From, f.To}] = true
		assert.Positive(t, f.FCTNS)
	}
	assert.Len(t, pairs, n*(n-1))
}

// TestTrafficBesideNetReduce: an incast into h0 from three other hosts
// while h0..h3 run a NetReduce allreduce on the same star: both exact.
func TestTrafficBesideNetReduce(t *testing.T) {
	cfg := job.DefaultConfig()
	cfg.Workers, cfg.Seed, cfg.TensorBytes, cfg.MsgLen = 8, 11, 256<<10, 4
	sink := "h0"
	cfg.Jobs = []job.JobSpec{
		{Name: "nr", Mode: job.DefaultMode, Ranks: []string{"h0", "h1", "h2", "h3"}},
		{Name: "bg", Mode: Traffic, Ranks: []string{"h4", "h5", "h6", "h0"}, Start: 5 * time.Microsecond,
			Traffic: &job.Traffic{Pattern: Incast, Sink: sink, Bytes: 512 << 10}},
	}
	res := runOK(t, cfg)
	require.Len(t, res.Jobs, 2)
	assert.Empty(t, res.Jobs[0].Flows)
	assert.Len(t, res.Jobs[1].Flows, 3)
	for _, f := range res.Jobs[1].Flows {
		assert.Equal(t, sink, f.To)
		assert.GreaterOrEqual(t, f.StartNS, int64(5*time.Microsecond), "a flow starts with its job")
	}
}

// TestTrafficPaced: a flow paced at 1 Gb/s on a 10G link takes its bytes
// at 1 Gb/s, within 2 % (the last message's transfer and ACK add a few µs
// to 8 ms); explicit flows start at their offsets.
func TestTrafficPaced(t *testing.T) {
	const b = 1_000_000
	cfg := trafficCfg(3, job.Traffic{Flows: []job.Flow{
		{From: "h1", To: "h0", Bytes: b, Rate: 1e9, Start: 10 * time.Microsecond},
		{From: "h2", To: "h0", Bytes: 100_000}, // unpaced beside it
	}}, 9)
	res := runOK(t, cfg)
	f := res.Jobs[0].Flows[0]
	want := float64(b) * 8 / 1e9 * 1e9
	assert.InEpsilon(t, want, float64(f.FCTNS), 0.02, "FCT %v, want ≈ %v", time.Duration(f.FCTNS), time.Duration(want))
	assert.GreaterOrEqual(t, float64(f.FCTNS), want*(1-1.0/250), "no faster than the rate (but for the last message)")
	assert.Equal(t, int64(10*time.Microsecond), f.StartNS)
	assert.InEpsilon(t, 1.0, f.GoodputGbps, 0.02)
	assert.Equal(t, 1e9, f.RateBps)
	u := res.Jobs[0].Flows[1]
	assert.Less(t, u.FCTNS, f.FCTNS/10, "the unpaced flow is not held to the rate")
}

// TestTrafficDeterministic: the same seed gives the same frames byte for
// byte; another seed other bytes.
func TestTrafficDeterministic(t *testing.T) {
	capture := func(seed uint64) []byte {
		var buf bytes.Buffer
		cfg := trafficCfg(4, job.Traffic{Pattern: Permutation, Bytes: 64 << 10, Rate: 5e9}, seed)
		cfg.Capture = &buf
		runOK(t, cfg)
		return buf.Bytes()
	}
	a, b := capture(21), capture(21)
	require.NotEmpty(t, a)
	assert.True(t, bytes.Equal(a, b), "same seed, same capture")
	assert.False(t, bytes.Equal(a, capture(22)), "another seed, other frames")
}

// TestTrafficCatchesCorruption: a byte altered in a destination's slot
// is reported as a mismatch naming the flow.
func TestTrafficCatchesCorruption(t *testing.T) {
	trafficTamper = func(flow, m int, landed []byte) {
		if flow == 1 && m == 3 {
			landed[17] ^= 0x40
		}
	}
	defer func() { trafficTamper = nil }()
	res, err := job.Run(trafficCfg(4, job.Traffic{Pattern: Incast, Bytes: 64 << 10}, 2))
	require.NoError(t, err)
	require.False(t, res.Exact)
	require.NotNil(t, res.Mismatch)
	assert.Equal(t, 3, res.Mismatch.Rank, "the sink's region")
	assert.Equal(t, int64(3*4096+17), res.Mismatch.Element)
	assert.Contains(t, res.Mismatch.Got, "flow 1 h1 -> h3")
}

// TestTrafficLargeFlowBoundedMemory: a 64 MiB flow's rings are 16
// messages, not the flow.
func TestTrafficLargeFlowBoundedMemory(t *testing.T) {
	cfg := trafficCfg(2, job.Traffic{Pattern: Incast, Bytes: 64 << 20}, 1)
	cfg.MsgLen = 16
	e := job.EstimateMemory(cfg)
	assert.Less(t, e.Buffers, int64(4<<20), "%+v", e)
	if testing.Short() {
		return
	}
	res := runOK(t, cfg)
	f := res.Jobs[0].Flows[0]
	assert.Equal(t, int64(64<<20), f.Bytes)
	assert.Greater(t, f.FCTNS, int64(float64(64<<20)*8/cfg.Link.Rate*1e9), "no faster than the link")
}

// TestTrafficRefusals: bad flows are one-line configuration errors.
func TestTrafficRefusals(t *testing.T) {
	two := func(f ...job.Flow) job.Traffic { return job.Traffic{Flows: f} }
	for _, c := range []struct {
		name string
		n    int
		t    job.Traffic
		want string
	}{
		{"not a rank", 3, two(job.Flow{From: "h1", To: "h7", Bytes: 1}), "h7 is not a rank of the job"},
		{"to itself", 3, two(job.Flow{From: "h1", To: "h1", Bytes: 1}), "not to itself"},
		{"zero bytes", 3, two(job.Flow{From: "h1", To: "h0"}), "bytes 0"},
		{"negative bytes", 3, two(job.Flow{From: "h1", To: "h0", Bytes: -5}), "bytes -5"},
		{"rate above the link", 3, two(job.Flow{From: "h1", To: "h0", Bytes: 1, Rate: 40e9}), "above its link"},
		{"pattern rate above the link", 3, job.Traffic{Pattern: AllToAll, Rate: 11e9}, "above its link"},
		{"unknown pattern", 3, job.Traffic{Pattern: "broadcast"}, `traffic "broadcast"`},
		{"sink not a rank", 3, job.Traffic{Pattern: Incast, Sink: "h9"}, "sink h9 is not a rank"},
		{"pattern and flows", 3, job.Traffic{Pattern: Incast, Flows: []job.Flow{{From: "h1", To: "h0", Bytes: 1}}}, "not both"},
		{"negative start", 3, two(job.Flow{From: "h1", To: "h0", Bytes: 1, Start: -1}), "start"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := trafficCfg(c.n, c.t, 1)
			_, err := job.Run(cfg)
			var ce *job.ConfigError
			require.True(t, errors.As(err, &ce), "%v", err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "\n")
		})
	}
	// A pattern needs more ranks than one.
	_, err := PlanFlows(job.JobConfig{Name: "x", Ranks: []string{"h0"}, Cfg: trafficCfg(2, job.Traffic{Pattern: Permutation}, 1)})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "needs at least 2 ranks")
	// Flows given to a job of another mode.
	cfg := job.DefaultConfig()
	cfg.Jobs = []job.JobSpec{{Name: "a", Ranks: []string{"h0", "h1"}, Traffic: &job.Traffic{Pattern: Incast}}}
	err = cfg.Validate()
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "traffic job's"), err.Error())
}
