package pcapio

import (
	"encoding/binary"
	"fmt"
	"io"
)

// TruncatedError is a capture that ends inside its file header, a record
// header, a record's data or a pcapng block: the file was cut short (a
// copy that did not finish, a capture killed mid-write). A file that ends
// exactly between two records cannot be told from a shorter capture; one
// that ends anywhere else always gives this error.
type TruncatedError struct {
	Name   string // the file, as given to Open or NewReader
	What   string // "file header", "record header", "record", "block header", "Enhanced Packet Block", ...
	Frame  int    // 0-based index of the frame being read (the number of complete frames before it); messages print Frame+1, Wireshark's number
	Offset int64  // where the cut header, record or block starts
	Want   int64  // bytes its header declares (or the header's own length)
	Have   int64  // bytes present from Offset to the end of the file (a record's: of its data)
	packet bool   // the cut unit is a frame's record or packet block
}

func (e *TruncatedError) Error() string {
	frame := ""
	if e.packet {
		frame = fmt.Sprintf("frame %d: ", e.Frame+1) // Wireshark's number
	}
	says := "header says"
	if e.What == "file header" || e.What == "record header" || e.What == "block header" {
		says = "needs"
	}
	return fmt.Sprintf("%s: %struncated %s at byte %d (%s %d bytes, %d present)", e.Name, frame, e.What, e.Offset, says, e.Want, e.Have)
}

// Unwrap makes a *TruncatedError an io.ErrUnexpectedEOF too, for callers
// that know only the standard library's word for a cut stream.
func (e *TruncatedError) Unwrap() error { return io.ErrUnexpectedEOF }

// CorruptError is a capture damaged at frame Frame: a record or block
// whose lengths or fields make no sense (a captured length beyond any
// snaplen or beyond the frame's own length, a pcapng block shorter than
// its header or not a multiple of 4 bytes, a packet block naming an
// interface its section does not describe, ...). The frames before it
// were read; nothing after it can be trusted, so Next stops there.
type CorruptError struct {
	Name   string // the file, as given to Open or NewReader
	Frame  int    // 0-based index of the frame being read (the number of frames read before it); messages print Frame+1, Wireshark's number
	Offset int64  // where the damaged record or block starts, when the framing shows it; else where reading frame Frame began (the damage is at or after it)
	Err    error  // what the capture library found
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("%s: frame %d: damaged at or after byte %d: %v", e.Name, e.Frame+1, e.Offset, e.Err) // Wireshark's number
}

func (e *CorruptError) Unwrap() error { return e.Err }

// SkippedError is a frame Next cannot turn into Ethernet: its link type
// is none of those Record.LinkType lists, or the snaplen cut its cooked
// header. Only that frame is lost; the next call to Next reads on.
type SkippedError struct {
	Name          string // the file, as given to Open or NewReader
	Frame         int    // 0-based index of the frame; messages print Frame+1, Wireshark's number
	Interface     int    // its pcapng interface, -1 in a classic pcap
	InterfaceName string
	Err           error // why it cannot be read
}

func (e *SkippedError) Error() string {
	if e.Interface >= 0 {
		return fmt.Sprintf("%s: frame %d: interface %d (%q): %v", e.Name, e.Frame+1, e.Interface, e.InterfaceName, e.Err)
	}
	return fmt.Sprintf("%s: frame %d: %v", e.Name, e.Frame+1, e.Err)
}

func (e *SkippedError) Unwrap() error { return e.Err }

// framer passes a capture's bytes through and follows its framing as they
// go by (pcap: a 24-byte file header, then 16-byte record headers each
// followed by its captured length of data; pcapng: blocks whose header
// gives their total length), so that the end of the file can be placed:
// between two records, or inside one. pcapgo reads a file cut right after
// a record header as a clean end of file; the framer knows better.
type framer struct {
	in   io.Reader
	name string

	off   int64 // bytes read so far
	start int64 // offset of the current unit (header, record or block)
	hdr   [24]byte
	hdrN  int   // header bytes of the current unit held
	want  int   // header length of the current unit
	body  int64 // bytes of the current unit still to come after its header
	total int64 // the current unit's declared length: data (pcap) or whole block (pcapng)
	unit  unitKind
	ng    bool
	order binary.ByteOrder
	typ   uint32 // pcapng: the current block's type
	snap  uint32 // pcap: the file header's snaplen
	// frames counts complete packet records or blocks.
	frames int
	lost   bool // a length field made no sense: pcapgo reports the file as corrupt
	bad    lostAt
	trunc  *TruncatedError
}

// maxSnaplen is libpcap's MAXIMUM_SNAPLEN, the longest record pcapgo (and
// tshark) reads from a classic pcap whose snaplen is no longer.
const maxSnaplen = 262144

type unitKind uint8

const (
	unitMagic unitKind = iota
	unitFileHeader
	unitRecord
	unitBlock
)

const (
	blockSHB = 0x0A0D0D0A
	blockIDB = 1
	blockPB  = 2 // obsolete Packet Block
	blockSPB = 3
	blockNRB = 4
	blockISB = 5
	blockEPB = 6
)

func newFramer(name string, in io.Reader) *framer {
	return &framer{in: in, name: name, want: 4, unit: unitMagic}
}

func (f *framer) Read(p []byte) (int, error) {
	n, err := f.in.Read(p)
	f.feed(p[:n])
	if err == io.EOF {
		f.end()
	}
	return n, err
}

func (f *framer) feed(b []byte) {
	for len(b) > 0 {
		if f.lost {
			f.off += int64(len(b))
			return
		}
		if f.hdrN < f.want {
			k := copy(f.hdr[f.hdrN:f.want], b)
			f.hdrN += k
			f.off += int64(k)
			b = b[k:]
			if f.hdrN == f.want {
				f.header()
			}
			continue
		}
		k := int64(len(b))
		if k > f.body {
			k = f.body
		}
		f.body -= k
		f.off += k
		b = b[k:]
		if f.body == 0 {
			f.next()
		}
	}
}

// header: the current unit's header is complete.
func (f *framer) header() {
	switch f.unit {
	case unitMagic:
		switch binary.BigEndian.Uint32(f.hdr[:4]) {
		case magicPcapng:
			f.ng, f.unit, f.want = true, unitBlock, 12
		case magicPcapUs, magicPcapNs:
			f.order, f.unit, f.want = binary.BigEndian, unitFileHeader, 24
		case magicPcapUsSwap, magicPcapNsSwap:
			f.order, f.unit, f.want = binary.LittleEndian, unitFileHeader, 24
		default:
			f.lost = true // not a capture: newReader says so
		}
		return
	case unitFileHeader:
		f.snap = f.order.Uint32(f.hdr[16:20])
		f.next()
		return
	case unitRecord:
		// A record pcapgo refuses (longer than the snaplen and than any
		// real snaplen, or than the frame it holds) is damage, not a cut:
		// the framer leaves it to pcapgo.
		caplen, orig := f.order.Uint32(f.hdr[8:12]), f.order.Uint32(f.hdr[12:16])
		if caplen > max(f.snap, maxSnaplen) || caplen > orig {
			f.lose(nil) // pcapgo says which
			return
		}
		f.total = int64(caplen)
		f.body = f.total
	case unitBlock:
		f.typ = binary.LittleEndian.Uint32(f.hdr[0:4]) // SHB's type reads the same either way
		if f.typ == blockSHB {
			if f.order = shbOrder(f.hdr[8:12]); f.order == nil {
				f.lose(nil)
				return
			}
		} else if f.order == nil {
			f.lose(nil)
			return
		}
		f.typ = f.order.Uint32(f.hdr[0:4])
		f.total = int64(f.order.Uint32(f.hdr[4:8]))
		if f.total < 12 || f.total%4 != 0 {
			f.lose(fmt.Errorf("%s at byte %d says it is %d bytes long (a block is a multiple of 4 bytes, 12 or more)", blockName(f.typ), f.start, f.total))
			return
		}
		f.body = f.total - 12
	}
	if f.body == 0 {
		f.next()
	}
}

// next: the current unit is complete; the next one starts here.
func (f *framer) next() {
	switch {
	case f.unit == unitRecord:
		f.frames++
	case f.unit == unitBlock && (f.typ == blockEPB || f.typ == blockSPB || f.typ == blockPB):
		f.frames++
	}
	if f.unit == unitFileHeader {
		f.unit = unitRecord
	}
	f.start, f.hdrN, f.body = f.off, 0, 0
	f.want = 16
	if f.ng {
		f.want = 12
	}
}

// lostAt is where the framer found a length that makes no sense, and
// why (nil: pcapgo's error says it).
type lostAt struct {
	offset int64
	frame  int // complete frames before it
	why    error
}

// lose: the current unit's header makes no sense; the framer follows the
// file no further.
func (f *framer) lose(why error) {
	f.lost = true
	f.bad = lostAt{offset: f.start, frame: f.frames, why: why}
}

// corruptAt is the damage to report for an error pcapgo gave while
// reading frame index, which began at byte start.
func (f *framer) corruptAt(index int, start int64, err error) *CorruptError {
	e := &CorruptError{Name: f.name, Frame: index, Offset: start, Err: err}
	if f.lost && f.bad.frame == index {
		e.Offset = f.bad.offset
		if f.bad.why != nil {
			e.Err = f.bad.why
		}
	}
	return e
}

// end: the input ended. Unless that is between two units, the file is
// truncated.
func (f *framer) end() {
	if f.lost || f.trunc != nil || (f.hdrN == 0 && f.unit != unitMagic) {
		return
	}
	if f.unit == unitMagic && f.hdrN == 0 {
		return // an empty file: newReader says so
	}
	t := &TruncatedError{Name: f.name, Frame: f.frames, Offset: f.start, Have: f.off - f.start}
	switch {
	case f.unit == unitMagic || f.unit == unitFileHeader:
		t.What, t.Want = "file header", 24
		if f.ng {
			t.What, t.Want = "block header", 12
		}
	case f.hdrN < f.want && f.unit == unitRecord:
		t.What, t.Want, t.packet = "record header", 16, true
	case f.hdrN < f.want:
		t.What, t.Want = "block header", 12
	case f.unit == unitRecord:
		t.What, t.Want, t.Have, t.packet = "record", f.total, f.off-f.start-16, true
	default:
		t.What, t.Want = blockName(f.typ), f.total
		t.packet = f.typ == blockEPB || f.typ == blockSPB || f.typ == blockPB
	}
	f.trunc = t
}

// shbOrder is the byte order a Section Header Block's byte-order magic
// (its bytes 8 to 11) says the section is written in, or nil.
func shbOrder(magic []byte) binary.ByteOrder {
	switch binary.BigEndian.Uint32(magic) {
	case 0x1A2B3C4D:
		return binary.BigEndian
	case 0x4D3C2B1A:
		return binary.LittleEndian
	}
	return nil
}

func blockName(typ uint32) string {
	switch typ {
	case blockSHB:
		return "Section Header Block"
	case blockIDB:
		return "Interface Description Block"
	case blockPB:
		return "Packet Block"
	case blockSPB:
		return "Simple Packet Block"
	case blockISB:
		return "Interface Statistics Block"
	case blockEPB:
		return "Enhanced Packet Block"
	}
	return fmt.Sprintf("block of type %#x", typ)
}

// truncatedAt is the truncation to report for an error pcapgo gave while
// reading frame index (or the file's header, index 0): the framer's, if
// the file is cut and no complete frame lies between index and the cut.
func (f *framer) truncatedAt(index int) *TruncatedError {
	if f.trunc != nil && f.trunc.Frame <= index {
		return f.trunc
	}
	return nil
}
