package ars_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/ars"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
)

// A job on the AllReduce-Switch counts the switch memory the program
// holds for its ring (netreduce.RingMemory), not NetReduce's aggregator
// array: the memory estimate's Switch and the report's ring memory_bytes
// are the program's MemoryBytes after AddRing of the same ring.
func TestJobMemoryIsTheProgramsOwn(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.Transport, cfg.MTU, cfg.MsgLen, cfg.TensorBytes, cfg.Seed = 4, frames.V1, 1024, 8, 64<<10, 1
	cfg.SwitchProgram = ars.Name

	p := ars.New(switching.Timing{}, nil)
	ring := collective.NetReduceRing(cfg, nil)
	require.NoError(t, p.AddRing(ring))
	want := p.MemoryBytes()
	require.NotEqual(t, ring.MemoryBytes(), want, "the test tells the two figures apart")
	got, own := netreduce.RingMemoryOf(ars.Name, ring)
	assert.True(t, own)
	assert.Equal(t, want, got)

	assert.Equal(t, want, emu.EstimateMemory(cfg).Switch)
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	require.NotNil(t, res.Jobs[0].Ring)
	assert.Equal(t, want, res.Jobs[0].Ring.MemoryBytes)
	assert.Equal(t, want, res.Switch.Programs[ars.Name].(ars.Report).MemoryBytes)

	// NetReduce keeps its own figure (the aggregator array).
	m, own := netreduce.RingMemoryOf("", ring)
	assert.False(t, own)
	assert.Equal(t, ring.MemoryBytes(), m)
}
