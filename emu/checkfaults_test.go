package emu_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// TestCheckerAcceptsInjectedFaults: the emulator's own captures conform
// when the transport did (the run is exact), whatever its faults did on
// the way: corrupted frames are injected, not ICRC violations; reordering
// by netem reorder (with or without delay) and by delay jitter is put
// back by the frames' extra-delay annotations. Before those annotations
// the delay run below gave 2932 violations and the reorder run 598.
func TestCheckerAcceptsInjectedFaults(t *testing.T) {
	for _, c := range []struct {
		name, yaml string
		kinds      []string
	}{
		{"demo", "workers: 8\ntensor: 1MiB\nloss: 0.02%\nduplicate: 0.05%\ncorrupt: 0.02%\nseed: 42\n", []string{"corrupt", "duplicate", "loss"}},
		{"reorder", "workers: 4\ntensor: 1MiB\nreorder: 5%\nseed: 1\n", []string{"reorder", "hold"}},
		{"jitter", "workers: 4\ntensor: 1MiB\nnetem: delay 5us 2us\nseed: 1\n", []string{"delay"}},
		{"ring-reorder-gap", "workers: 6\nmode: ring\ntensor: 1MiB\nreorder: 10% gap 3\nseed: 2\n", []string{"reorder"}},
		{"everything", "workers: 5\ntensor: 512KiB\nnetem: loss 0.5% duplicate 1% corrupt 0.2% delay 3us 2us reorder 3% gap 2\nseed: 3\n", []string{"loss", "duplicate", "corrupt", "delay", "reorder"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			b, _ := scenarioCapture(t, c.yaml)
			rd, err := pcapio.NewReader(c.name, bytes.NewReader(b))
			require.NoError(t, err)
			recs, names, err := rd.All()
			require.NoError(t, err)
			rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
			for _, v := range rep.Violations[:min(len(rep.Violations), 5)] {
				t.Log(v)
			}
			assert.True(t, rep.Conforms, "%d violations", len(rep.Violations))
			for _, k := range c.kinds {
				assert.Positive(t, rep.InjectedKinds[k], "kind %s", k)
			}
			assert.Positive(t, rep.RetransLatency.Count+rep.AggChecked)
		})
	}
}
