package commmodel_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/commmodel"
)

// The shipped networks carry torchvision's published parameter counts
// (AlexNet 61,100,840; VGG-16 138,357,544; ResNet-50 25,557,032) as FP32
// gradient bytes, and Table 7's mean compute per iteration (iteration
// minus communication, averaged over its two schemes: 13.54, 73.55 and
// 65.14 ms at batch 32), backward twice forward.
func TestBuiltinModels(t *testing.T) {
	for name, want := range map[string]struct {
		params  int64
		compute float64
	}{"alexnet": {61100840, 13.54e-3}, "vgg16": {138357544, 73.55e-3}, "resnet50": {25557032, 65.14e-3}} {
		m, ok := commmodel.Builtin(name)
		require.True(t, ok, name)
		assert.Equal(t, 4*want.params, m.Bytes(), name)
		assert.InDelta(t, want.compute, m.Compute(), 2e-6, name)
		var f, b float64
		for _, l := range m.Layers {
			f, b = f+l.Forward, b+l.Backward
		}
		assert.InDelta(t, 2*f, b, 1e-6, name)
	}
	_, ok := commmodel.Builtin("lenet")
	assert.False(t, ok)
}

func model(t *testing.T, csv string) commmodel.Model {
	t.Helper()
	m, err := commmodel.ReadModel("m.csv", strings.NewReader(csv))
	require.NoError(t, err)
	return m
}

// Buckets, exposure and throughput against a network worked by hand:
// three layers of 30, 50 and 40 bytes (forward 1, 2, 3 ms; backward 2, 4,
// 6 ms), each all-reduce taking a fixed 5 ms plus 0.1 ms a byte (PN with
// n = 1, α = 5 ms, B = 10 kB/s: Eq. (3) is α + M/B).
func TestTrainStepWorked(t *testing.T) {
	m := model(t, "layer,bytes,forward_ms,backward_ms\na,30,1,2\nb,50,2,4\nc,40,3,6\n")
	p := commmodel.Params{GPUs: 4, PerHost: 1, Alpha: 5e-3, BIntra: 1e4, BInter: 1e4, TAForm: commmodel.Closed}
	ms := func(s float64) float64 { return s * 1e3 }

	// One bucket of 120 B: 5 + 12 = 17 ms after 18 ms of compute.
	st := commmodel.TrainStep(m, commmodel.PN, p, 32, 0, false)
	assert.Equal(t, 1, st.Buckets)
	assert.InDelta(t, 18, ms(st.Compute), 1e-9)
	assert.InDelta(t, 17, ms(st.Comm), 1e-9)
	assert.InDelta(t, 35, ms(st.Iteration), 1e-9)
	assert.InDelta(t, 32/0.035, st.Images, 1e-6)

	// Fusion 90 B, in backward order: c+b (90 B) then a (30 B): 14 + 8 ms.
	st = commmodel.TrainStep(m, commmodel.PN, p, 32, 90, false)
	assert.Equal(t, 2, st.Buckets)
	assert.InDelta(t, 22, ms(st.Comm), 1e-9)
	assert.InDelta(t, 22, ms(st.Exposed), 1e-9)

	// With overlap: backward starts at 6 ms; c and b are done at 6+6+4 =
	// 16 ms, their bucket runs 16..30; a is done at 18 ms, its bucket
	// runs 30..38; the backward pass ends at 18: 20 ms exposed.
	st = commmodel.TrainStep(m, commmodel.PN, p, 32, 90, true)
	assert.InDelta(t, 20, ms(st.Exposed), 1e-9)
	assert.InDelta(t, 38, ms(st.Iteration), 1e-9)

	// Fusion smaller than every layer: one bucket each, 9 + 10 + 8 ms;
	// with overlap c runs 12..21, b 21..31, a 31..39: 21 ms exposed.
	st = commmodel.TrainStep(m, commmodel.PN, p, 32, 10, true)
	assert.Equal(t, 3, st.Buckets)
	assert.InDelta(t, 27, ms(st.Comm), 1e-9)
	assert.InDelta(t, 21, ms(st.Exposed), 1e-9)
}

// Table 7 (four machines, one GPU each, NCCL ring against NetReduce):
// with no α the communication ratio of the two is exactly 2(n-1)/n = 1.5
// for every network, whatever the fusion.
func TestTrainTable7Ratio(t *testing.T) {
	p := commmodel.Params{GPUs: 4, PerHost: 1, BIntra: 50e9, BInter: 7e9, TAForm: commmodel.Closed}
	for _, name := range commmodel.BuiltinModels {
		m, _ := commmodel.Builtin(name)
		for _, fusion := range []int64{0, 1 << 20, 64 << 20} {
			fr := commmodel.TrainStep(m, commmodel.FR, p, 32, fusion, false)
			pn := commmodel.TrainStep(m, commmodel.PN, p, 32, fusion, false)
			assert.InDelta(t, 1.5, fr.Comm/pn.Comm, 1e-9, "%s fusion %d", name, fusion)
		}
	}
}

func TestReadModelErrors(t *testing.T) {
	for csv, want := range map[string]string{
		"":                                     "m.csv: empty: want the header layer,bytes,forward_ms,backward_ms",
		"layer,bytes\n":                        `m.csv: line 1: header "layer,bytes": want layer,bytes,forward_ms,backward_ms`,
		"layer,bytes,forward_ms,backward_ms\n": "m.csv: no layer with gradient bytes",
		"layer,bytes,forward_ms,backward_ms\na,-1,1,1\n":  `m.csv: line 2: bytes "-1": want a whole number of 0 or more`,
		"layer,bytes,forward_ms,backward_ms\na,1.5,1,1\n": `m.csv: line 2: bytes "1.5": want a whole number of 0 or more`,
		"layer,bytes,forward_ms,backward_ms\na,1,x,1\n":   `m.csv: line 2: forward_ms "x": want milliseconds of 0 or more`,
		"layer,bytes,forward_ms,backward_ms\na,1,1,NaN\n": `m.csv: line 2: backward_ms "NaN": want milliseconds of 0 or more`,
		"layer,bytes,forward_ms,backward_ms\na,1,1\n":     "m.csv: record on line 2: wrong number of fields",
		"layer,bytes,forward_ms,backward_ms\na,0,1,1\n":   "m.csv: no layer with gradient bytes",
	} {
		_, err := commmodel.ReadModel("m.csv", strings.NewReader(csv))
		assert.EqualError(t, err, want, "%q", csv)
	}
	// Comments and a layer without parameters (a pooling layer) are fine.
	m := model(t, "# from torchvision\nlayer,bytes,forward_ms,backward_ms\npool,0,0.5,1\nfc,8,0,0\n")
	assert.Len(t, m.Layers, 2)
	assert.Equal(t, int64(8), m.Bytes())
}
