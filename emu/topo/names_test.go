package topo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPlaceNames(t *testing.T) {
	assert.Equal(t, "h3", NICName("h3", 0))
	assert.Equal(t, "h3:nic1", NICName("h3", 1))
	assert.Equal(t, "h3:gpu2", GPUName("h3", 2))
	for name, want := range map[string]struct {
		host string
		g    int
		ok   bool
	}{
		"h3:gpu2": {"h3", 2, true}, "h3:gpu0": {"h3", 0, true},
		"h3:gpu02": {}, "h3:gpu+1": {}, "h3:gpu-1": {}, "h3:gpu": {}, "h3:nic1": {}, "h3": {},
	} {
		h, g, ok := GPUOf(name)
		assert.Equal(t, want, struct {
			host string
			g    int
			ok   bool
		}{h, g, ok}, name)
	}
	s, err := ParseFlag("dims:2,kinds=switch,links_per_host=2,gpus=2,intra=100G")
	require.NoError(t, err)
	tp, err := s.Build(LinkParams{Rate: 10e9})
	require.NoError(t, err)
	assert.Equal(t, []string{"h0", "h0:nic1", "h0:gpu0", "h0:gpu1", "h1", "h1:nic1", "h1:gpu0", "h1:gpu1"}, tp.Places())
}
