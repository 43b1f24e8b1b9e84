package pcapio_test

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/pcapio"
)

// An IPv4 packet's first bytes (version 4, IHL 5) and an IPv6 packet's.
var (
	ip4 = append([]byte{0x45, 0, 0, 24}, bytes.Repeat([]byte{7}, 20)...)
	ip6 = append([]byte{0x60, 0, 0, 0}, bytes.Repeat([]byte{9}, 40)...)
	mac = []byte{0x02, 0x1a, 0xe0, 0, 0, 5}
)

// sll is a Linux cooked header (tcpdump -i any, LINKTYPE_LINUX_SLL) as
// the link-layer header types page lays it out.
func sll(proto uint16) []byte {
	h := []byte{0, 4, 0, 1, 0, 6}                    // outgoing, ARPHRD_ETHER, 6-byte address
	h = append(h, mac...)                            // the sender's address,
	h = append(h, 0, 0, byte(proto>>8), byte(proto)) // padded to 8, protocol
	return h
}

// sll2 is LINKTYPE_LINUX_SLL2's 20-byte header.
func sll2(proto uint16) []byte {
	h := []byte{byte(proto >> 8), byte(proto), 0, 0, 0, 0, 0, 3, 0, 1, 0, 6} // protocol, reserved, ifindex 3, ARPHRD_ETHER, host, 6
	return append(append(h, mac...), 0, 0)
}

func eth(src []byte, etherType uint16, payload []byte) []byte {
	f := make([]byte, 6, 14+len(payload))
	f = append(f, src...)
	f = append(f, byte(etherType>>8), byte(etherType))
	return append(f, payload...)
}

// TestMixedLinkTypes: a pcapng whose interfaces are Ethernet, SLL, SLL2
// and raw IP reads every frame as the Ethernet frame it stands for, with
// lengths that say the same about the snaplen; a cut cooked header and an
// unknown link type are one-line errors.
func TestMixedLinkTypes(t *testing.T) {
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{Name: "eth0", LinkType: layers.LinkTypeEthernet, SnapLength: 0}, pcapgo.NgWriterOptions{})
	require.NoError(t, err)
	ids := map[string]int{"eth0": 0}
	for _, i := range []struct {
		name string
		lt   layers.LinkType
	}{{"any", 113}, {"any2", 276}, {"tun0", 101}} {
		id, err := w.AddInterface(pcapgo.NgInterface{Name: i.name, LinkType: i.lt})
		require.NoError(t, err)
		ids[i.name] = id
	}
	put := func(iface string, data []byte, length int) {
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: len(data), Length: length, InterfaceIndex: ids[iface]}, data))
	}
	native := eth(mac, 0x0800, ip4)
	put("eth0", native, len(native))
	put("any", append(sll(0x0800), ip4...), 16+len(ip4))
	put("any2", append(sll2(0x86DD), ip6...), 20+len(ip6)+100) // cut by a snaplen: 100 bytes missing
	put("tun0", ip6, len(ip6))
	require.NoError(t, w.Flush())

	rd, err := pcapio.NewReader("mixed.pcapng", bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	recs, names, err := rd.All()
	require.NoError(t, err)
	assert.Equal(t, []string{"eth0", "any", "any2", "tun0"}, names)
	require.Len(t, recs, 4)
	want := []struct {
		lt      layers.LinkType
		data    []byte
		snapped bool
	}{
		{layers.LinkTypeEthernet, native, false},
		{113, native, false},
		{276, eth(mac, 0x86DD, ip6), true},
		{101, eth(make([]byte, 6), 0x86DD, ip6), false},
	}
	for i, w := range want {
		r := recs[i]
		assert.Equal(t, w.lt, r.LinkType, "frame %d", i)
		assert.Equal(t, w.data, r.Data, "frame %d", i)
		assert.Equal(t, len(r.Data), r.Info.CaptureLength, "frame %d", i)
		assert.Equal(t, w.snapped, r.Snapped(), "frame %d", i)
	}
	assert.Equal(t, recs[2].Info.CaptureLength+100, recs[2].Info.Length)

	// A borrowing reader gives the same frames, each valid until the next
	// read (so each is compared before reading on).
	rd, err = pcapio.NewReader("mixed.pcapng", bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	rd.Borrow()
	for i, w := range want {
		r, err := rd.Next()
		require.NoError(t, err, "frame %d", i)
		assert.Equal(t, w.data, r.Data, "borrowed frame %d", i)
		assert.Equal(t, len(r.Data), cap(r.Data), "borrowed frame %d has room to append into the reader's buffer", i)
	}
	_, err = rd.Next()
	require.ErrorIs(t, err, io.EOF)

	// A cooked header cut short, and a link type nobody here reads.
	b.Reset()
	w, err = pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{Name: "any", LinkType: 113}, pcapgo.NgWriterOptions{})
	require.NoError(t, err)
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: 10, Length: 10}, make([]byte, 10)))
	require.NoError(t, w.Flush())
	rd, err = pcapio.NewReader("cut.pcapng", bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	_, _, err = rd.All()
	require.EqualError(t, err, `cut.pcapng: frame 1: interface 0 ("any"): Linux cooked (SLL) header cut at 10 of 16 bytes`)

	b.Reset()
	pw := pcapgo.NewWriter(&b)
	require.NoError(t, pw.WriteFileHeader(65535, layers.LinkTypeIEEE802_11))
	_, err = pcapio.NewReader("wifi.pcap", bytes.NewReader(b.Bytes()))
	require.ErrorContains(t, err, "wifi.pcap: link type 105")
	require.ErrorContains(t, err, "want Ethernet (1), Linux cooked SLL (113)")
}

// classic writes a classic pcap of link type lt holding frames, each
// captured whole unless cut says how many of its bytes the snaplen kept.
func classic(t *testing.T, lt layers.LinkType, frames [][]byte, cut ...int) []byte {
	t.Helper()
	var b bytes.Buffer
	w := pcapgo.NewWriter(&b)
	require.NoError(t, w.WriteFileHeader(65535, lt))
	for i, f := range frames {
		data := f
		if i < len(cut) && cut[i] < len(f) {
			data = f[:cut[i]]
		}
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: len(data), Length: len(f)}, data))
	}
	return b.Bytes()
}

func readAll(t *testing.T, name string, data []byte) []pcapio.Record {
	t.Helper()
	rd, err := pcapio.NewReader(name, bytes.NewReader(data))
	require.NoError(t, err)
	recs, _, err := rd.All()
	require.NoError(t, err)
	return recs
}

// TestClassicLinkTypes: classic pcap files of every link type read
// besides Ethernet, written byte by byte here from the tcpdump.org
// layouts: the Ethernet frame each record stands for (EtherType, MACs,
// payload), its lengths and its packet type.
func TestClassicLinkTypes(t *testing.T) {
	zero := make([]byte, 6)
	bcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	// An IPv4 header to 224.1.2.3 (group MAC 01:00:5e:01:02:03) and one to
	// 239.129.2.3 (the 24th bit dropped: 01:00:5e:01:02:03 again), an IPv6
	// header to ff02::1:ff00:5 (33:33:ff:00:00:05).
	mc4 := append([]byte{0x45, 0, 0, 20, 0, 0, 0, 0, 1, 17, 0, 0, 10, 0, 0, 1}, 224, 1, 2, 3)
	mc4b := append(append([]byte{}, mc4[:16]...), 239, 129, 2, 3)
	mc6 := append([]byte{0x60, 0, 0, 0, 0, 0, 17, 1}, make([]byte, 32)...)
	copy(mc6[24:], []byte{0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0, 0, 5})
	llc := []byte{0x42, 0x42, 0x03, 0, 0, 0, 0} // a spanning-tree BPDU's LLC header and start

	cooked := func(pt uint16, arphrd uint16, alen uint16, proto uint16) []byte {
		h := []byte{byte(pt >> 8), byte(pt), byte(arphrd >> 8), byte(arphrd), byte(alen >> 8), byte(alen)}
		h = append(h, mac...)
		return append(h, 0, 0, byte(proto>>8), byte(proto))
	}
	cooked2 := func(pt byte, arphrd uint16, alen byte, proto uint16) []byte {
		h := []byte{byte(proto >> 8), byte(proto), 0, 0, 0, 0, 0, 9, byte(arphrd >> 8), byte(arphrd), pt, alen}
		return append(append(h, mac...), 0, 0)
	}
	type frame struct {
		in         []byte
		dst, src   []byte
		etherType  uint16
		payload    []byte
		packetType layers.LinuxSLLPacketType
	}
	for _, c := range []struct {
		name   string
		lt     layers.LinkType
		frames []frame
	}{
		{"sll", layers.LinkTypeLinuxSLL, []frame{
			{append(cooked(0, 1, 6, 0x0800), ip4...), zero, mac, 0x0800, ip4, layers.LinuxSLLPacketTypeHost},
			{append(cooked(4, 1, 6, 0x86DD), ip6...), zero, mac, 0x86DD, ip6, layers.LinuxSLLPacketTypeOutgoing},
			{append(cooked(3, 1, 6, 0x8915), ip4...), zero, mac, 0x8915, ip4, layers.LinuxSLLPacketTypeOtherhost}, // RoCE v1
			{append(cooked(1, 1, 6, 0x0806), ip4...), bcast, mac, 0x0806, ip4, layers.LinuxSLLPacketTypeBroadcast},
			{append(cooked(2, 1, 6, 0x0800), mc4...), []byte{1, 0, 0x5e, 1, 2, 3}, mac, 0x0800, mc4, layers.LinuxSLLPacketTypeMulticast},
			{append(cooked(2, 1, 6, 0x0800), mc4b...), []byte{1, 0, 0x5e, 1, 2, 3}, mac, 0x0800, mc4b, layers.LinuxSLLPacketTypeMulticast},
			{append(cooked(2, 1, 6, 0x86DD), mc6...), []byte{0x33, 0x33, 0xff, 0, 0, 5}, mac, 0x86DD, mc6, layers.LinuxSLLPacketTypeMulticast},
			// a tun device: no address; loopback: ARPHRD_LOOPBACK, 6 zero bytes
			{append(cooked(0, 0xfffe, 0, 0x0800), ip4...), zero, zero, 0x0800, ip4, 0},
			// 802.2 LLC: an 802.3 length in place of the EtherType
			{append(cooked(2, 1, 6, 0x0004), llc...), zero, mac, uint16(len(llc)), llc, layers.LinuxSLLPacketTypeMulticast},
			// netlink: the protocol is a netlink family, not an EtherType
			{append(cooked(4, 824, 0, 0x0800), ip4...), zero, zero, uint16(len(ip4)), ip4, layers.LinuxSLLPacketTypeOutgoing},
		}},
		{"sll2", layers.LinkTypeLinuxSLL2, []frame{
			{append(cooked2(0, 1, 6, 0x0800), ip4...), zero, mac, 0x0800, ip4, layers.LinuxSLLPacketTypeHost},
			{append(cooked2(4, 772, 6, 0x86DD), ip6...), zero, mac, 0x86DD, ip6, layers.LinuxSLLPacketTypeOutgoing},
			{append(cooked2(1, 1, 6, 0x0806), ip4...), bcast, mac, 0x0806, ip4, layers.LinuxSLLPacketTypeBroadcast},
			{append(cooked2(0, 32, 20, 0x0800), ip4...), zero, zero, 0x0800, ip4, 0}, // InfiniBand: a 20-byte address
			{append(cooked2(0, 803, 0, 0x0003), llc...), zero, zero, uint16(len(llc)), llc, 0},
		}},
		{"raw", layers.LinkTypeRaw, []frame{
			{ip4, zero, zero, 0x0800, ip4, 0},
			{ip6, zero, zero, 0x86DD, ip6, 0},
			{[]byte{0x10, 1, 2}, zero, zero, 3, []byte{0x10, 1, 2}, 0}, // IP version 1: no EtherType
			{[]byte{}, zero, zero, 0, []byte{}, 0},
		}},
		{"ipv4", layers.LinkTypeIPv4, []frame{{ip4, zero, zero, 0x0800, ip4, 0}}},
		{"ipv6", layers.LinkTypeIPv6, []frame{{ip6, zero, zero, 0x86DD, ip6, 0}}},
		{"dlt-raw-12", 12, []frame{{ip4, zero, zero, 0x0800, ip4, 0}, {ip6, zero, zero, 0x86DD, ip6, 0}}},
		{"dlt-raw-14", 14, []frame{{ip6, zero, zero, 0x86DD, ip6, 0}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var in [][]byte
			for _, f := range c.frames {
				in = append(in, f.in)
			}
			recs := readAll(t, c.name+".pcap", classic(t, c.lt, in))
			require.Len(t, recs, len(c.frames))
			for i, f := range c.frames {
				r := recs[i]
				want := append(append(append(append([]byte{}, f.dst...), f.src...), byte(f.etherType>>8), byte(f.etherType)), f.payload...)
				assert.Equal(t, want, r.Data, "frame %d", i)
				assert.Equal(t, c.lt, r.LinkType, "frame %d", i)
				assert.Equal(t, f.packetType, r.PacketType, "frame %d", i)
				assert.Equal(t, 14+len(f.payload), r.Info.CaptureLength, "frame %d", i)
				assert.Equal(t, 14+len(f.payload), r.Info.Length, "frame %d", i)
				assert.False(t, r.Snapped(), "frame %d", i)
				assert.Equal(t, time.Unix(int64(i), 0).UTC(), r.Info.Timestamp, "frame %d", i)
			}
		})
	}
}

// TestSnappedLinkTypes: a frame the snaplen cut stays Snapped as an
// Ethernet frame, its lengths shifted by the header difference; an
// 802.3 length placeholder counts the frame's original length.
func TestSnappedLinkTypes(t *testing.T) {
	big := append(append([]byte{}, ip4...), make([]byte, 1000)...)
	for _, c := range []struct {
		lt    layers.LinkType
		frame []byte
		hdr   int
	}{
		{layers.LinkTypeEthernet, eth(mac, 0x0800, big), 14},
		{layers.LinkTypeLinuxSLL, append(sll(0x0800), big...), 16},
		{layers.LinkTypeLinuxSLL2, append(sll2(0x0800), big...), 20},
		{layers.LinkTypeRaw, big, 0},
	} {
		t.Run(c.lt.String(), func(t *testing.T) {
			recs := readAll(t, "snapped.pcap", classic(t, c.lt, [][]byte{c.frame, c.frame}, 60))
			require.Len(t, recs, 2)
			cut, whole := recs[0], recs[1]
			assert.True(t, cut.Snapped())
			assert.False(t, whole.Snapped())
			assert.Equal(t, 60-c.hdr+14, cut.Info.CaptureLength)
			assert.Equal(t, len(cut.Data), cut.Info.CaptureLength)
			assert.Equal(t, len(big)+14, cut.Info.Length)
			assert.Equal(t, whole.Info, recs[1].Info)
			assert.Equal(t, whole.Data[:len(cut.Data)], cut.Data)
			assert.Equal(t, len(big)+14, whole.Info.CaptureLength)
		})
	}
	// An LLC frame cut by the snaplen: its 802.3 length is the length it
	// had, not what was kept.
	llc := append(sll(0x0004), make([]byte, 200)...)
	recs := readAll(t, "llc.pcap", classic(t, layers.LinkTypeLinuxSLL, [][]byte{llc}, 40))
	require.Len(t, recs, 1)
	assert.True(t, recs[0].Snapped())
	assert.Equal(t, []byte{0, 200}, recs[0].Data[12:14])
	assert.Equal(t, 40-16+14, len(recs[0].Data))
}

// A frame Next cannot read as Ethernet is an error naming it, and the
// next call reads on.
func TestUnreadableFrameSkipped(t *testing.T) {
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{Name: "wlan0", LinkType: layers.LinkTypeIEEE802_11}, pcapgo.NgWriterOptions{})
	require.NoError(t, err)
	id, err := w.AddInterface(pcapgo.NgInterface{Name: "eth0", LinkType: layers.LinkTypeEthernet})
	require.NoError(t, err)
	native := eth(mac, 0x0800, ip4)
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: 30, Length: 30}, make([]byte, 30)))
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(2, 0), CaptureLength: len(native), Length: len(native), InterfaceIndex: id}, native))
	require.NoError(t, w.Flush())
	rd, err := pcapio.NewReader("wifi.pcapng", bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	_, err = rd.Next()
	require.EqualError(t, err, `wifi.pcapng: frame 1: interface 0 ("wlan0"): link type 105 (802.11): `+
		"want Ethernet (1), Linux cooked SLL (113) or SLL2 (276), or raw IP (101, 228, 229)")
	r, err := rd.Next()
	require.NoError(t, err)
	assert.Equal(t, native, r.Data)
	_, err = rd.Next()
	assert.Equal(t, io.EOF, err)

	// A classic pcap whose snaplen cut a cooked header.
	cooked := append(sll(0x0800), ip4...)
	rd, err = pcapio.NewReader("any.pcap", bytes.NewReader(classic(t, layers.LinkTypeLinuxSLL, [][]byte{cooked, cooked}, 10)))
	require.NoError(t, err)
	_, err = rd.Next()
	require.EqualError(t, err, "any.pcap: frame 1: Linux cooked (SLL) header cut at 10 of 16 bytes")
	r, err = rd.Next()
	require.NoError(t, err)
	assert.Equal(t, native, r.Data)
	_, err = rd.Next()
	assert.Equal(t, io.EOF, err)
}
