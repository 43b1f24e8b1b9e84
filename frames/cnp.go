package frames

import (
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/inaemu/inaemu/frames/wire"
)

// CNP is the body of a congestion notification packet: 16 reserved bytes.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+                  Reserved (16 bytes of zero)                  +
//	|                                                               |
//	+                                                               +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The RoCEv2 annex (IBA Vol 1 Annex A17) defines the congestion notification
// packet [section number unverified]: BTH opcode 0x81 with BECN set, then
// these 16 bytes; scapy's cnp() builds the same (docs/roce.md §1).
type CNP struct {
	layers.BaseLayer
	Reserved [wire.CNPLen]byte
}

func (c *CNP) LayerType() gopacket.LayerType     { return LayerTypeCNP }
func (c *CNP) CanDecode() gopacket.LayerClass    { return LayerTypeCNP }
func (c *CNP) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }
func (c *CNP) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.CNPLen {
		df.SetTruncated()
		return fmt.Errorf("CNP: %d bytes, need %d", len(data), wire.CNPLen)
	}
	copy(c.Reserved[:], data)
	c.BaseLayer = layers.BaseLayer{Contents: data[:wire.CNPLen], Payload: data[wire.CNPLen:]}
	return nil
}
func (c *CNP) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.CNPLen)
	if err == nil {
		copy(d, c.Reserved[:])
	}
	return err
}

func decodeCNP(data []byte, p gopacket.PacketBuilder) error {
	c := &CNP{}
	if err := c.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(c)
	return p.NextDecoder(c.NextLayerType())
}
