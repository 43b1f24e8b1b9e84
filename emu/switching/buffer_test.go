package switching_test

import (
	"encoding/json"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// queuePort is an egress with a queue that reports departures, as a link
// direction does: it holds what it is pushed until leave.
type queuePort struct {
	sw   *switching.Switch
	tags []uint32
	got  [][]byte
}

func (q *queuePort) Push(frame []byte, ready time.Duration) bool {
	panic("a tagged egress gets PushTagged")
}

func (q *queuePort) PushTagged(frame []byte, ready time.Duration, tag uint32) bool {
	q.tags, q.got = append(q.tags, tag), append(q.got, append([]byte(nil), frame...))
	return true
}

func (q *queuePort) leave() {
	q.sw.Departed(q.tags[0], q.got[0])
	q.tags, q.got = q.tags[1:], q.got[1:]
}

// roceFrameDSCP is a RoCEv2 (or v1) SEND of n payload bytes from a to b
// with traffic class tc.
func roceFrameDSCP(t *testing.T, tr frames.Transport, tc uint8, n int) []byte {
	t.Helper()
	p := frames.Path{Transport: tr, SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), DestQP: 0x11, TClass: tc}
	if tr != frames.V2IPv4 {
		p.SrcIP, p.DstIP = netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2")
	}
	b, err := frames.NewBuilder(p)
	require.NoError(t, err)
	buf := make([]byte, 9000)
	k, err := b.Build(buf, &frames.Packet{Opcode: wire.SendOnly, Payload: make([]byte, n)})
	require.NoError(t, err)
	return buf[:k]
}

// TestPriority: DSCP >> 3 on every transport (RoCE's DSCP 26 is priority
// 3), a VLAN tag's PCP on a frame without IP, 0 otherwise.
func TestPriority(t *testing.T) {
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		assert.Equal(t, 3, switching.Priority(roceFrameDSCP(t, tr, 26<<2, 16)), tr)
		assert.Equal(t, 3, switching.Priority(roceFrameDSCP(t, tr, 26<<2|3, 16)), "%s: ECN bits are not the priority", tr)
		assert.Equal(t, 0, switching.Priority(roceFrameDSCP(t, tr, 0, 16)), tr)
		assert.Equal(t, 7, switching.Priority(roceFrameDSCP(t, tr, 63<<2, 16)), tr)
		assert.Equal(t, 1, switching.Priority(roceFrameDSCP(t, tr, frames.CompressedDSCP<<2, 16)), tr)
	}
	arp := make([]byte, 60)
	arp[12], arp[13] = 0x08, 0x06
	assert.Equal(t, 0, switching.Priority(arp))
	tagged := append(append(append([]byte{}, arp[:12]...), 0x81, 0x00, 5<<5, 1), arp[12:]...)
	assert.Equal(t, 5, switching.Priority(tagged), "PCP of a tagged non-IP frame")
	assert.Equal(t, 0, switching.Priority(arp[:13]), "a runt")
}

// TestBufferAccounting: a frame is charged to its ingress port and
// priority when the switch queues it and released when it leaves the
// egress queue; the high-water marks stay; the report and its JSON list
// only what saw traffic.
func TestBufferAccounting(t *testing.T) {
	sw := switching.New(&fakeClock{}, "s0", switching.Timing{})
	out := &queuePort{sw: sw}
	sw.SetPort(0, &fakePort{}, "p0")
	sw.SetPort(1, out, "p1")
	dst := [6]byte{2, 0, 0, 0, 0, 2}
	sw.Route(dst, []int{1})
	hi, lo := roceFrameDSCP(t, frames.V2IPv4, 26<<2, 1000), roceFrameDSCP(t, frames.V2IPv4, 0, 100)
	sw.Ingress(0, hi)
	sw.Ingress(0, hi)
	sw.Ingress(0, lo)
	use := sw.Buffer()
	require.Len(t, use, 2)
	assert.Equal(t, switching.BufferUse{Switch: "s0", Port: 0, Priority: 0, Bytes: int64(len(lo)), Frames: 1, MaxBytes: int64(len(lo)), MaxFrames: 1}, use[0])
	assert.Equal(t, switching.BufferUse{Switch: "s0", Port: 0, Priority: 3, Bytes: 2 * int64(len(hi)), Frames: 2, MaxBytes: 2 * int64(len(hi)), MaxFrames: 2}, use[1])
	now, peak := sw.BufferBytes()
	assert.Equal(t, int64(2*len(hi)+len(lo)), now)
	assert.Equal(t, now, peak)

	out.leave()
	out.leave()
	out.leave()
	use = sw.Buffer()
	assert.Zero(t, use[0].Bytes+use[1].Bytes+use[0].Frames+use[1].Frames, "all released")
	assert.Equal(t, int64(2*len(hi)), use[1].MaxBytes, "the high-water mark stays")
	now, _ = sw.BufferBytes()
	assert.Zero(t, now)

	js, err := json.Marshal(sw.Report())
	require.NoError(t, err)
	assert.Contains(t, string(js), `"buffer":[{"switch":"s0","port":0,"priority":0,`)
	var back switching.Report
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, sw.Buffer(), back.Buffer)

	idle := switching.New(&fakeClock{}, "s1", switching.Timing{})
	js, err = json.Marshal(idle.Report())
	require.NoError(t, err)
	assert.NotContains(t, string(js), "buffer", "a switch that saw no traffic reports no buffer")
}
