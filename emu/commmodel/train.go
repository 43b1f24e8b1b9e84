package commmodel

import (
	"embed"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The training-step model: a network's gradient bytes and compute time
// per layer (a CSV per model), an all-reduce scheme's time for each
// fused bucket of gradients by Eval, and
//
//	iteration = compute + communication not hidden behind the backward pass
//	images/s per GPU = batch / iteration
//
// With no overlap (the default) every bucket's all-reduce follows the
// backward pass, as NetReduce's Table 7 shows (compute is the same under
// every scheme there, and iteration = compute + communication); with
// overlap a bucket starts once the backward pass has produced its last
// gradient and the previous bucket is done (wait-free backpropagation).

// Layer is one row of a model's CSV: a layer (or block) with its
// parameters' gradient bytes and its forward and backward times.
type Layer struct {
	Name              string
	Bytes             int64
	Forward, Backward float64 // seconds per iteration
}

// Model is a network in forward order.
type Model struct {
	Name   string
	Layers []Layer
}

// Bytes is the model's gradient bytes.
func (m Model) Bytes() int64 {
	var b int64
	for _, l := range m.Layers {
		b += l.Bytes
	}
	return b
}

// Compute is the forward and backward time of one iteration.
func (m Model) Compute() float64 {
	var t float64
	for _, l := range m.Layers {
		t += l.Forward + l.Backward
	}
	return t
}

//go:embed models/*.csv
var builtin embed.FS

// BuiltinModels are the models shipped with inaemu (models/NAME.csv).
var BuiltinModels = []string{"alexnet", "vgg16", "resnet50"}

// Builtin is a model shipped with inaemu.
func Builtin(name string) (Model, bool) {
	if !slices.Contains(BuiltinModels, name) {
		return Model{}, false
	}
	f, err := builtin.Open("models/" + name + ".csv")
	if err != nil {
		panic(err) // embedded
	}
	defer f.Close()
	m, err := ReadModel(name, f)
	if err != nil {
		panic(err) // the shipped files are tested
	}
	return m, true
}

// modelHeader is a model CSV's first line.
var modelHeader = []string{"layer", "bytes", "forward_ms", "backward_ms"}

// ReadModel reads a model CSV: the header layer,bytes,forward_ms,backward_ms
// and one row per layer in forward order (bytes a whole number >= 0, times
// in milliseconds >= 0). An error names the line.
func ReadModel(name string, r io.Reader) (Model, error) {
	cr := csv.NewReader(r)
	cr.Comment = '#'
	m := Model{Name: name}
	head, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return m, fmt.Errorf("%s: empty: want the header %s", name, strings.Join(modelHeader, ","))
		}
		return m, fmt.Errorf("%s: %v", name, err)
	}
	if !slices.Equal(head, modelHeader) {
		return m, fmt.Errorf("%s: line 1: header %q: want %s", name, strings.Join(head, ","), strings.Join(modelHeader, ","))
	}
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return m, fmt.Errorf("%s: %v", name, err)
		}
		line, _ := cr.FieldPos(0)
		b, err := strconv.ParseInt(rec[1], 10, 64)
		if err != nil || b < 0 {
			return m, fmt.Errorf("%s: line %d: bytes %q: want a whole number of 0 or more", name, line, rec[1])
		}
		var t [2]float64
		for i, s := range rec[2:4] {
			t[i], err = strconv.ParseFloat(s, 64)
			if err != nil || !(t[i] >= 0) || math.IsInf(t[i], 0) {
				return m, fmt.Errorf("%s: line %d: %s %q: want milliseconds of 0 or more", name, line, modelHeader[2+i], s)
			}
		}
		m.Layers = append(m.Layers, Layer{Name: rec[0], Bytes: b, Forward: t[0] / 1e3, Backward: t[1] / 1e3})
	}
	if len(m.Layers) == 0 || m.Bytes() == 0 {
		return m, fmt.Errorf("%s: no layer with gradient bytes", name)
	}
	return m, nil
}

// Step is one training iteration under a scheme (seconds).
type Step struct {
	Scheme    Scheme
	Buckets   int     // all-reduces per iteration
	Compute   float64 // forward + backward
	Comm      float64 // all the buckets' all-reduce times
	Exposed   float64 // communication not hidden behind the backward pass
	Iteration float64 // Compute + Exposed
	Images    float64 // images per second per GPU: batch / Iteration
}

// TrainStep is one iteration of m with batch images per GPU: its gradients
// fused, in the order the backward pass produces them, into buckets of at
// most fusion bytes (a layer larger than that is a bucket of its own; 0:
// one bucket), each all-reduced by scheme s under p (p.Size is ignored).
func TrainStep(m Model, s Scheme, p Params, batch int, fusion int64, overlap bool) Step {
	st := Step{Scheme: s, Compute: m.Compute()}
	var forward float64
	for _, l := range m.Layers {
		forward += l.Forward
	}
	// Walk the backward pass: t is when the current layer's backward ends,
	// end when the network is free of the previous bucket.
	t, end := forward, 0.0
	var bucket int64
	flush := func() {
		if bucket == 0 {
			return
		}
		q := p
		q.Size = float64(bucket)
		d := Eval(s, q).Total
		st.Buckets++
		st.Comm += d
		if overlap {
			end = max(end, t) + d
		}
		bucket = 0
	}
	for i := len(m.Layers) - 1; i >= 0; i-- {
		l := m.Layers[i]
		if fusion > 0 && bucket > 0 && bucket+l.Bytes > fusion {
			flush()
		}
		t += l.Backward
		bucket += l.Bytes
	}
	flush()
	if overlap {
		st.Exposed = max(0, end-t)
	} else {
		st.Exposed = st.Comm
	}
	st.Iteration = st.Compute + st.Exposed
	st.Images = float64(batch) / st.Iteration
	return st
}
