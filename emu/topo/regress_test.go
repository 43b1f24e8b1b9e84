package topo

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// README ("Topologies and jobs"): "Every form takes link=, latency=,
// queue=". The dims form refuses link= (it only knows the per-dimension
// links=), so `--topology dims:4x4,link=25G` is an error.
func TestReviewDimsFlagTakesLink(t *testing.T) {
	s, err := ParseFlag("dims:2x2,link=25G")
	require.NoError(t, err)
	tp, err := s.Build(LinkParams{Rate: 10e9})
	require.NoError(t, err)
	for _, l := range tp.Links {
		require.Equal(t, 25e9, l.Rate, "%s", l.AB)
	}
}
