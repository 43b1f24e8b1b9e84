package frames_test

import (
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/inceptionnref"
)

func gradientPayload(n, seed int) []byte { return inceptionnref.Gradients(n, uint64(seed)) }

// TestCompressIsTheBuilderWithThePackedPayload: a compressed frame is,
// byte for byte, the frame the builder writes for the packed payload on
// a marked path (lengths, pad count, IPv4 checksum and ICRC all from the
// builder's code, not Compress's), with an ICRC the test's own CRC
// agrees with; and decompressing it gives the builder's frame for the
// payload as the codec returns it.
func TestCompressIsTheBuilderWithThePackedPayload(t *testing.T) {
	const k10 = 10
	codec, err := inceptionn.New(k10)
	require.NoError(t, err)
	sizes := []int{4096, 1024, 1000, 256, 37, 8, 6, 1}
	for _, path := range ioPaths() {
		path.TClass = frames.CompressedDSCP<<2 | 1 // ECT(1): the ECN bits must survive
		b, err := frames.NewBuilder(path)
		require.NoError(t, err)
		for i, n := range sizes {
			for _, op := range []wire.Opcode{wire.WriteOnlyWithImm, wire.SendMiddle, wire.WriteFirst} {
				pkt := frames.Packet{Opcode: op, PSN: (0xFFFFFE + uint32(i)) & 0xFFFFFF, AckReq: i%2 == 0, Imm: 0xC0DE,
					RETH: frames.RETHFields{VA: 0x1000, RKey: 7, DMALen: uint32(n)}, Payload: gradientPayload(n, i)}
				raw := make([]byte, 5000)
				b.SetIPID(0x1234)
				rn, err := b.Build(raw, &pkt)
				require.NoError(t, err)
				var v frames.View
				require.NoError(t, v.Parse(raw[:rn]))
				require.True(t, v.Compressed(), "%s: a marked %s", path.Transport, op)

				var h inceptionn.Histogram
				out := make([]byte, 5000)
				cn, packed, ok, err := frames.Compress(out, &v, codec, nil, &h)
				require.NoError(t, err)
				assert.EqualValues(t, n/4, h.Values(), "every whole float is counted")
				want, _ := codec.AppendPacked(nil, pkt.Payload, nil)
				require.Equal(t, want, packed)
				if len(want) >= n {
					assert.False(t, ok, "%s %d B: a packed form of %d B is not shorter", path.Transport, n, len(want))
					continue
				}
				require.True(t, ok, "%s %d B packs to %d B", path.Transport, n, len(want))
				wp := pkt
				wp.Payload = want
				b.SetIPID(0x1234)
				exp := make([]byte, 5000)
				en, err := b.Build(exp, &wp)
				require.NoError(t, err)
				require.Equal(t, exp[:en], out[:cn], "%s %s %d B", path.Transport, op, n)
				assert.Equal(t, refICRC(out[:cn], path.Transport), binary.LittleEndian.Uint32(out[cn-4:]), "independent ICRC")

				var c frames.View
				require.NoError(t, c.Parse(out[:cn]))
				assert.True(t, c.Compressed() && c.ICRCOK())
				assert.EqualValues(t, frames.CompressedDSCP<<2|1, c.TClass())
				back := make([]byte, 5000)
				dn, payload, err := frames.Decompress(back, &c, nil)
				require.NoError(t, err)
				dc := append([]byte(nil), pkt.Payload...) // the test's own reference of one trip
				inceptionnref.TripBytes(k10, dc)
				require.Equal(t, dc, payload)
				dp := pkt
				dp.Payload = dc
				exp2 := make([]byte, 5000)
				b.SetIPID(0x1234)
				en2, err := b.Build(exp2, &dp)
				require.NoError(t, err)
				assert.Equal(t, exp2[:en2], back[:dn], "%s %s %d B decompressed", path.Transport, op, n)
			}
		}
	}
}

// TestUnmarkingKeepsECNAndChecksums: clearing the mark (a packet sent
// uncompressed) keeps the ECN bits, rewrites the IPv4 checksum and leaves
// the ICRC valid (it reads the traffic class as ones).
func TestUnmarkingKeepsECNAndChecksums(t *testing.T) {
	for _, path := range ioPaths() {
		path.TClass = frames.CompressedDSCP<<2 | 3
		b, err := frames.NewBuilder(path)
		require.NoError(t, err)
		buf := make([]byte, 512)
		n, err := b.Build(buf, &frames.Packet{Opcode: wire.SendOnly, Payload: ioPayload(40, 1)})
		require.NoError(t, err)
		var v frames.View
		require.NoError(t, v.Parse(buf[:n]))
		v.SetDSCP(0)
		assert.EqualValues(t, 3, v.TClass(), "%s: ECN kept, codepoint cleared", path.Transport)
		assert.False(t, v.Compressed())
		assert.True(t, v.ICRCOK())
		if path.Transport == frames.V2IPv4 {
			assert.Zero(t, ioIPv4Checksum(buf[14:34]), "IPv4 header checksum verifies")
		} else {
			assert.EqualValues(t, 6, buf[14]>>4, "IP version kept")
			assert.Equal(t, path.FlowLabel, binary.BigEndian.Uint32(buf[14:])&0xFFFFF, "flow label kept")
		}
	}
}

// TestDecompressRefusesWhatIsNotPacked: a marked payload cut short, or
// longer than its length says, is refused.
func TestDecompressRefusesWhatIsNotPacked(t *testing.T) {
	codec, _ := inceptionn.New(8)
	path := ioPaths()[0]
	path.TClass = frames.CompressedDSCP << 2
	b, _ := frames.NewBuilder(path)
	packed, _ := codec.AppendPacked(nil, gradientPayload(512, 3), nil)
	for _, p := range [][]byte{packed[:len(packed)-3], append(packed, 0, 0, 0, 0), {0x02}} {
		buf := make([]byte, 1024)
		n, err := b.Build(buf, &frames.Packet{Opcode: wire.WriteMiddle, Payload: p})
		require.NoError(t, err)
		var v frames.View
		require.NoError(t, v.Parse(buf[:n]))
		_, _, err = frames.Decompress(make([]byte, 2048), &v, nil)
		assert.ErrorIs(t, err, inceptionn.ErrPacked, "%d packed bytes", len(p))
	}
}

// TestDescribeCompressed: decode shows a compressed payload as such: the
// length it stands for, the ratio and the classes; one that does not
// unpack says why; an unmarked payload is not described as compressed.
func TestDescribeCompressed(t *testing.T) {
	codec, _ := inceptionn.New(6)
	path := ioPaths()[1]
	path.TClass = frames.CompressedDSCP << 2
	b, _ := frames.NewBuilder(path)
	raw := gradientPayload(1000, 4)
	var h inceptionn.Histogram
	packed, _ := codec.AppendPacked(nil, raw, &h)
	build := func(p []byte) []byte {
		buf := make([]byte, 2048)
		n, err := b.Build(buf, &frames.Packet{Opcode: wire.WriteLast, PSN: 9, Payload: p})
		require.NoError(t, err)
		return buf[:n]
	}
	s := frames.Describe(0, build(packed))
	require.NotNil(t, s.Compressed)
	assert.Equal(t, frames.PackedSummary{Bytes: 1000, Ratio: 1000 / float64(len(packed)), Classes: h}, *s.Compressed)
	assert.Contains(t, s.Line(), fmt.Sprintf("len=%d pad=%d icrc=%s ok compressed(L=1000 %.2fx classes=%d/%d/%d/%d)",
		len(packed), (4-len(packed)%4)%4, *s.ICRC, 1000/float64(len(packed)), h[0], h[1], h[2], h[3]))

	bad := frames.Describe(0, build(packed[:len(packed)/2]))
	require.NotNil(t, bad.Compressed)
	assert.Contains(t, bad.Compressed.Error, "not a packed INCEPTIONN payload")
	assert.Contains(t, bad.Line(), "compressed(BAD: not a packed")

	path.TClass = 0
	b, _ = frames.NewBuilder(path)
	assert.Nil(t, frames.Describe(0, build(packed)).Compressed, "unmarked")
}
