package pcapio_test

import (
	"bytes"
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

	// A cooked header cut short, and a link type nobody here reads.
	b.Reset()
	w, err = pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{Name: "any", LinkType: 113}, pcapgo.NgWriterOptions{})
	require.NoError(t, err)
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1, 0), CaptureLength: 10, Length: 10}, make([]byte, 10)))
	require.NoError(t, w.Flush())
	rd, err = pcapio.NewReader("cut.pcapng", bytes.NewReader(b.Bytes()))
	require.NoError(t, err)
	_, _, err = rd.All()
	require.EqualError(t, err, "cut.pcapng: frame 0: Linux cooked (SLL) header cut at 10 of 16 bytes")

	b.Reset()
	pw := pcapgo.NewWriter(&b)
	require.NoError(t, pw.WriteFileHeader(65535, layers.LinkTypeIEEE802_11))
	_, err = pcapio.NewReader("wifi.pcap", bytes.NewReader(b.Bytes()))
	require.ErrorContains(t, err, "wifi.pcap: link type 105")
	require.ErrorContains(t, err, "want Ethernet (1), Linux cooked SLL (113)")
}
