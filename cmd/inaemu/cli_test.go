package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/units"
)

// runCtx runs a command line with a context, as main does.
func runCtx(ctx context.Context, args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = runContext(ctx, args, &o, &e)
	return code, o.String(), e.String()
}

// run's flags are the scenario's options, one flag each, and its own few;
// a scenario key and its flag set the same field, so a file and the
// command line give the same run.
func TestRunFlagsAreTheScenarioOptions(t *testing.T) {
	run := rootCommand(io.Discard, io.Discard)
	cmd, _, err := run.Find([]string{"run"})
	require.NoError(t, err)
	var flags []string
	cmd.Flags().VisitAll(func(f *pflag.Flag) { flags = append(flags, f.Name) })
	var options []string
	for _, o := range scenario.Options() {
		options = append(options, o.FlagName())
		assert.Contains(t, flags, o.FlagName(), "scenario key %s has no flag on run", o.Key)
	}
	own := []string{"scenario", "max-memory", "pcap", "backend", "prefix", "dut", "dut-cmd", "dut-ready", "dut-log", "units", "json", "help"} // not settings of a run a file describes
	for _, f := range flags {
		assert.True(t, slices.Contains(options, f) || slices.Contains(own, f), "--%s is neither an option nor one of run's own flags", f)
	}

	// Key by key, a file and a flag give the same scenario.
	sample := map[string]string{"seed": "7", "netem": "loss 1%", "loss": "1%", "reorder": "5%", "duplicate": "1%", "corrupt": "1%",
		"faults": "drop port=0 nth=1", "topology": "star:hosts=4", "switch_memory": "64MiB", "workers": "4", "compress": "2^-10",
		"traffic": "all-to-all", "sink": "h2", "flow_rate": "1G", "pfc_alpha": "1/8", "pfc_headroom": "100KB", "sched": "dwrr",
		"nic_rx_rate": "5G", "nic_rx_buffer": "256KiB", "chunks": "8", "scheduler": "themis", "policy": "scf",
		"collective": "reduce-scatter", "consistency": "off", "ina_dims": "2"}
	dir := t.TempDir()
	for _, o := range scenario.Options() {
		v := sample[o.Key]
		if v == "" {
			v = o.Default
		}
		require.NotEmpty(t, v, o.Key)
		yamlValue := v
		if o.Kind == scenario.List {
			yamlValue = "[" + v + "]"
		}
		if o.Key == "topology" {
			yamlValue = "{kind: star, hosts: 4}"
		}
		file := filepath.Join(dir, o.Key+".yaml")
		require.NoError(t, os.WriteFile(file, []byte(o.Key+": "+yamlValue+"\n"), 0o644))
		fromFile, err := scenario.Load(file)
		require.NoError(t, err, o.Key)

		c := newCommand("x", "", io.Discard, io.Discard, nil)
		jf := addJobFlags(c, scenario.JobGroup, scenario.LinkGroup, scenario.FaultGroup, scenario.NetworkGroup)
		require.NoError(t, c.Flags().Parse([]string{"--" + o.FlagName(), v}), o.Key)
		assert.Equal(t, fromFile, &jf.over, "--%s %s and %s: %s", o.FlagName(), v, o.Key, yamlValue)
	}
}

// --help (and -h, and Go's -help) prints the usage on stdout and exits 0,
// even after a bad flag; usage errors are one line on stderr and exit 2,
// including the library's own (unknown flags, required and exclusive
// flags), in the project's words.
func TestUsageFromTheLibrary(t *testing.T) {
	for _, args := range [][]string{{"run", "--bogus", "--help"}, {"replay", "-h"}, {"sweep", "-help"}, {"help", "run"}, {"--help"}} {
		code, out, errOut := runGuarded(args...)
		assert.Equal(t, 0, code, "%v", args)
		assert.Empty(t, errOut, "%v", args)
		assert.True(t, strings.HasPrefix(out, "Usage: inaemu"), "%v: %s", args, out)
	}
	for _, c := range []struct {
		args   []string
		prefix string
		want   string
	}{
		{[]string{"run", "--bogus"}, "inaemu run: ", "unknown flag: --bogus"},
		{[]string{"run", "--workers"}, "inaemu run: ", "flag needs an argument: --workers"},
		{[]string{"run", "--workers", "four"}, "inaemu run: ", `invalid argument "four" for "--workers" flag: want a whole number`},
		{[]string{"host", "--tap", "ina-h0", "--rank", "0"}, "inaemu host: ", "need --seed"},
		{[]string{"switch"}, "inaemu switch: ", "need --tap"},
		{[]string{"plot", "sweep", "x.json", "--x", "loss"}, "inaemu plot sweep: ", "need --out"},
		{[]string{"replay", "x.pcap", "--tap", "ina0", "--pps", "10", "--mbps", "5"}, "inaemu replay: ", "--pps and --mbps: choose one"},
		{[]string{"replay", "x.pcap", "--tap", "ina0", "--topspeed", "--multiplier", "2"}, "inaemu replay: ", "choose one"},
		{[]string{"replay", "x.pcap", "--tap", "ina0", "--through-switch", "--out", "y"}, "inaemu replay: ", "--tap and --through-switch: choose one"},
		{[]string{"replay", "x.pcap", "--through-switch"}, "inaemu replay: ", "need --out"},
		{[]string{"tap"}, "inaemu tap: ", "want 'up' or 'down'"},
		{[]string{"tap", "sideways"}, "inaemu tap: ", `unknown command "sideways"`},
		{[]string{"decodez"}, "inaemu: ", `unknown command "decodez" for "inaemu"; did you mean decode?`},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runGuarded(c.args...)
			assert.Empty(t, out)
			oneLine(t, code, errOut, c.prefix, c.want)
			assert.True(t, strings.HasSuffix(errOut, "--help')\n"), errOut)
		})
	}
	// Flags come before or after the positionals, and Go's -name still
	// works for a long flag.
	for _, args := range [][]string{
		{"decode", "-json", checkGolden("icrc.pcap")},
		{"decode", checkGolden("icrc.pcap"), "--json"},
		{"decode", "--json", checkGolden("icrc.pcap")},
	} {
		code, out, errOut := runCLI(args...)
		assert.Equal(t, 0, code, "%v: %s", args, errOut)
		assert.True(t, strings.HasPrefix(out, "{"), "%v: JSON lines", args)
	}
}

// Shell completion comes from the library: scripts for bash, zsh and
// fish, and the words a flag takes.
func TestCompletion(t *testing.T) {
	for _, sh := range []string{"bash", "zsh", "fish"} {
		code, out, errOut := runCLI("completion", sh)
		assert.Equal(t, 0, code, errOut)
		assert.Contains(t, out, "inaemu", sh)
	}
	code, out, _ := runCLI("__complete", "run", "--mode", "")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "fr\nhier\nnetreduce\npn\npr\nring\nta\n")
	_, out, _ = runCLI("__complete", "")
	for _, c := range []string{"run", "check", "decode", "sweep", "conformance", "topo", "plot"} {
		assert.Contains(t, out, c+"\t", "completes command %s", c)
	}
}

// Ctrl-C (the context ending) stops a run at its next poll: one line on
// stderr says how far it got, the capture is closed and reads to its end,
// and the exit status is 130; --json still prints the result so far.
func TestRunInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	pcap := filepath.Join(t.TempDir(), "stopped.pcapng")
	code, out, errOut := runCtx(ctx, "run", "--workers", "4", "--tensor", "4MiB", "--seed", "3", "--pcap", pcap)
	assert.Equal(t, exitInterrupted, code)
	assert.Contains(t, out, "inaemu run: netreduce allreduce, 4 workers", "the header, then nothing on stdout")
	assert.Equal(t, 1, strings.Count(out, "\n"), out)
	assert.Regexp(t, `^inaemu run: interrupted at \S+ of virtual time: \d+ of \d+ results received \(\d+%\), \d+ frames sent; capture \S+stopped.pcapng closed \(seed 3\)\n$`, errOut)
	recs, names, err := pcapio.ReadAllNamed(pcap)
	require.NoError(t, err, "the capture reads to its end")
	assert.NotEmpty(t, recs)
	assert.Contains(t, names, "port0-in")

	code, out, errOut = runCtx(ctx, "run", "--workers", "4", "--tensor", "4MiB", "--seed", "3", "--json")
	assert.Equal(t, exitInterrupted, code)
	var res struct {
		Exact bool   `json:"exact"`
		Error string `json:"error"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &res), out)
	assert.False(t, res.Exact)
	assert.Contains(t, res.Error, "interrupted at")
	assert.Contains(t, errOut, "inaemu run: interrupted at")

	// A sweep stops too: no new runs, the ones under way at their poll.
	code, _, errOut = runCtx(ctx, "sweep", "--workers", "3", "--tensor", "64KiB", "--seeds", "1", "--modes", "ring", "--loss", "0")
	assert.Equal(t, exitInterrupted, code)
	assert.Regexp(t, `^inaemu sweep: interrupted after \d of 1 runs: context canceled\n$`, errOut)
}

// SIGINT to a real process: the run stops cleanly, says what was done,
// leaves a whole capture and exits 130. The signal is sent once the run
// has printed its header (no sleeps: the run takes seconds, the signal
// arrives within milliseconds, and a signal before the first poll is
// seen there too).
func TestRunSIGINT(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	bin := inaemuBinary(t)
	pcap := filepath.Join(t.TempDir(), "sigint.pcapng")
	cmd := exec.Command(bin, "run", "--workers", "8", "--tensor", "16MiB", "--seed", "1", "--pcap", pcap)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	sc := bufio.NewScanner(stdout)
	require.True(t, sc.Scan(), "the header")
	assert.Contains(t, sc.Text(), "inaemu run: netreduce allreduce, 8 workers")
	require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
	for sc.Scan() {
		t.Errorf("nothing more on stdout: %q", sc.Text())
	}
	err = cmd.Wait()
	var ee *exec.ExitError
	require.True(t, errors.As(err, &ee), "%v", err)
	assert.Equal(t, 130, ee.ExitCode())
	assert.Regexp(t, `^inaemu run: interrupted at \S+ of virtual time: \d+ of \d+ results received \(\d+%\), \d+ frames sent; capture \S+ closed \(seed 1\)\n$`, stderr.String())
	recs, _, err := pcapio.ReadAllNamed(pcap)
	require.NoError(t, err)
	assert.NotEmpty(t, recs)
}

// On a terminal, run, sweep and conformance show a progress bar on
// stderr that reaches the total; on a pipe or a file (any writer that is
// no terminal) and with --json there is none: stderr stays empty.
func TestProgressBarOnlyOnATerminal(t *testing.T) {
	var bars []*progressBar
	newBar := startProgressHook
	startProgressHook = func(b *progressBar) { bars = append(bars, b) }
	defer func() { startProgressHook = newBar }()

	// Not a terminal: no bar, nothing on stderr.
	code, _, errOut := runCLI("run", "--workers", "4", "--tensor", "256KiB", "--seed", "1")
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.Empty(t, bars)

	isTerm := stderrIsTerminal
	stderrIsTerminal = func(io.Writer) bool { return true }
	defer func() { stderrIsTerminal = isTerm }()
	code, out, errOut := runCLI("run", "--workers", "4", "--tensor", "256KiB", "--seed", "1")
	require.Equal(t, 0, code, errOut)
	require.Len(t, bars, 1)
	assert.Equal(t, bars[0].total, bars[0].last, "the bar reached its total")
	assert.Positive(t, bars[0].total)
	assert.Contains(t, out, "EXACT", "the report follows the bar")
	assert.NotContains(t, out, "inaemu run [", "the bar is on stderr only")

	_, out, errOut = runCLI("run", "--workers", "4", "--tensor", "256KiB", "--seed", "1", "--json")
	assert.Len(t, bars, 1, "no bar with --json")
	assert.Empty(t, errOut)
	assert.True(t, json.Valid([]byte(out)))

	code, _, errOut = runCLI("sweep", "--workers", "3", "--tensor", "64KiB", "--seeds", "2", "--modes", "ring", "--loss", "0,1%", "--seed", "1")
	require.Equal(t, 0, code, errOut)
	require.Len(t, bars, 2)
	assert.Equal(t, int64(4), bars[1].last, "2 cells × 2 seeds")
	assert.Equal(t, int64(4), bars[1].total)
}

// A rate or a time that reads differently than a user may expect gets
// one note on stderr, from a flag or a scenario file; plain spellings get
// none. The run is the same either way.
func TestNotesOnSpellings(t *testing.T) {
	base := []string{"run", "--workers", "2", "--tensor", "64KiB", "--seed", "1", "--json"}
	code, _, errOut := runCLI(append(base, "--link", "10Gbps", "--latency", "5", "--netem", "delay 1us 3", "--fault", "delay=7 port=0 nth=1")...)
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, []string{
		"inaemu: note: --link 10Gbps is 80 Gbit/s: tc reads 'bps' as bytes per second; write 10Gbit or 10G for bits",
		"inaemu: note: --latency 5 is 5ns: tc reads a bare time as nanoseconds (netem delay, iproute2 6.9 and later; tc(8) and older tc say microseconds); write 5us or 5ms",
		"inaemu: note: netem 'delay 1us 3': 3 is 3ns: tc reads a bare time as nanoseconds (netem delay, iproute2 6.9 and later; tc(8) and older tc say microseconds); write 3us or 3ms",
		"inaemu: note: --fault 'delay=7 port=0 nth=1': delay=7 is 7ns: tc reads a bare time as nanoseconds (netem delay, iproute2 6.9 and later; tc(8) and older tc say microseconds); write 7us or 7ms",
	}, strings.Split(strings.TrimSpace(errOut), "\n"))
	_, bytesOut, _ := runCLI(append(base, "--link", "10Gbps", "--latency", "5")...)
	_, bitsOut, _ := runCLI(append(base, "--link", "80G", "--latency", "5ns")...)
	assert.Equal(t, num(t, decodeJSON(t, bitsOut), "virtual_ns"), num(t, decodeJSON(t, bytesOut), "virtual_ns"), "10Gbps is 80G")

	code, _, errOut = runCLI(append(base, "--link", "10G", "--latency", "1us", "--max-time", "0.5s")...)
	require.Equal(t, 0, code)
	assert.Empty(t, errOut, "no note for plain spellings")

	file := filepath.Join(t.TempDir(), "s.yaml")
	require.NoError(t, os.WriteFile(file, []byte("link: 1gbps\nmax_time: 90000000000\n"), 0o644))
	code, _, errOut = runCLI(append(base, "--scenario", file)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, errOut, "inaemu: note: scenario link: 1gbps is 8 Gbit/s")
	assert.Contains(t, errOut, "inaemu: note: scenario max_time: 90000000000 is 1m30s")

	_, _, errOut = runCLI("sweep", "--workers", "2", "--tensor", "64KiB", "--seeds", "1", "--modes", "ring", "--loss", "0", "--links", "1gbps", "--latency", "100")
	assert.Contains(t, errOut, "inaemu: note: --links 1gbps is 8 Gbit/s")
	assert.Contains(t, errOut, "inaemu: note: --latency 100 is 100ns")
}

func decodeJSON(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m), s)
	return m
}

// The help says the bandwidth's unit as nccl-tests does, and the human
// report prints GB/s: bytes/time, 10^9 bytes per second, three
// significant digits; --units Gbit/s prints bits, and the JSON carries
// both.
func TestRunReportInGBps(t *testing.T) {
	_, out, _ := runCLI("run", "--workers", "4", "--tensor", "64KiB", "--msg-len", "8", "--seed", "42")
	m, _ := runJSON(t, "--workers", "4", "--tensor", "64KiB", "--msg-len", "8", "--seed", "42")
	alg, bus := num(t, m, "algbw_gbytes_per_s"), num(t, m, "busbw_gbytes_per_s")
	assert.Regexp(t, `(?m)^  time      \S+ virtual \(algbw [0-9.]+ GB/s, busbw [0-9.]+ GB/s\), `, out)
	assert.Contains(t, out, fmt.Sprintf("algbw %s GB/s, busbw %s GB/s", units.Sig3(alg), units.Sig3(bus)))
	_, out, _ = runCLI("run", "--workers", "4", "--tensor", "64KiB", "--msg-len", "8", "--seed", "42", "--units", "Gbit/s")
	assert.Contains(t, out, fmt.Sprintf("algbw %s Gbit/s, busbw %s Gbit/s", units.Sig3(num(t, m, "algbw_gbps")), units.Sig3(num(t, m, "busbw_gbps"))))
	code, _, errOut := runCLI("run", "--units", "MB/s")
	oneLine(t, code, errOut, "inaemu run: ", `--units "MB/s": want GB/s`)
	// A TAP run's bandwidth (a few MB/s) is not 0.00.
	assert.Equal(t, "0.00123 GB/s", units.GBps.Format(0.00984))
}
