package frames_test

import (
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

func mustHex(t testing.TB, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	require.NoError(t, err)
	return b
}

func seq(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 1}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 2}
)

// TestBuilderWorkedExample builds the worked example of docs/roce.md §2 (made
// with scapy 2.5.0 and cross-checked with zlib) and compares every byte.
func TestBuilderWorkedExample(t *testing.T) {
	want := mustHex(t, `020000000002 020000000001 0800
		45 00 003c 1234 4000 40 11 147b 0a000001 0a000002
		c000 12b7 0028 0000
		04 00 ffff 00 000011 80 000001
		000102030405060708090a0b0c0d0e0f
		8eaf9f6c`)
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB,
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), SrcPort: 0xC000, DestQP: 0x11})
	require.NoError(t, err)
	b.SetIPID(0x1234)
	buf := make([]byte, 2048)
	n, err := b.Build(buf, &frames.Packet{Opcode: wire.SendOnly, PSN: 1, AckReq: true, Payload: seq(16)})
	require.NoError(t, err)
	assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(buf[:n]))
}

// TestBuilderDerivedExamples checks the IPv6 and RoCEv1 ICRCs docs/roce.md §2
// derives for the same BTH and payload.
func TestBuilderDerivedExamples(t *testing.T) {
	for _, c := range []struct {
		tr       frames.Transport
		src, dst string
		icrc     string
	}{
		{frames.V2IPv6, "fd00::1", "fd00::2", "6b4fac1a"},
		{frames.V1, "fe80::1", "fe80::2", "d1c2f35c"},
	} {
		b, err := frames.NewBuilder(frames.Path{Transport: c.tr, SrcMAC: macA, DstMAC: macB,
			SrcIP: netip.MustParseAddr(c.src), DstIP: netip.MustParseAddr(c.dst), SrcPort: 0xC000, DestQP: 0x11})
		require.NoError(t, err)
		buf := make([]byte, 2048)
		n, err := b.Build(buf, &frames.Packet{Opcode: wire.SendOnly, PSN: 1, AckReq: true, Payload: seq(16)})
		require.NoError(t, err)
		var v frames.View
		require.NoError(t, v.Parse(buf[:n]))
		assert.Equal(t, c.icrc, hex.EncodeToString(v.ICRCBytes()), c.tr.String())
		assert.True(t, v.ICRCOK())
	}
}

// TestBuilderPadsRunts: an empty SEND over untagged IPv4 is 58 bytes; the
// builder pads it to the 60-byte Ethernet minimum as a NIC would, outside
// the IP datagram, so lengths and the ICRC are unchanged.
func TestBuilderPadsRunts(t *testing.T) {
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB,
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), DestQP: 3})
	require.NoError(t, err)
	buf := make([]byte, 128)
	for i := range buf {
		buf[i] = 0xEE
	}
	pkt := &frames.Packet{Opcode: wire.SendOnly, PSN: 1}
	n, err := b.Build(buf, pkt)
	require.NoError(t, err)
	assert.Equal(t, 60, n)
	assert.Equal(t, 60, b.FrameLen(pkt))
	assert.Equal(t, []byte{0, 0}, buf[58:60])
	assert.Equal(t, []byte{0x00, 44}, buf[16:18], "IPv4 total length excludes the padding")
	var v frames.View
	require.NoError(t, v.Parse(buf[:n]))
	assert.Equal(t, 2, v.TrailerLen())
	assert.True(t, v.ICRCOK())
	_, err = b.Build(buf[:59], pkt)
	assert.ErrorIs(t, err, frames.ErrBufferTooSmall)
}
