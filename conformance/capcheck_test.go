package conformance_test

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// The capture checker (package capcheck) against the emulator's captures.
// They live here, not in capcheck, because capcheck depends on wire
// formats only and its tests never run the emulator: they judge the
// captures this file writes as goldens.

var updateGoldens = flag.Bool("update", false, "rewrite the emulator's golden captures in testdata/check")

// ckDir holds the checker's golden captures (see capcheck's tests).
const ckDir = "../testdata/check"

func ckEmu(t *testing.T, mode emu.Mode, seed uint64, netem string, events ...string) []byte {
	t.Helper()
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Mode, cfg.Seed = 4, 64<<10, 8, mode, seed
	for _, e := range events {
		ev, err := faults.Parse(e)
		require.NoError(t, err)
		cfg.Events = append(cfg.Events, ev)
	}
	return ckCapture(t, cfg, netem)
}

// ckCapture runs cfg under netem (netem form, "" for none), requires an
// exact result and returns the run's capture.
func ckCapture(t *testing.T, cfg emu.Config, netem string) []byte {
	t.Helper()
	if netem != "" {
		n, err := faults.ParseNetem(netem)
		require.NoError(t, err)
		cfg.Netem = n
	}
	var buf bytes.Buffer
	cfg.Capture = &buf
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	return buf.Bytes()
}

func ckReport(t *testing.T, b []byte) *capcheck.Report {
	t.Helper()
	path := filepath.Join(t.TempDir(), "run.pcapng")
	require.NoError(t, os.WriteFile(path, b, 0o644))
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	return rep
}

// TestCheckEmulatorCaptures: the emulator's golden captures, made afresh,
// judge as the goldens are asserted to in capcheck (a clean NetReduce job
// conforms with every result checked; under loss, drops, duplicates,
// reordering and corruption the only violations are the ICRCs of the
// frames the faults corrupted; a faulted ring job conforms). With -update
// they are written to testdata/check; then rewrite capcheck's agg_sum
// golden, which is derived from netreduce_clean:
//
//	go test ./conformance -run TestCheckEmulatorCaptures -update
//	go test ./capcheck -run TestCheckGolden -update
func TestCheckEmulatorCaptures(t *testing.T) {
	for _, tc := range []struct {
		file   string
		make   func(t *testing.T) []byte
		faults bool
	}{
		{"netreduce_clean.pcapng", func(t *testing.T) []byte { return ckEmu(t, emu.NetReduce, 1, "") }, false},
		{"netreduce_faults.pcapng", func(t *testing.T) []byte {
			return ckEmu(t, emu.NetReduce, 3, "loss 1%",
				"drop port=1 dir=in class=data nth=7",
				"corrupt port=2 dir=in class=data nth=12",
				"corrupt port=0 dir=out class=data nth=30",
				"corrupt port=3 dir=in class=ack nth=4",
				"dup port=3 dir=in class=data every=25",
				"hold=2 port=1 dir=out class=data every=30",
				"drop class=nak nth=1")
		}, true},
		{"ring_fault.pcapng", func(t *testing.T) []byte {
			return ckEmu(t, emu.Ring, 5, "loss 0.5%", "drop port=1 dir=in class=data nth=9", "drop port=2 dir=out class=ack nth=2")
		}, false},
	} {
		t.Run(tc.file, func(t *testing.T) {
			b := tc.make(t)
			if *updateGoldens {
				require.NoError(t, os.MkdirAll(ckDir, 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(ckDir, tc.file), b, 0o644))
			}
			rep := ckReport(t, b)
			if !tc.faults {
				assert.Empty(t, rep.Violations)
				if strings.HasPrefix(tc.file, "netreduce") {
					assert.Positive(t, rep.AggChecked)
					assert.Zero(t, rep.AggUnchecked)
				}
				return
			}
			// The corrupted frames: those with a corrupt comment, and
			// byte-exact copies of them further on (the switch forwards an
			// ACK unchanged).
			recs, err := pcapio.NewReader("run.pcapng", bytes.NewReader(b))
			require.NoError(t, err)
			var corrupted []int
			var bad [][]byte
			for i := 0; ; i++ {
				r, err := recs.Next()
				if err != nil {
					break
				}
				switch {
				case pcapio.IsGhost(r.Comments):
				case len(r.Comments) > 0 && strings.Contains(r.Comments[0], "corrupt"):
					corrupted = append(corrupted, i)
					bad = append(bad, r.Data)
				default:
					for _, c := range bad {
						if bytes.Equal(c, r.Data) {
							corrupted = append(corrupted, i)
							break
						}
					}
				}
			}
			// They are the faults, not violations: counted as injected.
			assert.Empty(t, rep.Violations)
			assert.Equal(t, len(corrupted), rep.BadICRC)
			assert.Equal(t, len(corrupted), rep.InjectedKinds["corrupt"]+rep.InjectedKinds["corrupt (forwarded)"])
			assert.Positive(t, rep.Ghosts)
			assert.Positive(t, rep.AggChecked)
		})
	}
}

// TestCheckLongAggregation: agg-sum on a capture longer than the frames
// it holds back for time order (4096), so frame buffers are reused while
// contributions are still held, with losses and duplicates replacing
// contributions: every result is checked and matches.
func TestCheckLongAggregation(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Mode, cfg.Seed = 4, 2<<20, 16, emu.NetReduce, 11
	rep := ckReport(t, ckCapture(t, cfg, "loss 0.2% duplicate 0.2%"))
	assert.Empty(t, rep.Violations)
	// Each worker's 2 MiB is 2048 result frames at the default MTU.
	assert.GreaterOrEqual(t, rep.AggChecked, 4*2048)
}

// TestCheckLiveEmu: captures of faulted emulator runs conform from every
// vantage point; the corrupted frames' bad ICRCs are injected faults.
func TestCheckLiveEmu(t *testing.T) {
	for _, tc := range []struct {
		mode emu.Mode
		seed uint64
	}{{emu.NetReduce, 11}, {emu.NetReduce, 12}, {emu.Ring, 13}} {
		t.Run(fmt.Sprintf("%v-%d", tc.mode, tc.seed), func(t *testing.T) {
			rep := ckReport(t, ckEmu(t, tc.mode, tc.seed, "loss 2% corrupt 0.5%", "dup class=data every=40"))
			assert.Empty(t, rep.Violations)
			assert.Positive(t, rep.BadICRC)
			// A corrupted frame that a bit error made unreadable, or that was
			// also dropped, has no bad ICRC to count.
			assert.LessOrEqual(t, rep.BadICRC, rep.InjectedKinds["corrupt"]+rep.InjectedKinds["corrupt (forwarded)"])
		})
	}
}

// The checker reads captures of any topology by their link names: a
// spine-leaf run (two spines, so ECMP) with drops on named links and loss
// conforms, every connection is found, and a NetReduce job under one leaf
// has every result checked against the sum of its inputs.
func TestCheckSpineLeafCaptures(t *testing.T) {
	spec, err := topo.ParseFlag("spine-leaf:leaves=2,hosts=4,spines=2,uplink=20G")
	require.NoError(t, err)
	for seed := uint64(1); seed <= 3; seed++ {
		for _, mode := range []emu.Mode{emu.Ring, emu.NetReduce} {
			cfg := emu.DefaultConfig()
			cfg.Mode, cfg.TensorBytes, cfg.MsgLen, cfg.Seed, cfg.Timeout = mode, 64<<10, 8, seed, 8
			cfg.Topology, err = spec.Build(topo.LinkParams{Rate: 10e9, Latency: time.Microsecond})
			require.NoError(t, err)
			ranks := []string{"h0", "h4", "h1", "h5", "h2", "h6", "h3", "h7"}
			if mode == emu.NetReduce {
				ranks = []string{"h4", "h5", "h6", "h7"} // under leaf1
			}
			cfg.Jobs = []emu.JobSpec{{Name: "j", Ranks: ranks}}
			n, err := faults.ParseNetem("loss 0.5%")
			require.NoError(t, err)
			cfg.Netem = n
			for _, e := range []string{"drop link=leaf0-spine1 class=data nth=2", "drop link=h5-leaf1 class=data nth=3", "drop link=leaf1-h6 class=ack nth=1"} {
				ev, err := faults.Parse(e)
				require.NoError(t, err)
				cfg.Events = append(cfg.Events, ev)
			}
			var buf bytes.Buffer
			cfg.Capture = &buf
			res, err := emu.Run(cfg)
			require.NoError(t, err)
			require.True(t, res.Exact)
			require.Greater(t, res.Faults.Dropped, uint64(0))
			rep := ckReport(t, buf.Bytes())
			assert.True(t, rep.Conforms, "%v seed %d: %v", mode, seed, rep.Violations)
			assert.Equal(t, len(ranks), rep.Connections, "%v seed %d: one RC connection per rank (to its successor)", mode, seed)
			if mode == emu.NetReduce {
				assert.Greater(t, rep.AggChecked, 0)
				assert.Zero(t, rep.AggUnchecked, "%v seed %d", mode, seed)
			}
		}
	}
}

// Two NetReduce jobs on one switch (rings 0 and 1) and a ring job beside
// them on shared hosts: the checker tells the rings apart by their INA
// headers and checks every result of both.
func TestCheckMultiJobCapture(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = 8, 64<<10, 8, 4
	cfg.Jobs = []emu.JobSpec{
		{Name: "a", Mode: emu.NetReduce, Ranks: []string{"h0", "h1", "h2", "h3"}},
		{Name: "b", Mode: emu.NetReduce, Ranks: []string{"h4", "h5", "h6", "h7"}},
		{Name: "c", Mode: emu.Ring, Ranks: []string{"h7", "h5", "h3", "h1"}},
	}
	rep := ckReport(t, ckCapture(t, cfg, "loss 0.5%"))
	assert.True(t, rep.Conforms, "%v", rep.Violations)
	assert.Equal(t, 12, rep.Connections)
	assert.Greater(t, rep.AggChecked, 0)
	assert.Zero(t, rep.AggUnchecked)
}

// Multi-rack NetReduce captures (ranks placed across the racks in turn,
// f32, so the tree's reduction order differs from rank order): clean and
// with loss on every link, and with a partial, a total and a notification
// lost, they conform, every result checked against the tree-order sum
// the checker learns from the partials' rank sets, the switch-to-switch
// links kept out of the stream rules. A result whose data is changed
// (its ICRC recomputed) is an agg-sum violation.
func TestCheckMultiRackCaptures(t *testing.T) {
	cfg := emu.DefaultConfig()
	p := topo.LinkParams{Rate: 10e9, Latency: time.Microsecond}
	up := p
	up.Rate = 20e9
	tp, err := topo.SpineLeaf(2, 2, 1, p, up)
	require.NoError(t, err)
	cfg.Topology, cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Timeout = tp, 4, 64<<10, 8, 8
	cfg.Jobs = []emu.JobSpec{{Name: "j", Ranks: []string{"h0", "h2", "h1", "h3"}}}
	var last []byte
	for _, c := range []struct {
		netem  string
		events []string
	}{
		{"", nil},
		{"loss 1%", nil},
		{"", []string{"drop link=leaf0-spine0 qp=0xFFFF00 nth=5", "drop link=spine0-leaf1 qp=0xFFFE00 nth=9", "drop link=leaf1-spine0 qp=0xFFFD00 nth=1"}},
	} {
		cfg.Seed, cfg.Events = 3, nil
		for _, e := range c.events {
			ev, err := faults.Parse(e)
			require.NoError(t, err)
			cfg.Events = append(cfg.Events, ev)
		}
		last = ckCapture(t, cfg, c.netem)
		rep := ckReport(t, last)
		assert.True(t, rep.Conforms, "%s %v: %v", c.netem, c.events, rep.Violations)
		assert.Positive(t, rep.AggChecked)
		assert.Zero(t, rep.AggUnchecked)
		tree := 0
		for _, inf := range rep.Inferences {
			if strings.Contains(inf, "switch-to-switch frames") {
				tree++
			}
		}
		assert.Equal(t, 2, tree, "both leaf-spine links are seen as such: %v", rep.Inferences)
	}
	// Tamper with one result on its last hop: same length, fresh ICRC.
	r, err := pcapio.NewReader("run", bytes.NewReader(last))
	require.NoError(t, err)
	recs, names, err := r.All()
	require.NoError(t, err)
	var v frames.View
	for _, rec := range recs {
		if names[rec.Info.InterfaceIndex] != "leaf1-h3" || v.Parse(rec.Data) != nil || v.Opcode() != wire.WriteMiddle {
			continue
		}
		at := bytes.Index(last, rec.Data)
		require.GreaterOrEqual(t, at, 0)
		f := last[at : at+len(rec.Data)]
		require.NoError(t, v.Parse(f))
		v.Payload()[5] ^= 0x40
		v.SetICRC()
		break
	}
	rep := ckReport(t, last)
	assert.Equal(t, 1, rep.RuleCounts()[capcheck.RuleAggSum], "%v", rep.Violations)
	require.NotEmpty(t, rep.Violations)
	assert.Contains(t, rep.Violations[0].Detail, "tree-order f32 sum")
}
