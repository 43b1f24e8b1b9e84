package fabric

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/switching"
)

// slowReceiver sends n frames of 1000 B of priority 3 from h0 to h1, whose
// NIC drains its receive buffer at 5 Gb/s behind a 10 Gb/s link, and
// returns when h1's host got each.
func slowReceiver(t *testing.T, cfg Config, n int) (*Fabric, []time.Duration) {
	t.Helper()
	cfg.Hosts, cfg.Link, cfg.NICRxRate, cfg.OpenPorts = 2, LinkConfig{Rate: 10e9, Latency: time.Microsecond}, 5e9, true
	f, err := New(cfg)
	require.NoError(t, err)
	var got []time.Duration
	last := -1
	f.Hosts[1].OnControl = func(b []byte) {
		assert.Greater(t, frameID(b), last, "frames reach the host in order")
		last = frameID(b)
		got = append(got, f.Clock.Now())
	}
	for i := range n {
		fr := prioFrame(3, 1000, 0, i)
		copy(fr[0:6], f.Hosts[1].MAC)
		copy(fr[6:12], f.Hosts[0].MAC)
		f.Hosts[0].SendControl(fr)
	}
	runIdle(t, f)
	return f, got
}

// With PFC on priority 3, a host draining at half its link's rate makes
// its NIC pause the switch port towards it (the NIC's XOFF: its 262016 B
// buffer less the port's 802.1Qbb headroom); the paused port's queue
// fills the switch's ingress buffer for h0's port past its 20 kB XOFF,
// and the switch pauses h0 in turn: the pause spreads upstream. Nothing
// is dropped, every frame arrives in order, and the host's drain never
// idles: the last frame reaches it 999 drain times (1000 B × 8 / 5 Gb/s
// = 1.6 µs) after the first.
func TestNICPausesASlowReceiversLink(t *testing.T) {
	const n = 1000
	f, got := slowReceiver(t, Config{Buffer: switching.BufferConfig{Lossless: 1 << 3, XOFF: 20000}}, n)
	require.Len(t, got, n, "every frame reached the host")
	assert.Equal(t, got[0]+(n-1)*1600*time.Nanosecond, got[n-1], "the host's drain idled")

	rx := f.Hosts[1].StatsNow()
	assert.Zero(t, rx.RxBufferDrops)
	assert.Positive(t, rx.RxPausesXOFF)
	assert.Equal(t, rx.RxPausesXOFF, rx.RxPausesXON, "every pause ended once the buffer drained")
	xoff, xon := f.Hosts[1].RxBufferThresholds()
	hdrm := 2*int64(10e9*1e-6/8) + 2*switching.DefaultMaxFrame + 60*512/8 // Annex N at 10G, 1 µs; 802.3 Table 31B-1
	assert.Equal(t, int64(262016)-hdrm, xoff)
	assert.Equal(t, xoff-(4096+256), xon)
	assert.Greater(t, rx.RxBufferMaxBytes, xoff)
	assert.LessOrEqual(t, rx.RxBufferMaxBytes, int64(262016))

	byDir := map[string]PFCStats{}
	for _, s := range f.PFCStats() {
		require.Equal(t, 3, s.Priority, "%+v", s)
		byDir[s.Direction] = s
	}
	nicSent, swGot := byDir["port1-in"], byDir["port1-out"]
	assert.Equal(t, rx.RxPausesXOFF+rx.RxPausesRefresh+rx.RxPausesXON, nicSent.PausesSent, "the NIC's pauses on its link")
	assert.Equal(t, nicSent.PausesSent, swGot.PausesReceived)
	assert.Positive(t, swGot.PausedNs, "the switch port towards h1 was paused")
	assert.Positive(t, byDir["port0-out"].PausesSent, "the switch paused h0 in turn")
	assert.Positive(t, byDir["port0-in"].PausedNs)

	assert.Zero(t, f.LinkStats().QueueDrops)
	var swPauses uint64
	for _, u := range f.Switch.Buffer() {
		assert.Zero(t, u.DropsHeadroom+u.DropsEgress+u.DropsFull, "%+v", u)
		if u.Port == 0 && u.Priority == 3 {
			swPauses = u.PausesXOFF
		}
	}
	assert.Positive(t, swPauses)
}

// Without PFC the same slow receiver drops what its buffer cannot hold
// and pauses no one; the fabric has no MAC Control at all.
func TestNICDropsWithoutPFC(t *testing.T) {
	const n = 1000
	f, got := slowReceiver(t, Config{}, n)
	rx := f.Hosts[1].Stats
	assert.Positive(t, rx.RxBufferDrops)
	assert.Equal(t, uint64(n), uint64(len(got))+rx.RxBufferDrops, "every frame reached the host or was dropped by its NIC")
	assert.Zero(t, rx.RxPausesXOFF)
	assert.Nil(t, f.PFCStats())
	assert.LessOrEqual(t, rx.RxBufferMaxBytes, int64(262016))
	assert.Greater(t, rx.RxBufferMaxBytes, int64(262016-1000))
}

func TestNICRxConfigErrors(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{NICRxRate: -1}, "fabric: NIC receive rate -1 b/s: want a rate greater than 0, or 0 for none"},
		{Config{NICRxBuffer: 100000}, "fabric: a NIC receive buffer of 100000 B needs a drain rate"},
		{Config{NICRxRate: 1e9, NICRxBuffer: 1000}, "fabric: h0: NIC receive buffer: 1000 B: want at least two maximum frames (8704 B)"},
	} {
		c.cfg.Hosts, c.cfg.Link = 2, LinkConfig{Rate: 10e9}
		_, err := New(c.cfg)
		assert.EqualError(t, err, c.want)
	}
}
