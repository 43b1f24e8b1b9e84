// Package pcapio reads classic pcap and pcapng captures of Ethernet frames
// through one interface, telling the two apart by their magic number, and
// turns every way a file can be broken into an error that names the frame.
package pcapio

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
)

// Record is one captured frame, as an Ethernet frame (see Next).
type Record struct {
	Data     []byte
	Info     gopacket.CaptureInfo
	Comments []string // pcapng packet comments (fault annotations)
	// LinkType is the link type the frame was captured with (Ethernet,
	// or a type Next turned into Ethernet).
	LinkType layers.LinkType
}

// Snapped reports whether the capture's snaplen cut the frame: fewer bytes
// were captured than the frame had.
func (r Record) Snapped() bool { return r.Info.CaptureLength < r.Info.Length }

// Reader yields the records of a capture.
type Reader struct {
	name  string
	fr    *framer
	f     *os.File
	pcap  *pcapgo.Reader
	ng    *pcapgo.NgReader
	index int
	lt    layers.LinkType // a classic pcap's link type
}

const (
	magicPcapUs     = 0xA1B2C3D4
	magicPcapNs     = 0xA1B23C4D
	magicPcapng     = 0x0A0D0D0A
	magicPcapUsSwap = 0xD4C3B2A1
	magicPcapNsSwap = 0x4D3CB2A1
)

// Open opens a pcap or pcapng file of Ethernet frames.
func Open(path string) (*Reader, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	r, err := newReader(path, f)
	if err != nil {
		f.Close()
		return nil, err
	}
	r.f = f
	return r, nil
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
	r := &Reader{name: name, fr: fr}
	var lt layers.LinkType
	switch binary.BigEndian.Uint32(head) {
	case magicPcapng:
		// Each interface may have its own link type; Next checks each
		// frame's.
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

// Next returns the next record, io.EOF at a clean end of file (between two
// records), or an error naming the frame at which the file is corrupt or,
// a *TruncatedError, where it is cut short.
func (r *Reader) Next() (Record, error) {
	var rec Record
	var err error
	if r.ng != nil {
		var opts pcapgo.NgPacketOptions
		rec.Data, rec.Info, opts, err = r.ng.ReadPacketDataWithOptions()
		rec.Comments = opts.Comments
	} else {
		rec.Data, rec.Info, err = r.pcap.ReadPacketData()
	}
	if t := r.fr.truncatedAt(r.index); err != nil && t != nil {
		return rec, t
	}
	if err == io.EOF {
		return rec, io.EOF
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return rec, fmt.Errorf("%s: truncated inside frame %d", r.name, r.index)
		}
		return rec, fmt.Errorf("%s: frame %d: %v", r.name, r.index, err)
	}
	if rec.Info.CaptureLength != len(rec.Data) {
		return rec, fmt.Errorf("%s: frame %d: record length %d does not match %d data bytes", r.name, r.index, rec.Info.CaptureLength, len(rec.Data))
	}
	rec.LinkType = r.lt
	if r.ng != nil {
		rec.LinkType = layers.LinkTypeEthernet
		if len(rec.Info.AncillaryData) > 0 {
			if lt, ok := rec.Info.AncillaryData[0].(layers.LinkType); ok {
				rec.LinkType = lt
			}
		}
		rec.Info.AncillaryData = nil
	}
	if rec.LinkType != layers.LinkTypeEthernet {
		if err := toEthernet(&rec); err != nil {
			return rec, fmt.Errorf("%s: frame %d: %v", r.name, r.index, err)
		}
	}
	r.index++
	return rec, nil
}

// Close closes the underlying file, if Open opened one.
func (r *Reader) Close() error {
	if r.f != nil {
		return r.f.Close()
	}
	return nil
}

// ReadAll reads every record of the file at path.
func ReadAll(path string) ([]Record, error) {
	recs, _, err := ReadAllNamed(path)
	return recs, err
}

// ReadAllNamed reads every record of the file at path and the names of its
// pcapng interfaces (nil for a pcap file).
func ReadAllNamed(path string) ([]Record, []string, error) {
	r, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer r.Close()
	return r.All()
}

// All reads the remaining records and the names of the pcapng interfaces
// (nil for a pcap file); on an error, the records before it.
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

// Interfaces are the names of the pcapng interfaces read so far (all of
// them once Next has returned io.EOF); nil for a pcap file.
func (r *Reader) Interfaces() []string {
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
// packet comments (fault annotations). Timestamps are virtual nanoseconds
// from the Unix epoch, so a capture of the same run is the same bytes.
type Writer struct {
	w     *pcapgo.NgWriter
	names map[string]int
}

// NewWriter starts a pcapng capture on out with the given interfaces, in
// order (interface i is names[i]).
func NewWriter(out io.Writer, names ...string) (*Writer, error) {
	if len(names) == 0 {
		return nil, errors.New("pcapio: a capture needs at least one interface")
	}
	opts := pcapgo.NgWriterOptions{SectionInfo: pcapgo.NgSectionInfo{Application: "inaemu"}}
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
	return w.w.WritePacketWithOptions(ci, frame, pcapgo.NgPacketOptions{Comments: comments})
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
	return w.w.WritePacketWithOptions(ci, frame, pcapgo.NgPacketOptions{Comments: comments})
}

// Flush writes buffered data.
func (w *Writer) Flush() error { return w.w.Flush() }
