package congestion

import (
	"testing"
	"time"
)

// The paper's claim (Zhu et al., SIGCOMM '15, §6): with DCQCN the senders
// slow down before the switch's buffer reaches PFC's threshold, so an
// incast that pauses its senders over and over without DCQCN sends few
// pauses or none. N:1 at 40 Gb/s, 4 MiB per flow, --pfc on: without
// DCQCN every N here makes the switch pause (more than a hundred PFC
// frames); with DCQCN and the paper's RED none at all, and every byte
// arrives either way.
func TestDCQCNFewerPauses(t *testing.T) {
	for _, n := range []int{4, 8} {
		var got [2]DCQCNPauses
		for i, cc := range []bool{false, true} {
			c := DCQCNIncast{Senders: n, Rate: 40e9, Latency: time.Microsecond, FlowBytes: 4 << 20, DCQCN: cc, Seed: 1}
			if cc {
				c.RED = DCQCNPaperRED
			}
			r, err := DCQCNPauseCount(c)
			if err != nil {
				t.Fatalf("N=%d dcqcn=%v: %v", n, cc, err)
			}
			if !r.Exact || r.Drops != 0 {
				t.Errorf("N=%d dcqcn=%v: exact %v, %d drops: PFC is lossless", n, cc, r.Exact, r.Drops)
			}
			got[i] = r
		}
		t.Logf("N=%d: %d PFC frames without DCQCN (%.2f Gb/s), %d with (%d CNPs, %.2f Gb/s)",
			n, got[0].PausesSent, got[0].GoodputGbps, got[1].PausesSent, got[1].CNPs, got[1].GoodputGbps)
		if got[0].PausesSent < 100 {
			t.Errorf("N=%d: %d pauses without DCQCN: the incast should fill the buffer past XOFF", n, got[0].PausesSent)
		}
		if got[1].PausesSent != 0 {
			t.Errorf("N=%d: %d pauses with DCQCN: want none", n, got[1].PausesSent)
		}
	}
}
