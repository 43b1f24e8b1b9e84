package endpoint

// outQueue is a host's FIFO of frames built ahead of the line (channel
// messages, a PS's results and reminders), with the buffers kept for
// reuse: no allocation in steady state.
type outQueue struct {
	q    [][]byte
	head int
	free [][]byte
}

// get is a buffer of n bytes to build a frame in; put queues it.
func (o *outQueue) get(n int) []byte {
	if k := len(o.free); k > 0 {
		b := o.free[k-1]
		o.free = o.free[:k-1]
		if cap(b) >= n {
			return b[:n]
		}
	}
	return make([]byte, n, max(n, 512))
}

func (o *outQueue) put(b []byte) { o.q = append(o.q, b) }

// pop copies the next frame into buf and returns its length, or 0.
func (o *outQueue) pop(buf []byte) int {
	if o.head == len(o.q) {
		return 0
	}
	b := o.q[o.head]
	o.q[o.head] = nil
	o.head++
	if o.head == len(o.q) {
		o.q, o.head = o.q[:0], 0
	}
	n := copy(buf, b)
	o.free = append(o.free, b)
	return n
}

func (o *outQueue) len() int { return len(o.q) - o.head }
