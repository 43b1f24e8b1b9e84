package experiment

import (
	"hash/crc32"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/internal/benchratio"
)

// BenchmarkINAPS is the emulator's speed on INA-PS jobs: 2 jobs × 8
// workers of a 2-layer model under ESA. Each round pairs one run with
// hash/crc32 over as many 308-byte frames as the run moved across links
// (every hop of every frame), the first of a pair alternating; x_crc32
// is the median of the pairs' speed ratios (raw time / our time): how
// close the whole emulation of a frame's hop (queues, the switch's
// aggregation, the hosts, the oracle's check) comes to checksumming it
// once. frames/s is link hops per wall second. ESA's 8 × 8 DNN A
// iteration is 4.13 M gradient fragments and as many results.
func BenchmarkINAPS(b *testing.B) {
	m := smallModel(b, 62*20000)
	cfg := Config{Policy: inaps.ESA, Jobs: []JobSpec{{"a", m, 8}, {"b", m, 8}}, Seed: 1, StartSpread: time.Millisecond, Jitter: 300 * time.Microsecond}
	frame := make([]byte, inaps.FrameLen)
	var rounds benchratio.Rounds
	var sink uint32
	var hops, n uint64 // n: one run's hops (the runs are deterministic: the same each time)
	var wall time.Duration
	b.ReportAllocs()
	for k := 0; k < b.N; k++ {
		rounds.Pair(k, func() time.Duration {
			t0 := time.Now()
			r, err := Run(cfg)
			d := time.Since(t0)
			if err != nil || !r.Exact {
				b.Fatalf("run: %v %v", err, r.Failures)
			}
			n = r.Links.Frames
			wall += d
			hops += n
			return d
		}, func() time.Duration {
			t0 := time.Now()
			for i := uint64(0); i < n; i++ {
				sink += crc32.ChecksumIEEE(frame)
			}
			return time.Since(t0)
		})
	}
	if sink == 1 {
		b.Log(sink)
	}
	b.ReportMetric(rounds.Ratio(), "x_crc32")
	b.ReportMetric(float64(hops)/wall.Seconds(), "frames/s")
}
