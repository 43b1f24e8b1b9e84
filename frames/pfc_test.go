package frames_test

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
)

// pfcHex is a PFC frame written out by hand from IEEE 802.3 Annex 31D
// (802.1Qbb): switch 0 port 3 pauses priority 3 for 0xffff quanta and
// priority 5 for 256.
var pfcHex = strings.Join([]string{
	"0180c2000001 021ae1000003 8808", // MAC Control multicast, the port's MAC, EtherType
	"0101",                           // opcode: PFC
	"0028",                           // priority-enable vector: reserved 0, e3 and e5
	"0000 0000 0000 ffff 0000 0100 0000 0000", // time[0..7]
	strings.Repeat("00", 26),                  // padding to 60 bytes
}, "")

var (
	pfcSrc    = [6]byte{0x02, 0x1a, 0xe1, 0x00, 0x00, 0x03}
	pfcQuanta = [8]uint16{3: 0xffff, 5: 0x0100}
)

func pfcFrame(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(pfcHex, " ", ""))
	require.NoError(t, err)
	require.Len(t, b, 60, "the minimum frame, 64 bytes less the FCS")
	return b
}

// BuildPFC and AppendPFC write the hand-written frame byte for byte, and
// ParsePFC reads its fields back.
func TestPFCBuildMatchesTheStandardsLayout(t *testing.T) {
	want := pfcFrame(t)
	buf := make([]byte, 100)
	for i := range buf {
		buf[i] = 0xAA // padding must be cleared, not left
	}
	n := frames.BuildPFC(buf, pfcSrc, 0x28, [8]uint16{1: 7, 3: 0xffff, 5: 0x0100}) // time[1] not enabled: written 0
	assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(buf[:n]))
	assert.Equal(t, hex.EncodeToString(want), hex.EncodeToString(frames.AppendPFC(nil, pfcSrc, 0x28, pfcQuanta)))

	en, q, ok := frames.ParsePFC(want)
	require.True(t, ok)
	assert.Equal(t, uint8(0x28), en)
	assert.Equal(t, pfcQuanta, q)
	_, _, ok = frames.ParsePFC(append(append([]byte{}, want...), 1, 2, 3, 4)) // with its FCS
	assert.True(t, ok)
}

// Anything but a well-formed PFC frame is refused.
func TestParsePFCRefusesMalformed(t *testing.T) {
	cases := map[string]func(b []byte) []byte{
		"802.3x PAUSE opcode": func(b []byte) []byte { b[15] = 0x01; b[14] = 0; return b },
		"EtherType":           func(b []byte) []byte { b[13] = 0x00; return b },
		"reserved high octet": func(b []byte) []byte { b[16] = 0x01; return b },
		"short":               func(b []byte) []byte { return b[:59] },
		"long":                func(b []byte) []byte { return append(b, make([]byte, 10)...) },
		"empty":               func(b []byte) []byte { return nil },
	}
	for name, mut := range cases {
		_, _, ok := frames.ParsePFC(mut(pfcFrame(t)))
		assert.False(t, ok, name)
	}
}

// gopacket decodes the frame by its EtherType, and serializing the layers
// gives the same bytes back.
func TestPFCLayerRoundTrip(t *testing.T) {
	in := pfcFrame(t)
	p := gopacket.NewPacket(in, layers.LayerTypeEthernet, gopacket.Default)
	require.Nil(t, p.ErrorLayer())
	x, ok := p.Layer(frames.LayerTypePFC).(*frames.PFC)
	require.True(t, ok, "layers: %v", p.Layers())
	assert.Equal(t, uint16(0x0028), x.Enable)
	assert.Equal(t, pfcQuanta, x.Quanta)
	assert.Len(t, x.Payload, 26)

	var ls []gopacket.SerializableLayer
	for _, l := range p.Layers() {
		ls = append(ls, l.(gopacket.SerializableLayer))
	}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{}, ls...))
	assert.Equal(t, hex.EncodeToString(in), hex.EncodeToString(buf.Bytes()))

	pause := append([]byte{}, in...)
	pause[14], pause[15] = 0x00, 0x01 // 802.3x PAUSE is not this layer's
	assert.NotNil(t, gopacket.NewPacket(pause, layers.LayerTypeEthernet, gopacket.Default).ErrorLayer())
}

// Parsing a PFC frame allocates nothing.
func TestParsePFCAllocatesNothing(t *testing.T) {
	b := pfcFrame(t)
	buf := make([]byte, frames.PFCFrameLen)
	var sum int
	allocs := testing.AllocsPerRun(100, func() {
		frames.BuildPFC(buf, pfcSrc, 0x28, pfcQuanta)
		en, q, ok := frames.ParsePFC(b)
		if ok {
			sum += int(en) + int(q[3])
		}
	})
	assert.Zero(t, allocs)
	assert.NotZero(t, sum)
}

// TShark's MAC Control dissector reads the hand-written frame as PFC with
// the same fields, and flags nothing in it.
func TestPFCTshark(t *testing.T) {
	needTool(t, "tshark", haveTshark)
	fn := filepath.Join(t.TempDir(), "pfc.pcap")
	fh, err := os.Create(fn)
	require.NoError(t, err)
	w := pcapgo.NewWriter(fh)
	require.NoError(t, w.WriteFileHeader(65536, layers.LinkTypeEthernet))
	b := pfcFrame(t)
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: time.Unix(1700000000, 0), CaptureLength: len(b), Length: len(b)}, b))
	require.NoError(t, fh.Close())

	fields := []string{"eth.dst", "eth.src", "eth.type", "macc.opcode", "macc.cbfc.enbv"}
	for i := range 8 {
		fields = append(fields, "macc.cbfc.pause_time.c"+string(rune('0'+i)))
	}
	fields = append(fields, "_ws.expert.message")
	args := []string{"-r", fn, "-n", "-T", "fields", "-E", "separator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	out, errOut, err := runTool(t, "tshark", args...)
	require.NoError(t, err, "tshark: %s", errOut)
	got := strings.Split(strings.TrimSpace(out), ",")
	require.Len(t, got, len(fields), "tshark: %q", out)
	want := []string{"01:80:c2:00:00:01", "02:1a:e1:00:00:03", "0x8808", "0x0101", "0x0028",
		"0", "0", "0", "65535", "0", "256", "0", "0", ""}
	for i, f := range fields {
		assert.Equal(t, want[i], got[i], f)
	}
}
