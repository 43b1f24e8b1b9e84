package dut_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// ports makes the wired TAPs of a device with workers ports, under a
// prefix of this run's (taptest.Prefix), and returns the prefix.
func ports(t *testing.T, tag string, workers int) string {
	t.Helper()
	prefix := taptest.Prefix(t, tag)
	_, err := tap.Up(tap.Topology{Prefix: prefix, Workers: workers, Wired: true})
	require.NoError(t, err)
	return prefix
}

func job(t *testing.T, workers int, events ...string) emu.Config {
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.Timeout, cfg.MsgLen, cfg.Seed = workers, 64<<10, 16, 8, 3
	for _, s := range events {
		e, err := faults.Parse(s)
		require.NoError(t, err)
		cfg.Events = append(cfg.Events, e)
	}
	return cfg
}

// TestInaemuSwitchAsDevice: `inaemu switch` in its own process, started by
// the device command, aggregates exactly through a wire that drops and
// corrupts.
func TestInaemuSwitchAsDevice(t *testing.T) {
	prefix := ports(t, "dt", 3)
	bin := testtool.Build(t, "github.com/inaemu/inaemu/cmd/inaemu", "inaemu")
	var log bytes.Buffer
	d := dut.Device{Prefix: prefix, Command: bin + " switch --tap $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS", Log: &log, StartTimeout: testtool.Budget(30 * time.Second)}
	cfg := job(t, 3, "drop port=1 dir=in class=data nth=3", "corrupt port=2 dir=out class=data nth=2")
	var capture bytes.Buffer
	cfg.Capture = &capture
	res, err := dut.Run(cfg, d)
	require.NoError(t, err, "device output:\n%s", log.String())
	require.True(t, res.Exact)
	require.Equal(t, uint64(1), res.Wire.Dirs[2].Faults.Dropped)
	require.Equal(t, uint64(1), res.Wire.Dirs[5].Faults.Corrupted)
	require.Equal(t, uint64(1), res.Faults.Dropped, "the run's faults are the wire's")
	require.Equal(t, uint64(1), res.Faults.Corrupted)
	require.Equal(t, res.Wire.QueueDrops(), res.HostQueueDrops, "the wire recorded every frame a host's full queue dropped")
	require.Contains(t, log.String(), "ready on "+prefix+"-sw0.."+prefix+"-sw2")
}
