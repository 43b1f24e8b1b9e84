package capcheck_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// TestResultLostWhenTheSwitchWithholdsAResult: the emulator's NetReduce
// capture under faults (testdata/check/netreduce_faults.pcapng) owes
// nothing; with one result the switch sent before a retransmission of
// the same packet cut out of the capture (as if the switch had never
// sent it, and answered only the resend), result-lost names that
// retransmission. Not every cut is decidable (the rule waits for a later
// result to the same receiver that proves the switch handled the
// resend), so the cuts are tried in turn until one is judged.
func TestResultLostWhenTheSwitchWithholdsAResult(t *testing.T) {
	recs, emuNames := readGolden(t)
	// On the emulator's own interfaces (portN-out written where a frame
	// leaves the link, after its faults) the rule is not applied: a
	// result delayed past the capture's end is never written.
	require.Zero(t, capcheck.Check(recs, capcheck.CheckOptions{Interfaces: emuNames}).OwedJudged)
	// The same frames named as faultwire's device side (wN-swN what
	// reached the switch, swN-wN what it sent): sound here because every
	// frame of this capture's switch was written (its faults' held frames
	// are released within the run, none delayed past its end).
	names := make([]string, len(emuNames))
	for i, n := range emuNames {
		var p int
		var dir string
		_, err := fmt.Sscanf(strings.Replace(n, "-", " ", 1), "port%d %s", &p, &dir)
		require.NoError(t, err, n)
		names[i] = map[string]string{"in": fmt.Sprintf("w%d-sw%d", p, p), "out": fmt.Sprintf("sw%d-w%d", p, p)}[dir]
	}
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	require.Empty(t, rep.Violations)
	require.Positive(t, rep.OwedJudged, "the faults made senders resend packets of complete cells")

	type key struct {
		iface int
		qp    uint32
		psn   uint32
	}
	var v frames.View
	keyOf := func(r pcapio.Record) (key, bool) {
		if pcapio.IsGhost(r.Comments) || v.Parse(r.Data) != nil || v.Opcode().IsAck() {
			return key{}, false
		}
		return key{r.Info.InterfaceIndex, v.DestQP(), v.PSN()}, true
	}
	judged := 0
	for i, r := range recs {
		k, ok := keyOf(r)
		if !ok || !strings.HasPrefix(names[k.iface], "sw") {
			continue
		}
		// A result sent again later on the same link: the switch answered
		// a retransmission of it.
		again := false
		for _, later := range recs[i+1:] {
			if k2, ok := keyOf(later); ok && k2 == k {
				again = true
				break
			}
		}
		if !again {
			continue
		}
		cut := append(append([]pcapio.Record(nil), recs[:i]...), recs[i+1:]...)
		rep := capcheck.Check(cut, capcheck.CheckOptions{Interfaces: names})
		if len(rep.Violations) == 0 {
			continue
		}
		judged++
		vio := rep.Violations[0]
		require.Equal(t, capcheck.RuleResultLost, vio.Rule, "%v", rep.Violations)
		require.Equal(t, k.psn, vio.PSN, vio.Detail)
		require.Contains(t, vio.Detail, "was owed and not sent")
		require.Contains(t, vio.Detail, "the result that finally carried it left at frame")
		if judged == 3 {
			break
		}
	}
	require.Positive(t, judged, "no cut result was judged lost")
}

func readGolden(t *testing.T) ([]pcapio.Record, []string) {
	t.Helper()
	r, err := pcapio.Open("../testdata/check/netreduce_faults.pcapng")
	require.NoError(t, err)
	defer r.Close()
	recs, names, err := r.All()
	require.NoError(t, err)
	return recs, names
}

// TestResultLostKeepsCaptureOrder: result-lost reads faultwire's capture
// in its order (one loop writes both sides of the device, causally), not
// by the wall-clock timestamps: a clock stepped back an hour in the
// middle of the run (NTP) changes no verdict. Sorted by time, the step
// put the second half's frames before the first's, and the cut result of
// TestResultLostWhenTheSwitchWithholdsAResult went unjudged or the clean
// capture owed results it had sent.
func TestResultLostKeepsCaptureOrder(t *testing.T) {
	recs, emuNames := readGolden(t)
	names := make([]string, len(emuNames))
	for i, n := range emuNames {
		var p int
		var dir string
		_, err := fmt.Sscanf(strings.Replace(n, "-", " ", 1), "port%d %s", &p, &dir)
		require.NoError(t, err, n)
		names[i] = map[string]string{"in": fmt.Sprintf("w%d-sw%d", p, p), "out": fmt.Sprintf("sw%d-w%d", p, p)}[dir]
	}
	stepped := make([]pcapio.Record, len(recs))
	copy(stepped, recs)
	for i := len(stepped) / 2; i < len(stepped); i++ {
		stepped[i].Info.Timestamp = stepped[i].Info.Timestamp.Add(-time.Hour)
	}
	want := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	got := capcheck.Check(stepped, capcheck.CheckOptions{Interfaces: names})
	require.Positive(t, want.OwedJudged)
	require.Equal(t, want.OwedJudged, got.OwedJudged, "the same cells judged")
	var lost []capcheck.Violation
	for _, v := range got.Violations {
		if v.Rule == capcheck.RuleResultLost {
			lost = append(lost, v)
		}
	}
	require.Empty(t, lost, "a clock step fabricates no lost result")
}
