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
	// refused: the current unit's header is refused (it claims more than
	// a frame may hold, see maxFrame, or is a packet block too short for
	// its header); nothing after it is passed on, so pcapgo fails there
	// instead of reading the claim into memory.
	refused bool

	off   int64    // bytes read so far
	start int64    // offset of the current unit (header, record or block)
	hdr   [28]byte // the longest header read: an Enhanced Packet Block's up to its captured length
	hdrN  int      // header bytes of the current unit held
	want  int      // header length of the current unit
	body  int64    // bytes of the current unit still to come after its header
	total int64    // the current unit's declared length: data (pcap) or whole block (pcapng)
	unit  unitKind
	ng    bool
	order binary.ByteOrder
	typ   uint32 // pcapng: the current block's type
	// snap is a pcap's file header's snaplen, or the snaplen of a pcapng
	// section's first interface (pcapgo cuts a Simple Packet Block's
	// frame to it); ifaces counts the section's interfaces.
	snap   uint32
	ifaces int
	// frames counts complete packet records or blocks.
	frames int
	// idb is the current Interface Description Block's body after its
	// 16-byte header (up to maxIDBOptions bytes), links what the
	// section's blocks said of their links (Reader.InterfaceLinks: pcapgo
	// drops if_speed), sections how many Section Header Blocks began.
	idb      []byte
	links    []Interface
	sections int
	lost     bool // a length field made no sense: pcapgo reports the file as corrupt
	bad      lostAt
	trunc    *TruncatedError
}

// maxSnaplen is libpcap's MAXIMUM_SNAPLEN, the longest record pcapgo (and
// tshark) reads from a classic pcap whose snaplen is no longer.
const maxSnaplen = 262144

// maxFrame is the most captured bytes a record may claim, in a pcap or a
// pcapng file, whatever snaplen the file declares: a record claiming more
// is damage (or a hostile file), refused as a *CorruptError before its
// bytes are read, so a claim costs no memory. It is libpcap's
// MAXIMUM_SNAPLEN, the most tshark reads of an Ethernet frame too (it
// refuses such a file as damaged), and 29 times a 9000-byte jumbo frame.
// An interface's own smaller snaplen is not enforced: writers that do
// not cut frames to it exist (see pcapgo's SetSnaplen), and tshark reads
// their frames.
const maxFrame = maxSnaplen

// maxPacketBlock is the longest pcapng packet block read: a frame of
// maxFrame bytes and its options (comments: inaemu's are a line each)
// with room to spare. pcapgo keeps every comment of a block, and the
// plain path holds the whole block, so a longer one is refused as
// damage, as maxFrame is.
const maxPacketBlock = 1 << 20

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
	if f.refused {
		return 0, f.bad.why
	}
	n, err := f.in.Read(p)
	n = f.feed(p[:n])
	if f.refused {
		return n, nil // the next Read says why
	}
	if err == io.EOF {
		f.end()
	}
	return n, err
}

// feed follows b's bytes, and returns how many of them to pass on: all,
// or those up to the end of a header it refused.
func (f *framer) feed(b []byte) int {
	n := len(b)
	for len(b) > 0 {
		if f.lost {
			f.off += int64(len(b))
			return n
		}
		if f.hdrN < f.want {
			k := copy(f.hdr[f.hdrN:f.want], b)
			f.hdrN += k
			f.off += int64(k)
			b = b[k:]
			if f.hdrN == f.want {
				f.header()
				if f.refused {
					return n - len(b)
				}
			}
			continue
		}
		k := int64(len(b))
		if k > f.body {
			k = f.body
		}
		if f.unit == unitBlock && f.typ == blockIDB && f.want == 16 && len(f.idb) < maxIDBOptions {
			f.idb = append(f.idb, b[:min(k, int64(maxIDBOptions-len(f.idb)))]...)
		}
		f.body -= k
		f.off += k
		b = b[k:]
		if f.body == 0 {
			f.next()
		}
	}
	return n
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
		if caplen > maxFrame { // a snaplen of more than maxSnaplen lets pcapgo read it
			f.refuse(fmt.Errorf("record claims a %d-byte frame, more than the %d bytes a frame may hold", caplen, maxFrame))
			return
		}
		f.total = int64(caplen)
		f.body = f.total
	case unitBlock:
		if !f.block() {
			return
		}
	}
	if f.body == 0 {
		f.next()
	}
}

// block reads the header of the current pcapng block, the 12 bytes every
// block begins with and then, for an Interface Description Block or an
// Enhanced or obsolete Packet Block, the rest of the fields up to its
// snaplen or captured length. It sets how much of the block is left and
// returns true, or false when it needs more of the header or follows the
// file no further: a length that makes no sense, a packet block shorter
// than its header, or one claiming more than a frame may hold (refused:
// pcapgo would read the claim into memory).
func (f *framer) block() bool {
	if f.hdrN == 12 {
		f.typ = binary.LittleEndian.Uint32(f.hdr[0:4]) // SHB's type reads the same either way
		if f.typ == blockSHB {
			if f.order = shbOrder(f.hdr[8:12]); f.order == nil {
				f.lose(nil)
				return false
			}
		} else if f.order == nil {
			f.lose(nil)
			return false
		}
		f.typ = f.order.Uint32(f.hdr[0:4])
		f.total = int64(f.order.Uint32(f.hdr[4:8]))
		if f.total < 12 || f.total%4 != 0 {
			f.lose(fmt.Errorf("%s at byte %d says it is %d bytes long (a block is a multiple of 4 bytes, 12 or more)", blockName(f.typ), f.start, f.total))
			return false
		}
		head, least := blockHead(f.typ)
		switch {
		case f.total < least && f.typ != blockIDB:
			// pcapgo would read its fields from the next block.
			f.refuse(fmt.Errorf("%s at byte %d says it is %d bytes long, shorter than its %d-byte header", blockName(f.typ), f.start, f.total, least))
			return false
		case f.total >= least && head > 12:
			f.want = int(head)
			return false
		case f.typ == blockSHB:
			f.ifaces, f.snap = 0, 0
			f.links, f.sections = f.links[:0], f.sections+1
		}
	}
	// The frame pcapgo will read into memory: an Enhanced or obsolete
	// Packet Block's captured length, a Simple Packet Block's original
	// length cut to the snaplen.
	var claim uint32
	switch f.typ {
	case blockIDB:
		if f.want == 16 && f.ifaces == 0 {
			f.snap = f.order.Uint32(f.hdr[12:16])
		}
		f.ifaces++
	case blockEPB, blockPB:
		claim = f.order.Uint32(f.hdr[20:24])
	case blockSPB:
		claim = f.order.Uint32(f.hdr[8:12])
		if f.snap != 0 {
			claim = min(claim, f.snap)
		}
	}
	packet := f.typ == blockEPB || f.typ == blockPB || f.typ == blockSPB
	switch {
	case claim > maxFrame:
		f.refuse(fmt.Errorf("%s claims a %d-byte frame, more than the %d bytes a frame may hold", blockName(f.typ), claim, maxFrame))
		return false
	case packet && f.total > maxPacketBlock:
		f.refuse(fmt.Errorf("%s says it is %d bytes long, more than the %d bytes a packet block may take", blockName(f.typ), f.total, maxPacketBlock))
		return false
	}
	f.body = f.total - int64(f.want)
	return true
}

// next: the current unit is complete; the next one starts here.
func (f *framer) next() {
	switch {
	case f.unit == unitRecord:
		f.frames++
	case f.unit == unitBlock && (f.typ == blockEPB || f.typ == blockSPB || f.typ == blockPB):
		f.frames++
	case f.unit == unitBlock && f.typ == blockIDB && f.want == 16:
		var in Interface
		if int64(len(f.idb)) == f.total-16 && len(f.idb) >= 4 {
			in = readIDBOptions(f.order, f.idb[:len(f.idb)-4])
		}
		f.links, f.idb = append(f.links, in), f.idb[:0]
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

// blockHead is how many bytes of a block of type typ the framer reads
// as its header, and the length of the shortest such block.
func blockHead(typ uint32) (head, least int64) {
	switch typ {
	case blockIDB:
		return 16, 20
	case blockEPB, blockPB:
		return 28, 32
	case blockSPB:
		return 12, 16
	}
	return 12, 12
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

// refuse: the current unit's header is damage pcapgo must not read past
// (it would read the claim into memory); the framer passes on nothing
// after it.
func (f *framer) refuse(why error) {
	f.lose(why)
	f.refused = true
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
	case f.hdrN < 12: // (a block's header goes on up to 28 bytes, read as its body)
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
