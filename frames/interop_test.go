package frames_test

// Interoperability tests: frames built by frames.Builder are handed to
// software nobody on this project wrote (TShark's InfiniBand dissector and
// scapy's contrib/roce ICRC) and every value those tools see is compared
// with the test's own inputs. The expected values are never read back
// through this package's decoder.

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/testtool"
)

func needTool(t *testing.T, name string, check func() bool) {
	t.Helper()
	testtool.Need(t, name, check)
}

func runTool(t *testing.T, name string, args ...string) (string, string, error) {
	t.Helper()
	return testtool.Run(t, name, args...)
}

var (
	haveTshark   = testtool.HaveTshark
	haveScapy    = testtool.HaveScapy
	systemPython = testtool.SystemPython
)

// Header sizes and the headers each RC opcode carries, written out here from
// docs/roce.md §1 (not taken from frames/wire) so the frame length is checked too.
const (
	ioBTH, ioRETH, ioAETH, ioImm, ioIETH, ioAtomic, ioAtomicAck, ioICRC = 12, 16, 4, 4, 4, 28, 8, 4
)

type ioHdrs struct{ reth, aeth, imm, ieth, atomic, atomicAck bool }

func (h ioHdrs) len() int {
	n := 0
	for _, c := range []struct {
		on bool
		n  int
	}{{h.reth, ioRETH}, {h.aeth, ioAETH}, {h.imm, ioImm}, {h.ieth, ioIETH}, {h.atomic, ioAtomic}, {h.atomicAck, ioAtomicAck}} {
		if c.on {
			n += c.n
		}
	}
	return n
}

var ioOpHdrs = map[wire.Opcode]ioHdrs{
	wire.SendFirst:              {},
	wire.SendMiddle:             {},
	wire.SendLast:               {},
	wire.SendLastWithImm:        {imm: true},
	wire.SendOnly:               {},
	wire.SendOnlyWithImm:        {imm: true},
	wire.WriteFirst:             {reth: true},
	wire.WriteMiddle:            {},
	wire.WriteLast:              {},
	wire.WriteLastWithImm:       {imm: true},
	wire.WriteOnly:              {reth: true},
	wire.WriteOnlyWithImm:       {reth: true, imm: true},
	wire.ReadRequest:            {reth: true},
	wire.ReadResponseFirst:      {aeth: true},
	wire.ReadResponseMiddle:     {},
	wire.ReadResponseLast:       {aeth: true},
	wire.ReadResponseOnly:       {aeth: true},
	wire.Acknowledge:            {aeth: true},
	wire.AtomicAcknowledge:      {aeth: true, atomicAck: true},
	wire.CompareSwap:            {atomic: true},
	wire.FetchAdd:               {atomic: true},
	wire.SendLastWithInvalidate: {ieth: true},
	wire.SendOnlyWithInvalidate: {ieth: true},
}

// ioFrame is one built frame and the inputs it was built from.
type ioFrame struct {
	tr   frames.Transport
	path frames.Path
	pkt  frames.Packet
	data []byte
}

func (f *ioFrame) String() string {
	return fmt.Sprintf("%s %s psn=%#x len=%d", f.tr, f.pkt.Opcode, f.pkt.PSN, len(f.pkt.Payload))
}

// ioPayload is a deterministic, non-trivial payload of n bytes.
func ioPayload(n, seed int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 0x9E3779B9
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func ioPaths() []frames.Path {
	return []frames.Path{
		{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB,
			SrcIP: netip.MustParseAddr("192.0.2.1"), DstIP: netip.MustParseAddr("192.0.2.2"),
			SrcPort: frames.UDPSourcePort(0x11), TClass: 0x62, HopLimit: 17, DestQP: 0x000123},
		{Transport: frames.V2IPv6, SrcMAC: macB, DstMAC: macA,
			SrcIP: netip.MustParseAddr("fd00:1::1"), DstIP: netip.MustParseAddr("fd00:1::2"),
			SrcPort: 0xC0DE, TClass: 0x28, FlowLabel: 0xABCDE, HopLimit: 3, PKey: 0x8123, DestQP: 0xABCDEF},
		{Transport: frames.V1, SrcMAC: macA, DstMAC: macB,
			SrcIP: netip.MustParseAddr("fe80::1:ff:fe00:1"), DstIP: netip.MustParseAddr("fe80::1:ff:fe00:2"),
			TClass: 0x10, FlowLabel: 0x12345, HopLimit: 255, DestQP: 0x000011},
	}
}

// ioPackets is one RC message flow covering every RC opcode family. k makes
// the values differ between transports. Payload lengths of LAST and ONLY
// packets run through pad counts 0..3; FIRST and MIDDLE packets carry a full
// 256-byte MTU. PSNs start at base and may wrap.
func ioPackets(k int, base uint32) []frames.Packet {
	const mtu = 256
	va := uint64(0x00007F0000000000) | uint64(k)<<32
	ps := []frames.Packet{
		{Opcode: wire.SendFirst, Payload: ioPayload(mtu, 1)},
		{Opcode: wire.SendMiddle, FECN: true, Payload: ioPayload(mtu, 2)},
		{Opcode: wire.SendLast, AckReq: true, SE: true, Payload: ioPayload(255, 3)},
		{Opcode: wire.SendFirst, Payload: ioPayload(mtu, 4)},
		{Opcode: wire.SendLastWithImm, AckReq: true, Imm: 0xDEAD0000 | uint32(k), Payload: ioPayload(254, 5)},
		{Opcode: wire.SendOnly, AckReq: true, Payload: ioPayload(253, 6)},
		{Opcode: wire.SendOnly, AckReq: true, Payload: ioPayload(252, 7)},
		{Opcode: wire.SendOnlyWithImm, AckReq: true, SE: true, Imm: 0x01020304 + uint32(k), Payload: ioPayload(101, 8)},
		{Opcode: wire.SendFirst, Payload: ioPayload(mtu, 9)},
		{Opcode: wire.SendLastWithInvalidate, AckReq: true, IETH: 0x5EED0100 | uint32(k), Payload: ioPayload(62, 10)},
		{Opcode: wire.SendOnlyWithInvalidate, AckReq: true, IETH: 0x5EED0200 | uint32(k), Payload: ioPayload(61, 11)},
		{Opcode: wire.WriteFirst, RETH: frames.RETHFields{VA: va | 0x1000, RKey: 0x00A0B0C0 + uint32(k), DMALen: 2*mtu + 99}, Payload: ioPayload(mtu, 12)},
		{Opcode: wire.WriteMiddle, BECN: true, Payload: ioPayload(mtu, 13)},
		{Opcode: wire.WriteLast, AckReq: true, Payload: ioPayload(99, 14)},
		{Opcode: wire.WriteFirst, RETH: frames.RETHFields{VA: va | 0x2008, RKey: 0xFFFFFFFE, DMALen: mtu + 98}, Payload: ioPayload(mtu, 15)},
		{Opcode: wire.WriteLastWithImm, AckReq: true, SE: true, Imm: 0xFFFFFFFF, Payload: ioPayload(98, 16)},
		{Opcode: wire.WriteOnly, AckReq: true, RETH: frames.RETHFields{VA: va | 0x3003, RKey: 0x1234, DMALen: 1}, Payload: ioPayload(1, 17)},
		{Opcode: wire.WriteOnly, AckReq: true, RETH: frames.RETHFields{VA: 0xFFFFFFFFFFFFFFF0, RKey: 0x89ABCDEF, DMALen: 1024}, Payload: ioPayload(1024, 18)},
		{Opcode: wire.WriteOnlyWithImm, AckReq: true, RETH: frames.RETHFields{VA: va | 0x4000, RKey: 0x42, DMALen: 6}, Imm: 0x00000001, Payload: ioPayload(6, 19)},
		{Opcode: wire.WriteOnlyWithImm, AckReq: true, RETH: frames.RETHFields{VA: va | 0x5000, RKey: 0x43, DMALen: 7}, Imm: 0x80000000, Payload: ioPayload(7, 20)},
		{Opcode: wire.ReadRequest, AckReq: true, RETH: frames.RETHFields{VA: va | 0x6000, RKey: 0x0BADCAFE, DMALen: 2*mtu + 7}},
		{Opcode: wire.ReadResponseFirst, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK, MSN: 0x000101}, Payload: ioPayload(mtu, 21)},
		{Opcode: wire.ReadResponseMiddle, Payload: ioPayload(mtu, 22)},
		{Opcode: wire.ReadResponseLast, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK, MSN: 0x000102}, Payload: ioPayload(7, 23)},
		{Opcode: wire.ReadResponseOnly, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK, MSN: 0xFFFFFF}, Payload: ioPayload(8, 24)},
		{Opcode: wire.ReadResponseOnly, AETH: frames.AETHFields{Syndrome: 0x0A, MSN: 0x000000}, Payload: ioPayload(9, 25)},
		{Opcode: wire.Acknowledge, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK, MSN: 0x000010 + uint32(k)}},
		{Opcode: wire.Acknowledge, FECN: true, BECN: true, AETH: frames.AETHFields{Syndrome: 0x00, MSN: 0x000011}},
		{Opcode: wire.Acknowledge, AETH: frames.AETHFields{Syndrome: wire.SyndromeRNRNAK | 14, MSN: 0x000012}},
		{Opcode: wire.Acknowledge, AETH: frames.AETHFields{Syndrome: wire.SyndromeNAKPSNSeqErr, MSN: 0x000013}},
		{Opcode: wire.Acknowledge, AETH: frames.AETHFields{Syndrome: wire.SyndromeNAKInvalidReq, MSN: 0x000014}},
		{Opcode: wire.Acknowledge, AETH: frames.AETHFields{Syndrome: wire.SyndromeNAKRemAccess, MSN: 0x000015}},
		{Opcode: wire.Acknowledge, AETH: frames.AETHFields{Syndrome: wire.SyndromeNAKRemOpErr, MSN: 0x800016}},
		{Opcode: wire.CompareSwap, AckReq: true, AtomicETH: frames.AtomicETHFields{VA: va | 0x7000, RKey: 0x7777, SwapAdd: 0x1122334455667788, Compare: 0x99AABBCCDDEEFF00}},
		{Opcode: wire.FetchAdd, AckReq: true, AtomicETH: frames.AtomicETHFields{VA: va | 0x7008, RKey: 0x7778, SwapAdd: 1, Compare: 0}},
		{Opcode: wire.AtomicAcknowledge, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK, MSN: 0x000020}, AtomicAck: 0xFEDCBA9876543210},
	}
	for i := range ps {
		ps[i].PSN = (base + uint32(i)) & 0xFFFFFF
	}
	return ps
}

// buildIO builds every packet of ioPackets over each path.
func buildIO(t *testing.T, paths []frames.Path) []*ioFrame {
	t.Helper()
	bases := []uint32{0x000000, 0xFFFFF0, 0x7FFFF8}
	var out []*ioFrame
	for k, path := range paths {
		b, err := frames.NewBuilder(path)
		require.NoError(t, err)
		b.SetIPID(0x4D2)
		for _, pkt := range ioPackets(k, bases[k%len(bases)]) {
			buf := make([]byte, 2048)
			n, err := b.Build(buf, &pkt)
			require.NoError(t, err)
			out = append(out, &ioFrame{tr: path.Transport, path: path, pkt: pkt, data: buf[:n:n]})
		}
	}
	return out
}

func writeIOPcap(t *testing.T, name string, fs []*ioFrame) string {
	t.Helper()
	fn := filepath.Join(t.TempDir(), name)
	fh, err := os.Create(fn)
	require.NoError(t, err)
	w := pcapgo.NewWriter(fh)
	require.NoError(t, w.WriteFileHeader(65536, layers.LinkTypeEthernet))
	ts := time.Unix(1700000000, 0)
	for i, f := range fs {
		ci := gopacket.CaptureInfo{Timestamp: ts.Add(time.Duration(i) * time.Millisecond), CaptureLength: len(f.data), Length: len(f.data)}
		require.NoError(t, w.WritePacket(ci, f.data))
	}
	require.NoError(t, fh.Close())
	return fn
}

// ioL3Len is the size of the network header(s) before the BTH.
func ioL3Len(tr frames.Transport) int {
	switch tr {
	case frames.V2IPv4:
		return 20 + 8
	case frames.V2IPv6:
		return 40 + 8
	}
	return 40
}

// refICRC is an independent ICRC (docs/roce.md §2) over a frame without VLAN
// tags: CRC-32 of 8 x FF, the masked network header, the masked UDP header
// (RoCEv2), the BTH with byte 4 masked, and the rest up to the ICRC.
func refICRC(f []byte, tr frames.Transport) uint32 {
	ps := append(bytes.Repeat([]byte{0xFF}, 8), f[14:len(f)-4]...)
	h := ps[8:]
	bth := 40
	switch tr {
	case frames.V2IPv4:
		h[1], h[8], h[10], h[11] = 0xFF, 0xFF, 0xFF, 0xFF
		h[26], h[27] = 0xFF, 0xFF
		bth = 28
	case frames.V2IPv6:
		h[0] |= 0x0F
		h[1], h[2], h[3], h[7] = 0xFF, 0xFF, 0xFF, 0xFF
		h[46], h[47] = 0xFF, 0xFF
		bth = 48
	case frames.V1:
		h[0] |= 0x0F
		h[1], h[2], h[3], h[7] = 0xFF, 0xFF, 0xFF, 0xFF
	}
	h[bth+4] = 0xFF
	return crc32.ChecksumIEEE(ps)
}

func ioDec(v uint64) string { return strconv.FormatUint(v, 10) }

func ioB2s(b bool) string { return ioDec(uint64(b2i(b))) }

// ioPad is the pad count for a payload of n bytes (docs/roce.md §1).
func ioPad(n int) int { return (4 - n%4) % 4 }

// tsharkHeuristicsOff are the flags from testvectors/README.md "Decoding":
// TShark 4.0's upper-layer heuristics can flag a correct SEND as malformed.
var tsharkHeuristicsOff = []string{
	"--disable-heuristic", "rpcrdma_infiniband", "--disable-heuristic", "smb_direct_infiniband",
	"--disable-heuristic", "iser_infiniband", "--disable-heuristic", "nvme_rdma",
	"--disable-heuristic", "eth_over_ib", "--disable-heuristic", "sdp_infiniband",
	"--disable-heuristic", "fc_infiniband", "--disable-heuristic", "lnet_ib",
	"--disable-heuristic", "smcr_infiniband",
}

// tsharkArgs reads fn with the heuristics off and IPv4 header checksum
// validation on.
func tsharkArgs(fn string, more ...string) []string {
	a := append([]string{"-r", fn, "-n", "-o", "ip.check_checksum:TRUE"}, tsharkHeuristicsOff...)
	return append(a, more...)
}

// ioFields are the TShark 4.0.17 fields compared (names from `tshark -G
// fields`). TShark has no separate AtomicETH VA/R_Key fields: it reports them
// as infiniband.reth.va and infiniband.reth.r_key. The ImmDt and IETH header
// items and the value inside share one name, so each appears twice. BTH byte 4
// (FECN, BECN, resv6) is only shown as the byte infiniband.reserved. TShark
// shows payload and pad together as data.data. _ws.expert.message must stay
// last: it is free text.
var ioFields = []string{
	"frame.number", "frame.len", "eth.type",
	"ip.len", "ip.id", "ip.dsfield", "ip.ttl", "ip.flags.df", "ip.checksum.status",
	"ipv6.plen", "ipv6.tclass", "ipv6.flow", "ipv6.hlim",
	"udp.srcport", "udp.dstport", "udp.length", "udp.checksum",
	"infiniband.grh.paylen", "infiniband.grh.nxthdr", "infiniband.grh.tclass", "infiniband.grh.flowlabel",
	"infiniband.grh.hoplmt", "infiniband.grh.sgid", "infiniband.grh.dgid",
	"infiniband.bth.opcode", "infiniband.bth.se", "infiniband.bth.m", "infiniband.bth.padcnt",
	"infiniband.bth.tver", "infiniband.bth.p_key", "infiniband.reserved", "infiniband.bth.destqp",
	"infiniband.bth.a", "infiniband.bth.reserved7", "infiniband.bth.psn",
	"infiniband.reth", "infiniband.reth.va", "infiniband.reth.r_key", "infiniband.reth.dmalen",
	"infiniband.atomiceth", "infiniband.atomiceth.swapdt", "infiniband.atomiceth.cmpdt",
	"infiniband.aeth", "infiniband.aeth.syndrome", "infiniband.aeth.msn",
	"infiniband.atomicacketh.origremdt",
	"infiniband.immdt", "infiniband.ieth",
	"data.data", "data.len",
	"infiniband.invariant.crc",
	"_ws.malformed",
	"_ws.expert.message",
}

// How ioNorm compares each kind of field.
var (
	ioBytesFields = map[string]bool{"infiniband.reserved": true, "infiniband.reth": true, "infiniband.atomiceth": true,
		"infiniband.aeth": true, "infiniband.immdt": true, "infiniband.ieth": true, "data.data": true}
	ioTextFields = map[string]bool{"infiniband.grh.sgid": true, "infiniband.grh.dgid": true,
		"_ws.malformed": true, "_ws.expert.message": true}
)

// ioNorm brings a TShark value to the form ioWant uses: numbers in decimal
// (TShark prints some fields in hex), booleans as 0/1, bytes as lower-case
// hex without separators. Repeated occurrences stay joined by ';'.
func ioNorm(field, v string) string {
	if v == "" || ioTextFields[field] {
		return v
	}
	parts := strings.Split(v, ";")
	for i, p := range parts {
		switch {
		case ioBytesFields[field]:
			parts[i] = strings.ToLower(strings.ReplaceAll(p, ":", ""))
		case p == "True":
			parts[i] = "1"
		case p == "False":
			parts[i] = "0"
		default:
			if n, err := strconv.ParseUint(p, 0, 64); err == nil {
				parts[i] = ioDec(n)
			}
		}
	}
	return strings.Join(parts, ";")
}

// ioWant is every value TShark must show for f, the idx-th frame built on
// its path. All of it comes from the test's inputs and docs/roce.md §1 sizes.
func ioWant(t *testing.T, f *ioFrame, frameNo, idx int) map[string]string {
	t.Helper()
	p, path := &f.pkt, &f.path
	hdrs, ok := ioOpHdrs[p.Opcode]
	require.True(t, ok, "no header table entry for %s", p.Opcode)
	payLen := len(p.Payload)
	pad := ioPad(payLen)
	transport := ioBTH + hdrs.len() + payLen + pad + ioICRC // BTH .. ICRC
	frameLen := 14 + ioL3Len(f.tr) + transport
	require.Equal(t, frameLen, len(f.data), "%v: frame length", f)
	hop := uint64(path.HopLimit)
	if hop == 0 {
		hop = 64
	}
	pkey := uint64(path.PKey)
	if pkey == 0 {
		pkey = 0xFFFF
	}
	w := map[string]string{}
	for _, name := range ioFields {
		w[name] = ""
	}
	w["frame.number"] = ioDec(uint64(frameNo))
	w["frame.len"] = ioDec(uint64(frameLen))
	switch f.tr {
	case frames.V2IPv4:
		w["eth.type"] = ioDec(0x0800)
		w["ip.len"] = ioDec(uint64(20 + 8 + transport))
		w["ip.id"] = ioDec(uint64(0x4D2 + idx))
		w["ip.dsfield"] = ioDec(uint64(path.TClass))
		w["ip.ttl"] = ioDec(hop)
		w["ip.flags.df"] = "1"
		w["ip.checksum.status"] = "1" // Good
	case frames.V2IPv6:
		w["eth.type"] = ioDec(0x86DD)
		w["ipv6.plen"] = ioDec(uint64(8 + transport))
		w["ipv6.tclass"] = ioDec(uint64(path.TClass))
		w["ipv6.flow"] = ioDec(uint64(path.FlowLabel))
		w["ipv6.hlim"] = ioDec(hop)
		// The UDP checksum is 0 on IPv6 too, as rxe sends it (docs/roce.md §1);
		// TShark, following RFC 8200, flags that. It is the only expert
		// item allowed.
		w["_ws.expert.message"] = "Illegal checksum value (0)"
	case frames.V1:
		w["eth.type"] = ioDec(0x8915)
		w["infiniband.grh.paylen"] = ioDec(uint64(transport))
		w["infiniband.grh.nxthdr"] = ioDec(0x1B)
		w["infiniband.grh.tclass"] = ioDec(uint64(path.TClass))
		w["infiniband.grh.flowlabel"] = ioDec(uint64(path.FlowLabel))
		w["infiniband.grh.hoplmt"] = ioDec(hop)
		w["infiniband.grh.sgid"] = path.SrcIP.String()
		w["infiniband.grh.dgid"] = path.DstIP.String()
	}
	if f.tr != frames.V1 {
		w["udp.srcport"] = ioDec(uint64(path.SrcPort))
		w["udp.dstport"] = ioDec(4791)
		w["udp.length"] = ioDec(uint64(8 + transport))
		w["udp.checksum"] = "0"
	}
	w["infiniband.bth.opcode"] = ioDec(uint64(p.Opcode))
	w["infiniband.bth.se"] = ioB2s(p.SE)
	w["infiniband.bth.m"] = ioB2s(p.MigReq)
	w["infiniband.bth.padcnt"] = ioDec(uint64(pad))
	w["infiniband.bth.tver"] = "0"
	w["infiniband.bth.p_key"] = ioDec(pkey)
	w["infiniband.reserved"] = hex.EncodeToString([]byte{byte(b2i(p.FECN)<<7 | b2i(p.BECN)<<6)})
	w["infiniband.bth.destqp"] = ioDec(uint64(path.DestQP))
	w["infiniband.bth.a"] = ioB2s(p.AckReq)
	w["infiniband.bth.reserved7"] = "0"
	w["infiniband.bth.psn"] = ioDec(uint64(p.PSN))
	be := binary.BigEndian
	if hdrs.reth {
		r := be.AppendUint32(be.AppendUint32(be.AppendUint64(nil, p.RETH.VA), p.RETH.RKey), p.RETH.DMALen)
		w["infiniband.reth"] = hex.EncodeToString(r)
		w["infiniband.reth.va"] = ioDec(p.RETH.VA)
		w["infiniband.reth.r_key"] = ioDec(uint64(p.RETH.RKey))
		w["infiniband.reth.dmalen"] = ioDec(uint64(p.RETH.DMALen))
	}
	if hdrs.atomic {
		a := p.AtomicETH
		r := be.AppendUint64(be.AppendUint64(be.AppendUint32(be.AppendUint64(nil, a.VA), a.RKey), a.SwapAdd), a.Compare)
		w["infiniband.atomiceth"] = hex.EncodeToString(r)
		w["infiniband.reth.va"] = ioDec(a.VA)
		w["infiniband.reth.r_key"] = ioDec(uint64(a.RKey))
		w["infiniband.atomiceth.swapdt"] = ioDec(a.SwapAdd)
		w["infiniband.atomiceth.cmpdt"] = ioDec(a.Compare)
	}
	if hdrs.aeth {
		w["infiniband.aeth"] = hex.EncodeToString(be.AppendUint32(nil, uint32(p.AETH.Syndrome)<<24|p.AETH.MSN))
		w["infiniband.aeth.syndrome"] = ioDec(uint64(p.AETH.Syndrome))
		w["infiniband.aeth.msn"] = ioDec(uint64(p.AETH.MSN))
	}
	if hdrs.atomicAck {
		w["infiniband.atomicacketh.origremdt"] = ioDec(p.AtomicAck)
	}
	if hdrs.imm {
		h := hex.EncodeToString(be.AppendUint32(nil, p.Imm))
		w["infiniband.immdt"] = h + ";" + h
	}
	if hdrs.ieth {
		h := hex.EncodeToString(be.AppendUint32(nil, p.IETH))
		w["infiniband.ieth"] = h + ";" + h
	}
	if payLen > 0 {
		w["data.data"] = hex.EncodeToString(append(append([]byte{}, p.Payload...), make([]byte, pad)...))
		w["data.len"] = ioDec(uint64(payLen + pad))
	}
	// The ICRC must be the independent one, LSB first on the wire; TShark
	// shows the 4 wire bytes as one big-endian number.
	icrc := f.data[len(f.data)-4:]
	require.Equal(t, refICRC(f.data, f.tr), binary.LittleEndian.Uint32(icrc), "%v: ICRC bytes %x", f, icrc)
	w["infiniband.invariant.crc"] = ioDec(uint64(be.Uint32(icrc)))
	return w
}

// TestInteropTshark decodes frames of every RC opcode family over RoCEv2/IPv4,
// RoCEv2/IPv6 and RoCEv1 with TShark and compares every field TShark shows
// with the values the frames were built from.
func TestInteropTshark(t *testing.T) {
	needTool(t, "tshark", haveTshark)
	fs := buildIO(t, ioPaths())
	fn := writeIOPcap(t, "interop_tshark.pcap", fs)

	args := tsharkArgs(fn, "-T", "fields", "-E", "separator=,", "-E", "aggregator=;", "-E", "occurrence=a")
	for _, f := range ioFields {
		args = append(args, "-e", f)
	}
	out, errOut, err := runTool(t, "tshark", args...)
	require.NoError(t, err, "tshark: %s", errOut)
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, len(fs), "tshark should print one line per frame:\n%s", out)

	pads := map[frames.Transport]map[int]bool{}
	ops := map[frames.Transport]map[wire.Opcode]bool{}
	idx := map[frames.Transport]int{}
	for i, f := range fs {
		want := ioWant(t, f, i+1, idx[f.tr])
		idx[f.tr]++
		cols := strings.SplitN(lines[i], ",", len(ioFields))
		require.Len(t, cols, len(ioFields), "frame %d: %q", i+1, lines[i])
		for j, name := range ioFields {
			assert.Equal(t, want[name], ioNorm(name, cols[j]), "frame %d (%v): %s", i+1, f, name)
		}
		if pads[f.tr] == nil {
			pads[f.tr], ops[f.tr] = map[int]bool{}, map[wire.Opcode]bool{}
		}
		pads[f.tr][ioPad(len(f.pkt.Payload))] = true
		ops[f.tr][f.pkt.Opcode] = true
	}
	// Coverage: every RC opcode family and every pad count on every transport.
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		assert.Len(t, pads[tr], 4, "%s: pad counts covered", tr)
		assert.Len(t, ops[tr], len(ioOpHdrs), "%s: opcodes covered", tr)
	}

	// A second pass through the display filter: nothing may be malformed.
	out, errOut, err = runTool(t, "tshark", tsharkArgs(fn, "-Y", "_ws.malformed", "-T", "fields", "-e", "frame.number")...)
	require.NoError(t, err, "tshark: %s", errOut)
	assert.Empty(t, strings.TrimSpace(out), "tshark reports malformed frames")

	// Control: the same filter does catch a frame whose RETH is cut short
	// (lengths consistent, so only the transport headers are wrong).
	trunc := append([]byte{}, fs[0].data...)
	for _, f := range fs {
		if f.tr == frames.V2IPv4 && f.pkt.Opcode == wire.WriteOnly {
			trunc = append(trunc[:0], f.data[:14+20+8+ioBTH+8]...)
			break
		}
	}
	binary.BigEndian.PutUint16(trunc[14+2:], uint16(len(trunc)-14))
	binary.BigEndian.PutUint16(trunc[14+10:], 0)
	binary.BigEndian.PutUint16(trunc[14+10:], ioIPv4Checksum(trunc[14:34]))
	binary.BigEndian.PutUint16(trunc[34+4:], uint16(len(trunc)-34))
	bad := writeIOPcap(t, "interop_malformed.pcap", []*ioFrame{fs[0], {tr: frames.V2IPv4, data: trunc}})
	out, errOut, err = runTool(t, "tshark", tsharkArgs(bad, "-Y", "_ws.malformed", "-T", "fields", "-e", "frame.number")...)
	require.NoError(t, err, "tshark: %s", errOut)
	assert.Equal(t, "2", strings.TrimSpace(out), "control: tshark must flag the truncated RETH frame")
	t.Logf("tshark 4.0 decoded %d frames (%d per transport) with values as built and nothing malformed", len(fs), len(fs)/3)
}

// ioIPv4Checksum is the Internet checksum of an IPv4 header.
func ioIPv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		s += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}

// scapyICRCScript recomputes each frame's ICRC with scapy 2.5.0's
// BTH.compute_icrc (RoCEv2/IPv4 only) and compares it with the frame's
// ICRC bytes. One line per frame:
// index OK|BAD opcode dqpn psn padcount ackreq wire_icrc scapy_icrc.
// Exit status 3 means at least one mismatch; any other failure is a crash.
const scapyICRCScript = `
import struct, sys
from scapy.all import rdpcap, Ether
from scapy.layers.inet import IP, UDP
from scapy.contrib.roce import BTH
bad = 0
for i, p in enumerate(rdpcap(sys.argv[1])):
    if Ether not in p or IP not in p or UDP not in p or BTH not in p:
        print(i, "NOBTH", "-", "-", "-", "-", "-", "-", "-")
        bad += 1
        continue
    b = p[BTH]
    wire = struct.pack("!I", b.icrc)
    calc = b.compute_icrc(None)
    ok = wire == calc
    if not ok:
        bad += 1
    print(i, "OK" if ok else "BAD", b.opcode, b.dqpn, b.psn, b.padcount, b.ackreq, wire.hex(), calc.hex())
sys.exit(3 if bad else 0)
`

// runScapy runs scapyICRCScript on fs and checks every line against the
// frames' inputs. It returns the indexes scapy rejected and the exit code.
func runScapy(t *testing.T, name string, fs []*ioFrame) ([]int, int) {
	t.Helper()
	fn := writeIOPcap(t, name, fs)
	out, errOut, err := runTool(t, systemPython, "-c", scapyICRCScript, fn)
	code := 0
	if err != nil {
		var ee *exec.ExitError
		require.True(t, errors.As(err, &ee), "scapy: %v\n%s", err, errOut)
		code = ee.ExitCode()
		require.Equal(t, 3, code, "scapy script crashed:\n%s\n%s", out, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	require.Len(t, lines, len(fs), "scapy should print one line per frame:\n%s\n%s", out, errOut)
	var rejected []int
	for i, f := range fs {
		c := strings.Fields(lines[i])
		require.Len(t, c, 9, "scapy line %d: %q", i, lines[i])
		p := &f.pkt
		want := []string{ioDec(uint64(i)), c[1], ioDec(uint64(p.Opcode)), ioDec(uint64(f.path.DestQP)), ioDec(uint64(p.PSN)),
			ioDec(uint64(ioPad(len(p.Payload)))), ioB2s(p.AckReq), hex.EncodeToString(f.data[len(f.data)-4:]),
			hex.EncodeToString(binary.LittleEndian.AppendUint32(nil, refICRC(f.data, f.tr)))}
		assert.Equal(t, want, c, "scapy line %d (%v)", i, f)
		if c[1] != "OK" {
			rejected = append(rejected, i)
		}
	}
	return rejected, code
}

// TestInteropScapy checks the ICRC of RoCEv2/IPv4 frames with scapy 2.5.0's
// independent implementation, and that scapy rejects a frame whose payload
// was changed after Build.
func TestInteropScapy(t *testing.T) {
	needTool(t, "scapy", haveScapy)
	paths := ioPaths()[:1]
	// A second IPv4 path with every masked field unusual: TOS with ECN CE,
	// TTL 1, a limited P_Key.
	paths = append(paths, frames.Path{Transport: frames.V2IPv4, SrcMAC: macB, DstMAC: macA,
		SrcIP: netip.MustParseAddr("198.51.100.7"), DstIP: netip.MustParseAddr("203.0.113.9"),
		SrcPort: frames.UDPSourcePort(0x1234), TClass: 0x03, HopLimit: 1, PKey: 0x7FFF, DestQP: 0xFFFFFE})
	fs := buildIO(t, paths)
	pads := map[int]bool{}
	for _, f := range fs {
		pads[ioPad(len(f.pkt.Payload))] = true
	}
	require.Len(t, pads, 4, "pad counts 0-3 covered")

	t.Run("clean", func(t *testing.T) {
		rejected, code := runScapy(t, "interop_scapy.pcap", fs)
		assert.Empty(t, rejected, "scapy rejected frames")
		assert.Equal(t, 0, code)
		t.Logf("scapy accepted all %d frames", len(fs))
	})

	t.Run("corrupted", func(t *testing.T) {
		const victim = 5 // SEND_ONLY, 253-byte payload
		bad := append([]*ioFrame{}, fs...)
		f := *fs[victim]
		require.Equal(t, wire.SendOnly, f.pkt.Opcode)
		f.data = append([]byte{}, f.data...)
		f.data[14+20+8+ioBTH+100] ^= 0x04 // one payload bit, after Build
		bad[victim] = &f
		rejected, code := runScapy(t, "interop_scapy_corrupt.pcap", bad)
		assert.Equal(t, []int{victim}, rejected, "scapy must reject exactly the corrupted frame")
		assert.Equal(t, 3, code)
	})
}
