package pcapio

import (
	"encoding/binary"
	"io"
	"sync/atomic"
)

// readAhead reads a pcapng file for the plain path from a goroutine, a
// few chunks ahead: read(2) runs on another core while the reader's
// caller works on the chunk before. Each chunk is a run of whole blocks
// (a block cut by the end of one read starts the next chunk), so the
// plain path reads every block in place. Only the last chunk may end
// inside a block: the file ends there, or a block's length makes no
// sense (the plain path hands such a block to pcapgo).
type readAhead struct {
	chunks chan chunk
	free   chan chunk // chunks the plain path is done with
	stop   chan struct{}
	done   chan struct{}
	// gate holds the goroutine after the first chunk (which Open reads
	// to see whether the file is plain) until the reader's first record
	// is asked for, so a digest set in between covers every later chunk.
	gate     chan struct{}
	gateOpen bool
	order    binary.ByteOrder // the current section's, as the walk found it
	// digest, when set (Reader.SetDigest), is applied here to every
	// Enhanced Packet Block's bytes, beside the reader's caller.
	digest atomic.Pointer[func([]byte) uint64]
}

// chunk is a run of whole blocks and the digests of its packets.
type chunk struct {
	data    []byte
	digests []chunkDigest
}

// chunkDigest is the digest (sum) of the n packet bytes at off in a chunk.
type chunkDigest struct {
	off, n int
	sum    uint64
}

func (ra *readAhead) setDigest(f func([]byte) uint64) { ra.digest.Store(&f) }

// readAheadChunks is how many chunks may wait read.
const readAheadChunks = 3

func startReadAhead(in io.Reader) *readAhead {
	ra := &readAhead{chunks: make(chan chunk, readAheadChunks), free: make(chan chunk, readAheadChunks+2),
		stop: make(chan struct{}), done: make(chan struct{}), gate: make(chan struct{})}
	go ra.run(in)
	return ra
}

func (ra *readAhead) run(in io.Reader) {
	defer close(ra.done)
	defer close(ra.chunks)
	var carry []byte // the start of a block the last read cut
	for first := true; ; first = false {
		if !first {
			select {
			case <-ra.gate:
			case <-ra.stop:
				return
			}
		}
		var buf []byte
		var digests []chunkDigest
		select {
		case c := <-ra.free:
			buf, digests = c.data, c.digests[:0]
		default:
		}
		if cap(buf) < max(plainBufSize, 2*len(carry)) {
			buf = make([]byte, max(plainBufSize, 2*len(carry)))
		}
		buf = buf[:cap(buf)]
		n := copy(buf, carry)
		order := ra.order // the chunk's first block's (whole moves ra.order on)
		for {
			k, err := io.ReadFull(in, buf[n:])
			n += k
			if err != nil { // the end of the file (or a read error pcapgo will meet too)
				ra.send(chunk{buf[:n], ra.digests(buf[:n], order, digests)})
				return
			}
			cut, need := ra.whole(buf[:n])
			if cut > 0 {
				carry = append(carry[:0], buf[cut:n]...)
				if !ra.send(chunk{buf[:cut], ra.digests(buf[:cut], order, digests)}) {
					return
				}
				break
			}
			// The first block is longer than the buffer: grow it, at
			// most twofold (walkBlocks holds a block to maxPacketBlock).
			buf = append(buf[:n], make([]byte, min(need+plainBufSize, 2*n)-n)...)
		}
	}
}

// digests appends to ds the digest of every Enhanced Packet Block's
// packet bytes in the whole blocks of b (whose first is in order's byte
// order), if there is a digest function.
func (ra *readAhead) digests(b []byte, order binary.ByteOrder, ds []chunkDigest) []chunkDigest {
	f := ra.digest.Load()
	if f == nil {
		return ds
	}
	walkBlocks(b, order, func(off, n int, order binary.ByteOrder) {
		if order.Uint32(b[off:]) == blockEPB && n >= 32 {
			caplen := int(order.Uint32(b[off+20:]))
			if caplen >= 0 && 28+caplen <= n-4 {
				ds = append(ds, chunkDigest{off + 28, caplen, (*f)(b[off+28 : off+28+caplen])})
			}
		}
	})
	return ds
}

// walkBlocks calls visit for each whole block at the start of b, the
// first in byte order order (a Section Header Block sets the order of
// the blocks from it on). It returns where they end, how long the block
// after them says it is (12, a header, when b ends inside the header),
// and the order there; ok is false when a block's length makes no sense
// (or is more than maxPacketBlock) or no order is known, which ends the
// walk.
func walkBlocks(b []byte, order binary.ByteOrder, visit func(off, n int, order binary.ByteOrder)) (end, need int, after binary.ByteOrder, ok bool) {
	off := 0
	for off+12 <= len(b) {
		if binary.LittleEndian.Uint32(b[off:]) == blockSHB {
			order = shbOrder(b[off+8:])
		}
		if order == nil {
			return off, 0, nil, false
		}
		n := int(order.Uint32(b[off+4:]))
		if n < 12 || n%4 != 0 || n > maxPacketBlock {
			// A longer block is not read into memory: the plain path
			// hands it to pcapgo, which skips it unread, or refuses it
			// (a packet block: see maxFrame).
			return off, 0, order, false
		}
		if off+n > len(b) {
			return off, n, order, true
		}
		if visit != nil {
			visit(off, n, order)
		}
		off += n
	}
	return off, 12, order, true
}

func (ra *readAhead) send(c chunk) bool {
	select {
	case ra.chunks <- c:
		return true
	case <-ra.stop:
		return false
	}
}

// whole is where the last whole block in b ends, and how long the block
// after it says it is (at least a header). A length that makes no sense
// ends the walk: all of b is handed on, for the plain path to find it.
func (ra *readAhead) whole(b []byte) (cut, need int) {
	cut, need, order, ok := walkBlocks(b, ra.order, nil)
	ra.order = order
	if !ok {
		return len(b), 0
	}
	return cut, need
}

// open lets the goroutine read on past the first chunk.
func (ra *readAhead) open() {
	if !ra.gateOpen {
		ra.gateOpen = true
		close(ra.gate)
	}
}

// next is the next chunk; ok is false once the file is read.
func (ra *readAhead) next() (c chunk, ok bool) {
	c, ok = <-ra.chunks
	return c, ok
}

// recycle hands back what the plain path is done with: a chunk's
// digests, and its bytes too when no record keeps them (reuse).
func (ra *readAhead) recycle(data []byte, digests []chunkDigest, reuse bool) {
	if !reuse {
		data = nil
	}
	select {
	case ra.free <- chunk{data, digests}:
	default:
	}
}

// close stops the goroutine and waits for it: the file is then the
// caller's again (to seek or close).
func (ra *readAhead) close() {
	select {
	case <-ra.stop:
	default:
		close(ra.stop)
	}
	for range ra.chunks {
	}
	<-ra.done
}
