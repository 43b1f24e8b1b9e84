package pcapio_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/testtool"
)

// handIDB is a pcapng file written by hand from the pcapng draft
// (draft-ietf-opsawg-pcapng §4.1, §4.2, §4.3), little-endian: a Section
// Header Block, an interface stating its link (if_speed 100 Gb/s and the
// description "inaemu: link-delay=1.5us") among options a reader must skip
// (if_os, and code 0xfe, which the draft does not define), an interface
// stating nothing, and one Enhanced Packet Block on interface 0.
var handIDB = strings.Join([]string{
	// SHB: type, length 28, byte-order magic, version 1.0, section length -1, length
	"0a0d0d0a 1c000000 4d3c2b1a 0100 0000 ffffffffffffffff 1c000000",
	// IDB: type 1, length 104, LinkType 1 (Ethernet), reserved, snaplen 0
	"01000000 68000000 0100 0000 00000000",
	"0200 0800 706f7274302d696e",                                              // if_name (2), 8: "port0-in"
	"0c00 0500 4c696e7578 000000",                                             // if_os (12), 5: "Linux", padded
	"0300 1800 696e61656d753a206c696e6b2d64656c61793d312e357573",              // if_description (3), 24
	"0800 0800 00e8764817000000",                                              // if_speed (8), 8: 100000000000 = 0x17_4876_e800
	"fe00 0300 aabbcc 00",                                                     // code 0xfe, 3 bytes, padded
	"0900 0100 09 000000",                                                     // if_tsresol (9): 10^-9
	"0000 0000 68000000",                                                      // opt_endofopt, length
	"01000000 28000000 0100 0000 00000000",                                    // IDB 2, length 40
	"0200 0900 706f7274302d6f7574 000000 0000 0000 28000000",                  // if_name "port0-out", end, length
	"06000000 5c000000 00000000 00000000 e8030000 3c000000 3c000000",          // EPB: length 92, interface 0, ts 1000 ns, 60 of 60 bytes
	"000000000000 000000000000 0800" + strings.Repeat("00", 46) + " 5c000000", // the frame, length
}, " ")

func handIDBBytes(t *testing.T) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(handIDB, " ", ""))
	require.NoError(t, err)
	return b
}

// readLinks reads every record of a reader and returns its interfaces.
func readLinks(t *testing.T, r *pcapio.Reader) []pcapio.Interface {
	t.Helper()
	n := 0
	for {
		_, err := r.Next()
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
		n++
	}
	require.Equal(t, 1, n)
	return r.InterfaceLinks()
}

// TestInterfaceLinksHandBuilt: both read paths (the plain path for a
// file, pcapgo's for a stream) take if_speed and the link-delay
// description from the hand-built blocks, skip the options they do not
// know, and leave the interface that states nothing unknown.
func TestInterfaceLinksHandBuilt(t *testing.T) {
	b := handIDBBytes(t)
	want := []pcapio.Interface{
		{Name: "port0-in", Speed: 100_000_000_000, Delay: 1500 * time.Nanosecond, HasDelay: true},
		{Name: "port0-out"},
	}
	path := filepath.Join(t.TempDir(), "hand.pcapng")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	r, err := pcapio.Open(path)
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, want, readLinks(t, r), "plain path")
	assert.Equal(t, []string{"port0-in", "port0-out"}, r.Interfaces())

	s, err := pcapio.NewReader("stream", bytes.NewReader(b))
	require.NoError(t, err)
	assert.Equal(t, want, readLinks(t, s), "pcapgo path")
}

// TestInterfaceLinksDamagedOptions: an if_speed of the wrong length and a
// description that states no delay (or one beyond an hour) leave the
// interface's link unknown; the file still reads.
func TestInterfaceLinksDamagedOptions(t *testing.T) {
	b := handIDBBytes(t)
	// if_speed's length 8 → 4: a 4-byte speed is none (the draft's is 8
	// bytes), and its value's other half reads as an option of code 0x17
	// and length 0, which every reader skips.
	i := bytes.Index(b, []byte{0x08, 0x00, 0x08, 0x00, 0x00, 0xe8})
	require.Positive(t, i)
	b[i+2] = 4
	j := bytes.Index(b, []byte("1.5us"))
	copy(b[j:], "2h0ms") // more than maxLinkDelay (an hour)
	path := filepath.Join(t.TempDir(), "bad.pcapng")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	r, err := pcapio.Open(path)
	require.NoError(t, err)
	defer r.Close()
	for {
		_, err := r.Next()
		if err != nil {
			break
		}
	}
	links := r.InterfaceLinks()
	require.NotEmpty(t, links)
	assert.Zero(t, links[0].Speed)
	assert.False(t, links[0].HasDelay)
}

// TestLinkDelayText: the description a writer states a delay with, and
// the forms a reader accepts.
func TestLinkDelayText(t *testing.T) {
	assert.Equal(t, "inaemu: link-delay=1000ns", pcapio.LinkDelayDescription(time.Microsecond))
	for text, want := range map[string]time.Duration{
		"inaemu: link-delay=0ns":                   0,
		"inaemu: link-delay=1234ns":                1234,
		"inaemu: link-delay=1µs":                   time.Microsecond,
		"inaemu: link-delay=2.5us and more":        2500,
		"uplink to spine0\ninaemu: link-delay=3ms": 3 * time.Millisecond,
	} {
		d, ok := pcapio.LinkDelay(text)
		assert.True(t, ok, text)
		assert.Equal(t, want, d, text)
	}
	for _, text := range []string{"", "eth0", "inaemu: link-delay=", "inaemu: link-delay=-1ns", "inaemu: link-delay=5", "inaemu: link-delay=61m"} {
		_, ok := pcapio.LinkDelay(text)
		assert.False(t, ok, text)
	}
}

// TestInterfaceWriterBytes: interfaces that state nothing are written as
// NewCommentedWriter writes them, byte for byte; one that states its
// link gets the Interface Description Block the pcapng draft lays out,
// compared with blocks built here field by field.
func TestInterfaceWriterBytes(t *testing.T) {
	frame := make([]byte, 60)
	frame[12] = 0x08
	write := func(mk func(io.Writer) (*pcapio.Writer, error)) []byte {
		var buf bytes.Buffer
		w, err := mk(&buf)
		require.NoError(t, err)
		require.NoError(t, w.WriteIndex(1, 1000, frame))
		require.NoError(t, w.WriteIndex(0, 2000, frame, "note"))
		require.NoError(t, w.Flush())
		return buf.Bytes()
	}
	plain := write(func(o io.Writer) (*pcapio.Writer, error) {
		return pcapio.NewCommentedWriter(o, "inaemu: switch-program=ars", "a-in", "a-out")
	})
	same := write(func(o io.Writer) (*pcapio.Writer, error) {
		return pcapio.NewInterfaceWriter(o, "inaemu: switch-program=ars", pcapio.Interface{Name: "a-in"}, pcapio.Interface{Name: "a-out"})
	})
	assert.Equal(t, plain, same)

	linked := write(func(o io.Writer) (*pcapio.Writer, error) {
		return pcapio.NewInterfaceWriter(o, "inaemu: switch-program=ars",
			pcapio.Interface{Name: "a-in", Speed: 25_000_000_000, Delay: 1500, HasDelay: true},
			pcapio.Interface{Name: "a-out", Speed: 40_000_000_000})
	})
	// The blocks of the two: the Section Header Block first, the same.
	blocks := func(b []byte) [][]byte {
		var out [][]byte
		for len(b) >= 12 {
			n := int(binary.LittleEndian.Uint32(b[4:]))
			out = append(out, b[:n])
			b = b[n:]
		}
		return out
	}
	pb, lb := blocks(plain), blocks(linked)
	require.Len(t, lb, 5)
	assert.Equal(t, pb[0], lb[0], "Section Header Block")
	assert.Equal(t, pb[3:], lb[3:], "packet blocks")
	idb := func(parts ...string) []byte {
		b, err := hex.DecodeString(strings.ReplaceAll(strings.Join(parts, ""), " ", ""))
		require.NoError(t, err)
		return b
	}
	assert.Equal(t, idb("01000000 54000000 0100 0000 00000000", // length 84
		"0200 0400 612d696e", // if_name "a-in"
		"0300 1900 696e61656d753a206c696e6b2d64656c61793d313530306e73 000000", // "inaemu: link-delay=1500ns" (25 bytes)
		"0800 0800 00ba1dd2 05000000",                                         // if_speed 25e9 = 0x5_d21d_ba00
		"0900 0100 09000000 0000 0000 54000000"), lb[1])
	assert.Equal(t, idb("01000000 38000000 0100 0000 00000000", // length 56
		"0200 0500 612d6f7574 000000", // if_name "a-out"
		"0800 0800 00902f50 09000000", // if_speed 40e9 = 0x9_502f_9000
		"0900 0100 09000000 0000 0000 38000000"), lb[2])

	path := filepath.Join(t.TempDir(), "linked.pcapng")
	require.NoError(t, os.WriteFile(path, linked, 0o644))
	recs, names, err := pcapio.ReadAllNamed(path)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	assert.Equal(t, []string{"a-in", "a-out"}, names)
	assert.Equal(t, []string{"note"}, recs[1].Comments)
}

// TestInterfaceLinksWireshark: tshark and capinfos read a capture whose
// interfaces state their links as any other (frames on their named
// interfaces), show the delay as the interface's description, and
// capinfos the rate as its speed.
func TestInterfaceLinksWireshark(t *testing.T) {
	needWiresharkTool(t, "capinfos")
	var buf bytes.Buffer
	w, err := pcapio.NewInterfaceWriter(&buf, "",
		pcapio.Interface{Name: "port0-in", Speed: 100_000_000_000, Delay: time.Microsecond, HasDelay: true},
		pcapio.Interface{Name: "port0-out", Speed: 25_000_000_000, Delay: 1500, HasDelay: true})
	require.NoError(t, err)
	frame := make([]byte, 60)
	frame[12] = 0x08
	require.NoError(t, w.WriteIndex(0, 1000, frame))
	require.NoError(t, w.WriteIndex(1, 2000, frame))
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "links.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))

	rows := tsharkFields(t, path, "frame.interface_name", "frame.interface_description")
	assert.Equal(t, [][]string{{"port0-in", "inaemu: link-delay=1000ns"}, {"port0-out", "inaemu: link-delay=1500ns"}}, rows)

	out, errOut, err := testtool.Run(t, "capinfos", path)
	require.NoError(t, err, errOut)
	// capinfos prints each interface's options in turn.
	in0, in1, ok := strings.Cut(out, "Interface #1 info:")
	require.True(t, ok, out)
	assert.Contains(t, in0, "Speed = 100000000000")
	assert.Contains(t, in0, "Description = inaemu: link-delay=1000ns")
	assert.Contains(t, in1, "Speed = 25000000000")
	assert.Contains(t, in1, "Description = inaemu: link-delay=1500ns")
}
