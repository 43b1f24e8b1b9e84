package faultwire_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/faultwire"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// bench is a wire on pipes: the test plays each pair's host and device.
type bench struct {
	t      *testing.T
	hosts  []tap.Device // the test's end of each host side
	devs   []tap.Device // the test's end of each device side
	w      *faultwire.Wire
	cap    bytes.Buffer
	done   chan error
	cancel context.CancelFunc
}

func newBench(t *testing.T, pairs int, netem string, events ...string) *bench {
	t.Helper()
	b := &bench{t: t, done: make(chan error, 1)}
	cfg := faultwire.Config{Seed: 7, Capture: &b.cap}
	for range pairs {
		h, hw := tap.Pipe("host", "wire-h", 4096)
		d, dw := tap.Pipe("dev", "wire-d", 4096)
		b.hosts, b.devs = append(b.hosts, h), append(b.devs, d)
		cfg.Pairs = append(cfg.Pairs, faultwire.Pair{Host: hw, Device: dw})
	}
	var err error
	cfg.Netem, err = faults.ParseNetem(netem)
	require.NoError(t, err)
	for _, s := range events {
		e, err := faults.Parse(s)
		require.NoError(t, err)
		cfg.Events = append(cfg.Events, e)
	}
	b.w, err = faultwire.New(cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() { b.done <- b.w.Serve(ctx) }()
	return b
}

// stop ends the wire and returns the capture's records.
func (b *bench) stop() []pcapio.Record {
	b.cancel()
	require.NoError(b.t, <-b.done)
	r, err := pcapio.NewReader("wire", &b.cap)
	require.NoError(b.t, err)
	recs, _, _ := r.All()
	return recs
}

// expect reads the next frame from d (waiting for it, at most 10 s of
// wall time: the wire runs on the wall clock).
func expect(t *testing.T, d tap.Device) []byte {
	t.Helper()
	got := make(chan []byte, 1)
	go func() {
		buf := make([]byte, tap.MaxFrame)
		n, err := d.ReadFrame(buf)
		if err != nil {
			got <- nil
			return
		}
		got <- buf[:n]
	}()
	select {
	case f := <-got:
		require.NotNil(t, f, "read failed")
		return f
	case <-time.After(testtool.Budget(10 * time.Second)):
		t.Fatalf("no frame within %v", testtool.Budget(10*time.Second))
		return nil
	}
}

// roce builds a WRITE middle packet (or an ACK) of one connection.
func roce(t *testing.T, psn uint32, ack bool) []byte {
	a, b := net.HardwareAddr{2, 0x1a, 0xe0, 0, 0, 1}, net.HardwareAddr{2, 0x1a, 0xe0, 0, 0, 2}
	ipA, ipB := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	p := frames.Path{Transport: frames.V2IPv4, SrcMAC: a, DstMAC: b, SrcIP: ipA, DstIP: ipB, DestQP: 0x22}
	pkt := &frames.Packet{Opcode: wire.WriteMiddle, PSN: psn, Payload: bytes.Repeat([]byte{byte(psn)}, 64)}
	if ack {
		p = frames.Path{Transport: frames.V2IPv4, SrcMAC: b, DstMAC: a, SrcIP: ipB, DstIP: ipA, DestQP: 0x11}
		pkt = &frames.Packet{Opcode: wire.Acknowledge, PSN: psn}
	}
	bld, err := frames.NewBuilder(p)
	require.NoError(t, err)
	buf := make([]byte, 512)
	n, err := bld.Build(buf, pkt)
	require.NoError(t, err)
	return buf[:n]
}

func psnOf(t *testing.T, f []byte) uint32 {
	var v frames.View
	require.NoError(t, v.Parse(f))
	return v.PSN()
}

// TestWireCarriesBothWays: without faults every frame crosses unchanged,
// each pair to its own side, and the capture has it twice (sent, then
// delivered) on the pair's interfaces.
func TestWireCarriesBothWays(t *testing.T) {
	b := newBench(t, 2, "")
	arp := append(bytes.Repeat([]byte{0xff}, 6), 2, 0x1a, 0xe0, 0, 0, 1, 0x08, 0x06)
	arp = append(arp, make([]byte, 28)...)
	// The test reads each frame before the next is handled, so the
	// capture's order is known.
	require.NoError(t, b.hosts[1].WriteFrame(arp))
	require.Equal(t, arp, expect(t, b.devs[1]), "not RoCE: passed untouched")
	for psn := uint32(0); psn < 5; psn++ {
		f := roce(t, psn, false)
		require.NoError(t, b.hosts[0].WriteFrame(f))
		require.Equal(t, f, expect(t, b.devs[0]))
		a := roce(t, psn, true)
		require.NoError(t, b.devs[0].WriteFrame(a))
		require.Equal(t, a, expect(t, b.hosts[0]))
	}
	recs := b.stop()
	rep := b.w.Report() // after Serve returns, as Report says
	require.Len(t, recs, 2*11)
	perIface := map[int]int{}
	for _, r := range recs {
		perIface[r.Info.InterfaceIndex]++
		require.Empty(t, r.Comments)
	}
	// Pair 0: h0-w0, w0-h0, w0-sw0, sw0-w0; pair 1's host side and device side once each (the ARP).
	require.Equal(t, map[int]int{0: 5, 1: 5, 2: 5, 3: 5, 4: 1, 6: 1}, perIface)
	require.Equal(t, uint64(5), rep.Dirs[0].Frames)
	require.Equal(t, uint64(1), rep.Dirs[2].Other)
	require.Equal(t, "port1-in", rep.Dirs[2].Link)
}

// TestWireEvents: deterministic events hit exactly the frames they name,
// in each direction, and the capture says so where the frames come out.
func TestWireEvents(t *testing.T) {
	b := newBench(t, 2, "",
		"drop port=0 dir=in class=data nth=2",
		"corrupt port=0 dir=out class=ack nth=1",
		"hold=2 port=1 dir=in class=data nth=1",
		"dup port=1 dir=in psn=4",
		"spoof=0 port=1 dir=in class=data nth=3")
	// Pair 0: data 0, 1, 2 in; the 2nd never arrives.
	for psn := uint32(0); psn < 3; psn++ {
		require.NoError(t, b.hosts[0].WriteFrame(roce(t, psn, false)))
	}
	require.Equal(t, uint32(0), psnOf(t, expect(t, b.devs[0])))
	require.Equal(t, uint32(2), psnOf(t, expect(t, b.devs[0])))
	// Pair 0 out: the first ACK arrives with a bit flipped the ICRC covers.
	a := roce(t, 9, true)
	require.NoError(t, b.devs[0].WriteFrame(a))
	got := expect(t, b.hosts[0])
	require.NotEqual(t, a, got)
	var v frames.View
	if v.Parse(got) == nil {
		require.False(t, v.ICRCOK(), "the corruption is detectable")
	}
	// Pair 1: data 0 is held back for two frames, PSN 4 doubled; the 3rd
	// data frame (PSN 2) is forged into the device by port 0.
	for psn := uint32(0); psn < 5; psn++ {
		require.NoError(t, b.hosts[1].WriteFrame(roce(t, psn, false)))
	}
	var order []uint32
	for range 6 {
		order = append(order, psnOf(t, expect(t, b.devs[1])))
	}
	require.Equal(t, []uint32{1, 2, 0, 3, 4, 4}, order)
	forged := expect(t, b.devs[0])
	require.Equal(t, uint32(2), psnOf(t, forged))
	require.NoError(t, v.Parse(forged))
	require.True(t, v.ICRCOK(), "a forgery carries a valid ICRC")
	recs := b.stop()
	kinds := map[string]int{}
	for _, r := range recs {
		if f, ok := pcapio.FaultOf(r.Comments); ok {
			kinds[f.Kinds]++
			if f.Ghost {
				require.Equal(t, 2, r.Info.InterfaceIndex, "a dropped frame is shown on w0-sw0")
			}
		}
	}
	require.Equal(t, map[string]int{"drop": 1, "corrupt": 1, "hold": 1, "duplicate": 2, "spoof": 1}, kinds)
}

// TestWireRecordsWhatAFullHostQueueDrops: a host that reads nothing
// fills its queue; the wire never waits for it, and each frame the full
// queue drops is captured where the host would have got it, as not
// delivered (kind queue, beside the faults that hit it), and counted
// apart from the faults. (The wire wrote them and captured them as
// delivered, uncounted: a host's losses nobody recorded.)
func TestWireRecordsWhatAFullHostQueueDrops(t *testing.T) {
	h, hw := tap.HostPipe("host", "wire-h", 2)
	d, dw := tap.Pipe("dev", "wire-d", 64)
	ev, err := faults.Parse("corrupt port=0 dir=out class=ack nth=4")
	require.NoError(t, err)
	var capture bytes.Buffer
	w, err := faultwire.New(faultwire.Config{Pairs: []faultwire.Pair{{Host: hw, Device: dw}}, Events: []faults.Event{ev}, Seed: 7, Capture: &capture})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Serve(ctx) }()
	for psn := uint32(0); psn < 5; psn++ {
		require.NoError(t, d.WriteFrame(roce(t, psn, true)))
	}
	require.Eventually(t, func() bool { return hw.(tap.Dropper).Dropped() == 3 }, testtool.Budget(10*time.Second), time.Millisecond,
		"the host's queue holds 2 of the 5 ACKs")
	for psn := uint32(0); psn < 2; psn++ {
		require.Equal(t, psn, psnOf(t, expect(t, h)))
	}
	cancel()
	require.NoError(t, <-done)
	rep := w.Report()
	require.Equal(t, uint64(3), rep.Dirs[1].QueueDrops)
	require.Equal(t, uint64(3), rep.QueueDrops())
	require.Zero(t, rep.Dirs[0].QueueDrops)
	require.Equal(t, uint64(2), rep.Written, "the dropped frames were not written")
	require.Equal(t, uint64(1), rep.Faults().Corrupted)
	require.Zero(t, rep.Faults().Lost+rep.Faults().Dropped, "no fault of the schedule dropped them")

	r, err := pcapio.NewReader("wire", &capture)
	require.NoError(t, err)
	recs, _, _ := r.All()
	var kinds []string
	for _, rec := range recs {
		if rec.Info.InterfaceIndex != 1 { // w0-h0: as the host received
			continue
		}
		f, _ := pcapio.FaultOf(rec.Comments)
		require.Equal(t, f.Ghost, pcapio.IsGhost(rec.Comments))
		kinds = append(kinds, fmt.Sprintf("%d %s %v", psnOf(t, rec.Data), f.Kinds, f.Ghost))
	}
	require.Equal(t, []string{"0  false", "1  false", "2 queue true", "3 corrupt,queue true", "4 queue true"}, kinds)
}

// TestWireNetemReplays: random impairments come from the seed and the
// frame order only: two wires with the same seed lose the same frames.
func TestWireNetemReplays(t *testing.T) {
	delivered := func() []uint32 {
		b := newBench(t, 1, "loss 30% duplicate 10%")
		for psn := uint32(0); psn < 200; psn++ {
			require.NoError(t, b.hosts[0].WriteFrame(roce(t, psn, false)))
		}
		// A frame that is not RoCE passes untouched: once it is through,
		// the wire has handled every frame before it (one reader, in order).
		marker := append(bytes.Repeat([]byte{0xff}, 12), 0x08, 0x06)
		require.NoError(t, b.hosts[0].WriteFrame(marker))
		for !bytes.Equal(expect(t, b.devs[0]), marker) {
		}
		recs := b.stop()
		var out []uint32
		for _, r := range recs {
			var v frames.View
			if r.Info.InterfaceIndex == 2 && !pcapio.IsGhost(r.Comments) && v.Parse(r.Data) == nil {
				out = append(out, v.PSN())
			}
		}
		return out
	}
	first, second := delivered(), delivered()
	require.Equal(t, first, second)
	require.Less(t, len(first), 200, "some were lost")
}

// TestWireRefusesWhatNamesNothing: events for ports or links the wire
// does not have are refused.
func TestWireRefusesWhatNamesNothing(t *testing.T) {
	h, _ := tap.Pipe("a", "b", 1)
	d, _ := tap.Pipe("c", "d", 1)
	for spec, want := range map[string]string{
		"drop port=3 dir=in":        "names port 3; the wire has ports 0..0",
		"drop link=leaf0-spine0":    "names link leaf0-spine0",
		"spoof=2 port=0 class=data": "forges from port 2",
	} {
		e, err := faults.Parse(spec)
		require.NoError(t, err)
		_, err = faultwire.New(faultwire.Config{Pairs: []faultwire.Pair{{Host: h, Device: d}}, Events: []faults.Event{e}})
		require.ErrorContains(t, err, want, spec)
	}
	_, err := faultwire.New(faultwire.Config{})
	require.ErrorContains(t, err, "no pairs")
}
