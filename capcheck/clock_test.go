package capcheck_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// clkLateRetransmission: a clean run as a software requester behind a
// wall-clock wire makes it: PSNs 100..105, an ACK for 103, and a timeout
// retransmission of 102 captured 2 ms after that ACK (the requester sent
// it before the ACK, queued in its process, reached it). Frame 8 (index 7).
func clkLateRetransmission(t *testing.T, iface string) *chkCapture {
	c := chkNewCapture(iface)
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	for p := uint32(100); p <= 105; p++ {
		c.add(iface, us, a.data(p, p == 103 || p == 105))
	}
	c.add(iface, us, a.ack(103))
	c.add(iface, 2*time.Millisecond, a.data(102, false))
	for p := uint32(103); p <= 105; p++ {
		c.add(iface, us, a.data(p, p == 105))
	}
	c.add(iface, us, a.ack(105))
	return c
}

// clkWrite writes c as a pcapng file, marked as taken on the wall clock
// when wall is set (pcapio's NewWallClockWriter, as faultwire writes).
func clkWrite(t *testing.T, c *chkCapture, wall bool) string {
	var buf bytes.Buffer
	newW := pcapio.NewWriter
	if wall {
		newW = pcapio.NewWallClockWriter
	}
	w, err := newW(&buf, c.names...)
	require.NoError(t, err)
	for _, r := range c.recs {
		require.NoError(t, w.Write(r.iface, r.ns, r.data, r.comments...))
	}
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "c.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestCheckWallClockCapture: the same frames are a clean wall-clock run
// when the capture says it was taken on the wall clock (its section
// comment, or interface names only wall-clock captures carry), and a
// psn-order violation on a data centre's in-flight tolerance otherwise;
// an explicit InFlight wins over the marker. The report says, in one
// line, which tolerance it used and why.
func TestCheckWallClockCapture(t *testing.T) {
	late := []chkWant{{"psn-order", 7, 102}}

	rep, err := capcheck.CheckFile(clkWrite(t, clkLateRetransmission(t, "tap0"), false), capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Equal(t, late, chkViolations(rep), "unmarked: the tight default")
	assert.Equal(t, "", rep.Clock)
	assert.Equal(t, int64(capcheck.DefaultInFlight), rep.InFlightNS)

	marked := clkWrite(t, clkLateRetransmission(t, "tap0"), true)
	rep, err = capcheck.CheckFile(marked, capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, chkViolations(rep), "marked wall clock: 2 ms is in flight")
	assert.Equal(t, "wall", rep.Clock)
	assert.Equal(t, int64(time.Second), rep.InFlightNS)
	assert.Contains(t, rep.InFlightWhy, "section comment")
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	assert.Contains(t, b.String(), "\n  clock        wall-clock capture (the capture's section comment says \"inaemu: clock=wall\"): in-flight tolerance 1s instead of 50µs (--in-flight overrides)\n")

	rep, err = capcheck.CheckFile(marked, capcheck.CheckOptions{InFlight: capcheck.DefaultInFlight})
	require.NoError(t, err)
	assert.Equal(t, late, chkViolations(rep), "an explicit in-flight wins")
	assert.Equal(t, "given", rep.InFlightWhy)

	// Named like the TAP backend's bridges (dumpcap on ina-br0), or like
	// faultwire's interfaces, without the marker: the wall clock too.
	for _, name := range []string{"ina-br0", "h0-w0"} {
		rep, err = capcheck.CheckFile(clkWrite(t, clkLateRetransmission(t, name), false), capcheck.CheckOptions{})
		require.NoError(t, err)
		assert.Empty(t, chkViolations(rep), name)
		assert.Equal(t, "wall", rep.Clock, name)
		assert.Contains(t, rep.InFlightWhy, "its interfaces are", name)
	}
}

// TestCheckEmulatorCaptureKeepsTightInFlight: an emulator capture (the
// virtual clock: no marker, the star's portR-in/out names) keeps the
// tight default, and its text report has no clock line.
func TestCheckEmulatorCaptureKeepsTightInFlight(t *testing.T) {
	rep, err := capcheck.CheckFile(filepath.Join(chkDir, "netreduce_clean.pcapng"), capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Equal(t, "", rep.Clock)
	assert.Equal(t, int64(capcheck.DefaultInFlight), rep.InFlightNS)
	assert.Contains(t, rep.InFlightWhy, "default 50µs")
	var b strings.Builder
	require.NoError(t, rep.WriteText(&b))
	assert.NotContains(t, b.String(), "clock ")
}
