package fluid_test

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/nic/dcqcn"
	"github.com/inaemu/inaemu/emu/nic/dcqcn/fluid"
)

// TestIncastSteadyState is the paper's §5 setting: N flows into one 40 Gb/s
// port marking with Kmin 5 KB, Kmax 200 KB, Pmax 1%. The flows share the
// port fairly (each C/N, the queue neither growing nor draining), the queue
// stands between Kmin and Kmax, and it stands higher with more flows (each
// must see more marks to hold a lower rate). With 2 flows it is still to
// within a byte at about 20 KB; with 16 it oscillates near Kmax.
func TestIncastSteadyState(t *testing.T) {
	const c = 40e9
	p := dcqcn.DefaultParams(c)
	delay := 4 * time.Microsecond
	var queues []float64
	for _, n := range []int{2, 16} {
		r, err := fluid.Run(fluid.Config{N: n, C: c, Params: p, RED: fluid.PaperRED, Delay: delay})
		require.NoError(t, err)
		assert.InEpsilon(t, c/float64(n), r.RateMean, 0.01, "N=%d: per-flow rate C/N", n)
		assert.Greater(t, r.QueueMin, fluid.PaperRED.Kmin, "N=%d: the queue never drains below Kmin", n)
		assert.LessOrEqual(t, r.QueueMax, fluid.PaperRED.Kmax*1.05, "N=%d: the queue stays about Kmax or under", n)
		t.Logf("N=%d: queue %.0f B (%.0f..%.0f), rate %.3f Gb/s, alpha %.3f", n, r.QueueMean, r.QueueMin, r.QueueMax, r.RateMean/1e9, r.Alpha)
		queues = append(queues, r.QueueMean)
	}
	assert.Greater(t, queues[1], 4*queues[0], "16 flows hold a longer queue than 2")

	// SteadyState is the same run's means: only its rate is an
	// independent claim (C/N), the queue is Run's own.
	_, rate, err := fluid.SteadyState(2, c, p, fluid.PaperRED, delay)
	require.NoError(t, err)
	assert.InEpsilon(t, c/2, rate, 0.01)
}

// TestEquilibriumMarking: in the steady state with 2 flows the queue is
// still, so the marking it implies must hold α where the α equation
// balances, α = 1 − (1−p)^(τ'·Rc): computed here from the queue alone.
func TestEquilibriumMarking(t *testing.T) {
	const c = 40e9
	p := dcqcn.DefaultParams(c)
	r, err := fluid.Run(fluid.Config{N: 2, C: c, Params: p, RED: fluid.PaperRED, Delay: 4 * time.Microsecond})
	require.NoError(t, err)
	red := fluid.PaperRED
	pm := (r.QueueMean - red.Kmin) / (red.Kmax - red.Kmin) * red.Pmax
	pkts := r.RateMean / 8 / 1000 * p.K.Seconds()
	assert.InEpsilon(t, 1-math.Pow(1-pm, pkts), r.Alpha, 1e-3)
}

func TestRunRefusesNonsense(t *testing.T) {
	p := dcqcn.DefaultParams(40e9)
	for _, c := range []fluid.Config{
		{N: 0, C: 40e9, Params: p, RED: fluid.PaperRED},
		{N: 2, C: 0, Params: p, RED: fluid.PaperRED},
		{N: 2, C: 40e9, Params: p, RED: fluid.RED{Kmin: 10, Kmax: 5, Pmax: 0.1}},
		{N: 2, C: 40e9, Params: p, RED: fluid.PaperRED, Delay: -1},
		{N: 2, C: 40e9, Params: dcqcn.Params{}, RED: fluid.PaperRED},
	} {
		_, err := fluid.Run(c)
		assert.Error(t, err)
	}
}
