package collective

import (
	"encoding/binary"
	"fmt"
	"github.com/inaemu/inaemu/emu/job"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/commmodel"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/tensor"
)

// waResults runs cfg (a wa job) and collects every worker's sum as it
// arrives, message by message, into one tensor per worker.
func waResults(t *testing.T, cfg job.Config) (*job.Result, [][]byte) {
	t.Helper()
	got := make([][]byte, cfg.Workers)
	for i := range got {
		got[i] = make([]byte, cfg.TensorBytes)
	}
	seen := map[[2]int]bool{}
	msgB := waMsgB(cfg)
	waSeen = func(rank, m int, b []byte) {
		require.False(t, seen[[2]int{rank, m}], "rank %d message %d twice", rank, m)
		seen[[2]int{rank, m}] = true
		copy(got[rank][m*msgB:], b)
	}
	defer func() { waSeen = nil }()
	res, err := job.Run(cfg)
	require.NoError(t, err)
	return res, got
}

// refWASum is the sum a wa job defines, written here from its
// description: each worker's tensor (as the gradient leg delivers it:
// with compression, each packet of each message tripped through the
// engines, refTrip in compress_test.go), added in rank order in
// the element type.
func refWASum(cfg job.Config, msgB int) []byte {
	d, n := cfg.DType, int(cfg.TensorBytes)
	in := make([][]byte, cfg.Workers)
	for r := range in {
		in[r] = make([]byte, n)
		workload.NewStream(d, cfg.Pattern, r, cfg.Seed).Fill(in[r])
		if cfg.Compress != 0 {
			for lo := 0; lo < n; lo += msgB {
				v := make([]float32, (min(lo+msgB, n)-lo)/4)
				for i := range v {
					v[i] = math.Float32frombits(binary.LittleEndian.Uint32(in[r][lo+4*i:]))
				}
				refTrip(cfg.Compress, cfg.MTU, v)
				for i := range v {
					binary.LittleEndian.PutUint32(in[r][lo+4*i:], math.Float32bits(v[i]))
				}
			}
		}
	}
	out := make([]byte, n)
	sz := d.Size()
	for i := 0; i < n; i += sz {
		switch d {
		case tensor.F32:
			s := math.Float32frombits(binary.LittleEndian.Uint32(in[0][i:]))
			for r := 1; r < len(in); r++ {
				s += math.Float32frombits(binary.LittleEndian.Uint32(in[r][i:]))
			}
			binary.LittleEndian.PutUint32(out[i:], math.Float32bits(s))
		case tensor.I32:
			s := binary.LittleEndian.Uint32(in[0][i:])
			for r := 1; r < len(in); r++ {
				s += binary.LittleEndian.Uint32(in[r][i:])
			}
			binary.LittleEndian.PutUint32(out[i:], s)
		}
	}
	return out
}

// waMsgB is a wa job's message size (the incast bound of job_wa.go).
func waMsgB(cfg job.Config) int {
	q := cfg.Link.Queue
	if q == 0 {
		q = 1000
	}
	return min(cfg.MsgLen, max(1, q/(2*cfg.Workers))) * cfg.MTU
}

// TestWAIsTheRankOrderSum: 1 to 8 workers, every way back, f32 and i32,
// with and without compression of the gradient leg: every worker holds,
// bit for bit, the reference's sum; the job's own check agrees.
func TestWAIsTheRankOrderSum(t *testing.T) {
	cases := 0
	for _, p := range []int{1, 2, 3, 5, 8} {
		for _, b := range []job.Bcast{job.BcastUnicast, job.BcastTree, job.BcastWorkerTree} {
			for _, c := range []struct {
				d tensor.DType
				k int
			}{{tensor.F32, 0}, {tensor.I32, 0}, {tensor.F32, 10}, {tensor.F32, 6}} {
				cfg := job.DefaultConfig()
				cfg.Mode, cfg.Workers, cfg.Bcast, cfg.DType, cfg.Compress = WA, p, b, c.d, c.k
				cfg.TensorBytes, cfg.MTU, cfg.MsgLen, cfg.Seed = int64(4*(3000+p)), 512, 7, uint64(p)
				name := fmt.Sprintf("p=%d %s %s k=%d", p, b, c.d, c.k)
				res, got := waResults(t, cfg)
				require.True(t, res.Exact, "%s: %+v", name, res.Mismatch)
				require.Zero(t, res.NAKs+res.Retransmissions+res.QueueDrops, "%s: no fault, so nothing lost or resent", name)
				require.Equal(t, p, res.Workers, name)
				want := refWASum(cfg, waMsgB(cfg))
				for r := range got {
					require.Equal(t, want, got[r], "%s: worker %d", name, r)
				}
				if c.k != 0 {
					cr := res.Jobs[0].Compression
					require.NotNil(t, cr)
					assert.Positive(t, cr.Compressed, name)
					// Only the gradients: p tensors' packets, not the sum's.
					pkts, n, mb := 0, int(cfg.TensorBytes), waMsgB(cfg)
					for lo := 0; lo < n; lo += mb {
						pkts += (min(mb, n-lo) + cfg.MTU - 1) / cfg.MTU
					}
					assert.EqualValues(t, p*pkts, cr.Compressed+cr.Uncompressed, name)
				}
				cases++
			}
		}
	}
	t.Logf("%d wa jobs: every worker's sum is the reference's", cases)
}

// TestWACheckCatchesAWrongSum: an aggregator that gets one element of
// one message wrong is reported at that element, for the first worker.
func TestWACheckCatchesAWrongSum(t *testing.T) {
	cfg := job.DefaultConfig()
	cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = WA, 3, 64<<10, 4, 2
	waTamper = func(m int, sum []byte) {
		if m == 5 {
			binary.LittleEndian.PutUint32(sum[4*9:], math.Float32bits(1234.5))
		}
	}
	defer func() { waTamper = nil }()
	res, err := job.Run(cfg)
	require.NoError(t, err)
	require.False(t, res.Exact)
	require.NotNil(t, res.Mismatch)
	assert.Equal(t, 0, res.Mismatch.Rank)
	assert.Equal(t, int64(5*4*1024/4+9), res.Mismatch.Element)
	assert.Equal(t, "1234.5", res.Mismatch.Got)
}

// TestWARecovers: loss, corruption, duplicates and reordering on every
// link; every worker ends with the loss-free sum.
func TestWARecovers(t *testing.T) {
	for _, b := range []job.Bcast{job.BcastUnicast, job.BcastTree, job.BcastWorkerTree} {
		for _, spec := range []string{"loss 2%", "corrupt 2%", "duplicate 3%", "reorder 5% gap 3"} {
			cfg := job.DefaultConfig()
			cfg.Mode, cfg.Workers, cfg.Bcast, cfg.TensorBytes, cfg.Seed, cfg.Compress = WA, 4, b, 128<<10, 9, 8
			ne, err := faults.ParseNetem(spec)
			require.NoError(t, err)
			cfg.Netem = ne
			res, got := waResults(t, cfg)
			require.True(t, res.Exact, "%s %s", b, spec)
			want := refWASum(cfg, waMsgB(cfg))
			for r := range got {
				require.Equal(t, want, got[r], "%s %s: worker %d", b, spec, r)
			}
			t.Logf("%s %s: %d retransmitted, %d NAKs, %d timeouts", b, spec, res.Retransmissions, res.NAKs, res.Timeouts)
		}
	}
}

// TestWARefusals: a bcast that names nothing, GPUs as ranks, more
// workers than a topology has hosts besides the aggregator; and a
// compressing ring on GPUs.
func TestWARefusals(t *testing.T) {
	for _, c := range []struct {
		set  func(*job.Config)
		want string
	}{
		{func(c *job.Config) { c.Bcast = "broadcast" }, `--bcast "broadcast": want unicast, tree or worker-tree`},
		{func(c *job.Config) {
			c.Topology = flagTopo(t, "star:hosts=2,gpus=2,intra=100G")
			c.Jobs = []job.JobSpec{{Ranks: []string{"h0:gpu0", "h0:gpu1", "h1"}}}
		}, "a wa job's ranks are host NICs (its workers, then its aggregator), not GPUs (h0:gpu0)"},
		{func(c *job.Config) { c.Topology, c.Workers = flagTopo(t, "star:hosts=4"), 4 }, "a wa job needs a host more, its aggregator, and the topology has 4 hosts"},
		{func(c *job.Config) {
			c.Mode, c.Compress = Ring, 10
			c.Topology = flagTopo(t, "star:hosts=2,gpus=2,intra=100G")
			c.Jobs = []job.JobSpec{{Ranks: []string{"h0:gpu0", "h0:gpu1", "h1:gpu0", "h1:gpu1"}}}
		}, "--compress: compressing jobs run on host NICs; h0:gpu0 is a GPU"},
	} {
		cfg := job.DefaultConfig()
		cfg.Mode = WA
		c.set(&cfg)
		var ce *job.ConfigError
		_, err := job.Run(cfg)
		require.ErrorAs(t, err, &ce, c.want)
		assert.Contains(t, err.Error(), c.want)
	}
}

func flagTopo(t *testing.T, s string) *topo.Topology {
	sp, err := topo.ParseFlag(s)
	require.NoError(t, err)
	tp, err := sp.Build(tenG())
	require.NoError(t, err)
	return tp
}

// TestExchangeTimesFollowTheModel is §VIII-D in packet mode (p = 4 and 8,
// 4 MiB, 10G star, no compression): the worker-aggregator job with the
// sum unicast, down a binomial tree, and streamed to a binomial tree over
// the workers (which is also the paper's formula as printed), and the
// ring, each within 5 % of
// its model term n·β (β: a byte's share of a full data frame on the
// wire, its message's RETH and immediate included; α and γ are
// negligible here, as the paper says). WA grows with p, the ring stays
// almost flat (Fig. 15).
func TestExchangeTimesFollowTheModel(t *testing.T) {
	const n = 4 << 20
	beta := func(cfg job.Config, msgB int) float64 {
		// Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, preamble+FCS+gap 24;
		// RETH (16) and ImmDt (4) once per message.
		wire := float64(cfg.MTU+82) + 20*float64(cfg.MTU)/float64(msgB)
		return wire / float64(cfg.MTU) * 8 / cfg.Link.Rate
	}
	times := map[string]float64{}
	for _, p := range []int{4, 8} {
		for _, c := range []struct {
			name  string
			mode  job.Mode
			bcast job.Bcast
			model func(commmodel.Exchange) commmodel.ExchangeTime
		}{
			{"wa unicast", WA, job.BcastUnicast, commmodel.WAUnicast},
			{"wa tree", WA, job.BcastTree, commmodel.WATree},
			{"wa worker-tree", WA, job.BcastWorkerTree, commmodel.WAWorkerTree},
			{"ring", Ring, "", commmodel.RingExchange},
		} {
			cfg := job.DefaultConfig()
			cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.Seed = c.mode, p, n, 1
			if c.bcast != "" {
				cfg.Bcast = c.bcast
			}
			msgB := cfg.MsgLen * cfg.MTU
			if c.mode == WA {
				msgB = waMsgB(cfg)
			}
			res, err := job.Run(cfg)
			require.NoError(t, err)
			require.True(t, res.Exact)
			got := float64(res.VirtualNS) / 1e9
			e := commmodel.Exchange{Workers: p, Bytes: n, Beta: beta(cfg, msgB)}
			want := c.model(e).Total
			times[fmt.Sprintf("%s %d", c.name, p)] = got
			assert.InEpsilon(t, want, got, 0.05, "%s p=%d", c.name, p)
			paper := ""
			if c.mode == WA {
				paper = fmt.Sprintf("; the paper's (p + log p)·n·β: %.3f ms (emulated/paper %.4f)", commmodel.WA(e).Total*1e3, got/commmodel.WA(e).Total)
			}
			if c.bcast == job.BcastWorkerTree { // §VIII-D as printed, log2 p an integer here
				assert.InEpsilon(t, commmodel.WA(e).Total, got, 0.05, "%s p=%d against the paper's formula", c.name, p)
			}
			t.Logf("%s p=%d: %.3f ms, model %.3f ms (%.4f)%s", c.name, p, got*1e3, want*1e3, got/want, paper)
		}
	}
	// Fig. 15: WA linear in p, the ring almost flat.
	wa := times["wa worker-tree 8"] / times["wa worker-tree 4"]
	ring := times["ring 8"] / times["ring 4"]
	assert.InEpsilon(t, 11.0/6, wa, 0.05, "WA from 4 to 8 workers")
	assert.InEpsilon(t, 1.75/1.5, ring, 0.05, "ring from 4 to 8 workers")
	t.Logf("from 4 to 8 workers: WA (worker-tree) x%.3f, WA (tree) x%.3f, WA (unicast) x%.3f, ring x%.3f",
		wa, times["wa tree 8"]/times["wa tree 4"], times["wa unicast 8"]/times["wa unicast 4"], ring)
}
