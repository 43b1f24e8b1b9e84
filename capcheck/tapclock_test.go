package capcheck_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
)

// TestCheckTapBridgeNamesSayWallClock: interface names say a capture was
// taken on the wall clock on the TAP backend's bridges only when they are
// the whole set `inaemu tap up` makes, PREFIX-br0 .. PREFIX-br(k-1) with
// one PREFIX; a user's bridge named like one (ovs-br1), or a set with a
// gap, a second prefix or a name twice, keeps the data centre's
// in-flight tolerance (clkLateRetransmission is then a psn-order
// violation).
func TestCheckTapBridgeNamesSayWallClock(t *testing.T) {
	late := []chkWant{{"psn-order", 7, 102}}
	for _, c := range []struct {
		names string
		wall  bool
	}{
		{"ina-br0", true},
		{"lab-br0,lab-br1", true},
		{"lab-br1,lab-br0,lab-br2", true},
		{"ovs-br1", false},
		{"lab-br0,lab-br2", false},
		{"lab-br0,lab-br0", false},
		{"a-br0,b-br1", false},
		{"lab-br00", false},
		{"-br0", false},
	} {
		names := strings.Split(c.names, ",")
		capture := clkLateRetransmission(t, names[0])
		capture.names = names
		rep, err := capcheck.CheckFile(clkWrite(t, capture, false), capcheck.CheckOptions{})
		require.NoError(t, err, c.names)
		if c.wall {
			assert.Empty(t, chkViolations(rep), c.names)
			assert.Equal(t, "wall", rep.Clock, c.names)
			assert.Contains(t, rep.InFlightWhy, "TAP backend's bridges", c.names)
		} else {
			assert.Equal(t, late, chkViolations(rep), c.names)
			assert.Equal(t, "", rep.Clock, c.names)
			assert.Equal(t, int64(capcheck.DefaultInFlight), rep.InFlightNS, c.names)
		}
	}
}
