package frames

import (
	"github.com/gopacket/gopacket"

	"github.com/inaemu/inaemu/frames/wire"
)

// DETH is the Datagram Extended Transport Header (UD).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                             Q_Key                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Reserved   |                     SrcQP                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IBA Vol 1 §9.3, the Datagram Extended Transport Header [section number
// unverified]; ib_pack.h and docs/roce.md §1.
type DETH struct {
	extBase
	QKey  uint32
	SrcQP uint32
}

func (x *DETH) LayerType() gopacket.LayerType     { return LayerTypeDETH }
func (x *DETH) CanDecode() gopacket.LayerClass    { return LayerTypeDETH }
func (x *DETH) NextLayerType() gopacket.LayerType { return x.next(wire.ExtDETH) }
func (x *DETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := x.split(data, wire.DETHLen, "DETH", df); err != nil {
		return err
	}
	h := wire.DETH(data)
	x.QKey, x.SrcQP = h.QKey(), h.SrcQP()
	return nil
}
func (x *DETH) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.DETHLen)
	if err == nil {
		h := wire.DETH(d)
		h.SetQKey(x.QKey)
		h.SetSrcQP(x.SrcQP)
	}
	return err
}
