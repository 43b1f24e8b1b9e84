//go:build unix

package dut

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
)

// Once stop returns, Log holds the device's whole output, what it says
// as it goes down included, and nothing writes to Log any more (it had
// returned when the command exited, while the output's last lines could
// still be on their way to Log: -race saw the test read it meanwhile).
func TestStopFlushesLog(t *testing.T) {
	var log bytes.Buffer
	d := Device{Command: `trap 'echo going; echo down; exit 0' TERM; echo ready; while :; do sleep 1 & wait $!; done`, Log: &log}
	stop, err := d.start(emu.DefaultConfig(), 30*time.Second)
	require.NoError(t, err)
	stop()
	got := log.String()
	require.True(t, strings.HasSuffix(got, "going\ndown\n"), "Log after stop: %q", got)
	log.Reset() // a write after stop would race with this under -race
}

// A command that ends before it says it is ready is reported with its
// output's last lines, read to the end.
func TestExitBeforeReadyNamesOutput(t *testing.T) {
	d := Device{Command: `echo one; echo two; exit 3`}
	_, err := d.start(emu.DefaultConfig(), 30*time.Second)
	require.EqualError(t, err, "device command exited before it was ready (exit status 3): last output: one | two")
}
