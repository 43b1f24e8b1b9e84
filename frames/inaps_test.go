package frames_test

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// inapsHex is a 308-byte INA-PS frame written out by hand from ATP's
// struct agghdr (common/packet.h) and ESA's priority byte, field by field.
var inapsHex = strings.Join([]string{
	"021ae0000003 021ae0000002 0700",                  // Ethernet: dst h2, src h1, EtherType 0x0700
	"4500 0126 0000 4000 40fe 0000 0a000002 0a000003", // IPv4: 294 bytes, TTL 64, protocol 254, no checksum
	"00000004",  // bitmap: worker 2
	"08",        // fan-in 8
	"68",        // flags: PS index 3, ECN
	"0003 0001", // job 3, sequence 1
	"4e1f",      // aggregator 19999
	"c8 01",     // priority 200, level: second-level switch
	"00000001 ffffffff" + strings.Repeat("00000000", 59) + "7fffffff", // values 0, 1 and 61
	"0000000100000007", // key
	"00010000",         // tensor length 65536
}, "")

func inapsFrame(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(inapsHex, " ", ""))
	require.NoError(t, err)
	require.Len(t, b, wire.INAPSFrameLen, "ATP's P4ML_PACKET_SIZE")
	return b
}

// gopacket decodes an INA-PS frame by its EtherType: Ethernet, IPv4 (no
// UDP) and the header, every field where the layout puts it.
func TestINAPSLayerDecodesTheHandWrittenFrame(t *testing.T) {
	p := gopacket.NewPacket(inapsFrame(t), layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, p.ErrorLayer())
	var got []gopacket.LayerType
	for _, l := range p.Layers() {
		got = append(got, l.LayerType())
	}
	assert.Equal(t, []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeIPv4, frames.LayerTypeINAPS}, got)
	x := p.Layer(frames.LayerTypeINAPS).(*frames.INAPS)
	assert.Equal(t, uint32(4), x.Bitmap)
	assert.Equal(t, uint8(8), x.FanIn)
	assert.Equal(t, uint8(0x68), x.Flags)
	assert.Equal(t, uint16(3), x.Job)
	assert.Equal(t, uint16(1), x.Seq)
	assert.Equal(t, uint16(19999), x.Aggregator)
	assert.Equal(t, uint8(200), x.Priority)
	assert.Equal(t, uint8(wire.INAPSLevelSecond), x.Level)
	assert.Equal(t, int32(1), x.Values[0])
	assert.Equal(t, int32(-1), x.Values[1])
	assert.Equal(t, int32(0x7fffffff), x.Values[61])
	assert.Zero(t, x.Values[30])
	assert.Equal(t, uint64(0x100000007), x.Key)
	assert.Equal(t, uint32(65536), x.TensorLength)
	assert.Empty(t, x.Payload)

	h := wire.INAPS(inapsFrame(t)[34:])
	assert.Equal(t, uint8(3), h.PSIndex())
	assert.NotZero(t, h.Flags()&wire.INAPSFlagECN)
	assert.False(t, h.IsReminder())
}

// Serializing the decoded layers gives the same 308 bytes back.
func TestINAPSRoundTrip(t *testing.T) {
	in := inapsFrame(t)
	p := gopacket.NewPacket(in, layers.LayerTypeEthernet, gopacket.Default)
	buf := gopacket.NewSerializeBuffer()
	var ls []gopacket.SerializableLayer
	for _, l := range p.Layers() {
		ls = append(ls, l.(gopacket.SerializableLayer))
	}
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, ls...))
	assert.Equal(t, hex.EncodeToString(in), hex.EncodeToString(buf.Bytes()))
}

// A header cut short is reported as truncated, not read past its end.
func TestINAPSTruncated(t *testing.T) {
	p := gopacket.NewPacket(inapsFrame(t)[:wire.INAPSFrameLen-1], layers.LayerTypeEthernet, gopacket.Default)
	require.NotNil(t, p.ErrorLayer())
	assert.True(t, p.Metadata().Truncated)
}

// A reminder is the flags resend and collision without ACK (inaemu's
// reserved value); the setters write what the getters read.
func TestINAPSViewSettersAndReminder(t *testing.T) {
	h := wire.INAPS(make([]byte, wire.INAPSLen))
	h.SetJob(7)
	h.SetSeq(65535)
	h.SetAggregator(12)
	h.SetFlags(wire.INAPSFlagsReminder)
	h.SetValue(5, -42)
	assert.True(t, h.IsReminder())
	assert.Equal(t, [3]uint16{7, 65535, 12}, [3]uint16{h.Job(), h.Seq(), h.Aggregator()})
	assert.Equal(t, int32(-42), h.Value(5))
	h.SetFlags(wire.INAPSFlagsReminder | wire.INAPSFlagACK)
	assert.False(t, h.IsReminder(), "a collision ACK is no reminder")
}

// Reading a frame's fields through the view allocates nothing.
func TestINAPSViewAllocatesNothing(t *testing.T) {
	h := wire.INAPS(inapsFrame(t)[34:])
	var sum int64
	allocs := testing.AllocsPerRun(100, func() {
		for i := range wire.INAPSValues {
			sum += int64(h.Value(i))
		}
		sum += int64(h.Job()) + int64(h.Seq()) + int64(h.Aggregator()) + int64(h.Bitmap())
	})
	assert.Zero(t, allocs)
	assert.NotZero(t, sum)
}
