package switching_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/vclock"
)

// pauseRec is one PFC frame a port was asked to send.
type pauseRec struct {
	at     time.Duration
	enable uint8
	quanta [8]uint16
}

// linePort is a switch port on a link, as the fabric's link direction is
// one for the switch: an Egress, a TaggedEgress whose FIFO queue drains at
// a fixed rate (a frame leaves the queue, and is released, when its
// transmission starts, no earlier than its ready time; the line is busy
// for its bytes at rate), and a PauseEgress that records the pauses it is
// asked to send and hands them to onPause. stalled holds the queue until
// drain is called.
type linePort struct {
	clk     *vclock.Clock
	sw      *switching.Switch
	rate    float64
	stalled bool
	q       []queued
	busy    bool
	pauses  []pauseRec
	onPause func(enable uint8, quanta [8]uint16)
	sent    int // frames that left the queue
	timer   interface{ Reset(time.Duration) bool }
}

type queued struct {
	frame []byte
	ready time.Duration
	tag   uint32
}

func (l *linePort) Push(frame []byte, ready time.Duration) bool {
	panic("a tagged egress gets PushTagged")
}

func (l *linePort) PushTagged(frame []byte, ready time.Duration, tag uint32) bool {
	l.q = append(l.q, queued{append([]byte(nil), frame...), ready, tag})
	l.kick()
	return true
}

func (l *linePort) SendPause(enable uint8, quanta [8]uint16) {
	l.pauses = append(l.pauses, pauseRec{l.clk.Now(), enable, quanta})
	if l.onPause != nil {
		l.onPause(enable, quanta)
	}
}

// kick starts the next transmission if the line is free.
func (l *linePort) kick() {
	if l.busy || l.stalled || len(l.q) == 0 {
		return
	}
	l.busy = true
	start := max(l.clk.Now(), l.q[0].ready)
	l.clk.AfterFunc(start-l.clk.Now(), func() {
		f := l.q[0]
		l.q = l.q[1:]
		l.sent++
		l.sw.Departed(f.tag, f.frame)
		l.clk.AfterFunc(time.Duration(float64(len(f.frame))*8/l.rate*1e9), func() {
			l.busy = false
			l.kick()
		})
	})
}

func (l *linePort) drain() { l.stalled = false; l.kick() }

// frameOf is a RoCEv2 SEND with DSCP dscp cut to exactly size bytes (the
// switch forwards by the headers and never checks the ICRC; RoCE pads
// payloads to 4 bytes, so round sizes need the cut).
func frameOf(t *testing.T, dscp uint8, size int) []byte {
	t.Helper()
	f := roceFrameDSCP(t, frames.V2IPv4, dscp<<2, size)
	require.Greater(t, len(f), size)
	return f[:size]
}

// bufferRig is a switch on a virtual clock with n line ports at rate.
type bufferRig struct {
	clk   *vclock.Clock
	sw    *switching.Switch
	ports []*linePort
}

func newBufferRig(t *testing.T, n int, rate float64, prop time.Duration) *bufferRig {
	r := &bufferRig{clk: vclock.New()}
	r.sw = switching.New(r.clk, "s0", switching.Timing{Forward: 1})
	for p := 0; p < n; p++ {
		lp := &linePort{clk: r.clk, sw: r.sw, rate: rate}
		r.ports = append(r.ports, lp)
		r.sw.SetPort(p, lp, "p")
		r.sw.SetPortLink(p, rate, prop)
	}
	r.sw.Route([6]byte{2, 0, 0, 0, 0, 2}, []int{n - 1}) // roceFrameDSCP's destination: the last port
	return r
}

func (r *bufferRig) use(port, prio int) switching.BufferUse {
	for _, u := range r.sw.Buffer() {
		if u.Port == port && u.Priority == prio {
			return u
		}
	}
	return switching.BufferUse{}
}

// TestIncastXOFFXON: 2:1 incast of F = 1000-byte frames of lossless
// priority 3 at 10 Gb/s into a 10 Gb/s egress, static XOFF 10 F, XON
// offset 3 F. Worked by hand, T = 800 ns a frame, forward latency 1 ns:
// sender i's k-th frame arrives at kT (sender 0 first), the egress is a
// FIFO, so frame (i, k) is the (2k+i)-th to leave, at 1 ns + (2k+i)T.
// Just after the arrival at kT, ingress 0 holds k+1 - (⌊(k-1)/2⌋+1)
// frames and ingress 1 holds k+1 - (⌊(k-2)/2⌋+1): ingress 1 first holds
// 11 frames (over XOFF) at k = 19, ingress 0 at k = 20; each pauses then
// and its sender stops (bursts of 20 and 21 frames). Its next departures
// release the headroom frame, then shared frames down to 7 (XOFF - XON
// offset): ingress 1's four departures are frames 19, 21, 23, 25 (XON at
// 25T + 1 ns), ingress 0's are 20, 22, 24, 26 (XON at 26T + 1 ns).
func TestIncastXOFFXON(t *testing.T) {
	const F, T = 1000, 800 * time.Nanosecond
	r := newBufferRig(t, 3, 10e9, 0)
	require.NoError(t, r.sw.SetBuffer(switching.BufferConfig{Lossless: 1 << 3, XOFF: 10 * F, XONDelta: 3 * F}))
	f := frameOf(t, 26, F)
	burst := [2]int{21, 20}
	paused := [2]bool{}
	for i := range 2 {
		r.ports[i].onPause = func(enable uint8, q [8]uint16) { paused[i] = q[3] != 0 }
	}
	sentAfterPause := 0
	for k := range 21 {
		for i := range 2 {
			if k < burst[i] {
				r.clk.AfterFunc(time.Duration(k)*T, func() {
					if paused[i] {
						sentAfterPause++
					}
					r.sw.Ingress(i, f)
				})
			}
		}
	}
	for r.clk.Step() {
		require.NoError(t, r.sw.BufferBalance())
	}
	assert.Zero(t, sentAfterPause)
	var all [8]uint16
	all[3] = 0xFFFF
	assert.Equal(t, []pauseRec{{19 * T, 1 << 3, all}, {25*T + 1, 1 << 3, [8]uint16{}}}, r.ports[1].pauses, "ingress 1: XOFF at 19T, XON at 25T + 1 ns")
	assert.Equal(t, []pauseRec{{20 * T, 1 << 3, all}, {26*T + 1, 1 << 3, [8]uint16{}}}, r.ports[0].pauses, "ingress 0: XOFF at 20T, XON at 26T + 1 ns")
	assert.Equal(t, 41, r.ports[2].sent, "every frame left")
	for i := range 2 {
		u := r.use(i, 3)
		assert.Equal(t, int64(11*F), u.MaxBytes, "ingress %d held XOFF + one frame", i)
		assert.Equal(t, int64(F), u.MaxHeadroomBytes)
		assert.Equal(t, uint64(1), u.PausesXOFF)
		assert.Equal(t, uint64(1), u.PausesXON)
		assert.Zero(t, u.PausesRefresh)
		assert.Equal(t, int64(6*T+1), u.PausedNs)
		assert.Zero(t, u.DropsEgress+u.DropsFull+u.DropsHeadroom)
	}
	eg := r.sw.BufferEgress()
	require.Len(t, eg, 1)
	assert.Equal(t, switching.EgressUse{Switch: "s0", Port: 2, Priority: 3, MaxBytes: 21 * F, MaxFrames: 21}, eg[0],
		"the egress queue holds at most 21 frames: at 20T, 41 arrived and 20 left (at 1 ns + jT, j ≤ 19)")
}

// TestDynamicXOFF: XOFF = α × free shared buffer, moving as other ports
// fill it. Shared pool S = 100 F (Bytes less 3 ports × 5 F of headroom),
// α = 1/2, the egress stalled. Ingress 1 holds 20 F first; then ingress
// 0's (m+1)-th frame is stored in shared while (m+1) F ≤ ½ (80 - m) F,
// i.e. for m ≤ 26: 27 frames, the 28th goes to headroom and pauses.
// Alone it would have taken (m+1) ≤ ½ (100 - m): 33 frames.
func TestDynamicXOFF(t *testing.T) {
	const F = 1000
	for _, other := range []int{20, 0} {
		r := newBufferRig(t, 3, 10e9, 0)
		r.ports[2].stalled = true
		require.NoError(t, r.sw.SetBuffer(switching.BufferConfig{Bytes: 115 * F, Headroom: 5 * F, Lossless: 1 << 3, Alpha: 0.5}))
		f := frameOf(t, 26, F)
		for range other {
			r.sw.Ingress(1, f)
		}
		want := map[int]int{20: 27, 0: 33}[other]
		for m := 0; ; m++ {
			xoff, xon, hr, free := r.sw.BufferThresholds(0)
			wantFree := int64(100-other-m) * F
			require.Equal(t, wantFree, free, "free after %d frames", m)
			require.Equal(t, wantFree/2, xoff, "XOFF = α × free after %d frames", m)
			require.Equal(t, wantFree/2-switching.DefaultXONDelta, xon)
			require.Equal(t, int64(5*F), hr)
			r.sw.Ingress(0, f)
			if len(r.ports[0].pauses) > 0 {
				assert.Equal(t, want, m, "with %d F on ingress 1, ingress 0 pauses at its frame %d", other*F, m+1)
				break
			}
			require.Less(t, m, want, "no pause")
		}
		assert.Equal(t, int64(F), r.use(0, 3).MaxHeadroomBytes)
		assert.Empty(t, r.ports[1].pauses, "ingress 1 never crossed its XOFF")
		require.NoError(t, r.sw.BufferBalance())
	}
}

// TestLossyEgressThreshold: a lossy queue is admitted while, with the
// frame, it stays within EgressAlpha × free; the pool has room for the
// frame. With α = 1 and S = 100 F: port 2's (m+1)-th frame while m+1 ≤
// 100 - m (50 frames), then port 3's (e+1)-th while e+1 ≤ 50 - e (25).
// With the default α = 8 and S = 100.5 F: port 2 takes (m+1) ≤ 8(100.5
// - m), 90 frames; port 3 (e+1) ≤ 8(10.5 - e), 10; then 0.5 F is free:
// port 4's empty queue is within 8 × 0.5 F but the frame does not fit,
// a buffer-full drop.
func TestLossyEgressThreshold(t *testing.T) {
	const F = 1000
	send := func(r *bufferRig, port, n int) {
		var mac [6]byte
		mac[5] = byte(0x10 + port)
		f := frameOf(t, 0, F)
		copy(f[0:6], mac[:])
		r.sw.Route(mac, []int{port})
		for range n {
			r.sw.Ingress(0, f)
		}
	}
	r := newBufferRig(t, 5, 10e9, 0)
	for _, p := range r.ports {
		p.stalled = true
	}
	require.NoError(t, r.sw.SetBuffer(switching.BufferConfig{Bytes: 100 * F, Enforce: true, EgressAlpha: 1}))
	send(r, 2, 60)
	send(r, 3, 60)
	eg := r.sw.BufferEgress()
	require.Len(t, eg, 2)
	assert.Equal(t, switching.EgressUse{Switch: "s0", Port: 2, Bytes: 50 * F, Frames: 50, MaxBytes: 50 * F, MaxFrames: 50, Drops: 10}, eg[0])
	assert.Equal(t, switching.EgressUse{Switch: "s0", Port: 3, Bytes: 25 * F, Frames: 25, MaxBytes: 25 * F, MaxFrames: 25, Drops: 35}, eg[1])
	u := r.use(0, 0)
	assert.Equal(t, uint64(45), u.DropsEgress)
	assert.Zero(t, u.DropsFull+u.DropsHeadroom+u.PausesXOFF)
	require.NoError(t, r.sw.BufferBalance())

	r = newBufferRig(t, 5, 10e9, 0)
	for _, p := range r.ports {
		p.stalled = true
	}
	require.NoError(t, r.sw.SetBuffer(switching.BufferConfig{Bytes: 100*F + F/2, Enforce: true}))
	send(r, 2, 91)
	send(r, 3, 11)
	send(r, 4, 1)
	eg = r.sw.BufferEgress()
	require.Len(t, eg, 3)
	assert.Equal(t, [3]int64{90, 10, 0}, [3]int64{eg[0].Frames, eg[1].Frames, eg[2].Frames})
	u = r.use(0, 0)
	assert.Equal(t, uint64(2), u.DropsEgress, "port 2's 91st, port 3's 11th")
	assert.Equal(t, uint64(1), u.DropsFull, "port 4's frame")
	require.NoError(t, r.sw.BufferBalance())
	// Draining releases everything.
	for _, p := range r.ports {
		p.drain()
	}
	for r.clk.Step() {
	}
	now, _ := r.sw.BufferBytes()
	assert.Zero(t, now)
	require.NoError(t, r.sw.BufferBalance())
}

// upstream is a sender on the far end of a switch port's link that
// honours PFC: a pause reaches it one propagation delay after the switch
// sent it and stops it for quanta × 512 bit times from then (0: resume);
// a frame it has started finishes. Its frames arrive at the switch a
// frame time plus the propagation delay after they start.
type upstream struct {
	r       *bufferRig
	port    int
	rate    float64
	prop    time.Duration
	frame   []byte
	left    int
	until   time.Duration // paused until
	busy    bool
	ignore  bool // a sender without PFC: sends regardless
	wake    interface{ Reset(time.Duration) bool }
	started int
}

func (u *upstream) frameTime() time.Duration {
	return time.Duration(float64(len(u.frame)) * 8 / u.rate * 1e9)
}

func (u *upstream) pause(enable uint8, q [8]uint16) {
	at := u.r.clk.Now() + u.prop
	u.r.clk.AfterFunc(u.prop, func() {
		u.until = at + time.Duration(float64(q[3])*512/u.rate*1e9)
		u.next()
	})
}

func (u *upstream) next() {
	now := u.r.clk.Now()
	if u.busy || u.left == 0 {
		return
	}
	if now < u.until && !u.ignore {
		u.wake.Reset(u.until - now)
		return
	}
	u.busy, u.left = true, u.left-1
	u.started++
	ft := u.frameTime()
	u.r.clk.AfterFunc(ft+u.prop, func() { u.r.sw.Ingress(u.port, u.frame) })
	u.r.clk.AfterFunc(ft, func() { u.busy = false; u.next() })
}

// TestLosslessNeverDrops: a 4:1 incast of lossless frames at 10 Gb/s
// over 1 µs links into a shared pool of 100 kB (beyond the headroom):
// with upstreams that honour the pauses, no frame is dropped (the
// default headroom covers what is in flight), every frame arrives, the
// books balance at every event; with upstreams that ignore them, the
// headroom overflows and drops.
func TestLosslessNeverDrops(t *testing.T) {
	const F, N, burst, rate, prop = 1000, 4, 400, 10e9, time.Microsecond
	for _, ignore := range []bool{false, true} {
		r := newBufferRig(t, N+1, rate, prop)
		cfg := switching.BufferConfig{Lossless: 1 << 3}
		// Headroom by hand (802.1Qbb Annex N, 802.3 Table 31B-1 at 10 Gb/s:
		// 60 quanta of 512 bits): 2 × 10 Gb/s × 1 µs / 8 + 2 × 9216 + 60 × 64.
		hr := int64(2*10e9*1e-6/8 + 2*9216 + 60*64)
		cfg.Bytes = int64(N+1)*hr + 100_000
		require.NoError(t, r.sw.SetBuffer(cfg))
		f := frameOf(t, 26, F)
		ups := make([]*upstream, N)
		for i := range ups {
			u := &upstream{r: r, port: i, rate: rate, prop: prop, frame: f, left: burst, ignore: ignore}
			u.wake = r.clk.AfterFunc(time.Hour, u.next)
			r.ports[i].onPause = u.pause
			ups[i] = u
		}
		for _, u := range ups {
			u.next()
		}
		for r.clk.Step() {
			require.NoError(t, r.sw.BufferBalance())
		}
		var drops, pauses, xons uint64
		for i := range N {
			u := r.use(i, 3)
			drops += u.DropsHeadroom + u.DropsFull + u.DropsEgress
			pauses += u.PausesXOFF
			xons += u.PausesXON
			_, _, h, _ := r.sw.BufferThresholds(i)
			assert.Equal(t, hr, h)
			assert.LessOrEqual(t, u.MaxHeadroomBytes, hr)
		}
		if ignore {
			assert.NotZero(t, drops, "senders ignoring PFC overflow the headroom")
			continue
		}
		assert.Zero(t, drops, "a lossless priority with PFC honoured never drops")
		assert.Equal(t, N*burst, r.ports[N].sent, "every frame arrived and left")
		assert.NotZero(t, pauses, "the incast paused its senders")
		assert.Equal(t, pauses, xons, "every pause was resumed")
		now, _ := r.sw.BufferBytes()
		assert.Zero(t, now)
	}
}

// TestPauseRefresh: an ingress held over XON (its egress stalled) has its
// pause re-sent every half pause time, 0xFFFF × 512 bit times / 2 at
// 100 Gb/s = 167769.6 ns (truncated to whole ns), until it drains.
func TestPauseRefresh(t *testing.T) {
	const F = 1000
	r := newBufferRig(t, 2, 100e9, 0)
	r.ports[1].stalled = true
	require.NoError(t, r.sw.SetBuffer(switching.BufferConfig{Lossless: 1 << 3, XOFF: 5 * F, XONDelta: 2 * F}))
	f := frameOf(t, 26, F)
	for range 6 {
		r.sw.Ingress(0, f)
	}
	const half = 167769 * time.Nanosecond
	r.clk.AdvanceTo(3*half + half/2)
	require.Len(t, r.ports[0].pauses, 4)
	for k, p := range r.ports[0].pauses {
		assert.Equal(t, time.Duration(k)*half, p.at)
		assert.Equal(t, uint16(0xFFFF), p.quanta[3])
	}
	u := r.use(0, 3)
	assert.Equal(t, uint64(1), u.PausesXOFF)
	assert.Equal(t, uint64(3), u.PausesRefresh)
	assert.Equal(t, int64(3*half+half/2), u.PausedNs, "a pause still on counts up to now")
	r.ports[1].drain()
	r.clk.Run(time.Hour)
	u = r.use(0, 3)
	assert.Equal(t, uint64(1), u.PausesXON)
	last := r.ports[0].pauses[len(r.ports[0].pauses)-1]
	assert.Equal(t, [8]uint16{}, last.quanta, "resumed")
	// 6 frames held (5 shared + 1 headroom); XON once the headroom frame
	// and then shared down to 3 F left: the third departure, two frame
	// times of 80 ns after the drain began (their ready times long past).
	assert.Equal(t, 3*half+half/2+160, last.at)
	assert.Equal(t, int64(last.at), u.PausedNs)
}

// TestPauseReceivedAndReport: PFC frames arriving at a port count per
// priority as pauses and resumes in the egress rows, which the report
// and its JSON carry beside the ingress rows' new counters.
func TestPauseReceivedAndReport(t *testing.T) {
	r := newBufferRig(t, 2, 10e9, 0)
	var q [8]uint16
	q[3], q[5] = 100, 0
	r.sw.PauseReceived(1, 1<<3|1<<5, q)
	r.sw.PauseReceived(1, 1<<3, [8]uint16{})
	eg := r.sw.BufferEgress()
	require.Len(t, eg, 2)
	assert.Equal(t, switching.EgressUse{Switch: "s0", Port: 1, Priority: 3, PausesReceived: 1, ResumesReceived: 1}, eg[0])
	assert.Equal(t, switching.EgressUse{Switch: "s0", Port: 1, Priority: 5, ResumesReceived: 1}, eg[1])
	js, err := json.Marshal(r.sw.Report())
	require.NoError(t, err)
	assert.Contains(t, string(js), `"buffer_egress":[{"switch":"s0","port":1,"priority":3,"bytes":0,"frames":0,"max_bytes":0,"max_frames":0,"pauses_received":1,"resumes_received":1}`)
	var back switching.Report
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, eg, back.Egress)
}

// TestBufferConfigValidate: nonsense is refused with one line.
func TestBufferConfigValidate(t *testing.T) {
	links := []switching.PortLink{{Rate: 100e9, Prop: time.Microsecond}, {Rate: 100e9, Prop: time.Microsecond}}
	ok := []switching.BufferConfig{{}, {Lossless: 1 << 3}, {Enforce: true, EgressAlpha: 0.5}, {Lossless: 8, XOFF: 100_000, XONDelta: 5000}}
	for _, c := range ok {
		assert.NoError(t, c.Validate(links...), "%+v", c)
	}
	for _, tc := range []struct {
		c    switching.BufferConfig
		want string
	}{
		{switching.BufferConfig{Bytes: -1}, "negative"},
		{switching.BufferConfig{XOFF: -5}, "negative"},
		{switching.BufferConfig{Headroom: -5}, "negative"},
		{switching.BufferConfig{XONDelta: -5}, "negative"},
		{switching.BufferConfig{Alpha: -1}, "alpha"},
		{switching.BufferConfig{EgressAlpha: -0.5}, "egress alpha"},
		{switching.BufferConfig{Lossless: 8, XOFF: 2000}, "not under XOFF"},
		{switching.BufferConfig{Lossless: 8, XOFF: 3000, XONDelta: 3000}, "not under XOFF"},
		{switching.BufferConfig{Lossless: 8, XOFF: 11_990_000}, "more than the 12000000 B buffer"},
		{switching.BufferConfig{Lossless: 0xff, Bytes: 1_000_000}, "leaves nothing"},
		{switching.BufferConfig{Lossless: 8, Bytes: 200_000, XOFF: 100_000}, "shared buffer"},
	} {
		err := tc.c.Validate(links...)
		if assert.Error(t, err, "%+v", tc.c) {
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "\n")
		}
	}
	assert.Error(t, switching.BufferConfig{}.Validate(switching.PortLink{Rate: -1}))
	// SetBuffer refuses too, and PFC needs a clock with timers.
	sw := switching.New(&fakeClock{}, "s9", switching.Timing{})
	sw.SetPort(0, &fakePort{}, "p0")
	assert.ErrorContains(t, sw.SetBuffer(switching.BufferConfig{Lossless: 8}), "s9: switch buffer: PFC needs a clock with timers")
	assert.NoError(t, sw.SetBuffer(switching.BufferConfig{Enforce: true}))
	assert.ErrorContains(t, sw.SetBuffer(switching.BufferConfig{Alpha: -2}), "s9: switch buffer: alpha")
}

// TestPortHeadroom: 802.1Qbb Annex N's headroom, worked by hand from the
// link: 100 Gb/s over 1 µs is 2 × 12500 B on the wire, two 9216-byte
// frames, and 802.3's 394 quanta (× 64 bytes) of response delay.
func TestPortHeadroom(t *testing.T) {
	c := switching.BufferConfig{}
	assert.Equal(t, int64(25000+2*9216+394*64), c.PortHeadroom(switching.PortLink{Rate: 100e9, Prop: time.Microsecond}))
	assert.Equal(t, int64(2500+2*9216+60*64), c.PortHeadroom(switching.PortLink{Rate: 10e9, Prop: time.Microsecond}))
	assert.Equal(t, int64(125+2*9216+60*64), c.PortHeadroom(switching.PortLink{Rate: 1e9, Prop: 500 * time.Nanosecond}), "up to 10 Gb/s: 10 Gb/s's delay")
	assert.Equal(t, int64(0+2*1500+118*64), switching.BufferConfig{MaxFrame: 1500}.PortHeadroom(switching.PortLink{Rate: 40e9}))
	assert.Equal(t, int64(2*9216), c.PortHeadroom(switching.PortLink{}), "a device: two frames")
	assert.Equal(t, int64(777), switching.BufferConfig{Headroom: 777}.PortHeadroom(switching.PortLink{Rate: 100e9}))
}

// sinkPort is a tagged egress with a one-frame queue that does not
// allocate: a frame leaves (is released) when the next one comes, as a
// link direction's never leaves from within PushTagged.
type sinkPort struct {
	sw   *switching.Switch
	tag  uint32
	held bool
	buf  [2048]byte
	n    int
}

func (s *sinkPort) Push(frame []byte, ready time.Duration) bool { return true }
func (s *sinkPort) PushTagged(frame []byte, ready time.Duration, tag uint32) bool {
	if s.held {
		s.sw.Departed(s.tag, s.buf[:s.n])
	}
	s.tag, s.held, s.n = tag, true, copy(s.buf[:], frame)
	return true
}

// TestBufferZeroConfigUnchanged: a switch never configured (or given the
// zero config) tags frames as before ((in+1) × 8 + priority), lists no
// egress rows, and forwarding allocates nothing; a configured one
// allocates nothing in steady state either.
func TestBufferZeroConfigUnchanged(t *testing.T) {
	for _, cfg := range []*switching.BufferConfig{nil, {}, {Lossless: 1 << 3}} {
		sw := switching.New(vclock.New(), "s0", switching.Timing{})
		out := &sinkPort{sw: sw}
		sw.SetPort(0, &fakePort{}, "p0")
		sw.SetPort(1, out, "p1")
		sw.Route([6]byte{2, 0, 0, 0, 0, 2}, []int{1})
		if cfg != nil {
			require.NoError(t, sw.SetBuffer(*cfg))
		}
		f := frameOf(t, 26, 200)
		sw.Ingress(0, f)
		allocs := testing.AllocsPerRun(1000, func() { sw.Ingress(0, f) })
		assert.Zero(t, allocs, "%+v", cfg)
		if cfg == nil || *cfg == (switching.BufferConfig{}) {
			assert.Equal(t, uint32(1*8+3), out.tag)
			assert.Empty(t, sw.BufferEgress())
			js, err := json.Marshal(sw.Report())
			require.NoError(t, err)
			assert.False(t, strings.Contains(string(js), "buffer_egress") || strings.Contains(string(js), "drops_") || strings.Contains(string(js), "pauses"), "%s", js)
		} else {
			assert.Equal(t, uint32(2<<16|1*8+3), out.tag, "egress port 1 + 1 in the high half")
			assert.Len(t, sw.BufferEgress(), 1)
		}
		require.NoError(t, sw.BufferBalance())
	}
}

// BenchmarkPushZeroConfig measures forwarding through the buffer's
// accounting on a switch never configured.
func BenchmarkPushZeroConfig(b *testing.B) {
	sw := switching.New(vclock.New(), "s0", switching.Timing{})
	out := &sinkPort{sw: sw}
	sw.SetPort(0, &fakePort{}, "p0")
	sw.SetPort(1, out, "p1")
	sw.Route([6]byte{2, 0, 0, 0, 0, 2}, []int{1})
	f := make([]byte, 200)
	copy(f, []byte{2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45, 26 << 2})
	b.ReportAllocs()
	for b.Loop() {
		sw.Ingress(0, f)
	}
}
