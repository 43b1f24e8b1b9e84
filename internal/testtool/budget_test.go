package testtool

import (
	"math"
	"testing"
	"time"
)

// The slowdown is measured once per process and bounded.
func TestSlowdownMeasuredOnceAndBounded(t *testing.T) {
	s := Slowdown()
	if s < 1 || s > maxSlowdown {
		t.Fatalf("Slowdown %v: want 1..%d", s, maxSlowdown)
	}
	if s != Slowdown() {
		t.Fatal("Slowdown is measured once per process")
	}
	t.Logf("slowdown %.2f", s)
}

// A budget is its base on a quiet machine, grows with the slowdown, never
// falls below its base, and stops growing at the cap.
func TestBudgetStretchesBySlowdown(t *testing.T) {
	slowdowns := []float64{math.Inf(-1), -3, 0, 0.5, 1, 1.01, 1.5, 2, 4, 7.3, 8, 19.99, maxSlowdown, 21, 1000, math.Inf(1)}
	for _, base := range []time.Duration{time.Millisecond, 3 * time.Second, time.Minute, 10 * time.Minute} {
		if got := budget(base, 1); got != base {
			t.Errorf("budget(%v) on a quiet machine = %v, want its base", base, got)
		}
		capped := budget(base, maxSlowdown)
		if capped < 19*base || capped > maxSlowdown*base {
			t.Errorf("budget(%v) at the cap = %v, want about %d times the base", base, capped, maxSlowdown)
		}
		prev := time.Duration(0)
		for i, s := range slowdowns {
			got := budget(base, s)
			if got < base {
				t.Errorf("budget(%v) at slowdown %v = %v: below its base", base, s, got)
			}
			if got < prev {
				t.Errorf("budget(%v) at slowdown %v = %v: less than %v at %v", base, s, got, prev, slowdowns[i-1])
			}
			if got > capped {
				t.Errorf("budget(%v) at slowdown %v = %v: beyond the cap's %v", base, s, got, capped)
			}
			if s > 1 && s <= maxSlowdown && got <= budget(base, 1) {
				t.Errorf("budget(%v) at slowdown %v = %v: not stretched", base, s, got)
			}
			prev = got
		}
		if got := budget(base, 1000); got != capped {
			t.Errorf("budget(%v) at slowdown 1000 = %v: want the cap's %v", base, got, capped)
		}
		if got := Budget(base); got < base || got > capped {
			t.Errorf("Budget(%v) = %v (slowdown %v): want %v..%v", base, got, Slowdown(), base, capped)
		}
	}
}
