package frames

import (
	"encoding/binary"

	"github.com/gopacket/gopacket"

	"github.com/inaemu/inaemu/frames/wire"
)

// ImmDt is the 4-byte immediate data header.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Immediate Data                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// IBA Vol 1 §9.3, the Immediate Data Extended Transport Header [section
// number unverified]; rxe_hdr.h and docs/roce.md §1.
type ImmDt struct {
	extBase
	Imm uint32
}

func (m *ImmDt) LayerType() gopacket.LayerType     { return LayerTypeImmDt }
func (m *ImmDt) CanDecode() gopacket.LayerClass    { return LayerTypeImmDt }
func (m *ImmDt) NextLayerType() gopacket.LayerType { return m.next(wire.ExtImmDt) }
func (m *ImmDt) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if err := m.split(data, wire.ImmDtLen, "ImmDt", df); err != nil {
		return err
	}
	m.Imm = binary.BigEndian.Uint32(data)
	return nil
}
func (m *ImmDt) SerializeTo(buf gopacket.SerializeBuffer, _ gopacket.SerializeOptions) error {
	d, err := buf.PrependBytes(wire.ImmDtLen)
	if err == nil {
		binary.BigEndian.PutUint32(d, m.Imm)
	}
	return err
}
