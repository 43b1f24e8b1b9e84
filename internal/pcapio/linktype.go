package pcapio

import (
	"encoding/binary"
	"fmt"

	"github.com/gopacket/gopacket/layers"
)

// Link types read besides Ethernet, as the tcpdump.org list numbers them
// (https://www.tcpdump.org/linktypes.html): Linux cooked captures, what
// `tcpdump -i any` writes (SLL, 113: a 16-byte header; SLL2, 276: 20
// bytes), and raw IP (101; 228 IPv4 and 229 IPv6; DLT_RAW's 12 and 14,
// which some platforms write). Every reader of this package parses
// Ethernet frames, so Next turns such a frame into the Ethernet frame it
// stands for: a 14-byte header whose EtherType is the cooked header's
// protocol (or, for raw IP, the IP version's), whose source MAC is the
// cooked header's link-layer address when that is 6 bytes long (in SLL
// it is always the sender's), and whose destination MAC, which neither
// format records, is zero. The record's lengths grow or shrink by the
// difference of the headers, so a snaplen-cut frame stays cut.
const (
	linkTypeSLL     layers.LinkType = 113
	linkTypeSLL2    layers.LinkType = 276
	linkTypeRaw     layers.LinkType = 101
	linkTypeIPv4    layers.LinkType = 228
	linkTypeIPv6    layers.LinkType = 229
	linkTypeDLTRaw1 layers.LinkType = 12
	linkTypeDLTRaw2 layers.LinkType = 14
)

const wantLinkTypes = "want Ethernet (1), Linux cooked SLL (113) or SLL2 (276), or raw IP (101, 228, 229)"

func readableLinkType(lt layers.LinkType) bool {
	switch lt {
	case layers.LinkTypeEthernet, linkTypeSLL, linkTypeSLL2, linkTypeRaw, linkTypeIPv4, linkTypeIPv6, linkTypeDLTRaw1, linkTypeDLTRaw2:
		return true
	}
	return false
}

// toEthernet rewrites rec, captured with rec.LinkType, as an Ethernet
// frame.
func toEthernet(rec *Record) error {
	d := rec.Data
	var hdr int
	var mac []byte
	var etherType uint16
	switch rec.LinkType {
	case linkTypeSLL:
		// packet type, ARPHRD type, address length, address (8), protocol
		hdr = 16
		if len(d) < hdr {
			return fmt.Errorf("Linux cooked (SLL) header cut at %d of 16 bytes", len(d))
		}
		if binary.BigEndian.Uint16(d[4:6]) == 6 {
			mac = d[6:12]
		}
		etherType = binary.BigEndian.Uint16(d[14:16])
	case linkTypeSLL2:
		// protocol, reserved, interface index, ARPHRD type, packet type,
		// address length, address (8)
		hdr = 20
		if len(d) < hdr {
			return fmt.Errorf("Linux cooked (SLL2) header cut at %d of 20 bytes", len(d))
		}
		if d[11] == 6 {
			mac = d[12:18]
		}
		etherType = binary.BigEndian.Uint16(d[0:2])
	case linkTypeRaw, linkTypeIPv4, linkTypeIPv6, linkTypeDLTRaw1, linkTypeDLTRaw2:
		if len(d) == 0 {
			return fmt.Errorf("raw IP frame with no bytes")
		}
		switch d[0] >> 4 {
		case 4:
			etherType = 0x0800
		case 6:
			etherType = 0x86DD
		default:
			return fmt.Errorf("raw IP frame of IP version %d", d[0]>>4)
		}
	default:
		return fmt.Errorf("link type %d (%s): %s", rec.LinkType, rec.LinkType, wantLinkTypes)
	}
	out := make([]byte, 14, 14+len(d)-hdr)
	copy(out[6:12], mac)
	binary.BigEndian.PutUint16(out[12:14], etherType)
	rec.Data = append(out, d[hdr:]...)
	rec.Info.CaptureLength += 14 - hdr
	rec.Info.Length += 14 - hdr
	return nil
}
