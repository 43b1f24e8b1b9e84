package frames

// Explicit Congestion Notification (RFC 3168 §5): the two low bits of the
// IPv4 TOS, or of the IPv6 (RoCEv2) or GRH (RoCEv1) traffic class.
//
//	  0   1   2   3   4   5   6   7
//	+---+---+---+---+---+---+---+---+
//	|          DSCP         |  ECN  |
//	+---+---+---+---+---+---+---+---+
//
// ECN 00 is Not-ECT, 10 ECT(0), 01 ECT(1), 11 CE (Congestion Experienced).
// The ICRC reads the whole traffic class as ones (icrc.go, docs/roce.md
// §2), so rewriting the ECN bits leaves it valid; only the IPv4 header
// checksum changes.
const (
	ECNNotECT uint8 = 0b00
	ECNECT1   uint8 = 0b01
	ECNECT0   uint8 = 0b10
	ECNCE     uint8 = 0b11
)

// ECN is the frame's ECN field.
func (v *View) ECN() uint8 { return v.TClass() & 3 }

// CE reports whether the frame is marked Congestion Experienced.
func (v *View) CE() bool { return v.ECN() == ECNCE }

// SetECN rewrites the ECN field to e (its two low bits), keeping the
// codepoint; for IPv4 the header checksum is updated incrementally.
func (v *View) SetECN(e uint8) {
	n := v.frame[v.l3:]
	tc := v.TClass()&^3 | e&3
	if v.transport == V2IPv4 {
		SetIPv4TOS(n, tc)
		return
	}
	n[0] = n[0]&0xF0 | tc>>4
	n[1] = n[1]&0x0F | tc<<4
}

// SetIPv4TOS sets the TOS byte of the IPv4 header ip and updates its
// header checksum incrementally (RFC 1624 eqn. 3: HC' = ~(~HC + ~m + m'),
// m the 16-bit word holding the TOS, before and after): the same result
// as recomputing the checksum over the header, at the cost of one word.
func SetIPv4TOS(ip []byte, tos uint8) {
	old := uint32(ip[0])<<8 | uint32(ip[1])
	ip[1] = tos
	neu := uint32(ip[0])<<8 | uint32(ip[1])
	sum := uint32(^(uint16(ip[10])<<8 | uint16(ip[11]))) + uint32(^uint16(old)) + neu
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	c := ^uint16(sum)
	ip[10], ip[11] = byte(c>>8), byte(c)
}
