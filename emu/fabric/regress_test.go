package fabric

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/topo"
)

// Reachable must say what the network does: a frame from NIC a to NIC
// b's MAC arrives at b exactly when Reachable(a, b). On hosts with two
// NICs each on one switch (dims:2, links_per_host=2) it says a NIC
// reaches itself (the host's own link is taken for "the link between
// them", but the switch filters a frame back out its ingress port), and
// that h0's first NIC does not reach h0's second (any link of the target
// host ends the check), though the switch forwards between them.
func TestReviewReachableMatchesDelivery(t *testing.T) {
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
