package frames

import (
	"hash/crc32"
	"math/rand"
	"net/netip"
	"testing"

	"github.com/inaemu/inaemu/frames/wire"
)

func TestICRCUpdateIsCRC32(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	buf := make([]byte, 5000)
	rng.Read(buf)
	for n := 0; n < 400; n++ {
		for _, seed := range []uint32{0, 0xFFFFFFFF, rng.Uint32()} {
			if got, want := icrcUpdate(seed, buf[:n]), crc32.Update(seed, crc32.IEEETable, buf[:n]); got != want {
				t.Fatalf("n=%d seed=%x: %x want %x", n, seed, got, want)
			}
		}
	}
}

// testBuilder builds frames of one transport between two fixed hosts.
func testBuilder(t *testing.T, tr Transport) *Builder {
	t.Helper()
	src, dst := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	if tr != V2IPv4 {
		src, dst = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	}
	b, err := NewBuilder(Path{Transport: tr, SrcMAC: []byte{2, 0, 0, 0, 0, 1}, DstMAC: []byte{2, 0, 0, 0, 0, 2}, SrcIP: src, DstIP: dst, SrcPort: 0xC011, DestQP: 0x12})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// randomFrame builds into buf a WRITE MIDDLE with a random PSN and a
// random payload of size bytes, parsed.
func randomFrame(t *testing.T, b *Builder, buf []byte, rng *rand.Rand, size int) (View, int) {
	t.Helper()
	pay := make([]byte, size)
	rng.Read(pay)
	n, err := b.Build(buf, &Packet{Opcode: wire.WriteMiddle, PSN: rng.Uint32() & 0xFFFFFF, Payload: pay})
	if err != nil {
		t.Fatal(err)
	}
	var v View
	if err := v.Parse(buf[:n]); err != nil {
		t.Fatal(err)
	}
	return v, n
}

// refICRC is the ICRC as the specification words it, written separately
// here: eight 0xFF bytes, then a copy of the covered bytes with the
// variant fields set to ones, through hash/crc32 in one call.
func refICRC(v *View) uint32 {
	c := append([]byte(nil), v.frame[v.l3:v.icrc]...)
	ones := func(off ...int) {
		for _, o := range off {
			c[o] = 0xFF
		}
	}
	switch v.transport {
	case V2IPv4:
		ones(1, 8, 10, 11)
	default:
		c[0] |= 0x0F
		ones(1, 2, 3, 7)
	}
	if v.transport != V1 {
		u := v.udp - v.l3
		ones(u+6, u+7)
	}
	ones(v.bth - v.l3 + 4)
	return crc32.ChecksumIEEE(append([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF}, c...))
}

// Every ICRC is the reference's, over every transport, random variant fields
// (TTL, DSCP, flow label, checksums, FECN/BECN) and payload lengths from
// 0 to 4 KiB.
func TestICRCBothPathsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	buf := make([]byte, 9000)
	for _, tr := range []Transport{V2IPv4, V2IPv6, V1} {
		b := testBuilder(t, tr)
		for i := range 300 {
			v, n := randomFrame(t, b, buf, rng, rng.Intn(4097))
			// Variant fields as a router may leave them.
			for _, o := range []int{1, 2, 3, 7, 8, 10, 11} {
				buf[v.l3+o] = byte(rng.Intn(256))
			}
			buf[v.bth+4] ^= byte(rng.Intn(2)) << 7
			if tr != V1 {
				buf[v.udp+6], buf[v.udp+7] = byte(rng.Intn(256)), byte(rng.Intn(256))
			}
			want := refICRC(&v)
			for k := range 3 {
				if got := v.ICRC(); got != want {
					t.Fatalf("%v frame %d (%d bytes), computation %d: ICRC %#x, reference %#x", tr, i, n, k+1, got, want)
				}
			}
		}
	}
}

// A zero shift is the register stepped through n zero bytes one table
// lookup at a time.
func TestZeroShiftIsZeroBytes(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, n := range []int{1, 2, 7, 64, 65, 1064, 1076, 1084, 4140, 9000} {
		z := newZeroShift(n)
		for range 50 {
			d := rng.Uint32()
			r := d
			for range n {
				r = crc32.IEEETable[r&0xFF] ^ r>>8
			}
			if got := z.apply(d); got != r {
				t.Fatalf("n=%d d=%#x: %#x, stepping gives %#x", n, d, got, r)
			}
		}
	}
}

// ICRCWithTail is the reference ICRC for every split of the covered bytes
// that leaves the variant fields in front, before and after its length
// has a shift table, on every transport.
func TestICRCWithTailMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	buf := make([]byte, 9000)
	for _, tr := range []Transport{V2IPv4, V2IPv6, V1} {
		b := testBuilder(t, tr)
		for i := range 200 {
			v, _ := randomFrame(t, b, buf, rng, 1+rng.Intn(2048))
			buf[v.l3+8] = byte(rng.Intn(256)) // a variant field (TTL or hop limit)
			want := refICRC(&v)
			tail := rng.Intn(v.icrc - v.bth) // any split at or after the BTH
			tc := NewTailCRC(v.frame[v.icrc-tail : v.icrc])
			for k := range 3 {
				if got := v.ICRCWithTail(tc); got != want {
					t.Fatalf("%v frame %d, tail %d of %d covered bytes, try %d: %#x, reference %#x", tr, i, tail, v.icrc-v.l3, k+1, got, want)
				}
			}
		}
	}
}
