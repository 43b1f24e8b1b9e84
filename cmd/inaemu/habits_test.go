package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Bare 'inaemu' prints the help on stdout and exits 0, listing 'help'
// and 'completion' with the commands; --help prints the same.
func TestBareInaemuPrintsHelp(t *testing.T) {
	code, out, errOut := runGuarded()
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	assert.True(t, strings.HasPrefix(out, "Usage: inaemu COMMAND"), out)
	for _, w := range []string{"\n  help ", "\n  completion ", "\n  run ", "Exit status:", "--version"} {
		assert.Contains(t, out, w)
	}
	_, help, _ := runGuarded("--help")
	assert.Equal(t, out, help)
}

// --version names the module version and the VCS revision from the
// build information, (devel) and vcs.modified included.
func TestVersion(t *testing.T) {
	code, out, errOut := runGuarded("--version")
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	assert.True(t, strings.HasPrefix(out, "inaemu "), out)
	assert.Equal(t, 1, strings.Count(out, "\n"), out)

	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/inaemu/inaemu", Version: "(devel)"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "4ef3372abcdef0123456789"}, {Key: "vcs.time", Value: "2026-11-27T18:00:00Z"}, {Key: "vcs.modified", Value: "true"}}}
	assert.Equal(t, "(devel), revision 4ef3372abcde of 2026-11-27T18:00:00Z with uncommitted changes (vcs.modified), go1.26.8", formatVersion(bi))
	bi.Main.Version, bi.Settings = "v1.2.0", bi.Settings[:1]
	assert.Equal(t, "v1.2.0, revision 4ef3372abcde, go1.26.8", formatVersion(bi))
	bi.Settings = nil
	assert.Contains(t, formatVersion(bi), "v1.2.0, revision unknown (built without VCS information")
}

// A mistyped long flag is a usage error (exit 2, one line) that names
// the nearest flag by edit distance; a flag near none is not guessed.
func TestDidYouMeanFlag(t *testing.T) {
	for _, c := range []struct {
		args         []string
		prefix, want string
	}{
		{[]string{"run", "--wokers", "4"}, "inaemu run: ", "unknown flag: --wokers; did you mean --workers?"},
		{[]string{"run", "--sed=3"}, "inaemu run: ", "unknown flag: --sed; did you mean --seed?"},
		{[]string{"run", "-wokers", "4"}, "inaemu run: ", "did you mean --workers?"},
		{[]string{"check", "x.pcap", "--vantge", "sender"}, "inaemu check: ", "did you mean --vantage?"},
		{[]string{"conformance", "--shrad", "0/2"}, "inaemu conformance: ", "did you mean --shard?"},
		{[]string{"topo", "show", "--jsn"}, "inaemu topo show: ", "did you mean --json?"},
	} {
		code, out, errOut := runGuarded(c.args...)
		assert.Empty(t, out)
		oneLine(t, code, errOut, c.prefix, c.want)
	}
	code, _, errOut := runGuarded("run", "--zzzzzz")
	oneLine(t, code, errOut, "inaemu run: ", "unknown flag: --zzzzzz")
	assert.NotContains(t, errOut, "did you mean")
	assert.Equal(t, 0, levenshtein("seed", "seed"))
	assert.Equal(t, 3, levenshtein("kitten", "sitting"))
}

// A wa job's refusal names --workers as given, not its ranks (the
// aggregator is a rank more): --workers 64 said "--workers 65".
func TestWAWorkersNamedAsGiven(t *testing.T) {
	code, out, errOut := runGuarded("run", "--mode", "wa", "--workers", "64")
	assert.Empty(t, out)
	oneLine(t, code, errOut, "inaemu run: ", "--workers 64: want 2..63 for --mode wa")
}

// Help, usage and --version on a full disk: one line, exit 74 (cobra
// printed its own write error first).
func TestHelpOnAFullDisk(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skipf("SKIP: no /dev/full here (%v): the full-disk case is not tested", err)
	}
	defer full.Close()
	for _, args := range [][]string{{"run", "--help"}, {}, {"help", "run"}, {"--version"}} {
		var e strings.Builder
		code := guarded(args, full, &e, run)
		assert.Equal(t, exitIO, code, "%v", args)
		assert.Equal(t, 1, strings.Count(e.String(), "\n"), "%v: %q", args, e.String())
		assert.Contains(t, e.String(), "standard output: no space left on device", "%v", args)
	}
}

// Every --json report is one JSON object on one line whose first field
// is its schema: inaemu.COMMAND/1.
func TestJSONOneStyle(t *testing.T) {
	small := []string{"--workers", "2", "--tensor", "4KiB", "--seed", "1", "--json"}
	for _, c := range []struct {
		schema string
		args   []string
	}{
		{"inaemu.run/1", append([]string{"run"}, small...)},
		{"inaemu.sweep/1", append([]string{"sweep", "--loss", "0", "--seeds", "1", "--modes", "ring"}, small...)},
		{"inaemu.check/1", []string{"check", checkGolden("icrc.pcap"), "--json"}},
		{"inaemu.conformance/1", []string{"conformance", "--suite", "gbn", "--count", "2", "--seed", "1", "--json"}},
		{"inaemu.topo.show/1", []string{"topo", "show", "--json"}},
		{"inaemu.model.appendix-a/1", []string{"model", "--json"}},
		{"inaemu.model.training/1", []string{"model", "--train", "alexnet", "--json"}},
		{"inaemu.codec.values/1", []string{"codec", "--bound", "6", "--values", "0.02", "--json"}},
	} {
		code, out, errOut := runGuarded(c.args...)
		assert.Contains(t, []int{0, 1}, code, "%v: %s", c.args, errOut)
		assert.Equal(t, 1, strings.Count(out, "\n"), "%v: one line", c.args)
		assert.True(t, strings.HasPrefix(out, `{"schema":"`+c.schema+`",`), "%v: %.80s", c.args, out)
	}
	assert.Equal(t, `{"schema":"x/1"}`, string(withSchema("x/1", []byte("{}"))))
	assert.Equal(t, `[1]`, string(withSchema("x/1", []byte("[1]"))))
}

// docs/reports.md names every key of the run, check, sweep and
// conformance JSON reports (the text labels beside them), and each
// command's --help points there.
func TestReportsDocumentsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../../docs/reports.md")
	if err != nil {
		t.Fatal(err)
	}
	small := []string{"--workers", "2", "--tensor", "4KiB", "--seed", "1", "--json"}
	for _, args := range [][]string{
		append([]string{"run"}, small...),
		{"check", checkGolden("psn_order.pcapng"), "--vantage", "sender", "--json"},
		append([]string{"sweep", "--loss", "0", "--seeds", "1", "--modes", "ring"}, small...),
		{"conformance", "--suite", "gbn", "--count", "2", "--seed", "1", "--json"},
	} {
		_, out, _ := runGuarded(args...)
		m := decodeJSON(t, out)
		var missing []string
		for k := range m {
			if !strings.Contains(string(doc), "`"+k+"`") && !strings.Contains(string(doc), "`"+k+"{") && !strings.Contains(string(doc), "`"+k+"[]") {
				missing = append(missing, k)
			}
		}
		assert.Empty(t, missing, "%s --json keys not in docs/reports.md", args[0])
		_, help, _ := runGuarded(args[0], "--help")
		assert.Contains(t, help, "docs/reports.md", args[0])
	}
}

// The sweep table and the plot name the unit --units chose (GB/s by
// default), three significant digits.
func TestSweepAndPlotUnits(t *testing.T) {
	dir := t.TempDir()
	args := []string{"sweep", "--workers", "2", "--tensor", "4KiB", "--seed", "1", "--loss", "0", "--seeds", "1", "--modes", "ring"}
	_, out, _ := runGuarded(args...)
	assert.Contains(t, out, " algbw(GB/s)   busbw(GB/s) ")
	_, bits, _ := runGuarded(append(args, "--units", "Gbit/s")...)
	assert.Contains(t, bits, " algbw(Gbit/s) busbw(Gbit/s) ")
	assert.Regexp(t, `(?m)^ring .* \d\.\d\d +\d\.\d\d +0 +0$`, bits)
	_, js, _ := runGuarded(append(args, "--json")...)
	res := filepath.Join(dir, "s.json")
	require.NoError(t, os.WriteFile(res, []byte(js), 0o644))
	for unit, label := range map[string]string{"": "algbw (GB/s)", "Gbit/s": "algbw (Gbit/s)"} {
		svg := filepath.Join(dir, "p.svg")
		a := []string{"plot", "sweep", res, "--x", "loss", "--out", svg}
		if unit != "" {
			a = append(a, "--units", unit)
		}
		code, _, errOut := runGuarded(a...)
		require.Equal(t, 0, code, errOut)
		b, err := os.ReadFile(svg)
		require.NoError(t, err)
		assert.Contains(t, string(b), label)
	}
}
