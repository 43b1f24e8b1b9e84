package collective

import (
	"encoding/binary"
	"fmt"
	"github.com/inaemu/inaemu/emu/job"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/internal/inceptionnref"
	"github.com/inaemu/inaemu/tensor"
)

// The compressing ring is checked here against a reference of the
// paper's algorithms in terms of values (internal/inceptionnref, not the
// codec's bits): every hop through the NICs maps each packet's floats to
// what Algorithms 2 and 3 give back, unless the packet's packed form
// would not be shorter, in which case it travels as it is.

// refTrip is one trip of a message's floats through the engines
// (internal/inceptionnref, written from the algorithms' values).
func refTrip(k, mtu int, v []float32) { inceptionnref.TripPackets(k, mtu, v) }

// refCompressedRing is every rank's result of a compressing ring of n
// ranks over tensors of elems float32s: chunk c (elements
// elems*c/n..elems*(c+1)/n), message by message (msgB bytes), is rank
// c's piece, tripped, plus rank c+1's, tripped, ... plus rank c+n-1's,
// tripped once more; every rank holds the same.
func refCompressedRing(k, n, mtu, msgB int, elems int64, in [][]float32) []float32 {
	out := make([]float32, elems)
	for c := 0; c < n; c++ {
		lo, hi := elems*int64(c)/int64(n), elems*int64(c+1)/int64(n)
		for m := lo; m < hi; m += int64(msgB / 4) {
			e := min(m+int64(msgB/4), hi)
			sum := append([]float32(nil), in[c][m:e]...)
			for i := 1; i < n; i++ {
				refTrip(k, mtu, sum)
				for j := range sum {
					sum[j] += in[(c+i)%n][m+int64(j)]
				}
			}
			refTrip(k, mtu, sum)
			copy(out[m:e], sum)
		}
	}
	return out
}

// ringResults runs cfg and collects every rank's result (a ring job's
// copies of each chunk as the ranks keep them).
func ringResults(t *testing.T, cfg job.Config) (*job.Result, [][]float32) {
	t.Helper()
	n := cfg.Workers
	elems := cfg.TensorBytes / 4
	got := make([][]float32, n)
	for r := range got {
		got[r] = make([]float32, elems)
	}
	msgB := cfg.MsgLen * cfg.MTU
	ringTamper = func(rank, step, msg int, out []byte) {
		if step < n-2 {
			return
		}
		// The chunk rank receives in step s: its predecessor sends chunk
		// (r-1-s) mod n in reduce-scatter, (r-1+1-(s-(n-1))) mod n after.
		c := ((rank-1-step)%n + n) % n
		if step >= n-1 {
			c = ((rank-(step-(n-1)))%n + n) % n
		}
		at := elems*int64(c)/int64(n) + int64(msg*msgB/4)
		for i := 0; i+4 <= len(out); i += 4 {
			got[rank][at+int64(i/4)] = math.Float32frombits(binary.LittleEndian.Uint32(out[i:]))
		}
	}
	defer func() { ringTamper = nil }()
	res, err := job.Run(cfg)
	require.NoError(t, err)
	return res, got
}

func inputs(cfg job.Config) [][]float32 {
	in := make([][]float32, cfg.Workers)
	buf := make([]byte, cfg.TensorBytes)
	for r := range in {
		workload.NewStream(tensor.F32, cfg.Pattern, r, cfg.Seed).Fill(buf)
		in[r] = make([]float32, cfg.TensorBytes/4)
		for i := range in[r] {
			in[r][i] = math.Float32frombits(binary.LittleEndian.Uint32(buf[4*i:]))
		}
	}
	return in
}

func sameBits(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }

// TestCompressedRingIsTheReference: for 2 to 5 ranks, bounds 2^-6, 2^-8
// and 2^-10, tensors whose chunks and messages end mid-packet, and
// patterns whose packets compress (random) and do not (ones: every
// value 32 bits, sent as it is), every rank's result is, bit for bit, the
// reference's; the job's own check agrees, and its reported error is the
// reference's distance from the exact sum.
func TestCompressedRingIsTheReference(t *testing.T) {
	cases := 0
	for _, n := range []int{2, 3, 4, 5} {
		for _, k := range []int{6, 8, 10} {
			for _, pat := range []workload.Pattern{workload.Random, workload.Ones} {
				cfg := job.DefaultConfig()
				cfg.Mode, cfg.Workers, cfg.Compress, cfg.Pattern, cfg.Seed = Ring, n, k, pat, uint64(10*n+k)
				// Chunks of 1000+ floats in messages of 192: last packets of
				// every length, one float among them.
				cfg.MTU, cfg.MsgLen, cfg.TensorBytes = 256, 3, int64(4*(1000*n+37))
				if n == 3 {
					cfg.Transport = frames.V1
				}
				res, got := ringResults(t, cfg)
				name := fmt.Sprintf("n=%d k=%d %s", n, k, pat)
				require.True(t, res.Exact, "%s: the job's own check: %+v", name, res.Mismatch)
				require.Zero(t, res.NAKs+res.Retransmissions, "%s: no fault, so no NAK and no retransmission", name)
				want := refCompressedRing(k, n, cfg.MTU, cfg.MsgLen*cfg.MTU, cfg.TensorBytes/4, inputs(cfg))
				for r := range got {
					for i := range want {
						if !sameBits(got[r][i], want[i]) {
							t.Fatalf("%s: rank %d element %d is %v, the reference %v", name, r, i, got[r][i], want[i])
						}
					}
				}
				c := res.Jobs[0].Compression
				require.NotNil(t, c, name)
				if pat == workload.Ones {
					assert.Zero(t, c.Compressed, "%s: 1.0 takes 32 bits: no packet shrinks", name)
					assert.Positive(t, c.Uncompressed, name)
					assert.Zero(t, c.MaxAbsErr, "%s: sent as they were, exact", name)
				} else {
					assert.Positive(t, c.Compressed, name)
					assert.Greater(t, c.PayloadRatio, 1.0, name)
				}
				cases++
			}
		}
	}
	t.Logf("%d compressing rings matched the reference bit for bit", cases)
}

// TestCompressedRingErrorBound: every result of a ring of four is within
// 4·ε of the exact sum, ε = max(2^-k, 2^-7) per trip (four trips, each
// losing less than ε; values at or above 1 travel whole), and the job
// reports the largest distance.
func TestCompressedRingErrorBound(t *testing.T) {
	for _, k := range []int{6, 8, 10} {
		cfg := job.DefaultConfig()
		cfg.Mode, cfg.Workers, cfg.Compress, cfg.Seed, cfg.TensorBytes = Ring, 4, k, 3, 64<<10
		cfg.Pattern = workload.Random
		res, got := ringResults(t, cfg)
		require.True(t, res.Exact)
		in := inputs(cfg)
		eps := math.Max(math.Ldexp(1, -k), math.Ldexp(1, -7))
		worst := 0.0
		for i := range got[0] {
			exact := 0.0
			for r := range in {
				exact += float64(in[r][i])
			}
			worst = math.Max(worst, math.Abs(float64(got[0][i])-exact))
		}
		c := res.Jobs[0].Compression
		assert.LessOrEqual(t, worst, 4*eps+1e-5, "k=%d", k)
		assert.InDelta(t, worst, c.MaxAbsErr, 1e-5, "k=%d: the report is the distance from the exact sum", k)
		t.Logf("k=%d: max |error| %.4g (bound 4·ε = %.4g), payload %.2fx wire %.2fx", k, worst, 4*eps, c.PayloadRatio, c.WireRatio)
	}
}

// TestCompressedRingRecovers: loss, corruption, duplicates and
// reordering on every link end, through go-back-N, with the very values
// of the loss-free compressed run.
func TestCompressedRingRecovers(t *testing.T) {
	base := job.DefaultConfig()
	base.Mode, base.Workers, base.Compress, base.Seed, base.TensorBytes, base.MsgLen = Ring, 4, 8, 5, 256<<10, 8
	_, clean := ringResults(t, base)
	for _, spec := range []string{"loss 2%", "corrupt 2%", "duplicate 3%", "reorder 5% gap 3", "loss 1% corrupt 1% duplicate 1%"} {
		cfg := base
		ne, err := faults.ParseNetem(spec)
		require.NoError(t, err)
		cfg.Netem = ne
		res, got := ringResults(t, cfg)
		require.True(t, res.Exact, spec)
		assert.Positive(t, res.Faults.Lost+res.Faults.Corrupted+res.Faults.Duplicated+res.Faults.Reordered, spec)
		for r := range got {
			for i := range got[r] {
				if !sameBits(got[r][i], clean[r][i]) {
					t.Fatalf("%s: rank %d element %d is %v, loss-free %v", spec, r, i, got[r][i], clean[r][i])
				}
			}
		}
		t.Logf("%s: %d retransmitted, %d NAKs, %d timeouts, %d ICRC drops: the loss-free values", spec, res.Retransmissions, res.NAKs, res.Timeouts, res.ICRCDrops)
	}
}

// TestHopsReport: rings over Table III's class shares (every network and
// bound, 4 KiB packets): the gradient hop's codec ratio (32 over its mean
// bits, Table III's measure) is within 1 % of what the table implies,
// and its payload ratio, with each packet's length prefix and padding,
// within 2 % of it and below; the hops' class counts, made by the
// job from what it posts, add up to what the NICs' engines counted; the
// all-gather's hops carry sums the owner already tripped, so they change
// nothing; partial sums compress differently from gradients.
func TestHopsReport(t *testing.T) {
	for _, net := range []string{"alexnet", "hdc", "resnet50", "vgg16"} {
		for _, k := range []int{6, 8, 10} {
			cfg := job.DefaultConfig()
			cfg.Mode, cfg.Workers, cfg.Compress, cfg.Seed, cfg.TensorBytes = Ring, 4, k, uint64(k), 1<<20
			cfg.MTU, cfg.MsgLen = 4096, 4
			p, err := job.ParsePattern("table3:" + net)
			require.NoError(t, err)
			cfg.Pattern = p
			res, err := job.Run(cfg)
			require.NoError(t, err)
			require.True(t, res.Exact)
			require.Zero(t, res.Retransmissions, "the engines count retransmitted values too: none here")
			c := res.Jobs[0].Compression
			require.Len(t, c.Hops, 6)
			require.Len(t, c.Carried, 3)
			g, ps, sums := c.Carried[0], c.Carried[1], c.Carried[2]
			require.Equal(t, []string{"gradients", "partial sums", "sums"}, []string{g.Carries, ps.Carries, sums.Carries})

			row := inceptionn.Table3[net][k]
			total := row[0] + row[1] + row[2] + row[3]
			implied := 32 * total / (2*row[0] + 10*row[1] + 18*row[2] + 34*row[3])
			codecRatio := 32 * float64(g.Values) / float64(g.Classes.Bits())
			assert.InEpsilon(t, implied, codecRatio, 0.01, "%s 2^-%d: gradients' codec ratio", net, k)
			assert.InEpsilon(t, codecRatio, g.PayloadRatio, 0.02, "%s 2^-%d: gradients' payload ratio", net, k)
			assert.Less(t, g.PayloadRatio, codecRatio, "%s 2^-%d: framing costs", net, k)

			var sum inceptionn.Histogram
			for _, h := range c.Hops {
				sum.Add(h.Classes)
			}
			assert.Equal(t, c.Classes, sum, "%s 2^-%d: the hops' classes are the engines'", net, k)
			assert.Zero(t, sums.MaxAbsErr, "%s 2^-%d: sums are projections already", net, k)
			assert.NotEqual(t, g.Classes, ps.Classes)
			t.Logf("%s 2^-%d: gradients %.2fx codec, %.2fx payload (Table III %.2fx), partial sums %.2fx, sums %.2fx; wire %.2fx/%.2fx/%.2fx",
				net, k, codecRatio, g.PayloadRatio, implied, ps.PayloadRatio, sums.PayloadRatio, g.WireRatio, ps.WireRatio, sums.WireRatio)
		}
	}
}
