package emu

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/tensor"
	"github.com/inaemu/inaemu/tap"
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

func liveConfig(mode Mode, n int) Config {
	cfg := DefaultConfig()
	cfg.Workers, cfg.Mode, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = n, mode, 256<<10, 16, 5
	cfg.Timeout = 14 // wall-clock timers: generous under a loaded test machine
	cfg.MaxVirtual = time.Minute
	return cfg
}

func TestLiveJobOverPipesIsExact(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring} {
		t.Run(mode.String(), func(t *testing.T) {
			cfg := liveConfig(mode, 4)
			cfg.DType = tensor.F16
			hosts, ports := pipeStar(4)
			cfg.Devices = &Devices{Hosts: hosts, Switch: ports}
			res, err := Run(cfg)
			require.NoError(t, err)
			require.True(t, res.Exact, "mismatch %+v", res.Mismatch)
			require.Positive(t, res.VirtualNS)
			if mode == NetReduce {
				require.Positive(t, res.Switch.Aggregations)
				require.EqualValues(t, 4*res.Switch.Aggregations, res.Switch.Packets, "every aggregator took one packet of each rank")
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
			swDone := make(chan SwitchReport, 1)
			ready := make(chan struct{})
			go func() {
				rep, err := ServeSwitch(ctx, liveConfig(mode, n), ports, func() { close(ready) })
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
				cfg.Devices = &Devices{Hosts: devs}
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
				require.Positive(t, rep.Aggregations)
			} else {
				require.Zero(t, rep.Aggregations)
				require.Positive(t, rep.Forwarded)
			}
		})
	}
}
