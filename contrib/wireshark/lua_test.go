// These tests load the dissector into tshark and check what tshark shows.

package wireshark

import (
	"encoding/binary"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/testtool"
)

func TestLuaDissectorShowsINAHeader(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	const workers, msgLen, mtu = 3, 2, 1024
	fn := filepath.Join(t.TempDir(), "run.pcapng")
	f, err := os.Create(fn)
	require.NoError(t, err)
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.MsgLen, cfg.MTU, cfg.TensorBytes, cfg.Seed, cfg.Capture = workers, msgLen, mtu, 5000, 1, f
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.True(t, res.Exact)

	out, errOut, err := testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-T", "fields", "-E", "separator=|",
		"-e", "frame.interface_name", "-e", "infiniband.bth.opcode", "-e", "ina.tag", "-e", "ina.ring", "-e", "ina.msg",
		"-e", "ina.msglen", "-e", "ina.rank", "-e", "ina.data_len", "-e", "_ws.col.Info")
	require.NoError(t, err, errOut)
	require.NotContains(t, errOut, "Lua: Error")

	// 5000 bytes in messages of 2×1024-8 = 2040 bytes: messages 0, 1 (two
	// packets each) and 2 (920 bytes, one packet: WRITE ONLY WITH IMM).
	wantLen := []int{2, 2, 1}
	wantData := []int{1016, 1016, 920}
	seen := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		c := strings.Split(l, "|")
		require.Len(t, c, 9, l)
		iface, op := c[0], c[1]
		if op != "6" && op != "11" { // WRITE FIRST, WRITE ONLY WITH IMMEDIATE
			require.Empty(t, c[2], "only first packets carry the header: %q", l)
			continue
		}
		var port int
		var dir string
		_, err := fmt.Sscanf(strings.Replace(iface, "-", " ", 1), "port%d %s", &port, &dir)
		require.NoError(t, err, iface)
		rank := port // into the switch: the sender's own header
		if dir == "out" {
			rank = (port + workers - 1) % workers // a result keeps its connection's header: the predecessor's
		}
		msg, _ := strconv.Atoi(c[4])
		require.Equal(t, "0x494e4131", c[2], l)
		require.Equal(t, "0", c[3], l)
		require.Less(t, msg, 3, l)
		require.Equal(t, strconv.Itoa(wantLen[msg]), c[5], l)
		require.Equal(t, strconv.Itoa(rank), c[6], l)
		require.Equal(t, strconv.Itoa(wantData[msg]), c[7], l)
		require.Contains(t, c[8], fmt.Sprintf("[INA ring=0 msg=%d len=%d rank=%d]", msg, wantLen[msg], rank), l)
		seen[dir]++
	}
	require.Equal(t, workers*3, seen["in"], "every worker's three first packets into the switch")
	require.Equal(t, workers*3, seen["out"], "and their results")
}

// TestLuaDissectorShowsSwitchToSwitchFrames runs multi-rack NetReduce (two
// leaves of two hosts under one spine) and checks what the script shows of
// the leaf-spine frames, from the wire format alone: leaf i's partials sum
// its local ranks 2i and 2i+1, totals sum all four, every partial has a
// total at the same position (no loss), and notifications carry a header
// block shorter than the frame it came from.
func TestLuaDissectorShowsSwitchToSwitchFrames(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	const leaves, perLeaf = 2, 2
	fn := filepath.Join(t.TempDir(), "multirack.pcapng")
	f, err := os.Create(fn)
	require.NoError(t, err)
	p := topo.LinkParams{Rate: 10e9, Latency: time.Microsecond}
	tp, err := topo.SpineLeaf(leaves, perLeaf, 1, p, p)
	require.NoError(t, err)
	cfg := emu.DefaultConfig()
	cfg.Topology, cfg.Workers, cfg.TensorBytes, cfg.Seed, cfg.Capture = tp, leaves*perLeaf, 64<<10, 1, f
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.True(t, res.Exact)

	fields := []string{"frame.interface_name", "infiniband.bth.opcode", "ina.tree.kind", "ina.tag", "ina.ring",
		"ina.msglen", "ina.tree.msg", "ina.tree.offset", "ina.tree.flags", "ina.tree.ranks", "ina.tree.rank",
		"ina.tree.block_len", "ina.tree.frame_len", "ina.tree.data_len", "_ws.col.Info"}
	args := []string{"-X", "lua_script:inaemu.lua", "-r", fn, "-T", "fields", "-E", "separator=|"}
	for _, e := range fields {
		args = append(args, "-e", e)
	}
	out, errOut, err := testtool.Run(t, "tshark", args...)
	require.NoError(t, err, errOut)
	require.NotContains(t, errOut, "Lua: Error")

	kinds := map[string]string{"224": "partial", "225": "total", "226": "notification"}
	num := func(s, l string) uint64 {
		t.Helper()
		v, err := strconv.ParseUint(s, 0, 64)
		require.NoError(t, err, l)
		return v
	}
	type pos struct{ msg, off uint64 }
	partials := map[int]map[pos]bool{} // by leaf: the positions sent up
	totals := map[int]map[pos]bool{}   // by leaf: the positions sent down
	count := map[string]int{}          // by interface and kind
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		c := strings.Split(l, "|")
		require.Len(t, c, len(fields), l)
		iface, op, kind := c[0], c[1], c[2]
		if kinds[op] == "" {
			require.Empty(t, kind, "only opcodes 0xE0-0xE2 are switch-to-switch frames: %q", l)
			continue
		}
		require.Equal(t, kinds[op], kind, l)
		require.Equal(t, "0x494e4131", c[3], l)
		require.Equal(t, "0", c[4], l)
		msgLen, msg, off, flags := num(c[5], l), num(c[6], l), num(c[7], l), num(c[8], l)
		require.Less(t, off, msgLen, l)
		var leaf int
		up := strings.HasPrefix(iface, "leaf")
		if up {
			_, err = fmt.Sscanf(iface, "leaf%d-spine0", &leaf)
		} else {
			_, err = fmt.Sscanf(iface, "spine0-leaf%d", &leaf)
		}
		require.NoError(t, err, l)
		count[iface+" "+kind]++
		at := pos{msg, off}
		switch kind {
		case "partial", "total":
			require.True(t, up == (kind == "partial"), "partials go up, totals down: %q", l)
			want, list := uint64(0xf), "0,1,2,3"
			m := totals
			if kind == "partial" {
				want, list = 3<<(perLeaf*leaf), fmt.Sprintf("%d,%d", perLeaf*leaf, perLeaf*leaf+1)
				m = partials
			}
			require.Equal(t, want, num(c[9], l), l)
			require.Equal(t, list, c[10], l)
			require.Equal(t, flags&1 == 1, off == msgLen-1, "the last flag marks the message's last packet: %q", l)
			require.Positive(t, num(c[13], l), l)
			last := ""
			if flags&1 == 1 {
				last = " last"
			}
			require.Contains(t, c[14], fmt.Sprintf("[INA %s ring=0 msg=%d off=%d ranks=%#x%s]", kind, msg, off, want, last), l)
			if m[leaf] == nil {
				m[leaf] = map[pos]bool{}
			}
			require.False(t, m[leaf][at], "one %s per position and leaf: %q", kind, l)
			m[leaf][at] = true
		case "notification":
			block, frame := num(c[11], l), num(c[12], l)
			require.Less(t, block, frame, l)
			require.Equal(t, block, num(c[13], l), "the data is the header block: %q", l)
			require.GreaterOrEqual(t, block, uint64(14+20+8+12), "Ethernet, IPv4, UDP and BTH at least: %q", l)
			which := "first"
			if flags&2 != 0 {
				which = "last"
				require.Equal(t, msgLen-1, off, l)
				count[iface+" last"]++
			} else {
				require.Zero(t, off, l)
			}
			require.Contains(t, c[14], fmt.Sprintf("[INA notification %s ring=0 msg=%d off=%d block=%d frame=%d]",
				which, msg, off, block, frame), l)
		}
	}
	for leaf := 0; leaf < leaves; leaf++ {
		upIf, downIf := fmt.Sprintf("leaf%d-spine0", leaf), fmt.Sprintf("spine0-leaf%d", leaf)
		require.Positive(t, count[upIf+" partial"], upIf)
		require.Equal(t, count[upIf+" partial"], count[downIf+" total"], "no loss: a total for every partial on %s", upIf)
		require.Equal(t, partials[leaf], totals[leaf], "the totals down to leaf%d are at the partials' positions", leaf)
		require.Equal(t, count[upIf+" partial"], count["leaf0-spine0 partial"], "every leaf sends each position")
		require.Positive(t, count[upIf+" notification"], upIf)
		require.Equal(t, count[upIf+" notification"], 2*count[upIf+" last"], "a first and a last per message on %s", upIf)
		require.Zero(t, count[upIf+" total"]+count[downIf+" partial"], "partials only go up, totals only down")
	}
}

// TestLuaDissectorShowsCompressedPayloads runs compressing rings (three
// transports, payloads that shrink and, with --pattern ones, payloads
// sent as they are) and checks every frame's INCEPTIONN fields in tshark
// against inaemu decode's reading of the same frame: two readings of the
// packed form written apart (the Lua walks the tag vectors itself). A
// marked payload cut short is flagged.
func TestLuaDissectorShowsCompressedPayloads(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	for _, c := range []struct {
		tr  frames.Transport
		pat workload.Pattern
	}{{frames.V2IPv4, workload.Random}, {frames.V2IPv6, workload.Random}, {frames.V1, workload.Random}, {frames.V2IPv4, workload.Ones}} {
		fn := filepath.Join(t.TempDir(), "compressed.pcapng")
		f, err := os.Create(fn)
		require.NoError(t, err)
		cfg := emu.DefaultConfig()
		cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.Seed, cfg.Capture = emu.Ring, 3, 40000, 1, f
		cfg.Compress, cfg.Transport, cfg.Pattern, cfg.MTU, cfg.MsgLen = 8, c.tr, c.pat, 512, 4
		res, err := emu.Run(cfg)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.True(t, res.Exact)

		var want []string
		r, err := pcapio.Open(fn)
		require.NoError(t, err)
		marked := 0
		for {
			rec, err := r.Next()
			if err == io.EOF {
				break
			}
			require.NoError(t, err)
			line := "|||"
			if p := frames.Describe(0, rec.Data).Compressed; p != nil {
				require.Empty(t, p.Error)
				line = fmt.Sprintf("%d|%d/%d/%d/%d|%.2f", p.Bytes, p.Classes[0], p.Classes[1], p.Classes[2], p.Classes[3], p.Ratio)
				marked++
			}
			want = append(want, line)
		}
		r.Close()
		out, errOut, err := testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-T", "fields", "-E", "separator=|",
			"-e", "inceptionn.len", "-e", "inceptionn.class0", "-e", "inceptionn.class8", "-e", "inceptionn.class16",
			"-e", "inceptionn.class32", "-e", "inceptionn.ratio")
		require.NoError(t, err, errOut)
		require.NotContains(t, errOut, "Lua: Error")
		lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
		require.Len(t, lines, len(want))
		for i, l := range lines {
			c := strings.Split(l, "|")
			got := "|||"
			if c[0] != "" {
				got = fmt.Sprintf("%s|%s/%s/%s/%s|%s", c[0], c[1], c[2], c[3], c[4], c[5])
			}
			require.Equal(t, want[i], got, "%s %s frame %d", c, cfg.Transport, i+1)
		}
		if c.pat == workload.Ones {
			require.Zero(t, marked, "1.0 takes 32 bits: every packet goes as it is, unmarked")
		} else {
			require.Greater(t, marked, 20, "%s: data frames are compressed", c.tr)
		}
		t.Logf("%s %s: %d frames, %d compressed, shown alike", c.tr, c.pat, len(want), marked)
	}

	// A marked payload cut short: tshark flags it, as decode does.
	codec, err := inceptionn.New(10)
	require.NoError(t, err)
	packed, err := codec.AppendPacked(nil, make([]byte, 1024), nil)
	require.NoError(t, err)
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: emu.HostMAC(0), DstMAC: emu.HostMAC(1),
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), TClass: frames.CompressedDSCP << 2, DestQP: 0x12})
	require.NoError(t, err)
	buf := make([]byte, 2048)
	n, err := b.Build(buf, &frames.Packet{Opcode: 10, PSN: 1, RETH: frames.RETHFields{DMALen: 1024}, Payload: packed[:len(packed)-40]})
	require.NoError(t, err)
	fn := filepath.Join(t.TempDir(), "bad.pcap")
	f, err := os.Create(fn)
	require.NoError(t, err)
	w := pcapgo.NewWriter(f)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, 0), CaptureLength: n, Length: n}, buf[:n]))
	require.NoError(t, f.Close())
	require.NotEmpty(t, frames.Describe(0, buf[:n]).Compressed.Error)
	out, errOut, err := testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-T", "fields", "-e", "_ws.col.Info", "-e", "_ws.expert")
	require.NoError(t, err, errOut)
	require.Contains(t, out, "[INCEPTIONN BAD: cut in group")
}

// TestLuaDissectorShowsTheAllReduceSwitchHeader: on an AllReduce-Switch
// capture (--switch-program ars) a WRITE FIRST's 20-byte header is the
// INA header and 12 reserved zero bytes (ina.reserved), and the data after
// it is 1004 bytes, as the preference ina.header_len says or, by default,
// as auto finds; forced to 8, tshark reads it as NetReduce's. NetReduce's
// own captures stay 8-byte ones under auto, a tensor of zeros included
// (its first three elements would pass for the reserved bytes).
func TestLuaDissectorShowsTheAllReduceSwitchHeader(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	capture := func(program string, pat workload.Pattern) string {
		fn := filepath.Join(t.TempDir(), "run.pcapng")
		f, err := os.Create(fn)
		require.NoError(t, err)
		cfg := emu.DefaultConfig()
		cfg.Workers, cfg.MsgLen, cfg.MTU, cfg.TensorBytes, cfg.Seed, cfg.Capture = 3, 4, 1024, 10000, 1, f
		cfg.Transport, cfg.SwitchProgram, cfg.Pattern = frames.V1, program, pat
		res, err := emu.Run(cfg)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		require.True(t, res.Exact)
		return fn
	}
	// firsts are the WRITE FIRSTs' ina.reserved, ina.data_len and Info.
	firsts := func(fn string, opts ...string) [][]string {
		args := append([]string{"-X", "lua_script:inaemu.lua"}, opts...)
		args = append(args, "-r", fn, "-Y", "ina", "-T", "fields", "-E", "separator=|",
			"-e", "infiniband.bth.opcode", "-e", "ina.reserved", "-e", "ina.data_len", "-e", "_ws.col.Info")
		out, errOut, err := testtool.Run(t, "tshark", args...)
		require.NoError(t, err, errOut)
		require.NotContains(t, errOut, "Lua: Error")
		var rows [][]string
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			c := strings.Split(l, "|")
			require.Len(t, c, 4, l)
			require.Equal(t, "6", c[0], "only WRITE FIRSTs carry the header (10000 bytes in messages of 4 packets): %s", l)
			rows = append(rows, c[1:])
		}
		// 10000 bytes in messages of 4×1024-20 = 4076 bytes: three
		// messages, each first packet into and out of the switch.
		require.Len(t, rows, 3*3*2, out)
		return rows
	}

	ars := capture("ars", workload.Random)
	for _, opts := range [][]string{nil, {"-o", "ina.header_len:auto"}, {"-o", "ina.header_len:20"}} {
		for _, r := range firsts(ars, opts...) {
			require.Equal(t, "000000000000000000000000", r[0], "%v: the 12 reserved bytes: %v", opts, r)
			require.Equal(t, "1004", r[1], "%v: 1024-byte payload, 20-byte header: %v", opts, r)
			require.Contains(t, r[2], "hdr=20]", "%v", opts)
		}
	}
	for _, r := range firsts(ars, "-o", "ina.header_len:8") {
		require.Equal(t, []string{"", "1016"}, r[:2], "read as NetReduce's: %v", r)
		require.NotContains(t, r[2], "hdr=")
	}

	for _, pat := range []workload.Pattern{workload.Random, workload.Zeros} {
		fn := capture("", pat)
		for _, r := range firsts(fn) {
			require.Equal(t, []string{"", "1016"}, r[:2], "NetReduce %v under auto: %v", pat, r)
		}
	}
}

// INA-PS frames (EtherType 0x0700: ATP's layout with ESA's priority)
// decode field by field, a reminder and an ACK named as such.
func TestLuaDissectorShowsINAPSFrames(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	fn := filepath.Join(t.TempDir(), "inaps.pcap")
	f, err := os.Create(fn)
	require.NoError(t, err)
	w := pcapgo.NewWriter(f)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	for i, flags := range []uint8{0x68, 0x06, 0x01} {
		x := &frames.INAPS{Bitmap: 1 << 2, FanIn: 8, Flags: flags, Job: 3, Seq: uint16(1 + i), Aggregator: 19999, Priority: 200, Level: 1,
			Key: 0x100000007, TensorLength: 65536}
		x.Values[0], x.Values[1], x.Values[61] = 1, -1, 0x7fffffff
		buf := gopacket.NewSerializeBuffer()
		require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
			&layers.Ethernet{SrcMAC: []byte{2, 0x1a, 0xe0, 0, 0, 2}, DstMAC: []byte{2, 0x1a, 0xe0, 0, 0, 3}, EthernetType: frames.EtherTypeINAPS},
			&layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: 254, SrcIP: []byte{10, 0, 0, 2}, DstIP: []byte{10, 0, 0, 3}}, x))
		require.Len(t, buf.Bytes(), 308)
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, int64(i)*1000), CaptureLength: 308, Length: 308}, buf.Bytes()))
	}
	// The reliable channel (UDP port 4792): a gradient retransmission, a
	// parameter and an ACK, built by hand as channel.go lays them out.
	for i, c := range []struct {
		kind     uint8
		seq, ack uint32
		flags    uint8
		bitmap   uint32
	}{{1, 5, 3, 0, 1 << 1}, {7, 9, 6, 0x01, 0x7}, {0x80, 6, 10, 0, 0}} {
		pay := []byte{c.kind, 0, 0, 0, 0, 0, 0, 0, 0, 0}
		binary.BigEndian.PutUint32(pay[2:], c.seq)
		binary.BigEndian.PutUint32(pay[6:], c.ack)
		if c.kind != 0x80 {
			x := &frames.INAPS{Bitmap: c.bitmap, FanIn: 3, Flags: c.flags, Job: 2, Seq: 17, Aggregator: 7, Key: 4, TensorLength: 12400}
			x.Values[0], x.Values[61] = -5, 42
			h := gopacket.NewSerializeBuffer()
			require.NoError(t, x.SerializeTo(h, gopacket.SerializeOptions{}))
			pay = append(pay, h.Bytes()...)
		}
		buf := gopacket.NewSerializeBuffer()
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Protocol: layers.IPProtocolUDP, SrcIP: []byte{10, 0, 0, 2}, DstIP: []byte{10, 0, 0, 4}}
		udp := &layers.UDP{SrcPort: 4792, DstPort: 4792}
		require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true},
			&layers.Ethernet{SrcMAC: []byte{2, 0x1a, 0xe0, 0, 0, 2}, DstMAC: []byte{2, 0x1a, 0xe0, 0, 0, 4}, EthernetType: layers.EthernetTypeIPv4},
			ip, udp, gopacket.Payload(pay)))
		b := buf.Bytes()
		if len(b) < 60 {
			b = append(b, make([]byte, 60-len(b))...) // the minimum frame, as channel.go pads an ACK
		}
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(0, int64(3+i)*1000), CaptureLength: len(b), Length: len(b)}, b))
	}
	require.NoError(t, f.Close())
	out, errOut, err := testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-Y", "eth.type == 0x0700", "-T", "fields", "-E", "separator=|",
		"-e", "inaps.bitmap", "-e", "inaps.fanin", "-e", "inaps.flags.psindex", "-e", "inaps.flags.ecn", "-e", "inaps.job", "-e", "inaps.seq",
		"-e", "inaps.aggregator", "-e", "inaps.priority", "-e", "inaps.key", "-e", "inaps.tensor_len", "-e", "ip.dst", "-e", "_ws.col.Info")
	require.NoError(t, err, errOut)
	require.NotContains(t, errOut, "Lua: Error")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	for i, want := range []string{
		"0x00000004|8|3|1|3|1|19999|200|0x0000000100000007|65536|10.0.0.3|INA-PS gradient job=3 seq=1 agg=19999 bitmap=0x4",
		"0x00000004|8|0|0|3|2|19999|200|0x0000000100000007|65536|10.0.0.3|INA-PS reminder job=3 seq=2 agg=19999 bitmap=0x4",
		"0x00000004|8|0|0|3|3|19999|200|0x0000000100000007|65536|10.0.0.3|INA-PS ACK job=3 seq=3 agg=19999 bitmap=0x4",
	} {
		require.Equal(t, want, lines[i], "frame %d", i+1)
	}
	// The channel's frames: their own header, then the INA-PS header's
	// fields (none for an ACK), and an Info line naming both.
	out, errOut, err = testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-Y", "inaps_chan", "-T", "fields", "-E", "separator=|",
		"-e", "inaps_chan.kind", "-e", "inaps_chan.seq", "-e", "inaps_chan.ack", "-e", "inaps.bitmap", "-e", "inaps.flags", "-e", "inaps.job",
		"-e", "inaps.seq", "-e", "inaps.key", "-e", "_ws.col.Protocol", "-e", "_ws.col.Info")
	require.NoError(t, err, errOut)
	require.NotContains(t, errOut, "Lua: Error")
	lines = strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 3, out)
	for i, want := range []string{
		"1|5|3|0x00000002|0x00|2|17|0x0000000000000004|INA-PS|channel gradient job 2 seq 17 (#5, ack 3)",
		"7|9|6|0x00000007|0x01|2|17|0x0000000000000004|INA-PS|channel parameter job 2 seq 17 (#9, ack 6)",
		"128|6|10||||||INA-PS|channel ack (#6, ack 10)",
	} {
		require.Equal(t, want, lines[i], "channel frame %d", i+1)
	}
	named, errOut, err := testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-Y", "inaps_chan.kind == 7", "-V")
	require.NoError(t, err, errOut)
	require.Contains(t, named, "Kind: parameter (7)", "the kind's name from its value_string")
	require.Contains(t, named, "INA-PS header (ATP, ESA)", "the embedded header, dissected")
	// A Lua error lands in the tree, not on stderr.
	full, errOut, err := testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-V")
	require.NoError(t, err, errOut)
	require.NotContains(t, full, "Lua Error")
	require.Contains(t, full, "INA-PS header (ATP, ESA)")
	// The 62 values, in order.
	vals, errOut, err := testtool.Run(t, "tshark", "-X", "lua_script:inaemu.lua", "-r", fn, "-c", "1", "-T", "fields", "-e", "inaps.value")
	require.NoError(t, err, errOut)
	v := strings.Split(strings.TrimSpace(vals), ",")
	require.Len(t, v, 62)
	require.Equal(t, []string{"1", "-1", "0"}, v[:3])
	require.Equal(t, "2147483647", v[61])
}
