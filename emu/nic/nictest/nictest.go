// Package nictest holds fakes for testing NICs and their offloads without
// a fabric: a transmitter that only counts kicks, a wire direction that
// pumps a NIC's frames to a receiver on a virtual clock, and two NICs
// joined back to back by two of them.
package nictest

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// Kicks is a transmitter that only counts Kick calls.
type Kicks struct{ N int }

func (k *Kicks) Kick() { k.N++ }

// Wire is one direction from a NIC to a receiver: a kick schedules the
// pump (at once, as its own event); the pump sends a frame every Gap and
// hands it to Recv Delay later, until the NIC has nothing.
type Wire struct {
	Clock *vclock.Clock
	From  *nic.NIC
	Recv  func([]byte)
	Gap   time.Duration
	Delay time.Duration
	Kicks int      // Kick calls
	Sent  [][]byte // every frame sent, in order
	busy  bool
	buf   []byte
}

func (w *Wire) Kick() {
	w.Kicks++
	if w.busy {
		return
	}
	w.busy = true
	w.Clock.AfterFunc(0, w.pump)
}

func (w *Wire) pump() {
	if w.buf == nil {
		w.buf = make([]byte, 4096+256)
	}
	n := w.From.NextFrame(w.buf)
	if n == 0 {
		w.busy = false
		return
	}
	f := bytes.Clone(w.buf[:n])
	w.Sent = append(w.Sent, f)
	w.Clock.AfterFunc(w.Delay, func() { w.Recv(f) })
	w.Clock.AfterFunc(w.Gap, w.pump)
}

// Busy reports whether the pump is running.
func (w *Wire) Busy() bool { return w.busy }

// RunIdle steps the clock until nothing is pending.
func RunIdle(t *testing.T, clk *vclock.Clock) {
	t.Helper()
	for i := 0; clk.Step(); i++ {
		require.Less(t, i, 100_000, "the event loop does not go idle")
	}
}

// RCConfig is an RC connection's settings with start PSNs sq and rq.
func RCConfig(sq, rq uint32) roce.Config {
	return roce.Config{MTU: 256, SQPSN: sq, RQPSN: rq, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 1}
}

// Pair is two NICs, h0 and h1, joined back to back by two wire
// directions (100 ns between frames, 1 µs on the way).
type Pair struct {
	Clock  *vclock.Clock
	A, B   *nic.NIC
	AB, BA *Wire
}

// NewPair joins two NICs of transport tr.
func NewPair(tr frames.Transport) *Pair {
	clk := vclock.New()
	a := nic.New(clk, "h0", 0, 0, tr)
	b := nic.New(clk, "h1", 1, 0, tr)
	p := &Pair{Clock: clk, A: a, B: b,
		AB: &Wire{Clock: clk, From: a, Recv: b.Receive, Gap: 100 * time.Nanosecond, Delay: time.Microsecond},
		BA: &Wire{Clock: clk, From: b, Recv: a.Receive, Gap: 100 * time.Nanosecond, Delay: time.Microsecond}}
	a.Attach(p.AB)
	b.Attach(p.BA)
	return p
}

// Connect makes QP qa on A and qb on B and connects them.
func (p *Pair) Connect(t *testing.T, qa, qb uint32) (*roce.QP, *roce.QP) {
	t.Helper()
	x, y := p.A.NewQP(qa), p.B.NewQP(qb)
	require.NoError(t, x.Connect(p.A.PathTo(p.B, qb), RCConfig(100+qa, 500+qb)))
	require.NoError(t, y.Connect(p.B.PathTo(p.A, qa), RCConfig(500+qb, 100+qa)))
	return x, y
}

// Frame is pkt on path, built.
func Frame(t *testing.T, p frames.Path, pkt *frames.Packet) []byte {
	t.Helper()
	b, err := frames.NewBuilder(p)
	require.NoError(t, err)
	buf := make([]byte, 9000)
	n, err := b.Build(buf, pkt)
	require.NoError(t, err)
	return buf[:n]
}
