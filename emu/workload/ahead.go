package workload

import "sync"

// Ahead reads a Stream front to back with the generating done by a
// goroutine a few blocks ahead of the reader, so a job's event loop
// copies its messages' data instead of drawing it (drawing a random
// float32 tensor costs several nanoseconds an element; copying it a
// fraction of one). The bytes are the Stream's, whatever the timing.
//
// The goroutine starts at the first Fill and stops at the tensor's end
// or at Close. A read that does not continue where the last one ended
// (MoveTo elsewhere, a piece not a whole number of elements) stops it for
// good: from then on Ahead is its Stream.
type Ahead struct {
	s     *Stream
	total int64 // bytes the goroutine generates: the tensor's length
	pos   int64 // bytes read so far, while ahead
	state aheadState
	cur   []byte // what is left of the block being read
	block []byte // that block, whole, to hand back
	full  chan []byte
	free  chan []byte
	done  chan struct{}
	wg    sync.WaitGroup
}

type aheadState uint8

const (
	aheadIdle    aheadState = iota // not started
	aheadRunning                   // the goroutine generates
	aheadDirect                    // stopped: reads go to the Stream
)

const (
	aheadBlock  = 64 << 10 // bytes generated at a time
	aheadBlocks = 4        // blocks in flight per stream
	// AheadBytes is the memory an Ahead holds while it runs.
	AheadBytes = aheadBlock * aheadBlocks
)

// NewAhead reads s, at its start, ahead; total is how many bytes of it
// will be read in order (the goroutine generates no further).
func NewAhead(s *Stream, total int64) *Ahead {
	return &Ahead{s: s, total: total}
}

// Fill writes the next len(buf)/element-size elements into buf, as the
// Stream's Fill would.
func (a *Ahead) Fill(buf []byte) {
	if a.state == aheadIdle {
		a.start()
	}
	sz := int64(a.s.d.Size())
	if a.state == aheadRunning && (int64(len(buf))%sz != 0 || a.pos+int64(len(buf)) > a.total) {
		a.direct()
	}
	if a.state == aheadDirect {
		a.s.Fill(buf)
		return
	}
	for len(buf) > 0 {
		if len(a.cur) == 0 {
			if a.block != nil {
				a.free <- a.block[:cap(a.block)]
			}
			a.block = <-a.full
			a.cur = a.block
		}
		n := copy(buf, a.cur)
		buf, a.cur = buf[n:], a.cur[n:]
		a.pos += int64(n)
	}
}

// MoveTo moves to element e: where the reader already is, nothing
// changes; elsewhere, the goroutine stops and the Stream moves.
func (a *Ahead) MoveTo(e int64) {
	sz := int64(a.s.d.Size())
	if a.state != aheadDirect && e*sz == a.pos {
		return
	}
	a.direct()
	a.s.MoveTo(e)
}

// Close stops the goroutine, if it runs, and waits for it to end.
func (a *Ahead) Close() {
	if a.state == aheadRunning {
		a.direct()
	}
}

func (a *Ahead) start() {
	if a.total <= 0 {
		a.state = aheadDirect
		return
	}
	a.state = aheadRunning
	a.full = make(chan []byte, aheadBlocks)
	a.free = make(chan []byte, aheadBlocks)
	a.done = make(chan struct{})
	for range aheadBlocks {
		a.free <- make([]byte, aheadBlock)
	}
	a.wg.Add(1)
	go a.generate()
}

// generate is the goroutine: the Stream from the start to total, a
// block at a time, as blocks come back free.
func (a *Ahead) generate() {
	defer a.wg.Done()
	for off := int64(0); off < a.total; {
		var b []byte
		select {
		case b = <-a.free:
		case <-a.done:
			return
		}
		b = b[:min(int64(len(b)), a.total-off)]
		a.s.Fill(b)
		off += int64(len(b))
		a.full <- b // never blocks: at most aheadBlocks blocks exist
	}
}

// direct stops the goroutine and hands the Stream, moved to where the
// reader is, to the reader.
func (a *Ahead) direct() {
	if a.state == aheadRunning {
		close(a.done)
		a.wg.Wait()
		a.cur, a.block, a.full, a.free = nil, nil, nil, nil
		a.s.MoveTo(a.pos / int64(a.s.d.Size()))
	}
	a.state = aheadDirect
}
