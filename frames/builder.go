package frames

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/inaemu/inaemu/frames/wire"
)

// Path is the wire-level description of one direction of a connection: the
// addressing every frame from this end carries. It is what a QP's address
// vector holds in rxe, plus the peer's QPN.
type Path struct {
	Transport Transport // V1, V2IPv4 or V2IPv6
	SrcMAC    net.HardwareAddr
	DstMAC    net.HardwareAddr
	VLAN      bool       // add one 802.1Q tag
	VLANID    uint16     // 12 bits
	VLANPCP   uint8      // 3 bits
	SrcIP     netip.Addr // IPv4/IPv6 address, or the GID for RoCEv1
	DstIP     netip.Addr
	SrcPort   uint16 // UDP source port (RoCEv2); see UDPSourcePort
	TClass    uint8  // IPv4 TOS, or IPv6/GRH traffic class
	FlowLabel uint32 // IPv6/GRH flow label (20 bits)
	HopLimit  uint8  // IPv4 TTL or IPv6/GRH hop limit; 0 means 64
	PKey      uint16 // 0 means 0xFFFF, the default full-member key rxe sends
	DestQP    uint32 // the peer's QPN
}

// UDPSourcePort is rxe's per-QP UDP source port: 0xC000 plus a 14-bit hash
// of the local QPN (docs/roce.md §1), so one QP is one ECMP/RSS flow.
func UDPSourcePort(localQPN uint32) uint16 {
	// rxe: hash_32_generic(qpn, 14) = (qpn * GOLDEN_RATIO_32) >> (32 - 14).
	return 0xC000 | uint16((localQPN*0x61C88647)>>(32-14))
}

// Packet is what one frame carries above the network header. Only the
// extension headers the opcode calls for are written; the others are ignored.
type Packet struct {
	Opcode wire.Opcode
	PSN    uint32
	AckReq bool
	SE     bool
	FECN   bool
	BECN   bool
	MigReq bool

	RETH      RETHFields
	AETH      AETHFields
	Imm       uint32 // ImmDt
	IETH      uint32 // R_Key to invalidate
	DETH      DETHFields
	AtomicETH AtomicETHFields
	AtomicAck uint64 // AtomicAckETH: the original remote value
	FETH      uint32

	// INA, when HasINA is set, is written as the first 8 bytes of the
	// payload (NetReduce puts it on the first packet of every message).
	HasINA bool
	INA    INAFields

	Payload []byte
}

type RETHFields struct {
	VA     uint64
	RKey   uint32
	DMALen uint32
}

type AETHFields struct {
	Syndrome wire.Syndrome
	MSN      uint32
}

type DETHFields struct {
	QKey  uint32
	SrcQP uint32
}

type AtomicETHFields struct {
	VA      uint64
	RKey    uint32
	SwapAdd uint64
	Compare uint64
}

// INAFields are the NetReduce header fields after the InetTag.
type INAFields struct {
	RingID, MsgID, MsgLen, Rank uint8
}

// Builder writes complete frames for one Path into caller-provided buffers.
// The Ethernet, VLAN, IP/GRH and UDP headers are prepared once; Build only
// patches lengths, the IPv4 ID and checksum, then writes the transport
// headers, payload, pad and ICRC. Build allocates nothing.
type Builder struct {
	path   Path
	tmpl   [14 + 4 + 40 + 8]byte
	tlen   int // template length
	l3     int
	udp    int // 0 for RoCEv1
	bth    int
	ipID   uint16
	pkey   uint16
	destQP uint32
}

// ErrBufferTooSmall is returned when Build's buffer cannot hold the frame.
var ErrBufferTooSmall = errors.New("frames: buffer too small for frame")

// NewBuilder validates p and prepares its header template.
func NewBuilder(p Path) (*Builder, error) {
	if len(p.SrcMAC) != 6 || len(p.DstMAC) != 6 {
		return nil, fmt.Errorf("frames: path needs 6-byte MAC addresses")
	}
	if p.VLANID > 0xFFF || p.VLANPCP > 7 {
		return nil, fmt.Errorf("frames: VLAN id %d / pcp %d out of range", p.VLANID, p.VLANPCP)
	}
	if p.FlowLabel > 0xFFFFF {
		return nil, fmt.Errorf("frames: flow label %#x wider than 20 bits", p.FlowLabel)
	}
	if p.DestQP > wire.PSNMask {
		return nil, fmt.Errorf("frames: destination QP %#x wider than 24 bits", p.DestQP)
	}
	b := &Builder{path: p, pkey: p.PKey, destQP: p.DestQP}
	if b.pkey == 0 {
		b.pkey = 0xFFFF
	}
	hop := p.HopLimit
	if hop == 0 {
		hop = 64
	}
	t := b.tmpl[:]
	copy(t[0:6], p.DstMAC)
	copy(t[6:12], p.SrcMAC)
	off := 12
	if p.VLAN {
		binary.BigEndian.PutUint16(t[off:], EtherTypeDot1Q)
		binary.BigEndian.PutUint16(t[off+2:], uint16(p.VLANPCP)<<13|p.VLANID)
		off += 4
	}
	b.l3 = off + 2
	switch p.Transport {
	case V2IPv4:
		if !p.SrcIP.Is4() || !p.DstIP.Is4() {
			return nil, fmt.Errorf("frames: RoCEv2/IPv4 path needs IPv4 addresses, have %v > %v", p.SrcIP, p.DstIP)
		}
		binary.BigEndian.PutUint16(t[off:], EtherTypeIPv4)
		ip := t[b.l3:]
		ip[0] = 0x45
		ip[1] = p.TClass
		binary.BigEndian.PutUint16(ip[6:], 0x4000) // DF, as rxe sets it
		ip[8] = hop
		ip[9] = ipProtoUDP
		s, d := p.SrcIP.As4(), p.DstIP.As4()
		copy(ip[12:16], s[:])
		copy(ip[16:20], d[:])
		b.udp = b.l3 + 20
	case V2IPv6, V1:
		if !p.SrcIP.IsValid() || !p.DstIP.IsValid() {
			return nil, fmt.Errorf("frames: path needs source and destination addresses")
		}
		if p.Transport == V2IPv6 && (!p.SrcIP.Is6() || !p.DstIP.Is6() || p.SrcIP.Is4In6() || p.DstIP.Is4In6()) {
			return nil, fmt.Errorf("frames: RoCEv2/IPv6 path needs IPv6 addresses, have %v > %v", p.SrcIP, p.DstIP)
		}
		et, nh := uint16(EtherTypeIPv6), byte(ipProtoUDP)
		if p.Transport == V1 {
			et, nh = EtherTypeRoCE, wire.GRHNextHeaderIBA
		}
		binary.BigEndian.PutUint16(t[off:], et)
		g := wire.GRH(t[b.l3 : b.l3+wire.GRHLen])
		g.SetVersionClassFlow(6, p.TClass, p.FlowLabel)
		g[6] = nh
		g[7] = hop
		// An IPv4 address used as a RoCEv1 GID becomes ::ffff:a.b.c.d.
		s, d := p.SrcIP.As16(), p.DstIP.As16()
		copy(g[8:24], s[:])
		copy(g[24:40], d[:])
		if p.Transport == V2IPv6 {
			b.udp = b.l3 + 40
		}
	default:
		return nil, fmt.Errorf("frames: unknown transport %d", p.Transport)
	}
	if b.udp != 0 {
		u := t[b.udp:]
		binary.BigEndian.PutUint16(u, p.SrcPort)
		binary.BigEndian.PutUint16(u[2:], UDPPortRoCEv2)
		// UDP checksum stays 0, as rxe sends it (docs/roce.md §1).
		b.bth = b.udp + 8
	} else {
		b.bth = b.l3 + wire.GRHLen
	}
	b.tlen = b.bth
	return b, nil
}

// Path returns the path the builder was made for.
func (b *Builder) Path() Path { return b.path }

// PKey is the P_Key the builder writes (the path's, or 0xFFFF by default).
func (b *Builder) PKey() uint16 { return b.pkey }

// HeaderLen is the number of bytes before the BTH.
func (b *Builder) HeaderLen() int { return b.tlen }

// MinFrameLen is the Ethernet minimum without FCS: shorter frames are
// padded with zeros after the ICRC, as a NIC pads them on the wire.
const MinFrameLen = 60

// FrameLen is the length of the frame Build writes for pkt, Ethernet
// padding included.
func (b *Builder) FrameLen(pkt *Packet) int { return max(b.packetLen(pkt), MinFrameLen) }

// packetLen is the length up to the end of the ICRC.
func (b *Builder) packetLen(pkt *Packet) int {
	n := b.payloadLen(pkt)
	return b.tlen + wire.BTHLen + pkt.Opcode.Ext().Len() + n + wire.PadCount(n) + wire.ICRCLen
}

func (b *Builder) payloadLen(pkt *Packet) int {
	n := len(pkt.Payload)
	if pkt.HasINA {
		n += wire.INALen
	}
	return n
}

// SetIPID sets the IPv4 identification the next frame will carry; it then
// increments by one per frame.
func (b *Builder) SetIPID(id uint16) { b.ipID = id }

// Build writes the frame for pkt into buf and returns its length.
func (b *Builder) Build(buf []byte, pkt *Packet) (int, error) {
	if pkt.PSN > wire.PSNMask {
		return 0, fmt.Errorf("frames: PSN %#x wider than 24 bits", pkt.PSN)
	}
	n := b.packetLen(pkt)
	total := max(n, MinFrameLen)
	if len(buf) < total {
		return 0, ErrBufferTooSmall
	}
	clear(buf[n:total]) // Ethernet padding of a runt; not part of the datagram
	f := buf[:n]
	copy(f, b.tmpl[:b.tlen])
	payLen := b.payloadLen(pkt)
	pad := wire.PadCount(payLen)
	if b.path.Transport == V2IPv4 {
		binary.BigEndian.PutUint16(f[b.l3+4:], b.ipID) // before the checksum setLengths writes
		b.ipID++
	}
	setLengths(f, b.path.Transport, b.l3, b.udp)
	bth := wire.BTH(f[b.bth : b.bth+wire.BTHLen])
	bth[0] = byte(pkt.Opcode)
	bth[1] = byte(pad) << 4
	bth.SetSE(pkt.SE)
	bth.SetMigReq(pkt.MigReq)
	bth.SetPKey(b.pkey)
	bth[4] = 0
	bth.SetFECN(pkt.FECN)
	bth.SetBECN(pkt.BECN)
	bth.SetDestQP(b.destQP)
	bth[8] = 0
	bth.SetAckReq(pkt.AckReq)
	bth.SetPSN(pkt.PSN)
	ext := pkt.Opcode.Ext()
	o := b.bth + wire.BTHLen
	for h := ext.First(); h != 0; h = ext.Next(h) {
		o += writeExt(f[o:], h, pkt)
	}
	if pkt.HasINA {
		h := wire.INA(f[o : o+wire.INALen])
		h.SetTag(wire.INATag)
		h[4], h[5], h[6], h[7] = pkt.INA.RingID, pkt.INA.MsgID, pkt.INA.MsgLen, pkt.INA.Rank
		o += wire.INALen
	}
	o += copy(f[o:], pkt.Payload)
	for i := 0; i < pad; i++ {
		f[o+i] = 0
	}
	v := View{frame: f, transport: b.path.Transport, l3: b.l3, udp: b.udp, bth: b.bth,
		ext: ext, known: true, payload: b.bth + wire.BTHLen + ext.Len(), payLen: payLen, pad: pad, icrc: n - wire.ICRCLen}
	v.SetICRC()
	return total, nil
}

func writeExt(d []byte, h wire.Ext, p *Packet) int {
	switch h {
	case wire.ExtDETH:
		x := wire.DETH(d)
		x.SetQKey(p.DETH.QKey)
		x.SetSrcQP(p.DETH.SrcQP)
		return wire.DETHLen
	case wire.ExtFETH:
		binary.BigEndian.PutUint32(d, p.FETH)
		return wire.FETHLen
	case wire.ExtRETH:
		x := wire.RETH(d)
		x.SetVA(p.RETH.VA)
		x.SetRKey(p.RETH.RKey)
		x.SetDMALen(p.RETH.DMALen)
		return wire.RETHLen
	case wire.ExtAtomicETH:
		x := wire.AtomicETH(d)
		x.SetVA(p.AtomicETH.VA)
		x.SetRKey(p.AtomicETH.RKey)
		x.SetSwapAdd(p.AtomicETH.SwapAdd)
		x.SetCompare(p.AtomicETH.Compare)
		return wire.AtomicETHLen
	case wire.ExtAETH:
		x := wire.AETH(d)
		x.SetSyndrome(p.AETH.Syndrome)
		x.SetMSN(p.AETH.MSN)
		return wire.AETHLen
	case wire.ExtAtomicAckETH:
		binary.BigEndian.PutUint64(d, p.AtomicAck)
		return wire.AtomicAckETHLen
	case wire.ExtImmDt:
		binary.BigEndian.PutUint32(d, p.Imm)
		return wire.ImmDtLen
	case wire.ExtIETH:
		binary.BigEndian.PutUint32(d, p.IETH)
		return wire.IETHLen
	}
	return 0
}

// ipv4Checksum is the Internet checksum of an IPv4 header.
// setLengths writes the datagram lengths of frame f, whose network
// header starts at l3 and UDP header at udp (0: RoCEv1, none), for f's
// length, and for IPv4 the header checksum.
func setLengths(f []byte, t Transport, l3, udp int) {
	n := len(f)
	switch t {
	case V2IPv4:
		binary.BigEndian.PutUint16(f[l3+2:], uint16(n-l3))
		SetIPv4Checksum(f[l3:])
	case V2IPv6, V1:
		binary.BigEndian.PutUint16(f[l3+4:], uint16(n-l3-wire.GRHLen))
	}
	if udp != 0 {
		binary.BigEndian.PutUint16(f[udp+4:], uint16(n-udp))
	}
}

// SetIPv4Checksum recomputes the checksum of the IPv4 header ip starts
// with (its length from the IHL).
func SetIPv4Checksum(ip []byte) {
	h := ip[:int(ip[0]&0x0F)*4]
	binary.BigEndian.PutUint16(h[10:], 0)
	binary.BigEndian.PutUint16(h[10:], ipv4Checksum(h))
}

func ipv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(h[i])<<8 | uint32(h[i+1])
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}
