package main

import (
	"encoding/hex"
	"math"
	"strings"
	"testing"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.Join(strings.Fields(s), ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The worked example of docs/roce.md §2: a RoCEv2/IPv4 SEND_ONLY whose
// ICRC bytes are 8eaf9f6c; the variant fields do not change it, the IP
// identification does.
func TestICRCWorkedExample(t *testing.T) {
	f := unhex(t, `020000000002 020000000001 0800
		45 00 003c 1234 4000 40 11 147b 0a000001 0a000002
		c000 12b7 0028 0000
		04 00 ffff 00 000011 80 000001
		000102030405060708090a0b0c0d0e0f
		8eaf9f6c`)
	var p pkt
	if !parse(f, &p) {
		t.Fatal("parse failed")
	}
	if !icrcOK(&p) {
		t.Fatalf("ICRC %08x, frame has %08x", computeICRC(&p), p.wireICRC())
	}
	if p.payLen != 16 || p.opcode() != 0x04 || p.destQP() != 0x11 || p.psn() != 1 {
		t.Fatalf("parsed %+v", p)
	}
	f[14+8], f[14+1], f[14+20+6], f[14+28+4] = 1, 3, 0x12, 0x80 // TTL, TOS, UDP checksum, FECN
	if !icrcOK(&p) {
		t.Fatal("a variant field changed the ICRC")
	}
	f[14+4] ^= 0xFF
	f[14+5] ^= 0xFF // IP identification
	if icrcOK(&p) {
		t.Fatal("the IP identification is not covered")
	}
	setICRC(&p)
	if got := hex.EncodeToString(f[len(f)-4:]); got != "da0ccb37" {
		t.Fatalf("ICRC with inverted identification %s, want da0ccb37", got)
	}
}

func TestICRCv6AndV1(t *testing.T) {
	bth := "04 00 ffff 00 000011 80 000001 000102030405060708090a0b0c0d0e0f"
	v6 := unhex(t, `020000000002 020000000001 86dd
		60000000 0028 11 40 fd000000000000000000000000000001 fd000000000000000000000000000002
		c000 12b7 0028 0000 `+bth+` 6b4fac1a`)
	v1 := unhex(t, `020000000002 020000000001 8915
		60000000 0020 1b 40 fe800000000000000000000000000001 fe800000000000000000000000000002
		`+bth+` d1c2f35c`)
	for _, f := range [][]byte{v6, v1} {
		var p pkt
		if !parse(f, &p) || !icrcOK(&p) {
			t.Fatalf("frame %x: parse or ICRC failed", f)
		}
	}
}

func TestHalf(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{{0, 0}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3C00}, {-2, 0xC000}, {65504, 0x7BFF}, {65520, 0x7C00},
		{65519, 0x7BFF}, {float32(math.Ldexp(1, -24)), 1}, {float32(math.Ldexp(1, -25)), 0}, {float32(math.Ldexp(3, -26)), 1},
		{float32(math.Ldexp(1, -14)), 0x0400}, {1 + 1.0/2048, 0x3C00}, {1 + 3.0/2048, 0x3C02}} {
		if got := floatToHalf(c.f); got != c.h {
			t.Errorf("floatToHalf(%g) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	for h := 0; h < 0x10000; h++ {
		if h&0x7C00 == 0x7C00 && h&0x3FF != 0 {
			continue // NaN
		}
		if got := floatToHalf(halfToFloat(uint16(h))); got != uint16(h) {
			t.Fatalf("round trip %#04x gives %#04x", h, got)
		}
	}
}
