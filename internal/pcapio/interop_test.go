package pcapio_test

// Captures of every link type pcapio reads, made by software nobody on
// this project wrote (scapy, mergecap, editcap, dumpcap) and read back by
// tshark as well: every value the Ethernet frame Next hands out is
// compared with the original frame and with what tshark sees.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
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

	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/testtool"
)

// needWiresharkTool skips (under CI: fails) the test when one of the
// tools that come with tshark (editcap, mergecap, dumpcap) is missing.
func needWiresharkTool(t *testing.T, name string) {
	t.Helper()
	if _, err := exec.LookPath(name); err != nil {
		testtool.Require(t, "interop", fmt.Errorf("%s not installed (it comes with tshark: %s)", name, testtool.Hints["tshark"]))
	}
}

// golden is the repository's capture the interop tests convert: RoCE
// frames on two interfaces of a pcapng, as the emulator writes them.
const golden = "../../testdata/check/psn_order.pcapng"

func goldenRecords(t *testing.T) []pcapio.Record {
	t.Helper()
	recs, err := pcapio.ReadAll(golden)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(recs), 8)
	return recs
}

// scapyRelink writes the frames of a capture again with another link
// type, as tcpdump -i any (SLL, SLL2) or a raw-IP capture would have
// recorded them: scapy's CookedLinux and CookedLinuxV2 layers make the
// cooked header, with the frame's source MAC as the address and the
// packet type cycling through host (0), outgoing (4) and otherhost (3).
const scapyRelink = `
import sys
from scapy.all import rdpcap
from scapy.layers.l2 import CookedLinux, CookedLinuxV2
from scapy.utils import PcapWriter
kind, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
lt = {"sll": 113, "sll2": 276, "raw": 101}[kind]
w = PcapWriter(dst, linktype=lt, sync=True)
w.write_header(None)
for i, p in enumerate(rdpcap(src)):
    raw = bytes(p)
    mac, proto, body = raw[6:12], int.from_bytes(raw[12:14], "big"), raw[14:]
    pkttype = (0, 4, 3)[i % 3]
    if kind == "sll":
        hdr = bytes(CookedLinux(pkttype=pkttype, lladdrtype=1, lladdrlen=6, src=mac + b"\0\0", proto=proto))
    elif kind == "sll2":
        hdr = bytes(CookedLinuxV2(proto=proto, ifindex=7, lladdrtype=1, pkttype=pkttype, lladdrlen=6, src=mac + b"\0\0"))
    else:
        hdr = b""
    w.write_packet(hdr + body, sec=int(p.time), usec=int(round((p.time - int(p.time)) * 1e6)))
w.close()
`

// tsharkFields is what tshark reads of each frame of a file.
func tsharkFields(t *testing.T, path string, fields ...string) [][]string {
	t.Helper()
	args := []string{"-r", path, "-T", "fields", "-E", "occurrence=f"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, errOut, err := testtool.Run(t, "tshark", args...)
	require.NoError(t, err, errOut)
	var rows [][]string
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		rows = append(rows, strings.Split(line, "\t"))
	}
	return rows
}

// TestScapyLinkTypes: the golden capture rewritten by scapy as Linux
// cooked SLL, SLL2 and raw IP reads as the golden's own frames, with the
// cooked header's address as source MAC and a zero destination MAC, and
// every value agrees with tshark's reading of scapy's file.
func TestScapyLinkTypes(t *testing.T) {
	testtool.Need(t, "scapy", testtool.HaveScapy)
	testtool.Need(t, "tshark", testtool.HaveTshark)
	orig := goldenRecords(t)
	for _, c := range []struct {
		kind string
		lt   layers.LinkType
		hdr  int
	}{{"sll", layers.LinkTypeLinuxSLL, 16}, {"sll2", layers.LinkTypeLinuxSLL2, 20}, {"raw", layers.LinkTypeRaw, 0}} {
		t.Run(c.kind, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), c.kind+".pcap")
			_, errOut, err := testtool.Run(t, testtool.SystemPython, "-c", scapyRelink, c.kind, golden, path)
			require.NoError(t, err, errOut)
			recs, err := pcapio.ReadAll(path)
			require.NoError(t, err)
			require.Len(t, recs, len(orig))
			shark := tsharkFields(t, path, "frame.len", "frame.cap_len", "sll.pkttype", "sll.etype", "sll.src.eth", "ip.version")
			require.Len(t, shark, len(orig))
			for i, r := range recs {
				o := orig[i]
				assert.Equal(t, c.lt, r.LinkType, "frame %d", i)
				assert.Equal(t, make([]byte, 6), r.Data[0:6], "frame %d: destination MAC", i)
				src := make([]byte, 6)
				if c.hdr > 0 {
					src = o.Data[6:12]
				}
				assert.Equal(t, src, r.Data[6:12], "frame %d: source MAC", i)
				assert.Equal(t, o.Data[12:], r.Data[12:], "frame %d: EtherType and payload", i)
				assert.Equal(t, o.Info.Length, r.Info.Length, "frame %d", i)
				assert.Equal(t, o.Info.CaptureLength, r.Info.CaptureLength, "frame %d", i)
				assert.False(t, r.Snapped(), "frame %d", i)
				assert.InDelta(t, 0, r.Info.Timestamp.Sub(o.Info.Timestamp), float64(time.Microsecond), "frame %d", i)

				f := shark[i]
				wireLen, _ := strconv.Atoi(f[0])
				capLen, _ := strconv.Atoi(f[1])
				assert.Equal(t, wireLen-c.hdr+14, r.Info.Length, "frame %d: tshark's frame.len", i)
				assert.Equal(t, capLen-c.hdr+14, r.Info.CaptureLength, "frame %d: tshark's frame.cap_len", i)
				etherType := fmt.Sprintf("0x%04x", binary.BigEndian.Uint16(r.Data[12:14]))
				if c.hdr == 0 {
					assert.Equal(t, "4", f[5], "frame %d: tshark's ip.version", i)
					assert.Equal(t, "0x0800", etherType, "frame %d", i)
					assert.Zero(t, r.PacketType, "frame %d", i)
					continue
				}
				assert.Equal(t, f[2], strconv.Itoa(int(r.PacketType)), "frame %d: tshark's sll.pkttype", i)
				assert.Equal(t, []layers.LinuxSLLPacketType{0, 4, 3}[i%3], r.PacketType, "frame %d", i)
				assert.Equal(t, f[3], etherType, "frame %d: tshark's sll.etype", i)
				assert.Equal(t, f[4], net.HardwareAddr(r.Data[6:12]).String(), "frame %d: tshark's sll.src.eth", i)
			}
		})
	}
}

// sllCapture writes recs, Ethernet frames, as a classic pcap of Linux
// cooked (SLL) frames received by the host, the cooked header laid out
// here from the tcpdump.org page.
func sllCapture(t *testing.T, recs []pcapio.Record) []byte {
	t.Helper()
	var b bytes.Buffer
	w := pcapgo.NewWriterNanos(&b)
	require.NoError(t, w.WriteFileHeader(262144, layers.LinkTypeLinuxSLL))
	for _, r := range recs {
		h := []byte{0, 0, 0, 1, 0, 6} // host, ARPHRD_ETHER, a 6-byte address,
		h = append(h, r.Data[6:12]...)
		h = append(h, 0, 0)             // padded to 8,
		h = append(h, r.Data[12:14]...) // protocol
		data := append(h, r.Data[14:]...)
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: r.Info.Timestamp, CaptureLength: len(data), Length: r.Info.Length + 2}, data))
	}
	return b.Bytes()
}

// TestMergecapMixedLinkTypes: mergecap puts the golden pcapng (Ethernet,
// two interfaces) and a Linux cooked capture of the same frames into one
// pcapng whose interfaces differ in link type; every frame of both reads,
// each as its interface's link type says.
func TestMergecapMixedLinkTypes(t *testing.T) {
	needWiresharkTool(t, "mergecap")
	orig := goldenRecords(t)
	dir := t.TempDir()
	cooked := filepath.Join(dir, "any.pcap")
	require.NoError(t, os.WriteFile(cooked, sllCapture(t, orig), 0o644))
	mixed := filepath.Join(dir, "mixed.pcapng")
	_, errOut, err := testtool.Run(t, "mergecap", "-F", "pcapng", "-w", mixed, golden, cooked)
	require.NoError(t, err, errOut)

	recs, names, err := pcapio.ReadAllNamed(mixed)
	require.NoError(t, err)
	require.Len(t, recs, 2*len(orig))
	_, origNames, err := pcapio.ReadAllNamed(golden)
	require.NoError(t, err)
	require.Len(t, names, len(origNames)+1, "the golden's interfaces and the cooked capture's: %q", names)
	var eth, sll []pcapio.Record
	for _, r := range recs {
		switch r.LinkType {
		case layers.LinkTypeEthernet:
			eth = append(eth, r)
		case layers.LinkTypeLinuxSLL:
			sll = append(sll, r)
			assert.Equal(t, len(origNames), r.Info.InterfaceIndex)
		default:
			t.Fatalf("link type %v", r.LinkType)
		}
	}
	require.Len(t, eth, len(orig))
	require.Len(t, sll, len(orig))
	for i, o := range orig {
		assert.Equal(t, o.Data, eth[i].Data, "frame %d", i)
		assert.Equal(t, o.Comments, eth[i].Comments, "frame %d", i)
		assert.Equal(t, names[eth[i].Info.InterfaceIndex], origNames[o.Info.InterfaceIndex], "frame %d", i)
		assert.Equal(t, make([]byte, 6), sll[i].Data[:6], "frame %d", i)
		assert.Equal(t, o.Data[6:], sll[i].Data[6:], "frame %d", i)
		assert.Equal(t, o.Info.Length, sll[i].Info.Length, "frame %d", i)
		assert.Equal(t, o.Info.Timestamp, sll[i].Info.Timestamp, "frame %d", i)
	}
}

// TestEditcapSnaplen: editcap -s 60 cuts every frame to 60 bytes of its
// link type's framing; each longer frame is Snapped, with its original
// length, and the bytes kept are the original's.
func TestEditcapSnaplen(t *testing.T) {
	needWiresharkTool(t, "editcap")
	orig := goldenRecords(t)
	dir := t.TempDir()
	cooked := filepath.Join(dir, "any.pcap")
	require.NoError(t, os.WriteFile(cooked, sllCapture(t, orig), 0o644))
	for _, c := range []struct {
		src string
		lt  layers.LinkType
		hdr int
	}{{golden, layers.LinkTypeEthernet, 14}, {cooked, layers.LinkTypeLinuxSLL, 16}} {
		t.Run(c.lt.String(), func(t *testing.T) {
			cut := filepath.Join(dir, "cut-"+filepath.Base(c.src))
			_, errOut, err := testtool.Run(t, "editcap", "-s", "60", c.src, cut)
			require.NoError(t, err, errOut)
			recs, err := pcapio.ReadAll(cut)
			require.NoError(t, err)
			require.Len(t, recs, len(orig))
			snapped := 0
			for i, r := range recs {
				o := orig[i]
				assert.Equal(t, c.lt, r.LinkType)
				assert.Equal(t, o.Info.Length, r.Info.Length, "frame %d", i)
				if o.Info.Length-14+c.hdr <= 60 {
					assert.False(t, r.Snapped(), "frame %d", i)
					continue
				}
				snapped++
				assert.True(t, r.Snapped(), "frame %d", i)
				assert.Equal(t, 60-c.hdr+14, r.Info.CaptureLength, "frame %d", i)
				assert.Equal(t, o.Data[6:r.Info.CaptureLength], r.Data[6:], "frame %d", i)
			}
			assert.Positive(t, snapped)
		})
	}
}

// TestLiveCookedCapture: what dumpcap -i any really writes (LINUX_SLL,
// and LINUX_SLL2 with -y) while UDP datagrams go over the loopback reads
// as Ethernet frames holding those datagrams, as tshark reads them too.
// It needs the right to capture (root); under CI it must have it.
func TestLiveCookedCapture(t *testing.T) {
	needWiresharkTool(t, "dumpcap")
	testtool.Need(t, "tshark", testtool.HaveTshark)
	for _, c := range []struct {
		dlt string
		lt  layers.LinkType
		hdr int
	}{{"LINUX_SLL", layers.LinkTypeLinuxSLL, 16}, {"LINUX_SLL2", layers.LinkTypeLinuxSLL2, 20}} {
		t.Run(c.dlt, func(t *testing.T) {
			path := liveCapture(t, c.dlt)
			recs, err := pcapio.ReadAll(path)
			require.NoError(t, err)
			require.NotEmpty(t, recs)
			shark := tsharkFields(t, path, "frame.len", "sll.pkttype", "udp.payload")
			require.Len(t, shark, len(recs))
			for i, r := range recs {
				assert.Equal(t, c.lt, r.LinkType, "frame %d", i)
				assert.False(t, r.Snapped(), "frame %d", i)
				assert.Contains(t, []layers.LinuxSLLPacketType{layers.LinuxSLLPacketTypeHost, layers.LinuxSLLPacketTypeOutgoing}, r.PacketType, "frame %d", i)
				p := gopacket.NewPacket(r.Data, layers.LayerTypeEthernet, gopacket.Default)
				ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
				udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
				require.NotNil(t, ip, "frame %d: %v", i, p)
				require.NotNil(t, udp, "frame %d: %v", i, p)
				assert.Equal(t, "127.0.0.1", ip.DstIP.String(), "frame %d", i)
				assert.True(t, strings.HasPrefix(string(udp.Payload), "pcapio live "), "frame %d: %q", i, udp.Payload)
				assert.Equal(t, 14+20+8+len(udp.Payload), r.Info.Length, "frame %d", i)
				assert.Equal(t, make([]byte, 6), r.Data[6:12], "frame %d: the loopback's address", i)

				f := shark[i]
				wireLen, _ := strconv.Atoi(f[0])
				assert.Equal(t, wireLen-c.hdr+14, r.Info.Length, "frame %d: tshark's frame.len", i)
				assert.Equal(t, f[1], strconv.Itoa(int(r.PacketType)), "frame %d: tshark's sll.pkttype", i)
				assert.Equal(t, f[2], hex.EncodeToString(udp.Payload), "frame %d: tshark's udp.payload", i)
			}
		})
	}
}

// liveCapture runs dumpcap on the "any" interface with link type dlt
// while this process sends UDP datagrams to itself over the loopback,
// until dumpcap has 4 of them, and returns the capture's path.
func liveCapture(t *testing.T, dlt string) string {
	t.Helper()
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	require.NoError(t, err)
	defer rx.Close()
	port := rx.LocalAddr().(*net.UDPAddr).Port
	path := filepath.Join(t.TempDir(), "any.pcapng")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "dumpcap", "-i", "any", "-y", dlt, "-f", fmt.Sprintf("udp dst port %d", port), "-c", "4", "-a", "duration:50", "-w", path)
	stderr, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	// dumpcap says "Capturing on 'any'" once it captures, or why it cannot.
	var said strings.Builder
	sc := bufio.NewScanner(stderr)
	ready := false
	for !ready && sc.Scan() {
		said.WriteString(sc.Text() + "\n")
		ready = strings.HasPrefix(sc.Text(), "Capturing on")
	}
	if !ready {
		werr := cmd.Wait()
		testtool.Require(t, "live capture", fmt.Errorf("dumpcap -i any cannot capture here (%v): %s", werr, strings.TrimSpace(said.String())))
	}
	done := make(chan error, 1)
	go func() {
		for sc.Scan() { // keep reading what dumpcap says, so it never blocks on it
			said.WriteString(sc.Text() + "\n")
		}
		done <- cmd.Wait()
	}()
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	require.NoError(t, err)
	defer tx.Close()
	// Send until dumpcap has its count: it may miss the first datagrams
	// while it finishes opening the socket. This waits on a real process;
	// it asserts nothing about time.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ; i++ {
		_, err := tx.Write([]byte(fmt.Sprintf("pcapio live %d", i)))
		require.NoError(t, err)
		select {
		case err := <-done:
			require.NoError(t, err, said.String())
			return path
		case <-ctx.Done():
			t.Fatalf("dumpcap did not capture 4 datagrams: %s", said.String())
		case <-tick.C:
		}
	}
}

// scapyComments prints, for each packet of a pcapng, its comment as
// scapy reads it: hex, "-" for none. scapy up to 2.6 has one comment per
// packet (Packet.comment); later ones a list (Packet.comments).
const scapyComments = `
import sys
from scapy.all import rdpcap
for p in rdpcap(sys.argv[1]):
    c = getattr(p, "comments", None) or p.comment
    if isinstance(c, list):
        c = c[-1] if c else None
    print(c.hex() if c else "-")
`

// TestScapyReadsComments: scapy reads the packet comments of a capture
// written by Writer as the texts Writer was given, every one of them, and
// warns of none; tshark reads each as that text and the line feed the
// Writer ends it with. scapy 2.5 had dropped every comment inaemu wrote
// ("PcapNg: invalid comment option": it takes a comment for the text
// before its line feed, and inaemu's had none).
func TestScapyReadsComments(t *testing.T) {
	testtool.Need(t, "scapy", testtool.HaveScapy)
	testtool.Need(t, "tshark", testtool.HaveTshark)
	given := []string{
		pcapio.FaultComment("loss", "", 0, true),
		"",
		pcapio.FaultComment("drop", `drop port=0 dir=in class=data nth=2`, 0, true),
		pcapio.FaultComment("delay,duplicate", `delay=20us qp=0x11 psn=5 every=3 prob=50%`, 2300*time.Nanosecond, false),
		"x", "xy", "xyz", "wxyz", // every padding
		"µs — ünïcode",
		"",
	}
	path := filepath.Join(t.TempDir(), "comments.pcapng")
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, "port0-in", "port0-out")
	require.NoError(t, err)
	frame := make([]byte, 61) // not a multiple of 4: the comment follows padding
	for i, c := range given {
		var cs []string
		if c != "" {
			cs = append(cs, c)
		}
		require.NoError(t, w.WriteIndex(i%2, int64(i)*1000, frame, cs...))
	}
	require.NoError(t, w.Flush())
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))

	out, errOut, err := testtool.Run(t, testtool.SystemPython, "-c", scapyComments, path)
	require.NoError(t, err, errOut)
	assert.NotContains(t, errOut, "comment", "scapy's warnings")
	got := strings.Fields(out)
	require.Len(t, got, len(given), "scapy's packets")
	for i, c := range given {
		if c == "" {
			assert.Equal(t, "-", got[i], "frame %d has no comment", i+1)
			continue
		}
		b, err := hex.DecodeString(got[i])
		require.NoError(t, err)
		// scapy 2.5 gives the line, later versions the line and its end.
		assert.Equal(t, c, strings.TrimSuffix(string(b), "\n"), "frame %d's comment as scapy reads it", i+1)
	}

	// tshark: every comment, as written.
	js, errOut, err := testtool.Run(t, "tshark", "-r", path, "-T", "json", "-e", "frame.comment")
	require.NoError(t, err, errOut)
	var frames []struct {
		Source struct {
			Layers struct {
				Comment []string `json:"frame.comment"`
			} `json:"layers"`
		} `json:"_source"`
	}
	require.NoError(t, json.Unmarshal([]byte(js), &frames))
	require.Len(t, frames, len(given), "tshark's packets")
	for i, c := range given {
		var want []string
		if c != "" {
			want = []string{c + "\n"}
		}
		assert.Equal(t, want, frames[i].Source.Layers.Comment, "frame %d's comment as tshark reads it", i+1)
	}

	// pcapio reads the texts as given.
	recs, err := pcapio.ReadAll(path)
	require.NoError(t, err)
	for i, c := range given {
		var want []string
		if c != "" {
			want = []string{c}
		}
		assert.Equal(t, want, recs[i].Comments, "frame %d", i+1)
	}
}
