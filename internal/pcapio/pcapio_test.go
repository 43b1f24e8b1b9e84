package pcapio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goldens are the repository's captures: pcap and pcapng, with comments,
// several interfaces and sections as the emulator and tshark write them.
func goldens(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "check", "*.pcap*"))
	require.NoError(t, err)
	files = append(files, filepath.Join("..", "..", "testdata", "roce_gbn_drop_psn104.pcapng"))
	require.GreaterOrEqual(t, len(files), 5)
	return files
}

// boundaries are the offsets where a capture's units (file header,
// records, blocks) end, found by a walk independent of the reader, and
// how many frames lie before each.
func boundaries(t *testing.T, data []byte) map[int]int {
	t.Helper()
	b := map[int]int{}
	frames := 0
	switch binary.BigEndian.Uint32(data) {
	case magicPcapng:
		for off := 0; off < len(data); {
			var order binary.ByteOrder = binary.LittleEndian
			if binary.BigEndian.Uint32(data[off+8:]) == 0x1A2B3C4D && binary.BigEndian.Uint32(data[off:]) == blockSHB {
				order = binary.BigEndian
			}
			typ, n := order.Uint32(data[off:]), int(order.Uint32(data[off+4:]))
			require.True(t, n >= 12 && off+n <= len(data), "block at %d", off)
			off += n
			if typ == blockEPB || typ == blockSPB || typ == blockPB {
				frames++
			}
			b[off] = frames
		}
	default:
		var order binary.ByteOrder = binary.LittleEndian
		if m := binary.BigEndian.Uint32(data); m == magicPcapUs || m == magicPcapNs {
			order = binary.BigEndian
		}
		off := 24
		b[off] = 0
		for off < len(data) {
			off += 16 + int(order.Uint32(data[off+8:]))
			frames++
			b[off] = frames
		}
		require.Equal(t, len(data), off)
	}
	return b
}

// readPrefix reads data[:n] to its end, turning a panic into an error the
// test reports with the offset.
func readPrefix(name string, data []byte) (recs []Record, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("PANIC: %v", p)
		}
	}()
	r, err := NewReader(name, bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return recs, nil
		}
		if err != nil {
			return recs, err
		}
		recs = append(recs, rec)
	}
}

// shortened keeps every unit of a large capture but its packet records or
// blocks other than the first four, four from the middle and the last
// four: headers, interfaces and
// statistics blocks stay (a frame may name any interface), and the result
// is a valid capture small enough to cut at every offset.
func shortened(t *testing.T, data []byte) []byte {
	t.Helper()
	if len(data) <= 16<<10 {
		return data
	}
	bounds := boundaries(t, data)
	var ends []int
	for e := range bounds {
		ends = append(ends, e)
	}
	sort.Ints(ends)
	total := bounds[ends[len(ends)-1]]
	var out []byte
	prev := 0
	for _, e := range ends {
		frames := bounds[e] // frames up to and including this unit
		packet := frames > bounds[prev] || (prev == 0 && frames > 0)
		idx := frames - 1
		if !packet || idx < 4 || idx >= total-4 || idx >= total/2 && idx < total/2+4 {
			out = append(out, data[prev:e]...)
		}
		prev = e
	}
	return out
}

// A capture cut anywhere gives a *TruncatedError naming the file and the
// byte offset of the cut header, record or block, after exactly the
// frames before it; cut between two records it reads as the shorter
// capture it then is. Never a panic, never a silent short read.
func TestTruncatedEverywhere(t *testing.T) {
	for _, path := range goldens(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			data = shortened(t, data)
			full, err := readPrefix(path, data)
			require.NoError(t, err)
			require.NotEmpty(t, full)
			bounds := boundaries(t, data)
			var starts []int // unit starts, for the offset a cut must name
			starts = append(starts, 0)
			for b := range bounds {
				starts = append(starts, b)
			}
			sort.Ints(starts)
			cuts, silent := 0, 0
			for n := 0; n < len(data); n++ {
				recs, err := readPrefix(path, data[:n])
				if err != nil {
					require.NotContains(t, err.Error(), "PANIC", "cut at %d", n)
				}
				frames, atBoundary := bounds[n]
				switch {
				case n < 4:
					require.Error(t, err, "cut at %d", n)
					assert.Contains(t, err.Error(), "too short")
				case atBoundary:
					// A shorter capture; a pcapng file that ends before its
					// first interface is refused instead.
					if err != nil {
						require.Zero(t, frames, "cut at %d: %v", n, err)
						continue
					}
					require.Len(t, recs, frames, "cut at %d", n)
					silent++
				default:
					cuts++
					var te *TruncatedError
					require.True(t, errors.As(err, &te), "cut at %d: want a TruncatedError, got %v (%d frames)", n, err, len(recs))
					i := sort.SearchInts(starts, n+1) - 1 // the unit the cut is in
					assert.Equal(t, int64(starts[i]), te.Offset, "cut at %d: %v", n, err)
					want := bounds[starts[i]]
					assert.Equal(t, want, te.Frame, "cut at %d", n)
					assert.Len(t, recs, want, "cut at %d: every complete frame is read before the cut", n)
					assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "cut at %d", n)
					assert.Contains(t, err.Error(), path+": ")
					assert.Contains(t, err.Error(), fmt.Sprintf("truncated %s at byte %d (", te.What, starts[i]))
				}
				for i := range recs {
					require.Equal(t, full[i].Data, recs[i].Data, "cut at %d: frame %d", n, i)
				}
			}
			t.Logf("%d cuts inside a unit, all errors; %d between units", cuts, silent)
		})
	}
}

// writePcap makes a classic pcap of frames of the given lengths.
func writePcap(t *testing.T, lens ...int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	for i, n := range lens {
		ci := gopacket.CaptureInfo{Timestamp: time.Unix(int64(i), 0), CaptureLength: n, Length: n}
		require.NoError(t, w.WritePacket(ci, bytes.Repeat([]byte{byte(i)}, n)))
	}
	return buf.Bytes()
}

// The messages, exactly: a record cut after its header (which pcapgo
// reads as a clean end of file), one cut inside its data, a cut record
// header and a cut file header.
func TestTruncatedMessages(t *testing.T) {
	data := writePcap(t, 60, 60)
	require.Len(t, data, 24+2*(16+60))
	for _, c := range []struct {
		n    int
		want string
	}{
		{24 + 76 + 16, "capture.pcap: frame 2: truncated record at byte 100 (header says 60 bytes, 0 present)"},
		{24 + 76 + 16 + 12, "capture.pcap: frame 2: truncated record at byte 100 (header says 60 bytes, 12 present)"},
		{24 + 76 + 5, "capture.pcap: frame 2: truncated record header at byte 100 (needs 16 bytes, 5 present)"},
		{10, "capture.pcap: truncated file header at byte 0 (needs 24 bytes, 10 present)"},
	} {
		recs, err := readPrefix("capture.pcap", data[:c.n])
		require.Error(t, err, "cut at %d", c.n)
		assert.Equal(t, c.want, err.Error())
		assert.LessOrEqual(t, len(recs), 1)
	}
	recs, err := readPrefix("capture.pcap", data[:24+76])
	require.NoError(t, err, "a cut between records is a shorter capture")
	assert.Len(t, recs, 1)

	// pcapng: a cut inside an Enhanced Packet Block names it.
	var buf bytes.Buffer
	w, err := NewWriter(&buf, "port0-in")
	require.NoError(t, err)
	require.NoError(t, w.Write("port0-in", 1, make([]byte, 60), "a comment"))
	require.NoError(t, w.Flush())
	ng := buf.Bytes()
	b := boundaries(t, ng)
	var ends []int
	for k := range b {
		ends = append(ends, k)
	}
	sort.Ints(ends)
	epb := ends[len(ends)-2] // the last block is the EPB
	_, err = readPrefix("capture.pcapng", ng[:len(ng)-4])
	require.Error(t, err)
	assert.Equal(t, fmt.Sprintf("capture.pcapng: frame 1: truncated Enhanced Packet Block at byte %d (header says %d bytes, %d present)",
		epb, len(ng)-epb, len(ng)-epb-4), err.Error())
}

// Files read through Open name the path in the error too.
func TestTruncatedFileNamed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cut.pcap")
	data := writePcap(t, 60, 60)
	require.NoError(t, os.WriteFile(path, data[:len(data)-1], 0o644))
	_, err := ReadAll(path)
	require.Error(t, err)
	assert.Equal(t, path+": frame 2: truncated record at byte 100 (header says 60 bytes, 59 present)", err.Error())
}
