package train_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/internal/vclock"
)

const us = time.Microsecond

type push struct {
	at         time.Duration
	iter, pos  int
	layer, idx int
	prio       uint8
}

// fakeHost completes every partition a fixed delay after its push.
type fakeHost struct {
	clk    *vclock.Clock
	delay  time.Duration
	loop   *train.Loop
	pushes []push
}

func (h *fakeHost) Push(iter int, p train.Partition, prio uint8) {
	h.pushes = append(h.pushes, push{h.clk.Now(), iter, p.Pos, p.Layer, p.Index, prio})
	h.clk.AfterFunc(h.delay, func() { h.loop.PartitionDone(iter, p.Pos) })
}

// jitters draws the given jitters in turn, cycling.
func jitters(js ...time.Duration) func() time.Duration {
	i := 0
	return func() time.Duration {
		j := js[i%len(js)]
		i++
		return j
	}
}

func run(t *testing.T, cfg train.LoopConfig, delay time.Duration) (*train.Loop, *fakeHost) {
	t.Helper()
	clk := vclock.New()
	h := &fakeHost{clk: clk, delay: delay}
	h.loop = train.NewLoop(cfg, clk, h)
	clk.Run(time.Hour)
	require.True(t, h.loop.Done())
	return h.loop, h
}

func model(t *testing.T, spec string) *train.Model {
	t.Helper()
	m, err := train.LoadModel(spec)
	require.NoError(t, err)
	return m
}

// DNN A in ESA's order with no jitter: every push at the job's start, in
// order, with the priorities of the remaining comm + comp (100 Gb/s):
//
//	L2P1: 16 MB → 1.28 ms + 0.64 ms = 1.92 ms; 1/1.92 × 2/2 × 2 × 32 = 33.3 → 33
//	L1P1: 12 MB → 0.96 ms + 0.64 ms = 1.60 ms; 1/1.60 × 2/1 × 2 × 32 = 80
//	L1P2:  8 MB → 0.64 ms + 0.64 ms = 1.28 ms; 1/1.28 × 2/1 × 2 × 32 = 100
//	L2P2:  4 MB → 0.32 ms + 0.64 ms = 0.96 ms; 1/0.96 × 2/2 × 2 × 32 = 66.7 → 67
//
// Every result is in at 150 µs: layer 1 computes 150–470 µs and layer 2,
// its results long in, waits for it: 470–790 µs.
func TestLoopESANoJitter(t *testing.T) {
	l, h := run(t, train.LoopConfig{Model: model(t, "A"), Order: train.ESA, Start: 50 * us}, 100*us)
	require.Equal(t, []push{
		{50 * us, 0, 0, 2, 1, 33},
		{50 * us, 0, 1, 1, 1, 80},
		{50 * us, 0, 2, 1, 2, 100},
		{50 * us, 0, 3, 2, 2, 67},
	}, h.pushes)
	require.Equal(t, []train.IterationTimes{{Start: 50 * us, FirstPush: 50 * us, LastDone: 150 * us, End: 790 * us}}, l.Iterations())
}

// Pushes keep the send order: a partition whose jitter has passed waits
// for the one before it. L2P2, pushed at 500 µs while layer 1 computes
// (300–620 µs, 120 µs left), has T = 0.32 + 0.12 + 0.32 = 0.76 ms:
// 1/0.76 × 1 × 2 × 32 = 84.2 → 84. Layer 2's results are in at 600 µs but
// its compute waits for layer 1's end: 620–940 µs.
func TestLoopJitterKeepsOrderAndLayer2WaitsForLayer1(t *testing.T) {
	l, h := run(t, train.LoopConfig{Model: model(t, "dnnA"), Order: train.ESA, Draw: jitters(0, 200*us, 50*us, 500*us)}, 100*us)
	require.Equal(t, []push{
		{0, 0, 0, 2, 1, 33},
		{200 * us, 0, 1, 1, 1, 80},
		{200 * us, 0, 2, 1, 2, 100}, // ready at 50 µs, after L1P1
		{500 * us, 0, 3, 2, 2, 84},
	}, h.pushes)
	require.Equal(t, []train.IterationTimes{{Start: 0, FirstPush: 0, LastDone: 600 * us, End: 940 * us}}, l.Iterations())
}

// Layer 2's compute waits for its last partition: L2P2 pushed at 800 µs
// (layer 1 computed 100–420 µs; T = 0.32 + 0.32 = 0.64 ms, 1/0.64 × 2 × 32
// = 100), done at 890 µs, computed 890–1210 µs. A jitter before the
// first push counts in the iteration, whose start stays the job's.
func TestLoopLayer2WaitsForItsResults(t *testing.T) {
	l, h := run(t, train.LoopConfig{Model: model(t, "A"), Order: train.ESA, Start: 0, Draw: jitters(10*us, 0, 0, 800*us)}, 90*us)
	require.Equal(t, []push{
		{10 * us, 0, 0, 2, 1, 33},
		{10 * us, 0, 1, 1, 1, 80},
		{10 * us, 0, 2, 1, 2, 100},
		{800 * us, 0, 3, 2, 2, 100},
	}, h.pushes)
	require.Equal(t, []train.IterationTimes{{Start: 0, FirstPush: 10 * us, LastDone: 890 * us, End: 1210 * us}}, l.Iterations())
}

// dnn_benchmark's order and backward pass: from the iteration's start the
// backward computes run last to first (layer 2 0–20 µs, layer 1 20–50 µs),
// each layer's push waits for its own plus the jitter (5 µs). Comm/Comp is
// unset: 1 in iteration 0, then measured, (65−25)/250 = 0.16. T_j counts
// the backward compute still to run. By hand, scale 8, 62 values a layer
// (248 B: 19.84 ns at 100 Gb/s):
//
//	it 0, L2 at 25 µs: 496 B 39.68 ns + 25 µs (layer 1's backward) + 200 µs
//	    = 0.22503968 ms; 1/0.22503968 × 2/2 × 1 × 8 = 35.5 → 36
//	it 0, L1 at 55 µs: 19.84 ns + 200 µs = 0.20001984 ms; × 2/1 × 1 × 8 = 80.0 → 80
//	it 1, same T_j, × 0.16: 5.69 → 6 and 12.8 → 13
//
// Iteration 0: results at 35 and 65 µs, forward 65–165–265 µs; iteration 1
// starts at its end.
func TestLoopReverseBackwardAndMeasuredCommComp(t *testing.T) {
	m, err := train.ParseModel("m", strings.NewReader("layer_index,numel,forward_pass_ns,backward_pass_ns\n0,62,100000,30000\n1,62,100000,20000\n"))
	require.NoError(t, err)
	l, h := run(t, train.LoopConfig{Model: m, Order: train.Reverse, Iterations: 2, Draw: jitters(5 * us), Scale: 8}, 10*us)
	require.Equal(t, []push{
		{25 * us, 0, 0, 2, 1, 36},
		{55 * us, 0, 1, 1, 1, 80},
		{290 * us, 1, 0, 2, 1, 6},
		{320 * us, 1, 1, 1, 1, 13},
	}, h.pushes)
	require.Equal(t, []train.IterationTimes{
		{Start: 0, FirstPush: 25 * us, LastDone: 65 * us, End: 265 * us},
		{Start: 265 * us, FirstPush: 290 * us, LastDone: 330 * us, End: 530 * us},
	}, l.Iterations())
}

// ESA's fallback T_j, the service attained since the job's start (1 ms):
// at 1.1 ms it is 0.1 ms (scale 1: L2 1/0.1 × 1 × 2 = 20, L1 40); iteration
// 1 starts at 1.84 ms and pushes at 1.94 ms, T_j 0.94 ms: 2.13 → 2 and
// 4.26 → 4.
func TestLoopAttainedService(t *testing.T) {
	_, h := run(t, train.LoopConfig{Model: model(t, "A"), Order: train.ESA, Iterations: 2, Start: time.Millisecond,
		Draw: jitters(100 * us), Scale: 1, Estimator: train.AttainedService}, 100*us)
	var prios []uint8
	for _, p := range h.pushes {
		prios = append(prios, p.prio)
	}
	require.Equal(t, []uint8{20, 40, 40, 20, 2, 4, 4, 2}, prios)
	require.Equal(t, 1940*us, h.pushes[4].at)
}

// Iteration i+1 starts when iteration i's last compute ends; the jitter
// is drawn once a partition an iteration; Done only after the last.
func TestLoopChaining(t *testing.T) {
	draws := 0
	clk := vclock.New()
	h := &fakeHost{clk: clk, delay: 100 * us}
	h.loop = train.NewLoop(train.LoopConfig{Model: model(t, "B"), Order: train.ESA, Iterations: 3, Start: 200 * us,
		Draw: func() time.Duration { draws++; return time.Duration(draws) * us }}, clk, h)
	clk.Run(200*us - 1)
	require.Zero(t, draws, "nothing before the job's start")
	for clk.Step() {
		if len(h.loop.Iterations()) < 3 {
			require.False(t, h.loop.Done())
		}
	}
	require.True(t, h.loop.Done())
	its := h.loop.Iterations()
	require.Len(t, its, 3)
	require.Equal(t, 12, draws)
	require.Equal(t, 200*us, its[0].Start)
	for i := 1; i < 3; i++ {
		require.Equal(t, its[i-1].End, its[i].Start)
	}
	for i, it := range its {
		// jitters 4i+1 … 4i+4 µs (L2P1, L1P1, L1P2, L2P2), each done
		// 100 µs after its push: layer 1 computes from start + 4i+3 +
		// 100 µs, layer 2 (done 1 µs later) right after it, 640 µs each.
		require.Equal(t, it.Start+time.Duration(4*i+1)*us, it.FirstPush)
		require.Equal(t, it.Start+time.Duration(4*i+4)*us+100*us, it.LastDone)
		require.Equal(t, it.Start+time.Duration(4*i+3)*us+100*us+1280*us, it.End)
	}
}

// Repeated and stale PartitionDone calls are ignored; one for a partition
// not yet pushed panics.
func TestPartitionDoneMisuse(t *testing.T) {
	clk := vclock.New()
	h := &fakeHost{clk: clk, delay: 10 * us}
	h.loop = train.NewLoop(train.LoopConfig{Model: model(t, "A"), Order: train.ESA, Iterations: 2, Draw: jitters(0, 0, 0, 50*us)}, clk, h)
	require.Panics(t, func() { h.loop.PartitionDone(0, 0) }, "before the start")
	clk.Run(5 * us)
	require.Len(t, h.pushes, 3)
	require.Panics(t, func() { h.loop.PartitionDone(0, 3) })
	require.Panics(t, func() { h.loop.PartitionDone(1, 0) })
	require.Panics(t, func() { h.loop.PartitionDone(0, -1) })
	clk.Run(time.Hour)
	require.True(t, h.loop.Done())
	before := h.loop.Iterations()
	h.loop.PartitionDone(0, 0)
	h.loop.PartitionDone(1, 3)
	require.Equal(t, before, h.loop.Iterations())
}

// A start already past begins at once.
func TestLoopStartInThePast(t *testing.T) {
	clk := vclock.New()
	clk.Advance(time.Millisecond)
	h := &fakeHost{clk: clk, delay: 10 * us}
	h.loop = train.NewLoop(train.LoopConfig{Model: model(t, "A"), Start: 300 * us}, clk, h)
	clk.Run(time.Hour)
	require.Equal(t, time.Millisecond, h.loop.Iterations()[0].Start)
}
