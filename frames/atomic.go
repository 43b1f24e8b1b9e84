package frames

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"

	"github.com/inaemu/inaemu/frames/wire"
)

// AtomicETH is the Atomic Extended Transport Header.
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
//	|                                                               |
//	+                       Swap (or Add) Data                      +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                          Compare Data                         +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IBA Vol 1 §9.3, the Atomic Extended Transport Header [section number
// unverified]; rxe_hdr.h and docs/roce.md §1. Compare Data is used by
// COMPARE SWAP only.
type AtomicETH struct {
	extBase
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

func (x *AtomicETH) LayerType() gopacket.LayerType     { return LayerTypeAtomicETH }
func (x *AtomicETH) CanDecode() gopacket.LayerClass    { return LayerTypeAtomicETH }
func (x *AtomicETH) NextLayerType() gopacket.LayerType { return x.next(wire.ExtAtomicETH) }
func (x *AtomicETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := x.split(data, wire.AtomicETHLen, "AtomicETH", df); err != nil {
		return err
	}
	h := wire.AtomicETH(data)
	x.VA, x.RKey, x.SwapAdd, x.Compare = h.VA(), h.RKey(), h.SwapAdd(), h.Compare()
	return nil
}
func (x *AtomicETH) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.AtomicETHLen)
	if err == nil {
		h := wire.AtomicETH(d)
		h.SetVA(x.VA)
		h.SetRKey(x.RKey)
		h.SetSwapAdd(x.SwapAdd)
		h.SetCompare(x.Compare)
	}
	return err
}

// AtomicAckETH carries the original remote value of an atomic.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                                                               |
//	+                      Original Remote Data                     +
//	|                                                               |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IBA Vol 1 §9.3, the Atomic Acknowledge Extended Transport Header [section
// number unverified]; rxe_hdr.h and docs/roce.md §1.
type AtomicAckETH struct {
	extBase
	OrigData uint64
}

func (x *AtomicAckETH) LayerType() gopacket.LayerType     { return LayerTypeAtomicAckETH }
func (x *AtomicAckETH) CanDecode() gopacket.LayerClass    { return LayerTypeAtomicAckETH }
func (x *AtomicAckETH) NextLayerType() gopacket.LayerType { return x.next(wire.ExtAtomicAckETH) }
func (x *AtomicAckETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := x.split(data, wire.AtomicAckETHLen, "AtomicAckETH", df); err != nil {
		return err
	}
	x.OrigData = binary.BigEndian.Uint64(data)
	return nil
}
func (x *AtomicAckETH) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.AtomicAckETHLen)
	if err == nil {
		binary.BigEndian.PutUint64(d, x.OrigData)
	}
	return err
}
