package frames

import (
	"encoding/binary"
	"hash/crc32"
)

// The ICRC (ROCE.md §2) is the IEEE CRC-32 over a pseudo-packet: 8 bytes of
// 0xFF standing in for the IB LRH, then the network header (IPv4, IPv6 or
// GRH), the UDP header (RoCEv2), the BTH and everything after it up to the
// ICRC, with the fields routers may change replaced by ones. The four wire
// bytes are the CRC value least-significant byte first.
//
// Speed: rather than copying the headers into a masked scratch buffer (which
// would escape to the heap through hash/crc32's function-pointer dispatch),
// the masked fields are set to ones in place, the whole covered region is
// hashed in one hardware-accelerated pass, and the original bytes are put
// back. The frame is therefore written briefly: whoever computes or verifies
// an ICRC must own the frame (DESIGN.md: "whoever mutates a frame owns it").

// lrhSeed is the CRC state after the 8 bytes of 0xFF (rxe's seed 0xDEBB20E3
// is the raw register; this is the same state in crc32.Update's convention).
var lrhSeed = crc32.Update(0, crc32.IEEETable, []byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF})

// maskedSave holds the original bytes of the masked fields while they read
// as ones.
type maskedSave struct {
	net  [4]byte // IPv4 TOS/TTL/checksum, or IPv6/GRH bytes 0..3
	net7 byte    // IPv6/GRH hop limit
	udp  [2]byte
	bth4 byte
}

// ICRC computes the ICRC value of a parsed RoCE frame. The result is the
// CRC as a number; on the wire it is written little-endian.
func (v *View) ICRC() uint32 {
	f := v.frame
	var s maskedSave
	v.mask(f, &s)
	crc := crc32.Update(lrhSeed, crc32.IEEETable, f[v.l3:v.icrc])
	v.unmask(f, &s)
	return crc
}

// WireICRC is the ICRC value the frame carries.
func (v *View) WireICRC() uint32 { return binary.LittleEndian.Uint32(v.frame[v.icrc:]) }

// ICRCOK reports whether the frame carries the correct ICRC.
func (v *View) ICRCOK() bool { return v.ICRC() == v.WireICRC() }

// SetICRC recomputes the ICRC and writes it into the frame, as a switch must
// after it rewrites any covered byte.
func (v *View) SetICRC() {
	binary.LittleEndian.PutUint32(v.frame[v.icrc:], v.ICRC())
}

func (v *View) mask(f []byte, s *maskedSave) {
	n := f[v.l3:]
	switch v.transport {
	case V2IPv4:
		s.net = [4]byte{n[1], n[8], n[10], n[11]}
		n[1], n[8], n[10], n[11] = 0xFF, 0xFF, 0xFF, 0xFF
	case V2IPv6, V1:
		s.net = [4]byte{n[0], n[1], n[2], n[3]}
		s.net7 = n[7]
		n[0] |= 0x0F
		n[1], n[2], n[3], n[7] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	if v.transport != V1 {
		u := f[v.udp:]
		s.udp = [2]byte{u[6], u[7]}
		u[6], u[7] = 0xFF, 0xFF
	}
	s.bth4 = f[v.bth+4]
	f[v.bth+4] = 0xFF
}

func (v *View) unmask(f []byte, s *maskedSave) {
	n := f[v.l3:]
	switch v.transport {
	case V2IPv4:
		n[1], n[8], n[10], n[11] = s.net[0], s.net[1], s.net[2], s.net[3]
	case V2IPv6, V1:
		n[0], n[1], n[2], n[3] = s.net[0], s.net[1], s.net[2], s.net[3]
		n[7] = s.net7
	}
	if v.transport != V1 {
		f[v.udp+6], f[v.udp+7] = s.udp[0], s.udp[1]
	}
	f[v.bth+4] = s.bth4
}

// ComputeICRC parses frame and returns its correct ICRC value.
func ComputeICRC(frame []byte) (uint32, error) {
	var v View
	if err := v.Parse(frame); err != nil {
		return 0, err
	}
	return v.ICRC(), nil
}

// VerifyICRC parses frame and reports whether its ICRC is correct.
func VerifyICRC(frame []byte) (bool, error) {
	var v View
	if err := v.Parse(frame); err != nil {
		return false, err
	}
	return v.ICRCOK(), nil
}
