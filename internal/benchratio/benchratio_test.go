package benchratio

import (
	"testing"
	"time"
)

// One slow stretch moves a ratio of sums but not the median.
func TestMedianResistsOneSlowStretch(t *testing.T) {
	var r Rounds
	for range 9 {
		r.Add(100*time.Nanosecond, 90*time.Nanosecond) // ratio 0.9
	}
	r.Add(100*time.Microsecond, 90*time.Nanosecond) // our round hit a stall
	if got := r.Ratio(); got != 0.9 {
		t.Fatalf("median %v, want 0.9", got)
	}
	if sum := float64(r.Raw()) / float64(r.Ours()); sum > 0.01 {
		t.Fatalf("the sum ratio %v was expected to be ruined by the stall", sum)
	}
	r.Add(0, 5) // below the clock: no ratio
	if r.Len() != 10 {
		t.Fatalf("%d rounds", r.Len())
	}
	var even Rounds
	even.Add(2, 1)
	even.Add(1, 1)
	if got := even.Ratio(); got != 0.75 {
		t.Fatalf("even median %v, want 0.75", got)
	}
	if (&Rounds{}).Ratio() != 0 {
		t.Fatal("no rounds: 0")
	}
}
