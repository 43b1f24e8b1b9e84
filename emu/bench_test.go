package emu

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkRun measures the emulator's own speed on whole jobs: 8 workers
// on 10G links. virt/wall is virtual time emulated per wall-clock second
// (above 1: faster than the real network would be); grad_Gbps is the
// gradient payload all workers push through the switch per wall second.
func BenchmarkRun(b *testing.B) {
	for _, mode := range []Mode{NetReduce, Ring} {
		b.Run(fmt.Sprintf("mode=%v/workers=8/10G/tensor=4MiB", mode), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Mode, cfg.TensorBytes, cfg.Seed = mode, 4<<20, 1
			var virt, wall time.Duration
			b.ReportAllocs()
			b.SetBytes(int64(cfg.Workers) * cfg.TensorBytes)
			for i := 0; i < b.N; i++ {
				res, err := Run(cfg)
				if err != nil || !res.Exact {
					b.Fatalf("run failed: %v", err)
				}
				virt += time.Duration(res.VirtualNS)
				wall += res.Wall
			}
			b.ReportMetric(float64(virt)/float64(wall), "virt/wall")
			b.ReportMetric(float64(b.N)*float64(cfg.Workers)*float64(cfg.TensorBytes)*8/wall.Seconds()/1e9, "grad_Gbps")
		})
	}
}

// BenchmarkEventLoop is the same job without its setup (tensor generation,
// buffer allocation) and check: only the emulation of the network.
func BenchmarkEventLoop(b *testing.B) {
	for _, mode := range []Mode{NetReduce, Ring} {
		b.Run(fmt.Sprintf("mode=%v/workers=8/10G/tensor=4MiB", mode), func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.Mode, cfg.TensorBytes, cfg.Seed, cfg.MaxVirtual = mode, 4<<20, 1, time.Minute
			var virt, wall time.Duration
			b.ReportAllocs()
			b.SetBytes(int64(cfg.Workers) * cfg.TensorBytes)
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				r := startJob(b, cfg)
				b.StartTimer()
				t0 := time.Now()
				res := r.Loop()
				wall += time.Since(t0)
				if err := r.Err(); err != nil {
					b.Fatal(err)
				}
				virt += time.Duration(res.VirtualNS)
			}
			b.ReportMetric(float64(virt)/float64(wall), "virt/wall")
			b.ReportMetric(float64(b.N)*float64(cfg.Workers)*float64(cfg.TensorBytes)*8/wall.Seconds()/1e9, "grad_Gbps")
		})
	}
}
