package congestion

import (
	"testing"
	"time"
)

// The paper's claim (Zhu et al., SIGCOMM '15, §5–§6): flows sharing a
// bottleneck under DCQCN converge to a fair share while the switch's
// queue stands between the RED thresholds. Two flows into one 40 Gb/s
// port with PFC on, Kmin 5 KB, Kmax 200 KB, Pmax 1%: over the last half
// of the time both run, Jain's index (computed here from the flows'
// timelines, (Σx)²/(n·Σx²)) is at least 0.99, the pair fills the link
// (goodput at least 90% of what 40 Gb/s carries of 1024-byte payloads in
// 1106-byte frames on the line), and the queue's mean lies in
// [Kmin, Kmax] with 95% of the samples at or under Kmax.
func TestDCQCNTwoFlowsConverge(t *testing.T) {
	for _, tc := range []struct {
		name   string
		starts []time.Duration
		bytes  int64
	}{
		{"together", nil, 128 << 20},
		{"one 10ms later", []time.Duration{0, 10 * time.Millisecond}, 256 << 20},
	} {
		c := DCQCNIncast{Senders: 2, Rate: 40e9, Latency: time.Microsecond, FlowBytes: tc.bytes, Starts: tc.starts,
			DCQCN: true, RED: DCQCNPaperRED, PFC: true, Seed: 1}
		r, err := c.Run()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		f := r.Fairness(DCQCNPaperRED)
		t.Logf("%s: window %v..%v: rates %.2f Gb/s (total %.2f), Jain %.4f, queue mean %.0f B (p5 %d, p95 %d, max %d)",
			tc.name, time.Duration(f.FromNS), time.Duration(f.ToNS), f.RatesGbps, f.TotalGbps, f.Jain, f.QueueMeanB, f.QueueP5B, f.QueueP95B, f.QueueMaxB)
		var s, s2 float64
		for _, x := range f.RatesGbps {
			s, s2 = s+x, s2+x*x
		}
		if jain := s * s / (2 * s2); jain < 0.99 {
			t.Errorf("%s: Jain's index %.4f: want >= 0.99", tc.name, jain)
		}
		if full := 40 * 1024.0 / 1106; s < 0.9*full {
			t.Errorf("%s: %.2f Gb/s together: want at least 90%% of %.2f", tc.name, s, full)
		}
		if f.QueueMeanB < float64(DCQCNPaperRED.Kmin) || f.QueueMeanB > float64(DCQCNPaperRED.Kmax) {
			t.Errorf("%s: mean queue %.0f B: want within Kmin..Kmax", tc.name, f.QueueMeanB)
		}
		if f.QueueP95B > DCQCNPaperRED.Kmax {
			t.Errorf("%s: 95th percentile of the queue %d B: want at most Kmax", tc.name, f.QueueP95B)
		}
		if p := r.Result.PFC; len(p) > 0 {
			for _, x := range p {
				if x.PausesSent > 0 {
					t.Errorf("%s: %s sent %d pauses: DCQCN should keep the queue far under XOFF", tc.name, x.Direction, x.PausesSent)
				}
			}
		}
	}
}
