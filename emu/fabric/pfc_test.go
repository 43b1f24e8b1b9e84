package fabric

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames"
)

// lineNs is the exact line time of an n-byte frame at rate bit/s in ns
// (preamble, SFD, FCS and gap: 24 bytes), for rates where it is whole.
func lineNs(n int, rate float64) time.Duration {
	return time.Duration(float64((n+24)*8) / rate * 1e9)
}

type prioArrival struct {
	at   time.Duration
	prio int
	id   int
}

// recordPrio records the frames a direction delivers, by priority and id.
func recordPrio(f *Fabric, d *linkDir) *[]prioArrival {
	var got []prioArrival
	orig := d.recv
	d.recv = func(b []byte) {
		got = append(got, prioArrival{f.Clock.Now(), switching.Priority(b), frameID(b)})
		orig(b)
	}
	return &got
}

// Two NICs on one switch with prio queues: a PFC frame sent from h1's end
// pauses priority 3 on the switch's port towards h1 for exactly quanta ×
// 512 bit times from its arrival; priority 1 flows meanwhile, and
// priority 3's first frame starts the instant the pause ends.
func TestPFCPausesOnePriorityOfASwitchPort(t *testing.T) {
	const rate, lat = 8e9, time.Microsecond // a byte is 1 ns: every time is whole
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: rate, Latency: lat}, Scheduler: "strict"})
	require.NoError(t, err)
	up, down := dirOf(t, f, "port1-in"), dirOf(t, f, "port1-out")
	got := recordPrio(f, down)
	const quanta = 100
	pause := time.Duration(quanta * 512 / rate * 1e9) // 6.4 µs at 8 Gb/s
	up.SendPause(1<<3, [8]uint16{3: quanta})
	arrive := lineNs(frames.PFCFrameLen, rate) + lat // 84 ns + 1 µs
	require.Equal(t, 1084*time.Nanosecond, arrive)
	const n = 1000
	f.Clock.AfterFunc(arrive+1, func() { // just after the pause took effect
		for i := range 3 {
			require.True(t, down.Push(prioFrame(3, n, 0, i), 0))
			require.True(t, down.Push(prioFrame(1, n, 0, 10+i), 0))
		}
	})
	runIdle(t, f)
	require.Len(t, *got, 6)
	start := arrive + 1
	for i, a := range (*got)[:3] { // priority 1, back to back from the push
		assert.Equal(t, 1, a.prio)
		assert.Equal(t, start+time.Duration(i+1)*lineNs(n, rate)+lat, a.at, "priority 1 frame %d", i)
	}
	end := arrive + pause
	require.Less(t, start+3*lineNs(n, rate), end, "the line is idle when the pause ends")
	for i, a := range (*got)[3:] { // priority 3: from the pause's end
		assert.Equal(t, 3, a.prio)
		assert.Equal(t, end+time.Duration(i+1)*lineNs(n, rate)+lat, a.at, "priority 3 frame %d", i)
	}
	// The PFC frame went on the wire and was consumed by the switch's MAC.
	assert.Equal(t, uint64(1), up.Stats.Frames)
	assert.Zero(t, up.Stats.Delivered)
	assert.Zero(t, f.Switch.Stats.Frames, "never handed to the switch")
	assert.Equal(t, []PFCStats{
		{Direction: "port1-in", Port: -1, Priority: 3, PausesSent: 1},
		{Direction: "port1-out", Switch: "s0", Port: 1, Priority: 3, PausesReceived: 1, PausedNs: int64(pause)},
	}, f.PFCStats())
}

// A resume (quanta 0) ends a pause at once and the queue sends.
func TestPFCResumeWakesTheTransmitter(t *testing.T) {
	const rate, lat = 8e9, time.Microsecond // a byte is 1 ns: every time is whole
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: rate, Latency: lat}, Scheduler: "strict"})
	require.NoError(t, err)
	up, down := dirOf(t, f, "port1-in"), dirOf(t, f, "port1-out")
	got := recordPrio(f, down)
	up.SendPause(1<<3, [8]uint16{3: 0xffff}) // 4.19 ms
	arrive := lineNs(frames.PFCFrameLen, rate) + lat
	f.Clock.AfterFunc(arrive+1, func() { down.Push(prioFrame(3, 1000, 0, 0), 0) })
	f.Clock.AfterFunc(10*time.Microsecond, func() { up.SendPause(1<<3, [8]uint16{}) })
	runIdle(t, f)
	require.Len(t, *got, 1)
	resumed := 10*time.Microsecond + lineNs(frames.PFCFrameLen, rate) + lat
	assert.Equal(t, resumed+lineNs(1000, rate)+lat, (*got)[0].at)
	st := f.PFCStats()
	require.Len(t, st, 2)
	assert.Equal(t, int64(resumed-arrive), st[1].PausedNs)
	assert.Equal(t, uint64(2), st[1].PausesReceived)
}

// A NIC's transmitter honours a pause: its control frame of the paused
// priority leaves when the pause ends.
func TestPFCPausesANIC(t *testing.T) {
	const rate, lat = 8e9, time.Microsecond // a byte is 1 ns: every time is whole
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: rate, Latency: lat}, Scheduler: "strict"})
	require.NoError(t, err)
	up, down := dirOf(t, f, "port0-in"), dirOf(t, f, "port0-out")
	var at []time.Duration
	orig := up.recv
	up.recv = func(b []byte) { at = append(at, f.Clock.Now()); orig(b) }
	const quanta = 1000 // 64 µs
	down.SendPause(1<<0, [8]uint16{quanta})
	arrive := lineNs(frames.PFCFrameLen, rate) + lat
	h := f.Hosts[0]
	f.Clock.AfterFunc(arrive+1, func() { h.SendControl(h.GratuitousARP()) }) // no IP: priority 0
	runIdle(t, f)
	require.Len(t, at, 1)
	end := arrive + time.Duration(quanta*512/rate*1e9)
	assert.Equal(t, end+lineNs(60, rate)+lat, at[0])
}

// ringTopo is n switches s0..s(n-1), each with one host, joined in a ring
// (ring) or a chain.
func ringTopo(t *testing.T, n int, ring bool) *topo.Topology {
	t.Helper()
	lp := topo.LinkParams{Rate: 8e9, Latency: time.Microsecond}
	tp := &topo.Topology{Kind: "custom"}
	for i := range n {
		tp.Nodes = append(tp.Nodes, topo.Node{Name: "h" + string(rune('0'+i)), Kind: topo.KindHost})
	}
	for i := range n {
		tp.Nodes = append(tp.Nodes, topo.Node{Name: "s" + string(rune('0'+i)), Kind: topo.KindSwitch})
	}
	link := func(a, b string) {
		tp.Links = append(tp.Links, topo.Link{A: a, B: b, LinkParams: lp, AB: a + "-" + b, BA: b + "-" + a})
	}
	for i := range n {
		link("h"+string(rune('0'+i)), "s"+string(rune('0'+i)))
	}
	for i := range n {
		if i+1 < n || ring {
			link("s"+string(rune('0'+i)), "s"+string(rune('0'+(i+1)%n)))
		}
	}
	return tp
}

// forceWait makes each direction of path paused for priority prio by a
// PFC frame from its receiving end at t=0, then queues a frame on it
// that entered its switch by the previous direction of path (the last's
// for the first, when cyclic) once the pauses hold.
func forceWait(t *testing.T, f *Fabric, prio int, path []string, cyclic bool) {
	t.Helper()
	var q [8]uint16
	q[prio] = 0xffff // 4.19 ms at 8 Gb/s
	for _, name := range path {
		dirOf(t, f, name).rev.SendPause(1<<prio, q)
	}
	f.Clock.AfterFunc(10*time.Microsecond, func() {
		for k, name := range path {
			if k == 0 && !cyclic {
				continue
			}
			prev := dirOf(t, f, path[(k+len(path)-1)%len(path)])
			tag := uint32(prev.pfc.toPort+1)*switching.Priorities + uint32(prio)
			require.True(t, dirOf(t, f, name).PushTagged(prioFrame(prio, 1000, 0, k), 0, tag))
		}
	})
}

// Three switches in a ring, each direction s0→s1→s2→s0 paused for
// priority 3 while holding frames that came in by the previous one: one
// deadlock, named in ring order, since the last pause arrived. Not before
// the pauses have lasted minPaused; not on another priority.
func TestDeadlockOnARing(t *testing.T) {
	f, err := New(Config{Topology: ringTopo(t, 3, true), Scheduler: "strict", LearnMACs: true})
	require.NoError(t, err)
	forceWait(t, f, 3, []string{"s0-s1", "s1-s2", "s2-s0"}, true)
	f.Clock.AdvanceTo(time.Millisecond)
	arrive := lineNs(frames.PFCFrameLen, 8e9) + time.Microsecond
	got := f.Deadlocks(500 * time.Microsecond)
	require.Len(t, got, 1)
	assert.Equal(t, Deadlock{Priority: 3, Directions: []string{"s0-s1", "s1-s2", "s2-s0"}, Since: arrive}, got[0])
	assert.Equal(t, "PFC deadlock on priority 3: s0-s1 → s1-s2 → s2-s0 paused since 1.084µs", got[0].String())
	assert.Empty(t, f.Deadlocks(time.Millisecond), "paused for less than minPaused")
}

// The same waits along a chain (no link s2-s0), or a ring where one
// direction's frames came from its host rather than the ring, form no
// cycle: nothing is reported.
func TestNoDeadlockWithoutACycle(t *testing.T) {
	f, err := New(Config{Topology: ringTopo(t, 3, false), Scheduler: "strict", LearnMACs: true})
	require.NoError(t, err)
	forceWait(t, f, 3, []string{"s0-s1", "s1-s2"}, false)
	f.Clock.AdvanceTo(time.Millisecond)
	assert.Empty(t, f.Deadlocks(100*time.Microsecond))

	f, err = New(Config{Topology: ringTopo(t, 3, true), Scheduler: "strict", LearnMACs: true})
	require.NoError(t, err)
	forceWait(t, f, 3, []string{"s0-s1", "s1-s2", "s2-s0"}, false) // s0-s1 holds nothing from s2-s0
	f.Clock.AfterFunc(20*time.Microsecond, func() {
		in := dirOf(t, f, "h0-s0").pfc.toPort // s0's frames from its host
		dirOf(t, f, "s0-s1").PushTagged(prioFrame(3, 1000, 0, 9), 0, uint32(in+1)*switching.Priorities+3)
	})
	f.Clock.AdvanceTo(time.Millisecond)
	assert.Empty(t, f.Deadlocks(100*time.Microsecond))
}

// A fabric without congestion settings has no MAC Control: a PFC frame
// is an ordinary frame, handed to the switch, and pauses nothing.
func TestNoMACControlWithoutCongestion(t *testing.T) {
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: 10e9, Latency: time.Microsecond}})
	require.NoError(t, err)
	for _, d := range f.dirs {
		assert.Nil(t, d.pfc, d.name)
		assert.IsType(t, &DropTail{}, d.queue, d.name)
	}
	f.Hosts[1].SendControl(frames.AppendPFC(nil, [6]byte(f.Hosts[1].MAC), 1<<3, [8]uint16{3: 100}))
	runIdle(t, f)
	assert.Equal(t, uint64(1), f.Switch.Stats.Frames)
	assert.Nil(t, f.PFCStats())
}

// Bad congestion settings are one-line errors.
func TestCongestionConfigErrors(t *testing.T) {
	base := Config{Hosts: 2, Link: LinkConfig{Rate: 10e9}}
	for want, mod := range map[string]func(c *Config){
		`scheduler "wfq": want one of strict, dwrr`:                      func(c *Config) { c.Scheduler = "wfq" },
		"DWRR weight -1 of priority 2: want 0..1000":                     func(c *Config) { c.DWRRWeights[2] = -1 },
		"RED kmin=10 kmax=5 pmax=0.1":                                    func(c *Config) { c.RED = RED{Kmin: 10, Kmax: 5, Pmax: 0.1} },
		`queue discipline "droptail": priorities, PFC and RED need prio`: func(c *Config) { c.Queue = "droptail"; c.Scheduler = "dwrr" },
	} {
		c := base
		mod(&c)
		_, err := New(c)
		assert.ErrorContains(t, err, want)
	}
}

// RED on the switch egresses marks per class, and the marks show in
// PFCStats and ECNMarks: with Kmax 2 bytes every ECT frame queued behind
// another frame of its class is marked, the first is not.
func TestREDMarksShowPerPriority(t *testing.T) {
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: 8e9, Latency: time.Microsecond}, RED: RED{Kmin: 1, Kmax: 2, Pmax: 1}})
	require.NoError(t, err)
	down := dirOf(t, f, "port1-out")
	for i := range 3 {
		require.True(t, down.Push(prioFrame(2, 1000, 0b10, i), 0))
	}
	require.True(t, down.Push(prioFrame(5, 1000, 0b10, 3), 0))
	runIdle(t, f)
	assert.Equal(t, []PFCStats{{Direction: "port1-out", Switch: "s0", Port: 1, Priority: 2, ECNMarks: 2}}, f.PFCStats())
	assert.Equal(t, uint64(2), f.ECNMarks())
}
