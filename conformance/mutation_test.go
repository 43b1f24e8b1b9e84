package conformance_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A mutation re-introduces a bug the suites exist to catch: in file, old
// (which must occur exactly once) becomes new.
type mutation struct {
	name, file, old, new string
	// suites are the suites that must catch it (nil: aggregation).
	suites []string
	// args are more conformance flags the suites run with.
	args []string
}

// mutations are the bugs the suites (issue 11) or users found on main,
// each put back as it was.
var mutations = []mutation{
	{
		// The switch took a first packet's message from its 8-bit MsgID
		// widened by an int8 difference: a frame 128+ messages late looked
		// like a future message.
		name: "int8-msgid-widening",
		file: "emu/netreduce/netreduce.go",
		old:  "\tm, off := c.locate(psn)\n\tif first {",
		new:  "\tm, off := c.locate(psn)\n\tif first && c.msg >= 0 {\n\t\tm, off = c.msg+int64(int8(h.MsgID()-uint8(c.msg))), 0\n\t}\n\tif first {",
	},
	{
		// The requester counted a NAK's implicit acknowledgement as
		// progress only when it completed a WQE: the retry in progress
		// never ended and timeouts used up the budget.
		name: "nak-progress-rule",
		file: "roce/requester.go",
		old:  "if done > 0 || (advanced && r.profile == Commodity) {",
		new:  "if _ = advanced; done > 0 {",
	},
	{
		// The CLT did not bind a ring connection to its member's port: a
		// forged frame from another port was aggregated. The switches'
		// port security now drops every forgery before the accelerator
		// sees it, so only a switch without it (--port-security off, a
		// quarter of the multirack suite's cases) still depends on this
		// binding; the aggregation and tenants suites, which run with port
		// security on, no longer reach it.
		name:   "missing-port-binding",
		file:   "emu/netreduce/netreduce.go",
		old:    "\t} else if c.port != port {\n\t\trs.PortDrops++ // a member's addresses from another port: forged\n\t\treturn Dropped\n\t}",
		new:    "\t}",
		suites: []string{"multirack"},
	},
	{
		// A leaf knew only its local senders' connections: another rack's
		// rank's frame forged by a host under this leaf passed as
		// ordinary traffic to its receiver (found by the multirack suite;
		// with port security on it never reaches the leaf's accelerator,
		// so the suite's port-security-off cases catch it).
		name:   "leaf-forwards-remote-forgeries",
		file:   "emu/netreduce/netreduce.go",
		old:    "\t\t\ta.clt[c.key()] = &conn{ring: r, rank: c.Rank, msg: -1, remote: true}\n",
		new:    "",
		suites: []string{"multirack"},
	},
	{
		// A leaf whose partial went up but got no total did not send it
		// again: a lost partial or total stalled the ring for good.
		name:   "no-partial-resend",
		file:   "emu/netreduce/netreduce.go",
		old:    "\t\trs.PartialResends++\n\t\ta.sendPartial(r, g, m, off, KindPartialResend, emit)\n\t\treturn Resent",
		new:    "\t\treturn Dropped",
		suites: []string{"multirack"},
	},
	{
		// A GPU of an intra-machine stage sent its next step's transfer
		// before the previous step's had landed: a ring reduce-scatter of
		// four GPUs passed on partial sums not yet complete.
		name:   "intra-step-does-not-wait",
		file:   "emu/collective/intrastage.go",
		old:    "\t\tif x.step > st.got[g] {\n\t\t\treturn\n\t\t}\n",
		new:    "",
		suites: []string{"schemes"},
	},
	{
		// A ring kept only the results that reached a rank in the
		// all-gather, not the chunk it reduced itself: a scheme's GPU held
		// a piece of zeros.
		name:   "ring-keeps-gathered-results-only",
		file:   "emu/collective/ring.go",
		old:    "\t\tif o := j.out[w.Rank]; o != nil {",
		new:    "\t\tif o := j.out[w.Rank]; o != nil && s >= j.n-1 {",
		suites: []string{"schemes"},
	},
	{
		// Only the tree's own ports were fabric for a ring: its frames
		// between racks that ECMP or a direct leaf-leaf link put off the
		// tree (results re-sent by the sender's leaf, released messages,
		// ACKs) were dropped as forgeries, and the job stalled on any
		// fabric of several paths (2-3 spines, a triangle of switches).
		name:   "only-tree-ports-are-fabric",
		file:   "emu/netreduce/tree.go",
		old:    "for _, p := range t.Trunks {",
		new:    "for _, p := range t.Trunks[:0] {",
		suites: []string{"multirack"},
	},
	{
		// A leaf that lost a total, and whose ranks got that message's
		// results from another leaf's cache, never fetched it again: with
		// window 1 and one-packet messages the next message found its
		// aggregator held for ever.
		name:   "lost-total-not-fetched",
		file:   "emu/netreduce/netreduce.go",
		old:    "a.fetchTotal(r, m-w, off, emit)",
		new:    "_ = a.fetchTotal",
		suites: []string{"multirack"},
	},
	{
		// Switches did not bind host ports to their NICs: a forgery of a
		// Ring-AllReduce (or wa, or a scheme's ring) WRITE entering by
		// another host's port was written, whatever other jobs ran, and a
		// NetReduce forgery met only the accelerator's binding.
		name:   "no-port-security",
		file:   "emu/fabric/fabric.go",
		old:    "if !cfg.LearnMACs && !cfg.OpenPorts {",
		new:    "if false {",
		suites: []string{"tenants", "schemes"},
	},
}

// TestSuitesCatchReintroducedBugs proves the suites' power: for each
// mutation it builds inaemu from a copy of this module with the bug put
// back and runs the default conformance run (100 cases) of each suite
// that must catch it at three seeds. Every run must fail with a shrunk
// counterexample that replays: `inaemu run --scenario` on it fails with
// the mutant (when the report's replay is such a run) and passes with the
// real code.
func TestSuitesCatchReintroducedBugs(t *testing.T) {
	requireAllCaught(t, mutations, []string{"1", "2", "3"})
}

// requireAllCaught builds inaemu once and requires each of ms caught at
// each of seeds (requireCaught), one subtest per mutation.
func requireAllCaught(t *testing.T, ms []mutation, seeds []string) {
	if testing.Short() {
		t.Skip("builds a mutant binary per mutation; skipped with -short")
	}
	root, err := filepath.Abs("..")
	require.NoError(t, err)
	work := t.TempDir()
	good := filepath.Join(work, "inaemu")
	build(t, root, good)
	for _, m := range ms {
		t.Run(m.name, func(t *testing.T) { requireCaught(t, root, work, good, m, seeds) })
	}
}

// requireCaught builds inaemu from a copy of the module at root (in work)
// with mutation m put back, runs the default conformance run (100 cases,
// with m.args) of each suite that must catch it at each seed, and
// requires each to fail with a shrunk counterexample that the mutant
// fails when replayed (if the report's replay is a run) and the real
// code (the binary good) passes.
func requireCaught(t *testing.T, root, work, good string, m mutation, seeds []string) {
	src := filepath.Join(work, m.name)
	copyModule(t, root, src)
	p := filepath.Join(src, m.file)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Equal(t, 1, strings.Count(string(b), m.old), "the mutation no longer applies to %s: update it", m.file)
	require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(b), m.old, m.new, 1)), 0o644))
	bin := filepath.Join(work, m.name+".bin")
	build(t, src, bin)
	suites := m.suites
	if suites == nil {
		suites = []string{"aggregation"}
	}
	for _, suite := range suites {
		for _, seed := range seeds {
			out := filepath.Join(work, m.name+"-"+suite+"-"+seed)
			cmd := exec.Command(bin, append([]string{"conformance", "--suite", suite, "--count", "100", "--seed", seed, "--json", "--out", out}, m.args...)...)
			stdout, err := cmd.Output()
			var ee *exec.ExitError
			require.True(t, errors.As(err, &ee), "seed %s: the suite must fail with the bug back in (err %v)", seed, err)
			var doc struct {
				Properties []struct {
					Passed         bool    `json:"passed"`
					Cases          int     `json:"cases"`
					Counterexample *string `json:"counterexample"`
					Failure        string  `json:"failure"`
					Replay         string  `json:"replay"`
				} `json:"properties"`
			}
			require.NoError(t, json.Unmarshal(stdout, &doc))
			require.Len(t, doc.Properties, 1)
			pr := doc.Properties[0]
			require.False(t, pr.Passed)
			require.NotNil(t, pr.Counterexample, "seed %s: a counterexample file", seed)
			t.Logf("%s seed %s: caught at case %d: %s", suite, seed, pr.Cases, pr.Failure)
			// The shrunk scenario replays: the mutant fails it (when the
			// report's replay is the run of it; a failure seen in a
			// run's counters, or in one job's figures moved by
			// another's faults, which takes two runs, replays with the
			// conformance command), the real code passes it.
			if strings.HasPrefix(pr.Replay, "inaemu run --scenario ") {
				require.Error(t, exec.Command(bin, "run", "--scenario", *pr.Counterexample).Run(), "%s seed %s: the mutant replays its failure", suite, seed)
			}
			o, err := exec.Command(good, "run", "--scenario", *pr.Counterexample).CombinedOutput()
			require.NoError(t, err, "%s seed %s: the real code passes the counterexample: %s", suite, seed, o)
		}
	}
}

func build(t *testing.T, dir, out string) {
	t.Helper()
	cmd := exec.Command("go", "build", "-o", out, "./cmd/inaemu")
	cmd.Dir = dir
	o, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build in %s: %s", dir, o)
}

// copyModule copies the module's Go sources and go.mod/go.sum.
func copyModule(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			if n := d.Name(); rel != "." && (strings.HasPrefix(n, ".") || n == "bin" || n == "testdata") {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		// Sources, and the files they embed (the CSV model files, the
		// Lua dissector the CLI installs).
		if !strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, ".s") && !strings.HasSuffix(p, ".csv") && !strings.HasSuffix(p, ".lua") && rel != "go.mod" && rel != "go.sum" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	require.NoError(t, err)
}
