package faultwire_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// TestWireCaptureSaysWallClock: the wire's capture (inaemu wire, run
// --dut) is taken on the wall clock and says so in its section header,
// and inaemu check reads that and judges it with the wall-clock in-flight
// tolerance, saying why, with no flag.
func TestWireCaptureSaysWallClock(t *testing.T) {
	b := newBench(t, 1, "")
	for psn := uint32(0); psn < 4; psn++ {
		f := roce(t, psn, false)
		require.NoError(t, b.hosts[0].WriteFrame(f))
		require.Equal(t, f, expect(t, b.devs[0]))
	}
	a := roce(t, 3, true)
	require.NoError(t, b.devs[0].WriteFrame(a))
	require.Equal(t, a, expect(t, b.hosts[0]))
	b.cancel()
	require.NoError(t, <-b.done)
	path := filepath.Join(t.TempDir(), "wire.pcapng")
	require.NoError(t, os.WriteFile(path, b.cap.Bytes(), 0o644))

	rd, err := pcapio.Open(path)
	require.NoError(t, err)
	_, err = rd.Next()
	require.NoError(t, err)
	require.Equal(t, "inaemu: clock=wall", rd.SectionComment())
	rd.Close()

	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	require.True(t, rep.Conforms, "%v", rep.Violations)
	require.Equal(t, "wall", rep.Clock)
	require.Equal(t, int64(time.Second), rep.InFlightNS)
	require.Contains(t, rep.InFlightWhy, `section comment says "inaemu: clock=wall"`)
}
