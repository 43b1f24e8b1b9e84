// Package frames builds and parses whole RoCE frames: RoCEv2 over IPv4 or
// IPv6 (UDP port 4791) and RoCEv1 (EtherType 0x8915 with a GRH). Builder
// writes a frame for a Path (addresses, destination QP) and a Packet (BTH
// fields, extension headers, payload) into a caller's buffer without
// allocating; View parses one in place and answers field by field, also
// without allocating; the gopacket layers (GRH, BTH, RETH, AETH, ImmDt and
// the INA header) let gopacket and Wireshark-style tools decode the same
// bytes; ICRC computes and checks the invariant CRC with its masked fields.
// The header views themselves live in frames/wire.
package frames
