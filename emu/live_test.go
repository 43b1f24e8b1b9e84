package emu

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
	"github.com/inaemu/inaemu/tensor"
	"github.com/stretchr/testify/require"
)

// pipeStar joins host r's NIC and switch port r with a fake link each
// (tap.Pipe): the live backend without privileges.
func pipeStar(n int) (hosts, ports []tap.Device) {
	for r := 0; r < n; r++ {
		h, p := tap.Pipe("h", "sw", 8192)
		hosts, ports = append(hosts, h), append(ports, p)
	}
	return hosts, ports
}

// liveTimeout is the live tests' ACK timeout exponent: 4.096 µs × 2^20 ≈
// 4.3 s. The timers are wall-clock, and one event loop does the work of
// every host and switch port: NICs write their bursts unpaced, so a frame
// waits its turn behind every frame in flight, once per hop and four hops
// per round trip. Under -race on a loaded machine a frame was seen waiting
// 200 ms in one hop's queue (a round trip near 1 s), so the former
// 2^14 ≈ 67 ms timed out for nothing, and the go-back-N resends
// lengthened the queues until a QP ran out of retries. Pipes lose no frame,
// so an exact job needs no timer at all; the exponent only has to outlast
// the slowest round trip plus a scheduler stall of seconds.
const liveTimeout = 20

func liveConfig(mode Mode, n int) Config {
	cfg := DefaultConfig()
	cfg.Workers, cfg.Mode, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = n, mode, 256<<10, 16, 5
	cfg.Timeout = liveTimeout
	// The wall-clock bound: a loaded -race run takes a few seconds, and
	// even a lost frame would be resent (one timeout) well within it.
	cfg.MaxVirtual = testtool.Budget(time.Minute)
	return cfg
}

func TestLiveJobOverPipesIsExact(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := liveConfig(mode, 4)
			cfg.DType = tensor.F16
			hosts, ports := pipeStar(4)
			cfg.Devices = &live.Devices{Hosts: hosts, Switch: ports}
			res, err := Run(cfg)
			require.NoError(t, err)
			require.True(t, res.Exact, "mismatch %+v", res.Mismatch)
			require.Positive(t, res.VirtualNS)
			// Pipes are lossless: a resend means a lost frame or a
			// timeout shorter than a round trip (see liveTimeout).
			require.Zero(t, res.Timeouts, "ACK timeouts (wall %v)", res.Wall)
			require.Zero(t, res.Retransmissions, "retransmissions (wall %v)", res.Wall)
			if mode == NetReduce {
				require.Positive(t, netreduce.StatsOf(res.Switch).Aggregations)
				require.EqualValues(t, 4*netreduce.StatsOf(res.Switch).Aggregations, netreduce.StatsOf(res.Switch).Packets, "every aggregator took one packet of each rank")
			}
		})
	}
}

// TestLiveSplitAcrossRunners runs a job the way separate processes do: the
// switch in ServeSwitch, each rank in its own Run that knows only its
// device. The start barrier must hold every rank until all are up, however
// late each starts.
func TestLiveSplitAcrossRunners(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring} {
		t.Run(mode.String(), func(t *testing.T) {
			const n = 3
			hosts, ports := pipeStar(n)
			ctx, cancel := context.WithCancel(context.Background())
			swDone := make(chan switching.Report, 1)
			ready := make(chan struct{})
			go func() {
				rep, err := live.ServeSwitch(ctx, liveConfig(mode, n), ports, func() { close(ready) })
				if err != nil {
					t.Errorf("switch: %v", err)
				}
				swDone <- rep
			}()
			<-ready
			var wg sync.WaitGroup
			results := make([]*Result, n)
			errs := make([]error, n)
			for r := n - 1; r >= 0; r-- { // the last rank first: the others join while it waits
				cfg := liveConfig(mode, n)
				devs := make([]tap.Device, n)
				devs[r] = hosts[r]
				cfg.Devices = &live.Devices{Hosts: devs}
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[r], errs[r] = Run(cfg)
				}()
			}
			wg.Wait()
			cancel()
			rep := <-swDone
			for r := range n {
				require.NoError(t, errs[r], "rank %d", r)
				require.True(t, results[r].Exact, "rank %d: %+v", r, results[r].Mismatch)
			}
			if mode == NetReduce {
				require.Positive(t, netreduce.StatsOf(rep).Aggregations)
			} else {
				require.Zero(t, netreduce.StatsOf(rep).Aggregations)
				require.Positive(t, rep.Forwarded)
			}
		})
	}
}
