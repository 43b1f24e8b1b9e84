package switching_test

// The switch is driven through its public surface only: frames go in by
// Ingress on a port, and every port's Egress is a fake that records what
// it was handed and when the frame may leave. The clock is a fake whose
// time the test sets. RoCE frames are built by frames.Builder; plain
// Ethernet frames by hand. Expected ports, times and bytes are worked out
// here from the documented rules (learning, routes, FNV-1a flow hash over
// the named fields, the pipeline latencies), never read back from a run.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tensor"
)

// ---- fakes ----

type fakeClock struct{ now time.Duration }

func (c *fakeClock) Now() time.Duration { return c.now }

// pushed is one frame an Egress was handed.
type pushed struct {
	frame []byte
	ready time.Duration
}

// fakePort is an Egress that records a copy of every frame.
type fakePort struct{ got []pushed }

func (p *fakePort) Push(frame []byte, ready time.Duration) bool {
	p.got = append(p.got, pushed{bytes.Clone(frame), ready})
	return true
}

// testTiming has a distinct latency per path, so an output's ready time
// says which path it took.
var testTiming = switching.Timing{
	Forward:        100 * time.Nanosecond,
	AggregateFixed: 2000 * time.Nanosecond,
	AggregateFloat: 3000 * time.Nanosecond,
	Resend:         700 * time.Nanosecond,
}

const t0 = 10 * time.Microsecond

type rig struct {
	t     *testing.T
	clk   *fakeClock
	sw    *switching.Switch
	ports []*fakePort
}

func newRig(t *testing.T, name string, nports int) *rig {
	r := &rig{t: t, clk: &fakeClock{now: t0}}
	r.sw = switching.New(r.clk, name, testTiming)
	for p := 0; p < nports; p++ {
		fp := &fakePort{}
		r.ports = append(r.ports, fp)
		r.sw.SetPort(p, fp, fmt.Sprintf("%s-port%d", name, p))
	}
	return r
}

// outputs takes what every port was handed since the last call.
func (r *rig) outputs() map[int][]pushed {
	m := map[int][]pushed{}
	for p, fp := range r.ports {
		if len(fp.got) > 0 {
			m[p] = fp.got
			fp.got = nil
		}
	}
	return m
}

// want checks that exactly the given ports were each handed frame once,
// ready at ready, and nothing else left.
func (r *rig) want(frame []byte, ready time.Duration, ports ...int) {
	r.t.Helper()
	got := r.outputs()
	var gotPorts []int
	for p := range r.ports {
		if len(got[p]) > 0 {
			gotPorts = append(gotPorts, p)
		}
	}
	if len(ports) == 0 {
		require.Empty(r.t, gotPorts, "no port may get a frame")
		return
	}
	require.Equal(r.t, ports, gotPorts, "ports the frame left by")
	for _, p := range ports {
		require.Len(r.t, got[p], 1, "port %d", p)
		assert.Equal(r.t, frame, got[p][0].frame, "port %d: frame", p)
		assert.Equal(r.t, ready, got[p][0].ready, "port %d: ready time", p)
	}
}

// ---- frames ----

var (
	macA  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macB  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
	macC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0c}
	macH  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x11}
	bcast = net.HardwareAddr{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	mcast = net.HardwareAddr{0x01, 0x00, 0x5e, 0x00, 0x00, 0x01}
)

func m6(m net.HardwareAddr) [6]byte { return [6]byte(m) }

// ether is a 60-byte non-RoCE frame (EtherType 0x88B5) with seq in it.
func ether(dst, src net.HardwareAddr, seq byte) []byte {
	f := make([]byte, 60)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	f[12], f[13] = 0x88, 0xB5
	f[14] = seq
	return f
}

// arp is an ARP request from src (10.0.0.1) for 10.0.0.2, broadcast.
func arp(src net.HardwareAddr) []byte {
	f := make([]byte, 60)
	copy(f[0:6], bcast)
	copy(f[6:12], src)
	f[12], f[13] = 0x08, 0x06
	copy(f[14:22], []byte{0, 1, 8, 0, 6, 4, 0, 1})
	copy(f[22:28], src)
	copy(f[28:32], []byte{10, 0, 0, 1})
	copy(f[38:42], []byte{10, 0, 0, 2})
	return f
}

func builder(t testing.TB, p frames.Path) *frames.Builder {
	t.Helper()
	b, err := frames.NewBuilder(p)
	require.NoError(t, err)
	return b
}

func build(t testing.TB, b *frames.Builder, p *frames.Packet) []byte {
	t.Helper()
	buf := make([]byte, 9000)
	n, err := b.Build(buf, p)
	require.NoError(t, err)
	return buf[:n]
}

func ip4(last byte) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, last}) }

// writeOnly is a RoCEv2 IPv4 WRITE_ONLY from A (10.0.0.1) to dst with
// the given destination QP.
func writeOnly(t testing.TB, dst net.HardwareAddr, qp uint32, psn uint32) []byte {
	b := builder(t, frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: dst, SrcIP: ip4(1), DstIP: ip4(2), DestQP: qp})
	return build(t, b, &frames.Packet{Opcode: wire.WriteOnly, PSN: psn, AckReq: true,
		RETH: frames.RETHFields{VA: 0x1000, RKey: 7, DMALen: 8}, Payload: []byte{1, 2, 3, 4, 5, 6, 7, 8}})
}

// ---- defaults ----

func TestDefaultTiming(t *testing.T) {
	// The AllReduce-Switch's measured latencies (TCSI '21, Fig. 17).
	assert.Equal(t, switching.Timing{Forward: 250 * time.Nanosecond, AggregateFixed: 2200 * time.Nanosecond,
		AggregateFloat: 2400 * time.Nanosecond, Resend: 1500 * time.Nanosecond}, switching.DefaultTiming)

	// A zero Timing means the default: a forwarded frame is ready 250 ns on.
	clk := &fakeClock{now: t0}
	sw := switching.New(clk, "s", switching.Timing{})
	p0, p1 := &fakePort{}, &fakePort{}
	sw.SetPort(0, p0, "p0")
	sw.SetPort(1, p1, "p1")
	assert.Equal(t, "s", sw.Name)
	assert.Equal(t, 2, sw.Ports())
	sw.Ingress(0, ether(bcast, macA, 1))
	require.Len(t, p1.got, 1)
	assert.Equal(t, t0+250*time.Nanosecond, p1.got[0].ready)
	assert.Empty(t, p0.got)
}

// ---- stage 1 and 3: learning, filtering, flooding ----

func TestLearning(t *testing.T) {
	r := newRig(t, "s", 3)
	// B is unknown: flooded to every port but the ingress; A is learned on 1.
	f1 := ether(macB, macA, 1)
	r.sw.Ingress(1, f1)
	r.want(f1, t0+100*time.Nanosecond, 0, 2)

	// To A from port 0: only port 1, after the forwarding latency; B is
	// learned on 0.
	r.clk.now = t0 + time.Microsecond
	f2 := ether(macA, macB, 2)
	r.sw.Ingress(0, f2)
	r.want(f2, t0+time.Microsecond+100*time.Nanosecond, 1)

	// To A from A's own port: filtered, nothing leaves.
	f3 := ether(macA, macC, 3)
	r.sw.Ingress(1, f3)
	r.want(nil, 0)

	// A moves to port 2 (it sends from there): frames to it follow.
	f4 := ether(macB, macA, 4)
	r.sw.Ingress(2, f4)
	r.want(f4, t0+time.Microsecond+100*time.Nanosecond, 0)
	f5 := ether(macA, macC, 5)
	r.sw.Ingress(1, f5) // C was learned on 1 by f3; A is now on 2
	r.want(f5, t0+time.Microsecond+100*time.Nanosecond, 2)

	assert.Equal(t, switching.Counters{Frames: 5, Forwarded: 3, Flooded: 1, Filtered: 1}, r.sw.Stats)
	assert.Equal(t, switching.Report{Counters: r.sw.Stats, Buffer: r.sw.Buffer()}, r.sw.Report(), "no accelerator: its stats are zero")
}

func TestFlooding(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flood []int
		in    int
		dst   net.HardwareAddr
		want  []int
	}{
		{"broadcast, all ports", nil, 0, bcast, []int{1, 2, 3}},
		{"unknown unicast, all ports", nil, 2, macB, []int{0, 1, 3}},
		{"multicast, all ports", nil, 3, mcast, []int{0, 1, 2}},
		{"unknown unicast, flood set", []int{0, 2}, 1, macB, []int{0, 2}},
		{"flood set minus the ingress", []int{0, 2}, 2, macB, []int{0}},
		{"broadcast, flood set from outside it", []int{0, 2}, 3, bcast, []int{0, 2}},
		{"broadcast, flood set of the ingress only", []int{1}, 1, bcast, nil},
		{"empty (non-nil) flood set", []int{}, 1, bcast, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "s", 4)
			r.sw.SetFlood(tc.flood)
			f := ether(tc.dst, macA, 9)
			r.sw.Ingress(tc.in, f)
			r.want(f, t0+100*time.Nanosecond, tc.want...)
			assert.Equal(t, switching.Counters{Frames: 1, Flooded: 1}, r.sw.Stats)
		})
	}
}

func TestSetFloodNilRestoresAllPorts(t *testing.T) {
	r := newRig(t, "s", 4)
	r.sw.SetFlood([]int{0})
	r.sw.SetFlood(nil)
	f := ether(bcast, macA, 1)
	r.sw.Ingress(2, f)
	r.want(f, t0+100*time.Nanosecond, 0, 1, 3)
}

// ---- routes and ECMP ----

func TestRoutes(t *testing.T) {
	r := newRig(t, "s", 4)
	assert.False(t, r.sw.Routed(m6(macH)))
	r.sw.Route(m6(macH), []int{2})
	assert.True(t, r.sw.Routed(m6(macH)))
	assert.False(t, r.sw.Routed(m6(macA)))

	f1 := ether(macH, macA, 1)
	r.sw.Ingress(0, f1)
	r.want(f1, t0+100*time.Nanosecond, 2)

	// H as a source on port 0 (a forged or corrupted address) does not
	// move H: frames to H still leave by port 2.
	f2 := ether(macB, macH, 2)
	r.sw.Ingress(0, f2)
	r.want(f2, t0+100*time.Nanosecond, 1, 2, 3) // B unknown: flooded
	f3 := ether(macH, macB, 3)
	r.sw.Ingress(1, f3)
	r.want(f3, t0+100*time.Nanosecond, 2)

	// A frame to H from H's own port is filtered.
	r.sw.Ingress(2, ether(macH, macC, 4))
	r.want(nil, 0)

	// A route outranks what was learned: A was learned on port 0.
	f5 := ether(macA, macB, 5)
	r.sw.Ingress(1, f5)
	r.want(f5, t0+100*time.Nanosecond, 0)
	r.sw.Route(m6(macA), []int{3})
	f6 := ether(macA, macB, 6)
	r.sw.Ingress(1, f6)
	r.want(f6, t0+100*time.Nanosecond, 3)

	assert.Equal(t, switching.Counters{Frames: 6, Forwarded: 4, Flooded: 1, Filtered: 1}, r.sw.Stats)
}

// fnv32a is the reference FNV-1a hash (hash/fnv) of the concatenation.
func fnv32a(parts ...[]byte) uint32 {
	h := fnv.New32a()
	for _, p := range parts {
		h.Write(p)
	}
	return h.Sum32()
}

func be16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// TestECMP sends many flows to a MAC routed over three ports: every frame
// of a flow leaves by one port, that port is hops[FNV-1a(flow key) % 3]
// with the key the switch documents for the frame's transport, and the
// flows spread over more than one port.
func TestECMP(t *testing.T) {
	hops := []int{1, 2, 3}
	v6 := func(last byte) netip.Addr { return netip.AddrFrom16([16]byte{0: 0xfd, 15: last}) }
	gid := func(last byte) netip.Addr { return netip.AddrFrom16([16]byte{0: 0xfe, 1: 0x80, 15: last}) }
	type flow struct {
		path frames.Path
		key  []byte // the flow key the hash covers, built from the path
	}
	for _, tc := range []struct {
		name string
		flow func(i int) flow
	}{
		{"RoCEv2 IPv4: addresses and UDP ports", func(i int) flow {
			p := frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macH, SrcIP: ip4(1), DstIP: ip4(2), SrcPort: 0xC000 + uint16(i), DestQP: 0x22}
			s, d := p.SrcIP.As4(), p.DstIP.As4()
			return flow{p, bytes.Join([][]byte{s[:], d[:], be16(p.SrcPort), be16(4791)}, nil)}
		}},
		{"RoCEv2 IPv6: addresses and UDP ports", func(i int) flow {
			p := frames.Path{Transport: frames.V2IPv6, SrcMAC: macA, DstMAC: macH, SrcIP: v6(1), DstIP: v6(2), SrcPort: 0xC000 + uint16(i), DestQP: 0x22}
			s, d := p.SrcIP.As16(), p.DstIP.As16()
			return flow{p, bytes.Join([][]byte{s[:], d[:], be16(p.SrcPort), be16(4791)}, nil)}
		}},
		{"RoCEv1: GIDs and destination QP", func(i int) flow {
			p := frames.Path{Transport: frames.V1, SrcMAC: macA, DstMAC: macH, SrcIP: gid(1), DstIP: gid(2), DestQP: 0x100 + uint32(i)}
			s, d := p.SrcIP.As16(), p.DstIP.As16()
			return flow{p, bytes.Join([][]byte{s[:], d[:], {0, byte(p.DestQP >> 8), byte(p.DestQP)}}, nil)}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, "s", 4)
			r.sw.Route(m6(macH), hops)
			used := map[int]int{}
			for i := 0; i < 64; i++ {
				fl := tc.flow(i)
				b := builder(t, fl.path)
				want := hops[fnv32a(fl.key)%3]
				for k := 0; k < 3; k++ { // three packets of the flow, each different
					f := build(t, b, &frames.Packet{Opcode: wire.SendOnly, PSN: uint32(1000*i + k), Payload: []byte{byte(k), 1, 2, 3}})
					r.sw.Ingress(0, f)
					r.want(f, t0+100*time.Nanosecond, want)
				}
				used[want]++
			}
			assert.Greater(t, len(used), 1, "64 flows all took one port: %v", used)
			assert.Equal(t, uint64(64*3), r.sw.Stats.Forwarded)
		})
	}

	t.Run("non-IP: the MACs", func(t *testing.T) {
		r := newRig(t, "s", 4)
		r.sw.Route(m6(macH), hops)
		for _, src := range []net.HardwareAddr{macA, macB, macC} {
			want := hops[fnv32a(macH, src)%3]
			for k := 0; k < 3; k++ {
				f := ether(macH, src, byte(k))
				r.sw.Ingress(0, f)
				r.want(f, t0+100*time.Nanosecond, want)
			}
		}
	})
}

// ---- programs ----

type seen struct {
	qp   uint32
	port int
}

// qpProgram consumes the RoCE frames whose destination QP is qp, emitting
// what reply makes of each (with latency lat); it records every frame it
// is offered.
type qpProgram struct {
	name  string
	qp    uint32
	lat   time.Duration
	mem   int64
	reply func(v *frames.View) [][]byte
	seen  []seen
}

func (p *qpProgram) Name() string       { return p.name }
func (p *qpProgram) MemoryBytes() int64 { return p.mem }
func (p *qpProgram) Report() any        { return len(p.seen) }
func (p *qpProgram) Process(v *frames.View, port int, emit switching.ProgramEmit) bool {
	p.seen = append(p.seen, seen{v.DestQP(), port})
	if v.DestQP() != p.qp {
		return false
	}
	if p.reply != nil {
		for _, f := range p.reply(v) {
			emit(f, p.lat)
		}
	}
	return true
}

func TestProgramConsumesAndEmits(t *testing.T) {
	r := newRig(t, "s", 3)
	r.sw.Route(m6(macB), []int{2})
	out := ether(macB, macH, 0x77)
	p := &qpProgram{name: "p", qp: 0x77, lat: 1500 * time.Nanosecond, reply: func(*frames.View) [][]byte { return [][]byte{out} }}
	r.sw.Install(p)

	// Consumed: the frame itself goes nowhere; the emitted one leaves by
	// B's route after the program's latency.
	r.sw.Ingress(1, writeOnly(t, macB, 0x77, 1))
	r.want(out, t0+1500*time.Nanosecond, 2)
	assert.Equal(t, switching.Counters{Frames: 1, Forwarded: 1, Emitted: 1}, r.sw.Stats)

	// Another QP's frame is offered, not consumed, and forwarded.
	f := writeOnly(t, macB, 0x78, 2)
	r.sw.Ingress(1, f)
	r.want(f, t0+100*time.Nanosecond, 2)
	assert.Equal(t, []seen{{0x77, 1}, {0x78, 1}}, p.seen)
	assert.Equal(t, switching.Counters{Frames: 2, Forwarded: 2, Emitted: 1}, r.sw.Stats)
}

func TestProgramSeesOnlyRoCE(t *testing.T) {
	r := newRig(t, "s", 3)
	r.sw.Route(m6(macB), []int{2})
	p := &qpProgram{name: "p", qp: 0x77}
	r.sw.Install(p)

	good := writeOnly(t, macB, 0x77, 1)
	notUDP := bytes.Clone(good)
	notUDP[14+9] = 6 // IPv4 protocol TCP: not RoCE
	toOtherPort := bytes.Clone(good)
	toOtherPort[14+20+2], toOtherPort[14+20+3] = 0x12, 0x34 // UDP destination port 4660
	for _, tc := range []struct {
		name  string
		frame []byte
	}{
		{"ARP", arp(macA)},
		{"plain Ethernet", ether(macB, macA, 1)},
		{"IPv4 TCP", notUDP},
		{"UDP to another port", toOtherPort},
		{"truncated RoCE", good[:50]},
		{"only Ethernet header", good[:14]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := r.sw.Stats
			r.sw.Ingress(1, tc.frame)
			assert.Empty(t, p.seen, "a non-RoCE frame reached the program")
			got := r.outputs()
			require.NotEmpty(t, got, "a frame the programs never saw is forwarded")
			moved := r.sw.Stats.Forwarded + r.sw.Stats.Flooded - before.Forwarded - before.Flooded
			assert.Equal(t, uint64(1), moved)
		})
	}
}

func TestProgramEmitNeverFiltered(t *testing.T) {
	r := newRig(t, "s", 3)
	// The program answers the sender: its MAC was learned (stage 1) on
	// the ingress port, and the answer still leaves by that port.
	p := &qpProgram{name: "echo", qp: 0x77, lat: 500 * time.Nanosecond, reply: func(v *frames.View) [][]byte {
		return [][]byte{ether(net.HardwareAddr(v.SrcMAC()), macH, 1)}
	}}
	r.sw.Install(p)
	r.sw.Ingress(1, writeOnly(t, macB, 0x77, 1))
	r.want(ether(macA, macH, 1), t0+500*time.Nanosecond, 1)

	// An emitted frame to an unknown MAC floods to every port, the
	// trigger's included.
	p.reply = func(*frames.View) [][]byte { return [][]byte{ether(macC, macH, 2)} }
	r.sw.Ingress(1, writeOnly(t, macB, 0x77, 2))
	r.want(ether(macC, macH, 2), t0+500*time.Nanosecond, 0, 1, 2)

	// Several frames from one Process: each is forwarded and counted.
	r.sw.Route(m6(macB), []int{0})
	p.reply = func(*frames.View) [][]byte { return [][]byte{ether(macB, macH, 3), ether(macB, macH, 4)} }
	r.sw.Ingress(1, writeOnly(t, macB, 0x77, 3))
	got := r.outputs()
	require.Len(t, got[0], 2)
	assert.Equal(t, ether(macB, macH, 3), got[0][0].frame)
	assert.Equal(t, ether(macB, macH, 4), got[0][1].frame)
	assert.Equal(t, switching.Counters{Frames: 3, Forwarded: 3, Flooded: 1, Emitted: 4}, r.sw.Stats)
}

func TestProgramOrder(t *testing.T) {
	r := newRig(t, "s", 3)
	r.sw.Route(m6(macB), []int{2})
	pass := &qpProgram{name: "pass", qp: 0x99, mem: 100}  // consumes only QP 0x99
	first := &qpProgram{name: "first", qp: 0x77, mem: 20} // consumes QP 0x77
	second := &qpProgram{name: "second", qp: 0x77, mem: 3}
	r.sw.Install(pass)
	r.sw.Install(first)
	r.sw.Install(second)
	require.Len(t, r.sw.Programs(), 3)
	assert.Equal(t, []string{"pass", "first", "second"},
		[]string{r.sw.Programs()[0].Name(), r.sw.Programs()[1].Name(), r.sw.Programs()[2].Name()})
	assert.Equal(t, int64(123), r.sw.MemoryBytes())

	r.sw.Ingress(0, writeOnly(t, macB, 0x77, 1))
	r.want(nil, 0)
	assert.Equal(t, []seen{{0x77, 0}}, pass.seen, "the program before the consumer saw the frame")
	assert.Equal(t, []seen{{0x77, 0}}, first.seen)
	assert.Empty(t, second.seen, "the first consumer wins")

	r.sw.Ingress(0, writeOnly(t, macB, 0x99, 2))
	r.want(nil, 0)
	assert.Len(t, first.seen, 1, "the program before took it")
	assert.Equal(t, switching.Counters{Frames: 2}, r.sw.Stats)
}

// ---- NetReduce through the switch ----

// Rank r is host MAC 02:00:00:00:01:(r+1), IP 10.0.0.(r+1), on port r; in
// ring id it WRITEs to rank r+1's QP 0x12+id.
const ringQP = 0x12

func rankMAC(r int) net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0, 0x01, byte(r + 1)} }

type ringRig struct {
	*rig
	cfg netreduce.RingConfig
	b   []*frames.Builder
}

func ringConfig(id uint8, d tensor.DType) netreduce.RingConfig {
	cfg := netreduce.RingConfig{ID: id, Workers: 2, Window: 1, MsgLen: 1, MTU: 256, DType: d}
	for r := 0; r < 2; r++ {
		cfg.Conns = append(cfg.Conns, netreduce.Conn{Src: ip4(byte(r + 1)), Dst: ip4(byte((r+1)%2 + 1)), DestQP: ringQP + uint32(id), Rank: r, Port: r})
	}
	return cfg
}

func newRingRig(t *testing.T, d tensor.DType) *ringRig {
	rr := &ringRig{rig: newRig(t, "tor", 2), cfg: ringConfig(0, d)}
	for r := 0; r < 2; r++ {
		rr.sw.Route(m6(rankMAC(r)), []int{r})
		next := (r + 1) % 2
		rr.b = append(rr.b, builder(t, frames.Path{Transport: frames.V2IPv4, SrcMAC: rankMAC(r), DstMAC: rankMAC(next),
			SrcIP: ip4(byte(r + 1)), DstIP: ip4(byte(next + 1)), SrcPort: 0xC000 + uint16(r), DestQP: ringQP}))
	}
	require.NoError(t, netreduce.AddRing(rr.sw, "", rr.cfg))
	return rr
}

// msg is rank's single-packet message 0 (INA header + data) as its NIC
// sends it.
func (rr *ringRig) msg(rank int, data []byte) []byte { return rr.msgN(rank, 0, data) }

// msgN is rank's message m: PSN 0x100+rank+m (one packet per message),
// IPv4 ID 7+m.
func (rr *ringRig) msgN(rank, m int, data []byte) []byte {
	rr.b[rank].SetIPID(uint16(7 + m))
	return build(rr.t, rr.b[rank], &frames.Packet{Opcode: wire.WriteOnlyWithImm, PSN: 0x100 + uint32(rank+m), AckReq: true,
		RETH:   frames.RETHFields{VA: 0x7f00_0000_0000 + uint64(m)*256, RKey: 0x1000 + uint32(rank), DMALen: uint32(wire.INALen + len(data))},
		HasINA: true, INA: frames.INAFields{RingID: rr.cfg.ID, MsgID: uint8(m), MsgLen: 1, Rank: uint8(rank)},
		Imm: uint32(m), Payload: data})
}

func i32s(v ...int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

func TestNetReduceThroughSwitch(t *testing.T) {
	for _, tc := range []struct {
		name       string
		dtype      tensor.DType
		in0, in1   []byte
		sum        []byte // worked out by hand
		aggregated time.Duration
	}{
		{"i32", tensor.I32, i32s(1, 2, -3, math.MaxInt32), i32s(10, 20, 30, 1), i32s(11, 22, 27, math.MinInt32), testTiming.AggregateFixed},
		{"f32", tensor.F32, f32s(1.5, -2, 0.25, 1e6), f32s(2.25, 0.5, 0.25, -1e6), f32s(3.75, -1.5, 0.5, 0), testTiming.AggregateFloat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rr := newRingRig(t, tc.dtype)
			require.NotNil(t, accel(rr.sw))
			require.Len(t, rr.sw.Programs(), 1)
			assert.Equal(t, "netreduce", rr.sw.Programs()[0].Name())
			assert.Equal(t, 1, accel(rr.sw).Rings())
			assert.Equal(t, rr.cfg.MemoryBytes(), rr.sw.MemoryBytes())

			// Rank 0's packet is held in the aggregator: nothing leaves.
			rr.sw.Ingress(0, rr.msg(0, tc.in0))
			rr.want(nil, 0)

			// Rank 1's completes it: each connection's result (its own frame
			// with the sum) leaves by its receiver's port after the
			// aggregation latency.
			t1 := t0 + 3*time.Microsecond
			rr.clk.now = t1
			rr.sw.Ingress(1, rr.msg(1, tc.in1))
			got := rr.outputs()
			require.Len(t, got[0], 1, "rank 1's result, to rank 0")
			require.Len(t, got[1], 1, "rank 0's result, to rank 1")
			assert.Equal(t, rr.msg(0, tc.sum), got[1][0].frame)
			assert.Equal(t, rr.msg(1, tc.sum), got[0][0].frame)
			assert.Equal(t, t1+tc.aggregated, got[0][0].ready)
			assert.Equal(t, t1+tc.aggregated, got[1][0].ready)
			ok, err := frames.VerifyICRC(got[0][0].frame)
			require.NoError(t, err)
			assert.True(t, ok, "result ICRC")

			// Rank 0 sends again (its result was lost): the result is re-sent
			// on its connection after the resend latency.
			t2 := t1 + 5*time.Microsecond
			rr.clk.now = t2
			rr.sw.Ingress(0, rr.msg(0, tc.in0))
			rr.want(rr.msg(0, tc.sum), t2+testTiming.Resend, 1)

			// An ordinary WRITE (no INA header) is not aggregation traffic.
			// (Another QP: on the ring connection itself a message without
			// the header is dropped as bad.)
			other := builder(t, frames.Path{Transport: frames.V2IPv4, SrcMAC: rankMAC(0), DstMAC: rankMAC(1),
				SrcIP: ip4(1), DstIP: ip4(2), DestQP: ringQP + 1})
			plain := build(t, other, &frames.Packet{Opcode: wire.WriteOnly, PSN: 5, RETH: frames.RETHFields{VA: 1, RKey: 2, DMALen: 4}, Payload: []byte{9, 9, 9, 9}})
			rr.sw.Ingress(0, plain)
			rr.want(plain, t2+testTiming.Forward, 1)

			// Rank 1's connection from rank 0's port is forged: dropped.
			rr.sw.Ingress(0, rr.msg(1, tc.in1))
			rr.want(nil, 0)

			assert.Equal(t, switching.Counters{Frames: 5, Forwarded: 4, Emitted: 3}, rr.sw.Stats)
			rep := rr.sw.Report()
			assert.Equal(t, rr.sw.Stats, rep.Counters)
			assert.Equal(t, netreduce.Stats{Packets: 3, Aggregations: 1, ResultPackets: 2, ResultResends: 1,
				CLTUpdates: 2, StaleFirsts: 1, PortDrops: 1}, netreduce.StatsOf(rep))
		})
	}
}

// TestNetReduceStaleDuplicateForwarded: with window 1, once both ranks
// sent message 2, message 0 is released and its aggregator holds message
// 2; a late duplicate of message 0 is forwarded unchanged (its receiver
// re-ACKs and discards it), at the forwarding latency.
func TestNetReduceStaleDuplicateForwarded(t *testing.T) {
	rr := newRingRig(t, tensor.I32)
	for m := 0; m < 3; m++ {
		rr.sw.Ingress(0, rr.msgN(0, m, i32s(int32(m))))
		rr.sw.Ingress(1, rr.msgN(1, m, i32s(100)))
		got := rr.outputs()
		require.Len(t, got[0], 1, "message %d: rank 1's result", m)
		require.Len(t, got[1], 1, "message %d: rank 0's result", m)
		assert.Equal(t, rr.msgN(0, m, i32s(int32(100+m))), got[1][0].frame, "message %d", m)
	}
	assert.Equal(t, int64(2), accel(rr.sw).Released(0))
	dup := rr.msgN(0, 0, i32s(0))
	rr.sw.Ingress(0, dup)
	rr.want(dup, t0+testTiming.Forward, 1)
	assert.Equal(t, uint64(1), netreduce.StatsOf(rr.sw.Report()).StaleForwards)
	assert.Equal(t, switching.Counters{Frames: 7, Forwarded: 7, Emitted: 6}, rr.sw.Stats)
}

// accel is the switch's NetReduce program (nil before it holds a ring).
func accel(sw *switching.Switch) *netreduce.Program {
	p, _ := sw.Installed(netreduce.ProgramName).(*netreduce.Program)
	return p
}

func TestMemoryBudget(t *testing.T) {
	need := ringConfig(0, tensor.I32).MemoryBytes()
	require.Positive(t, need)
	fits := func(t *testing.T, sw *switching.Switch, id uint8) {
		t.Helper()
		require.NoError(t, netreduce.AddRing(sw, "", ringConfig(id, tensor.I32)))
	}

	t.Run("one byte short", func(t *testing.T) {
		r := newRig(t, "tor7", 2)
		r.sw.MemoryBudget = need - 1
		err := netreduce.AddRing(r.sw, "", ringConfig(0, tensor.I32))
		require.Error(t, err)
		assert.ErrorContains(t, err, "switch tor7")
		assert.ErrorContains(t, err, fmt.Sprintf("ring 0 needs %s of aggregation memory", units.FormatBytes(need)))
		assert.ErrorContains(t, err, fmt.Sprintf("0 B of the %s budget is in use", units.FormatBytes(need-1)))
		assert.Zero(t, r.sw.MemoryBytes(), "a refused ring holds nothing")
		assert.Zero(t, accel(r.sw).Rings())
	})
	t.Run("exactly the budget", func(t *testing.T) {
		r := newRig(t, "tor7", 2)
		r.sw.MemoryBudget = need
		fits(t, r.sw, 0)
		assert.Equal(t, need, r.sw.MemoryBytes())
		err := netreduce.AddRing(r.sw, "", ringConfig(1, tensor.I32))
		assert.ErrorContains(t, err, "ring 1 needs")
		assert.Equal(t, 1, accel(r.sw).Rings())
	})
	t.Run("second ring beyond the budget", func(t *testing.T) {
		r := newRig(t, "tor7", 2)
		r.sw.MemoryBudget = 2*need - 1
		fits(t, r.sw, 0)
		err := netreduce.AddRing(r.sw, "", ringConfig(1, tensor.I32))
		require.Error(t, err)
		assert.ErrorContains(t, err, "switch tor7: ring 1")
		assert.ErrorContains(t, err, fmt.Sprintf("%s of the %s budget is in use", units.FormatBytes(need), units.FormatBytes(2*need-1)))
		assert.Equal(t, 1, accel(r.sw).Rings())
		assert.Equal(t, need, r.sw.MemoryBytes())
		assert.Len(t, r.sw.Programs(), 1, "the accelerator is installed once")
	})
	t.Run("two rings fit twice the budget", func(t *testing.T) {
		r := newRig(t, "tor7", 2)
		r.sw.MemoryBudget = 2 * need
		fits(t, r.sw, 0)
		fits(t, r.sw, 1)
		assert.Equal(t, 2, accel(r.sw).Rings())
		assert.Equal(t, 2*need, r.sw.MemoryBytes())
	})
	t.Run("no budget", func(t *testing.T) {
		r := newRig(t, "tor7", 2)
		fits(t, r.sw, 0)
		fits(t, r.sw, 1)
		fits(t, r.sw, 2)
		assert.Equal(t, 3*need, r.sw.MemoryBytes())
	})
	t.Run("the accelerator's own errors", func(t *testing.T) {
		r := newRig(t, "tor7", 2)
		bad := ringConfig(0, tensor.I32)
		bad.Workers = 1
		bad.Conns = nil
		assert.ErrorContains(t, netreduce.AddRing(r.sw, "", bad), "1 workers")
		assert.Zero(t, accel(r.sw).Rings())
		fits(t, r.sw, 0)
		assert.ErrorContains(t, netreduce.AddRing(r.sw, "", ringConfig(0, tensor.I32)), "ring 0 already exists")
		assert.Equal(t, 1, accel(r.sw).Rings())
		assert.Len(t, r.sw.Programs(), 1)
	})
	t.Run("other programs count against the budget", func(t *testing.T) {
		r := newRig(t, "tor7", 2)
		r.sw.Install(&qpProgram{name: "pool", mem: 1})
		r.sw.MemoryBudget = need
		err := netreduce.AddRing(r.sw, "", ringConfig(0, tensor.I32))
		assert.ErrorContains(t, err, fmt.Sprintf("1 B of the %s budget is in use", units.FormatBytes(need)))
	})
}

// ---- malformed input ----

// counter is a program that consumes nothing and counts what it is offered.
type counter struct{ n int }

func (c *counter) Name() string       { return "counter" }
func (c *counter) MemoryBytes() int64 { return 0 }
func (c *counter) Report() any        { return c.n }
func (c *counter) Process(*frames.View, int, switching.ProgramEmit) bool {
	c.n++
	return false
}

func TestMalformedFrames(t *testing.T) {
	rr := newRingRig(t, tensor.I32)
	good := rr.msg(0, i32s(1, 2, 3, 4))
	badIHL := bytes.Clone(good)
	badIHL[14] = 0x43 // IHL 3
	hugeUDP := bytes.Clone(good)
	hugeUDP[14+20+4], hugeUDP[14+20+5] = 0xff, 0xff
	for _, tc := range []struct {
		name  string
		frame []byte
		runt  bool
	}{
		{"empty", nil, true},
		{"one byte", []byte{0xff}, true},
		{"13 bytes", good[:13], true},
		{"14 bytes", good[:14], false},
		{"IPv4 header cut", good[:30], false},
		{"UDP header cut", good[:40], false},
		{"BTH cut", good[:50], false},
		{"RETH cut", good[:70], false},
		{"ICRC cut", good[:len(good)-2], false},
		{"bad IHL", badIHL, false},
		{"UDP length beyond the datagram", hugeUDP, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := rr.sw.Stats
			require.NotPanics(t, func() { rr.sw.Ingress(0, tc.frame) })
			rr.outputs()
			d := rr.sw.Stats
			assert.Equal(t, before.Frames+1, d.Frames)
			moved := d.Forwarded + d.Flooded + d.Filtered - before.Forwarded - before.Flooded - before.Filtered
			if tc.runt {
				assert.Zero(t, moved, "a runt is dropped")
			} else {
				assert.Equal(t, uint64(1), moved, "a frame no program takes is forwarded")
			}
		})
	}
}

// TestRandomFrames feeds a switch with a NetReduce ring thousands of random
// frames of 0..300 bytes, and valid ring frames truncated or with bytes
// flipped, on random ports. Nothing panics, and every frame is accounted
// for: forwarded, flooded or filtered, consumed by a program, or a runt;
// what the programs emitted is forwarded too.
func TestRandomFrames(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x5eed))
			r := newRig(t, "fuzz", 4)
			for k := 0; k < 2; k++ {
				r.sw.Route(m6(rankMAC(k)), []int{k})
			}
			r.sw.Route(m6(macH), []int{1, 2, 3})
			before, after := &counter{}, &counter{}
			r.sw.Install(before)
			rr := &ringRig{rig: r, cfg: ringConfig(0, tensor.I32)}
			for k := 0; k < 2; k++ {
				next := (k + 1) % 2
				rr.b = append(rr.b, builder(t, frames.Path{Transport: frames.V2IPv4, SrcMAC: rankMAC(k), DstMAC: rankMAC(next),
					SrcIP: ip4(byte(k + 1)), DstIP: ip4(byte(next + 1)), DestQP: ringQP}))
			}
			require.NoError(t, netreduce.AddRing(r.sw, "", rr.cfg))
			r.sw.Install(after)

			const n = 3000
			var runts uint64
			for i := 0; i < n; i++ {
				var f []byte
				switch rng.IntN(3) {
				case 0: // random bytes
					f = make([]byte, rng.IntN(301))
					for j := range f {
						f[j] = byte(rng.Uint32())
					}
				case 1: // a ring frame, cut and/or with bytes flipped
					rank := rng.IntN(2)
					f = rr.msg(rank, i32s(rng.Int32(), rng.Int32()))
					if rng.IntN(2) == 0 {
						f = f[:rng.IntN(len(f)+1)]
					}
					for k := rng.IntN(3); k > 0 && len(f) > 0; k-- {
						f[rng.IntN(len(f))] ^= byte(1 + rng.IntN(255))
					}
				default: // a well-formed ring frame
					rank := rng.IntN(2)
					f = rr.msg(rank, i32s(rng.Int32(), rng.Int32()))
				}
				if len(f) < 14 {
					runts++
				}
				port := rng.IntN(4)
				require.NotPanics(t, func() { r.sw.Ingress(port, f) }, "frame %d: % x", i, f)
			}
			consumed := uint64(before.n - after.n)
			s := r.sw.Stats
			assert.Equal(t, uint64(n), s.Frames)
			assert.Equal(t, s.Frames-runts-consumed+s.Emitted, s.Forwarded+s.Flooded+s.Filtered,
				"every frame forwarded, flooded, filtered, consumed or a runt: %+v runts=%d consumed=%d", s, runts, consumed)
			assert.Positive(t, s.Emitted, "some ring frames aggregated")
			assert.Positive(t, consumed)
			assert.Positive(t, runts)
			assert.Equal(t, runts, s.Runts, "the switch counts every runt")
		})
	}
}

// TestRuntIsCounted: a frame shorter than an Ethernet header is dropped
// and counted as a runt, so every received frame shows where it went:
// Frames == Forwarded + Flooded + Filtered + Runts + (consumed by programs,
// none here).
func TestRuntIsCounted(t *testing.T) {
	r := newRig(t, "s", 2)
	r.sw.Ingress(0, make([]byte, 10))
	r.want(nil, 0)
	s := r.sw.Stats
	assert.Equal(t, uint64(1), s.Runts)
	assert.Equal(t, s.Frames, s.Forwarded+s.Flooded+s.Filtered+s.Runts,
		"a runt was received (Frames=%d) but no counter says what became of it: %+v", s.Frames, s)
}

// ---- port security ----

// TestPortSecurity: ports 0 and 1 are bound to hosts A (10.0.0.1) and B
// (10.0.0.2), port 2 joins another switch. A bound port takes frames from
// its host's MAC and address only; a bound host's MAC or address entering
// by any other port is dropped; traffic from behind the trunk passes.
func TestPortSecurity(t *testing.T) {
	r := newRig(t, "sw", 3)
	r.sw.Bind(0, m6(macA), ip4(1))
	r.sw.Bind(1, m6(macB), ip4(2))
	r.sw.Route(m6(macA), []int{0})
	r.sw.Route(m6(macB), []int{1})
	r.sw.Route(m6(macC), []int{2})
	ip6 := func(last byte) netip.Addr { return netip.AddrFrom16([16]byte{0: 0xfd, 15: last}) }
	roce := func(tr frames.Transport, src net.HardwareAddr, sip netip.Addr, vlan bool) []byte {
		dip, dst := ip4(3), macC
		if !sip.Is4() {
			dip = ip6(3)
		}
		if sip == ip4(3) { // from behind the trunk, to A
			dip, dst = ip4(1), macA
		}
		b := builder(t, frames.Path{Transport: tr, SrcMAC: src, DstMAC: dst, SrcIP: sip, DstIP: dip, DestQP: 0x12, VLAN: vlan, VLANID: 5})
		return build(t, b, &frames.Packet{Opcode: wire.SendOnly, PSN: 1, Payload: []byte{1, 2, 3, 4}})
	}
	drops := uint64(0)
	for _, c := range []struct {
		name  string
		port  int
		frame []byte
		pass  bool
	}{
		{"A's own frame on A's port", 0, roce(frames.V2IPv4, macA, ip4(1), false), true},
		{"A's own frame, VLAN-tagged", 0, roce(frames.V2IPv4, macA, ip4(1), true), true},
		{"A's ARP (no address checked)", 0, arp(macA), true},
		{"A's non-IP frame", 0, ether(macC, macA, 1), true},
		{"B's MAC on A's port", 0, roce(frames.V2IPv4, macB, ip4(2), false), false},
		{"an unknown MAC on A's port", 0, ether(macC, macH, 2), false},
		{"A's MAC with B's address", 0, roce(frames.V2IPv4, macA, ip4(2), false), false},
		{"A's MAC with another address, VLAN-tagged", 0, roce(frames.V2IPv4, macA, ip4(9), true), false},
		{"A's MAC with an IPv6 source", 0, roce(frames.V2IPv6, macA, ip6(1), false), false},
		{"A's MAC with a RoCEv1 GID", 0, roce(frames.V1, macA, ip6(1), false), false},
		{"a remote host behind the trunk", 2, roce(frames.V2IPv4, macC, ip4(3), false), true},
		{"A's MAC from the trunk", 2, ether(macB, macA, 3), false},
		{"A's address from the trunk, another MAC", 2, roce(frames.V2IPv4, macH, ip4(1), false), false},
		{"B's address from the trunk, VLAN-tagged", 2, roce(frames.V2IPv4, macH, ip4(2), true), false},
	} {
		r.sw.Ingress(c.port, c.frame)
		out := r.outputs()
		if c.pass {
			assert.NotEmpty(t, out, c.name)
		} else {
			drops++
			assert.Empty(t, out, c.name)
		}
		assert.Equal(t, drops, r.sw.Stats.PortSecurity, c.name)
	}
	// Bound IPv6 and RoCEv1 hosts are held to their addresses too.
	r.sw.Bind(1, m6(macB), ip6(2))
	r.sw.Ingress(1, roce(frames.V2IPv6, macB, ip6(2), false))
	assert.NotEmpty(t, r.outputs(), "B's IPv6 frame")
	r.sw.Ingress(1, roce(frames.V1, macB, ip6(2), false))
	assert.NotEmpty(t, r.outputs(), "B's RoCEv1 frame (GID)")
	r.sw.Ingress(1, roce(frames.V2IPv6, macB, ip6(7), false))
	assert.Empty(t, r.outputs(), "B's MAC with another IPv6 source")
	assert.Equal(t, drops+1, r.sw.Stats.PortSecurity)
}

// Without bindings every port is open, as before port security.
func TestNoBindingsNoPortSecurity(t *testing.T) {
	r := newRig(t, "sw", 2)
	r.sw.Route(m6(macB), []int{1})
	r.sw.Ingress(0, ether(macB, macA, 1))
	r.sw.Ingress(0, ether(macB, macH, 2))
	assert.Len(t, r.outputs()[1], 2)
	assert.Zero(t, r.sw.Stats.PortSecurity)
}

// frameProgram takes every frame that is not RoCE with EtherType 0x0700
// and answers it with a copy to the ingress port's MAC.
type frameProgram struct {
	seen []int
}

func (p *frameProgram) Name() string                                          { return "test-frame" }
func (p *frameProgram) Process(*frames.View, int, switching.ProgramEmit) bool { return false }
func (p *frameProgram) MemoryBytes() int64                                    { return 0 }
func (p *frameProgram) Report() any                                           { return nil }
func (p *frameProgram) ProcessFrame(f []byte, port int, emit switching.ProgramEmit) bool {
	if f[12] != 0x07 || f[13] != 0x00 {
		return false
	}
	p.seen = append(p.seen, port)
	f[14] = 0xAA // the program may rewrite the frame it emits
	emit(f, 5*time.Nanosecond)
	return true
}

func TestFrameProgramsSeeFramesThatAreNotRoCE(t *testing.T) {
	clk := &fakeClock{now: time.Microsecond}
	s := switching.New(clk, "s0", testTiming)
	p0, p1 := &fakePort{}, &fakePort{}
	s.SetPort(0, p0, "port0-out")
	s.SetPort(1, p1, "port1-out")
	macA := [6]byte{0x02, 0, 0, 0, 0, 0xA}
	macB := [6]byte{0x02, 0, 0, 0, 0, 0xB}
	s.Route(macA, []int{0})
	s.Route(macB, []int{1})
	prog := &frameProgram{}
	s.Install(prog)
	f := make([]byte, 60)
	copy(f[0:6], macB[:])
	copy(f[6:12], macA[:])
	f[12], f[13] = 0x07, 0x00
	s.Ingress(0, f)
	assert.Equal(t, []int{0}, prog.seen)
	require.Len(t, p1.got, 1, "the program's frame is routed by its destination")
	assert.Equal(t, byte(0xAA), p1.got[0].frame[14])
	assert.Equal(t, time.Microsecond+5*time.Nanosecond, p1.got[0].ready)
	assert.Equal(t, uint64(1), s.Stats.Emitted)

	// ARP is not the program's: the pipeline forwards it.
	arp := bytes.Clone(f)
	arp[12], arp[13] = 0x08, 0x06
	s.Ingress(0, arp)
	assert.Equal(t, []int{0}, prog.seen)
	require.Len(t, p1.got, 2)
	assert.Equal(t, uint64(2), s.Stats.Forwarded, "the emitted frame and the ARP")
}
