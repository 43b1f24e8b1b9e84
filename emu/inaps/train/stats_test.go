package train_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/internal/vclock"
)

// By hand: two workers, 1.25 MB of payload each (10^7 bits: 0.1 ms at
// 100 Gb/s).
//
//	it 0: start min(0, 0) … end max(900, 1000) µs: JCT 1000 µs;
//	      comm min(10, 40) … max(500, 400) µs = 490 µs:
//	      utilisation 100/490 = 0.20408, over the JCT 100/1000 = 0.1
//	it 1: start 900 … end 2000 µs: JCT 1100 µs; comm 1000 … 1400 µs = 400 µs:
//	      0.25 and 100/1100 = 0.090909
//
// A third iteration only one worker ended is left out.
func TestStatsOf(t *testing.T) {
	w0 := []train.IterationTimes{
		{Start: 0, FirstPush: 10 * us, LastDone: 500 * us, End: 900 * us},
		{Start: 900 * us, FirstPush: 1000 * us, LastDone: 1300 * us, End: 1800 * us},
		{Start: 1800 * us, FirstPush: 1900 * us, LastDone: 2000 * us, End: 2500 * us},
	}
	w1 := []train.IterationTimes{
		{Start: 0, FirstPush: 40 * us, LastDone: 400 * us, End: 1000 * us},
		{Start: 1000 * us, FirstPush: 1100 * us, LastDone: 1400 * us, End: 2000 * us},
	}
	s := train.StatsOf([][]train.IterationTimes{w0, w1}, 1_250_000, 100e9)
	require.Len(t, s.Iterations, 2)
	require.Equal(t, 1000*us, s.Iterations[0].JCT)
	require.Equal(t, 490*us, s.Iterations[0].Comm)
	require.InDelta(t, 0.20408, s.Iterations[0].Utilisation, 1e-5)
	require.InDelta(t, 0.1, s.Iterations[0].UtilisationJCT, 1e-12)
	require.Equal(t, 1100*us, s.Iterations[1].JCT)
	require.Equal(t, 400*us, s.Iterations[1].Comm)
	require.InDelta(t, 0.25, s.Iterations[1].Utilisation, 1e-12)
	require.InDelta(t, 0.090909, s.Iterations[1].UtilisationJCT, 1e-6)
	require.Equal(t, 1050*us, s.MeanJCT)
	require.InDelta(t, (0.20408+0.25)/2, s.MeanUtilisation, 1e-5)
	require.InDelta(t, (0.1+0.090909)/2, s.MeanUtilisationJCT, 1e-6)

	require.Empty(t, train.StatsOf(nil, 1, 0).Iterations)
}

// A job of two DNN A workers on the loop: the JCT counts the later
// worker's jitter, not the job's start offset (400 µs). Worker 0 pushes at
// 0 µs jitter, worker 1 at 100 µs; each result is in 100 µs after its push;
// each worker ends 100 + 640 µs after its last push, so the job's
// iteration runs 400 … 400 + 100 + 100 + 640 µs.
func TestJobStatsOverLoops(t *testing.T) {
	m := model(t, "A")
	var loops []*train.Loop
	clk := vclock.New()
	for _, j := range []time.Duration{0, 100 * us} {
		h := &fakeHost{clk: clk, delay: 100 * us}
		h.loop = train.NewLoop(train.LoopConfig{Model: m, Order: train.ESA, Start: 400 * us, Draw: jitters(j)}, clk, h)
		loops = append(loops, h.loop)
	}
	clk.Run(time.Hour)
	s := train.JobStats(loops, m.Bytes(), 0)
	require.Len(t, s.Iterations, 1)
	require.Equal(t, 840*us, s.Iterations[0].JCT)
	require.Equal(t, 200*us, s.Iterations[0].Comm)
	// 16 MB is 1.28 ms at 100 Gb/s: the instant fake transport beats it
	require.InDelta(t, 1.28/0.2, s.Iterations[0].Utilisation, 1e-9)
	require.InDelta(t, 1.28/0.84, s.Iterations[0].UtilisationJCT, 1e-9)
}
