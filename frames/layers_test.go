package frames_test

import (
	"encoding/hex"
	"fmt"
	"net/netip"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/testvec"
)

// TestLayersVectors decodes every test vector in testdata/vectors with
// gopacket.NewPacket (no setup beyond importing frames), checks the RoCE
// layers against the manifest, checks DecodingLayerParser sees the same
// layers, and serializes the decoded layers back to the identical bytes.
func TestLayersVectors(t *testing.T) {
	vecs, err := testvec.Load()
	require.NoError(t, err)
	for _, want := range vecs {
		t.Run(fmt.Sprintf("%s#%d", want.File, want.FrameIndex), func(t *testing.T) {
			pkt := gopacket.NewPacket(want.Data, layers.LayerTypeEthernet, gopacket.Default)
			require.Nil(t, pkt.ErrorLayer(), "decode error")
			bth, ok := pkt.Layer(frames.LayerTypeBTH).(*frames.BTH)
			require.True(t, ok, "no BTH layer in %v", pkt)
			assert.Equal(t, want.BTH.Opcode, uint8(bth.Opcode))
			assert.Equal(t, want.BTH.PSN, bth.PSN)
			assert.Equal(t, want.BTH.DestQP, bth.DestQP)
			assert.Equal(t, want.BTH.AckReq, b2i(bth.AckReq))
			assert.Equal(t, want.BTH.SE, b2i(bth.SE))
			assert.Equal(t, want.BTH.PadCount, int(bth.PadCnt))
			assert.Equal(t, want.BTH.PKey, bth.PKey)
			assert.Equal(t, want.BTH.FECN, b2i(bth.FECN))
			assert.Equal(t, want.BTH.BECN, b2i(bth.BECN))
			assert.Equal(t, want.PadHex, hex.EncodeToString(bth.Pad))
			icrc := hex.EncodeToString(want.Data[want.ICRCOffset : want.ICRCOffset+4])
			assert.Equal(t, want.ICRCWire, icrc)
			var le [4]byte
			le[0], le[1], le[2], le[3] = byte(bth.ICRC), byte(bth.ICRC>>8), byte(bth.ICRC>>16), byte(bth.ICRC>>24)
			assert.Equal(t, want.ICRCWire, hex.EncodeToString(le[:]))
			if want.RETH != nil {
				r := pkt.Layer(frames.LayerTypeRETH).(*frames.RETH)
				assert.Equal(t, want.RETH.VA, r.VA)
				assert.Equal(t, want.RETH.RKey, r.RKey)
				assert.Equal(t, want.RETH.DMALen, r.DMALen)
			} else {
				assert.Nil(t, pkt.Layer(frames.LayerTypeRETH))
			}
			if want.AETH != nil {
				a := pkt.Layer(frames.LayerTypeAETH).(*frames.AETH)
				assert.Equal(t, want.AETH.Syndrome, uint8(a.Syndrome))
				assert.Equal(t, want.AETH.MSN, a.MSN)
			} else {
				assert.Nil(t, pkt.Layer(frames.LayerTypeAETH))
			}
			if want.ImmDt != nil {
				assert.Equal(t, *want.ImmDt, pkt.Layer(frames.LayerTypeImmDt).(*frames.ImmDt).Imm)
			} else {
				assert.Nil(t, pkt.Layer(frames.LayerTypeImmDt))
			}
			last := pkt.Layers()[len(pkt.Layers())-1]
			payLen := 0
			if last.LayerType() == gopacket.LayerTypePayload || last.LayerType() == frames.LayerTypeCNP {
				payLen = len(last.LayerContents())
			}
			assert.Equal(t, want.PayloadLen, payLen, "payload excludes pad and ICRC")

			// DecodingLayerParser decodes the same layer sequence.
			var (
				eth     layers.Ethernet
				ip4     layers.IPv4
				ip6     layers.IPv6
				udp     layers.UDP
				payload gopacket.Payload
				rl      frames.DecodingLayers
			)
			parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
				append([]gopacket.DecodingLayer{&eth, &ip4, &ip6, &udp, &payload}, rl.Layers()...)...)
			var decoded []gopacket.LayerType
			require.NoError(t, parser.DecodeLayers(want.Data, &decoded))
			var fromPacket []gopacket.LayerType
			for _, l := range pkt.Layers() {
				fromPacket = append(fromPacket, l.LayerType())
			}
			assert.Equal(t, fromPacket, decoded)
			assert.Equal(t, bth.PSN, rl.BTH.PSN)

			// Round trip: the decoded layers serialize to the same bytes.
			var sl []gopacket.SerializableLayer
			for _, l := range pkt.Layers() {
				sl = append(sl, l.(gopacket.SerializableLayer))
			}
			buf := gopacket.NewSerializeBuffer()
			require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, sl...))
			assert.Equal(t, hex.EncodeToString(want.Data), hex.EncodeToString(buf.Bytes()))
		})
	}
}

// A hand-checked RoCEv2 frame with an 802.1Q tag, an INA header and an
// Ethernet trailer, as a hex dump in gopacket's testing style.
//
//	dst 02:00:00:00:00:02 src 02:00:00:00:00:01, 802.1Q vid 5 pcp 3 -> IPv4
//	10.0.0.1 -> 10.0.0.2, DF, TTL 64, ID 7 (checksum 269c, by python); UDP 0xc123 -> 4791, checksum 0
//	BTH RC_RDMA_WRITE_ONLY (0x0a), pad 1, pkey ffff, QP 0x000102, A, PSN 0xfffffe
//	RETH va 0x1000 rkey 0x2a len 11; INA "INA1" ring 1 msg 2 msglen 3 rank 4
//	payload aa bb cc, pad 00, ICRC, then 6 bytes of Ethernet padding
const vlanINAFrame = "020000000002 020000000001 8100 6005 0800" +
	"4500 0048 0007 4000 4011 269c 0a000001 0a000002" +
	"c123 12b7 0034 0000" +
	"0a10ffff 00000102 80fffffe" +
	"0000000000001000 0000002a 0000000b" +
	"494e4131 01020304" +
	"aabbcc 00" +
	"%s" +
	"000000000000"

func TestLayersVLANINATrailer(t *testing.T) {
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB,
		VLAN: true, VLANID: 5, VLANPCP: 3,
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), SrcPort: 0xc123, DestQP: 0x102})
	require.NoError(t, err)
	b.SetIPID(7)
	buf := make([]byte, 256)
	n, err := b.Build(buf, &frames.Packet{Opcode: wire.WriteOnly, PSN: 0xfffffe, AckReq: true,
		RETH: frames.RETHFields{VA: 0x1000, RKey: 0x2a, DMALen: 11}, HasINA: true,
		INA: frames.INAFields{RingID: 1, MsgID: 2, MsgLen: 3, Rank: 4}, Payload: []byte{0xaa, 0xbb, 0xcc}})
	require.NoError(t, err)
	frame := append(buf[:n:n], 0, 0, 0, 0, 0, 0) // Ethernet padding
	icrc := hex.EncodeToString(frame[n-4 : n])
	assert.Equal(t, hex.EncodeToString(mustHex(t, fmt.Sprintf(vlanINAFrame, icrc))), hex.EncodeToString(frame))

	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, pkt.ErrorLayer())
	var types []gopacket.LayerType
	for _, l := range pkt.Layers() {
		types = append(types, l.LayerType())
	}
	assert.Equal(t, []gopacket.LayerType{layers.LayerTypeEthernet, layers.LayerTypeDot1Q, layers.LayerTypeIPv4,
		layers.LayerTypeUDP, frames.LayerTypeBTH, frames.LayerTypeRETH, frames.LayerTypeINA, gopacket.LayerTypePayload}, types)
	ina := pkt.Layer(frames.LayerTypeINA).(*frames.INA)
	assert.Equal(t, frames.INA{BaseLayer: ina.BaseLayer, Tag: wire.INATag, RingID: 1, MsgID: 2, MsgLen: 3, Rank: 4}, *ina)
	assert.Equal(t, []byte{0xaa, 0xbb, 0xcc}, pkt.ApplicationLayer().Payload())
	assert.Equal(t, []byte{0}, pkt.Layer(frames.LayerTypeBTH).(*frames.BTH).Pad)

	var v frames.View
	require.NoError(t, v.Parse(frame))
	assert.Equal(t, 1, v.VLANs())
	assert.Equal(t, uint16(5), v.VLANID())
	assert.Equal(t, 6, v.TrailerLen())
	assert.True(t, v.ICRCOK(), "trailer must not be hashed")
	assert.Equal(t, 11, len(v.Payload()))
	require.NotNil(t, v.INA())
	assert.Equal(t, uint8(4), v.INA().Rank())
	ok, err := frames.VerifyICRC(frame)
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestDecodingLayersAllocateNothing pins the layers' zero-allocation
// decoding: a DecodingLayerParser over DecodingLayers decodes a frame with
// a RETH, an ImmDt and an INA header without allocating, on every
// transport.
func TestDecodingLayersAllocateNothing(t *testing.T) {
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		buf := make([]byte, 2048)
		n, err := benchBuilder(t, tr).Build(buf, &frames.Packet{Opcode: wire.WriteOnlyWithImm, PSN: 9, AckReq: true, Imm: 5,
			RETH: frames.RETHFields{VA: 1, RKey: 2, DMALen: 1021}, HasINA: true, Payload: seq(1013)})
		require.NoError(t, err)
		var (
			eth     layers.Ethernet
			ip4     layers.IPv4
			ip6     layers.IPv6
			udp     layers.UDP
			payload gopacket.Payload
			rl      frames.DecodingLayers
		)
		parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
			append([]gopacket.DecodingLayer{&eth, &ip4, &ip6, &udp, &payload}, rl.Layers()...)...)
		decoded := make([]gopacket.LayerType, 0, 16)
		allocs := testing.AllocsPerRun(100, func() {
			if err := parser.DecodeLayers(buf[:n], &decoded); err != nil {
				t.Fatal(err)
			}
		})
		require.Contains(t, decoded, frames.LayerTypeINA, "%v", tr)
		require.Contains(t, decoded, frames.LayerTypeImmDt, "%v", tr)
		require.Zero(t, allocs, "%v: allocations per decode of %v", tr, decoded)
	}
}
