package pcapio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/testtool"
)

// ngCapture is a pcapng of n frames (of 60+i bytes) on two interfaces,
// as the emulator writes them, with a comment on each.
func ngCapture(t *testing.T, n int) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, "port0-in", "port0-out")
	require.NoError(t, err)
	for i := 0; i < n; i++ {
		require.NoError(t, w.Write([]string{"port0-in", "port0-out"}[i%2], int64(i), bytes.Repeat([]byte{byte(i)}, 60+i), "frame"))
	}
	require.NoError(t, w.Flush())
	return buf.Bytes()
}

// A capture killed mid-write (Ctrl-C on tcpdump: the last record cut
// half way) reads as tshark reads it: every complete record, then a
// *TruncatedError naming the cut record, its index and its offset; the
// file readers return the records together with the error, and Next
// keeps returning the error.
func TestCutLastRecord(t *testing.T) {
	dir := t.TempDir()
	pcap := writePcap(t, 60, 70, 80, 90, 100)
	last := 24 + (16 + 60) + (16 + 70) + (16 + 80) + (16 + 90) // where the last record starts
	ng := ngCapture(t, 5)
	ngBounds := boundaries(t, ng)
	ngLast := 0 // where the last frame's block starts
	for off, frames := range ngBounds {
		if frames == 4 && off > ngLast {
			ngLast = off
		}
	}
	for _, c := range []struct {
		name  string
		data  []byte
		cut   int
		start int
		what  string
		names []string
	}{
		{"cut.pcap", pcap, last + 16 + 50, last, "record", nil},
		{"cut-header.pcap", pcap, last + 7, last, "record header", nil},
		{"cut.pcapng", ng, len(ng) - 9, ngLast, "Enhanced Packet Block", []string{"port0-in", "port0-out"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			full := readAllBytes(t, c.data)
			require.Len(t, full, 5)
			path := filepath.Join(dir, c.name)
			require.NoError(t, os.WriteFile(path, c.data[:c.cut], 0o644))

			recs, names, err := ReadAllNamed(path)
			var te *TruncatedError
			require.True(t, errors.As(err, &te), "want a *TruncatedError, got %v", err)
			assert.Equal(t, 4, te.Frame)
			assert.Equal(t, int64(c.start), te.Offset)
			assert.Equal(t, c.what, te.What)
			assert.Equal(t, path, te.Name)
			have := int64(c.cut - c.start) // a record's Have counts its data only
			if c.what == "record" {
				have -= 16
			}
			assert.Equal(t, have, te.Have)
			assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
			assert.Equal(t, c.names, names)
			require.Len(t, recs, 4, "every complete record before the cut")
			for i := range recs {
				assert.Equal(t, full[i].Data, recs[i].Data, "frame %d", i)
				assert.Equal(t, full[i].Info, recs[i].Info, "frame %d", i)
				assert.Equal(t, full[i].Comments, recs[i].Comments, "frame %d", i)
			}

			recs2, err2 := ReadAll(path)
			assert.Equal(t, err.Error(), err2.Error())
			assert.Len(t, recs2, 4)

			r, err := Open(path)
			require.NoError(t, err)
			defer r.Close()
			for i := 0; i < 4; i++ {
				_, err := r.Next()
				require.NoError(t, err, "frame %d", i)
			}
			_, err = r.Next()
			require.True(t, errors.As(err, &te), "want a *TruncatedError, got %v", err)
			_, again := r.Next()
			assert.Same(t, err, again, "Next returns the same error again")
		})
	}
}

func readAllBytes(t *testing.T, data []byte) []Record {
	t.Helper()
	r, err := NewReader("whole", bytes.NewReader(data))
	require.NoError(t, err)
	recs, _, err := r.All()
	require.NoError(t, err)
	return recs
}

// A damaged file (a record length no capture has, a packet block naming
// an interface its section lacks) reads up to the damage, which is a
// *CorruptError, not a *TruncatedError, naming the frame and the byte
// where reading it began.
func TestCorruptFile(t *testing.T) {
	pcap := writePcap(t, 60, 60, 60, 60)
	third := 24 + 2*(16+60)
	huge := bytes.Clone(pcap)
	binary.LittleEndian.PutUint32(huge[third+8:], 0x7fffffff)
	longer := bytes.Clone(pcap)
	binary.LittleEndian.PutUint32(longer[third+8:], 61) // 61 captured of a 60-byte frame

	ng := ngCapture(t, 4)
	var epbs []int
	for off := 0; off < len(ng); {
		typ, n := binary.LittleEndian.Uint32(ng[off:]), int(binary.LittleEndian.Uint32(ng[off+4:]))
		if typ == blockEPB {
			epbs = append(epbs, off)
		}
		off += n
	}
	require.Len(t, epbs, 4)
	noIface := bytes.Clone(ng)
	binary.LittleEndian.PutUint32(noIface[epbs[2]+8:], 7) // interface 7 of 2
	shorter := bytes.Clone(ng)
	binary.LittleEndian.PutUint32(shorter[epbs[2]+24:], 10) // original length 10 of a longer captured frame
	badLen := bytes.Clone(ng)
	binary.LittleEndian.PutUint32(badLen[epbs[2]+4:], 10) // a block shorter than its header

	for _, c := range []struct {
		name string
		data []byte
		at   int64
		msg  string
	}{
		{"huge.pcap", huge, int64(third), "huge.pcap: frame 3: damaged at or after byte 176: capture length exceeds snap length: 2147483647 > 65535"},
		{"longer.pcap", longer, int64(third), "longer.pcap: frame 3: damaged at or after byte 176: capture length exceeds original packet length: 61 > 60"},
		{"noiface.pcapng", noIface, int64(epbs[2]), "noiface.pcapng: frame 3: damaged at or after byte " + strconv.Itoa(epbs[2]) + ": Interface id 7 not present in section (have only 2 interfaces)"},
		{"shorter.pcapng", shorter, int64(epbs[2]), "shorter.pcapng: frame 3: damaged at or after byte " + strconv.Itoa(epbs[2]) + ": capture length exceeds original packet length: " + strconv.Itoa(int(binary.LittleEndian.Uint32(ng[epbs[2]+20:]))) + " > 10"},
		{"badlen.pcapng", badLen, int64(epbs[2]), "badlen.pcapng: frame 3: damaged at or after byte 356: Enhanced Packet Block at byte 356 says it is 10 bytes long (a block is a multiple of 4 bytes, 12 or more)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := NewReader(c.name, bytes.NewReader(c.data))
			require.NoError(t, err)
			recs, _, err := r.All()
			require.Len(t, recs, 2)
			var ce *CorruptError
			require.True(t, errors.As(err, &ce), "want a *CorruptError, got %v", err)
			var te *TruncatedError
			assert.False(t, errors.As(err, &te))
			assert.Equal(t, 2, ce.Frame)
			assert.Equal(t, c.at, ce.Offset)
			if c.msg != "" {
				assert.EqualError(t, err, c.msg)
			}
			_, again := r.Next()
			assert.Same(t, err, again)
		})
	}
}

// tshark reads a cut or damaged file as Next does: the same complete
// frames, then a message and exit status 2 (what ReadAll's comment says).
// A file cut between two records is a shorter capture to both: status 0.
func TestTsharkReadsDamageAlike(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	dir := t.TempDir()
	pcap := writePcap(t, 60, 70, 80, 90, 100)
	last := 24 + (16 + 60) + (16 + 70) + (16 + 80) + (16 + 90)
	huge := bytes.Clone(pcap)
	binary.LittleEndian.PutUint32(huge[last+8:], 0x7fffffff)
	ng := ngCapture(t, 5)
	for _, c := range []struct {
		name   string
		data   []byte
		status int
		says   string
	}{
		{"cut.pcap", pcap[:len(pcap)-30], 2, "appears to have been cut short in the middle of a packet"},
		{"cut.pcapng", ng[:len(ng)-9], 2, "appears to have been cut short in the middle of a packet"},
		{"huge.pcap", huge, 2, "appears to be damaged or corrupt"},
		{"between.pcap", pcap[:last], 0, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			require.NoError(t, os.WriteFile(path, c.data, 0o644))
			recs, err := ReadAll(path)
			if c.status == 0 {
				require.NoError(t, err)
			} else {
				require.Error(t, err)
			}
			out, errOut, terr := testtool.Run(t, "tshark", "-r", path, "-T", "fields", "-e", "frame.number", "-e", "frame.cap_len")
			status := 0
			var ee interface{ ExitCode() int }
			if errors.As(terr, &ee) {
				status = ee.ExitCode()
			} else {
				require.NoError(t, terr, errOut)
			}
			assert.Equal(t, c.status, status, errOut)
			assert.Contains(t, errOut, c.says)
			lines := strings.Fields(strings.TrimSpace(out))
			require.Len(t, lines, 2*len(recs), "tshark's frames: %q", out)
			for i, r := range recs {
				assert.Equal(t, strconv.Itoa(i+1), lines[2*i])
				assert.Equal(t, strconv.Itoa(r.Info.CaptureLength), lines[2*i+1])
			}
		})
	}
}

// A block length damaged to nearly 4 GiB past the read-ahead's first
// chunk costs memory in proportion to the file, not to the length: it
// had grown the buffer to the length at once (4 GiB allocated and
// copied: `check` took 8.4 GB and 19 s on an 18 MB capture). The error
// is the one pcapgo's path gives: damage (no packet block is that long),
// as tshark says too, where it had been a cut.
func TestDamagedLengthCostsLittle(t *testing.T) {
	var b ngBlocks
	b.order = binary.LittleEndian
	b.shb().idb(1, "a")
	for i := range 4000 { // 4 MiB: the damage is followed by more than a chunk
		b.epb(0, uint64(i), bytes.Repeat([]byte{byte(i)}, 1000), 1000)
	}
	data := b.Bytes()
	at := len(data) - 2000*1032 // a block start: each EPB is 1032 bytes
	require.EqualValues(t, blockEPB, binary.LittleEndian.Uint32(data[at:]))
	binary.LittleEndian.PutUint32(data[at+4:], 0xFFFFFFF0)
	path := filepath.Join(t.TempDir(), "damaged.pcapng")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	r, err := Open(path)
	require.NoError(t, err)
	frames := 0
	for {
		if _, err = r.Next(); err != nil {
			break
		}
		frames++
	}
	r.Close()
	runtime.ReadMemStats(&after)
	assert.Equal(t, 2000, frames)
	assert.Contains(t, err.Error(), "frame 2001: damaged at or after byte "+strconv.Itoa(at)+": Enhanced Packet Block says it is 4294967280 bytes long, more than the 1048576 bytes a packet block may take")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(len(data))*8, "bytes allocated reading a %d-byte file", len(data))
	t.Logf("%d bytes allocated reading a %d-byte file", after.TotalAlloc-before.TotalAlloc, len(data))
}

// oversizeFiles are captures of three 60-byte frames, then a record that
// claims 256 MiB (its bytes a hole of a sparse file: zeros, costing no
// disk), then two more frames: an Enhanced Packet Block claiming a
// 256 MiB frame, one holding a 60-byte frame in a 256 MiB block, a Simple
// Packet Block of a 256 MiB frame, and a classic pcap record of 256 MiB
// under a 2 GiB snaplen. It returns each file's path, where its
// oversized record starts, and the one-line error reading it must end
// with.
func oversizeFiles(t *testing.T) (paths []string, at []int64, errs []string) {
	const claim = 256 << 20
	dir := t.TempDir()
	frame := bytes.Repeat([]byte{0xAB}, 60)
	le := binary.LittleEndian
	// write puts head, a hole of n bytes, and tail into a file.
	write := func(name string, head []byte, n int64, tail []byte, why string) {
		p := filepath.Join(dir, name)
		f, err := os.Create(p)
		require.NoError(t, err)
		_, err = f.Write(head)
		require.NoError(t, err)
		_, err = f.Seek(n, io.SeekCurrent)
		require.NoError(t, err)
		_, err = f.Write(tail)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		paths, errs = append(paths, p), append(errs, why)
	}
	ng := func() *ngBlocks {
		b := &ngBlocks{order: le}
		b.shb().idb(1, "a")
		for i := range 3 {
			b.epb(0, uint64(i), frame, 60)
		}
		return b
	}
	after := (&ngBlocks{order: le}).epb(0, 9, frame, 60).epb(0, 10, frame, 60).Bytes()

	// An Enhanced Packet Block claiming a 256 MiB frame.
	head := ng()
	at = append(at, int64(head.buf.Len()))
	epb := le.AppendUint32(le.AppendUint32(nil, blockEPB), 32+claim)
	epb = le.AppendUint32(append(epb, make([]byte, 12)...), claim)
	epb = le.AppendUint32(epb, claim)
	write("claim.pcapng", append(head.Bytes(), epb...), claim, append(le.AppendUint32(nil, 32+claim), after...),
		"frame 4: damaged at or after byte "+strconv.FormatInt(at[0], 10)+": Enhanced Packet Block claims a 268435456-byte frame, more than the 262144 bytes a frame may hold")

	// A 60-byte frame in a 256 MiB block (options, or the room after them).
	head = ng()
	at = append(at, int64(head.buf.Len()))
	epb = le.AppendUint32(le.AppendUint32(nil, blockEPB), 32+60+claim)
	epb = append(le.AppendUint32(le.AppendUint32(append(epb, make([]byte, 12)...), 60), 60), frame...)
	write("block.pcapng", append(head.Bytes(), epb...), claim, append(le.AppendUint32(nil, 32+60+claim), after...),
		"frame 4: damaged at or after byte "+strconv.FormatInt(at[1], 10)+": Enhanced Packet Block says it is 268435548 bytes long, more than the 1048576 bytes a packet block may take")

	// A Simple Packet Block of a 256 MiB frame (its interface's snaplen
	// is 0: no limit).
	head = ng()
	at = append(at, int64(head.buf.Len()))
	spb := le.AppendUint32(le.AppendUint32(le.AppendUint32(nil, blockSPB), 16+claim), claim)
	write("spb.pcapng", append(head.Bytes(), spb...), claim, append(le.AppendUint32(nil, 16+claim), after...),
		"frame 4: damaged at or after byte "+strconv.FormatInt(at[2], 10)+": Simple Packet Block claims a 268435456-byte frame, more than the 262144 bytes a frame may hold")

	// A classic pcap record of 256 MiB, which its file's 2 GiB snaplen
	// allows (pcapgo reads records up to the snaplen).
	pcap := writePcap(t, 60, 60, 60)
	le.PutUint32(pcap[16:], 1<<31-1)
	at = append(at, int64(len(pcap)))
	rec := le.AppendUint32(le.AppendUint32(make([]byte, 8), claim), claim)
	write("claim.pcap", append(pcap, rec...), claim, writePcap(t, 60, 60)[24:],
		"frame 4: damaged at or after byte "+strconv.FormatInt(at[3], 10)+": record claims a 268435456-byte frame, more than the 262144 bytes a frame may hold")
	return paths, at, errs
}

// A record claiming a frame longer than any capture holds (maxFrame), or
// a packet block longer than maxPacketBlock, is refused as damage before
// its bytes are read, on the plain path and on pcapgo's alike: the
// frames before it are read, then one line names the frame (Wireshark's
// number) and the claim, and reading cost memory for neither. It had cost
// memory in proportion to the claim: `inaemu decode` of a pcapng claiming
// a 1.5 GB frame took 3.8 GB of RSS, of a pcap 5.8 GB, and `inaemu check`
// judged such a file as it judged any other.
func TestOversizeRecordRefused(t *testing.T) {
	paths, at, errs := oversizeFiles(t)
	for i, p := range paths {
		for _, path := range []string{"plain", "pcapgo"} {
			t.Run(filepath.Base(p)+"/"+path, func(t *testing.T) {
				f, err := os.Open(p)
				require.NoError(t, err)
				defer f.Close()
				var before, after runtime.MemStats
				runtime.GC()
				runtime.ReadMemStats(&before)
				var r *Reader
				if path == "plain" {
					r, err = Open(p)
				} else {
					r, err = NewReader(p, f)
				}
				require.NoError(t, err)
				recs, _, err := r.All()
				require.NoError(t, r.Close())
				runtime.ReadMemStats(&after)
				// The plain path's read-ahead chunks (1 MiB each, a few
				// ahead, and the file read again by pcapgo's path) are
				// most of it: 256 MiB claimed.
				allocated := after.TotalAlloc - before.TotalAlloc
				t.Logf("%d bytes allocated", allocated)
				require.Less(t, allocated, uint64(16<<20), "bytes allocated reading past a claim of 256 MiB")
				require.Equal(t, 3, len(recs), "the frames before the claim")
				require.EqualError(t, err, p+": "+errs[i])
				var ce *CorruptError
				require.ErrorAs(t, err, &ce)
				require.Equal(t, 3, ce.Frame)
				require.Equal(t, at[i], ce.Offset)
				if path == "plain" && strings.HasSuffix(p, ".pcapng") {
					require.Nil(t, r.plain, "the plain path hands the claim to pcapgo's")
				}
			})
		}
	}
}

// tshark refuses the same records, after the same frames: an
// independent reader's word that they are damage, not captures.
func TestTsharkRefusesOversizeAlike(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	paths, _, _ := oversizeFiles(t)
	for _, p := range paths {
		t.Run(filepath.Base(p), func(t *testing.T) {
			out, errOut, err := testtool.Run(t, "tshark", "-r", p, "-T", "fields", "-e", "frame.number")
			var ee interface{ ExitCode() int }
			require.ErrorAs(t, err, &ee, errOut)
			assert.Equal(t, 2, ee.ExitCode(), errOut)
			assert.Contains(t, errOut, "appears to be damaged or corrupt")
			assert.Equal(t, "1\n2\n3\n", out)
		})
	}
}
