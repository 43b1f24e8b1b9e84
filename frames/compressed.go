package frames

import (
	"fmt"

	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/frames/wire"
)

// In-NIC payload compression (INCEPTIONN, MICRO '18 §VI): a NIC
// compresses the payload of every packet its software marked with a
// reserved ToS, 0x28 in the paper, and the receiving NIC's comparator
// sends packets with the same mark through its decompressor. On RoCE the
// mark is the differentiated-services codepoint of the IPv4 TOS, the IPv6
// traffic class or, for RoCEv1, the GRH traffic class (DSCP 10 is ToS
// 0x28); the ECN bits are left to the switches. A marked request packet's
// payload (the bytes after BTH and its extension headers) is in the packed
// form of package inceptionn, whose 16-bit length prefix says how many
// bytes it stands for; the IP, UDP and GRH lengths, the pad count and the
// ICRC are those of the packet as sent. A packet whose packed form would
// not be shorter goes as it is, unmarked, so a receiver never has to
// guess.

// CompressedDSCP marks a packet whose payload is compressed.
const CompressedDSCP = 0x28 >> 2

// TClass is the IPv4 TOS, or the IPv6/GRH traffic class.
func (v *View) TClass() uint8 {
	n := v.frame[v.l3:]
	if v.transport == V2IPv4 {
		return n[1]
	}
	return n[0]<<4 | n[1]>>4
}

// DSCP is the TClass's codepoint: its top six bits.
func (v *View) DSCP() uint8 { return v.TClass() >> 2 }

// SetDSCP rewrites the codepoint, keeping the ECN bits, and for IPv4 the
// header checksum. The ICRC covers the traffic class as ones, so it stays
// valid.
func (v *View) SetDSCP(d uint8) {
	n := v.frame[v.l3:]
	tc := d<<2 | v.TClass()&3
	if v.transport == V2IPv4 {
		n[1] = tc
		SetIPv4Checksum(n)
		return
	}
	n[0] = n[0]&0xF0 | tc>>4
	n[1] = n[1]&0x0F | tc<<4
}

// Compressible reports whether the frame carries data a compression
// engine acts on: the payload of a WRITE or SEND packet.
func (v *View) Compressible() bool {
	op := v.Opcode()
	return v.payLen > 0 && (op.IsWrite() || op.IsSend())
}

// Compressed reports whether the frame is a WRITE or SEND packet whose
// payload is marked as compressed.
func (v *View) Compressed() bool { return v.DSCP() == CompressedDSCP && v.Compressible() }

// WithPayload writes into dst the frame v with its payload replaced by p:
// the same headers with the IP, UDP and GRH lengths, the BTH pad count,
// the IPv4 checksum and the ICRC made right for p. A frame shorter than
// the Ethernet minimum is padded with zeros after its ICRC. dst must not
// overlap v's frame.
func (v *View) WithPayload(dst, p []byte) (int, error) {
	pad := wire.PadCount(len(p))
	n := v.payload + len(p) + pad + wire.ICRCLen
	total := max(n, MinFrameLen)
	if len(dst) < total {
		return 0, ErrBufferTooSmall
	}
	if n-v.l3 > 0xFFFF {
		return 0, fmt.Errorf("frames: a payload of %d bytes makes a datagram longer than 65535 bytes", len(p))
	}
	f := dst[:n]
	copy(f, v.frame[:v.payload])
	o := v.payload + copy(f[v.payload:], p)
	clear(dst[o:total])
	setLengths(f, v.transport, v.l3, v.udp)
	f[v.bth+1] = f[v.bth+1]&^0x30 | byte(pad)<<4
	w := View{frame: f, transport: v.transport, vlans: v.vlans, ethType: v.ethType, l3: v.l3, udp: v.udp, bth: v.bth,
		ext: v.ext, known: v.known, payload: v.payload, payLen: len(p), pad: pad, icrc: n - wire.ICRCLen}
	w.SetICRC()
	return total, nil
}

// Compress writes into dst the marked frame v with its payload
// compressed by c (headers, mark included, as they are) when that is
// shorter, and reports whether it was; otherwise it writes nothing, and
// the caller sends v unmarked (SetDSCP(0)). scratch
// holds the packed payload (its capacity is reused); h, if not nil,
// counts the payload's values per class either way, as the engine saw
// them.
func Compress(dst []byte, v *View, c inceptionn.Codec, scratch []byte, h *inceptionn.Histogram) (n int, packed []byte, ok bool, err error) {
	packed, err = c.AppendPacked(scratch[:0], v.Payload(), h)
	if err != nil || len(packed) >= v.payLen {
		return 0, packed, false, err
	}
	if n, err = v.WithPayload(dst, packed); err != nil {
		return 0, packed, false, err
	}
	return n, packed, true, nil
}

// Decompress writes into dst the frame v with its compressed payload
// unpacked (still marked: the mark says how it travelled), using scratch
// for the payload. It fails when the payload is not a packed payload.
func Decompress(dst []byte, v *View, scratch []byte) (int, []byte, error) {
	payload, err := inceptionn.Unpack(scratch[:0], v.Payload(), nil)
	if err != nil {
		return 0, payload, err
	}
	n, err := v.WithPayload(dst, payload)
	return n, payload, err
}
