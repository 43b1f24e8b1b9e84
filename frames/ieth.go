package frames

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"

	"github.com/inaemu/inaemu/frames/wire"
)

// IETH is the Invalidate Extended Transport Header.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                             R_Key                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IBA Vol 1 §9.3, the Invalidate Extended Transport Header [section number
// unverified]; rxe_hdr.h and docs/roce.md §1. It carries the R_Key that SEND
// WITH INVALIDATE invalidates.
type IETH struct {
	extBase
	RKey uint32
}

func (x *IETH) LayerType() gopacket.LayerType     { return LayerTypeIETH }
func (x *IETH) CanDecode() gopacket.LayerClass    { return LayerTypeIETH }
func (x *IETH) NextLayerType() gopacket.LayerType { return x.next(wire.ExtIETH) }
func (x *IETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := x.split(data, wire.IETHLen, "IETH", df); err != nil {
		return err
	}
	x.RKey = binary.BigEndian.Uint32(data)
	return nil
}
func (x *IETH) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.IETHLen)
	if err == nil {
		binary.BigEndian.PutUint32(d, x.RKey)
	}
	return err
}
