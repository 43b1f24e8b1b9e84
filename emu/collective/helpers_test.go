package collective

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/job"
	"time"

	"github.com/inaemu/inaemu/emu/topo"
)

// tenG is a 10G link with 1 µs of latency.
func tenG() topo.LinkParams { return topo.LinkParams{Rate: 10e9, Latency: time.Microsecond} }

// runOK runs cfg and requires every job to end exact.
func runOK(t *testing.T, cfg job.Config) *job.Result {
	t.Helper()
	res, err := job.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact, "mismatch %+v", res.Mismatch)
	for _, j := range res.Jobs {
		require.True(t, j.Exact, "job %s", j.Name)
	}
	return res
}

// startJob sets a run up and starts its jobs.
func startJob(t testing.TB, cfg job.Config) *job.Session {
	t.Helper()
	u, err := job.NewSession(cfg)
	require.NoError(t, err)
	for _, r := range u.Jobs {
		require.NoError(t, r.Alg.Start())
		r.Started = true
	}
	return u
}

// Every registered mode says what it does: --help's mode list is made
// from the registry (job.ModeHelp), so a mode without a Doc would show
// there as a bare name.
func TestEveryModeHasADoc(t *testing.T) {
	names := job.AlgorithmNames()
	require.Len(t, names, 10, "netreduce, ring, wa, verbs, traffic, fr, pn, pr, ta, hier")
	for _, n := range names {
		require.NotEmpty(t, job.Lookup(job.Mode(n)).Doc, n)
	}
}
