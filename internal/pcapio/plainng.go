package pcapio

import (
	"encoding/binary"
	"errors"
	"io"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
)

// plainNg reads the pcapng files capture tools write in the common case
// straight out of one large buffer: one section, Interface Description,
// Enhanced Packet and Interface Statistics Blocks, and block types it
// skips, every length consistent. Reading through pcapgo costs three
// copies of every frame (read(2), the framer's bufio, pcapgo's own) and
// a call per field; this costs one copy (read(2)'s), and reads a 1 GB
// capture about five times faster.
//
// It is a fast path, not a second reader: it hands a block it does not
// take as plain (another section, a Simple or obsolete Packet Block, a
// Name Resolution Block, a timestamp resolution or option it does not
// handle, a length that does not add up, a file cut short) back to the
// Reader, which reopens the file on the pcapgo path, skips the records
// already returned and reads on from there. Every error, and every
// record of such a file, is therefore pcapgo's and the framer's, and
// TestPlainMatchesPcapgo holds the two paths to the same records.
type plainNg struct {
	ra *readAhead
	// buf is the chunk being read (whole blocks); with reuse (the
	// Reader borrows) it goes back to be read into again once read,
	// otherwise the packet bytes handed out stay as they are (the
	// garbage collector frees a chunk no record holds).
	reuse  bool
	buf    []byte
	lo, hi int  // unread bytes: buf[lo:hi]
	eof    bool // the file is read
	order  binary.ByteOrder
	ifaces []plainIface
	// comment is the Section Header Block's comment (Reader.SectionComment).
	comment string
	// digests are the read-ahead's digests of the chunk's packets, next
	// the first not yet matched to a record; digest and hasDigest are the
	// last record's.
	digests   []chunkDigest
	nextDig   int
	digest    uint64
	hasDigest bool
}

// plainIface is what a record needs of its interface.
type plainIface struct {
	link Interface // its name and link (Reader.InterfaceLinks)
	lt   layers.LinkType
	// ticks per second (10^6 or 10^9) and what one tick is in ns, and
	// if_tsoffset in seconds.
	perSec, tickNS uint64
	offset         uint64
}

// errNotPlain: the block at the read position is one plainNg leaves to
// pcapgo.
var errNotPlain = errors.New("pcapng block not read on the plain path")

// plainBufSize is the read-ahead's chunk size (a variable so that a test
// can make chunks small, and so cut blocks everywhere, with small files).
var plainBufSize = 1 << 20

const (
	optEnd      = 0
	optComment  = 1
	optIfName   = 2
	optTSResol  = 9
	optTSOffset = 14
)

// newPlainNg starts reading a pcapng file at its Section Header Block;
// ok is false when the file does not start as a plain one does.
func newPlainNg(in io.Reader) (*plainNg, bool) {
	p := &plainNg{ra: startReadAhead(in)}
	if p.fill(12) && binary.LittleEndian.Uint32(p.buf[p.lo:]) == blockSHB {
		p.order = shbOrder(p.buf[p.lo+8:])
	}
	var b []byte
	ok := p.order != nil
	if ok {
		b, ok = p.block()
	}
	if !ok || len(b) < 28 || p.order.Uint16(b[12:14]) != 1 || p.order.Uint16(b[14:16]) != 0 ||
		!p.options(b[24:len(b)-4], func(code uint16, v []byte) {
			if code == optComment {
				p.comment = commentText(string(v))
			}
		}) {
		p.close()
		return nil, false
	}
	p.lo += len(b)
	return p, true
}

// block returns the next block whole (its trailing length included)
// without consuming it; ok is false at the end of the file, for a block
// cut short by it, or one whose length is not a multiple of 4 of at least
// 12, or longer than maxPacketBlock (the read-ahead does not read it
// whole: pcapgo's path skips it or refuses it unread).
func (p *plainNg) block() ([]byte, bool) {
	if !p.fill(12) {
		return nil, false
	}
	n := int(p.order.Uint32(p.buf[p.lo+4:]))
	if n < 12 || n%4 != 0 || n > maxPacketBlock || !p.fill(n) {
		return nil, false
	}
	return p.buf[p.lo : p.lo+n : p.lo+n], true
}

// fill makes n bytes readable at p.lo, moving to the next chunk when
// this one is read; false if the file ends first, or a block is cut
// (the chunks hold whole blocks but at the end of the file and at a
// length that makes no sense).
func (p *plainNg) fill(n int) bool {
	if p.hi-p.lo >= n {
		return true
	}
	if p.lo < p.hi || p.eof {
		return false
	}
	if p.buf != nil {
		p.ra.recycle(p.buf, p.digests, p.reuse)
	}
	c, ok := p.ra.next()
	p.buf, p.lo, p.hi, p.eof = c.data, 0, len(c.data), !ok
	p.digests, p.nextDig = c.digests, 0
	return ok && len(c.data) >= n
}

// close stops reading ahead (the file is the caller's again).
func (p *plainNg) close() { p.ra.close() }

// options walks a block's options (b: from the first option to the
// trailing length); false if they do not fit it exactly as pcapgo reads
// them (an option running past the block, an end-of-options with a
// value).
func (p *plainNg) options(b []byte, each func(code uint16, value []byte)) bool {
	for len(b) > 0 {
		if len(b) < 4 {
			return false
		}
		code, n := p.order.Uint16(b), int(p.order.Uint16(b[2:]))
		if code == optEnd {
			return n == 0
		}
		padded := (n + 3) &^ 3
		if 4+padded > len(b) {
			return false
		}
		each(code, b[4:4+n])
		b = b[4+padded:]
	}
	return true
}

// next returns the next packet: its bytes (in the buffer, valid until the
// next call), capture info, comments and link type; io.EOF at a clean
// end of the file, errNotPlain at a block left to pcapgo (nothing of it
// consumed).
func (p *plainNg) next() (data []byte, ci gopacket.CaptureInfo, comments []string, lt layers.LinkType, err error) {
	p.hasDigest = false
	for {
		b, ok := p.block()
		if !ok {
			if p.eof && p.lo == p.hi {
				return nil, ci, nil, 0, io.EOF
			}
			return nil, ci, nil, 0, errNotPlain
		}
		body := b[8 : len(b)-4]
		switch p.order.Uint32(b) {
		case blockEPB:
			if len(body) < 20 {
				return nil, ci, nil, 0, errNotPlain
			}
			ifc := int(p.order.Uint32(body))
			caplen, orig := int(p.order.Uint32(body[12:])), int(p.order.Uint32(body[16:]))
			if ifc >= len(p.ifaces) || caplen > orig || caplen > maxFrame || 20+((caplen+3)&^3) > len(body) {
				return nil, ci, nil, 0, errNotPlain
			}
			if !p.options(body[20+((caplen+3)&^3):], func(code uint16, v []byte) {
				if code == optComment {
					comments = append(comments, commentText(string(v)))
				}
			}) {
				return nil, ci, nil, 0, errNotPlain
			}
			// The read-ahead's digest of these bytes, if it made one.
			at := p.lo + 28
			for p.nextDig < len(p.digests) && p.digests[p.nextDig].off < at {
				p.nextDig++
			}
			if p.nextDig < len(p.digests) {
				d := p.digests[p.nextDig]
				p.digest, p.hasDigest = d.sum, d.off == at && d.n == caplen
			}
			in := &p.ifaces[ifc]
			ts := uint64(p.order.Uint32(body[4:]))<<32 | uint64(p.order.Uint32(body[8:]))
			ci = gopacket.CaptureInfo{Timestamp: time.Unix(int64(ts/in.perSec+in.offset), int64(ts%in.perSec*in.tickNS)).UTC(),
				CaptureLength: caplen, Length: orig, InterfaceIndex: ifc}
			p.lo += len(b)
			return body[20 : 20+caplen : 20+caplen], ci, comments, in.lt, nil
		case blockIDB:
			if len(body) < 8 {
				return nil, ci, nil, 0, errNotPlain
			}
			in := plainIface{lt: layers.LinkType(p.order.Uint16(body)), perSec: 1e6, tickNS: 1e3}
			plain := p.options(body[8:], func(code uint16, v []byte) {
				switch {
				case code == optIfName || code == optIfDescription || code == optIfSpeed:
					ifaceOption(&in.link, p.order, code, v)
				case code == optTSResol && len(v) >= 1 && v[0] == 9:
					in.perSec, in.tickNS = 1e9, 1
				case code == optTSResol && len(v) >= 1 && v[0] != 6:
					in.perSec = 0 // a resolution pcapgo converts
				case code == optTSOffset && len(v) >= 8:
					in.offset = p.order.Uint64(v)
				}
			})
			if !plain || in.perSec == 0 {
				return nil, ci, nil, 0, errNotPlain
			}
			p.ifaces = append(p.ifaces, in)
		case blockISB:
			if len(body) < 12 || int(p.order.Uint32(body)) >= len(p.ifaces) || !p.options(body[12:], func(uint16, []byte) {}) {
				return nil, ci, nil, 0, errNotPlain
			}
		case blockSHB, blockPB, blockSPB, blockNRB:
			return nil, ci, nil, 0, errNotPlain
		}
		p.lo += len(b)
	}
}

// names are the interfaces' names, as Reader.Interfaces gives them.
func (p *plainNg) names() []string {
	out := make([]string, len(p.ifaces))
	for i, in := range p.ifaces {
		out[i] = in.link.Name
	}
	return out
}
