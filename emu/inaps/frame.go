package inaps

import (
	"encoding/binary"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// Frame offsets: Ethernet (14), then an IPv4 header of 20 bytes (ATP's
// frames carry it after EtherType 0x0700, with no UDP), then the INA-PS
// header (wire.INAPS).
const (
	HeaderOff = 14 + 20
	FrameLen  = wire.INAPSFrameLen
	// Values is the number of int32 values a fragment carries.
	Values = wire.INAPSValues
	// ipProto is the IPv4 protocol the frames name: 253, for
	// experimentation (RFC 3692); ATP's switch never reads it.
	ipProto = 253
	// ECT0 is the IPv4 ECN codepoint the hosts send with: ECN-capable,
	// so a congested egress marks CE (ATP marks the IPv4 ECN field).
	ECT0 = 0x02
)

// Addr is a host's Ethernet and IPv4 address.
type Addr struct {
	MAC [6]byte
	IP  [4]byte
}

// SwitchAddr is the address the switch program's own frames come from
// (results it multicasts, reminders it returns): a locally administered
// MAC no host NIC has, and 10.255.255.254.
var SwitchAddr = Addr{MAC: [6]byte{0x02, 0x1A, 0xE0, 0xFF, 0x00, 0x00}, IP: [4]byte{10, 255, 255, 254}}

// GroupAddr is job id's multicast group: the address a PS sends a
// completed result to, which the switch copies to each worker.
func GroupAddr(id uint16) Addr {
	return Addr{MAC: [6]byte{0x01, 0x1A, 0xE0, 0xFF, byte(id >> 8), byte(id)}, IP: [4]byte{239, 26, byte(id >> 8), byte(id)}}
}

// WriteHeaders writes the Ethernet and IPv4 headers of an INA-PS frame
// from src to dst into f (FrameLen bytes), and returns the INA-PS header.
func WriteHeaders(f []byte, src, dst Addr) wire.INAPS {
	copy(f[0:6], dst.MAC[:])
	copy(f[6:12], src.MAC[:])
	binary.BigEndian.PutUint16(f[12:], wire.EtherTypeINAPS)
	ip := f[14:34]
	ip[0], ip[1] = 0x45, ECT0
	binary.BigEndian.PutUint16(ip[2:], uint16(FrameLen-14))
	ip[4], ip[5], ip[6], ip[7] = 0, 0, 0x40, 0 // no ID, don't fragment
	ip[8], ip[9] = 64, ipProto
	copy(ip[12:16], src.IP[:])
	copy(ip[16:20], dst.IP[:])
	SetIPChecksum(f)
	return wire.INAPS(f[HeaderOff:FrameLen])
}

// Readdress rewrites a frame's destination (MAC and IPv4) and its IPv4
// checksum: a copy of a result for one worker.
func Readdress(f []byte, dst Addr) {
	copy(f[0:6], dst.MAC[:])
	copy(f[30:34], dst.IP[:])
	SetIPChecksum(f)
}

// Redirect rewrites a frame's source and destination: a packet the
// switch turns towards a PS.
func Redirect(f []byte, src, dst Addr) {
	copy(f[0:6], dst.MAC[:])
	copy(f[6:12], src.MAC[:])
	copy(f[26:30], src.IP[:])
	copy(f[30:34], dst.IP[:])
	SetIPChecksum(f)
}

// SetIPChecksum computes the IPv4 header checksum of frame f (its
// header right after Ethernet).
func SetIPChecksum(f []byte) { frames.SetIPv4Checksum(f[14:]) }

// IsINAPS reports whether f is an INA-PS frame of the full length.
func IsINAPS(f []byte) bool {
	return len(f) >= FrameLen && f[12] == 0x07 && f[13] == 0x00
}

// CE reports whether a frame's IPv4 ECN field says Congestion
// Experienced (marked by a queue on its way).
func CE(f []byte) bool { return f[15]&3 == 3 }

// AddValues adds src's 62 values to dst's, wrapping (int32, as the
// switch's registers add).
func AddValues(dst, src wire.INAPS) {
	d, s := dst.Vector(), src.Vector()
	for i := 0; i < len(d); i += 4 {
		binary.BigEndian.PutUint32(d[i:], binary.BigEndian.Uint32(d[i:])+binary.BigEndian.Uint32(s[i:]))
	}
}

// Vec is a fragment's values held in memory (an aggregator's register,
// a PS entry).
type Vec [Values]int32

// Add adds a header's values, wrapping.
func (v *Vec) Add(h wire.INAPS) {
	b := h.Vector()
	for i := range v {
		v[i] += int32(binary.BigEndian.Uint32(b[4*i:]))
	}
}

// Load sets v to a header's values.
func (v *Vec) Load(h wire.INAPS) {
	b := h.Vector()
	for i := range v {
		v[i] = int32(binary.BigEndian.Uint32(b[4*i:]))
	}
}

// Store writes v into a header's values.
func (v *Vec) Store(h wire.INAPS) {
	b := h.Vector()
	for i := range v {
		binary.BigEndian.PutUint32(b[4*i:], uint32(v[i]))
	}
}

// TaskKey is the key field of fragment seq (its full number, from 1) of
// iteration it: the iteration in the low 32 bits, the sequence number's
// wraps past 16 bits (seq >> 16) in bits 32-47. The wire's sequence
// field wraps inside an iteration of more than 65,535 fragments; with
// its wraps in the key, the switch and the PS never take a fragment for
// the one 65,536 before it (ATP's switch parses no key: this is
// inaemu's, as is matching the iteration).
func TaskKey(it, seq uint32) uint64 { return uint64(it) | uint64(seq>>16)<<32 }

// FullSeq is the full sequence number a header names (seq and the key's
// wraps).
func FullSeq(h wire.INAPS) uint32 { return uint32(h.Key()>>32&0xffff)<<16 | uint32(h.Seq()) }

// Iteration is the iteration a header's key names.
func Iteration(h wire.INAPS) uint32 { return uint32(h.Key()) }
