package nic_test

// The receive buffer (rxbuffer.go) driven by hand in virtual time: frames
// handed to Receive at chosen instants, a fake uplink recording the PFC
// frames, and every instant below worked out on paper from the drain
// rate (frame bytes × 8 / rate, back to back) and the thresholds.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/vclock"
)

type sentPause struct {
	at     time.Duration
	enable uint8
	quanta [8]uint16
}

type fakeUplink struct {
	clock *vclock.Clock
	sent  []sentPause
}

func (u *fakeUplink) Kick() {}
func (u *fakeUplink) SendPause(enable uint8, quanta [8]uint16) {
	u.sent = append(u.sent, sentPause{u.clock.Now(), enable, quanta})
}

// slowNIC is a NIC whose delivered (non-RoCE) frames are timed by OnControl.
func slowNIC(t *testing.T, clock *vclock.Clock) (*nic.NIC, *fakeUplink, *[]time.Duration) {
	h := nic.New(clock, "h0", 0, 0, frames.V2IPv4)
	up := &fakeUplink{clock: clock}
	h.Attach(up)
	var got []time.Duration
	h.OnControl = func([]byte) { got = append(got, clock.Now()) }
	return h, up, &got
}

// frameOf is an n-byte broadcast frame of a local experimental EtherType
// (0x88B5): accepted by the MAC, not RoCE, so it reaches OnControl.
func frameOf(n int) []byte {
	f := make([]byte, n)
	copy(f, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 1, 0x88, 0xB5})
	return f
}

func us(x float64) time.Duration { return time.Duration(x*1000 + 0.5) }

// TestRxBufferXOFFXON: 1000-byte frames arrive every 1 µs (t = 0, 1, ...,
// 11 µs); the host drains 2.3 µs per frame (8000 bits / 2.3 µs), so frame
// j leaves at 2.3(j+1) µs. After arrival k the buffer holds k+1 −
// ⌊k/2.3⌋ frames: 1,2,3,3,4,4,5,5,6,7,7,8 (k = 0..11). With a static XOFF
// of 6500 B the pause goes at the first count above 6.5 frames: k = 9,
// t = 9 µs. The arrivals stop after k = 11 (8 frames held); the drains at
// 11.5, 13.8, 16.1, 18.4 µs bring it to 7, 6, 5, 4 frames: 4000 B is the
// first at or under XON = 6500 − 2000 B, so the resume goes at 18.4 µs.
// Meanwhile the pause is re-sent every half pause time (0xFFFF × 512 bit
// times at the link's 4 Tb/s, halved: 4.194 µs): at 13.194 and 17.388 µs.
func TestRxBufferXOFFXON(t *testing.T) {
	clock := vclock.New()
	h, up, got := slowNIC(t, clock)
	const linkRate = 4e12
	require.NoError(t, h.SetRxBuffer(nic.RxBuffer{Rate: 8000 / 2.3e-6, Bytes: 20000, Pause: up, Lossless: 1,
		Headroom: 5000, XOFF: 6500, XONDelta: 2000, LinkRate: linkRate}))
	xoff, xon := h.RxBufferThresholds()
	assert.Equal(t, [2]int64{6500, 4500}, [2]int64{xoff, xon})
	for k := range 12 {
		clock.AfterFunc(us(float64(k)), func() { h.Receive(frameOf(1000)) })
	}
	clock.Run(time.Second)

	half := 4194 * time.Nanosecond // 0xFFFF × 512 / 4e12 s / 2 = 4194.24 ns
	on, off := [8]uint16{0xFFFF}, [8]uint16{}
	assert.Equal(t, []sentPause{{us(9), 1, on}, {us(9) + half, 1, on}, {us(9) + 2*half, 1, on}, {us(18.4), 1, off}}, up.sent)
	var want []time.Duration
	for j := range 12 {
		want = append(want, us(2.3*float64(j+1)))
	}
	assert.Equal(t, want, *got, "each frame reaches the host 2.3 µs after the one before")
	s := h.Stats
	assert.Equal(t, uint64(1), s.RxPausesXOFF)
	assert.Equal(t, uint64(2), s.RxPausesRefresh)
	assert.Equal(t, uint64(1), s.RxPausesXON)
	assert.Equal(t, int64(8000), s.RxBufferMaxBytes)
	assert.Equal(t, int64(us(18.4)-us(9)), s.RxPausedNs)
	assert.Zero(t, s.RxBufferDrops)
	assert.Equal(t, uint64(12), s.RxFrames)
	assert.Equal(t, uint64(12), s.NotRoCE)
}

// TestRxBufferDrops: without PFC a frame that does not fit is dropped. The
// smallest buffer (two maximum frames, 8704 B) drained at 1 Gb/s (32 µs
// per 4000-byte frame) takes two frames at t = 0 and 100 ns; the third at
// 200 ns would make 12000 B: dropped. The fourth at 40 µs finds one frame
// (the first left at 32 µs): taken, and reaches the host at 96 µs, after
// the second (64 µs).
func TestRxBufferDrops(t *testing.T) {
	clock := vclock.New()
	h, up, got := slowNIC(t, clock)
	require.NoError(t, h.SetRxBuffer(nic.RxBuffer{Rate: 1e9, Bytes: 2 * nic.MaxFrame, Lossless: 1}))
	for _, at := range []time.Duration{0, 100, 200, 40 * time.Microsecond} {
		clock.AfterFunc(at, func() { h.Receive(frameOf(4000)) })
	}
	clock.Run(time.Second)
	assert.Equal(t, []time.Duration{32 * time.Microsecond, 64 * time.Microsecond, 96 * time.Microsecond}, *got)
	assert.Equal(t, uint64(1), h.Stats.RxBufferDrops)
	assert.Equal(t, int64(8000), h.Stats.RxBufferMaxBytes)
	assert.Empty(t, up.sent, "no uplink to pause: Lossless alone sends nothing")
	xoff, _ := h.RxBufferThresholds()
	assert.Zero(t, xoff)
}

// TestRxBufferDefaults: the defaults, and what SetRxBuffer refuses.
func TestRxBufferDefaults(t *testing.T) {
	clock := vclock.New()
	h, up, _ := slowNIC(t, clock)
	// ConnectX's 262016 B port buffer, one lossless priority with the
	// headroom given: XOFF = size − headroom, XON = XOFF − MaxFrame.
	require.NoError(t, h.SetRxBuffer(nic.RxBuffer{Rate: 5e9, Pause: up, Lossless: 1 << 3, Headroom: 24772}))
	xoff, xon := h.RxBufferThresholds()
	assert.Equal(t, int64(262016-24772), xoff)
	assert.Equal(t, int64(262016-24772-(4096+256)), xon)
	// Two lossless priorities share it: each gets half.
	require.NoError(t, h.SetRxBuffer(nic.RxBuffer{Rate: 5e9, Pause: up, Lossless: 3, Headroom: 24772}))
	xoff, _ = h.RxBufferThresholds()
	assert.Equal(t, int64(262016/2-24772), xoff)
	for _, c := range []struct {
		cfg  nic.RxBuffer
		want string
	}{
		{nic.RxBuffer{}, "NIC receive buffer: drain rate 0 b/s: want a rate greater than 0"},
		{nic.RxBuffer{Rate: -1}, "NIC receive buffer: drain rate -1 b/s: want a rate greater than 0"},
		{nic.RxBuffer{Rate: 1e9, Bytes: 8703}, "NIC receive buffer: 8703 B: want at least two maximum frames (8704 B)"},
		{nic.RxBuffer{Rate: 1e9, Bytes: 20000, Pause: up, Lossless: 1, Headroom: 16000},
			"NIC receive buffer: 20000 B cannot hold XOFF 4000 B, its 16000 B headroom and an XON above 0 for 1 lossless priorities"},
	} {
		assert.EqualError(t, nic.New(clock, "h1", 1, 0, frames.V2IPv4).SetRxBuffer(c.cfg), c.want)
	}
}
