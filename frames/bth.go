package frames

import (
	"encoding/binary"
	"fmt"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/inaemu/inaemu/frames/wire"
)

// BTH is the Base Transport Header, together with the packet's pad bytes and
// ICRC (which trail the payload but belong to the transport). Its Payload
// is everything between the BTH and the pad: extension headers and data.
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     OpCode    |S|M|Pad|  TVer |             P_Key             |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|F|B|   Resv6   |                     DestQP                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|A|    Resv7    |                      PSN                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// S is SE, M MigReq, Pad PadCnt, F FECN, B BECN, A AckReq. IBA Vol 1 §9.2,
// the Base Transport Header [section number unverified]; rxe_hdr.h and
// docs/roce.md §1 give the same layout. The extension headers the opcode
// names follow it; the pad (PadCnt zero bytes) and the 4-byte ICRC trail the
// payload (docs/roce.md §2).
type BTH struct {
	layers.BaseLayer
	Opcode wire.Opcode
	SE     bool
	MigReq bool
	PadCnt uint8
	TVer   uint8
	PKey   uint16
	FECN   bool
	BECN   bool
	Resv6  uint8
	DestQP uint32
	AckReq bool
	Resv7  uint8
	PSN    uint32
	Pad    []byte
	// ICRC is the CRC value the packet carries; its wire bytes are this
	// value little-endian. Verify it with VerifyICRC on the whole frame.
	ICRC uint32
}

func (b *BTH) LayerType() gopacket.LayerType  { return LayerTypeBTH }
func (b *BTH) CanDecode() gopacket.LayerClass { return LayerTypeBTH }

// NextLayerType is the first extension header, else the payload's type.
func (b *BTH) NextLayerType() gopacket.LayerType {
	if h := b.Opcode.Ext().First(); h != 0 {
		return extLayerType(h)
	}
	return b.payloadType(b.Payload)
}

// payloadType is the layer type of the data after the last extension header.
func (b *BTH) payloadType(p []byte) gopacket.LayerType {
	switch {
	case len(p) == 0:
		return gopacket.LayerTypeZero
	case b.Opcode == wire.CNP:
		return LayerTypeCNP
	case b.Opcode.IsWrite() && b.Opcode.IsFirst() && wire.IsINA(p):
		return LayerTypeINA
	}
	return gopacket.LayerTypePayload
}

func (b *BTH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.BTHLen+wire.ICRCLen {
		df.SetTruncated()
		return fmt.Errorf("BTH: %d bytes, need %d for BTH and ICRC", len(data), wire.BTHLen+wire.ICRCLen)
	}
	h := wire.BTH(data)
	b.Opcode, b.SE, b.MigReq = h.Opcode(), h.SE(), h.MigReq()
	b.PadCnt, b.TVer, b.PKey = uint8(h.PadCnt()), h.TVer(), h.PKey()
	b.FECN, b.BECN, b.Resv6 = h.FECN(), h.BECN(), h.Resv6()
	b.DestQP, b.AckReq, b.Resv7, b.PSN = h.DestQP(), h.AckReq(), h.Resv7(), h.PSN()
	icrc := len(data) - wire.ICRCLen
	end := icrc - int(b.PadCnt)
	if end < wire.BTHLen+b.Opcode.Ext().Len() {
		return fmt.Errorf("BTH: %s with pad %d needs %d bytes before the ICRC, have %d",
			b.Opcode, b.PadCnt, wire.BTHLen+b.Opcode.Ext().Len()+int(b.PadCnt), icrc)
	}
	b.Pad = data[end:icrc]
	b.ICRC = binary.LittleEndian.Uint32(data[icrc:])
	b.BaseLayer = layers.BaseLayer{Contents: data[:wire.BTHLen], Payload: data[wire.BTHLen:end]}
	return nil
}

// SerializeTo writes the BTH in front of the payload and the pad and ICRC
// after it. gopacket serializes from the innermost layer outwards, so the
// ICRC, which covers the IP header, cannot be known here: the ICRC field is
// written as it is, and SerializeRoCE (or FixICRC) computes it afterwards.
func (b *BTH) SerializeTo(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	if opts.FixLengths {
		// The pad completes the data after the extension headers.
		data := len(buf.Bytes()) - b.Opcode.Ext().Len()
		if data < 0 {
			data = 0
		}
		b.PadCnt = uint8(wire.PadCount(data))
		b.Pad = make([]byte, b.PadCnt)
	}
	if len(b.Pad) != int(b.PadCnt) {
		return fmt.Errorf("BTH: PadCnt %d but %d pad bytes", b.PadCnt, len(b.Pad))
	}
	tail, err := buf.AppendBytes(len(b.Pad) + wire.ICRCLen)
	if err != nil {
		return err
	}
	copy(tail, b.Pad)
	binary.LittleEndian.PutUint32(tail[len(b.Pad):], b.ICRC)
	h, err := buf.PrependBytes(wire.BTHLen)
	if err != nil {
		return err
	}
	x := wire.BTH(h)
	x.SetOpcode(b.Opcode)
	h[1] = 0
	x.SetSE(b.SE)
	x.SetMigReq(b.MigReq)
	x.SetPadCnt(int(b.PadCnt))
	x.SetTVer(b.TVer)
	x.SetPKey(b.PKey)
	h[4] = 0
	x.SetFECN(b.FECN)
	x.SetBECN(b.BECN)
	x.SetResv6(b.Resv6)
	x.SetDestQP(b.DestQP)
	h[8] = 0
	x.SetAckReq(b.AckReq)
	x.SetResv7(b.Resv7)
	x.SetPSN(b.PSN)
	return nil
}

func decodeBTH(data []byte, p gopacket.PacketBuilder) error {
	b := &BTH{}
	if err := b.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(b)
	// Extension headers are decoded here, where the opcode is known.
	rest := b.Payload
	ext := b.Opcode.Ext()
	for h := ext.First(); h != 0; h = ext.Next(h) {
		l := newExtLayer(h, b)
		if err := l.DecodeFromBytes(rest, p); err != nil {
			return err
		}
		p.AddLayer(l)
		rest = l.LayerPayload()
	}
	return p.NextDecoder(b.payloadType(rest))
}
