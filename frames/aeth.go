package frames

import (
	"github.com/gopacket/gopacket"

	"github.com/inaemu/inaemu/frames/wire"
)

// AETH is the ACK Extended Transport Header.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Syndrome   |                      MSN                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IBA Vol 1 §9.3, the ACK Extended Transport Header [section number
// unverified]; rxe_hdr.h and docs/roce.md §1, whose §4 lists the syndromes.
type AETH struct {
	extBase
	Syndrome wire.Syndrome
	MSN      uint32
}

func (a *AETH) LayerType() gopacket.LayerType     { return LayerTypeAETH }
func (a *AETH) CanDecode() gopacket.LayerClass    { return LayerTypeAETH }
func (a *AETH) NextLayerType() gopacket.LayerType { return a.next(wire.ExtAETH) }
func (a *AETH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := a.split(data, wire.AETHLen, "AETH", df); err != nil {
		return err
	}
	h := wire.AETH(data)
	a.Syndrome, a.MSN = h.Syndrome(), h.MSN()
	return nil
}
func (a *AETH) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.AETHLen)
	if err == nil {
		h := wire.AETH(d)
		h.SetSyndrome(a.Syndrome)
		h.SetMSN(a.MSN)
	}
	return err
}
