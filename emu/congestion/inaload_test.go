package congestion

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// inaGroups are the table's rows: NetReduce on one rack and on two, and
// Ring-AllReduce on the same hosts as the baseline.
var inaGroups = []struct {
	topology string
	mode     emu.Mode
}{{"star", emu.NetReduce}, {"spine-leaf", emu.NetReduce}, {"star", emu.Ring}, {"spine-leaf", emu.Ring}}

// cell runs one cell, requiring it to finish exact.
func inaCell(t *testing.T, c INALoad) INALoadResult {
	t.Helper()
	r, err := c.Run()
	require.NoError(t, err, "%s %s %s load %v", c.Topology, c.Mode, c.Setting.Name, c.Load)
	require.True(t, r.Exact, "%s %s %s load %v: not exact", c.Topology, c.Mode, c.Setting.Name, c.Load)
	return r
}

// TestINABesideTraffic: a small version of the table (1 MiB per rank, the
// job alone and against a background offering the whole contended link),
// every cell exact, and what each setting does that can be told without
// a tuned number:
//   - alone, the settings change nothing (no queue reaches a threshold);
//   - lossy: the background's excess is dropped, the INA job retransmits
//     (go-back-N), and it is slowed more than with PFC;
//   - PFC: no frame is dropped, pauses are sent, the INA job retransmits
//     nothing;
//   - DCQCN: CNPs reach the NetReduce ranks (its QPs are RoCE QPs; the
//     reuse NetReduce §3 claims), on two racks too: the tree's frames go
//     in the job's class and ECN marks aggregate into its results.
func TestINABesideTraffic(t *testing.T) {
	for _, g := range inaGroups {
		alone := map[string]int64{}
		full := map[string]INALoadResult{}
		for _, s := range INASettings {
			for _, load := range []float64{0, 1} {
				c := DefaultINALoad()
				c.Topology, c.Mode, c.Setting, c.Load = g.topology, g.mode, s, load
				r := inaCell(t, c)
				if load == 0 {
					alone[s.Name] = r.INANS
				} else {
					full[s.Name] = r
				}
				t.Logf("%s %s %-9s load %3v%%: %v (%d retransmissions, %d timeouts, %d drops, %d pauses, %d marks, %d CNPs to the job)",
					g.topology, g.mode, s.Name, load*100, time.Duration(r.INANS), r.Retransmissions, r.Timeouts, r.Drops, r.Pauses, r.ECNMarks, r.INACNPs)
			}
		}
		what := fmt.Sprintf("%s %s", g.topology, g.mode)
		for _, s := range INASettings {
			assert.Equal(t, alone["lossy"], alone[s.Name], "%s alone: %s changes nothing", what, s.Name)
		}
		lossy, pfc := full["lossy"], full["pfc"]
		assert.Positive(t, lossy.Drops, "%s lossy: the excess is dropped", what)
		assert.Positive(t, lossy.Retransmissions, "%s lossy: the job retransmits", what)
		assert.Greater(t, lossy.INANS, pfc.INANS, "%s: drops and go-back-N cost more than pauses", what)
		for _, s := range []string{"pfc", "pfc+dcqcn"} {
			assert.Zero(t, full[s].Drops, "%s %s: nothing dropped", what, s)
			assert.Zero(t, full[s].Retransmissions, "%s %s: nothing retransmitted", what, s)
		}
		assert.Positive(t, pfc.Pauses, "%s pfc: the buffer pauses senders", what)
		for _, s := range []string{"dcqcn", "pfc+dcqcn"} {
			assert.Positive(t, full[s].ECNMarks, "%s %s: the shared link marks", what, s)
			assert.Positive(t, full[s].INACNPs, "%s %s: CNPs reach the job's ranks", what, s)
		}
	}
}

// TestINACNPGoesToTheResultsSource follows DCQCN through NetReduce in a
// capture: the switch builds each result a rank receives from its ring
// predecessor's frame (headers, QPN, ECT), so when the shared link to
// rank 0 marks a result CE, rank 0's CNP goes to rank 3's send QP (the
// predecessor's in the ring 0 → 1 → 2 → 3 → 0), and to no other rank.
func TestINACNPGoesToTheResultsSource(t *testing.T) {
	c := DefaultINALoad()
	c.Setting, c.Load = INASettings[2], 1
	cfg, err := c.Config()
	require.NoError(t, err)
	var capture bytes.Buffer
	cfg.Capture = &capture
	r, err := c.run(cfg)
	require.NoError(t, err)
	require.True(t, r.Exact)

	rd, err := pcapio.NewReader("capture", bytes.NewReader(capture.Bytes()))
	require.NoError(t, err)
	marked := map[string]int{} // CE-marked NetReduce results by the link they cross
	cnps := map[string]int{}   // CNPs to the ring's send QP by the link delivering them
	var v frames.View
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		if v.Parse(rec.Data) != nil || !v.Known() {
			continue
		}
		link := rd.Interfaces()[rec.Info.InterfaceIndex]
		switch {
		case v.Opcode() == wire.CNP && v.DestQP() == emu.SendQPN:
			cnps[link]++
		case v.DestQP() == emu.RecvQPN && v.TClass()&3 == 3:
			marked[link]++
		}
	}
	t.Logf("CE-marked results %v; CNPs to the ring's send QPs %v", marked, cnps)
	assert.Positive(t, marked["port0-out"], "results to rank 0 are marked on the shared link")
	assert.Positive(t, cnps["port3-out"], "rank 0's CNPs reach rank 3")
	for _, l := range []string{"port1-out", "port2-out"} {
		assert.Zero(t, cnps[l], "no CNP reaches %s", l)
	}
	assert.Equal(t, uint64(cnps["port3-out"]), r.INACNPs, "every CNP the capture shows is counted by the job's reaction points")
}

// inaFull is a cell of the full table (docs/congestion.md): 4 MiB per
// rank (the job alone takes about 3.6 ms), background flows of 16 ms.
func inaFull(topology string, load float64) INALoad {
	c := DefaultINALoad()
	c.Topology, c.Load, c.Tensor, c.Duration = topology, load, 4<<20, 16*time.Millisecond
	return c
}

var inaLoads = []float64{0, 0.25, 0.5, 1}

// TestINAScenarioFiles: docs/congestion/ina-*.yaml are the full table's
// cells as Config builds them (INAEMU_UPDATE=1 rewrites them).
func TestINAScenarioFiles(t *testing.T) {
	for _, topology := range []string{"star", "spine-leaf"} {
		for _, load := range inaLoads {
			want, err := inaFull(topology, load).ScenarioYAML()
			require.NoError(t, err)
			path := filepath.Join("..", "..", "docs", "congestion", fmt.Sprintf("ina-%s-%s.yaml", topology, pct(load)))
			if os.Getenv("INAEMU_UPDATE") != "" {
				require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
			}
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, want, string(got), "%s is not the cell's scenario (INAEMU_UPDATE=1 rewrites it)", path)
		}
	}
}

// TestINATable prints docs/congestion.md's table (opt-in:
// INAEMU_SCALE=1), every cell exact.
func TestINATable(t *testing.T) {
	if os.Getenv("INAEMU_SCALE") == "" {
		t.Skip("SKIP: the full table is opt-in (INAEMU_SCALE=1)")
	}
	var b strings.Builder
	b.WriteString("| job | setting | alone | 25 % | 50 % | 100 % | at 100 %: drops, retransmissions, timeouts, pauses, CE marks, CNPs to the job |\n|---|---|---|---|---|---|---|\n")
	for _, g := range inaGroups {
		for _, s := range INASettings {
			var alone int64
			fmt.Fprintf(&b, "| %s %s | %s |", g.mode, g.topology, s.Name)
			for _, load := range inaLoads {
				c := inaFull(g.topology, load)
				c.Mode, c.Setting = g.mode, s
				r := inaCell(t, c)
				if load == 0 {
					alone = r.INANS
					fmt.Fprintf(&b, " %.3f ms |", float64(r.INANS)/1e6)
					continue
				}
				fmt.Fprintf(&b, " %.2f× |", float64(r.INANS)/float64(alone))
				if load == 1 {
					fmt.Fprintf(&b, " %d, %d, %d, %d, %d, %d |\n", r.Drops, r.Retransmissions, r.Timeouts, r.Pauses, r.ECNMarks, r.INACNPs)
				}
			}
		}
	}
	t.Log("\n" + b.String())
}
