package faults

import (
	"strings"
	"testing"
)

// FuzzSpecs: any --fault, --netem, duration or percentage text is read
// without a panic, and every refusal is one line.
func FuzzSpecs(f *testing.F) {
	for _, s := range []string{"drop port=0 dir=out class=data nth=1", "delay=20us qp=0x11 psn=5 every=3 prob=50%",
		"hold=3 class=nak dir=in", "spoof=2 port=1 class=data nth=1", "drop link=leaf0-spine0 class=data nth=3",
		"loss 1% delay 10us 2us reorder 25% gap 5 duplicate 0.5 corrupt 0.1%", "loss gemodel 1% 30% 70% 0.1%",
		"delay=1e300", "1.5us", "0.05%", "rate 10gbit", "slot 1ms",
		"loss gemodel 1% 200%", "drop prob=2", "hold=99999999999", "reorder 5% gap 9999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		_, e1 := Parse(s)
		_, e2 := ParseNetem(s)
		_, e3 := ParseDuration(s)
		_, e4 := ParsePercent(s)
		for _, err := range []error{e1, e2, e3, e4} {
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Fatalf("a refusal of more than one line: %q", err)
			}
		}
	})
}
