package compress_test

import (
	"bytes"
	"encoding/binary"
	"github.com/inaemu/inaemu/emu/nic/nictest"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/nic/compress"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/inceptionnref"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// quantized is b after one trip through the engines (the test's own
// reference of the codec).
func quantized(k int, b []byte) []byte {
	out := bytes.Clone(b)
	inceptionnref.TripBytes(k, out)
	return out
}

func gradients(n int, seed uint64) []byte { return inceptionnref.Gradients(n, seed) }

// compressingPair is two NICs with engines for bound 2^-k, and QPs qa on
// a and qb on b whose traffic class asks for compression.
func compressingPair(t *testing.T, tr frames.Transport, k int) (*nictest.Pair, *roce.QP, *roce.QP) {
	t.Helper()
	p := nictest.NewPair(tr)
	c, err := inceptionn.New(k)
	require.NoError(t, err)
	require.NoError(t, compress.Enable(p.A, compress.Config{Codec: c}))
	require.NoError(t, compress.Enable(p.B, compress.Config{Codec: c}))
	x, y := p.A.NewQP(0x11), p.B.NewQP(0x22)
	pa, pb := p.A.PathTo(p.B, 0x22), p.B.PathTo(p.A, 0x11)
	pa.TClass, pb.TClass = frames.CompressedDSCP<<2, frames.CompressedDSCP<<2
	cfg := nictest.RCConfig(100, 500)
	cfg.MTU = 1024
	require.NoError(t, x.Connect(pa, cfg))
	cfg.SQPSN, cfg.RQPSN = 500, 100
	require.NoError(t, y.Connect(pb, cfg))
	return p, x, y
}

// TestCompressedWrite: a WRITE through compressing NICs lands as the
// reference quantizer says, in as many packets as without compression;
// every data frame on the wire is marked, shorter than its payload, and
// carries a valid ICRC; the ACKs pass the engines by.
func TestCompressedWrite(t *testing.T) {
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		for _, k := range []int{6, 8, 10} {
			p, qa, _ := compressingPair(t, tr, k)
			mem := make([]byte, 4096)
			require.NoError(t, p.B.PD.Register(&roce.MR{Addr: 0x10000, Buf: mem, RKey: 9, Access: roce.AccessRemoteWrite}))
			data := gradients(3001, uint64(k))
			require.NoError(t, qa.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: data, RemoteVA: 0x10000, RKey: 9, Signaled: true}))
			nictest.RunIdle(t, p.Clock)

			require.Equal(t, quantized(k, data), mem[:3001], "%s k=%d", tr, k)
			require.Len(t, p.AB.Sent, 3, "%s: packets as without compression", tr)
			payload, frameBytes, wirePads := 0, 0, 0
			for i, f := range p.AB.Sent {
				var v frames.View
				require.NoError(t, v.Parse(f))
				assert.True(t, v.Compressed(), "frame %d is marked", i)
				assert.True(t, v.ICRCOK(), "frame %d ICRC", i)
				assert.Less(t, len(v.Payload()), []int{1024, 1024, 953}[i], "frame %d shrank", i)
				payload += len(v.Payload())
				frameBytes += len(f)
				wirePads += len(v.Pad())
			}
			for _, f := range p.BA.Sent {
				var v frames.View
				require.NoError(t, v.Parse(f))
				assert.Equal(t, wire.Acknowledge, v.Opcode())
			}
			cs, rs := p.A.Stats.Compression, p.B.Stats.Compression
			rawFrames := frameBytes - payload - wirePads + 3001 + 3 // 953 B: 3 B of pad
			assert.Equal(t, nic.CompressionStats{TxCompressed: 3, TxPayload: 3001, TxWirePayload: uint64(payload), TxClasses: cs.TxClasses,
				TxRawFrameBytes: uint64(rawFrames), TxFrameBytes: uint64(frameBytes)}, *cs)
			assert.EqualValues(t, 750, cs.TxClasses.Values())
			assert.Equal(t, nic.CompressionStats{RxDecompressed: 3}, *rs)
			assert.Zero(t, qa.Counters.RetransmittedPkts)
		}
	}
}

// TestIncompressiblePacketGoesAsItIs: a marked packet whose packed form
// would be longer (random bits: many values at or above 1.0) goes
// unmarked and unchanged, and lands exactly.
func TestIncompressiblePacketGoesAsItIs(t *testing.T) {
	p, qa, _ := compressingPair(t, frames.V2IPv4, 10)
	mem := make([]byte, 2048)
	require.NoError(t, p.B.PD.Register(&roce.MR{Addr: 0x10000, Buf: mem, RKey: 9, Access: roce.AccessRemoteWrite}))
	data := make([]byte, 1024) // floats in [1, 2): 34 bits each packed
	for i := 0; i < len(data); i += 4 {
		binary.LittleEndian.PutUint32(data[i:], math.Float32bits(1+float32(i)/1024))
	}
	small := gradients(1024, 3)
	require.NoError(t, qa.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: append(data, small...), RemoteVA: 0x10000, RKey: 9}))
	nictest.RunIdle(t, p.Clock)
	assert.Equal(t, data, mem[:1024], "sent as it was")
	assert.Equal(t, quantized(10, small), mem[1024:])
	var v frames.View
	require.NoError(t, v.Parse(p.AB.Sent[0]))
	assert.False(t, v.Compressed())
	assert.Zero(t, v.DSCP(), "unmarked: the receiver passes it by")
	assert.Equal(t, data, v.Payload())
	assert.True(t, v.ICRCOK())
	cs := p.A.Stats.Compression
	assert.EqualValues(t, 1, cs.TxUncompressed)
	assert.EqualValues(t, 1, cs.TxCompressed)
	assert.EqualValues(t, 1, p.B.Stats.Compression.RxDecompressed)
}

// TestCorruptCompressedFrameIsRetransmitted: a compressed frame with a
// flipped bit is never decompressed (the QP counts its ICRC), and
// go-back-N delivers the message exactly.
func TestCorruptCompressedFrameIsRetransmitted(t *testing.T) {
	p, qa, qb := compressingPair(t, frames.V2IPv4, 8)
	mem := make([]byte, 4096)
	require.NoError(t, p.B.PD.Register(&roce.MR{Addr: 0x10000, Buf: mem, RKey: 9, Access: roce.AccessRemoteWrite}))
	hits := 0
	p.AB.Recv = func(f []byte) {
		if hits == 0 {
			f = bytes.Clone(f)
			f[len(f)-10] ^= 0x10
		}
		hits++
		p.B.Receive(f)
	}
	data := gradients(2048, 7)
	require.NoError(t, qa.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: data, RemoteVA: 0x10000, RKey: 9}))
	nictest.RunIdle(t, p.Clock)
	assert.Equal(t, quantized(8, data), mem[:2048])
	assert.EqualValues(t, 1, qb.Counters.RxICRCErrors)
	assert.Positive(t, qa.Counters.RetransmittedPkts)
	assert.EqualValues(t, hits-1, p.B.Stats.Compression.RxDecompressed, "every frame but the corrupt one")
}

// TestUndecodablePayloadIsDropped: a marked frame with a valid ICRC whose
// payload is not a packed payload is dropped and counted; the QP never
// sees it.
func TestUndecodablePayloadIsDropped(t *testing.T) {
	clk := vclock.New()
	h0 := nic.New(clk, "h0", 0, 0, frames.V2IPv4)
	h1 := nic.New(clk, "h1", 1, 0, frames.V2IPv4)
	h1.Attach(&nictest.Kicks{})
	c, _ := inceptionn.New(10)
	require.NoError(t, compress.Enable(h1, compress.Config{Codec: c}))
	q := h1.NewQP(0x22)
	require.NoError(t, q.Connect(h1.PathTo(h0, 0x11), nictest.RCConfig(500, 100)))
	path := h0.PathTo(h1, 0x22)
	path.TClass = frames.CompressedDSCP << 2
	h1.Receive(nictest.Frame(t, path, &frames.Packet{Opcode: wire.SendOnly, PSN: 100, Payload: []byte{0x01, 0x00, 0xFF}}))
	nictest.RunIdle(t, clk)
	assert.EqualValues(t, 1, h1.Stats.Compression.RxUndecodable)
	assert.Zero(t, q.Counters.RcvdPkts+q.Counters.RxDropped)
	assert.EqualValues(t, 100, q.ExpectedPSN())
}

// TestEngineTimes: the transmit engine takes ceil(payload/32) cycles of
// 256 bits at its rate plus its latency, and the NIC reports it for the
// line; the receive engine starts once a packet has fully arrived, takes
// ceil(L/32) cycles, and handles one packet at a time.
func TestEngineTimes(t *testing.T) {
	p, qa, qb := compressingPair(t, frames.V2IPv4, 10)
	require.NoError(t, compress.Enable(p.A, compress.Config{Codec: mustCodec(t, 10), Rate: 12.8e9, Latency: 50 * time.Nanosecond}))
	require.NoError(t, p.B.PD.Register(&roce.MR{Addr: 0x10000, Buf: make([]byte, 4096), RKey: 9, Access: roce.AccessRemoteWrite}))
	p.A.Attach(&nictest.Kicks{})
	require.NoError(t, qa.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: gradients(2000, 1), RemoteVA: 0x10000, RKey: 9}))
	buf := make([]byte, 4352)
	var frames2 [][]byte
	for _, want := range []int64{50_000 + 32*20_000, 50_000 + 31*20_000} { // 1024 B: 32 cycles; 976 B: 31 (12.8G: 20 ns)
		n := p.A.NextFrame(buf)
		require.Positive(t, n)
		assert.Equal(t, want, p.A.TxEnginePs())
		frames2 = append(frames2, bytes.Clone(buf[:n]))
	}
	assert.Zero(t, p.A.NextFrame(buf))
	assert.Zero(t, p.A.TxEnginePs(), "no frame, no engine time")

	// Both arrive at t0: the first is decompressed by t0 + 32 x 10 ns, the
	// second 31 cycles after that.
	t0 := p.Clock.Now()
	p.B.Receive(frames2[0])
	p.B.Receive(frames2[1])
	assert.EqualValues(t, 100, qb.ExpectedPSN(), "nothing handed over on arrival")
	p.Clock.AdvanceTo(t0 + 319*time.Nanosecond)
	assert.EqualValues(t, 100, qb.ExpectedPSN())
	p.Clock.AdvanceTo(t0 + 320*time.Nanosecond)
	assert.EqualValues(t, 101, qb.ExpectedPSN(), "first packet after 32 cycles")
	p.Clock.AdvanceTo(t0 + 629*time.Nanosecond)
	assert.EqualValues(t, 101, qb.ExpectedPSN())
	p.Clock.AdvanceTo(t0 + 630*time.Nanosecond)
	assert.EqualValues(t, 102, qb.ExpectedPSN(), "second 31 cycles later")
}

func mustCodec(t *testing.T, k int) inceptionn.Codec {
	c, err := inceptionn.New(k)
	require.NoError(t, err)
	return c
}

// TestEngineRefusesNonsense: a negative or infinite rate, a negative
// latency.
func TestEngineRefusesNonsense(t *testing.T) {
	h := nic.New(vclock.New(), "h0", 0, 0, frames.V2IPv4)
	for _, c := range []compress.Config{{Rate: -1}, {Rate: math.Inf(1)}, {Rate: math.NaN()}, {Latency: -time.Nanosecond}} {
		assert.Error(t, compress.Enable(h, c), "%+v", c)
	}
}

// TestReceiveKeepsOrder: a packet sent uncompressed (incompressible, or
// a tail too short to shrink) arrives while the compressed packet before
// it is still in the receive engine: it waits behind it, so the QP sees
// the PSNs in order (no NAK, no retransmission).
func TestReceiveKeepsOrder(t *testing.T) {
	p, qa, qb := compressingPair(t, frames.V2IPv4, 10)
	mem := make([]byte, 4096)
	require.NoError(t, p.B.PD.Register(&roce.MR{Addr: 0x10000, Buf: mem, RKey: 9, Access: roce.AccessRemoteWrite}))
	ones := make([]byte, 1024) // 1.0 takes 32 bits: sent as it is
	for i := 0; i < len(ones); i += 4 {
		binary.LittleEndian.PutUint32(ones[i:], math.Float32bits(1))
	}
	data := append(append(gradients(1024, 5), ones...), gradients(1024, 6)...)
	data = append(data, 0, 0, 0x80, 0x3F) // one more float, 1.0: a 4-byte last packet
	require.NoError(t, qa.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: data, RemoteVA: 0x10000, RKey: 9, Signaled: true}))
	nictest.RunIdle(t, p.Clock)
	assert.Equal(t, quantized(10, data[:1024]), mem[:1024])
	assert.Equal(t, ones, mem[1024:2048])
	assert.Equal(t, quantized(10, data[2048:3072]), mem[2048:3072])
	assert.Equal(t, data[3072:], mem[3072:3076])
	assert.Zero(t, qb.Counters.OutOfSequence, "no packet overtook another")
	assert.Zero(t, qa.Counters.RetransmittedPkts)
	assert.EqualValues(t, 2, p.A.Stats.Compression.TxUncompressed)
	assert.EqualValues(t, 2, p.B.Stats.Compression.RxDecompressed)
}
