package congestion

import (
	"path/filepath"
	"testing"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
)

// TestPFCHeadOfLineBlocking: PFC pauses a whole priority of a link, so
// congestion at one switch port spreads upstream and slows a flow that
// shares no bottleneck with it (C. Guo et al., SIGCOMM '16, §2 and §4:
// head-of-line blocking and unfairness; IEEE 802.1Qbb pauses per
// priority, not per flow). s0 pauses the trunk, s1 pauses its senders,
// the victim's NIC among them; without PFC, or on a priority of its own,
// the victim runs as if alone.
func TestPFCHeadOfLineBlocking(t *testing.T) {
	run := func(name string, c HoLConfig) HoLResult {
		t.Helper()
		r, err := HoL(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: victim %.2f Gb/s, incast %.2f Gb/s, %d drops; paused: trunk s1-s0 %v, x-s1 %v, a0-s1 %v, b0-s0 %v",
			name, r.VictimGoodputGbps, r.IncastGoodputGbps, r.Drops, r.Paused("s1-s0"), r.Paused("x-s1"), r.Paused("a0-s1"), r.Paused("b0-s0"))
		if !r.Exact {
			t.Errorf("%s: not exact: %s", name, r.Error)
		}
		return r
	}
	alone := run("alone", HoLConfig{Alone: true, Seed: 1})
	// Alone, the victim's one flow gets the link less its headers and
	// its window's first round trip: at least 97% of the payload share.
	if share := 100 * roceGoodputShare(); alone.VictimGoodputGbps < 0.97*share || alone.VictimGoodputGbps > share {
		t.Errorf("victim alone: %.2f Gb/s, want 97..100%% of %.2f", alone.VictimGoodputGbps, share)
	}

	hol := run("PFC, one priority", HoLConfig{PFC: "on", Seed: 1})
	if hol.Drops != 0 {
		t.Errorf("PFC: %d drops", hol.Drops)
	}
	if hol.VictimGoodputGbps > alone.VictimGoodputGbps/2 {
		t.Errorf("PFC: victim %.2f Gb/s, want HoL blocking to take at least half of its %.2f alone", hol.VictimGoodputGbps, alone.VictimGoodputGbps)
	}
	// The pause's path: s0 → s1 over the trunk (s0 sends, s1's
	// transmitter waits), then s1 → each of its hosts, the victim's too.
	for _, dir := range []string{"s1-s0", "a0-s1", "a1-s1", "x-s1", "b0-s0", "b1-s0"} {
		if hol.Paused(dir) == 0 {
			t.Errorf("PFC: %s was never paused", dir)
		}
	}
	for _, dir := range []string{"s0-s1", "s0-r", "s0-v", "v-s0", "r-s0"} {
		if hol.Paused(dir) != 0 {
			t.Errorf("PFC: %s paused %v; nothing downstream of the congestion should be", dir, hol.Paused(dir))
		}
	}

	lossy := run("no PFC", HoLConfig{Seed: 1})
	if lossy.Drops == 0 || lossy.PFC != nil {
		t.Errorf("no PFC: %d drops, %d PFC rows: want the incast's drops and no pauses", lossy.Drops, len(lossy.PFC))
	}
	for name, c := range map[string]HoLConfig{
		"own lossless priority": {PFC: "on", OwnPriority: true, Seed: 1},
		"own lossy priority":    {PFC: "3", OwnPriority: true, Seed: 1},
	} {
		r := run(name, c)
		if r.Drops != 0 || r.Paused("s1-s0") == 0 || r.Paused("x-s1") != 0 {
			t.Errorf("%s: %d drops, trunk paused %v, victim's NIC paused %v: want the incast's priority paused, not the victim's", name, r.Drops, r.Paused("s1-s0"), r.Paused("x-s1"))
		}
		if r.VictimGoodputGbps < 0.98*alone.VictimGoodputGbps {
			t.Errorf("%s: victim %.2f Gb/s, want within 2%% of %.2f alone", name, r.VictimGoodputGbps, alone.VictimGoodputGbps)
		}
	}
	if lossy.VictimGoodputGbps < 0.98*alone.VictimGoodputGbps {
		t.Errorf("no PFC: victim %.2f Gb/s, want within 2%% of %.2f alone", lossy.VictimGoodputGbps, alone.VictimGoodputGbps)
	}
}

// TestHoLScenarioFiles: docs/congestion's scenario files are the runs
// HoL makes: the same victim goodput to the bit.
func TestHoLScenarioFiles(t *testing.T) {
	for _, tc := range []struct {
		file string
		pfc  string
		c    HoLConfig
	}{
		{"hol.yaml", "on", HoLConfig{PFC: "on", Seed: 1}},
		{"hol-priority.yaml", "3", HoLConfig{PFC: "3", OwnPriority: true, Seed: 1}},
		{"hol-alone.yaml", "", HoLConfig{Alone: true, Seed: 1}},
	} {
		s, err := scenario.Load(filepath.Join("..", "..", "docs", "congestion", tc.file))
		if err != nil {
			t.Fatal(err)
		}
		cfg := emu.DefaultConfig()
		if err := s.Apply(&cfg); err != nil {
			t.Fatal(err)
		}
		cfg.PFC = tc.pfc // --pfc
		res, err := emu.Run(cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.file, err)
		}
		got, err := holResult(res)
		if err != nil {
			t.Fatal(err)
		}
		want, err := HoL(tc.c)
		if err != nil {
			t.Fatal(err)
		}
		if got.VictimGoodputGbps != want.VictimGoodputGbps || got.IncastGoodputGbps != want.IncastGoodputGbps {
			t.Errorf("%s --pfc %q: victim %v, incast %v Gb/s; HoL: %v, %v", tc.file, tc.pfc, got.VictimGoodputGbps, got.IncastGoodputGbps, want.VictimGoodputGbps, want.IncastGoodputGbps)
		}
	}
}
