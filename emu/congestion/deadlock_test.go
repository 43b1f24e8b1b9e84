package congestion

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
)

// TestPFCDeadlock: a cyclic buffer dependency deadlocks PFC (S. Hu et
// al., "Deadlocks in Datacenter Networks: Why Do They Form, and How to
// Avoid Them", HotNets '16; C. Guo et al., "RDMA over Commodity Ethernet
// at Scale", SIGCOMM '16, §4.3): with flows two hops clockwise round a
// ring of five switches every ring link ends up paused by the switch it
// feeds, for ever. The run ends with the cycle named (not at --max-time),
// drops nothing, and the capture checker finds the same cycle in its
// capture. The same traffic without PFC completes (go-back-N recovers
// its drops), and without the flow that closes the cycle PFC drains it.
func TestPFCDeadlock(t *testing.T) {
	pcap := filepath.Join(t.TempDir(), "deadlock.pcapng")
	f, err := os.Create(pcap)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Deadlock(DeadlockConfig{PFC: true, Capture: f, Seed: 1})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cycle: %s after %v, %d pauses, %d drops", r.Error, r.Time, r.Pauses, r.Drops)
	// The cycle, independently: every clockwise ring direction sI-sI+1.
	var want []string
	for i := 0; i < RingSwitches; i++ {
		want = append(want, fmt.Sprintf("s%d-s%d", i, (i+1)%RingSwitches))
	}
	if r.Exact || len(r.Deadlocks) != 1 || !strings.Contains(r.Error, "PFC deadlock on priority 0") {
		t.Fatalf("exact %v, deadlocks %v, error %q: want the run ended by one deadlock on priority 0", r.Exact, r.Deadlocks, r.Error)
	}
	d := r.Deadlocks[0]
	got := slices.Clone(d.Directions)
	slices.Sort(got)
	if d.Priority != 0 || !slices.Equal(got, want) {
		t.Errorf("deadlock on priority %d through %v, want priority 0 through %v", d.Priority, d.Directions, want)
	}
	for _, dir := range d.Directions {
		if !strings.Contains(r.Error, dir) {
			t.Errorf("the run's error %q does not name %s", r.Error, dir)
		}
	}
	if r.Drops != 0 || r.Pauses == 0 {
		t.Errorf("%d drops, %d pauses: a deadlock of lossless priorities drops nothing", r.Drops, r.Pauses)
	}
	rep, err := capcheck.CheckFile(pcap, capcheck.CheckOptions{LinkRate: 100e9})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, v := range rep.Violations {
		if v.Rule == "pfc-deadlock" {
			found = true
			for _, dir := range want {
				if !strings.Contains(v.Detail, "("+dir+",") {
					t.Errorf("capcheck's pfc-deadlock %q does not name %s", v.Detail, dir)
				}
			}
		}
	}
	if !found {
		t.Errorf("capcheck found no pfc-deadlock in the deadlocked run's capture (%d violations)", len(rep.Violations))
	}

	chain, err := Deadlock(DeadlockConfig{PFC: true, Chain: true, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("chain with PFC: exact %v in %v, %d pauses, %d drops", chain.Exact, chain.Time, chain.Pauses, chain.Drops)
	if !chain.Exact || chain.Deadlocks != nil || chain.Drops != 0 || chain.Pauses == 0 {
		t.Errorf("chain: exact %v (%s), deadlocks %v, %d drops, %d pauses: want paused, lossless and complete", chain.Exact, chain.Error, chain.Deadlocks, chain.Drops, chain.Pauses)
	}
	lossy, err := Deadlock(DeadlockConfig{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cycle without PFC: exact %v in %v, %d drops", lossy.Exact, lossy.Time, lossy.Drops)
	if !lossy.Exact || lossy.Drops == 0 || lossy.Pauses != 0 {
		t.Errorf("without PFC: exact %v (%s), %d drops, %d pauses: want drops recovered, no pauses", lossy.Exact, lossy.Error, lossy.Drops, lossy.Pauses)
	}
}

// TestDeadlockScenarioFiles: docs/congestion/deadlock.yaml and
// deadlock-chain.yaml with --pfc on are the runs Deadlock makes.
func TestDeadlockScenarioFiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		c    DeadlockConfig
	}{
		{"deadlock.yaml", DeadlockConfig{PFC: true, Seed: 1}},
		{"deadlock-chain.yaml", DeadlockConfig{PFC: true, Chain: true, Seed: 1}},
	} {
		s, err := scenario.Load(filepath.Join("..", "..", "docs", "congestion", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		cfg := emu.DefaultConfig()
		if err := s.Apply(&cfg); err != nil {
			t.Fatal(err)
		}
		cfg.PFC = "on" // --pfc on
		res, _ := emu.Run(cfg)
		want, err := Deadlock(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if res == nil || res.Error != want.Error || res.VirtualNS != int64(want.Time) || len(res.Deadlocks) != len(want.Deadlocks) {
			t.Errorf("%s --pfc on: %+v; Deadlock: %+v", tc.file, res, want)
		}
	}
}
