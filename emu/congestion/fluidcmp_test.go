package congestion

import (
	"math"
	"os"
	"testing"
	"time"
)

// τ* by hand at 40 Gb/s, 1 µs links, the switch's 250 ns: 3 µs of
// propagation, 0.5 µs of forwarding, two 1106-byte data frames (221.2 ns
// each) and two 98-byte CNPs (19.6 ns each: 16 reserved bytes and the
// ICRC after the headers) on the line; a standing queue adds its drain
// time, 0.2 ns a byte at 40 Gb/s: 20 KB is 4 µs more.
func TestDCQCNFeedbackDelay(t *testing.T) {
	want := 3000 + 500 + 2*221.2 + 2*19.6
	if got := float64(DCQCNFeedbackDelay(40e9, time.Microsecond, 0)); math.Abs(got-want) > 1 {
		t.Errorf("τ* with no queue: %v ns, want %.1f", got, want)
	}
	if got := DCQCNFeedbackDelay(40e9, time.Microsecond, 20000) - DCQCNFeedbackDelay(40e9, time.Microsecond, 0); got != 4*time.Microsecond {
		t.Errorf("20 KB of queue adds %v: want 4µs", got)
	}
}

// N:1 incast with DCQCN in packet mode beside the paper's §5 fluid model
// at the same parameters (40 Gb/s, Kmin 5 KB, Kmax 200 KB, Pmax 1%, the
// paper's DCQCN constants, τ* of the emulated loop): each sender's rate
// limiter Rc, averaged over the steady state (from 40 ms after the start
// to the first flow's end) and the flows, is within 10% of the model's,
// and the flows share fairly. The queue is reported (docs/congestion.md
// has the comparison), and asserted only to stand between Kmin and Kmax:
// the model's queue is a point (N ≤ 8) where the emulator's swings with
// packet-granular marks and per-QP CNP pacing. N = 2 and 4 here, 8 and
// 16 with INAEMU_SCALE=1.
func TestDCQCNMatchesFluidModel(t *testing.T) {
	ns := []int{2, 4}
	if os.Getenv("INAEMU_SCALE") != "" {
		ns = append(ns, 8, 16)
	}
	for _, n := range ns {
		const span = 100 * time.Millisecond
		bytes := int64(40e9/float64(n)*span.Seconds()/8*1024/1106) &^ 4095
		c := DCQCNIncast{Senders: n, Rate: 40e9, Latency: time.Microsecond, FlowBytes: bytes, RED: DCQCNPaperRED, PFC: true, Seed: 1}
		r, err := DCQCNCompare(c, 40*time.Millisecond)
		if err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		t.Logf("N=%d, τ*=%v: emulator Rc %.3f Gb/s, queue %.0f B, goodput %.2f Gb/s, Jain %.4f, %d CNPs; fluid Rc %.3f Gb/s, queue %.0f B (%.0f..%.0f)",
			n, time.Duration(r.Fluid.DelayNS), r.RcBps/1e9, r.QueueBytes, r.GoodputGbps, r.Jain, r.CNPs,
			r.Fluid.RateBps/1e9, r.Fluid.QueueBytes, r.Fluid.QueueMin, r.Fluid.QueueMax)
		if want := 40e9 / float64(n); math.Abs(r.Fluid.RateBps-want)/want > 0.05 {
			t.Errorf("N=%d: the model's rate %.3f Gb/s is not C/N", n, r.Fluid.RateBps/1e9)
		}
		if math.Abs(r.RcBps-r.Fluid.RateBps)/r.Fluid.RateBps > 0.10 {
			t.Errorf("N=%d: emulated Rc %.3f Gb/s, model %.3f: more than 10%% apart", n, r.RcBps/1e9, r.Fluid.RateBps/1e9)
		}
		if r.QueueBytes < float64(DCQCNPaperRED.Kmin) || r.QueueBytes > float64(DCQCNPaperRED.Kmax) {
			t.Errorf("N=%d: mean queue %.0f B outside Kmin..Kmax", n, r.QueueBytes)
		}
		if r.Jain < 0.99 {
			t.Errorf("N=%d: Jain's index %.4f: want >= 0.99", n, r.Jain)
		}
	}
}
