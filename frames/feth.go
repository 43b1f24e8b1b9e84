package frames

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"

	"github.com/inaemu/inaemu/frames/wire"
)

// FETH is the 4-byte Flush Extended Transport Header, kept raw.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Reserved                     |SEL|  PLT  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// SEL is the selectivity level, PLT the placement type. FLUSH comes from the
// memory placement extensions of IBA Vol 1 (release 1.5) [section number
// unverified]; the layout is rxe_hdr.h's (FETH_PLT_MASK bits 3..0,
// FETH_SEL_MASK bits 5..4).
type FETH struct {
	extBase
	Raw uint32
}

func (x *FETH) LayerType() gopacket.LayerType     { return LayerTypeFETH }
func (x *FETH) CanDecode() gopacket.LayerClass    { return LayerTypeFETH }
func (x *FETH) NextLayerType() gopacket.LayerType { return x.next(wire.ExtFETH) }
func (x *FETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := x.split(data, wire.FETHLen, "FETH", df); err != nil {
		return err
	}
	x.Raw = binary.BigEndian.Uint32(data)
	return nil
}
func (x *FETH) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.FETHLen)
	if err == nil {
		binary.BigEndian.PutUint32(d, x.Raw)
	}
	return err
}
