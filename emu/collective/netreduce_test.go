package collective

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/topo"
)

// The tree order matters: with f32 the same ranks summed in rank order
// give other bits (so TestMultiRackExact checks the order, not only the
// sum), while integers agree.
func TestTreeOrderDiffersFromRankOrder(t *testing.T) {
	ten := topo.LinkParams{Rate: 10e9, Latency: time.Microsecond}
	up := ten
	up.Rate = 40e9
	tp, err := topo.SpineLeaf(2, 4, 1, ten, up)
	require.NoError(t, err)
	cfg := job.DefaultConfig()
	cfg.Topology, cfg.TensorBytes, cfg.Seed = tp, 256<<10, 1
	cfg.Workers = 8
	cfg.Jobs = []job.JobSpec{{Name: "j", Ranks: []string{"h0", "h4", "h1", "h5", "h2", "h6", "h3", "h7"}}}
	u, err := job.NewSession(cfg)
	require.NoError(t, err)
	j := u.Jobs[0].Alg.(*netReduceJob)
	require.Equal(t, [][]int{{0, 2, 4, 6}, {1, 3, 5, 7}}, j.groups)
	size := j.chunk
	tree := make([]byte, size)
	j.sumOf(tree, 0, size)
	groups := j.groups
	j.groups = [][]int{{0, 1, 2, 3, 4, 5, 6, 7}} // one switch's: rank order
	flat := make([]byte, size)
	j.sumOf(flat, 0, size)
	j.groups = groups
	assert.NotEqual(t, flat, tree, "f32: tree and rank order differ somewhere in a message")
}
