package fabric

import (
	"testing"
	"time"
)

// A sampler reads a switch egress draining ten 1000-byte frames at
// 10 Gb/s: at time t, 1 + ⌊t / line time⌋ frames have left for the line
// (the first at once), the line time being (1000 + 24) bytes × 0.8 ns.
func TestQueueSamplerFollowsADrainingQueue(t *testing.T) {
	f, err := New(Config{Hosts: 2, Link: LinkConfig{Rate: 10e9, Latency: time.Microsecond}})
	if err != nil {
		t.Fatal(err)
	}
	dir, ok := f.DirInto(f.Hosts[1])
	if !ok || dir != "port1-out" {
		t.Fatalf("DirInto(h1) = %q, %v: want port1-out", dir, ok)
	}
	var d *linkDir
	for _, x := range f.dirs {
		if x.name == dir {
			d = x
		}
	}
	for range 10 {
		fr := make([]byte, 1000)
		copy(fr, ipv4Frame(0x0800, 0))
		if !d.Push(fr, 0) {
			t.Fatal("push refused")
		}
	}
	s, err := f.SampleQueue(dir, time.Microsecond)
	if err != nil {
		t.Fatal(err)
	}
	f.Clock.Run(12 * time.Microsecond)
	s.Stop()
	lineNs := 1024 * 0.8
	if len(s.Bytes) != 13 {
		t.Fatalf("%d samples in 12 µs at 1 µs: want 13 (0..12 µs)", len(s.Bytes))
	}
	for k, got := range s.Bytes {
		left := min(1+int(float64(k*1000)/lineNs), 10)
		if want := (10 - left) * 1000; got != want {
			t.Errorf("sample %d (%d µs): %d bytes, want %d", k, k, got, want)
		}
	}
	if w := s.Window(2*time.Microsecond, 4*time.Microsecond); len(w) != 2 || w[0] != s.Bytes[2] {
		t.Errorf("Window(2µs, 4µs) = %v: want samples 2 and 3", w)
	}
	if _, err := f.SampleQueue("nowhere", time.Microsecond); err == nil {
		t.Error("a direction that does not exist was sampled")
	}
	if _, err := f.SampleQueue(dir, 0); err == nil {
		t.Error("a zero interval was accepted")
	}
}
