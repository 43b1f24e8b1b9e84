package main

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/tap"
)

// replay --tap into an interface without a carrier (a bridge whose ports
// nothing holds) is refused in one line, exit 2: it printed "50 frames
// out", exit 0, while no frame reached anything. Once a process holds a
// port, the bridge has its carrier and the frames go out.
func TestReplayTapRefusesNoCarrier(t *testing.T) {
	needTAPs(t) // root (CI): skips elsewhere, saying why
	prefix := topology(t, "rnc", 1).Prefix
	capture := checkGolden("icrc.pcap")

	start := time.Now()
	code, out, errOut := runGuarded("replay", capture, "--tap", prefix+"-br0", "--topspeed", "--limit", "3")
	assert.Empty(t, out)
	oneLine(t, code, errOut, "inaemu replay: ", "--tap "+prefix+"-br0: no carrier (operstate ", "no frame sent out of it would arrive anywhere")
	assert.GreaterOrEqual(t, time.Since(start), carrierWait, "waited for a carrier before refusing")

	// A process holds the bridge's port: the bridge has a carrier.
	port, err := tap.Open(prefix + "-sw0")
	require.NoError(t, err)
	defer port.Close()
	code, out, errOut = runGuarded("replay", capture, "--tap", prefix+"-br0", "--topspeed", "--limit", "3")
	require.Equal(t, 0, code, errOut)
	assert.True(t, strings.HasPrefix(out, "inaemu replay: 3 frames"), out)
}

// An interface sysfs does not describe is taken as passing; one that is
// up is not waited for.
func TestWaitCarrier(t *testing.T) {
	_, ok := waitCarrier("no-such-interface-h4", time.Second)
	assert.True(t, ok)
	start := time.Now()
	_, ok = waitCarrier("lo", time.Second) // operstate unknown, carrier 1
	assert.True(t, ok)
	assert.Less(t, time.Since(start), 500*time.Millisecond)
}
