package frames

import (
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
// Each header is a file of its own, its layout drawn at the top: bth.go,
// grh.go, the extension headers (ext.go for what they share, reth.go,
// aeth.go, immdt.go, ieth.go, deth.go, atomic.go, feth.go), cnp.go and
// ina.go. This file registers them and holds what spans them.
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
