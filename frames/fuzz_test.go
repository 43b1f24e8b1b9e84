package frames_test

// Native Go fuzz targets for the parsers. `go test ./frames/` runs their seed
// corpora (every test vector in testdata/vectors, a few built frames, and
// any files under testdata/fuzz/<FuzzName>); `make fuzz` or
// `go test ./frames/ -run '^$' -fuzz '^FuzzViewParse$' -fuzztime 30s` fuzzes one.

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"
	"net/netip"
	"reflect"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/testvec"
)

// addFuzzSeeds adds every test vector in testdata/vectors and a few built
// frames: each transport, with and without a VLAN tag, an INA header, a CNP,
// UD, FLUSH and atomics, and an Ethernet trailer.
func addFuzzSeeds(f *testing.F) {
	vecs, err := testvec.Load()
	if err != nil {
		f.Fatal(err)
	}
	for _, v := range vecs {
		f.Add(v.Data)
	}
	pkts := []frames.Packet{
		{Opcode: wire.WriteOnly, PSN: 0xFFFFFF, AckReq: true, RETH: frames.RETHFields{VA: 0x1000, RKey: 0x2a, DMALen: 13},
			HasINA: true, INA: frames.INAFields{RingID: 1, MsgID: 2, MsgLen: 3, Rank: 4}, Payload: seq(5)},
		{Opcode: wire.CNP, BECN: true, Payload: make([]byte, 16)},
		{Opcode: wire.UDSendOnlyWithImm, PSN: 3, DETH: frames.DETHFields{QKey: 0x80010000, SrcQP: 0x42}, Imm: 9, Payload: seq(7)},
		{Opcode: wire.Flush, PSN: 4, FETH: 1, RETH: frames.RETHFields{VA: 8, RKey: 9, DMALen: 10}},
		{Opcode: wire.AtomicAcknowledge, PSN: 5, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK, MSN: 6}, AtomicAck: 7},
		{Opcode: wire.CompareSwap, PSN: 6, AtomicETH: frames.AtomicETHFields{VA: 1, RKey: 2, SwapAdd: 3, Compare: 4}},
		{Opcode: wire.SendLastWithInvalidate, PSN: 7, IETH: 0x1234, Payload: seq(2)},
	}
	for _, p := range []frames.Path{
		{Transport: frames.V2IPv4, SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2")},
		{Transport: frames.V2IPv6, VLAN: true, VLANID: 7, VLANPCP: 5, SrcIP: netip.MustParseAddr("fd00::1"), DstIP: netip.MustParseAddr("fd00::2"), FlowLabel: 0x12345},
		{Transport: frames.V1, SrcIP: netip.MustParseAddr("fe80::1"), DstIP: netip.MustParseAddr("fe80::2")},
	} {
		p.SrcMAC, p.DstMAC, p.SrcPort, p.DestQP = macA, macB, 0xC001, 0x11
		b, err := frames.NewBuilder(p)
		if err != nil {
			f.Fatal(err)
		}
		for i := range pkts {
			buf := make([]byte, b.FrameLen(&pkts[i])+6)
			n, err := b.Build(buf, &pkts[i])
			if err != nil {
				f.Fatal(err)
			}
			f.Add(buf[:n])
			if i == 0 {
				f.Add(buf[:n+6]) // with 6 bytes of Ethernet padding
				f.Add(variantSeed(f, buf[:n], p))
			}
		}
	}
}

// variantSeed rewrites a built WRITE ONLY frame into a shape the builder
// never makes: IPv4 with a 4-byte option (IHL 6); a QinQ (802.1ad) outer tag
// in front of an 802.1Q tag whose DEI bit is set; a RoCEv1 frame behind
// a VLAN tag with DEI. The ICRC is recomputed.
func variantSeed(f *testing.F, frame []byte, p frames.Path) []byte {
	var out []byte
	switch {
	case p.Transport == frames.V2IPv4 && !p.VLAN:
		out = append(append(append([]byte(nil), frame[:34]...), 1, 1, 1, 0), frame[34:]...)
		ip := out[14:]
		ip[0] = 0x46
		binary.BigEndian.PutUint16(ip[2:], binary.BigEndian.Uint16(ip[2:])+4)
		ip[10], ip[11] = 0, 0
		binary.BigEndian.PutUint16(ip[10:], ioIPv4Checksum(ip[:24]))
	case p.VLAN:
		out = append(append(append([]byte(nil), frame[:12]...), 0x88, 0xA8, 0x20, 0x09), frame[12:]...)
		out[18] |= 0x10 // DEI of the inner tag
	default:
		out = append(append(append([]byte(nil), frame[:12]...), 0x81, 0x00, 0xF0, 0x05), frame[12:]...)
	}
	if err := frames.FixICRC(out); err != nil {
		f.Fatal(err)
	}
	return out
}

// fuzzRefICRC is the ICRC of docs/roce.md §2 computed the plain way: copy the
// covered bytes, set the masked fields to ones, CRC-32 after 8 bytes of
// 0xFF. Header positions come from the parsed view.
func fuzzRefICRC(v *frames.View) uint32 {
	f := v.Frame()
	l3 := 14 + 4*v.VLANs()
	ps := append(bytes.Repeat([]byte{0xFF}, 8), f[l3:v.ICRCOffset()]...)
	h := ps[8:]
	bth := wire.GRHLen
	switch v.Transport() {
	case frames.V2IPv4:
		h[1], h[8], h[10], h[11] = 0xFF, 0xFF, 0xFF, 0xFF
	default:
		h[0] |= 0x0F
		h[1], h[2], h[3], h[7] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	if v.Transport() != frames.V1 {
		udp := len(v.L3())
		h[udp+6], h[udp+7] = 0xFF, 0xFF
		bth = udp + 8
	}
	h[bth+4] = 0xFF
	return crc32.ChecksumIEEE(ps)
}

// FuzzViewParse: Parse never panics; when it succeeds every getter works,
// the offsets tile the frame (payload | pad | ICRC | trailer), the headers
// sit where docs/roce.md puts them, the ICRC equals the plain masked CRC, masked
// fields do not change it, and SetICRC makes it valid.
func FuzzViewParse(f *testing.F) {
	addFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := bytes.Clone(data)
		var v frames.View
		err := v.Parse(data)
		if !bytes.Equal(data, orig) {
			t.Fatal("Parse modified the frame")
		}
		if err != nil {
			if _, ok := err.(frames.ParseError); !ok {
				t.Fatalf("Parse error %T %v is not a ParseError", err, err)
			}
			if err.Error() == "" {
				t.Fatal("empty error text")
			}
			if _, err2 := frames.ComputeICRC(data); err2 != err {
				t.Fatalf("ComputeICRC error %v, Parse error %v", err2, err)
			}
			if _, err2 := frames.VerifyICRC(data); err2 != err {
				t.Fatalf("VerifyICRC error %v, Parse error %v", err2, err)
			}
			return
		}
		n := len(data)
		if !bytes.Equal(v.Frame(), data) {
			t.Fatal("Frame() is not the parsed frame")
		}
		tr := v.Transport()
		if tr != frames.V1 && tr != frames.V2IPv4 && tr != frames.V2IPv6 {
			t.Fatalf("transport %v", tr)
		}
		if v.VLANs() < 0 || v.VLANs() > 2 {
			t.Fatalf("VLANs %d", v.VLANs())
		}
		if id := v.VLANID(); id > 0xFFF || (v.VLANs() > 0 && id != binary.BigEndian.Uint16(data[14:])&0xFFF) {
			t.Fatalf("VLANID %#x", id)
		}
		wantET := map[frames.Transport]uint16{frames.V1: 0x8915, frames.V2IPv4: 0x0800, frames.V2IPv6: 0x86DD}[tr]
		if v.EtherType() != wantET {
			t.Fatalf("EtherType %#x for %v", v.EtherType(), tr)
		}
		_, _ = v.SrcMAC(), v.DstMAC()
		l3 := 14 + 4*v.VLANs()
		l3len := len(v.L3())
		bth := l3 + l3len
		switch tr {
		case frames.V2IPv4:
			if l3len < 20 || l3len > 60 || l3len%4 != 0 || v.IPVersion() != 4 || !v.SrcAddr().Is4() || !v.DstAddr().Is4() {
				t.Fatalf("IPv4 header %d bytes, version %d, %v > %v", l3len, v.IPVersion(), v.SrcAddr(), v.DstAddr())
			}
		case frames.V2IPv6:
			if l3len != 40 || v.IPVersion() != 6 || !v.SrcAddr().Is6() {
				t.Fatalf("IPv6 header %d bytes, version %d", l3len, v.IPVersion())
			}
		case frames.V1:
			if l3len != 40 || v.IPVersion() != 0 || v.UDP() != nil || v.UDPSrcPort() != 0 {
				t.Fatalf("GRH %d bytes, version %d", l3len, v.IPVersion())
			}
		}
		if tr != frames.V1 {
			u := v.UDP()
			if len(u) != 8 || binary.BigEndian.Uint16(u[2:]) != frames.UDPPortRoCEv2 || v.UDPSrcPort() != binary.BigEndian.Uint16(u) {
				t.Fatalf("UDP header %x", u)
			}
			bth += 8
		}
		b := v.BTH()
		if len(b) != wire.BTHLen || &b[0] != &data[bth] {
			t.Fatalf("BTH is not the 12 bytes at %d", bth)
		}
		op := v.Opcode()
		if op != b.Opcode() || v.PSN() != b.PSN() || v.DestQP() != b.DestQP() || v.AckReq() != b.AckReq() {
			t.Fatal("View shortcuts disagree with the BTH")
		}
		if v.PSN() > wire.PSNMask || v.DestQP() > wire.PSNMask {
			t.Fatalf("PSN %#x QP %#x wider than 24 bits", v.PSN(), v.DestQP())
		}
		_, _, _, _, _, _, _, _ = b.SE(), b.MigReq(), b.TVer(), b.PKey(), b.FECN(), b.BECN(), b.Resv6(), b.Resv7()
		if v.Known() != op.Known() {
			t.Fatalf("Known %v for %v", v.Known(), op)
		}
		ext := v.Ext()
		if ext != op.Ext() {
			t.Fatalf("Ext %v for %v", ext, op)
		}

		// Extension headers: present exactly when the opcode has them, in
		// wire order right after the BTH, each of its own size.
		off := bth + wire.BTHLen
		check := func(name string, h wire.Ext, got []byte, size int) {
			if (got != nil) != (ext&h != 0) {
				t.Fatalf("%s present=%v, ext %v", name, got != nil, ext)
			}
			if got == nil {
				return
			}
			if len(got) != size || cap(got) != size || &got[0] != &data[bth+wire.BTHLen+ext.Offset(h)] {
				t.Fatalf("%s: %d bytes (cap %d) at the wrong place", name, len(got), cap(got))
			}
		}
		check("DETH", wire.ExtDETH, v.DETH(), wire.DETHLen)
		check("FETH", wire.ExtFETH, v.FETH(), wire.FETHLen)
		check("RETH", wire.ExtRETH, v.RETH(), wire.RETHLen)
		check("AtomicETH", wire.ExtAtomicETH, v.AtomicETH(), wire.AtomicETHLen)
		check("AETH", wire.ExtAETH, v.AETH(), wire.AETHLen)
		check("AtomicAckETH", wire.ExtAtomicAckETH, v.AtomicAckETH(), wire.AtomicAckETHLen)
		if _, ok := v.Imm(); ok != (ext&wire.ExtImmDt != 0) {
			t.Fatalf("ImmDt present=%v, ext %v", ok, ext)
		}
		if _, ok := v.IETH(); ok != (ext&wire.ExtIETH != 0) {
			t.Fatalf("IETH present=%v, ext %v", ok, ext)
		}
		off += ext.Len()

		// payload | pad | ICRC | trailer tile the rest of the frame.
		pay, pad, icrc := v.Payload(), v.Pad(), v.ICRCBytes()
		if v.PayloadOffset() != off {
			t.Fatalf("PayloadOffset %d, headers end at %d", v.PayloadOffset(), off)
		}
		if v.PayloadOffset()+len(pay)+len(pad) != v.ICRCOffset() {
			t.Fatalf("payload %d+%d + pad %d != ICRC offset %d", v.PayloadOffset(), len(pay), len(pad), v.ICRCOffset())
		}
		if v.ICRCOffset()+wire.ICRCLen+v.TrailerLen() != n || v.TrailerLen() < 0 {
			t.Fatalf("ICRC at %d + 4 + trailer %d != frame %d", v.ICRCOffset(), v.TrailerLen(), n)
		}
		if len(pad) != b.PadCnt() || len(icrc) != 4 || binary.LittleEndian.Uint32(icrc) != v.WireICRC() {
			t.Fatalf("pad %d (PadCnt %d), ICRC bytes %x", len(pad), b.PadCnt(), icrc)
		}
		if len(pay) > 0 && &pay[0] != &data[off] {
			t.Fatal("Payload is not a view of the frame")
		}
		// The RoCE packet ends where the IP, UDP or GRH length says.
		end := v.ICRCOffset() + wire.ICRCLen
		switch tr {
		case frames.V2IPv4:
			if u := v.UDP(); bth-8+int(binary.BigEndian.Uint16(u[4:])) != end {
				t.Fatalf("UDP length %d, packet ends at %d", binary.BigEndian.Uint16(u[4:]), end)
			}
		case frames.V2IPv6:
			if u := v.UDP(); bth-8+int(binary.BigEndian.Uint16(u[4:])) != end {
				t.Fatalf("UDP length %d, packet ends at %d", binary.BigEndian.Uint16(u[4:]), end)
			}
		case frames.V1:
			if l3+40+int(binary.BigEndian.Uint16(data[l3+4:])) != end {
				t.Fatalf("GRH PayLen %d, packet ends at %d", binary.BigEndian.Uint16(data[l3+4:]), end)
			}
		}
		if ina := v.INA(); ina != nil {
			if !op.IsWrite() || !op.IsFirst() || len(ina) != wire.INALen || ina.Tag() != wire.INATag || &ina[0] != &pay[0] {
				t.Fatalf("INA header %x on %v", []byte(ina), op)
			}
			_, _, _, _ = ina.RingID(), ina.MsgID(), ina.MsgLen(), ina.Rank()
		} else if op.IsWrite() && op.IsFirst() && len(pay) >= 8 && binary.BigEndian.Uint32(pay) == wire.INATag {
			t.Fatal("WRITE FIRST/ONLY payload starts with the InetTag but INA() is nil")
		}

		// The ICRC is the plain masked CRC, agrees with ComputeICRC and
		// VerifyICRC, and ignores the masked fields.
		got := v.ICRC()
		if ref := fuzzRefICRC(&v); got != ref {
			t.Fatalf("ICRC %#08x, plain masked CRC %#08x", got, ref)
		}
		if c, err := frames.ComputeICRC(data); err != nil || c != got {
			t.Fatalf("ComputeICRC %#x %v", c, err)
		}
		if ok, err := frames.VerifyICRC(data); err != nil || ok != v.ICRCOK() || ok != (got == v.WireICRC()) {
			t.Fatalf("VerifyICRC %v %v, ICRCOK %v", ok, err, v.ICRCOK())
		}
		mod := bytes.Clone(data)
		switch tr {
		case frames.V2IPv4:
			mod[l3+1] ^= 0xFF
			mod[l3+8] ^= 0xA5
			mod[l3+10] ^= 0x0F
			mod[l3+11] ^= 0xF0
		default:
			mod[l3] ^= 0x0F
			mod[l3+1] ^= 0xFF
			mod[l3+2] ^= 0x5A
			mod[l3+3] ^= 0x01
			mod[l3+7] ^= 0x80
		}
		if tr != frames.V1 {
			mod[bth-2] ^= 0xFF
			mod[bth-1] ^= 0x33
		}
		mod[bth+4] ^= 0xC5
		var mv frames.View
		if err := mv.Parse(mod); err != nil {
			t.Fatalf("masked fields changed, Parse: %v", err)
		}
		if mv.ICRC() != got || mv.PayloadOffset() != v.PayloadOffset() || mv.ICRCOffset() != v.ICRCOffset() {
			t.Fatalf("masked fields changed the ICRC (%#x -> %#x) or the layout", got, mv.ICRC())
		}
		mv.SetICRC()
		if !mv.ICRCOK() || mv.WireICRC() != got {
			t.Fatal("SetICRC did not make the ICRC valid")
		}
		if err := frames.FixICRC(mod); err != nil {
			t.Fatal(err)
		}
		if ok, err := frames.VerifyICRC(mod); err != nil || !ok {
			t.Fatalf("after FixICRC: %v %v", ok, err)
		}

		s := frames.Describe(3, data)
		if !s.RoCE || s.Error != "" || s.FrameLen != n || s.PSN == nil || *s.PSN != v.PSN() || s.Opcode == nil || *s.Opcode != uint8(op) ||
			s.PayloadLen == nil || *s.PayloadLen != len(pay) || s.ICRCOK == nil || *s.ICRCOK != v.ICRCOK() {
			t.Fatalf("Describe disagrees with the view: %s", s.Line())
		}
		_ = s.Line()
	})
}

// gopacketRoCEScope reports whether gopacket's decode of pkt is one View is
// meant to agree with. The exclusions are documented differences, where
// gopacket is more lenient than the hot-path parser by design:
//   - gopacket matches UDP port 4791 on either port; View only on the
//     destination port (layers.go).
//   - gopacket decodes truncated packets (IP or UDP lengths larger than the
//     frame) and marks them Truncated; View rejects them.
//   - View accepts at most two VLAN tags and RoCEv2 only directly over IPv4
//     or IPv6 (no IPv6 extension headers, no tunnels): a RoCE frame whose
//     network layer is not the one directly after the Ethernet and VLAN
//     headers is out of its scope.
//   - gopacket reads an IPv4 or UDP length of 0 as "the rest of the data"
//     (TSO, jumbograms); View treats them as malformed.
//   - gopacket's IPv4 and IPv6 decoders accept a version nibble other than
//     4 or 6.
//   - gopacket also decodes IPv4 after EtherType 0xFFFF ("raw IP") and
//     other EtherTypes; View only after 0x0800, 0x86DD and 0x8915.
func gopacketRoCEScope(pkt gopacket.Packet) bool {
	if pkt.Metadata().Truncated {
		return false
	}
	ls := pkt.Layers()
	i := 0
	if i >= len(ls) || ls[i].LayerType() != layers.LayerTypeEthernet {
		return false
	}
	et := ls[i].(*layers.Ethernet).EthernetType
	i++
	vlans := 0
	for i < len(ls) && ls[i].LayerType() == layers.LayerTypeDot1Q {
		et = ls[i].(*layers.Dot1Q).Type
		vlans++
		i++
	}
	if vlans > 2 || i+1 >= len(ls) {
		return false
	}
	switch x := ls[i].(type) {
	case *frames.GRH:
		return et == frames.EtherTypeRoCE && ls[i+1].LayerType() == frames.LayerTypeBTH
	case *layers.IPv4:
		// gopacket replaces a zero Length by the data length: read the wire.
		if et != frames.EtherTypeIPv4 || x.Version != 4 || binary.BigEndian.Uint16(x.Contents[2:]) == 0 {
			return false
		}
	case *layers.IPv6:
		if et != frames.EtherTypeIPv6 || x.Version != 6 || binary.BigEndian.Uint16(x.Contents[4:]) == 0 {
			return false
		}
	default:
		return false
	}
	u, ok := ls[i+1].(*layers.UDP)
	if !ok || i+2 >= len(ls) || ls[i+2].LayerType() != frames.LayerTypeBTH {
		return false
	}
	return u.DstPort == frames.UDPPortRoCEv2 && binary.BigEndian.Uint16(u.Contents[4:]) != 0
}

// FuzzGopacketDecode: gopacket.NewPacket (and a DecodingLayerParser) never
// panic on RoCE-shaped input; when gopacket decodes a BTH without error, the
// View parses the same bytes and reports the same opcode, PSN, QP, pad,
// payload and ICRC (outside the documented differences above).
func FuzzGopacketDecode(f *testing.F) {
	addFuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		lazy := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Lazy)
		_ = lazy.Layers()

		var (
			eth     layers.Ethernet
			dot1q   layers.Dot1Q
			ip4     layers.IPv4
			ip6     layers.IPv6
			udp     layers.UDP
			payload gopacket.Payload
			rl      frames.DecodingLayers
		)
		parser := gopacket.NewDecodingLayerParser(layers.LayerTypeEthernet,
			append([]gopacket.DecodingLayer{&eth, &dot1q, &ip4, &ip6, &udp, &payload}, rl.Layers()...)...)
		parser.IgnoreUnsupported = true
		var decoded []gopacket.LayerType
		_ = parser.DecodeLayers(data, &decoded)

		b, ok := pkt.Layer(frames.LayerTypeBTH).(*frames.BTH)
		if !ok || pkt.ErrorLayer() != nil || !gopacketRoCEScope(pkt) {
			return
		}
		var v frames.View
		if err := v.Parse(data); err != nil {
			t.Fatalf("gopacket decoded %v but View.Parse: %v\n%v", b.Opcode, err, pkt)
		}
		vb := v.BTH()
		if vb.Opcode() != b.Opcode || vb.PSN() != b.PSN || vb.DestQP() != b.DestQP || vb.PadCnt() != int(b.PadCnt) ||
			!bytes.Equal(v.Pad(), b.Pad) || v.WireICRC() != b.ICRC {
			t.Fatalf("View %v psn %#x qp %#x pad %d icrc %#x; gopacket %v psn %#x qp %#x pad %d icrc %#x",
				vb.Opcode(), vb.PSN(), vb.DestQP(), vb.PadCnt(), v.WireICRC(), b.Opcode, b.PSN, b.DestQP, b.PadCnt, b.ICRC)
		}
		// The BTH layer's payload is the extension headers and the data.
		if lo, hi := v.PayloadOffset()-v.Ext().Len(), v.PayloadOffset()+len(v.Payload()); !bytes.Equal(b.LayerPayload(), data[lo:hi]) {
			t.Fatalf("gopacket BTH payload %x, View ext+payload %x", b.LayerPayload(), data[lo:hi])
		}
		if r, ok := pkt.Layer(frames.LayerTypeRETH).(*frames.RETH); ok != (v.RETH() != nil) || ok && (r.VA != v.RETH().VA() || r.DMALen != v.RETH().DMALen()) {
			t.Fatal("RETH disagrees")
		}
		if a, ok := pkt.Layer(frames.LayerTypeAETH).(*frames.AETH); ok != (v.AETH() != nil) || ok && (a.Syndrome != v.AETH().Syndrome() || a.MSN != v.AETH().MSN()) {
			t.Fatal("AETH disagrees")
		}
		if (pkt.Layer(frames.LayerTypeINA) != nil) != (v.INA() != nil) {
			t.Fatalf("INA layer %v, View INA %x", pkt.Layer(frames.LayerTypeINA), []byte(v.INA()))
		}
	})
}

// FuzzDescribe: Describe never panics, its JSON always marshals and reads
// back to the same Summary, and Line never panics.
func FuzzDescribe(f *testing.F) {
	addFuzzSeeds(f)
	f.Add([]byte{})
	f.Add(make([]byte, 14))
	f.Fuzz(func(t *testing.T, data []byte) {
		s := frames.Describe(42, data)
		if s.Index != 42 || s.FrameLen != len(data) {
			t.Fatalf("index %d frame_len %d", s.Index, s.FrameLen)
		}
		js, err := json.Marshal(s)
		if err != nil {
			t.Fatalf("json.Marshal: %v", err)
		}
		var back frames.Summary
		if err := json.Unmarshal(js, &back); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", js, err)
		}
		if !reflect.DeepEqual(back, s) {
			t.Fatalf("JSON round trip:\n got %+v\nwant %+v", back, s)
		}
		if line := s.Line(); line == "" {
			t.Fatal("empty Line")
		}
		_, perr := frames.VerifyICRC(data)
		if s.RoCE != (perr == nil) {
			t.Fatalf("RoCE=%v but Parse error %v", s.RoCE, perr)
		}
		if s.RoCE && (s.Version == nil || s.Opcode == nil || s.OpcodeName == nil || s.PSN == nil || s.ICRC == nil || s.ICRCOK == nil || s.PayloadLen == nil) {
			t.Fatalf("RoCE summary with missing fields: %s", js)
		}
		if !s.RoCE && (s.Opcode != nil || s.PSN != nil || s.Version != nil) {
			t.Fatalf("non-RoCE summary with RoCE fields: %s", js)
		}
	})
}
