package main

import (
	"encoding/binary"
	"hash/crc32"
)

// Encapsulations a RoCE frame can have.
const (
	encNone = iota
	encV2v4 // Ethernet 0x0800 | IPv4 | UDP 4791 | BTH ...
	encV2v6 // Ethernet 0x86DD | IPv6 | UDP 4791 | BTH ...
	encV1   // Ethernet 0x8915 | GRH (next header 0x1B) | BTH ...
)

// RDMA WRITE opcodes of the RC transport (the only ones a NetReduce
// worker sends on its ring connection).
const (
	opWriteFirst       = 0x06
	opWriteMiddle      = 0x07
	opWriteLast        = 0x08
	opWriteLastImm     = 0x09
	opWriteOnly        = 0x0A
	opWriteOnlyImm     = 0x0B
	opAcknowledge      = 0x11 // its AETH (syndrome, MSN) is the "payload" parse finds
	bthBytes           = 12
	icrcBytes          = 4
	inaBytes           = 8
	inaMagic           = 0x494E4131 // "INA1"
	roceV2Port         = 4791
	grhNextHeaderIBA   = 0x1B
	etherTypeIPv4      = 0x0800
	etherTypeIPv6      = 0x86DD
	etherTypeRoCEv1    = 0x8915
	etherTypeVLAN      = 0x8100
	etherTypeVLANOuter = 0x88A8
)

// pkt holds the offsets of one parsed RoCE frame; it never copies.
type pkt struct {
	f      []byte
	enc    int
	l3     int // IPv4/IPv6/GRH header
	udp    int // UDP header (0 for RoCEv1)
	bth    int
	pay    int // payload start
	payLen int
	icrc   int // offset of the 4 ICRC bytes
}

func (p *pkt) opcode() byte     { return p.f[p.bth] }
func (p *pkt) destQP() uint32   { return binary.BigEndian.Uint32(p.f[p.bth+4:]) & 0xFFFFFF }
func (p *pkt) psn() uint32      { return binary.BigEndian.Uint32(p.f[p.bth+8:]) & 0xFFFFFF }
func (p *pkt) payload() []byte  { return p.f[p.pay : p.pay+p.payLen] }
func (p *pkt) wireICRC() uint32 { return binary.LittleEndian.Uint32(p.f[p.icrc:]) }

// srcAddr and dstAddr are the IP addresses (RoCEv2) or GIDs (RoCEv1) as
// raw bytes.
func (p *pkt) srcAddr() []byte {
	if p.enc == encV2v4 {
		return p.f[p.l3+12 : p.l3+16]
	}
	return p.f[p.l3+8 : p.l3+24]
}

func (p *pkt) dstAddr() []byte {
	if p.enc == encV2v4 {
		return p.f[p.l3+16 : p.l3+20]
	}
	return p.f[p.l3+24 : p.l3+40]
}

// extLen is the size of the extension headers between the BTH and the
// payload of the RC opcodes this switch looks into (RDMA WRITE: RETH on
// FIRST and ONLY, ImmDt on the ..._WITH_IMMEDIATE ones). Other opcodes
// are never aggregated; 0 is as good as any value for them.
func extLen(op byte) int {
	switch op {
	case opWriteFirst, opWriteOnly:
		return 16
	case opWriteOnlyImm:
		return 20
	case opWriteLastImm:
		return 4
	}
	return 0
}

// parse reads f as a RoCE frame. It reports false for anything that is
// not a well-formed RoCEv1/RoCEv2 frame (which the switch then forwards
// as ordinary Ethernet).
func parse(f []byte, p *pkt) bool {
	if len(f) < 14 {
		return false
	}
	off := 12
	et := binary.BigEndian.Uint16(f[off:])
	for tags := 0; (et == etherTypeVLAN || et == etherTypeVLANOuter) && tags < 2; tags++ {
		off += 4
		if len(f) < off+2 {
			return false
		}
		et = binary.BigEndian.Uint16(f[off:])
	}
	l3 := off + 2
	rest := len(f) - l3
	var enc, udp, end int
	switch et {
	case etherTypeIPv4:
		if rest < 20 {
			return false
		}
		ihl := int(f[l3]&0xF) * 4
		total := int(binary.BigEndian.Uint16(f[l3+2:]))
		if f[l3]>>4 != 4 || ihl < 20 || total < ihl || total > rest || f[l3+9] != 17 {
			return false
		}
		if binary.BigEndian.Uint16(f[l3+6:])&0x3FFF != 0 { // fragment
			return false
		}
		enc, udp, end = encV2v4, l3+ihl, l3+total
	case etherTypeIPv6:
		if rest < 40 || f[l3]>>4 != 6 || f[l3+6] != 17 {
			return false
		}
		end = l3 + 40 + int(binary.BigEndian.Uint16(f[l3+4:]))
		if end > len(f) {
			return false
		}
		enc, udp = encV2v6, l3+40
	case etherTypeRoCEv1:
		if rest < 40 || f[l3]>>4 != 6 || f[l3+6] != grhNextHeaderIBA {
			return false
		}
		end = l3 + 40 + int(binary.BigEndian.Uint16(f[l3+4:]))
		if end > len(f) {
			return false
		}
		enc = encV1
	default:
		return false
	}
	bth := l3 + 40
	if enc != encV1 {
		if end-udp < 8 || binary.BigEndian.Uint16(f[udp+2:]) != roceV2Port {
			return false
		}
		ulen := int(binary.BigEndian.Uint16(f[udp+4:]))
		if ulen < 8 || udp+ulen > end {
			return false
		}
		end, bth = udp+ulen, udp+8
	}
	if end-bth < bthBytes+icrcBytes {
		return false
	}
	op := f[bth]
	pad := int(f[bth+1]>>4) & 3
	pay := bth + bthBytes + extLen(op)
	icrc := end - icrcBytes
	if icrc-pad-pay < 0 {
		return false
	}
	*p = pkt{f: f, enc: enc, l3: l3, udp: udp, bth: bth, pay: pay, payLen: icrc - pad - pay, icrc: icrc}
	return true
}

var eightOnes = [8]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}

// computeICRC is the invariant CRC of the frame p was parsed from:
// CRC-32 (IEEE) over eight 0xFF bytes (the absent LRH), the network and
// transport headers with their variant fields set to ones, and the rest
// of the packet up to the ICRC. Variant fields (docs/roce.md §2): IPv4
// TOS, TTL and header checksum; IPv6/GRH traffic class, flow label and
// hop limit; the UDP checksum; BTH byte 4 (FECN, BECN, reserved).
func computeICRC(p *pkt) uint32 {
	var hdr [128]byte
	hl := p.bth + bthBytes - p.l3 // at most 60 + 8 + 12
	h := hdr[:hl]
	copy(h, p.f[p.l3:])
	switch p.enc {
	case encV2v4:
		h[1] = 0xFF  // TOS: DSCP and ECN
		h[8] = 0xFF  // TTL
		h[10] = 0xFF // header checksum
		h[11] = 0xFF //
	case encV2v6, encV1: // IPv6 header or GRH
		h[0] |= 0x0F // low traffic-class nibble
		h[1], h[2], h[3] = 0xFF, 0xFF, 0xFF
		h[7] = 0xFF // hop limit
	}
	if p.enc != encV1 {
		u := p.udp - p.l3
		h[u+6], h[u+7] = 0xFF, 0xFF // UDP checksum
	}
	h[p.bth-p.l3+4] = 0xFF // FECN, BECN, reserved
	crc := crc32.Update(0, crc32.IEEETable, eightOnes[:])
	crc = crc32.Update(crc, crc32.IEEETable, h)
	return crc32.Update(crc, crc32.IEEETable, p.f[p.bth+bthBytes:p.icrc])
}

func icrcOK(p *pkt) bool { return computeICRC(p) == p.wireICRC() }

// setICRC writes a fresh ICRC (least-significant byte first).
func setICRC(p *pkt) { binary.LittleEndian.PutUint32(p.f[p.icrc:], computeICRC(p)) }
