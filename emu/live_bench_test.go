package emu

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tap"
)

// BenchmarkTAPPort measures the frames per second one TAP port sustains
// through the aggregating switch, beside a raw read/write loop on the same
// TAPs in the same run. Two ranks each stream one-packet NetReduce
// messages (1 KiB f32 payload) into their switch port through a Linux
// bridge; the switch adds them and sends every result out of the other
// port. The raw loop does the same I/O without the switch: it reads each
// port and writes the frame to the other. Metrics: port_fps (frames read
// per second on one port), raw_port_fps, and x_raw = port_fps / raw_port_fps.
// The timer runs over both halves (each op is one message per rank
// through the raw loop and one through the switch), so b.N grows as the
// I/O allows. Needs root; elsewhere it skips saying so. TAPs a killed run
// left behind are removed first.
func BenchmarkTAPPort(b *testing.B) {
	if err := tap.Usable(); err != nil {
		b.Skipf("SKIP tap benchmark: %v (run as root)", err)
	}
	topo := tap.Topology{Prefix: "inabench", Workers: 2}
	tap.Down(topo.Prefix) // what a killed run left behind
	b.Cleanup(func() { tap.Down(topo.Prefix) })
	if _, err := tap.Up(topo); err != nil {
		b.Fatal(err)
	}
	open := func(name string) tap.Device {
		d, err := tap.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	hosts := []tap.Device{open(topo.Host(0)), open(topo.Host(1))}
	defer hosts[0].Close()
	defer hosts[1].Close()

	b.ResetTimer()
	raw := measurePort(b, topo, hosts, func(ctx context.Context, ports []tap.Device) {
		var wg sync.WaitGroup
		for p := range ports {
			wg.Add(1)
			go func() { // the raw loop: read one port, write the other
				defer wg.Done()
				buf := make([]byte, tap.MaxFrame)
				for {
					n, err := ports[p].ReadFrame(buf)
					if err != nil || ports[1-p].WriteFrame(buf[:n]) != nil {
						return
					}
				}
			}()
		}
		<-ctx.Done()
		for _, d := range ports {
			d.Close()
		}
		wg.Wait()
	})
	sw := measurePort(b, topo, hosts, func(ctx context.Context, ports []tap.Device) {
		cfg := DefaultConfig()
		cfg.Workers, cfg.Window, cfg.MsgLen = 2, benchWindow, 1
		if _, err := live.ServeSwitch(ctx, cfg, ports, nil); err != nil {
			b.Error(err)
		}
	})
	b.ReportMetric(sw, "port_fps")
	b.ReportMetric(raw, "raw_port_fps")
	b.ReportMetric(sw/raw, "x_raw")
}

func waitForwarding(b *testing.B, topo tap.Topology) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for r := 0; r < topo.Workers; r++ {
		if err := tap.WaitUp(ctx, topo.Host(r), topo.SwitchPort(r)); err != nil {
			b.Fatal(err)
		}
	}
}

// benchWindow is the NetReduce window N of the benchmark's ring (the most
// the switch allows) and the messages each rank keeps in flight.
const benchWindow = 32

// measurePort runs serve on the switch ports while the two ranks stream
// b.N messages each, and returns the frames per second one port read.
func measurePort(b *testing.B, topo tap.Topology, hosts []tap.Device, serve func(ctx context.Context, ports []tap.Device)) float64 {
	ports := []tap.Device{}
	for r := 0; r < 2; r++ {
		d, err := tap.Open(topo.SwitchPort(r))
		if err != nil {
			b.Fatal(err)
		}
		ports = append(ports, d)
	}
	waitForwarding(b, topo)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() { serve(ctx, ports); close(served) }()
	defer func() { cancel(); <-served; ports[0].Close(); ports[1].Close() }()

	// Each rank keeps at most a window of messages without a result, as
	// NetReduce hosts do (more would run ahead into aggregators still held).
	const credit = benchWindow
	n := b.N
	credits := []chan struct{}{make(chan struct{}, credit), make(chan struct{}, credit)}
	for r := range credits {
		for range credit {
			credits[r] <- struct{}{}
		}
	}
	var wg sync.WaitGroup
	var once sync.Once
	fail := func(f string, a ...any) { // unblock every reader and stop
		b.Errorf(f, a...)
		once.Do(func() { hosts[0].Close(); hosts[1].Close() })
	}
	start := time.Now()
	for r := 0; r < 2; r++ {
		wg.Add(2)
		go func() { // rank r's sender: message m, built as it goes
			defer wg.Done()
			bld, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: HostMAC(r), DstMAC: HostMAC(1 - r),
				SrcIP: nic.Addr(frames.V2IPv4, r, 0), DstIP: nic.Addr(frames.V2IPv4, 1-r, 0), DestQP: RecvQPN})
			if err != nil {
				fail("%v", err)
				return
			}
			payload := make([]byte, 1024-wire.INALen)
			buf := make([]byte, tap.MaxFrame)
			for m := 0; m < n; m++ {
				select {
				case <-credits[r]:
				case <-time.After(10 * time.Second):
					fail("rank %d: no frame back for 10s after %d messages (lost)", r, m)
					return
				}
				k, err := bld.Build(buf, &frames.Packet{Opcode: wire.WriteOnlyWithImm, PSN: uint32(m) & 0xFFFFFF, AckReq: true,
					RETH: frames.RETHFields{VA: RecvBaseVA, RKey: 0x1000 + uint32(1-r), DMALen: 1024}, Imm: uint32(m),
					HasINA: true, INA: frames.INAFields{MsgID: uint8(m), MsgLen: 1, Rank: uint8(r)}, Payload: payload})
				if err == nil {
					err = hosts[r].WriteFrame(buf[:k])
				}
				if err != nil {
					fail("%v", err)
					return
				}
			}
		}()
		go func() { // what reaches host r came from rank 1-r's stream
			defer wg.Done()
			buf := make([]byte, tap.MaxFrame)
			for got := 0; got < n; {
				k, err := hosts[r].ReadFrame(buf)
				if err != nil {
					fail("%v", err)
					return
				}
				if k > 14 && buf[12] == 0x08 && buf[13] == 0x00 { // IPv4: a result (or a raw copy), not ARP
					got++
					credits[1-r] <- struct{}{}
				}
			}
		}()
	}
	wg.Wait()
	return float64(n) / time.Since(start).Seconds()
}
