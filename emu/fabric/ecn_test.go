package fabric

import (
	"testing"
)

// ipv4Frame is a 60-byte IPv4 frame with the given TOS, its header
// checksum computed here from scratch.
func ipv4Frame(etherType uint16, tos byte) []byte {
	f := make([]byte, 60)
	f[12], f[13] = byte(etherType>>8), byte(etherType)
	ip := f[14:34]
	ip[0], ip[1], ip[3], ip[8], ip[9] = 0x45, tos, 46, 64, 17
	copy(ip[12:], []byte{10, 0, 0, 1})
	copy(ip[16:], []byte{10, 0, 0, 2})
	c := fullChecksum(ip)
	ip[10], ip[11] = byte(c>>8), byte(c)
	return f
}

func fullChecksum(ip []byte) uint16 {
	var s uint32
	for i := 0; i < 20; i += 2 {
		if i == 10 {
			continue
		}
		s += uint32(ip[i])<<8 | uint32(ip[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return ^uint16(s)
}

func TestMarkCEKeepsTheChecksumRight(t *testing.T) {
	for _, tc := range []struct {
		et   uint16
		tos  byte
		mark bool
	}{
		{0x0800, 0x02, true}, {0x0800, 0x01, true}, {0x0800, 0xba, true}, {0x0700, 0x02, true},
		{0x0800, 0x00, false}, {0x0800, 0x03, false}, {0x86DD, 0x02, false},
	} {
		f := ipv4Frame(tc.et, tc.tos)
		if got := MarkCE(f); got != tc.mark {
			t.Errorf("EtherType %#x TOS %#x: marked %v, want %v", tc.et, tc.tos, got, tc.mark)
			continue
		}
		if !tc.mark {
			continue
		}
		if f[15]&3 != 3 || f[15]>>2 != tc.tos>>2 {
			t.Errorf("TOS %#x marked to %#x: want DSCP kept and ECN 11", tc.tos, f[15])
		}
		if c := fullChecksum(f[14:34]); f[24] != byte(c>>8) || f[25] != byte(c) {
			t.Errorf("TOS %#x: checksum %02x%02x after marking, recomputed %04x", tc.tos, f[24], f[25], c)
		}
	}
}

func TestDropTailMarksBehindItsThreshold(t *testing.T) {
	q := newDropTail(QueueConfig{Limit: 10, MarkBytes: 120}).(*DropTail)
	var frames [][]byte
	for i := 0; i < 4; i++ {
		f := ipv4Frame(0x0800, 0x02)
		frames = append(frames, f)
		if !q.Enqueue(Packet{Frame: f}) {
			t.Fatal("refused below its limit")
		}
	}
	// 60-byte frames: the third finds 120 bytes ahead of it.
	for i, f := range frames {
		if want := i >= 2; (f[15]&3 == 3) != want {
			t.Errorf("frame %d: CE %v, want %v", i, f[15]&3 == 3, want)
		}
	}
	if q.Marked != 2 {
		t.Errorf("Marked = %d, want 2", q.Marked)
	}
	for range 3 {
		q.Dequeue(0)
	}
	f := ipv4Frame(0x0800, 0x02)
	q.Enqueue(Packet{Frame: f})
	if f[15]&3 == 3 {
		t.Error("marked behind 60 bytes: dequeued bytes were not taken off")
	}
}

func TestFCSDropsOnlyFramesWithoutTheirOwnCheck(t *testing.T) {
	inaps := ipv4Frame(0x0700, 2)
	channel := ipv4Frame(0x0800, 0)
	channel[36], channel[37] = 0x12, 0xB8
	rocev2 := ipv4Frame(0x0800, 0)
	rocev2[36], rocev2[37] = 0x12, 0xB7
	for name, tc := range map[string]struct {
		f    []byte
		drop bool
	}{"INA-PS": {inaps, true}, "channel": {channel, true}, "RoCEv2": {rocev2, false}, "runt": {make([]byte, 10), false}} {
		if got := fcsDrop(tc.f); got != tc.drop {
			t.Errorf("%s: fcsDrop %v, want %v", name, got, tc.drop)
		}
	}
}

// IPv6 and RoCEv1's GRH carry the ECN field in the traffic class, which
// straddles their first two bytes (version 4 bits, traffic class 8, flow
// label 20); neither has a header checksum. A VLAN tag is skipped.
func TestMarkCEOnIPv6GRHAndVLAN(t *testing.T) {
	l3v6 := func(et uint16, tc byte, vlan bool) ([]byte, int) {
		f := make([]byte, 80)
		off := 12
		if vlan {
			f[12], f[13], f[14], f[15] = 0x81, 0x00, 0x60, 0x05 // PCP 3, VID 5
			off = 16
		}
		f[off], f[off+1] = byte(et>>8), byte(et)
		l3 := f[off+2:]
		l3[0], l3[1], l3[2], l3[3] = 0x60|tc>>4, tc<<4|0x0A, 0xBC, 0xDE // flow label 0xABCDE
		return f, off + 2
	}
	for _, tc := range []struct {
		et   uint16
		tc   byte
		vlan bool
		mark bool
	}{
		{0x86DD, 26<<2 | 2, false, true}, {0x8915, 26<<2 | 1, false, true}, {0x86DD, 26<<2 | 2, true, true},
		{0x86DD, 26 << 2, false, false}, {0x8915, 26<<2 | 3, false, false},
	} {
		f, l3 := l3v6(tc.et, tc.tc, tc.vlan)
		before := append([]byte(nil), f...)
		if got := MarkCE(f); got != tc.mark {
			t.Errorf("EtherType %#x TC %#x vlan %v: marked %v, want %v", tc.et, tc.tc, tc.vlan, got, tc.mark)
			continue
		}
		want := before
		if tc.mark {
			want = append([]byte(nil), before...)
			ntc := tc.tc | 3
			want[l3] = 0x60 | ntc>>4
			want[l3+1] = ntc<<4 | 0x0A
		}
		if string(f) != string(want) {
			t.Errorf("EtherType %#x TC %#x: frame % x, want % x", tc.et, tc.tc, f[:l3+4], want[:l3+4])
		}
	}
}
