// Package pcapio reads classic pcap and pcapng captures through one
// interface, telling the two apart by their magic number, and hands out
// every frame as an Ethernet frame: Ethernet captures as they are, Linux
// cooked (tcpdump -i any) and raw-IP captures as the Ethernet frames they
// stand for (see Record.LinkType). A file that is cut short or damaged is
// read up to the damage, which is then reported as an error naming the
// frame and the byte offset (*TruncatedError, *CorruptError), as tshark
// reads such a file.
//
// # Link types
//
// Link types read besides Ethernet, as the tcpdump.org list numbers them
// (https://www.tcpdump.org/linktypes.html, pcap-linktype(7)):
//
//   - Linux cooked captures, what `tcpdump -i any` and `dumpcap -i any`
//     write: LINKTYPE_LINUX_SLL (113), a 16-byte header (packet type,
//     ARPHRD_ type, address length, 8 bytes of address, protocol), and
//     LINKTYPE_LINUX_SLL2 (276), 20 bytes (protocol, reserved, interface
//     index, ARPHRD_ type, packet type, address length, 8 bytes of
//     address);
//   - raw IP: LINKTYPE_RAW (101, the packet begins with an IPv4 or IPv6
//     header), LINKTYPE_IPV4 (228) and LINKTYPE_IPV6 (229), and the
//     DLT_RAW values some platforms wrote into files before LINKTYPE_RAW
//     existed: 12 (DLT_RAW on most platforms) and 14 (on OpenBSD and
//     BSD/OS), read as raw IP as Wireshark reads them.
//
// Every reader of this package parses Ethernet frames, so [Reader.Next] hands out
// the Ethernet frame such a frame stands for: its own header is replaced
// by a 14-byte Ethernet header, and the rest of the frame follows as it
// was captured.
//
// Source MAC: a cooked header's link-layer address when it is 6 bytes
// long (ARPHRD_ETHER and ARPHRD_LOOPBACK). Linux records the address of
// the frame's sender in every packet type, an outgoing frame's included
// (it is then the capturing interface's own), so it is the source MAC
// whatever the direction. Other lengths (0 on tun devices, 20 for
// InfiniBand) and raw IP give zero.
//
// Destination MAC: neither format records it. A cooked frame of packet
// type broadcast gets ff:ff:ff:ff:ff:ff, one of packet type multicast the
// group MAC of its IPv4 (01:00:5e + the low 23 bits) or IPv6 (33:33 + the
// low 32 bits) destination; every other frame gets 00:00:00:00:00:00, which
// no Ethernet card is assigned (only Linux's loopback device takes it as its
// own), so a reader cannot mistake it for another host's.
//
// EtherType: the cooked header's protocol; raw IP's by the version in the
// first nibble (4: 0x0800, 6: 0x86DD), or by the link type for LINKTYPE_IPV4
// and LINKTYPE_IPV6. When that is not an EtherType — a cooked protocol
// below 0x0600 (0x0004 for an 802.2 LLC frame such as a spanning-tree
// BPDU, 0x0001 Novell 802.3, 0x000C CAN), an ARPHRD_ type whose protocol
// field means something else (ARPHRD_FRAD 770, ARPHRD_IEEE80211_RADIOTAP
// 803, ARPHRD_NETLINK 824), or raw IP of another version — the field holds
// an IEEE 802.3 length instead (the rest of the frame's original length,
// at most 1500), as an 802.3 frame's does: a parser reads an 802.2 frame,
// never IP or RoCE.
//
// Lengths: Info.CaptureLength and Info.Length both grow (raw IP: by 14) or
// shrink (SLL: by 2, SLL2: by 6) by the difference of the headers, so
// CaptureLength < Length still says the snaplen cut the frame
// ([Record.Snapped]).
//
// # Records too long
//
// A record that claims more than 262144 captured bytes (libpcap's
// MAXIMUM_SNAPLEN, the most tshark reads of a frame: a 9000-byte jumbo
// frame fits 29 times), in a pcap whatever its snaplen or in any pcapng
// packet block, or a pcapng packet block longer than 1 MiB, is damage: it
// is refused as a *CorruptError naming the frame and the claim, before
// its bytes are read, so that a damaged or hostile length costs no memory
// (tshark refuses such a file as damaged too).
package pcapio

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Record is one captured frame, as an Ethernet frame (see Next).
type Record struct {
	// Data is the frame's captured bytes. They are the record's own: Next
	// never writes over them (records read by one Reader share larger
	// allocations, so keeping one keeps up to 1 MiB of its neighbours).
	Data []byte
	// Info.CaptureLength is len(Data) and Info.Length the frame's length
	// on the wire, both counted with the Ethernet header Data begins with
	// (see LinkType); Info.InterfaceIndex is the pcapng interface (0 in a
	// classic pcap). Info.AncillaryData is nil.
	Info     gopacket.CaptureInfo
	Comments []string // pcapng packet comments (fault annotations), less the line feed that ends each (see Writer)
	// LinkType is the link type the frame was captured with, as the file
	// (classic pcap) or its interface (pcapng) says: Ethernet, whose
	// frames are Data as captured, or LinkTypeLinuxSLL, LinkTypeLinuxSLL2,
	// LinkTypeRaw, LinkTypeIPv4, LinkTypeIPv6 (or DLT_RAW's 12 or 14),
	// whose link-layer header Next replaced by the 14-byte Ethernet header
	// it stands for (the package comment says how: the destination MAC
	// is unknown, zero for a unicast frame). A Record not made by a
	// Reader has 0 here.
	LinkType layers.LinkType
	// Digest is the Reader's digest function's value of Data, when it
	// has one (SetDigest) and Next returned the record without an error;
	// 0 otherwise.
	Digest uint64
	// PacketType is a Linux cooked frame's packet type, which says its
	// direction: LinuxSLLPacketTypeOutgoing for a frame the capturing host
	// sent, Host, Broadcast, Multicast or Otherhost for one it received.
	// It is zero (Host) for every other link type: check LinkType first.
	PacketType layers.LinuxSLLPacketType
}

// Snapped reports whether the capture's snaplen cut the frame: fewer bytes
// were captured (Info.CaptureLength) than the frame had on the wire
// (Info.Length). A snapped frame's headers may be whole but its payload
// and trailer (a RoCE frame's ICRC) are not, so a reader that checks
// them excludes it and counts it; tshark marks such a frame "[Packet size
// limited during capture]".
func (r Record) Snapped() bool { return r.Info.CaptureLength < r.Info.Length }

// Reader yields the records of a capture.
type Reader struct {
	name  string
	fr    *framer
	br    *bufio.Reader // between the framer and pcapgo
	f     *os.File
	pcap  *pcapgo.Reader
	ng    *pcapgo.NgReader
	index int
	lt    layers.LinkType // a classic pcap's link type
	err   error           // io.EOF, *TruncatedError or *CorruptError: Next returns it again
	slab  []byte          // where the next records' Data are carved from
	// borrow: Data is the reader's until the next call (see Borrow).
	borrow  bool
	scratch []byte
	// plain reads a regular pcapng file until a block it leaves to
	// pcapgo (nil: pcapgo reads it all).
	plain *plainNg
	// digest makes Record.Digest (nil: none).
	digest func([]byte) uint64
	// readAheadDigests counts the records whose digest the read-ahead
	// made (for the tests).
	readAheadDigests int
}

// SetDigest has every record's Digest made by f, a function of the
// record's Data alone that is safe to call from another goroutine: the
// plain path calls it as it reads ahead, beside the caller's work on
// earlier records, and Next for any record it did not reach. Set it
// before the first Next.
func (r *Reader) SetDigest(f func([]byte) uint64) {
	r.digest = f
	if r.plain != nil {
		r.plain.ra.setDigest(f)
	}
}

// Borrow makes Next return records whose Data belong to the reader and
// stay valid only until the next call to Next: nothing is copied for an
// Ethernet frame and nothing allocated per record. A caller that reads
// each frame once and keeps none of its bytes (a checker's pass) wants
// it; one that keeps records must not set it.
func (r *Reader) Borrow() {
	r.borrow = true
	if r.plain != nil {
		r.plain.reuse = true
	}
}

const (
	magicPcapUs     = 0xA1B2C3D4
	magicPcapNs     = 0xA1B23C4D
	magicPcapng     = 0x0A0D0D0A
	magicPcapUsSwap = 0xD4C3B2A1
	magicPcapNsSwap = 0x4D3CB2A1
)

// Open opens a pcap or pcapng file (of the link types Record.LinkType
// lists).
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if r := openPlain(path, f); r != nil {
		return r, nil
	}
	r, err := newReader(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.f = f
	return r, nil
}

// openPlain reads a regular pcapng file on the plain path (see plainNg),
// or returns nil with f back at its start.
func openPlain(path string, f *os.File) *Reader {
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return nil
	}
	if p, ok := newPlainNg(f); ok {
		return &Reader{name: path, f: f, plain: p}
	}
	f.Seek(0, io.SeekStart) // a regular file seeks
	return nil
}

// leavePlain hands the file to pcapgo at the block plainNg left to it:
// the file is read again from its start, and the records already
// returned are skipped.
func (r *Reader) leavePlain() {
	index, borrow, digest := r.index, r.borrow, r.digest
	r.plain.close()
	if _, err := r.f.Seek(0, io.SeekStart); err != nil {
		r.err = &CorruptError{Name: r.name, Frame: index, Err: err}
		return
	}
	s, err := newReader(r.name, r.f)
	if err != nil {
		r.err = &CorruptError{Name: r.name, Frame: index, Err: err}
		return
	}
	s.f, s.borrow = r.f, true
	for s.index < index {
		var sk *SkippedError
		if _, err := s.Next(); err != nil && !errors.As(err, &sk) {
			break // s.err: returned from here on
		}
	}
	s.borrow, s.digest = borrow, digest
	*r = *s
}

// NewReader reads a capture from r; name is used in error messages.
func NewReader(name string, r io.Reader) (*Reader, error) { return newReader(name, r) }

func newReader(name string, in io.Reader) (*Reader, error) {
	fr := newFramer(name, in)
	br := bufio.NewReaderSize(fr, 1<<16)
	head, err := br.Peek(4)
	if err != nil {
		return nil, fmt.Errorf("%s: too short to be a capture (%d bytes)", name, len(head))
	}
	r := &Reader{name: name, fr: fr, br: br}
	var lt layers.LinkType
	switch binary.BigEndian.Uint32(head) {
	case magicPcapng:
		// Each interface may have its own link type: Next reads each
		// frame's (pcapgo would otherwise skip, without a word, the
		// frames of every interface whose link type differs from the
		// first's).
		r.ng, err = pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		lt = layers.LinkTypeEthernet
	case magicPcapUs, magicPcapNs, magicPcapUsSwap, magicPcapNsSwap:
		r.pcap, err = pcapgo.NewReader(br)
		if err == nil {
			lt = r.pcap.LinkType()
		}
	default:
		return nil, fmt.Errorf("%s: not a pcap or pcapng file (magic %x)", name, head)
	}
	if t := fr.truncatedAt(0); err != nil && t != nil {
		return nil, t
	}
	if err != nil {
		return nil, fmt.Errorf("%s: bad capture header: %v", name, err)
	}
	if !readableLinkType(lt) {
		return nil, fmt.Errorf("%s: link type %d (%s): %s", name, lt, lt, wantLinkTypes)
	}
	r.lt = lt
	return r, nil
}

// Next returns the next record, as an Ethernet frame (see Record), or:
//
//   - io.EOF at a clean end of file (between two records);
//   - a *TruncatedError where the file is cut short (inside a record, a
//     record header or a pcapng block: a copy that did not finish, a
//     capture killed mid-write);
//   - a *CorruptError where the file is damaged (a record or block whose
//     lengths or fields make no sense, or that claims a frame longer than
//     any capture holds: see the package comment);
//   - a *SkippedError naming a frame Next cannot turn into Ethernet (a
//     cooked header cut by the snaplen, an interface of a link type not
//     listed at Record.LinkType), returned with the frame's Record
//     without Data (its time, interface and lengths): that frame is
//     skipped, and the next call reads on.
//
// Every complete record before the cut or the damage is returned first,
// and after io.EOF, a *TruncatedError or a *CorruptError, Next returns
// the same again: the reader stops where tshark stops (see ReadAll).
func (r *Reader) Next() (Record, error) {
	rec, err := r.next()
	// Every record returned whole has a digest, an empty one too (pcapgo
	// hands out an empty frame as nil Data, the plain path as empty).
	if r.digest != nil && err == nil {
		if r.plain != nil && r.plain.hasDigest && rec.LinkType == layers.LinkTypeEthernet {
			// The plain path hands an Ethernet frame's bytes out as read.
			rec.Digest = r.plain.digest
			r.readAheadDigests++
		} else {
			rec.Digest = r.digest(rec.Data)
		}
	}
	return rec, err
}

func (r *Reader) next() (Record, error) {
	if r.err != nil {
		return Record{}, r.err
	}
	var rec Record
	var data []byte
	var err error
	if r.plain != nil {
		r.plain.ra.open()
		data, rec.Info, rec.Comments, rec.LinkType, err = r.plain.next()
		switch err {
		case nil:
			// Data the plain path hands out is never written over unless
			// borrowed.
			return r.record(rec, data, true)
		case io.EOF:
			r.err = io.EOF
			return Record{}, io.EOF
		}
		r.leavePlain()
		if r.err != nil {
			return Record{}, r.err
		}
	}
	start := r.offset()
	lt := r.lt
	if r.ng != nil {
		// Zero-copy: data is pcapgo's buffer until the next read, and the
		// frame is copied out of it below, once, with its new header.
		var opts pcapgo.NgPacketOptions
		data, rec.Info, opts, err = r.ng.ZeroCopyReadPacketDataWithOptions()
		rec.Comments = opts.Comments
		for i, c := range rec.Comments {
			rec.Comments[i] = commentText(c)
		}
		lt = layers.LinkTypeEthernet
		if len(rec.Info.AncillaryData) > 0 {
			lt, _ = rec.Info.AncillaryData[0].(layers.LinkType)
		}
		rec.Info.AncillaryData = nil // pcapgo's, reused
	} else {
		data, rec.Info, err = r.pcap.ZeroCopyReadPacketData()
	}
	switch t := r.fr.truncatedAt(r.index); {
	case err == nil && rec.Info.CaptureLength != len(data):
		r.err = &CorruptError{Name: r.name, Frame: r.index, Offset: start,
			Err: fmt.Errorf("record length %d does not match %d data bytes", rec.Info.CaptureLength, len(data))}
	case err == nil && rec.Info.CaptureLength > rec.Info.Length:
		// pcapgo checks this for classic pcap only.
		r.err = &CorruptError{Name: r.name, Frame: r.index, Offset: start,
			Err: fmt.Errorf("capture length exceeds original packet length: %d > %d", rec.Info.CaptureLength, rec.Info.Length)}
	case err == nil:
	case t != nil:
		r.err = t
	case err == io.EOF:
		r.err = io.EOF
	default:
		r.err = r.fr.corruptAt(r.index, start, err)
	}
	if r.err != nil {
		return Record{}, r.err
	}
	rec.LinkType = lt
	return r.record(rec, data, false)
}

// record finishes the record of a frame read as Next returns it; data is
// the reader's until the next read, or, when kept, for good.
func (r *Reader) record(rec Record, data []byte, kept bool) (Record, error) {
	index := r.index
	r.index++
	lt := rec.LinkType
	if lt == layers.LinkTypeEthernet {
		if r.borrow || kept {
			rec.Data = data[:len(data):len(data)]
			return rec, nil
		}
		rec.Data = r.alloc(len(data))
		copy(rec.Data, data)
		return rec, nil
	}
	var h [14]byte
	strip, pt, err := ethernetHeader(lt, data, rec.Info.Length, &h)
	if err != nil {
		sk := &SkippedError{Name: r.name, Frame: index, Interface: -1, Err: err}
		if names := r.Interfaces(); rec.Info.InterfaceIndex < len(names) {
			sk.Interface, sk.InterfaceName = rec.Info.InterfaceIndex, names[rec.Info.InterfaceIndex]
		}
		// The record's place, time and lengths stay, so a reader can keep
		// Wireshark's frame numbering; it has no Data.
		return rec, sk
	}
	if r.borrow {
		n := 14 + len(data) - strip
		r.scratch = slices.Grow(r.scratch[:0], n)
		rec.Data = r.scratch[:n:n]
	} else {
		rec.Data = r.alloc(14 + len(data) - strip)
	}
	copy(rec.Data, h[:])
	copy(rec.Data[14:], data[strip:])
	rec.Info.CaptureLength += 14 - strip
	rec.Info.Length += 14 - strip
	rec.PacketType = pt
	return rec, nil
}

// slabSize is the allocation records' Data are carved from: one
// allocation for many frames instead of one each.
const slabSize = 64 << 10

// alloc returns n bytes no other record uses, with no room to append in
// place.
func (r *Reader) alloc(n int) []byte {
	if n > len(r.slab) {
		if n > slabSize/4 {
			return make([]byte, n)
		}
		r.slab = make([]byte, slabSize)
	}
	b := r.slab[:n:n]
	r.slab = r.slab[n:]
	return b
}

// offset is how many bytes of the file pcapgo has consumed.
func (r *Reader) offset() int64 { return r.fr.off - int64(r.br.Buffered()) }

// Close closes the underlying file, if Open opened one.
func (r *Reader) Close() error {
	if r.plain != nil {
		r.plain.close()
	}
	if r.f != nil {
		return r.f.Close()
	}
	return nil
}

// ReadAll reads every record of the file at path. On an error it returns
// the records read before it too (Reader.All). A file cut short gives
// every complete record and a *TruncatedError: tshark -r reads such a
// file the same way, printing every complete frame and then "The file
// ... appears to have been cut short in the middle of a packet" on
// stderr, and exits with status 2 (TShark 4.0; a damaged file: every
// frame before the damage, "appears to be damaged or corrupt", status 2
// too). A caller that takes any error as fatal refuses such a file as it
// always did; one that reads a cut file as tshark does checks
// errors.As(err, &te) for a *TruncatedError, warns, and keeps the records.
func ReadAll(path string) ([]Record, error) {
	recs, _, err := ReadAllNamed(path)
	return recs, err
}

// ReadAllNamed reads every record of the file at path and the names of its
// pcapng interfaces (nil for a pcap file). On an error it returns the
// records before it and the interfaces read so far too: see ReadAll.
func ReadAllNamed(path string) ([]Record, []string, error) {
	r, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	return r.All()
}

// All reads the remaining records and the names of the pcapng interfaces
// (nil for a pcap file). On an error it returns the records before it
// too, and the error: a *TruncatedError or *CorruptError after every
// complete record of a cut or damaged file (see ReadAll), or the error
// Next gave for a frame it could not read as Ethernet.
func (r *Reader) All() ([]Record, []string, error) {
	var out []Record
	for {
		rec, err := r.Next()
		if err == io.EOF {
			return out, r.Interfaces(), nil
		}
		if err != nil {
			return out, r.Interfaces(), err
		}
		out = append(out, rec)
	}
}

// SectionComment is the pcapng Section Header Block's comment (empty for
// a pcap file or a section without one; see WallClock).
func (r *Reader) SectionComment() string {
	switch {
	case r.plain != nil:
		return r.plain.comment
	case r.ng != nil:
		return commentText(r.ng.SectionInfo().Comment)
	}
	return ""
}

// Interfaces are the names of the pcapng interfaces read so far (all of
// them once Next has returned io.EOF); nil for a pcap file.
func (r *Reader) Interfaces() []string {
	if r.plain != nil {
		return r.plain.names()
	}
	if r.ng == nil {
		return nil
	}
	names := make([]string, r.ng.NInterfaces())
	for i := range names {
		if ifc, err := r.ng.Interface(i); err == nil {
			names[i] = ifc.Name
		}
	}
	return names
}

// Writer writes a pcapng capture with one interface per named port and
// packet comments (fault annotations), each ended by a line feed so that
// scapy reads it as well as tshark (see commentLines). Timestamps are
// virtual nanoseconds from the Unix epoch, so a capture of the same run
// is the same bytes.
type Writer struct {
	w     *pcapgo.NgWriter
	names map[string]int
}

// NewWriter starts a pcapng capture on out with the given interfaces, in
// order (interface i is names[i]).
func NewWriter(out io.Writer, names ...string) (*Writer, error) {
	return newWriter(out, "", names...)
}

// NewWallClockWriter is NewWriter for a capture whose timestamps are the
// wall clock (faultwire's, between processes that run on a real machine):
// its Section Header Block carries the comment WallClockComment, so that
// a reader (inaemu check) knows how its times were taken. Captures of
// the emulator, on its virtual clock, carry no such comment.
func NewWallClockWriter(out io.Writer, names ...string) (*Writer, error) {
	return newWriter(out, WallClockComment, names...)
}

// WallClockComment is the Section Header Block comment (shb_comment) of a
// capture taken on the wall clock (NewWallClockWriter).
const WallClockComment = "inaemu: clock=wall"

// WallClock reports whether a capture's section comment (Reader's
// SectionComment) says it was taken on the wall clock.
func WallClock(sectionComment string) bool {
	for line := range strings.SplitSeq(sectionComment, "\n") {
		if strings.TrimSpace(line) == WallClockComment {
			return true
		}
	}
	return false
}

func newWriter(out io.Writer, comment string, names ...string) (*Writer, error) {
	if len(names) == 0 {
		return nil, errors.New("pcapio: a capture needs at least one interface")
	}
	opts := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "inaemu", Comment: comment}}
	first := pcapgo.NgInterface{Name: names[0], LinkType: layers.LinkTypeEthernet, SnapLength: 0, TimestampResolution: 9}
	ng, err := pcapgo.NewNgWriterInterface(out, first, opts)
	if err != nil {
		return nil, err
	}
	w := &Writer{w: ng, names: map[string]int{names[0]: 0}}
	for _, n := range names[1:] {
		id, err := ng.AddInterface(pcapgo.NgInterface{Name: n, LinkType: layers.LinkTypeEthernet, TimestampResolution: 9})
		if err != nil {
			return nil, err
		}
		w.names[n] = id
	}
	return w, nil
}

// Write adds one frame seen on interface iface at virtual time ns.
func (w *Writer) Write(iface string, ns int64, frame []byte, comments ...string) error {
	id, ok := w.names[iface]
	if !ok {
		return fmt.Errorf("pcapio: unknown interface %q", iface)
	}
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, ns).UTC(), CaptureLength: len(frame), Length: len(frame), InterfaceIndex: id}
	return w.w.WritePacketWithOptions(ci, frame, pcapgo.NgPacketOptions{Comments: commentLines(comments)})
}

// Interface is the index of the named interface, for WriteIndex.
func (w *Writer) Interface(name string) (int, bool) {
	id, ok := w.names[name]
	return id, ok
}

// WriteIndex adds one frame seen on interface id (from Interface or the
// order given to NewWriter) at virtual time ns.
func (w *Writer) WriteIndex(id int, ns int64, frame []byte, comments ...string) error {
	if id < 0 || id >= len(w.names) {
		return fmt.Errorf("pcapio: no interface %d", id)
	}
	ci := gopacket.CaptureInfo{Timestamp: time.Unix(0, ns).UTC(), CaptureLength: len(frame), Length: len(frame), InterfaceIndex: id}
	return w.w.WritePacketWithOptions(ci, frame, pcapgo.NgPacketOptions{Comments: commentLines(comments)})
}

// commentLines are the comments as the Writer writes them (opt_comment
// options, one each): each ended by a line feed, as scapy writes them.
// scapy 2.5 (Debian 12's) reads a comment as the text before its first
// line feed and drops one that has none ("invalid comment option"),
// though the pcapng draft asks for none (line separators may appear in a
// comment); tshark and pcapgo read the line feed as part of the comment,
// and the Reader takes it off again (commentText). scapy 2.5 keeps only
// the last of several comments of a frame; the emulator writes one.
func commentLines(comments []string) []string {
	if len(comments) == 0 {
		return nil
	}
	out := make([]string, len(comments))
	for i, c := range comments {
		out[i] = c + "\n"
	}
	return out
}

// commentText is a packet comment as it was given to the writer: less
// the line feed the Writer (or scapy) ends it with.
func commentText(c string) string { return strings.TrimSuffix(c, "\n") }

// Flush writes buffered data.
func (w *Writer) Flush() error { return w.w.Flush() }
