package netreduce_test

import (
	"hash/crc32"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/benchratio"
	"github.com/inaemu/inaemu/tensor"
)

// benchStream is a lock-step stream of 8 workers sending 256 messages of 4
// packets with 1 KiB payloads: for each message, each offset, each rank.
// Aggregators (2N = 8 messages per offset) are released and reused 31
// times over under the Safe rule.
func benchStream(tb testing.TB) (cfg netreduce.RingConfig, stream [][]byte, bytes int) {
	cfg = netreduce.RingConfig{ID: 0, Workers: 8, Window: 4, MsgLen: 4, MTU: 1024, DType: tensor.F32}
	c := newCluster(tb, cfg)
	const msgs = 256
	for m := 0; m < msgs; m++ {
		for off := 0; off < cfg.MsgLen; off++ {
			for r := 0; r < cfg.Workers; r++ {
				f := c.frame(r, m, off)
				stream = append(stream, f)
				bytes += len(f)
			}
		}
	}
	return cfg, stream, bytes
}

// BenchmarkAggregate8x1KiB measures the accelerator's ingress throughput
// (frames parsed and processed, results built and their ICRCs computed)
// beside the machine's raw limits on the same frames in the same run:
// hash/crc32 and memory copy. aggregate/x_crc32 is aggregation throughput
// over crc32 throughput on the same frames: the median of interleaved
// rounds within the aggregate sub-benchmark.
func BenchmarkAggregate8x1KiB(b *testing.B) {
	cfg, stream, total := benchStream(b)
	perFrame := int64(total / len(stream))

	// crcRate times crc32.ChecksumIEEE over the stream (bytes per second):
	// one untimed warm-up pass, then whole passes for at least 20 ms.
	crcRate := func() float64 {
		var sink uint32
		for _, f := range stream {
			sink += crc32.ChecksumIEEE(f)
		}
		n := 0
		start := time.Now()
		for n == 0 || time.Since(start) < 20*time.Millisecond {
			for _, f := range stream {
				sink += crc32.ChecksumIEEE(f)
			}
			n += total
		}
		d := time.Since(start)
		if sink == 1 {
			b.Log(sink)
		}
		return float64(n) / d.Seconds()
	}

	b.Run("aggregate", func(b *testing.B) {
		crc := crcRate()
		var acc *netreduce.Accelerator
		var v frames.View
		emits := 0
		emit := func([]byte, netreduce.Kind, *netreduce.RingConfig) { emits++ }
		i := 0
		// restart gives a fresh accelerator and feeds it the stream's first
		// round (CLT entries are created there), outside the timer.
		restart := func() {
			acc = netreduce.New()
			require.NoError(b, acc.AddRing(cfg))
			for i = 0; i < cfg.Workers; i++ {
				_ = v.Parse(stream[i])
				acc.Process(&v, srcPort(&v), emit)
			}
		}
		restart()
		// Rounds of chunk frames through the accelerator, each paired
		// with hash/crc32 over the same frames, the first of a pair
		// alternating; x_crc32 is the median of the pairs' ratios.
		const chunk = 256
		var rounds benchratio.Rounds
		var sink uint32
		aggregate := func(fs [][]byte) time.Duration {
			t0 := time.Now()
			for _, f := range fs {
				if v.Parse(f) != nil {
					b.Fatal("parse")
				}
				if acc.Process(&v, srcPort(&v), emit) != netreduce.Aggregated {
					b.Fatalf("frame %d not aggregated: %+v", i, acc.Stats())
				}
			}
			return time.Since(t0)
		}
		checksum := func(fs [][]byte) time.Duration {
			t0 := time.Now()
			for _, f := range fs {
				sink += crc32.ChecksumIEEE(f)
			}
			return time.Since(t0)
		}
		var processed int64
		b.SetBytes(perFrame)
		b.ReportAllocs()
		b.ResetTimer()
		for n, k := 0, 0; n < b.N; k++ {
			if i == len(stream) {
				b.StopTimer()
				restart()
				b.StartTimer()
			}
			fs := stream[i:min(i+chunk, len(stream), i+b.N-n)]
			i += len(fs)
			n += len(fs)
			for _, f := range fs {
				processed += int64(len(f))
			}
			rounds.Pair(k, func() time.Duration { return aggregate(fs) }, func() time.Duration { return checksum(fs) })
		}
		b.StopTimer()
		if d := rounds.Ours(); d > 0 {
			b.ReportMetric(float64(processed)*8/d.Seconds()/1e9, "Gb/s")
			b.ReportMetric(rounds.Ratio(), "x_crc32")
		}
		b.ReportMetric(crc*8/1e9, "crc32_Gb/s")
		if sink == 1 {
			b.Log(sink)
		}
	})

	b.Run("crc32", func(b *testing.B) {
		var sink uint32
		var processed int64
		b.SetBytes(perFrame)
		b.ReportAllocs()
		b.ResetTimer()
		for n := 0; n < b.N; n++ {
			f := stream[n%len(stream)]
			sink += crc32.ChecksumIEEE(f)
			processed += int64(len(f))
		}
		if el := b.Elapsed(); el > 0 {
			b.ReportMetric(float64(processed)*8/el.Seconds()/1e9, "Gb/s")
		}
		if sink == 1 {
			b.Log(sink)
		}
	})

	b.Run("copy", func(b *testing.B) {
		dst := make([]byte, 2048)
		var processed int64
		b.SetBytes(perFrame)
		b.ReportAllocs()
		b.ResetTimer()
		for n := 0; n < b.N; n++ {
			f := stream[n%len(stream)]
			processed += int64(copy(dst, f))
		}
		if el := b.Elapsed(); el > 0 {
			b.ReportMetric(float64(processed)*8/el.Seconds()/1e9, "Gb/s")
		}
	})
}
