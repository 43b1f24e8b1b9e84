package nic

import (
	"slices"
	"time"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/roce"
)

// Offload is an engine on a NIC's data path between the QPs and the MAC,
// as a real NIC's offloads sit between its DMA and its port: it sees
// every frame a QP sends and every RoCE frame the NIC accepts, and may
// hold a QP back. INCEPTIONN's compression engines (emu/nic/compress) are
// the first; DCQCN's rate limiter and CNP handling (issue 36) come next.
// Offloads run in the order they were added on transmit and on receive.
// An offload's counters are its own (compression's fill
// Stats.Compression).
type Offload interface {
	// Name says what the offload is ("compression").
	Name() string
	// Pace is the earliest time QP q may send its next frame: at or before
	// now it may send at once; later, the NIC serves another QP and, when
	// none may send, asks its transmitter again then (a rate limiter).
	Pace(q *roce.QP, now time.Duration) time.Duration
	// Transmit sees the frame q wrote into buf (n bytes) on its way to the
	// line. It may rewrite the frame in buf (room for MaxFrame bytes) and
	// returns its length, and how long the engine takes over it in
	// picoseconds (0: none): the frame cannot finish on the line sooner,
	// since the engine streams it to the MAC.
	Transmit(q *roce.QP, buf []byte, n int) (int, int64)
	// Receive sees a RoCE frame the NIC accepted, parsed in v (valid only
	// during the call; CNPs and ACKs too), before the QPs do. It passes
	// the frame on with next, at once or later from a copy of its own, or
	// consumes it. next is the same function on every call.
	Receive(v *frames.View, next func(*frames.View))
}

// MaxFrame bounds a frame the NIC and its offloads handle (MTU 4096 and
// headers; the fabric's transmit buffers are as long).
const MaxFrame = 4096 + 256

// AddOffload puts o on the NIC's data path, after the offloads already
// there, or in the place of the one of its name: a NIC has one offload of
// each kind (before traffic).
func (h *NIC) AddOffload(o Offload) {
	if i := slices.IndexFunc(h.offloads, func(x Offload) bool { return x.Name() == o.Name() }); i >= 0 {
		h.offloads[i] = o
	} else {
		h.offloads = append(h.offloads, o)
	}
	// Each offload's next is the one after it, the last's the QPs: built
	// once here, so that no frame allocates a closure.
	h.rxNext = make([]func(*frames.View), len(h.offloads))
	h.rxNext[len(h.offloads)-1] = h.deliver
	for i := len(h.offloads) - 2; i >= 0; i-- {
		o, next := h.offloads[i+1], h.rxNext[i+1]
		h.rxNext[i] = func(v *frames.View) { o.Receive(v, next) }
	}
}

// Offloads are the NIC's offloads, in data-path order.
func (h *NIC) Offloads() []Offload { return h.offloads }

// Clock is the clock the NIC runs on (its offloads' engines run on it too).
func (h *NIC) Clock() roce.Clock { return h.clock }

// TxEnginePs is how long the offloads took over the frame NextFrame
// returned last, in picoseconds (the slowest engine's time; 0 when none
// took any): the frame cannot finish on the line sooner.
func (h *NIC) TxEnginePs() int64 { return h.txPs }

// paced is the earliest time q may send when an offload holds it back
// (false: it may send now).
func (h *NIC) paced(q *roce.QP) (time.Duration, bool) {
	if len(h.offloads) == 0 {
		return 0, false
	}
	now := h.clock.Now()
	at := now
	for _, o := range h.offloads {
		at = max(at, o.Pace(q, now))
	}
	return at, at > now
}

// wakeAt asks the transmitter again at at, when the offloads let a QP
// send (the timer is made on first use: a NIC no offload paces has none).
func (h *NIC) wakeAt(at time.Duration) {
	if h.paceTimer == nil {
		h.paceTimer = h.clock.AfterFunc(0, func() { h.up.Kick() })
		h.paceTimer.Stop()
	}
	h.paceTimer.Reset(at - h.clock.Now())
}
