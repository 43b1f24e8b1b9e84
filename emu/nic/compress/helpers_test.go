package compress_test

// The fakes of emu/nic's tests: NICs driven in virtual time, joined back
// to back by a small wire that pulls frames with NextFrame when kicked.

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

// kicks is a Transmitter that only counts Kick calls.
type kicks struct{ n int }

func (k *kicks) Kick() { k.n++ }

// wire is one direction from a NIC to a receiver: a kick schedules the
// pump (at once, as its own event); the pump sends a frame every gap and
// hands it to recv delay later, until the NIC has nothing.
type wireDir struct {
	clk   *vclock.Clock
	from  *nic.NIC
	recv  func([]byte)
	gap   time.Duration
	delay time.Duration
	kicks int
	busy  bool
	buf   []byte
	sent  [][]byte
}

func (w *wireDir) Kick() {
	w.kicks++
	if w.busy {
		return
	}
	w.busy = true
	w.clk.AfterFunc(0, w.pump)
}

func (w *wireDir) pump() {
	if w.buf == nil {
		w.buf = make([]byte, 4096+256)
	}
	n := w.from.NextFrame(w.buf)
	if n == 0 {
		w.busy = false
		return
	}
	f := bytes.Clone(w.buf[:n])
	w.sent = append(w.sent, f)
	w.clk.AfterFunc(w.delay, func() { w.recv(f) })
	w.clk.AfterFunc(w.gap, w.pump)
}

// runIdle steps the clock until nothing is pending.
func runIdle(t *testing.T, clk *vclock.Clock) {
	t.Helper()
	for i := 0; clk.Step(); i++ {
		require.Less(t, i, 100_000, "the event loop does not go idle")
	}
}

// ---- addresses and names ----

func rcCfg(sq, rq uint32) roce.Config {
	return roce.Config{MTU: 256, SQPSN: sq, RQPSN: rq, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 1}
}

// pair is two NICs joined back to back by two wire directions.
type pair struct {
	clk    *vclock.Clock
	a, b   *nic.NIC
	ab, ba *wireDir
}

func newPair(tr frames.Transport) *pair {
	clk := vclock.New()
	a := nic.New(clk, "h0", 0, 0, tr)
	b := nic.New(clk, "h1", 1, 0, tr)
	p := &pair{clk: clk, a: a, b: b,
		ab: &wireDir{clk: clk, from: a, recv: b.Receive, gap: 100 * time.Nanosecond, delay: time.Microsecond},
		ba: &wireDir{clk: clk, from: b, recv: a.Receive, gap: 100 * time.Nanosecond, delay: time.Microsecond}}
	a.Attach(p.ab)
	b.Attach(p.ba)
	return p
}

// connect makes QP qa on a and qb on b and connects them.
func (p *pair) connect(t *testing.T, qa, qb uint32) (*roce.QP, *roce.QP) {
	t.Helper()
	x, y := p.a.NewQP(qa), p.b.NewQP(qb)
	require.NoError(t, x.Connect(p.a.PathTo(p.b, qb), rcCfg(100+qa, 500+qb)))
	require.NoError(t, y.Connect(p.b.PathTo(p.a, qa), rcCfg(500+qb, 100+qa)))
	return x, y
}

// roceFrame is pkt on path, built.
func roceFrame(t *testing.T, p frames.Path, pkt *frames.Packet) []byte {
	t.Helper()
	b, err := frames.NewBuilder(p)
	require.NoError(t, err)
	buf := make([]byte, 9000)
	n, err := b.Build(buf, pkt)
	require.NoError(t, err)
	return buf[:n]
}
