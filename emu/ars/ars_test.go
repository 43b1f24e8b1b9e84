package ars

// The program is fed real frames built by frames.Builder: rank r sends on
// switch port r to rank r+1, one RDMA WRITE (with immediate) per message:
// WRITE_FIRST (RETH + the 20-byte NCCL header) / WRITE_MIDDLE /
// WRITE_LAST_WITH_IMMEDIATE. Sums are checked against a reference written
// here with math.Float32frombits, not tensor.Add.

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

const destQP = 0x12

type clock struct{ t time.Duration }

func (c *clock) Now() time.Duration { return c.t }

type sent struct {
	frame []byte
	lat   time.Duration
}

type cluster struct {
	t     *testing.T
	n     int
	cfg   netreduce.RingConfig
	clk   *clock
	p     *Program
	b     []*frames.Builder
	start []uint32
	out   []sent
	seed  uint64
	built map[[3]int][]byte // each frame as first built: a resend is the same bytes
}

func mac(h int) net.HardwareAddr { return net.HardwareAddr{2, 0, 0, 0, 0, byte(h + 1)} }

func addr(tr frames.Transport, h int) netip.Addr {
	if tr == frames.V2IPv4 {
		return netip.AddrFrom4([4]byte{10, 0, 0, byte(h + 1)})
	}
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 15: byte(h + 1)})
}

// newCluster sets up n ranks sending messages of msgLen frames of MTU 1024;
// start[r] is rank r's first PSN.
func newCluster(t *testing.T, tr frames.Transport, n, msgLen int, dt tensor.DType, start []uint32) *cluster {
	t.Helper()
	c := &cluster{t: t, n: n, clk: &clock{}, start: start, seed: 1, built: map[[3]int][]byte{}}
	c.cfg = netreduce.RingConfig{ID: 3, Workers: n, Window: 2, MsgLen: msgLen, MTU: 1024, DType: dt}
	for r := range n {
		next := (r + 1) % n
		b, err := frames.NewBuilder(frames.Path{Transport: tr, SrcMAC: mac(r), DstMAC: mac(next), SrcIP: addr(tr, r), DstIP: addr(tr, next),
			SrcPort: frames.UDPSourcePort(0x11 + uint32(r)), DestQP: destQP})
		require.NoError(t, err)
		c.b = append(c.b, b)
		c.cfg.Conns = append(c.cfg.Conns, netreduce.Conn{Src: addr(tr, r), Dst: addr(tr, next), DestQP: destQP, Rank: r, Port: r,
			StartPSN: start[r], HasStart: true})
	}
	c.p = New(switching.Timing{}, c.clk)
	require.NoError(t, c.p.AddRing(c.cfg))
	return c
}

func (c *cluster) psn(rank, msg, off int) uint32 {
	return wire.PSNAdd(c.start[rank], msg*c.cfg.MsgLen+off)
}

// data is rank's gradient for frame off of message msg (little-endian
// 32-bit elements; floats in a range where sums round).
func (c *cluster) data(rank, msg, off int) []byte {
	n := c.cfg.MTU
	if off == 0 {
		n -= HeaderLen
	}
	rng := rand.New(rand.NewPCG(c.seed, uint64(rank)<<40|uint64(msg)<<20|uint64(off)))
	d := make([]byte, n)
	for i := 0; i < n; i += 4 {
		v := rng.Uint32()
		if c.cfg.DType == tensor.F32 {
			v = math.Float32bits(float32(rng.NormFloat64() * 1e3))
		}
		binary.LittleEndian.PutUint32(d[i:], v)
	}
	return d
}

// want is the rank-order sum of frame (msg, off), written out here.
func (c *cluster) want(msg, off int) []byte {
	sum := c.data(0, msg, off)
	for r := 1; r < c.n; r++ {
		d := c.data(r, msg, off)
		for i := 0; i < len(sum); i += 4 {
			a, b := binary.LittleEndian.Uint32(sum[i:]), binary.LittleEndian.Uint32(d[i:])
			if c.cfg.DType == tensor.F32 {
				a = math.Float32bits(math.Float32frombits(a) + math.Float32frombits(b))
			} else {
				a += b
			}
			binary.LittleEndian.PutUint32(sum[i:], a)
		}
	}
	return sum
}

func (c *cluster) frame(rank, msg, off int) []byte {
	if f, ok := c.built[[3]int{rank, msg, off}]; ok {
		return append([]byte(nil), f...)
	}
	L := c.cfg.MsgLen
	pkt := &frames.Packet{PSN: c.psn(rank, msg, off), Payload: c.data(rank, msg, off)}
	switch {
	case L == 1:
		pkt.Opcode = wire.WriteOnlyWithImm
	case off == 0:
		pkt.Opcode = wire.WriteFirst
	case off == L-1:
		pkt.Opcode = wire.WriteLastWithImm
	default:
		pkt.Opcode = wire.WriteMiddle
	}
	if off == 0 {
		pkt.RETH = frames.RETHFields{VA: 0x7f00_0000_0000 + uint64(msg*L*c.cfg.MTU), RKey: 0x1000, DMALen: uint32(L * c.cfg.MTU)}
		pkt.HasINA = true
		pkt.INA = frames.INAFields{RingID: c.cfg.ID, MsgID: uint8(msg), MsgLen: uint8(L), Rank: uint8(rank)}
		pkt.Payload = append(make([]byte, HeaderLen-wire.INALen), pkt.Payload...)
	}
	buf := make([]byte, 2048)
	n, err := c.b[rank].Build(buf, pkt)
	require.NoError(c.t, err)
	c.built[[3]int{rank, msg, off}] = buf[:n]
	return append([]byte(nil), buf[:n]...)
}

// frameTime is a full frame's time on a 10 Gb/s link: the workers send
// one frame each per frameTime.
const frameTime = 880 * time.Nanosecond

// feed hands a frame to the program on port; it reports whether the
// program consumed it.
func (c *cluster) feed(port int, f []byte) bool {
	var v frames.View
	require.NoError(c.t, v.Parse(f))
	return c.p.Process(&v, port, func(frame []byte, lat time.Duration) {
		c.out = append(c.out, sent{append([]byte(nil), frame...), lat})
	})
}

func (c *cluster) send(rank, msg, off int) bool { return c.feed(rank, c.frame(rank, msg, off)) }

// message sends message msg from every rank, frame by frame, ranks in
// order rot, rot+1, ... for each frame.
func (c *cluster) message(msg, rot int) {
	for off := range c.cfg.MsgLen {
		for k := range c.n {
			require.True(c.t, c.send((k+rot)%c.n, msg, off))
		}
	}
}

// results checks that out holds exactly the results of frame (msg, off),
// one per rank, each to its successor with the sum and a good ICRC, and
// clears out.
func (c *cluster) results(msg, off int) {
	c.t.Helper()
	require.Len(c.t, c.out, c.n, "message %d frame %d: one result per rank", msg, off)
	want := c.want(msg, off)
	for r, o := range c.out {
		c.checkResult(o.frame, r, msg, off, want)
	}
	c.out = c.out[:0]
}

func (c *cluster) checkResult(got []byte, rank, msg, off int, want []byte) {
	c.t.Helper()
	ok, err := frames.VerifyICRC(got)
	require.NoError(c.t, err)
	require.True(c.t, ok, "ICRC of rank %d's result", rank)
	in := c.frame(rank, msg, off)
	var v frames.View
	require.NoError(c.t, v.Parse(got))
	hdr := v.PayloadOffset()
	if off == 0 {
		hdr += HeaderLen
	}
	require.Equal(c.t, in[:hdr], got[:hdr], "rank %d's headers and NCCL header", rank)
	require.Equal(c.t, want, got[hdr:hdr+len(want)], "message %d frame %d: the sum, on rank %d's connection", msg, off, rank)
	require.Equal(c.t, []byte(mac((rank+1)%c.n)), got[:6], "to rank %d's receiver", rank)
}

// run sends msgs messages frame by frame, every rank's frame in a rotating
// order, and checks every result.
func (c *cluster) run(msgs int) {
	for m := range msgs {
		for off := range c.cfg.MsgLen {
			for k := range c.n {
				r := (k + m + off) % c.n
				require.True(c.t, c.send(r, m, off))
				if k < c.n-1 {
					require.Empty(c.t, c.out, "no result before every rank sent")
				}
			}
			c.results(m, off)
			c.clk.t += frameTime
		}
	}
}

func TestSumsBitExactForEveryPortCount(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.F32, tensor.I32} {
		for n := 2; n <= 8; n++ {
			t.Run(fmt.Sprintf("%v/ports=%d", dt, n), func(t *testing.T) {
				start := make([]uint32, n)
				for r := range start {
					start[r] = uint32(1000 + 7777*r) // independent PSNs per NIC
				}
				c := newCluster(t, frames.V1, n, 5, dt, start)
				c.run(9) // more than 4 flows: every column reused
				st := c.p.Stats()
				assert.Equal(t, uint64(9*5), st.Aggregations)
				assert.Equal(t, uint64(9*n), st.Flows)
				assert.Zero(t, st.BadDrops+st.BusyDrops+st.FirstLostDrops+st.GapDrops+st.ICRCDrops+st.PortDrops)
			})
		}
	}
}

// The PSN wraps at 2^24 inside a flow and between flows, at different
// frames for each NIC, while the 512-frame buffer wraps too.
func TestPSNWrapAndBufferWrap(t *testing.T) {
	for _, tr := range []frames.Transport{frames.V1, frames.V2IPv4} {
		t.Run(tr.String(), func(t *testing.T) {
			start := []uint32{wire.PSNMask - 3, wire.PSNMask - 128, wire.PSNMask, wire.PSNMask - 300}
			c := newCluster(t, tr, 4, 128, tensor.F32, start)
			c.run(6)
		})
	}
}

func TestMessageOfOneFrame(t *testing.T) {
	c := newCluster(t, frames.V1, 3, 1, tensor.F32, []uint32{wire.PSNMask - 2, 5, 9})
	c.run(10)
}

// Fig. 13's example: base PSNs 0xffffe0, 0xfffff0, 0xffffff and free,
// pnext at 384: PSN 0 has index 257.
func TestFSBPaperExample(t *testing.T) {
	f := newFSB()
	f.start(0xffffe0, 16, 0)
	f.start(0xfffff0, 15, 1)
	f.start(0xffffff, 10, 2)
	assert.Equal(t, 3, f.p[0], "pnext points to 384")
	col, off, ok := f.locate(0)
	require.True(t, ok)
	assert.Equal(t, 257, index(col, off))
	// Bases straddling the wrap: a frame of the older flow is not the
	// newer one's though its PSN is larger.
	f.start(0x000009, 4, 3)
	col, off, ok = f.locate(0xfffff8)
	require.True(t, ok)
	assert.Equal(t, 128+8, index(col, off))
	col, off, ok = f.locate(0x00000b)
	require.True(t, ok)
	assert.Equal(t, 384+2, index(col, off))
	// Past the newest flow: its WRITE FIRST was not seen.
	_, _, ok = f.locate(0x00000d)
	assert.False(t, ok)
	// The fifth flow takes column 0 again and clears its status.
	f.done[5] = true
	assert.Equal(t, 0, f.start(0x00000d, 3, 4))
	assert.False(t, f.done[5])
}

// A frame sent again after its index completed gets the stored result
// back, on its own connection, after the resend path's 1.5 µs.
func TestRetransmissionAnsweredFromBuffer(t *testing.T) {
	c := newCluster(t, frames.V1, 4, 3, tensor.F32, []uint32{10, 20, 30, 40})
	c.run(2)
	for _, off := range []int{1, 2, 0} { // a MIDDLE, the LAST, then the WRITE FIRST (re-reads its column)
		c.clk.t += 10 * time.Microsecond
		require.True(t, c.send(2, 1, off))
		require.Len(t, c.out, 1, "frame %d", off)
		c.checkResult(c.out[0].frame, 2, 1, off, c.want(1, off))
		assert.Equal(t, switching.DefaultTiming.Resend, c.out[0].lat)
		c.out = c.out[:0]
	}
	st := c.p.Stats()
	assert.Equal(t, uint64(3), st.ResultResends)
	assert.Equal(t, uint64(1), st.FirstResends)
	assert.Equal(t, uint64(2*4), st.Flows, "a re-sent WRITE FIRST starts no flow")
	c.run2(2, 5) // and the columns still line up
}

// run2 continues with messages from..to-1.
func (c *cluster) run2(from, to int) {
	for m := from; m < to; m++ {
		for off := range c.cfg.MsgLen {
			for r := range c.n {
				require.True(c.t, c.send(r, m, off))
			}
			c.results(m, off)
			c.clk.t += frameTime
		}
	}
}

func TestEarlyRetransmissionIsAbsorbed(t *testing.T) {
	c := newCluster(t, frames.V1, 3, 2, tensor.I32, []uint32{0, 0, 0})
	require.True(t, c.send(0, 0, 0))
	require.True(t, c.send(0, 0, 0))
	assert.Empty(t, c.out)
	assert.Equal(t, uint64(1), c.p.Stats().EarlyResends)
	require.True(t, c.send(1, 0, 0))
	require.True(t, c.send(2, 0, 0))
	c.results(0, 0)
}

// A lost WRITE FIRST: the flow's later frames have no column and are
// dropped, the next flow's WRITE FIRST is past the expected PSN and
// dropped; go-back-N from the lost frame completes exactly.
func TestLostWriteFirstThenGoBackN(t *testing.T) {
	c := newCluster(t, frames.V1, 3, 3, tensor.F32, []uint32{100, wire.PSNMask - 4, 7})
	c.run(1)
	for r := 1; r < 3; r++ {
		for off := range 3 {
			require.True(t, c.send(r, 1, off))
		}
	}
	// rank 0's message 1 WRITE FIRST is lost.
	require.True(t, c.send(0, 1, 1))
	require.True(t, c.send(0, 1, 2))
	require.True(t, c.send(0, 2, 0))
	st := c.p.Stats()
	assert.Equal(t, uint64(2), st.FirstLostDrops)
	assert.Equal(t, uint64(1), st.GapDrops)
	assert.Empty(t, c.out)
	for off := range 3 {
		require.True(t, c.send(0, 1, off))
		c.results(1, off)
	}
	c.run2(2, 6)
}

// A frame for a message whose index still holds one a receiver may need
// is dropped (the worker resends it later); one whose index moved on is a
// stale duplicate, forwarded.
func TestBusyAndStaleIndices(t *testing.T) {
	c := newCluster(t, frames.V1, 2, 2, tensor.I32, []uint32{0, 0})
	c.run(2)
	// Rank 0 runs ahead to message 4 (column 0 again) while message 0 is
	// not released (rank 1 has not started message 2).
	for m := 2; m <= 3; m++ {
		for off := range 2 {
			require.True(t, c.send(0, m, off))
		}
	}
	require.True(t, c.send(0, 4, 0))
	assert.Equal(t, uint64(1), c.p.Stats().BusyDrops)
	// Rank 1 catches up through message 3: message 0 and 1 are released.
	for m := 2; m <= 3; m++ {
		for off := range 2 {
			require.True(t, c.send(1, m, off))
			c.results(m, off)
		}
	}
	require.True(t, c.send(0, 4, 0)) // go-back-N: now it fits
	require.True(t, c.send(0, 4, 1))
	require.True(t, c.send(1, 4, 0))
	c.results(4, 0)
	// Rank 1 sends message 0 again: its column was taken by message 4.
	assert.False(t, c.send(1, 0, 0), "a stale duplicate goes to its receiver")
	assert.Equal(t, uint64(1), c.p.Stats().StaleForwards)
}

func TestNotAggregationTraffic(t *testing.T) {
	c := newCluster(t, frames.V1, 2, 2, tensor.F32, []uint32{0, 0})
	other, err := frames.NewBuilder(frames.Path{Transport: frames.V1, SrcMAC: mac(0), DstMAC: mac(1), SrcIP: addr(frames.V1, 0), DstIP: addr(frames.V1, 1), DestQP: 0x99})
	require.NoError(t, err)
	build := func(b *frames.Builder, p *frames.Packet) []byte {
		buf := make([]byte, 2048)
		n, err := b.Build(buf, p)
		require.NoError(t, err)
		return buf[:n]
	}
	reth := frames.RETHFields{VA: 0x1000, RKey: 7, DMALen: 2048}
	for name, f := range map[string][]byte{
		"ack":               build(c.b[0], &frames.Packet{Opcode: wire.Acknowledge, PSN: 5, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK}}),
		"another QP first":  build(other, &frames.Packet{Opcode: wire.WriteFirst, PSN: 0, RETH: reth, Payload: make([]byte, 1024), HasINA: true, INA: frames.INAFields{RingID: 9}}),
		"another QP middle": build(other, &frames.Packet{Opcode: wire.WriteMiddle, PSN: 1, Payload: make([]byte, 1024)}),
		"send":              build(c.b[0], &frames.Packet{Opcode: wire.SendOnly, PSN: 0, Payload: make([]byte, 64)}),
	} {
		assert.False(t, c.feed(0, f), name)
	}
	// The member's frames from another port are forged.
	assert.True(t, c.feed(1, c.frame(0, 0, 0)))
	assert.Equal(t, uint64(1), c.p.Stats().PortDrops)
	// An 8-byte header (the host did not pad to INAHeaderLen) is refused.
	bad := build(c.b[0], &frames.Packet{Opcode: wire.WriteFirst, PSN: 0, RETH: frames.RETHFields{DMALen: 2048}, HasINA: true,
		INA: frames.INAFields{RingID: 3, MsgLen: 2}, Payload: c.data(0, 0, 1)[:1016]})
	assert.True(t, c.feed(0, bad))
	assert.Equal(t, uint64(1), c.p.Stats().BadDrops)
	// A corrupted frame is dropped before it is stored.
	f := c.frame(0, 0, 0)
	f[len(f)-10] ^= 1
	assert.True(t, c.feed(0, f))
	assert.Equal(t, uint64(1), c.p.Stats().ICRCDrops)
	c.run(2)
}

func TestAddRingLimits(t *testing.T) {
	ok := netreduce.RingConfig{Workers: 8, Window: 2, MsgLen: 128, MTU: 1024, DType: tensor.F32}
	require.NoError(t, New(switching.Timing{}, nil).AddRing(ok))
	for name, mod := range map[string]func(*netreduce.RingConfig){
		"window 3":    func(c *netreduce.RingConfig) { c.Window = 3 },
		"msg-len 170": func(c *netreduce.RingConfig) { c.MsgLen = 170 },
		"mtu 2048":    func(c *netreduce.RingConfig) { c.MTU = 2048 },
		"f16":         func(c *netreduce.RingConfig) { c.DType = tensor.F16 },
		"1 worker":    func(c *netreduce.RingConfig) { c.Workers = 1 },
		"multi-rack":  func(c *netreduce.RingConfig) { c.Tree = &netreduce.Tree{} },
	} {
		cfg := ok
		mod(&cfg)
		assert.Error(t, New(switching.Timing{}, nil).AddRing(cfg), name)
	}
	p := New(switching.Timing{}, nil)
	require.NoError(t, p.AddRing(ok))
	assert.True(t, p.HasRing(0))
	assert.False(t, p.HasRing(1))
	assert.Error(t, p.AddRing(ok), "ring 0 twice")
	assert.Equal(t, int64(512*(8*(128+1024)+1024)), p.MemoryBytes())
}

// Rings set up without connections learn each member from its first
// WRITE FIRST (message 0), on the port it came by.
func TestLearnsMembersFromFirstFrames(t *testing.T) {
	c := newCluster(t, frames.V1, 3, 2, tensor.F32, []uint32{50, 60, 70})
	c.cfg.Conns = nil
	c.p = New(switching.Timing{}, c.clk)
	require.NoError(t, c.p.AddRing(c.cfg))
	assert.False(t, c.send(0, 0, 1), "a MIDDLE of no known connection is ordinary traffic")
	c.run(6)
}
