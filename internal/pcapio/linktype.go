package pcapio

import (
	"encoding/binary"
	"fmt"

	"github.com/gopacket/gopacket/layers"
)

// DLT_RAW's values in old files (see the package comment).
const (
	linkTypeDLTRaw12 layers.LinkType = 12
	linkTypeDLTRaw14 layers.LinkType = 14
)

const wantLinkTypes = "want Ethernet (1), Linux cooked SLL (113) or SLL2 (276), or raw IP (101, 228, 229)"

func readableLinkType(lt layers.LinkType) bool {
	switch lt {
	case layers.LinkTypeEthernet, layers.LinkTypeLinuxSLL, layers.LinkTypeLinuxSLL2,
		layers.LinkTypeRaw, layers.LinkTypeIPv4, layers.LinkTypeIPv6, linkTypeDLTRaw12, linkTypeDLTRaw14:
		return true
	}
	return false
}

// ARPHRD_ types whose cooked protocol field is not the payload's
// EtherType.
const (
	arphrdFRAD     = 770
	arphrdRadiotap = 803
	arphrdNetlink  = 824
)

// ethernetHeader writes into h the Ethernet header that stands for the
// link-layer header of frame d, captured with link type lt and length
// bytes long on the wire, and returns how many bytes of d that header
// replaces and, for a cooked frame, its packet type. See the comment on
// the link types for the choices.
func ethernetHeader(lt layers.LinkType, d []byte, length int, h *[14]byte) (strip int, pt layers.LinuxSLLPacketType, err error) {
	*h = [14]byte{}
	var proto uint16
	typed := true
	switch lt {
	case layers.LinkTypeLinuxSLL:
		strip = 16
		if len(d) < strip {
			return 0, 0, fmt.Errorf("Linux cooked (SLL) header cut at %d of 16 bytes", len(d))
		}
		pt = layers.LinuxSLLPacketType(binary.BigEndian.Uint16(d[0:2]))
		if binary.BigEndian.Uint16(d[4:6]) == 6 {
			copy(h[6:12], d[6:12])
		}
		proto = binary.BigEndian.Uint16(d[14:16])
		typed = cookedTyped(binary.BigEndian.Uint16(d[2:4]), proto)
	case layers.LinkTypeLinuxSLL2:
		strip = 20
		if len(d) < strip {
			return 0, 0, fmt.Errorf("Linux cooked (SLL2) header cut at %d of 20 bytes", len(d))
		}
		pt = layers.LinuxSLLPacketType(d[10])
		if d[11] == 6 {
			copy(h[6:12], d[12:18])
		}
		proto = binary.BigEndian.Uint16(d[0:2])
		typed = cookedTyped(binary.BigEndian.Uint16(d[8:10]), proto)
	case layers.LinkTypeIPv4:
		proto = uint16(layers.EthernetTypeIPv4)
	case layers.LinkTypeIPv6:
		proto = uint16(layers.EthernetTypeIPv6)
	case layers.LinkTypeRaw, linkTypeDLTRaw12, linkTypeDLTRaw14:
		typed = false
		if len(d) > 0 {
			switch d[0] >> 4 {
			case 4:
				proto, typed = uint16(layers.EthernetTypeIPv4), true
			case 6:
				proto, typed = uint16(layers.EthernetTypeIPv6), true
			}
		}
	default:
		return 0, 0, fmt.Errorf("link type %d (%s): %s", lt, lt, wantLinkTypes)
	}
	if !typed {
		proto = uint16(max(0, min(length-strip, 1500)))
	}
	binary.BigEndian.PutUint16(h[12:14], proto)
	switch pt {
	case layers.LinuxSLLPacketTypeBroadcast:
		copy(h[0:6], []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	case layers.LinuxSLLPacketTypeMulticast:
		p := d[strip:]
		switch {
		case !typed:
		case layers.EthernetType(proto) == layers.EthernetTypeIPv4:
			if len(p) >= 20 {
				copy(h[0:6], []byte{0x01, 0x00, 0x5e, p[17] & 0x7f, p[18], p[19]})
			}
		case layers.EthernetType(proto) == layers.EthernetTypeIPv6:
			if len(p) >= 40 {
				copy(h[0:6], []byte{0x33, 0x33, p[36], p[37], p[38], p[39]})
			}
		}
	}
	return strip, pt, nil
}

// cookedTyped reports whether a cooked frame's protocol field is its
// payload's EtherType.
func cookedTyped(arphrd, proto uint16) bool {
	switch arphrd {
	case arphrdFRAD, arphrdRadiotap, arphrdNetlink:
		return false
	}
	return proto >= 0x0600
}
