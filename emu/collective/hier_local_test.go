package collective

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/tensor"
)

// localCfg is a hier job of 64 KiB in chunks, with the faults events.
func localCfg(t *testing.T, flag string, chunks int, sched string, events ...string) job.Config {
	cfg := job.DefaultConfig()
	cfg.Topology = flagTopo(t, flag)
	cfg.Mode, cfg.DType, cfg.Seed = Hier, tensor.F32, 3
	cfg.Workers = len(cfg.Topology.Hosts())
	cfg.TensorBytes = 64 << 10
	cfg.Hier = &job.Hier{Chunks: chunks, Scheduler: sched, LocalOrder: true}
	for _, s := range events {
		e, err := faults.Parse(s)
		require.NoError(t, err)
		cfg.Events = append(cfg.Events, e)
	}
	return cfg
}

// TestHierWithoutConsistencyReportsTheWaitCycle is the Themis paper's
// §4.6.2 hazard in packet mode: on a 2x2 fabric of rings, 4 chunks in the
// baseline's order, one data frame from h0 to h1 delayed by 20 µs makes
// rank 1 finish chunk 1's first stage late, so chunks become ready on
// dimension 1 in different orders on different ranks. With consistency
// on (every rank follows the common service order) the job ends exact.
// With it off (LocalOrder: each rank serves by its own arrivals) two
// peers pick different chunks and wait on each other: the run stops —
// no hang — with one line naming the wait cycle: the ranks, the
// dimensions and the chunks' stages. Without the fault the ranks agree
// and the job ends exact even so.
func TestHierWithoutConsistencyReportsTheWaitCycle(t *testing.T) {
	const flag, fault = "dims:2x2,kinds=ring/ring", "delay=20us link=h0-h1 class=data nth=1"
	on := localCfg(t, flag, 4, "baseline", fault)
	on.Hier.LocalOrder = false
	res, err := job.Run(on)
	require.NoError(t, err)
	require.True(t, res.Exact, "consistency on: exact")

	res, err = job.Run(localCfg(t, flag, 4, "baseline"))
	require.NoError(t, err)
	require.True(t, res.Exact, "no fault: the ranks agree without consistency")

	_, err = job.Run(localCfg(t, flag, 4, "baseline", fault))
	var je *job.JobError
	require.ErrorAs(t, err, &je)
	msg := err.Error()
	t.Log(msg)
	assert.NotContains(t, msg, "\n")
	assert.Contains(t, msg, "job stalled")
	assert.Contains(t, msg, "schedule consistency is off (local order) and themis: inconsistent schedule, wait cycle: ")
	_, cycle, _ := strings.Cut(msg, "wait cycle: ")
	waits := strings.Split(cycle, "; ")
	require.GreaterOrEqual(t, len(waits), 2, "a cycle has at least two waits: %s", cycle)
	for _, w := range waits {
		assert.Regexp(t, `^rank \d dim[12] waits to serve C\d\.\d for (its peer|its own C\d\.\d) on rank \d dim[12], which serves C\d\.\d first$`, w)
	}

	// Themis's orders, and the fault elsewhere: the same.
	_, err = job.Run(localCfg(t, "dims:2x2x2,kinds=ring/ring/ring", 4, "themis", "delay=5us link=h0-h1 class=data nth=1"))
	require.ErrorAs(t, err, &je)
	assert.Contains(t, err.Error(), "wait cycle: ")
}
