package pcapio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// ngBlocks builds pcapng files block by block, in either byte order.
type ngBlocks struct {
	order interface {
		binary.ByteOrder
		binary.AppendByteOrder
	}
	buf bytes.Buffer
}

// opt is one option: its code and value (padded when written).
type opt struct {
	code uint16
	v    []byte
}

func (b *ngBlocks) block(typ uint32, body []byte, opts ...opt) *ngBlocks {
	for _, o := range opts {
		body = b.order.AppendUint16(body, o.code)
		body = b.order.AppendUint16(body, uint16(len(o.v)))
		body = append(body, o.v...)
		body = append(body, make([]byte, (4-len(o.v)%4)%4)...)
	}
	if len(opts) > 0 {
		body = append(body, 0, 0, 0, 0)
	}
	n := uint32(12 + len(body))
	b.buf.Write(b.order.AppendUint32(b.order.AppendUint32(nil, typ), n))
	b.buf.Write(body)
	b.buf.Write(b.order.AppendUint32(nil, n))
	return b
}

func (b *ngBlocks) shb(opts ...opt) *ngBlocks {
	body := b.order.AppendUint32(nil, 0x1A2B3C4D)
	body = b.order.AppendUint16(b.order.AppendUint16(body, 1), 0)
	body = b.order.AppendUint64(body, ^uint64(0))
	return b.block(blockSHB, body, opts...)
}

func (b *ngBlocks) idb(lt uint16, name string, opts ...opt) *ngBlocks {
	body := b.order.AppendUint32(b.order.AppendUint16(b.order.AppendUint16(nil, lt), 0), 0)
	return b.block(blockIDB, body, append([]opt{{optIfName, []byte(name)}}, opts...)...)
}

func (b *ngBlocks) epb(ifc uint32, ts uint64, data []byte, orig int, opts ...opt) *ngBlocks {
	body := b.order.AppendUint32(nil, ifc)
	body = b.order.AppendUint32(b.order.AppendUint32(body, uint32(ts>>32)), uint32(ts))
	body = b.order.AppendUint32(b.order.AppendUint32(body, uint32(len(data))), uint32(orig))
	body = append(append(body, data...), make([]byte, (4-len(data)%4)%4)...)
	return b.block(blockEPB, body, opts...)
}

func (b *ngBlocks) u64(v uint64) []byte { return b.order.AppendUint64(nil, v) }

// readEvery reads a capture of size bytes to its end: every record, then
// the error (io.EOF at a clean end) and the interface names; with
// digested, every record read must carry fnv64 of its bytes. A reader
// that returns more records than the file has room for (a pcapng block
// takes 12 bytes at least, a pcap record 16) is going round in circles.
func readEvery(t *testing.T, r *Reader, digested bool, size int64) string {
	t.Helper()
	var out bytes.Buffer
	for n := int64(0); ; n++ {
		if 12*n > size {
			t.Fatalf("%d records from %d bytes: the reader does not move on (after %q)", n, size, out.String())
		}
		rec, err := r.Next()
		var sk *SkippedError
		if err != nil && !errors.As(err, &sk) {
			fmt.Fprintf(&out, "end: %v\ninterfaces: %q\n", err, r.Interfaces())
			return out.String()
		}
		if digested && err == nil {
			require.Equal(t, fnv64(rec.Data), rec.Digest, "record after %q", out.String())
		}
		fmt.Fprintf(&out, "%s %d/%d if%d lt%d pt%d %q %x skip=%v\n", rec.Info.Timestamp.Format("2006-01-02T15:04:05.999999999"),
			rec.Info.CaptureLength, rec.Info.Length, rec.Info.InterfaceIndex, rec.LinkType, rec.PacketType, rec.Comments, rec.Data, err)
	}
}

// The plain path (Open on a regular pcapng file) gives every capture the
// records, errors and interface names pcapgo's path (NewReader, the same
// bytes through an io.Reader) gives: the goldens, and built files with
// each kind of block and option, in both byte orders, including the
// blocks the plain path hands to pcapgo half way (a second section, a
// Simple Packet Block, a Name Resolution Block, a microsecond-free
// resolution), damaged ones, and every cut of one.
func TestPlainMatchesPcapgo(t *testing.T) {
	// Chunks of 256 KiB, so that the longest blocks read are longer than
	// one.
	old := plainBufSize
	plainBufSize = 256 << 10
	t.Cleanup(func() { plainBufSize = old })
	files := plainFiles()
	// A file longer than the plain path's buffer, with blocks longer
	// than it: the longest frame read, and the longest block.
	many := (&ngBlocks{order: binary.LittleEndian}).shb().idb(1, "a")
	for i := range 3000 {
		many.epb(0, uint64(i), bytes.Repeat([]byte{byte(i)}, 1000+i%7), 1100)
		if i == 1500 {
			big := bytes.Repeat([]byte{1, 2, 3}, maxFrame/3)
			many.epb(0, uint64(i), big, len(big))
			many.block(0xBAD, make([]byte, maxPacketBlock-12))
		}
	}
	files["many"] = many.Bytes()
	// A longer frame, and a longer block, whole in the file: the plain
	// path hands them to pcapgo's, which refuses the frame unread and
	// skips the block unread.
	files["over-frame"] = (&ngBlocks{order: binary.LittleEndian}).shb().idb(1, "a").epb(0, 1, make([]byte, 60), 60).
		epb(0, 2, make([]byte, maxFrame+1), maxFrame+1).epb(0, 3, make([]byte, 60), 60).Bytes()
	files["over-block"] = (&ngBlocks{order: binary.LittleEndian}).shb().idb(1, "a").epb(0, 1, make([]byte, 60), 60).
		block(0xBAD, make([]byte, maxPacketBlock)).epb(0, 3, make([]byte, 60), 60).Bytes()
	// every cut of the plain little-endian file
	whole := files["LittleEndian-plain"]
	for cut := 1; cut < len(whole); cut += 3 {
		files[fmt.Sprintf("cut%d", cut)] = whole[:cut]
	}
	dir := t.TempDir()
	var paths []string
	for name, data := range files {
		p := filepath.Join(dir, name+".pcapng")
		require.NoError(t, os.WriteFile(p, data, 0o644))
		paths = append(paths, p)
	}
	paths = append(paths, goldens(t)...)
	plain, readAheadDigests := 0, 0
	for _, p := range paths {
		for _, mode := range plainModes {
			fast, started := plainMatchesPcapgo(t, p, mode)
			if fast == nil {
				continue
			}
			if started && strings.HasPrefix(mode, "borrow") {
				plain++
			}
			readAheadDigests += fast.readAheadDigests
			switch filepath.Base(p) {
			case "LittleEndian-plain.pcapng", "BigEndian-plain.pcapng", "many.pcapng":
				// Read to the end without handing over (which would
				// hide a mistake of the plain path's).
				require.NotNil(t, fast.plain, p)
			}
		}
	}
	require.Greater(t, plain, len(paths)/2, "most files start on the plain path")
	// All but the first chunk's: many.pcapng's first 256 KiB holds
	// about 250 of its 3001 frames.
	require.Greater(t, readAheadDigests, 2*2700, "the read-ahead digests the plain files' packets")
	// Records kept (not borrowed) keep their bytes while the reader
	// reads on.
	for _, p := range paths {
		fast, err := Open(p)
		if err != nil {
			continue
		}
		f, err := os.Open(p)
		require.NoError(t, err)
		slow, err := NewReader(p, f)
		require.NoError(t, err)
		want, _, _ := slow.All()
		got, _, _ := fast.All()
		require.Equal(t, len(want), len(got), p)
		for i := range want {
			require.Equal(t, want[i].Data, got[i].Data, "%s frame %d", p, i+1)
		}
		fast.Close()
		f.Close()
	}
}

// plainModes are the ways of reading plainMatchesPcapgo compares.
var plainModes = []string{"keep", "borrow", "digest", "borrow+digest"}

// plainMatchesPcapgo reads the capture at p through Open (the plain path)
// and through NewReader (pcapgo's), in mode, and requires the same
// records, errors and interface names of both. It returns the plain
// path's reader, closed, or nil when neither opened the file, and whether
// it started on the plain path.
func plainMatchesPcapgo(t *testing.T, p, mode string) (*Reader, bool) {
	t.Helper()
	fast, err := Open(p)
	if err == nil {
		defer fast.Close()
	}
	f, ferr := os.Open(p)
	require.NoError(t, ferr)
	defer f.Close()
	slow, serr := NewReader(p, f)
	if err != nil || serr != nil {
		require.Equal(t, fmt.Sprint(serr), fmt.Sprint(err), p)
		return nil, false
	}
	started := fast.plain != nil
	if strings.HasPrefix(mode, "borrow") {
		fast.Borrow()
		slow.Borrow()
	}
	digested := strings.HasSuffix(mode, "digest")
	if digested {
		fast.SetDigest(fnv64)
		slow.SetDigest(fnv64)
	}
	st, err := f.Stat()
	require.NoError(t, err)
	require.Equal(t, readEvery(t, slow, digested, st.Size()), readEvery(t, fast, digested, st.Size()), "%s (%s)", p, mode)
	return fast, started
}

// plainFiles are pcapng files with each kind of block and option, in
// both byte orders, including the blocks the plain path hands to pcapgo
// half way, and damaged ones.
func plainFiles() map[string][]byte {
	frame := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 60+i) }
	ip4 := append([]byte{0x45, 0, 0, 20, 0, 0, 0, 0, 1, 17, 0, 0, 10, 0, 0, 1}, 10, 0, 0, 2)
	files := map[string][]byte{}
	for _, order := range []interface {
		binary.ByteOrder
		binary.AppendByteOrder
	}{binary.LittleEndian, binary.BigEndian} {
		name := fmt.Sprint(order)
		b := func() *ngBlocks { return &ngBlocks{order: order} }
		ts := uint64(1700000000123456)
		files[name+"-plain"] = b().shb(opt{3, []byte("inaemu")}).idb(1, "h0-in").idb(1, "h0-out", opt{optTSResol, []byte{9}}).
			epb(0, ts, frame(1), 61, opt{optComment, []byte("fault=drop")}, opt{optComment, []byte("second")}).
			epb(1, ts*1000+7, frame(2), 200, opt{2, []byte{1, 0, 0, 0}}).
			block(0x0A, []byte("secrets!")).block(0xBAD, []byte{1, 2, 3, 4}).
			block(blockISB, append(b().order.AppendUint32(nil, 1), make([]byte, 8)...), opt{4, b().u64(3)}).
			idb(101, "raw", opt{optTSOffset, b().u64(100)}).epb(2, ts, ip4, len(ip4)).
			idb(113, "cooked").epb(3, ts, []byte{0, 4, 0, 1}, 20). // cut cooked header: skipped
			epb(0, ts+1, frame(3), 64, opt{optTSResol, []byte{1}}).Bytes()
		files[name+"-second-section"] = b().shb().idb(1, "a").epb(0, ts, frame(1), 61).shb().idb(1, "b").idb(1, "c").epb(1, ts, frame(2), 62).Bytes()
		files[name+"-spb"] = b().shb().idb(1, "a").epb(0, ts, frame(1), 61).block(blockSPB, append(b().order.AppendUint32(nil, 60), frame(4)[:60]...)).epb(0, ts, frame(2), 62).Bytes()
		files[name+"-nrb"] = b().shb().idb(1, "a").epb(0, ts, frame(1), 61).block(blockNRB, []byte{0, 0, 0, 0}).epb(0, ts, frame(2), 62).Bytes()
		files[name+"-resolutions"] = b().shb().idb(1, "us").idb(1, "ms", opt{optTSResol, []byte{3}}).idb(1, "bin", opt{optTSResol, []byte{0x94}}).
			epb(0, ts, frame(1), 61).epb(1, ts/1000, frame(2), 62).epb(2, ts<<2, frame(3), 63).Bytes()
		files[name+"-no-interface"] = b().shb().epb(0, ts, frame(1), 61).Bytes()
		files[name+"-caplen-over-orig"] = b().shb().idb(1, "a").epb(0, ts, frame(1), 61).epb(0, ts, frame(2), 10).Bytes()
		files[name+"-bad-option"] = b().shb().idb(1, "a").epb(0, ts, frame(1), 61).block(blockEPB, append(b().order.AppendUint32(make([]byte, 12), 4), append(b().order.AppendUint32(nil, 4), 1, 2, 3, 4, 1, 0, 200, 0)...)).Bytes()
		old := b().shb().idb(1, "a").epb(0, ts, frame(1), 61).Bytes()
		order.PutUint16(old[12:], 2) // version 2.0
		files[name+"-version-2"] = old
		// Claims no frame may make (the file ends after them): refused
		// unread.
		claim := func(typ uint32, body []byte) []byte {
			f := b().shb().idb(1, "a").epb(0, ts, frame(1), 61).Bytes()
			return append(f, append(order.AppendUint32(order.AppendUint32(nil, typ), 1<<30), body...)...)
		}
		epb := append(make([]byte, 12), order.AppendUint32(order.AppendUint32(nil, 1<<30-32), 1<<30-32)...)
		files[name+"-claims-frame"] = claim(blockEPB, epb)
		files[name+"-claims-block"] = claim(blockEPB, append(make([]byte, 12), order.AppendUint32(order.AppendUint32(nil, 60), 60)...))
		files[name+"-claims-spb"] = claim(blockSPB, order.AppendUint32(nil, 1<<30-16))
		files[name+"-short-epb"] = b().shb().idb(1, "a").epb(0, ts, frame(1), 61).block(blockEPB, make([]byte, 16)).epb(0, ts, frame(2), 62).Bytes()
	}
	return files
}

// FuzzPlainMatchesPcapgo: any bytes read through the plain path, in
// 64-byte chunks so that small files cut blocks everywhere, give what
// pcapgo's path gives, in every mode. The seeds are plainFiles'.
func FuzzPlainMatchesPcapgo(f *testing.F) {
	files := plainFiles()
	for _, name := range slices.Sorted(maps.Keys(files)) {
		f.Add(files[name])
	}
	old := plainBufSize
	plainBufSize = 64
	f.Cleanup(func() { plainBufSize = old })
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "fuzz.pcapng")
		require.NoError(t, os.WriteFile(p, data, 0o644))
		for _, mode := range plainModes {
			plainMatchesPcapgo(t, p, mode)
		}
	})
}

func (b *ngBlocks) Bytes() []byte { return b.buf.Bytes() }

// fnv64 is a digest for the tests: FNV-1a, nothing the Reader uses.
func fnv64(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// Closing a reader part way, or leaving the plain path, stops its
// read-ahead goroutine.
func TestPlainReadAheadStops(t *testing.T) {
	many := (&ngBlocks{order: binary.LittleEndian}).shb().idb(1, "a")
	for i := range 5000 {
		many.epb(0, uint64(i), bytes.Repeat([]byte{byte(i)}, 1000), 1000)
	}
	spb := append([]byte{}, many.Bytes()...)
	spb = append(spb, (&ngBlocks{order: binary.LittleEndian}).block(blockSPB, append(binary.LittleEndian.AppendUint32(nil, 60), make([]byte, 60)...)).Bytes()...)
	dir := t.TempDir()
	for name, data := range map[string][]byte{"many": many.Bytes(), "spb": spb} {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o644))
		before := runtime.NumGoroutine()
		r, err := Open(p)
		require.NoError(t, err)
		require.NotNil(t, r.plain)
		_, err = r.Next()
		require.NoError(t, err)
		if name == "spb" {
			recs, _, err := r.All()
			require.NoError(t, err)
			require.Len(t, recs, 5000)
			require.Nil(t, r.plain, "the Simple Packet Block is pcapgo's")
		}
		require.NoError(t, r.Close())
		require.Equal(t, before, runtime.NumGoroutine(), name)
	}
	// A file the plain path does not start on (a bad byte-order magic):
	// its goroutine is stopped before pcapgo refuses the file.
	bad := append([]byte{}, many.Bytes()...) // longer than the chunks read ahead
	copy(bad[8:12], "oops")
	p := filepath.Join(dir, "bad-magic")
	require.NoError(t, os.WriteFile(p, bad, 0o644))
	before := runtime.NumGoroutine()
	_, err := Open(p)
	require.Error(t, err)
	require.Equal(t, before, runtime.NumGoroutine(), "bad-magic")
}

// A record takes the read-ahead's digest only when it was made of the
// record's own bytes (its offset and length): a missing or different
// entry leaves the record to be digested by Next.
func TestPlainDigestMatchesItsRecord(t *testing.T) {
	b := &ngBlocks{order: binary.LittleEndian}
	b.shb().idb(1, "a")
	shbLen := int(binary.LittleEndian.Uint32(b.Bytes()[4:]))
	var offs []int
	for i := range 4 {
		offs = append(offs, b.buf.Len()+28)
		b.epb(0, uint64(i), bytes.Repeat([]byte{byte(i)}, 60+i), 60+i)
	}
	file := b.Bytes()
	p := &plainNg{order: binary.LittleEndian, buf: file, lo: shbLen, hi: len(file), eof: true}
	p.digests = []chunkDigest{
		{offs[0], 60, 100}, // frame 1: its own
		// frame 2: none
		{offs[2], 61, 300}, // frame 3: another length
		{offs[3], 63, 400}, // frame 4: its own
	}
	want := []struct {
		has bool
		sum uint64
	}{{true, 100}, {false, 0}, {false, 0}, {true, 400}}
	for i, w := range want {
		_, _, _, _, err := p.next()
		require.NoError(t, err)
		require.Equal(t, w.has, p.hasDigest, "frame %d", i+1)
		if w.has {
			require.Equal(t, w.sum, p.digest, "frame %d", i+1)
		}
	}
}
