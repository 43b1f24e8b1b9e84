package frames

import (
	"encoding/binary"
	"fmt"
	"net"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/inaemu/inaemu/frames/wire"
)

// gopacket layers for RoCE. Importing this package registers them, so
// gopacket.NewPacket on an Ethernet frame decodes RoCEv2 over IPv4 and IPv6
// (UDP port 4791) and RoCEv1 (EtherType 0x8915), VLAN-tagged or not, with no
// further setup:
//
//	Ethernet [Dot1Q] IPv4|IPv6 UDP BTH [ext headers...] [INA] Payload
//	Ethernet [Dot1Q] GRH BTH [ext headers...] [INA] Payload
//
// The BTH layer holds the pad and the ICRC as fields; neither is left in any
// payload. RoCE headers carry no next-header field: which extension headers
// follow the BTH depends on its opcode, so every extension layer keeps a
// pointer to the BTH it belongs to. gopacket.NewPacket wires that pointer
// itself; for gopacket.DecodingLayerParser use DecodingLayers, which does.
//
// Like the rest of gopacket, UDP port 4791 is matched on either port; the
// zero-copy View, used on hot paths, only accepts destination port 4791.

// Layer type numbers, registered with gopacket in init.
var (
	LayerTypeGRH          = gopacket.RegisterLayerType(1791, gopacket.LayerTypeMetadata{Name: "GRH", Decoder: gopacket.DecodeFunc(decodeGRH)})
	LayerTypeBTH          = gopacket.RegisterLayerType(1792, gopacket.LayerTypeMetadata{Name: "BTH", Decoder: gopacket.DecodeFunc(decodeBTH)})
	LayerTypeRETH         = gopacket.RegisterLayerType(1793, gopacket.LayerTypeMetadata{Name: "RETH", Decoder: extDecoder(wire.ExtRETH)})
	LayerTypeAETH         = gopacket.RegisterLayerType(1794, gopacket.LayerTypeMetadata{Name: "AETH", Decoder: extDecoder(wire.ExtAETH)})
	LayerTypeImmDt        = gopacket.RegisterLayerType(1795, gopacket.LayerTypeMetadata{Name: "ImmDt", Decoder: extDecoder(wire.ExtImmDt)})
	LayerTypeIETH         = gopacket.RegisterLayerType(1796, gopacket.LayerTypeMetadata{Name: "IETH", Decoder: extDecoder(wire.ExtIETH)})
	LayerTypeDETH         = gopacket.RegisterLayerType(1797, gopacket.LayerTypeMetadata{Name: "DETH", Decoder: extDecoder(wire.ExtDETH)})
	LayerTypeAtomicETH    = gopacket.RegisterLayerType(1798, gopacket.LayerTypeMetadata{Name: "AtomicETH", Decoder: extDecoder(wire.ExtAtomicETH)})
	LayerTypeAtomicAckETH = gopacket.RegisterLayerType(1799, gopacket.LayerTypeMetadata{Name: "AtomicAckETH", Decoder: extDecoder(wire.ExtAtomicAckETH)})
	LayerTypeFETH         = gopacket.RegisterLayerType(1800, gopacket.LayerTypeMetadata{Name: "FETH", Decoder: extDecoder(wire.ExtFETH)})
	LayerTypeCNP          = gopacket.RegisterLayerType(1801, gopacket.LayerTypeMetadata{Name: "CNP", Decoder: gopacket.DecodeFunc(decodeCNP)})
	LayerTypeINA          = gopacket.RegisterLayerType(1802, gopacket.LayerTypeMetadata{Name: "INA", Decoder: gopacket.DecodeFunc(decodeINA)})
)

func init() {
	layers.EthernetTypeMetadata[EtherTypeRoCE] = layers.EnumMetadata{
		DecodeWith: gopacket.DecodeFunc(decodeGRH), Name: "RoCEv1", LayerType: LayerTypeGRH}
	layers.RegisterUDPPortLayerType(UDPPortRoCEv2, LayerTypeBTH)
}

// extLayerType maps an extension header to its layer type.
func extLayerType(h wire.Ext) gopacket.LayerType {
	switch h {
	case wire.ExtRETH:
		return LayerTypeRETH
	case wire.ExtAETH:
		return LayerTypeAETH
	case wire.ExtImmDt:
		return LayerTypeImmDt
	case wire.ExtIETH:
		return LayerTypeIETH
	case wire.ExtDETH:
		return LayerTypeDETH
	case wire.ExtAtomicETH:
		return LayerTypeAtomicETH
	case wire.ExtAtomicAckETH:
		return LayerTypeAtomicAckETH
	case wire.ExtFETH:
		return LayerTypeFETH
	}
	return gopacket.LayerTypeZero
}

// ---------------------------------------------------------------- GRH

// GRH is the RoCEv1 Global Route Header (an IPv6-shaped header, NxtHdr 0x1B).
type GRH struct {
	layers.BaseLayer
	IPVer     uint8
	TClass    uint8
	FlowLabel uint32
	PayLen    uint16 // BTH through ICRC
	NxtHdr    uint8
	HopLmt    uint8
	SGID      net.IP
	DGID      net.IP
}

func (g *GRH) LayerType() gopacket.LayerType  { return LayerTypeGRH }
func (g *GRH) CanDecode() gopacket.LayerClass { return LayerTypeGRH }
func (g *GRH) NetworkFlow() gopacket.Flow {
	return gopacket.NewFlow(layers.EndpointIPv6, g.SGID, g.DGID)
}
func (g *GRH) NextLayerType() gopacket.LayerType {
	if g.NxtHdr == wire.GRHNextHeaderIBA {
		return LayerTypeBTH
	}
	return gopacket.LayerTypePayload
}

func (g *GRH) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < wire.GRHLen {
		df.SetTruncated()
		return fmt.Errorf("GRH: %d bytes, need %d", len(data), wire.GRHLen)
	}
	h := wire.GRH(data)
	g.IPVer, g.TClass, g.FlowLabel = h.IPVer(), h.TClass(), h.FlowLabel()
	g.PayLen, g.NxtHdr, g.HopLmt = h.PayLen(), h.NxtHdr(), h.HopLmt()
	g.SGID, g.DGID = net.IP(data[8:24]), net.IP(data[24:40])
	if g.IPVer != 6 {
		return fmt.Errorf("GRH: IPVer %d, want 6", g.IPVer)
	}
	end := wire.GRHLen + int(g.PayLen)
	if end > len(data) {
		df.SetTruncated()
		return fmt.Errorf("GRH: PayLen %d but only %d bytes follow", g.PayLen, len(data)-wire.GRHLen)
	}
	// Bytes after PayLen are Ethernet padding, not RoCE.
	g.BaseLayer = layers.BaseLayer{Contents: data[:wire.GRHLen], Payload: data[wire.GRHLen:end]}
	return nil
}

func (g *GRH) SerializeTo(b gopacket.SerializeBuffer, opts gopacket.SerializeOptions) error {
	payLen := len(b.Bytes())
	h, err := b.PrependBytes(wire.GRHLen)
	if err != nil {
		return err
	}
	if opts.FixLengths {
		g.IPVer, g.NxtHdr, g.PayLen = 6, wire.GRHNextHeaderIBA, uint16(payLen)
	}
	gh := wire.GRH(h)
	gh.SetVersionClassFlow(g.IPVer, g.TClass, g.FlowLabel)
	gh.SetPayLen(g.PayLen)
	h[6], h[7] = g.NxtHdr, g.HopLmt
	if err := put16(h[8:24], g.SGID, "SGID"); err != nil {
		return err
	}
	return put16(h[24:40], g.DGID, "DGID")
}

func put16(d []byte, ip net.IP, what string) error {
	a := ip.To16()
	if a == nil {
		return fmt.Errorf("GRH: %s %v is not a 16-byte GID", what, ip)
	}
	copy(d, a)
	return nil
}

func decodeGRH(data []byte, p gopacket.PacketBuilder) error {
	g := &GRH{}
	if err := g.DecodeFromBytes(data, p); err != nil {
		return err
	}
	p.AddLayer(g)
	p.SetNetworkLayer(g)
	return p.NextDecoder(g.NextLayerType())
}

// ---------------------------------------------------------------- BTH

// BTH is the Base Transport Header, together with the packet's pad bytes and
// ICRC (which trail the payload but belong to the transport). Its Payload
// is everything between the BTH and the pad: extension headers and data.
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

// ---------------------------------------------------------------- extension headers

// extLayer is what every extension header layer implements.
type extLayer interface {
	gopacket.DecodingLayer
	gopacket.Layer
	setBTH(*BTH)
}

// extBase carries the BTH an extension header belongs to, from which the
// header that follows it is known.
type extBase struct {
	layers.BaseLayer
	bth *BTH
}

func (e *extBase) setBTH(b *BTH) { e.bth = b }

func (e *extBase) next(h wire.Ext) gopacket.LayerType {
	if e.bth == nil {
		// Decoded without its BTH: nothing says what follows.
		return gopacket.LayerTypePayload
	}
	if n := e.bth.Opcode.Ext().Next(h); n != 0 {
		return extLayerType(n)
	}
	return e.bth.payloadType(e.Payload)
}

func (e *extBase) split(data []byte, n int, name string, df gopacket.DecodeFeedback) error {
	if len(data) < n {
		df.SetTruncated()
		return fmt.Errorf("%s: %d bytes, need %d", name, len(data), n)
	}
	e.BaseLayer = layers.BaseLayer{Contents: data[:n], Payload: data[n:]}
	return nil
}

func newExtLayer(h wire.Ext, b *BTH) extLayer {
	var l extLayer
	switch h {
	case wire.ExtRETH:
		l = &RETH{}
	case wire.ExtAETH:
		l = &AETH{}
	case wire.ExtImmDt:
		l = &ImmDt{}
	case wire.ExtIETH:
		l = &IETH{}
	case wire.ExtDETH:
		l = &DETH{}
	case wire.ExtAtomicETH:
		l = &AtomicETH{}
	case wire.ExtAtomicAckETH:
		l = &AtomicAckETH{}
	default:
		l = &FETH{}
	}
	l.setBTH(b)
	return l
}

// extDecoder decodes an extension header met outside decodeBTH (a user
// calling gopacket.NewPacket with an extension layer type as the first
// decoder); what follows it is then unknown and decoded as payload.
func extDecoder(h wire.Ext) gopacket.Decoder {
	return gopacket.DecodeFunc(func(data []byte, p gopacket.PacketBuilder) error {
		l := newExtLayer(h, nil)
		if err := l.DecodeFromBytes(data, p); err != nil {
			return err
		}
		p.AddLayer(l)
		return p.NextDecoder(l.NextLayerType())
	})
}

// RETH is the RDMA Extended Transport Header (WRITE FIRST/ONLY, READ REQUEST).
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

// AETH is the ACK Extended Transport Header.
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

// ImmDt is the 4-byte immediate data header.
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

// IETH is the Invalidate Extended Transport Header.
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

// DETH is the Datagram Extended Transport Header (UD).
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

// AtomicETH is the Atomic Extended Transport Header.
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

// FETH is the 4-byte Flush Extended Transport Header, kept raw.
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

// ---------------------------------------------------------------- CNP and INA

// CNP is the body of a congestion notification packet: 16 reserved bytes.
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

// INA is the NetReduce in-network-aggregation header that starts the
// payload of the first packet of each message (see wire.INA).
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

// ---------------------------------------------------------------- helpers

// DecodingLayers is a set of RoCE decoding layers for a
// gopacket.DecodingLayerParser, wired so that each extension header knows
// the BTH decoded before it:
//
//	var rl frames.DecodingLayers
//	parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
//		append([]gopacket.DecodingLayer{&eth, &vlan, &ip4, &ip6, &udp, &payload}, rl.Layers()...)...)
type DecodingLayers struct {
	GRH          GRH
	BTH          BTH
	RETH         RETH
	AETH         AETH
	ImmDt        ImmDt
	IETH         IETH
	DETH         DETH
	AtomicETH    AtomicETH
	AtomicAckETH AtomicAckETH
	FETH         FETH
	CNP          CNP
	INA          INA
}

// Layers returns the decoding layers, wiring their BTH pointers.
func (d *DecodingLayers) Layers() []gopacket.DecodingLayer {
	for _, e := range []extLayer{&d.RETH, &d.AETH, &d.ImmDt, &d.IETH, &d.DETH, &d.AtomicETH, &d.AtomicAckETH, &d.FETH} {
		e.setBTH(&d.BTH)
	}
	return []gopacket.DecodingLayer{&d.GRH, &d.BTH, &d.RETH, &d.AETH, &d.ImmDt, &d.IETH, &d.DETH,
		&d.AtomicETH, &d.AtomicAckETH, &d.FETH, &d.CNP, &d.INA}
}

// FixICRC parses a serialized frame and writes its correct ICRC.
func FixICRC(frame []byte) error {
	var v View
	if err := v.Parse(frame); err != nil {
		return err
	}
	v.SetICRC()
	return nil
}

// SerializeRoCE serializes layers like gopacket.SerializeLayers and then, if
// opts.ComputeChecksums is set, computes the ICRC over the finished frame.
func SerializeRoCE(buf gopacket.SerializeBuffer, opts gopacket.SerializeOptions, ls ...gopacket.SerializableLayer) error {
	if err := gopacket.SerializeLayers(buf, opts, ls...); err != nil {
		return err
	}
	if opts.ComputeChecksums {
		return FixICRC(buf.Bytes())
	}
	return nil
}
