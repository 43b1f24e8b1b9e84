package frames

import (
	"github.com/gopacket/gopacket"

	"github.com/inaemu/inaemu/frames/wire"
)

// RETH is the RDMA Extended Transport Header (WRITE FIRST/ONLY, READ REQUEST).
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                        Virtual Address                        +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                             R_Key                             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           DMA Length                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IBA Vol 1 §9.3, the RDMA Extended Transport Header [section number
// unverified]; rxe_hdr.h and docs/roce.md §1. DMA Length is the whole
// message's, not the packet's.
type RETH struct {
	extBase
	VA     uint64
	RKey   uint32
	DMALen uint32
}

func (r *RETH) LayerType() gopacket.LayerType     { return LayerTypeRETH }
func (r *RETH) CanDecode() gopacket.LayerClass    { return LayerTypeRETH }
func (r *RETH) NextLayerType() gopacket.LayerType { return r.next(wire.ExtRETH) }
func (r *RETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := r.split(data, wire.RETHLen, "RETH", df); err != nil {
		return err
	}
	h := wire.RETH(data)
	r.VA, r.RKey, r.DMALen = h.VA(), h.RKey(), h.DMALen()
	return nil
}
func (r *RETH) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.RETHLen)
	if err == nil {
		h := wire.RETH(d)
		h.SetVA(r.VA)
		h.SetRKey(r.RKey)
		h.SetDMALen(r.DMALen)
	}
	return err
}
