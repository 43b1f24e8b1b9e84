package conformance

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/testtool"
)

// TestStalledDeviceFailsInSeconds: a device that holds its ports and
// forwards nothing (dut/testdata/mute) fails the aggregation property in
// well under the 120 s one run took before the stall detector (each
// waited for the case's max_time), shrinking included, in words: the
// stall and the device's silence while every rank sent into it. Its
// calibration fails, so the cases run at the conservative fallback 2^16
// (a stall of 2.1 s), and shrinking confirms each silent candidate with
// a second run: 38.8 s measured on a 2-core machine.
func TestStalledDeviceFailsInSeconds(t *testing.T) {
	o := deviceUnderTest(t, "st", 2, "../dut/testdata/mute", "exec $BIN --prefix $INAEMU_DUT_PREFIX --workers $INAEMU_DUT_WORKERS")
	require.False(t, o.DUT.Calibration.Measured(), "a mute device gives no rate")
	o.Count = 1
	start := time.Now()
	res := AggregationSuite(o)[0]
	took := time.Since(start)
	require.False(t, res.Passed)
	require.Zero(t, res.Inconclusive, "a silent device is evidence, not an inconclusive case")
	require.Contains(t, res.Failure, "stalled: no progress for ")
	require.Contains(t, res.Failure, "the device is to blame: the device sent no RoCE frame for ")
	require.Contains(t, res.Failure, "shrunk to")
	require.Less(t, took, testtool.Budget(90*time.Second))
	require.Contains(t, res.Failure, "8 ACK timeouts of 268.435456ms", "the failed calibration's conservative 2^16")
	b, err := os.ReadFile(*res.Counterexample)
	require.NoError(t, err)
	require.Contains(t, string(b), "timeout: ")
	t.Logf("%v: %s", took, res.Failure)
}

// TestSettle: an inconclusive case is rerun once with its timeout 2
// exponents longer (delays scaled alike); the rerun's failure or device
// evidence is what is reported (never hidden), a pass clears it, and a
// second transport failure with nothing to blame stays inconclusive.
func TestSettle(t *testing.T) {
	c := aggCase{Workers: 2, Timeout: 14, Events: []string{"delay=1000us port=0 dir=in class=data nth=3", "drop port=1 dir=out class=ack nth=2"}}
	inc := aggOutcome{inconclusive: true, detail: "RETRY_EXC_ERR"}
	var ran []aggCase
	run := func(out aggOutcome) func(aggCase) aggOutcome {
		return func(d aggCase) aggOutcome { ran = append(ran, d); return out }
	}

	got, out := settle(c, aggOutcome{}, run(aggOutcome{}))
	require.Empty(t, ran, "a case that holds is not rerun")
	require.Equal(t, aggOutcome{}, out)

	got, out = settle(c, inc, run(aggOutcome{}))
	require.Len(t, ran, 1)
	require.Equal(t, 16, ran[0].Timeout)
	require.Equal(t, "delay=4000us port=0 dir=in class=data nth=3", ran[0].Events[0], "a delay keeps its place against the timeout")
	require.Equal(t, c.Events[1], ran[0].Events[1])
	require.Equal(t, "delay=1000us port=0 dir=in class=data nth=3", c.Events[0], "the original case is untouched")
	require.Equal(t, aggOutcome{}, out, "passing the second time: the machine's")
	require.Equal(t, 14, got.Timeout)

	ran = nil
	wrong := aggOutcome{fail: "wrong", detail: "WRONG RESULT: rank 0 element 1 is 2, want 3"}
	got, out = settle(c, inc, run(wrong))
	require.Equal(t, wrong, out, "a wrong result in the rerun is a failure")
	require.Equal(t, 16, got.Timeout, "reported as the case that ran, so it replays")

	got, out = settle(c, inc, run(inc))
	require.True(t, out.inconclusive)
	require.Empty(t, out.fail)

	// A device that only went silent (a starved process looks the same) is
	// blamed only when it is silent again with the longer timeout.
	silent := aggOutcome{fail: "transport", detail: "the device sent no RoCE frame for 1.1s", silent: true}
	ran = nil
	_, out = settle(c, silent, run(aggOutcome{}))
	require.Len(t, ran, 1, "a silent device's case is confirmed once")
	require.Equal(t, aggOutcome{}, out, "answering the second time: the machine's")
	got, out = settle(c, silent, run(silent))
	require.Equal(t, "transport", out.fail, "silent twice: the device's")
	require.Equal(t, 14, got.Timeout, "the quicker case is the one shrunk and replayed")
	// Inconclusive first, then silent once: one more run at the same
	// longer timeout before the device is blamed, on two silences.
	seq := func(outs ...aggOutcome) func(aggCase) aggOutcome {
		return func(d aggCase) aggOutcome { ran = append(ran, d); o := outs[0]; outs = outs[1:]; return o }
	}
	ran = nil
	got, out = settle(c, inc, seq(silent, aggOutcome{}))
	require.Len(t, ran, 2, "a silence after an inconclusive run is confirmed")
	require.Equal(t, []int{16, 16}, []int{ran[0].Timeout, ran[1].Timeout})
	require.Equal(t, aggOutcome{}, out, "one silence, then answering: the machine's")
	require.Equal(t, 14, got.Timeout)
	ran = nil
	got, out = settle(c, inc, seq(silent, silent))
	require.Len(t, ran, 2)
	require.Equal(t, silent, out, "silent twice at the longer timeout: the device's")
	require.Equal(t, 16, got.Timeout)
	ran = nil
	_, out = settle(c, inc, seq(silent, inc))
	require.True(t, out.inconclusive, "silent once, then inconclusive: still inconclusive")
	require.Empty(t, out.fail)

	ran = nil
	ev := aggOutcome{fail: "transport", detail: "response-forged: ..."}
	_, out = settle(c, ev, run(aggOutcome{}))
	require.Empty(t, ran, "evidence in the device's frames needs no second run")
	require.Equal(t, ev, out)

	var res PropertyResult
	res.Cases = 5
	res.inconclusive(3, inc)
	res.inconclusive(4, inc)
	res.noteInconclusive()
	require.Equal(t, 2, res.Inconclusive)
	require.Len(t, res.Notes, 1)
	require.True(t, strings.HasPrefix(res.Notes[0], "2 of 5 cases inconclusive: "), res.Notes[0])
	require.Contains(t, res.Notes[0], "first: case 3: RETRY_EXC_ERR")
}

// TestShrinkConfirmsSilence: while shrinking, a candidate whose only
// evidence is the device's silence is accepted only when a second run
// fails the same way; other evidence needs one run.
func TestShrinkConfirmsSilence(t *testing.T) {
	silent := aggOutcome{fail: "transport", detail: "the device sent no RoCE frame for 1.1s", silent: true}
	ev := aggOutcome{fail: "transport", detail: "response-forged: ..."}
	runs := 0
	seq := func(outs ...aggOutcome) func(aggCase) aggOutcome {
		runs = 0
		return func(aggCase) aggOutcome { runs++; o := outs[0]; outs = outs[1:]; return o }
	}
	out := silent
	require.False(t, failsAs(seq(silent, aggOutcome{}), &out)(aggCase{}), "silent once, then answering: not the same failure")
	require.Equal(t, 2, runs)
	require.Equal(t, silent, out, "unchanged when refused")
	require.True(t, failsAs(seq(silent, silent), &out)(aggCase{}))
	require.Equal(t, 2, runs)
	require.True(t, failsAs(seq(silent, ev), &out)(aggCase{}), "confirmed by other evidence")
	require.Equal(t, ev, out)
	out = silent
	require.True(t, failsAs(seq(ev), &out)(aggCase{}))
	require.Equal(t, 1, runs, "frame evidence needs no second run")
	require.False(t, failsAs(seq(aggOutcome{fail: "wrong"}), &out)(aggCase{}))
	require.Equal(t, 1, runs)
}
