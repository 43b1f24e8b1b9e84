package frames

import (
	"fmt"
	"net"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/inaemu/inaemu/frames/wire"
)

// GRH is the RoCEv1 Global Route Header (an IPv6-shaped header, NxtHdr 0x1B).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| IPVer |     TClass    |               FlowLabel               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|             PayLen            |     NxtHdr    |     HopLmt    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+                              SGID                             +
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+                              DGID                             +
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IBA Vol 1 §8.3, the Global Route Header, which the RoCE annex (A16)
// carries over Ethernet [section numbers unverified]; old rxe's rxe_net.c
// and docs/roce.md §1 give the same fields. PayLen counts from the BTH
// through the ICRC.
type GRH struct {
	layers.BaseLayer
	IPVer     uint8
	TClass    uint8
	FlowLabel uint32
	PayLen    uint16 // BTH through ICRC
	NxtHdr    uint8
	HopLmt    uint8
	SGID      net.IP
	DGID      net.IP
}

func (g *GRH) LayerType() gopacket.LayerType  { return LayerTypeGRH }
func (g *GRH) CanDecode() gopacket.LayerClass { return LayerTypeGRH }
func (g *GRH) NetworkFlow() gopacket.Flow {
	return gopacket.NewFlow(layers.EndpointIPv6, g.SGID, g.DGID)
}
func (g *GRH) NextLayerType() gopacket.LayerType {
	if g.NxtHdr == wire.GRHNextHeaderIBA {
		return LayerTypeBTH
	}
	return gopacket.LayerTypePayload
}

func (g *GRH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.GRHLen {
		df.SetTruncated()
		return fmt.Errorf("GRH: %d bytes, need %d", len(data), wire.GRHLen)
	}
	h := wire.GRH(data)
	g.IPVer, g.TClass, g.FlowLabel = h.IPVer(), h.TClass(), h.FlowLabel()
	g.PayLen, g.NxtHdr, g.HopLmt = h.PayLen(), h.NxtHdr(), h.HopLmt()
	g.SGID, g.DGID = net.IP(data[8:24]), net.IP(data[24:40])
	if g.IPVer != 6 {
		return fmt.Errorf("GRH: IPVer %d, want 6", g.IPVer)
	}
	end := wire.GRHLen + int(g.PayLen)
	if end > len(data) {
		df.SetTruncated()
		return fmt.Errorf("GRH: PayLen %d but only %d bytes follow", g.PayLen, len(data)-wire.GRHLen)
	}
	// Bytes after PayLen are Ethernet padding, not RoCE.
	g.BaseLayer = layers.BaseLayer{Contents: data[:wire.GRHLen], Payload: data[wire.GRHLen:end]}
	return nil
}

func (g *GRH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	payLen := len(b.Bytes())
	h, err := b.PrependBytes(wire.GRHLen)
	if err != nil {
		return err
	}
	if opts.FixLengths {
		g.IPVer, g.NxtHdr, g.PayLen = 6, wire.GRHNextHeaderIBA, uint16(payLen)
	}
	gh := wire.GRH(h)
	gh.SetVersionClassFlow(g.IPVer, g.TClass, g.FlowLabel)
	gh.SetPayLen(g.PayLen)
	h[6], h[7] = g.NxtHdr, g.HopLmt
	if err := put16(h[8:24], g.SGID, "SGID"); err != nil {
		return err
	}
	return put16(h[24:40], g.DGID, "DGID")
}

func put16(d []byte, ip net.IP, what string) error {
	a := ip.To16()
	if a == nil {
		return fmt.Errorf("GRH: %s %v is not a 16-byte GID", what, ip)
	}
	copy(d, a)
	return nil
}

func decodeGRH(data []byte, p gopacket.PacketBuilder) error {
	g := &GRH{}
	if err := g.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(g)
	p.SetNetworkLayer(g)
	return p.NextDecoder(g.NextLayerType())
}
