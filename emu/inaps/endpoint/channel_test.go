package endpoint

// Two channel ends (a worker's and its PS's) joined by a fake wire on the
// virtual clock: each frame an end queues is taken at once, recorded,
// and (unless the test drops it) handed to the other end after the
// wire's delay (per frame, so a test can reorder). Expected deliveries,
// retransmissions and times are worked out from go-back-N with a
// cumulative ACK, TCP's fast retransmit on the third duplicate ACK and a
// window of 16.

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/vclock"
)

// seen is a frame on the fake wire.
type seen struct {
	at       time.Duration
	from     int // 0: worker end, 1: PS end
	kind     Kind
	seq, ack uint32
	dropped  bool
}

// delivered is a message an end handed up.
type delivered struct {
	at   time.Duration
	kind Kind
	tag  uint16 // the INA-PS header's seq: the test's name for the message
}

type fakeWire struct {
	t     *testing.T
	clk   *vclock.Clock
	ends  [2]*channel
	outs  [2]*outQueue
	log   []seen
	got   [2][]delivered
	delay func(s seen) time.Duration // 0: dropped
}

const (
	hop   = 10 * time.Microsecond
	chRTO = 1 * time.Millisecond
)

func newWire(t *testing.T) *fakeWire {
	w := &fakeWire{t: t, clk: vclock.New(), delay: func(seen) time.Duration { return hop }}
	addr := [2]inaps.Addr{
		{MAC: [6]byte{2, 0, 0, 0, 0, 1}, IP: [4]byte{10, 0, 0, 1}},
		{MAC: [6]byte{2, 0, 0, 0, 0, 2}, IP: [4]byte{10, 0, 0, 2}},
	}
	for i := 0; i < 2; i++ {
		i := i
		w.outs[i] = &outQueue{}
		w.ends[i] = newChannel(w.clk, addr[i], addr[1-i], w.outs[i], func() { w.drain(i) }, chRTO, func(k Kind, h wire.INAPS) {
			w.got[i] = append(w.got[i], delivered{w.clk.Now(), k, h.Seq()})
		})
	}
	return w
}

// drain takes what end i queued onto the wire.
func (w *fakeWire) drain(i int) {
	buf := make([]byte, 2048)
	for {
		n := w.outs[i].pop(buf)
		if n == 0 {
			return
		}
		f := append([]byte(nil), buf[:n]...)
		require.True(w.t, IsChannel(f), "a channel datagram")
		assert.Equal(w.t, w.ends[i].self.MAC[:], f[6:12], "source MAC")
		assert.Equal(w.t, w.ends[i].peer.MAC[:], f[0:6], "destination MAC")
		ch := f[chanOff:]
		s := seen{at: w.clk.Now(), from: i, kind: Kind(ch[0]), seq: binary.BigEndian.Uint32(ch[2:]), ack: binary.BigEndian.Uint32(ch[6:])}
		if s.kind == KindACK {
			assert.Len(w.t, f, chanAckLen)
		} else {
			assert.Len(w.t, f, ChannelFrameLen)
		}
		d := w.delay(s)
		s.dropped = d == 0
		w.log = append(w.log, s)
		if d > 0 {
			w.clk.AfterFunc(d, func() { w.ends[1-i].receive(f) })
		}
	}
}

// send queues messages tagged tags at end i.
func (w *fakeWire) send(i int, tags ...uint16) {
	for _, tag := range tags {
		w.ends[i].Send(KindGradient, func(h wire.INAPS) { h.SetSeq(tag); h.SetFlags(wire.INAPSFlagResend) })
	}
}

// data is how many times each channel seq left end i as a message.
func (w *fakeWire) data(i int) map[uint32]int {
	m := map[uint32]int{}
	for _, s := range w.log {
		if s.from == i && s.kind != KindACK {
			m[s.seq]++
		}
	}
	return m
}

func tags(d []delivered) []uint16 {
	var t []uint16
	for _, x := range d {
		t = append(t, x.tag)
	}
	return t
}

func seqs(n int) []uint16 {
	var s []uint16
	for i := 1; i <= n; i++ {
		s = append(s, uint16(i))
	}
	return s
}

func (w *fakeWire) settled() {
	w.t.Helper()
	a := w.ends[0]
	assert.Empty(w.t, a.unacked, "every message acknowledged")
	assert.Equal(w.t, 0, a.flying)
	assert.Equal(w.t, a.next, a.acked)
	assert.Equal(w.t, a.next, w.ends[1].expect)
	assert.Zero(w.t, w.clk.Pending(), "no timer left armed")
}

func TestChannelInOrder(t *testing.T) {
	w := newWire(t)
	w.send(0, 1, 2, 3, 4, 5)
	w.clk.Run(time.Second)
	require.Equal(t, []uint16{1, 2, 3, 4, 5}, tags(w.got[1]))
	for _, d := range w.got[1] {
		assert.Equal(t, hop, d.at)
		assert.Equal(t, KindGradient, d.kind)
	}
	assert.Equal(t, map[uint32]int{0: 1, 1: 1, 2: 1, 3: 1, 4: 1}, w.data(0))
	assert.Equal(t, uint64(5), w.ends[0].Sent)
	assert.Zero(t, w.ends[0].Retries)
	// Each message is acknowledged with the next seq expected.
	var acks []uint32
	for _, s := range w.log {
		if s.from == 1 {
			assert.Equal(t, KindACK, s.kind)
			acks = append(acks, s.ack)
		}
	}
	assert.Equal(t, []uint32{1, 2, 3, 4, 5}, acks)
	w.settled()
	assert.Empty(t, w.got[0], "ACKs are never delivered")
}

// Both directions at once: a message carries the sender's cumulative ACK.
func TestChannelBothWays(t *testing.T) {
	w := newWire(t)
	w.send(0, 1, 2)
	w.send(1, 7)
	w.clk.Run(time.Second)
	assert.Equal(t, []uint16{1, 2}, tags(w.got[1]))
	assert.Equal(t, []uint16{7}, tags(w.got[0]))
	assert.Empty(t, w.ends[0].unacked)
	assert.Empty(t, w.ends[1].unacked)
}

// A lost message is sent again when the timer fires (RTO from the send),
// and delivered once.
func TestChannelLossRecoveredByTimer(t *testing.T) {
	w := newWire(t)
	first := true
	w.delay = func(s seen) time.Duration {
		if s.from == 0 && s.kind != KindACK && first {
			first = false
			return 0
		}
		return hop
	}
	w.send(0, 1)
	w.clk.Run(time.Second)
	require.Equal(t, []uint16{1}, tags(w.got[1]))
	assert.Equal(t, chRTO+hop, w.got[1][0].at, "resent at the RTO, a hop later in")
	assert.Equal(t, uint64(1), w.ends[0].Retries)
	assert.Equal(t, 0, w.ends[0].backoff, "an ACK resets the back-off")
	w.settled()
}

// Go-back-N with back-off: everything lost until the third retry; retries
// at RTO, then 2·RTO and 4·RTO after (t = 1, 3, 7 RTO), each resending
// every message on the wire.
func TestChannelBackoff(t *testing.T) {
	w := newWire(t)
	w.delay = func(s seen) time.Duration {
		if s.from == 0 && s.at < 7*chRTO {
			return 0
		}
		return hop
	}
	w.send(0, 1, 2)
	w.clk.Run(time.Second)
	assert.Equal(t, []uint16{1, 2}, tags(w.got[1]))
	var at []time.Duration
	for _, s := range w.log {
		if s.from == 0 && s.seq == 0 {
			at = append(at, s.at)
		}
	}
	assert.Equal(t, []time.Duration{0, chRTO, 3 * chRTO, 7 * chRTO}, at)
	assert.Equal(t, map[uint32]int{0: 4, 1: 4}, w.data(0))
	assert.Equal(t, uint64(6), w.ends[0].Retries)
	w.settled()
}

// Reordered (the first message overtaken by two): delivered in order when
// it arrives, with two duplicate ACKs (below the threshold), nothing sent
// again.
func TestChannelReorder(t *testing.T) {
	w := newWire(t)
	w.delay = func(s seen) time.Duration {
		if s.from == 0 && s.seq == 0 && s.kind != KindACK {
			return 5 * hop
		}
		return hop
	}
	w.send(0, 1, 2, 3)
	w.clk.Run(time.Second)
	require.Equal(t, []uint16{1, 2, 3}, tags(w.got[1]))
	for _, d := range w.got[1] {
		assert.Equal(t, 5*hop, d.at, "all handed up when the first arrives")
	}
	assert.Equal(t, map[uint32]int{0: 1, 1: 1, 2: 1}, w.data(0))
	assert.Zero(t, w.ends[0].Retries)
	w.settled()
}

// Three duplicate ACKs (the first message lost, five behind it kept)
// resend the first at once, once; the five kept ahead are never resent.
func TestChannelFastRetransmit(t *testing.T) {
	w := newWire(t)
	first := true
	w.delay = func(s seen) time.Duration {
		if s.from == 0 && s.seq == 0 && s.kind != KindACK && first {
			first = false
			return 0
		}
		return hop
	}
	w.send(0, seqs(6)...)
	w.clk.Run(time.Second)
	require.Equal(t, seqs(6), tags(w.got[1]))
	// Sent at 0, the five in at 1 hop, their ACKs back at 2 hops: the
	// third triggers the resend, in at 3 hops, long before the RTO.
	for _, d := range w.got[1] {
		assert.Equal(t, 3*hop, d.at)
	}
	assert.Equal(t, map[uint32]int{0: 2, 1: 1, 2: 1, 3: 1, 4: 1, 5: 1}, w.data(0))
	assert.Equal(t, uint64(1), w.ends[0].Retries)
	dup := 0
	for _, s := range w.log {
		if s.from == 1 && s.ack == 0 {
			dup++
		}
	}
	assert.Equal(t, 5, dup, "five duplicate ACKs, one resend")
	w.settled()
}

// At most 16 messages on the wire: 40 queued, 16 leave; each ACK lets
// more go; all arrive in order, none twice.
func TestChannelWindow(t *testing.T) {
	w := newWire(t)
	w.send(0, seqs(40)...)
	assert.Len(t, w.data(0), chanWindow, "the first window")
	assert.Equal(t, 16, w.ends[0].flying)
	assert.Len(t, w.ends[0].unacked, 40)
	// The wire never holds more than 16 unacknowledged messages: every
	// message leaves with a seq below the sender's cumulative ACK + 16.
	inFlightOK := true
	w.delay = func(s seen) time.Duration {
		if s.from == 0 && s.seq >= w.ends[0].acked+chanWindow {
			inFlightOK = false
		}
		return hop
	}
	w.clk.Run(time.Second)
	assert.True(t, inFlightOK, "a message beyond the window left")
	require.Equal(t, seqs(40), tags(w.got[1]))
	for s, n := range w.data(0) {
		assert.Equal(t, 1, n, "message %d", s)
	}
	assert.Len(t, w.data(0), 40)
	assert.Zero(t, w.ends[0].Retries)
	w.settled()
}
