package pcapio

import (
	"encoding/binary"
	"io"
)

// readAhead reads a pcapng file for the plain path from a goroutine, a
// few chunks ahead: read(2) runs on another core while the reader's
// caller works on the chunk before. Each chunk is a run of whole blocks
// (a block cut by the end of one read starts the next chunk), so the
// plain path reads every block in place. Only the last chunk may end
// inside a block: the file ends there, or a block's length makes no
// sense (the plain path hands such a block to pcapgo).
type readAhead struct {
	chunks chan []byte
	free   chan []byte // chunks the plain path is done with (it borrows)
	stop   chan struct{}
	done   chan struct{}
	order  binary.ByteOrder // the current section's, as the walk found it
}

// readAheadChunks is how many chunks may wait read.
const readAheadChunks = 3

func startReadAhead(in io.Reader) *readAhead {
	ra := &readAhead{chunks: make(chan []byte, readAheadChunks), free: make(chan []byte, readAheadChunks+2),
		stop: make(chan struct{}), done: make(chan struct{})}
	go ra.run(in)
	return ra
}

func (ra *readAhead) run(in io.Reader) {
	defer close(ra.done)
	defer close(ra.chunks)
	var carry []byte // the start of a block the last read cut
	for {
		var buf []byte
		select {
		case buf = <-ra.free:
		default:
		}
		if cap(buf) < max(plainBufSize, 2*len(carry)) {
			buf = make([]byte, max(plainBufSize, 2*len(carry)))
		}
		buf = buf[:cap(buf)]
		n := copy(buf, carry)
		for {
			k, err := io.ReadFull(in, buf[n:])
			n += k
			if err != nil { // the end of the file (or a read error pcapgo will meet too)
				ra.send(buf[:n])
				return
			}
			cut, need := ra.whole(buf[:n])
			if cut > 0 {
				carry = append(carry[:0], buf[cut:n]...)
				if !ra.send(buf[:cut]) {
					return
				}
				break
			}
			// The first block is longer than the buffer.
			buf = append(buf[:n], make([]byte, need+plainBufSize-n)...)
		}
	}
}

func (ra *readAhead) send(c []byte) bool {
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
	off := 0
	for off+12 <= len(b) {
		if binary.LittleEndian.Uint32(b[off:]) == blockSHB {
			ra.order = shbOrder(b[off+8:])
		}
		if ra.order == nil {
			return len(b), 0
		}
		n := int(ra.order.Uint32(b[off+4:]))
		if n < 12 || n%4 != 0 {
			return len(b), 0
		}
		if off+n > len(b) {
			return off, n
		}
		off += n
	}
	return off, 12
}

// next is the next chunk; ok is false once the file is read.
func (ra *readAhead) next() (c []byte, ok bool) {
	c, ok = <-ra.chunks
	return c, ok
}

// recycle hands a chunk the plain path is done with back to be read
// into again.
func (ra *readAhead) recycle(c []byte) {
	select {
	case ra.free <- c:
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
