package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/faults"
)

// These tests hold an experiment's capture to the capture checker: the
// inaps-sum and inaps-partial rules read only the wire, so they judge the
// switch program, the PS and the channel apart from the run's own oracle.

// captureModel is two layers of 12,400 values (200 fragments each) in two
// partitions: small, and with 40 aggregators for two jobs of three
// workers, collisions and evictions on every policy.
func captureModel(t testing.TB) *train.Model {
	const csv = "layer_index, numel, forward_pass_ns, backward_pass_ns, partitions\n" +
		"0, 12400, 10000, 0, 2\n1, 12400, 10000, 0, 2\n"
	m, err := train.ParseModel("capture", strings.NewReader(csv))
	require.NoError(t, err)
	return m
}

func captureConfig(t testing.TB, pol inaps.Policy, seed uint64) Config {
	m := captureModel(t)
	return Config{Policy: pol, Jobs: []JobSpec{{"a", m, 3}, {"b", m, 3}}, Aggregators: 40, Seed: seed,
		StartSpread: time.Millisecond, Jitter: 300 * time.Microsecond}
}

// runCaptured runs cfg with a capture and checks the capture.
func runCaptured(t *testing.T, cfg Config) (*Result, []byte, *capcheck.Report) {
	t.Helper()
	var buf bytes.Buffer
	cfg.Capture = &buf
	res, err := Run(cfg)
	require.NoError(t, err)
	fn := filepath.Join(t.TempDir(), "run.pcapng")
	require.NoError(t, os.WriteFile(fn, buf.Bytes(), 0o644))
	rep, err := capcheck.CheckFile(fn, capcheck.CheckOptions{})
	require.NoError(t, err)
	return res, buf.Bytes(), rep
}

// TestCaptureConforms: every policy's capture, clean, with loss (the
// lost frames are in the capture as ghosts, which the rules leave out) and
// with duplicates, holds every result to the sum of its gradients and
// every partial to those its bitmap names, with nothing left unchecked.
func TestCaptureConforms(t *testing.T) {
	loss, err := faults.ParseNetem("loss 1%")
	require.NoError(t, err)
	dup, err := faults.ParseNetem("duplicate 5%")
	require.NoError(t, err)
	for _, pol := range []inaps.Policy{inaps.ESA, inaps.FCFS, inaps.Static} {
		for _, c := range []struct {
			name  string
			netem faults.Netem
		}{{"clean", faults.Netem{}}, {"loss 1%", loss}, {"duplicate 5%", dup}} {
			t.Run(pol.String()+"/"+c.name, func(t *testing.T) {
				cfg := captureConfig(t, pol, 7)
				cfg.Netem = c.netem
				res, _, rep := runCaptured(t, cfg)
				require.True(t, res.Exact, "%v", res.Failures)
				t.Logf("%d frames (%d INA-PS, %d not delivered, %d injected), %d results and %d partials judged, %d unchecked; switch: %d collisions, %d preemptions, %d diverted",
					rep.Frames, rep.INAPSFrames, rep.Ghosts, rep.Injected, rep.INAPSResults, rep.INAPSPartials, rep.INAPSUnchecked,
					res.Switch.Collisions, res.Switch.Preemptions, res.Switch.Diverted)
				require.Empty(t, rep.Violations)
				require.Equal(t, rep.Frames, rep.INAPSFrames+rep.Ghosts, "every frame is INA-PS traffic")
				require.Positive(t, rep.INAPSResults)
				require.Zero(t, rep.INAPSUnchecked)
				require.Empty(t, rep.Unchecked)
				require.Empty(t, rep.AggError)
				require.Equal(t, "conforms", rep.Verdict)
				if pol != inaps.Static {
					require.Positive(t, res.Switch.Collisions, "40 aggregators for two jobs collide")
					require.Positive(t, rep.INAPSPartials)
				}
				if c.name != "clean" {
					require.Positive(t, rep.Injected)
				}
			})
		}
	}
}

// TestCaptureCatchesMutations: a switch with a known bug leaves frames
// the checker refuses, from the capture alone (TestCaptureConforms runs
// the same configurations without the bug). A reminder that frees its
// aggregator without swapping (Mutations.ReminderNoSwap) is not here: it
// returns as "held nothing" (bitmap 0, zero values), which the wire
// cannot tell from a true empty return without modelling the switch's
// aggregators; the run's own accounting (lost contributions) catches it.
func TestCaptureCatchesMutations(t *testing.T) {
	dup, err := faults.ParseNetem("duplicate 5%")
	require.NoError(t, err)
	for _, c := range []struct {
		name string
		pol  inaps.Policy
		mut  inaps.Mutations
		em   faults.Netem
		rule string
	}{
		{"retransmission re-added", inaps.ESA, inaps.Mutations{ReAddRetransmitted: true}, dup, capcheck.RuleINAPSSum},
		{"retransmission re-added", inaps.FCFS, inaps.Mutations{ReAddRetransmitted: true}, dup, capcheck.RuleINAPSSum},
		{"retransmission re-added", inaps.Static, inaps.Mutations{ReAddRetransmitted: true}, dup, capcheck.RuleINAPSSum},
		{"evicted partial loses its bitmap", inaps.ESA, inaps.Mutations{EvictLosesBitmap: true}, faults.Netem{}, capcheck.RuleINAPSPartial},
	} {
		t.Run(c.pol.String()+"/"+c.name, func(t *testing.T) {
			cfg := captureConfig(t, c.pol, 7)
			cfg.Mutations, cfg.Netem = c.mut, c.em
			res, _, rep := runCaptured(t, cfg)
			require.False(t, res.Exact, "the run's oracle sees the bug too")
			n := 0
			for _, v := range rep.Violations {
				if v.Rule == c.rule {
					n++
				}
			}
			require.Positive(t, n, "no %s violation among %v", c.rule, rep.Violations)
			require.Equal(t, "violations", rep.Verdict)
			t.Logf("%d %s violations; first: %s", n, c.rule, rep.Violations[0])
		})
	}
}

// TestCaptureIsDeterministic: a seed gives the same capture byte for
// byte; another seed another capture.
func TestCaptureIsDeterministic(t *testing.T) {
	loss, err := faults.ParseNetem("loss 1%")
	require.NoError(t, err)
	capture := func(seed uint64) []byte {
		cfg := captureConfig(t, inaps.ESA, seed)
		cfg.Netem = loss
		var buf bytes.Buffer
		cfg.Capture = &buf
		res, err := Run(cfg)
		require.NoError(t, err)
		require.True(t, res.Exact, "%v", res.Failures)
		return buf.Bytes()
	}
	a, b, c := capture(7), capture(7), capture(8)
	require.NotEmpty(t, a)
	require.True(t, bytes.Equal(a, b), "seed 7 twice: %d and %d bytes", len(a), len(b))
	require.False(t, bytes.Equal(a, c), "seeds 7 and 8")
}
