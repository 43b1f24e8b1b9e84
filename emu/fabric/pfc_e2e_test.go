package fabric

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/switching"
)

// Two NICs send 300 frames of priority 3 each to a third through one
// switch whose buffer makes priority 3 lossless with a 20 kB XOFF: the 2:1
// incast pauses both senders again and again (PFC frames from the
// switch's ports, honoured by the NICs), nothing is dropped, every frame
// arrives, and the bottleneck never idles: the last frame arrives 599
// line times after the first.
func TestPFCLosslessIncastEndToEnd(t *testing.T) {
	f, err := New(Config{Hosts: 3, Link: LinkConfig{Rate: 8e9, Latency: time.Microsecond},
		Buffer: switching.BufferConfig{Lossless: 1 << 3, XOFF: 20000}, OpenPorts: true})
	require.NoError(t, err)
	down := dirOf(t, f, "port2-out")
	got := recordPrio(f, down)
	const n = 300
	for _, h := range f.Hosts[:2] {
		for i := range n {
			fr := prioFrame(3, 1000, 0, i)
			copy(fr[0:6], f.Hosts[2].MAC)
			copy(fr[6:12], h.MAC)
			h.SendControl(fr)
		}
	}
	runIdle(t, f)
	require.Len(t, *got, 2*n)
	assert.Equal(t, (*got)[0].at+(2*n-1)*lineNs(1000, 8e9), (*got)[2*n-1].at, "the bottleneck idled")
	assert.Zero(t, f.LinkStats().QueueDrops)
	for _, u := range f.Switch.Buffer() {
		assert.Zero(t, u.DropsHeadroom+u.DropsEgress+u.DropsFull, "%+v", u)
	}
	byDir := map[string]PFCStats{}
	for _, s := range f.PFCStats() {
		byDir[s.Direction] = s
	}
	for _, p := range []string{"port0", "port1"} {
		sent, recv := byDir[p+"-out"], byDir[p+"-in"]
		assert.Positive(t, sent.PausesSent, p)
		assert.Equal(t, sent.PausesSent, recv.PausesReceived, "%s: every PFC frame arrives", p)
		assert.Positive(t, recv.PausedNs, p)
	}
}
