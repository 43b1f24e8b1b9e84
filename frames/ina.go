package frames

import (
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/inaemu/inaemu/frames/wire"
)

// INA is the NetReduce in-network-aggregation header that starts the
// payload of the first packet of each message (see wire.INA).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                            InetTag                            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     RingID    |     MsgID     |     MsgLen    |      Rank     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Fig. 4 of NetReduce: Shuo Liu et al., "In-Network Aggregation with
// Transport Transparency for Distributed Training", ASPLOS '23
// (https://doi.org/10.1145/3582016.3582037); docs/internals.md describes
// inaemu's InetTag, wire.INATag.
type INA struct {
	layers.BaseLayer
	Tag    uint32
	RingID uint8
	MsgID  uint8
	MsgLen uint8
	Rank   uint8
}

func (x *INA) LayerType() gopacket.LayerType     { return LayerTypeINA }
func (x *INA) CanDecode() gopacket.LayerClass    { return LayerTypeINA }
func (x *INA) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }
func (x *INA) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.INALen {
		df.SetTruncated()
		return fmt.Errorf("INA: %d bytes, need %d", len(data), wire.INALen)
	}
	h := wire.INA(data)
	x.Tag, x.RingID, x.MsgID, x.MsgLen, x.Rank = h.Tag(), h.RingID(), h.MsgID(), h.MsgLen(), h.Rank()
	x.BaseLayer = layers.BaseLayer{Contents: data[:wire.INALen], Payload: data[wire.INALen:]}
	return nil
}
func (x *INA) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.INALen)
	if err == nil {
		h := wire.INA(d)
		h.SetTag(x.Tag)
		h.SetRingID(x.RingID)
		h.SetMsgID(x.MsgID)
		h.SetMsgLen(x.MsgLen)
		h.SetRank(x.Rank)
	}
	return err
}

func decodeINA(data []byte, p gopacket.PacketBuilder) error {
	x := &INA{}
	if err := x.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(x)
	return p.NextDecoder(x.NextLayerType())
}
