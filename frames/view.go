package frames

import (
	"encoding/binary"
	"net/netip"

	"github.com/inaemu/inaemu/frames/wire"
)

// Transport says how a RoCE frame is encapsulated.
type Transport uint8

const (
	NotRoCE Transport = iota
	V1                // Ethernet 0x8915 | GRH | BTH ...
	V2IPv4            // Ethernet | IPv4 | UDP 4791 | BTH ...
	V2IPv6            // Ethernet | IPv6 | UDP 4791 | BTH ...
)

func (t Transport) String() string {
	switch t {
	case V1:
		return "v1"
	case V2IPv4:
		return "v2-ipv4"
	case V2IPv6:
		return "v2-ipv6"
	}
	return "not-roce"
}

// Version is "v1" or "v2" ("" when not RoCE).
func (t Transport) Version() string {
	switch t {
	case V1:
		return "v1"
	case V2IPv4, V2IPv6:
		return "v2"
	}
	return ""
}

// EtherType values RoCE uses.
const (
	EtherTypeIPv4  = 0x0800
	EtherTypeIPv6  = 0x86DD
	EtherTypeRoCE  = 0x8915 // RoCEv1: a GRH follows
	EtherTypeDot1Q = 0x8100
	EtherTypeQinQ  = 0x88A8
	UDPPortRoCEv2  = 4791
	ipProtoUDP     = 17
)

// ParseError says why a frame is not a well-formed RoCE frame. It is a
// small integer so returning it never allocates.
type ParseError uint8

const (
	ErrNotRoCE ParseError = iota + 1
	ErrShortEthernet
	ErrTruncatedVLAN
	ErrTruncatedIPv4
	ErrBadIPv4Header
	ErrIPv4Fragment
	ErrTruncatedIPv6
	ErrTruncatedUDP
	ErrBadUDPLength
	ErrTruncatedGRH
	ErrBadGRH
	ErrTruncatedBTH
	ErrTruncatedExt
	ErrBadPad
)

var parseErrText = [...]string{
	ErrNotRoCE:       "not a RoCE frame",
	ErrShortEthernet: "ethernet: frame shorter than 14 bytes",
	ErrTruncatedVLAN: "vlan: tag truncated",
	ErrTruncatedIPv4: "ipv4: header or datagram truncated",
	ErrBadIPv4Header: "ipv4: bad version, IHL or total length",
	ErrIPv4Fragment:  "ipv4: fragmented datagram (RoCE is never fragmented)",
	ErrTruncatedIPv6: "ipv6: header or payload truncated",
	ErrTruncatedUDP:  "udp: header truncated",
	ErrBadUDPLength:  "udp: length smaller than its header or larger than the IP payload",
	ErrTruncatedGRH:  "grh: header or payload truncated",
	ErrBadGRH:        "grh: IPVer is not 6",
	ErrTruncatedBTH:  "bth: fewer than 16 bytes for BTH and ICRC",
	ErrTruncatedExt:  "bth: extension headers and pad do not fit before the ICRC",
	ErrBadPad:        "bth: pad count larger than the payload",
}

func (e ParseError) Error() string {
	if int(e) < len(parseErrText) && parseErrText[e] != "" {
		return parseErrText[e]
	}
	return "frames: parse error"
}

// View is a zero-copy, zero-allocation parse of one Ethernet frame holding a
// RoCEv1 or RoCEv2 packet. It records offsets only; getters read the frame
// and setters write it. Reuse one View per receive loop: Parse allocates
// nothing.
//
// Ethernet padding after the IP datagram (or GRH payload) is never counted
// as payload or ICRC: the ICRC is found from the IP/UDP/GRH lengths.
type View struct {
	frame     []byte
	transport Transport
	vlans     uint8
	ethType   uint16
	l3        int // IPv4, IPv6 or GRH header
	udp       int // UDP header (RoCEv2), 0 otherwise
	bth       int
	ext       wire.Ext
	known     bool // opcode known: ext and payload boundaries are exact
	payload   int
	payLen    int
	pad       int
	icrc      int // offset of the 4 ICRC bytes
}

// Parse points the view at frame. On error the view is unusable until the
// next successful Parse. ErrNotRoCE means the frame is well-formed enough to
// tell it is something else (ARP, TCP, UDP to another port, ...).
func (v *View) Parse(frame []byte) error {
	v.frame = nil
	if len(frame) < 14 {
		return ErrShortEthernet
	}
	off := 12
	et := binary.BigEndian.Uint16(frame[off:])
	vlans := uint8(0)
	for (et == EtherTypeDot1Q || et == EtherTypeQinQ) && vlans < 2 {
		if len(frame) < off+6 {
			return ErrTruncatedVLAN
		}
		off += 4
		vlans++
		et = binary.BigEndian.Uint16(frame[off:])
	}
	l3 := off + 2
	var udp, end int
	var t Transport
	switch et {
	case EtherTypeIPv4:
		ip := frame[l3:]
		if len(ip) < 20 {
			return ErrTruncatedIPv4
		}
		ihl := int(ip[0]&0x0F) * 4
		total := int(binary.BigEndian.Uint16(ip[2:]))
		if ip[0]>>4 != 4 || ihl < 20 || total < ihl {
			return ErrBadIPv4Header
		}
		if total > len(ip) {
			return ErrTruncatedIPv4
		}
		if ip[9] != ipProtoUDP {
			return ErrNotRoCE
		}
		if binary.BigEndian.Uint16(ip[6:])&0x3FFF != 0 {
			return ErrIPv4Fragment
		}
		t, udp, end = V2IPv4, l3+ihl, l3+total
	case EtherTypeIPv6:
		ip := frame[l3:]
		if len(ip) < 40 {
			return ErrTruncatedIPv6
		}
		if ip[0]>>4 != 6 || ip[6] != ipProtoUDP {
			return ErrNotRoCE
		}
		end = l3 + 40 + int(binary.BigEndian.Uint16(ip[4:]))
		if end > len(frame) {
			return ErrTruncatedIPv6
		}
		t, udp = V2IPv6, l3+40
	case EtherTypeRoCE:
		g := frame[l3:]
		if len(g) < wire.GRHLen {
			return ErrTruncatedGRH
		}
		if g[0]>>4 != 6 {
			return ErrBadGRH
		}
		if g[6] != wire.GRHNextHeaderIBA {
			return ErrNotRoCE
		}
		end = l3 + wire.GRHLen + int(binary.BigEndian.Uint16(g[4:]))
		if end > len(frame) {
			return ErrTruncatedGRH
		}
		t = V1
	default:
		return ErrNotRoCE
	}
	bth := l3 + wire.GRHLen
	if t != V1 {
		if end-udp < 8 {
			return ErrTruncatedUDP
		}
		if binary.BigEndian.Uint16(frame[udp+2:]) != UDPPortRoCEv2 {
			return ErrNotRoCE
		}
		ulen := int(binary.BigEndian.Uint16(frame[udp+4:]))
		if ulen < 8 || udp+ulen > end {
			return ErrBadUDPLength
		}
		end = udp + ulen
		bth = udp + 8
	}
	if end-bth < wire.BTHLen+wire.ICRCLen {
		return ErrTruncatedBTH
	}
	op := wire.Opcode(frame[bth])
	ext := op.Ext()
	pad := int(frame[bth+1]>>4) & 3
	payload := bth + wire.BTHLen + ext.Len()
	icrc := end - wire.ICRCLen
	payLen := icrc - pad - payload
	if payLen < 0 {
		if icrc-payload < 0 {
			return ErrTruncatedExt
		}
		return ErrBadPad
	}
	*v = View{frame: frame, transport: t, vlans: vlans, ethType: et, l3: l3, udp: udp, bth: bth,
		ext: ext, known: op.Known(), payload: payload, payLen: payLen, pad: pad, icrc: icrc}
	return nil
}

// Frame is the frame the view was parsed from.
func (v *View) Frame() []byte { return v.frame }

// Transport is the RoCE encapsulation.
func (v *View) Transport() Transport { return v.transport }

// VLANs is the number of 802.1Q/802.1ad tags (0-2).
func (v *View) VLANs() int { return int(v.vlans) }

// VLANID is the VID of the outer tag (0 when untagged).
func (v *View) VLANID() uint16 {
	if v.vlans == 0 {
		return 0
	}
	return binary.BigEndian.Uint16(v.frame[14:]) & 0x0FFF
}

// EtherType is the EtherType after any VLAN tags.
func (v *View) EtherType() uint16 { return v.ethType }

// SrcMAC and DstMAC are views of the Ethernet addresses.
func (v *View) DstMAC() []byte { return v.frame[0:6] }
func (v *View) SrcMAC() []byte { return v.frame[6:12] }

// L3 is the IPv4, IPv6 or GRH header.
func (v *View) L3() []byte {
	if v.transport == V1 {
		return v.frame[v.l3 : v.l3+wire.GRHLen]
	}
	return v.frame[v.l3:v.udp]
}

// IPVersion is 4 or 6 for RoCEv2 and 0 for RoCEv1 (whose GRH is not IP).
func (v *View) IPVersion() int {
	switch v.transport {
	case V2IPv4:
		return 4
	case V2IPv6:
		return 6
	}
	return 0
}

// SrcAddr and DstAddr are the IP addresses (RoCEv2) or GIDs (RoCEv1).
func (v *View) SrcAddr() netip.Addr {
	n := v.frame[v.l3:]
	if v.transport == V2IPv4 {
		return netip.AddrFrom4([4]byte(n[12:16]))
	}
	return netip.AddrFrom16([16]byte(n[8:24]))
}

func (v *View) DstAddr() netip.Addr {
	n := v.frame[v.l3:]
	if v.transport == V2IPv4 {
		return netip.AddrFrom4([4]byte(n[16:20]))
	}
	return netip.AddrFrom16([16]byte(n[24:40]))
}

// UDP is the UDP header (nil for RoCEv1).
func (v *View) UDP() []byte {
	if v.transport == V1 {
		return nil
	}
	return v.frame[v.udp : v.udp+8]
}

// UDPSrcPort is the UDP source port (0 for RoCEv1).
func (v *View) UDPSrcPort() uint16 {
	if v.transport == V1 {
		return 0
	}
	return binary.BigEndian.Uint16(v.frame[v.udp:])
}

// BTH is the Base Transport Header.
func (v *View) BTH() wire.BTH { return wire.BTH(v.frame[v.bth : v.bth+wire.BTHLen]) }

// Shortcuts for the BTH fields a transport reads on every packet.
func (v *View) Opcode() wire.Opcode { return wire.Opcode(v.frame[v.bth]) }
func (v *View) PSN() uint32         { return v.BTH().PSN() }
func (v *View) DestQP() uint32      { return v.BTH().DestQP() }
func (v *View) AckReq() bool        { return v.frame[v.bth+8]&0x80 != 0 }

// Known reports whether the opcode is one whose extension headers are known;
// for an unknown opcode the payload is everything between BTH and pad.
func (v *View) Known() bool { return v.known }

// Ext is the set of extension headers present.
func (v *View) Ext() wire.Ext { return v.ext }

func (v *View) extHdr(h wire.Ext, n int) []byte {
	if v.ext&h == 0 {
		return nil
	}
	o := v.bth + wire.BTHLen + v.ext.Offset(h)
	return v.frame[o : o+n : o+n]
}

// Extension header views; nil when the opcode has no such header.
func (v *View) RETH() wire.RETH           { return v.extHdr(wire.ExtRETH, wire.RETHLen) }
func (v *View) AETH() wire.AETH           { return v.extHdr(wire.ExtAETH, wire.AETHLen) }
func (v *View) DETH() wire.DETH           { return v.extHdr(wire.ExtDETH, wire.DETHLen) }
func (v *View) AtomicETH() wire.AtomicETH { return v.extHdr(wire.ExtAtomicETH, wire.AtomicETHLen) }
func (v *View) AtomicAckETH() []byte      { return v.extHdr(wire.ExtAtomicAckETH, wire.AtomicAckETHLen) }
func (v *View) FETH() []byte              { return v.extHdr(wire.ExtFETH, wire.FETHLen) }

// Imm returns the immediate data and whether the packet carries ImmDt.
func (v *View) Imm() (uint32, bool) {
	b := v.extHdr(wire.ExtImmDt, wire.ImmDtLen)
	if b == nil {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

// IETH returns the R_Key to invalidate and whether the packet carries IETH.
func (v *View) IETH() (uint32, bool) {
	b := v.extHdr(wire.ExtIETH, wire.IETHLen)
	if b == nil {
		return 0, false
	}
	return binary.BigEndian.Uint32(b), true
}

// Payload is the data after the extension headers, without pad and ICRC.
// For RDMA WRITE FIRST/ONLY of a NetReduce message it begins with the INA
// header (see INA).
func (v *View) Payload() []byte { return v.frame[v.payload : v.payload+v.payLen] }

// PayloadOffset is the payload's byte offset in the frame.
func (v *View) PayloadOffset() int { return v.payload }

// Pad is the pad bytes after the payload (0-3 bytes).
func (v *View) Pad() []byte { return v.frame[v.payload+v.payLen : v.icrc] }

// ICRCOffset is the byte offset of the ICRC in the frame.
func (v *View) ICRCOffset() int { return v.icrc }

// ICRCBytes is the 4 ICRC bytes as they are on the wire.
func (v *View) ICRCBytes() []byte { return v.frame[v.icrc : v.icrc+4] }

// TrailerLen is the number of Ethernet padding bytes after the RoCE packet.
func (v *View) TrailerLen() int { return len(v.frame) - v.icrc - wire.ICRCLen }

// INATree returns the INA header and the switch-to-switch header of a
// multi-rack ring's frame (opcodes 0xE0-0xE2) whose payload holds both
// and starts with the InetTag, else nils.
func (v *View) INATree() (wire.INA, wire.INATree) {
	p := v.Payload()
	if !wire.IsINATree(v.Opcode()) || len(p) < wire.INALen+wire.INATreeLen || !wire.IsINA(p) {
		return nil, nil
	}
	return wire.INA(p[:wire.INALen:wire.INALen]), wire.INATree(p[wire.INALen : wire.INALen+wire.INATreeLen : wire.INALen+wire.INATreeLen])
}

// INA returns the INA header when this is an RDMA WRITE FIRST or ONLY whose
// payload starts with the InetTag, else nil.
func (v *View) INA() wire.INA {
	op := v.Opcode()
	if !op.IsWrite() || !op.IsFirst() {
		return nil
	}
	p := v.Payload()
	if !wire.IsINA(p) {
		return nil
	}
	return wire.INA(p[:wire.INALen:wire.INALen])
}
