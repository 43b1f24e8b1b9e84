package fabric

import (
	"fmt"
	"math/big"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
)

// testFrame is a non-RoCE Ethernet frame of n bytes (without FCS) from src
// to dst, EtherType 0x88B5 (local experimental), with seq in its payload so
// each frame is recognisable.
func testFrame(dst, src net.HardwareAddr, n int, seq int) []byte {
	f := make([]byte, n)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	f[12], f[13] = 0x88, 0xB5
	f[14], f[15], f[16], f[17] = byte(seq>>24), byte(seq>>16), byte(seq>>8), byte(seq)
	return f
}

func frameSeq(f []byte) int { return int(f[14])<<24 | int(f[15])<<16 | int(f[16])<<8 | int(f[17]) }

var broadcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}

// dirOf is the link direction named "port<r>-in" or "port<r>-out".
func dirOf(t *testing.T, f *Fabric, name string) *linkDir {
	t.Helper()
	for _, d := range f.dirs {
		if d.name == name {
			return d
		}
	}
	t.Fatalf("no link direction %q", name)
	return nil
}

type arrival struct {
	at  time.Duration
	seq int
	n   int
}

// recordArrivals records every frame a direction delivers (then hands it on).
func recordArrivals(f *Fabric, d *linkDir) *[]arrival {
	var got []arrival
	orig := d.recv
	d.recv = func(b []byte) {
		got = append(got, arrival{at: f.Clock.Now(), seq: frameSeq(b), n: len(b)})
		orig(b)
	}
	return &got
}

func runIdle(t *testing.T, f *Fabric) {
	t.Helper()
	for i := 0; f.Clock.Step(); i++ {
		require.Less(t, i, 10_000_000, "event loop does not go idle")
	}
}

// wirePs is the exact line time of k frames of n bytes at rate bit/s, in
// picoseconds: (n + 7 preamble + 1 SFD + 4 FCS + 12 IFG) × 8 / rate.
func wirePs(k int64, n int, rate float64) *big.Rat {
	r := new(big.Rat).SetFloat64(rate)
	bits := new(big.Int).Mul(big.NewInt(k*int64(n+24)*8), big.NewInt(1_000_000_000_000))
	return new(big.Rat).Quo(new(big.Rat).SetInt(bits), r)
}

// psOf is d in picoseconds, as a rational.
func psOf(d time.Duration) *big.Rat { return new(big.Rat).SetInt64(int64(d) * 1000) }

// assertCausal checks that got (ns) is not before the exact time want (ps)
// and less than one nanosecond (one virtual-clock tick) after it.
func assertCausal(t *testing.T, what string, got time.Duration, want *big.Rat) {
	t.Helper()
	diff := new(big.Rat).Sub(psOf(got), want) // ps
	lo, hi := new(big.Rat), new(big.Rat).SetInt64(1000)
	if diff.Cmp(lo) < 0 || diff.Cmp(hi) >= 0 {
		f, _ := want.Float64()
		t.Fatalf("%s: arrived at %v, want within [%.3fns, +1ns) (diff %s ps)", what, got, f/1000, diff.FloatString(1))
	}
}

func TestLinkTimingSingleFrame(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		n    int
		lat  time.Duration
	}{
		{10e9, 60, time.Microsecond},
		{10e9, 1514, time.Microsecond},
		{25e9, 1000, 500 * time.Nanosecond},
		{100e9, 4096 + 78, 2 * time.Microsecond},
		{40e9, 61, 0},
	} {
		t.Run(fmt.Sprintf("%gG_%dB", tc.rate/1e9, tc.n), func(t *testing.T) {
			f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: tc.rate, Latency: tc.lat}})
			require.NoError(t, err)
			atSwitch := recordArrivals(f, dirOf(t, f, "port0-in"))
			atHost1 := recordArrivals(f, dirOf(t, f, "port1-out"))
			f.Hosts[0].SendControl(testFrame(broadcast, f.Hosts[0].MAC, tc.n, 1))
			runIdle(t, f)
			require.Len(t, *atSwitch, 1)
			require.Len(t, *atHost1, 1)
			// Host → switch: last bit on the wire after the wire time, then
			// the propagation delay.
			want := new(big.Rat).Add(wirePs(1, tc.n, tc.rate), psOf(tc.lat))
			assertCausal(t, "at switch", (*atSwitch)[0].at, want)
			// Switch → host 1: forwarding latency, serialisation again,
			// propagation again (store and forward), counted from the
			// instant the frame reached the switch.
			want2 := new(big.Rat).Add(psOf((*atSwitch)[0].at+switching.DefaultTiming.Forward+tc.lat), wirePs(1, tc.n, tc.rate))
			assertCausal(t, "at host 1", (*atHost1)[0].at, want2)
			assert.Equal(t, tc.n, (*atHost1)[0].n)
		})
	}
}

// Back-to-back frames are spaced by exactly their wire time: the k-th frame
// arrives at k × wire + latency, with no accumulated rounding (at 25G a byte
// is 320 ps and a 1000-byte frame 327.68 ns; at 10G a 60-byte one 67.2 ns).
func TestLinkTimingBackToBackNoDrift(t *testing.T) {
	for _, tc := range []struct {
		rate float64
		n    int
	}{{25e9, 1000}, {10e9, 60}, {25e9, 61}, {100e9, 1514}} {
		t.Run(fmt.Sprintf("%gG_%dB", tc.rate/1e9, tc.n), func(t *testing.T) {
			const frames = 1000
			lat := 700 * time.Nanosecond
			f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: tc.rate, Latency: lat}})
			require.NoError(t, err)
			atSwitch := recordArrivals(f, dirOf(t, f, "port0-in"))
			atHost1 := recordArrivals(f, dirOf(t, f, "port1-out"))
			for i := 0; i < frames; i++ {
				f.Hosts[0].SendControl(testFrame(broadcast, f.Hosts[0].MAC, tc.n, i))
			}
			runIdle(t, f)
			require.Len(t, *atSwitch, frames)
			require.Len(t, *atHost1, frames)
			for k, a := range *atSwitch {
				require.Equal(t, k, a.seq, "frames stay in order")
				want := new(big.Rat).Add(wirePs(int64(k+1), tc.n, tc.rate), psOf(lat))
				assertCausal(t, fmt.Sprintf("frame %d at switch", k), a.at, want)
			}
			// The switch's egress runs at the same rate, so it is never
			// the bottleneck: frame k reaches host 1 at (k+1) wire times +
			// 2 latencies + the forwarding latency + one more wire time for
			// the store-and-forward hop. Allow a 2 ns rounding band (two
			// serialisations on a 1 ns clock), but no drift.
			for k, a := range *atHost1 {
				require.Equal(t, k, a.seq)
				ideal := new(big.Rat).Add(wirePs(int64(k+2), tc.n, tc.rate), psOf(2*lat+switching.DefaultTiming.Forward))
				diff, _ := new(big.Rat).Sub(psOf(a.at), ideal).Float64()
				require.True(t, diff > -1000 && diff < 2000, "frame %d at host 1: %v, ideal %s ps (diff %.0f ps)", k, a.at, ideal.FloatString(0), diff)
			}
			l := f.LinkStats()
			assert.Equal(t, uint64(2*frames), l.Frames)
			assert.Equal(t, uint64(2*frames*tc.n), l.Bytes)
			assert.Equal(t, uint64(2*frames), l.Delivered)
			assert.Zero(t, l.QueueDrops)
			assert.Equal(t, uint64(frames), f.Hosts[0].Stats.CtrlSent)
			assert.Equal(t, uint64(frames), f.Hosts[1].Stats.NotRoCE)
		})
	}
}

// The switch's forwarding latency is the configured one, not a constant.
func TestSwitchForwardLatency(t *testing.T) {
	for _, fwd := range []time.Duration{switching.DefaultTiming.Forward, 777 * time.Nanosecond, 3 * time.Microsecond} {
		timing := switching.DefaultTiming
		timing.Forward = fwd
		f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: 10e9, Latency: time.Microsecond}, Timing: timing})
		require.NoError(t, err)
		atSwitch := recordArrivals(f, dirOf(t, f, "port0-in"))
		atHost1 := recordArrivals(f, dirOf(t, f, "port1-out"))
		f.Hosts[0].SendControl(testFrame(broadcast, f.Hosts[0].MAC, 100, 0)) // 124 B × 0.8 ns = 99.2 ns
		runIdle(t, f)
		require.Len(t, *atHost1, 1)
		assert.Equal(t, 100*time.Nanosecond+time.Microsecond, (*atSwitch)[0].at, "ceil(99.2ns) + 1us")
		assert.Equal(t, (*atSwitch)[0].at+fwd+100*time.Nanosecond+time.Microsecond, (*atHost1)[0].at, "forward %v", fwd)
	}
}

func TestNewFabricRejects(t *testing.T) {
	for _, cfg := range []Config{
		{Hosts: 0, Link: LinkConfig{Rate: 1e10}},
		{Hosts: 251, Link: LinkConfig{Rate: 1e10}},
		{Hosts: 2, Link: LinkConfig{Rate: 0}},
		{Hosts: 2, Link: LinkConfig{Rate: -1}},
		{Hosts: 2, Link: LinkConfig{Rate: 1e10, Latency: -1}},
	} {
		_, err := New(cfg)
		assert.Error(t, err, "%+v", cfg)
	}
}

func delivered(t *testing.T, f *Fabric, name string) uint64 {
	return dirOf(t, f, name).Stats.Delivered
}

// Learning, with host ports open to stations behind the hosts (port
// security would drop them: TestPortSecurity).
func TestMACLearning(t *testing.T) {
	f, err := New(Config{Hosts: 3, Link: LinkConfig{Rate: 10e9, Latency: time.Microsecond}, OpenPorts: true})
	require.NoError(t, err)
	h0, h1, h2 := f.Hosts[0], f.Hosts[1], f.Hosts[2]
	outs := func() [3]uint64 {
		return [3]uint64{delivered(t, f, "port0-out"), delivered(t, f, "port1-out"), delivered(t, f, "port2-out")}
	}
	// A station that is not a host of the topology (e.g. a VM behind h1).
	vm := net.HardwareAddr{0x02, 0xaa, 0, 0, 0, 1}

	// 1. h0 → h2: the hosts' MACs are static entries, known from the start.
	h0.SendControl(testFrame(h2.MAC, h0.MAC, 64, 1))
	runIdle(t, f)
	assert.Equal(t, [3]uint64{0, 0, 1}, outs(), "a host's MAC is known: its port only")
	assert.Equal(t, uint64(1), f.Switch.Stats.Forwarded)

	// 2. h0 → vm, unknown: flooded to every port but the ingress.
	h0.SendControl(testFrame(vm, h0.MAC, 64, 2))
	runIdle(t, f)
	assert.Equal(t, [3]uint64{0, 1, 2}, outs(), "unknown unicast floods to all other ports")
	assert.Equal(t, uint64(1), f.Switch.Stats.Flooded)
	assert.Equal(t, uint64(1), h1.Stats.NotForMe, "h1 drops the flooded frame not addressed to it")
	assert.Equal(t, uint64(1), h2.Stats.NotForMe)

	// 3. vm sends from port 1: learned there, so h0 → vm goes to port 1.
	h1.SendControl(testFrame(broadcast, vm, 64, 3))
	runIdle(t, f)
	assert.Equal(t, [3]uint64{1, 1, 3}, outs(), "broadcast floods to all but the ingress")
	h0.SendControl(testFrame(vm, h0.MAC, 64, 4))
	runIdle(t, f)
	assert.Equal(t, [3]uint64{1, 2, 3}, outs(), "vm learned on port 1")

	// 4. A frame to a MAC on the ingress port is filtered.
	h0.SendControl(testFrame(h0.MAC, h0.MAC, 64, 5))
	runIdle(t, f)
	assert.Equal(t, [3]uint64{1, 2, 3}, outs(), "filtered: sent nowhere")
	assert.Equal(t, uint64(1), f.Switch.Stats.Filtered)

	// 5. A learned station that moves is re-learned: vm appears on port 2.
	h2.SendControl(testFrame(broadcast, vm, 64, 6))
	runIdle(t, f)
	h0.SendControl(testFrame(vm, h0.MAC, 64, 7))
	runIdle(t, f)
	assert.Equal(t, [3]uint64{2, 3, 4}, outs(), "vm moved to port 2")

	// 6. A host's MAC never moves: a frame from port 1 with h2's source
	// address (forged, or a corrupted bit) leaves h2 on port 2.
	h1.SendControl(testFrame(broadcast, h2.MAC, 64, 8))
	runIdle(t, f)
	h0.SendControl(testFrame(h2.MAC, h0.MAC, 64, 9))
	runIdle(t, f)
	assert.Equal(t, [3]uint64{3, 3, 6}, outs(), "h2 stays on port 2")

	// 7. Multicast (group bit set) floods.
	mc := net.HardwareAddr{0x01, 0x00, 0x5e, 0, 0, 1}
	h2.SendControl(testFrame(mc, h2.MAC, 64, 10))
	runIdle(t, f)
	assert.Equal(t, [3]uint64{4, 4, 6}, outs())
	assert.Equal(t, uint64(10), f.Switch.Stats.Frames)
	assert.Equal(t, f.Switch.Stats.Frames, f.Switch.Stats.Flooded+f.Switch.Stats.Forwarded+f.Switch.Stats.Filtered)
}

// A frame shorter than an Ethernet header is dropped, not forwarded, and
// nothing panics.
func TestSwitchRuntFrame(t *testing.T) {
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: 10e9}})
	require.NoError(t, err)
	f.Hosts[0].SendControl([]byte{1, 2, 3})
	runIdle(t, f)
	assert.Equal(t, uint64(1), f.Switch.Stats.Frames)
	assert.Zero(t, delivered(t, f, "port1-out"))
}

func TestEgressQueueTailDrop(t *testing.T) {
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: 10e9, Queue: 5}})
	require.NoError(t, err)
	out := dirOf(t, f, "port1-out")
	got := recordArrivals(f, out)
	for i := 0; i < 8; i++ {
		ok := out.Push(testFrame(broadcast, f.Hosts[0].MAC, 100, i), 0)
		assert.Equal(t, i < 5, ok, "push %d", i)
	}
	assert.Equal(t, uint64(3), out.Stats.QueueDrops)
	assert.Equal(t, 5, out.Stats.MaxQueue)
	runIdle(t, f)
	require.Len(t, *got, 5)
	for i, a := range *got {
		assert.Equal(t, i, a.seq, "the first five are kept (tail drop)")
	}
	assert.Equal(t, uint64(3), f.LinkStats().QueueDrops)
}

// Incast: hosts 0 and 1 send line-rate bursts to host 2; the switch's
// egress to host 2 holds at most Queue frames and tail-drops the rest.
func TestEgressQueueIncast(t *testing.T) {
	const queue, burst = 4, 100
	f, err := New(Config{Hosts: 3, Link: LinkConfig{Rate: 10e9, Latency: time.Microsecond, Queue: queue}})
	require.NoError(t, err)
	h2 := f.Hosts[2]
	h2.SendControl(testFrame(broadcast, h2.MAC, 64, 0)) // the switch learns h2
	runIdle(t, f)
	for i := 0; i < burst; i++ {
		f.Hosts[0].SendControl(testFrame(h2.MAC, f.Hosts[0].MAC, 1000, i))
		f.Hosts[1].SendControl(testFrame(h2.MAC, f.Hosts[1].MAC, 1000, i))
	}
	runIdle(t, f)
	out := dirOf(t, f, "port2-out")
	assert.Equal(t, uint64(2*burst), out.Stats.Delivered+out.Stats.QueueDrops, "every frame is delivered or tail-dropped")
	assert.Greater(t, out.Stats.QueueDrops, uint64(burst-2*queue), "about half the incast must be dropped")
	assert.LessOrEqual(t, out.Stats.MaxQueue, queue)
	assert.Equal(t, queue, out.Stats.MaxQueue)
	assert.Zero(t, dirOf(t, f, "port0-out").Stats.QueueDrops+dirOf(t, f, "port1-out").Stats.QueueDrops)
}

func TestFaultStagePerDirection(t *testing.T) {
	ev, err := faults.Parse("drop port=1 dir=out nth=1")
	require.NoError(t, err)
	f, err := New(Config{Hosts: 3, Link: LinkConfig{Rate: 10e9, Latency: time.Microsecond}, Events: []faults.Event{ev}, Seed: 9})
	require.NoError(t, err)
	in1 := recordArrivals(f, dirOf(t, f, "port1-in"))
	out1 := recordArrivals(f, dirOf(t, f, "port1-out"))
	out2 := recordArrivals(f, dirOf(t, f, "port2-out"))
	// Host 1 sends first: its frames cross port1-in, which the event must
	// not touch (nor count towards nth).
	for i := 0; i < 3; i++ {
		f.Hosts[1].SendControl(testFrame(broadcast, f.Hosts[1].MAC, 80, 100+i))
	}
	runIdle(t, f)
	for i := 0; i < 5; i++ {
		f.Hosts[0].SendControl(testFrame(broadcast, f.Hosts[0].MAC, 80, i))
	}
	runIdle(t, f)
	require.Len(t, *in1, 3, "port1-in untouched")
	seqs := func(a []arrival) []int {
		var s []int
		for _, x := range a {
			s = append(s, x.seq)
		}
		return s
	}
	assert.Equal(t, []int{1, 2, 3, 4}, seqs(*out1), "port1-out lost only the first frame it carried")
	assert.Equal(t, []int{100, 101, 102, 0, 1, 2, 3, 4}, seqs(*out2), "port2-out untouched")
	for i, st := range f.stages {
		want := uint64(0)
		if st.Port == 1 && st.Dir == faults.DirOut {
			want = 1
		}
		assert.Equal(t, want, st.Stats.Dropped, "stage %d (port %d %v)", i, st.Port, st.Dir)
	}
	assert.Equal(t, uint64(1), f.FaultStats().Dropped)
	assert.Equal(t, uint64(5), f.FaultStats().Frames, "only port1-out's stage is active; it saw host 0's five broadcasts")
}

// A fabric without Capture has nothing to close; CloseCapture is a no-op.
func TestCloseCaptureWithoutCapture(t *testing.T) {
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: 1e10}})
	require.NoError(t, err)
	assert.NoError(t, f.CloseCapture())
}

// The fabric's addresses: locally administered unicast MACs, 10.0.0.r+1,
// fd00::r+1, and the RoCEv1 GID as EUI-64 of the MAC.
func TestHostAddresses(t *testing.T) {
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		f, err := New(Config{Hosts: 3, Transport: tr, Link: LinkConfig{Rate: 1e10}})
		require.NoError(t, err)
		seen := map[string]bool{}
		for r, h := range f.Hosts {
			assert.Equal(t, byte(0x02), h.MAC[0]&0x03, "locally administered unicast")
			assert.False(t, seen[h.MAC.String()])
			seen[h.MAC.String()] = true
			assert.Equal(t, r, h.HostIndex)
			switch tr {
			case frames.V2IPv4:
				assert.Equal(t, fmt.Sprintf("10.0.0.%d", r+1), h.IP.String())
			case frames.V2IPv6:
				assert.Equal(t, fmt.Sprintf("fd00::%d", r+1), h.IP.String())
			case frames.V1:
				m := h.MAC
				want := fmt.Sprintf("fe80::%x:%x:%x:%x", uint16(m[0]^2)<<8|uint16(m[1]), uint16(m[2])<<8|0xff, 0xfe00|uint16(m[3]), uint16(m[4])<<8|uint16(m[5]))
				assert.Equal(t, want, h.IP.String())
			}
		}
	}
}

// On a spine-leaf with two spines (a loop among the switches), a broadcast
// reaches every other host exactly once and never comes back to its
// sender: flooding follows a spanning tree. Unicast between hosts under
// different leaves takes one of the two equal paths per flow.
func TestFloodOnSpineLeafReachesEachHostOnce(t *testing.T) {
	p := topo.LinkParams{Rate: 10e9, Latency: time.Microsecond}
	tp, err := topo.SpineLeaf(2, 3, 2, p, p)
	require.NoError(t, err)
	f, err := New(Config{Topology: tp, Link: LinkConfig{Rate: 10e9}})
	require.NoError(t, err)
	require.Len(t, f.Switches, 4)
	f.Hosts[0].SendControl(f.Hosts[0].GratuitousARP())
	runIdle(t, f)
	for i, h := range f.Hosts {
		want := uint64(1)
		if i == 0 {
			want = 0
		}
		assert.Equal(t, want, h.Stats.NotRoCE, "host %s heard the broadcast %d times", h.Name, h.Stats.NotRoCE)
	}
	for _, s := range f.Switches {
		assert.Equal(t, uint64(1), s.Stats.Frames, "switch %s received the broadcast %d times (a loop?)", s.Name, s.Stats.Frames)
	}
}

// Reachable must say what the network does: a frame from NIC a to NIC
// b's MAC arrives at b exactly when Reachable(a, b). On hosts with two
// NICs each on one switch (dims:2, links_per_host=2) it says a NIC
// reaches itself (the host's own link is taken for "the link between
// them", but the switch filters a frame back out its ingress port), and
// that h0's first NIC does not reach h0's second (any link of the target
// host ends the check), though the switch forwards between them.
func TestReachableMatchesDelivery(t *testing.T) {
	p := topo.LinkParams{Rate: 10e9, Latency: time.Microsecond}
	sl, err := topo.SpineLeaf(2, 2, 2, p, p)
	require.NoError(t, err)
	for _, dims := range [][]topo.Dim{
		{{Size: 2, Kind: "switch", LinkParams: p, LinksPerHost: 2}},
		{{Size: 2, Kind: "ring", LinkParams: p, LinksPerHost: 2}},
		{{Size: 3, Kind: "fc", LinkParams: p}, {Size: 2, Kind: "switch", LinkParams: p}},
		nil, // the spine-leaf
	} {
		tp := sl
		if dims != nil {
			tp, err = topo.Dims(dims)
			require.NoError(t, err)
		}
		reachableMatchesDelivery(t, tp)
	}
}

func reachableMatchesDelivery(t *testing.T, tp *topo.Topology) {
	probe, err := New(Config{Topology: tp})
	require.NoError(t, err)
	n := len(probe.NICs)
	for i := range n {
		for j := range n {
			f, err := New(Config{Topology: tp})
			require.NoError(t, err)
			a, b := f.NICs[i], f.NICs[j]
			f.Clock.AfterFunc(0, func() { a.SendControl(testFrame(b.MAC, a.MAC, 64, 1)) })
			runIdle(t, f)
			arrived := b.Stats.NotRoCE > 0
			assert.Equal(t, arrived, f.Reachable(a, b), fmt.Sprintf("%s -> %s: delivered %v, Reachable %v", a.Name, b.Name, arrived, f.Reachable(a, b)))
		}
	}
}
