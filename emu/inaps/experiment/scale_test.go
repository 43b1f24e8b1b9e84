package experiment

import (
	"os"
	"testing"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/train"
)

// TestPaperScale runs ESA's 8 × 8 DNN A setting (opt-in: INAEMU_SCALE=1).
func TestPaperScale(t *testing.T) {
	if os.Getenv("INAEMU_SCALE") == "" {
		t.Skip("SKIP: the 8 × 8 DNN A run is opt-in (INAEMU_SCALE=1)")
	}
	a, err := train.LoadModel("A")
	if err != nil {
		t.Fatal(err)
	}
	pol, _ := inaps.ParsePolicy(os.Getenv("INAEMU_POLICY"))
	var jobs []JobSpec
	for range 8 {
		jobs = append(jobs, JobSpec{"A", a, 8})
	}
	r, err := Run(Config{Policy: pol, Jobs: jobs, Seed: 1, StartSpread: time.Millisecond, Jitter: 300 * time.Microsecond, Order: train.ESA})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: exact %v jct %v util %.3f wall %v virtual %v failures %v\nswitch %+v\nps %+v\nworkers %+v", pol, r.Exact, r.MeanJCT, r.MeanUtilisation, r.Wall, r.Virtual, r.Failures, r.Switch, r.PS, r.Workers)
}
