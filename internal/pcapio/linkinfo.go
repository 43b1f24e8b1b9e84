package pcapio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/gopacket/gopacket/layers"
)

// A capture can say what each interface's link is: its rate and its
// one-way propagation delay, which a reader judging PAUSE/PFC frames needs
// (a pause quantum is 512 bit times at the link's rate; a frame sent after
// a pause arrived started at most a line time plus the propagation delay
// before its capture). Both go in the interface's Interface Description
// Block (pcapng, draft-ietf-opsawg-pcapng §4.2):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+---------------------------------------------------------------+
//	|                    Block Type = 0x00000001                    |
//	+---------------------------------------------------------------+
//	|                      Block Total Length                       |
//	+---------------------------------------------------------------+
//	|           LinkType            |           Reserved            |
//	+---------------------------------------------------------------+
//	|                            SnapLen                            |
//	+---------------------------------------------------------------+
//	| if_name (2): "port3-in"                                       |
//	| if_description (3): "inaemu: link-delay=1000ns"               |
//	| if_speed (8): 8 bytes, bits per second, unsigned              |
//	| if_tsresol (9): 9 (nanoseconds), opt_endofopt (0)             |
//	+---------------------------------------------------------------+
//	|                      Block Total Length                       |
//	+---------------------------------------------------------------+
//
// The rate is if_speed, the standard option for it (a 64-bit unsigned
// count of bits per second), which capinfos prints per interface. The
// pcapng draft has no option for a propagation delay, so the delay is
// written as the interface's if_description, a line LinkDelayPrefix and
// the delay in nanoseconds ("inaemu: link-delay=1000ns"): it belongs to
// one interface as the rate does (a section comment would have to name
// interfaces and be split again), Wireshark shows it in every frame's
// tree ("Interface description", field frame.interface_description) and
// capinfos beside the interface's name, and a whole nanosecond count in
// ASCII reads back exactly, as the fault comments' extra_delay does.
// pcapgo, tshark and every pcapng reader skip an option they do not know
// and show an if_description as text, so nothing else changes for them.

// Interface is one pcapng interface and what its block says of its link.
type Interface struct {
	Name string
	// Speed is the link's rate in bits per second (if_speed); 0: the
	// block does not say (nothing is written).
	Speed uint64
	// Delay is the link's one-way propagation delay, when HasDelay (the
	// interface's description says it: LinkDelayPrefix).
	Delay    time.Duration
	HasDelay bool
}

// LinkDelayPrefix starts the if_description of an interface whose link's
// propagation delay the capture states, followed by the delay as whole
// nanoseconds and "ns" (LinkDelayDescription).
const LinkDelayPrefix = "inaemu: link-delay="

// LinkDelayDescription is the if_description stating a link's one-way
// propagation delay d.
func LinkDelayDescription(d time.Duration) string {
	return LinkDelayPrefix + strconv.FormatInt(d.Nanoseconds(), 10) + "ns"
}

// LinkDelay reads the propagation delay an interface description states
// (a line LinkDelayPrefix + a duration time.ParseDuration reads, at most
// an hour); ok is false when it states none.
func LinkDelay(description string) (d time.Duration, ok bool) {
	for line := range strings.SplitSeq(description, "\n") {
		v, found := strings.CutPrefix(strings.TrimSpace(line), LinkDelayPrefix)
		if !found {
			continue
		}
		v, _, _ = strings.Cut(v, " ")
		if d, err := time.ParseDuration(v); err == nil && d >= 0 && d <= maxLinkDelay {
			return d, true
		}
	}
	return 0, false
}

// maxLinkDelay bounds the delay a description can claim (a hand-edited
// one), as maxExtraDelay bounds a fault's.
const maxLinkDelay = time.Hour

// pcapng option codes of an Interface Description Block besides those
// plainng.go reads.
const (
	optIfDescription = 3
	optIfSpeed       = 8
)

// NewInterfaceWriter is NewCommentedWriter for interfaces that may state
// their link (Interface.Speed, Interface.Delay). Interfaces that state
// nothing are written as NewCommentedWriter writes them, and a capture
// none of whose interfaces states anything is the same bytes as
// NewCommentedWriter's.
func NewInterfaceWriter(out io.Writer, comment string, ifaces ...Interface) (*Writer, error) {
	names := make([]string, len(ifaces))
	described := false
	for i, in := range ifaces {
		names[i] = in.Name
		described = described || in.Speed != 0 || in.HasDelay
	}
	if !described {
		return newWriter(out, comment, names...)
	}
	if len(names) == 0 {
		return nil, errors.New("pcapio: a capture needs at least one interface")
	}
	// pcapgo's writer has no if_speed: it writes the Section Header
	// Block and counts the interfaces (its packets must name one it has)
	// into a buffer, and the Interface Description Blocks are written
	// here in place of its own; its packets then go to out.
	var head bytes.Buffer
	sw := &switchWriter{&head}
	w, err := newWriter(sw, comment, names...)
	if err != nil {
		return nil, err
	}
	if err := w.w.Flush(); err != nil {
		return nil, err
	}
	b := head.Bytes()
	shb := int(binary.LittleEndian.Uint32(b[4:8]))
	if _, err := out.Write(b[:shb]); err != nil {
		return nil, err
	}
	for _, in := range ifaces {
		if _, err := out.Write(interfaceBlock(in)); err != nil {
			return nil, err
		}
	}
	sw.Writer = out
	return w, nil
}

// switchWriter writes to whichever writer it holds.
type switchWriter struct{ io.Writer }

// interfaceBlock is an Ethernet interface's Interface Description Block,
// little-endian as pcapgo writes (options: if_name, if_description,
// if_speed, if_tsresol 9).
func interfaceBlock(in Interface) []byte {
	b := binary.LittleEndian.AppendUint32(nil, blockIDB)
	b = binary.LittleEndian.AppendUint32(b, 0) // the length, below
	b = binary.LittleEndian.AppendUint16(b, uint16(layers.LinkTypeEthernet))
	b = binary.LittleEndian.AppendUint16(b, 0) // reserved
	b = binary.LittleEndian.AppendUint32(b, 0) // snaplen: none
	opt := func(code uint16, v []byte) {
		b = binary.LittleEndian.AppendUint16(b, code)
		b = binary.LittleEndian.AppendUint16(b, uint16(len(v)))
		b = append(b, v...)
		for len(b)%4 != 0 {
			b = append(b, 0)
		}
	}
	if in.Name != "" {
		opt(optIfName, []byte(in.Name))
	}
	if in.HasDelay {
		opt(optIfDescription, []byte(LinkDelayDescription(in.Delay)))
	}
	if in.Speed != 0 {
		opt(optIfSpeed, binary.LittleEndian.AppendUint64(nil, in.Speed))
	}
	opt(optTSResol, []byte{9})
	opt(optEnd, nil)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(b)+4))
	binary.LittleEndian.PutUint32(b[4:8], uint32(len(b)))
	return b
}

// ifaceOption takes what an Interface Description Block option says of
// the interface's link into in.
func ifaceOption(in *Interface, order binary.ByteOrder, code uint16, v []byte) {
	switch code {
	case optIfName:
		in.Name = string(v)
	case optIfDescription:
		in.Delay, in.HasDelay = LinkDelay(string(v))
	case optIfSpeed:
		if len(v) == 8 {
			in.Speed = order.Uint64(v)
		}
	}
}

// InterfaceLinks are the pcapng interfaces read so far (all of them once
// Next has returned io.EOF) with what their blocks say of their links
// (if_speed, and the if_description LinkDelayPrefix); nil for a pcap file.
// A file of several sections read through pcapgo gives the names only.
func (r *Reader) InterfaceLinks() []Interface {
	switch {
	case r.plain != nil:
		out := make([]Interface, len(r.plain.ifaces))
		for i, in := range r.plain.ifaces {
			out[i] = in.link
		}
		return out
	case r.ng == nil:
		return nil
	}
	out := make([]Interface, r.ng.NInterfaces())
	for i := range out {
		if i < len(r.fr.links) && r.fr.sections == 1 {
			out[i] = r.fr.links[i]
		} else if ifc, err := r.ng.Interface(i); err == nil {
			out[i] = Interface{Name: ifc.Name}
		}
	}
	return out
}

// readIDBOptions reads the options of an Interface Description Block's
// body (from its first option, the trailing length excluded) as
// plainNg.options does, leniently: what does not fit is left unread.
func readIDBOptions(order binary.ByteOrder, b []byte) (in Interface) {
	for len(b) >= 4 {
		code, n := order.Uint16(b), int(order.Uint16(b[2:]))
		if code == optEnd || 4+n > len(b) {
			break
		}
		ifaceOption(&in, order, code, b[4:4+n])
		b = b[min(len(b), 4+(n+3)&^3):]
	}
	return in
}

// maxIDBOptions is how much of an Interface Description Block's options
// the framer keeps for the pcapgo path, whose reader drops if_speed (a
// longer block's options are not read there).
const maxIDBOptions = 64 << 10
