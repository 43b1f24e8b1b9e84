package experiment

import (
	"strings"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/train"
)

func smallModel(t testing.TB, numel int) *train.Model {
	csv := "layer_index, numel, forward_pass_ns, backward_pass_ns, partitions, comm_comp\n" +
		"0, " + itoa(numel) + ", 20000, 0, 2, 2\n1, " + itoa(numel) + ", 20000, 0, 2, 2\n"
	m, err := train.ParseModel("small", strings.NewReader(csv))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func itoa(n int) string {
	s := ""
	for n > 0 || s == "" {
		s = string(rune('0'+n%10)) + s
		n /= 10
	}
	return s
}

func TestSmoke(t *testing.T) {
	for _, pol := range []inaps.Policy{inaps.Static, inaps.FCFS, inaps.ESA, inaps.Straw1, inaps.Straw2} {
		m := smallModel(t, 62*2000)
		cfg := Config{Policy: pol, Jobs: []JobSpec{{"a", m, 4}, {"b", m, 4}}, Aggregators: 300, Seed: 1, StartSpread: time.Millisecond, Jitter: 300 * time.Microsecond, Iterations: 2}
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: exact %v jct %v util %.3f wall %v failures %v\nswitch %+v\nps %+v\nworkers %+v", pol, r.Exact, r.MeanJCT, r.MeanUtilisation, r.Wall, r.Failures, r.Switch, r.PS, r.Workers)
	}
}

func TestFloatsOverflowToThePS(t *testing.T) {
	for _, pol := range []inaps.Policy{inaps.FCFS, inaps.ESA, inaps.Straw2} {
		m := smallModel(t, 62*2000)
		cfg := Config{Policy: pol, Jobs: []JobSpec{{"a", m, 4}, {"b", m, 8}}, Aggregators: 300, Seed: 5, StartSpread: time.Millisecond, Jitter: 300 * time.Microsecond, FloatScale: 1 << 24}
		r, err := Run(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Exact {
			t.Fatalf("%s: %v", pol, r.Failures)
		}
		if r.Switch.Overflows == 0 {
			t.Fatalf("%s: no fragment overflowed: the float path went untried", pol)
		}
		t.Logf("%s: %d overflows, %d checked, jct %v", pol, r.Switch.Overflows, r.Jobs[0].Results+r.Jobs[1].Results, r.MeanJCT)
	}
}
