package faultwire_test

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/inaemu/inaemu/faultwire"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/benchratio"
	"github.com/inaemu/inaemu/tap"
)

// BenchmarkWire measures what the fault-injecting wire adds, beside a raw
// read/write loop in the same run. Two wired pairs (TAPs without a
// bridge): the benchmark holds each pair's host TAP and device TAP, and
// each device echoes every frame back. Pair 0 is joined by the wire (no
// faults), pair 1 by the raw loop (one goroutine per direction: read a
// raw socket, write the other); both joiners read raw sockets on their
// TAPs, and the wire runs on the same event loop as in a run. Frames are
// 1 KiB RoCEv2 WRITEs, so the wire parses each and passes it through its
// fault stages.
//
// The two are measured in alternation, never at once: single frames in
// ping-pong, one on each pair in turn (each round trip crosses the joiner
// twice), then a stream of frames with a window in flight on each pair in
// turn (the order alternating by round). Metrics: wire_rtt_us and
// raw_rtt_us (median round trips), added_us (the median over the pings
// of the wire's round trip minus the raw loop's next to it, per
// crossing), wire_fps and raw_fps (median echoed frames per second of a
// round's stream) and x_raw (the median of the rounds' wire/raw rate
// ratios). Needs root; elsewhere it skips saying so.
func BenchmarkWire(b *testing.B) {
	if err := tap.Usable(); err != nil {
		b.Skipf("SKIP wire benchmark: %v (run as root)", err)
	}
	topo := tap.Topology{Prefix: "inawbench", Workers: 2, Wired: true}
	tap.Down(topo.Prefix) // what a killed run left behind
	b.Cleanup(func() { tap.Down(topo.Prefix) })
	if _, err := tap.Up(topo); err != nil {
		b.Fatal(err)
	}
	var meters [2]*wireMeter // [wire, raw]
	for r := range 2 {
		meters[r] = newWireMeter(b, openTAP(b, topo.Host(r)))
		startEcho(b, openTAP(b, topo.SwitchPort(r)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := tap.WaitUp(ctx, topo.Host(0), topo.SwitchPort(0), topo.Host(1), topo.SwitchPort(1))
	cancel()
	if err != nil {
		b.Fatal(err)
	}
	socket := func(name string) tap.Device {
		d, err := tap.OpenSocket(name)
		if err != nil {
			b.Fatal(err)
		}
		return d
	}
	stopWire := serveWire(b, socket(topo.Host(0)), socket(topo.SwitchPort(0)))
	defer stopWire()
	stopRaw := serveRaw(socket(topo.Host(1)), socket(topo.SwitchPort(1)))
	defer stopRaw()

	var fps benchratio.Rounds
	var rtt, dur [2][]time.Duration
	var added []time.Duration
	for k := 0; k < b.N; k++ {
		for i := range pingPongs {
			var t [2]time.Duration
			first := (k + i) % 2
			t[first] = meters[first].ping()
			t[1-first] = meters[1-first].ping()
			rtt[0], rtt[1] = append(rtt[0], t[0]), append(rtt[1], t[1])
			added = append(added, (t[0]-t[1])/2)
		}
		var d [2]time.Duration
		fps.Pair(k, func() time.Duration {
			d[0] = meters[0].stream(streamFrames, streamWindow)
			return d[0]
		}, func() time.Duration {
			d[1] = meters[1].stream(streamFrames, streamWindow)
			return d[1]
		})
		dur[0], dur[1] = append(dur[0], d[0]), append(dur[1], d[1])
	}
	b.ReportMetric(us(median(rtt[0])), "wire_rtt_us")
	b.ReportMetric(us(median(rtt[1])), "raw_rtt_us")
	b.ReportMetric(us(median(added)), "added_us")
	b.ReportMetric(streamFrames/median(dur[0]).Seconds(), "wire_fps")
	b.ReportMetric(streamFrames/median(dur[1]).Seconds(), "raw_fps")
	b.ReportMetric(fps.Ratio(), "x_raw")
}

func openTAP(b *testing.B, name string) tap.Device {
	d, err := tap.Open(name)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// startEcho plays a device that sends every frame straight back.
func startEcho(b *testing.B, dev tap.Device) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, tap.MaxFrame)
		for {
			n, err := dev.ReadFrame(buf)
			if err != nil || dev.WriteFrame(buf[:n]) != nil {
				return
			}
		}
	}()
	b.Cleanup(func() { dev.Close(); <-done })
}

// A round's sizes: single frames for the latency, a stream for the rate.
const (
	pingPongs    = 100
	streamFrames = 1000
	streamWindow = 64
)

// serveWire runs a wire with no faults on the sockets until the returned
// stop is called.
func serveWire(b *testing.B, h, d tap.Device) func() {
	w, err := faultwire.New(faultwire.Config{Pairs: []faultwire.Pair{{Host: h, Device: d}}, Seed: 1})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Serve(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("wire: %v", err)
		}
	}
}

// serveRaw is the raw loop: each direction read from one socket and
// written to the other, nothing else.
func serveRaw(h, d tap.Device) func() {
	var wg sync.WaitGroup
	for _, p := range [][2]tap.Device{{h, d}, {d, h}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, tap.MaxFrame)
			for {
				n, err := p[0].ReadFrame(buf)
				if err != nil || p[1].WriteFrame(buf[:n]) != nil {
					return
				}
			}
		}()
	}
	return func() { h.Close(); d.Close(); wg.Wait() }
}

// wireMeter sends numbered frames from the host's TAP and counts them
// back. A frame's number is its PSN (24 bits; a round's numbers continue
// the last round's), so an echo a stopped joiner left in flight is told
// from the current round's and skipped. One reader goroutine hands the
// numbers of the frames coming back to recv.
type wireMeter struct {
	b     *testing.B
	host  tap.Device
	frame []byte
	bth   wire.BTH // frame's BTH, where its number goes
	seq   uint32
	back  chan uint32
	stall *time.Timer
}

func newWireMeter(b *testing.B, host tap.Device) *wireMeter {
	m := &wireMeter{b: b, host: host, frame: benchFrame(b), back: make(chan uint32, 4*streamWindow), stall: time.NewTimer(time.Hour)}
	var v frames.View
	if err := v.Parse(m.frame); err != nil {
		b.Fatal(err)
	}
	m.bth = v.BTH()
	go func() { // ends when the host's TAP is closed
		buf := make([]byte, tap.MaxFrame)
		for {
			n, err := host.ReadFrame(buf)
			if err != nil {
				close(m.back)
				return
			}
			var v frames.View
			if v.Parse(buf[:n]) == nil { // ours (the kernel may speak too)
				m.back <- v.PSN()
			}
		}
	}()
	return m
}

// send writes frame number seq.
func (m *wireMeter) send(seq uint32) {
	m.bth.SetPSN(seq) // its low 24 bits
	if err := m.host.WriteFrame(m.frame); err != nil {
		m.b.Fatal(err)
	}
}

// recv waits for a frame numbered at least from to come back and returns
// its number. A stalled joiner fails the benchmark instead of hanging it.
func (m *wireMeter) recv(from uint32) uint32 {
	m.stall.Reset(10 * time.Second)
	defer m.stall.Stop()
	for {
		select {
		case seq, ok := <-m.back:
			if !ok {
				m.b.Fatal("host TAP closed")
			}
			if (seq-from)&0xFFFFFF < 1<<23 {
				return seq
			}
		case <-m.stall.C:
			m.b.Fatalf("no echo of frame %d for 10s: the joiner lost it", from)
		}
	}
}

// ping returns the round trip of one frame.
func (m *wireMeter) ping() time.Duration {
	m.seq++
	start := time.Now()
	m.send(m.seq)
	for m.recv(m.seq) != m.seq {
	}
	return time.Since(start)
}

// stream echoes n frames keeping window of them in flight and returns how
// long it took. The joiners lose nothing at this window (the sockets'
// queues are deep); a lost frame stalls the round and fails it.
func (m *wireMeter) stream(n, window int) time.Duration {
	first := m.seq + 1
	start := time.Now()
	sent, got := 0, 0
	for got < n {
		for sent < n && sent-got < window {
			m.seq++
			m.send(m.seq)
			sent++
		}
		if seq := m.recv(first); seq != (first+uint32(got))&0xFFFFFF {
			m.b.Fatalf("echo %d came back %dth: frames were lost or reordered", seq-first, got)
		}
		got++
	}
	return time.Since(start)
}

// benchFrame is a 1 KiB-payload RoCEv2 RDMA WRITE Only.
func benchFrame(b *testing.B) []byte {
	bld, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4,
		SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), DestQP: 0x11})
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, tap.MaxFrame)
	n, err := bld.Build(buf, &frames.Packet{Opcode: wire.WriteOnly, RETH: frames.RETHFields{VA: 0x1000, RKey: 1, DMALen: 1024},
		Payload: make([]byte, 1024)})
	if err != nil {
		b.Fatal(err)
	}
	return buf[:n]
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// The benchmark runs in make test too (as root; once, for a second):
// every frame comes back through both joiners and every metric is there.
func TestWireBenchmarkRuns(t *testing.T) {
	if err := tap.Usable(); err != nil {
		t.Skipf("SKIP wire benchmark run: %v (run as root)", err)
	}
	r := testing.Benchmark(BenchmarkWire)
	if r.N == 0 {
		t.Fatal("the benchmark failed (its log is above)")
	}
	for _, m := range []string{"wire_rtt_us", "raw_rtt_us", "wire_fps", "raw_fps", "x_raw"} {
		if r.Extra[m] <= 0 {
			t.Errorf("%s = %v", m, r.Extra[m])
		}
	}
	t.Logf("%s", r)
}
