package testtool

import (
	"testing"
	"time"
)

// The slowdown is measured, bounded, and stretches a budget by itself.
func TestBudgetStretchesBySlowdown(t *testing.T) {
	s := Slowdown()
	if s < 1 || s > 20 {
		t.Fatalf("Slowdown %v: want 1..20", s)
	}
	if s != Slowdown() {
		t.Fatal("Slowdown is measured once per process")
	}
	if got, want := Budget(time.Minute), time.Duration(float64(time.Minute)*s); got != want {
		t.Fatalf("Budget(1m) = %v, want %v", got, want)
	}
	t.Logf("slowdown %.2f", s)
}
