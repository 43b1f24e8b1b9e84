package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// small keeps a CLI run quick: 4 workers × 64 KiB in 8 KiB messages.
var small = []string{"--workers", "4", "--tensor", "64KiB", "--msg-len", "8"}

func runArgs(args ...string) []string { return append([]string{"run"}, args...) }

func runJSON(t *testing.T, args ...string) (map[string]any, string) {
	t.Helper()
	code, out, errOut := runCLI(runArgs(append(append([]string{}, args...), "--json")...)...)
	require.Equal(t, 0, code, "stderr: %s", errOut)
	assert.Empty(t, errOut)
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	require.NoError(t, dec.Decode(&m), out)
	assert.False(t, dec.More(), "exactly one JSON object: %s", out)
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line")
	return m, out
}

func num(t *testing.T, m map[string]any, k string) float64 {
	t.Helper()
	v, ok := m[k]
	require.True(t, ok, "key %q missing", k)
	n, ok := v.(json.Number)
	require.True(t, ok, "key %q is %T, not a number", k, v)
	f, err := n.Float64()
	require.NoError(t, err)
	return f
}

func TestRunHelp(t *testing.T) {
	for _, h := range []string{"--help", "-h", "-help"} {
		code, out, errOut := runCLI("run", h)
		assert.Equal(t, 0, code)
		assert.Empty(t, errOut)
		for _, f := range []string{"workers", "mode", "window", "msg-len", "mtu", "tensor", "dtype", "link", "latency",
			"seed", "release", "pcap", "scenario", "json", "loss", "reorder", "duplicate", "corrupt", "fault"} {
			assert.Regexp(t, regexp.MustCompile(`(?m)^\s*--`+regexp.QuoteMeta(f)+`\b`), out, "--help lists --%s", f)
		}
		assert.Contains(t, out, "Usage: inaemu run")
	}
	// --help anywhere wins, even after other flags or with a bad one.
	code, out, _ := runCLI("run", "--workers", "1", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "--workers")
}

func TestRunUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--mode", "fast"}, []string{"mode", `"fast"`}},
		{[]string{"--mtu", "1000"}, []string{"--mtu 1000"}},
		{[]string{"--workers", "1"}, []string{"--workers 1"}},
		{[]string{"--workers", "65"}, []string{"--workers 65"}},
		{[]string{"--window", "33"}, []string{"--window 33"}},
		{[]string{"--msg-len", "256"}, []string{"--msg-len 256"}},
		{[]string{"--fault", "drop port=x"}, []string{`"port=x"`}},
		{[]string{"--fault", "explode port=1"}, []string{`"explode"`}},
		{[]string{"--fault", "drop port=1 dir=sideways"}, []string{`"dir=sideways"`}},
		{[]string{"--fault", "drop port=1", "--fault", "hold=0"}, []string{`"hold=0"`}},
		{[]string{"--bogus"}, []string{"bogus"}},
		{[]string{"--tensor", "3"}, []string{"--tensor 3", "f32"}},
		{[]string{"--tensor", "6", "--dtype", "f32"}, []string{"--tensor 6"}},
		{[]string{"--tensor", "1.3B"}, []string{"1.3B"}},
		{[]string{"--dtype", "f64"}, []string{"f64"}},
		{[]string{"--link", "fast"}, []string{"fast"}},
		{[]string{"--latency", "soon"}, []string{"soon"}},
		{[]string{"--release", "never"}, []string{"never"}},
		{[]string{"--transport", "v3"}, []string{"v3"}},
		{[]string{"--loss", "200%"}, []string{"200%"}},
		{[]string{"--retry-cnt", "8"}, []string{"retry"}},
		{[]string{"--workers", "four"}, []string{"four"}},
		{[]string{"extra"}, []string{`"extra"`}},
		{[]string{"--scenario", "/nonexistent/file.yaml"}, []string{"/nonexistent/file.yaml"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(runArgs(append(append([]string{}, small...), c.args...)...)...)
			assert.Equal(t, 2, code, "stdout %q stderr %q", out, errOut)
			assert.Empty(t, out, "nothing on stdout for a usage error")
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line on stderr: %q", errOut)
			assert.True(t, strings.HasPrefix(errOut, "inaemu run: "), errOut)
			for _, w := range c.want {
				assert.Contains(t, errOut, w)
			}
		})
	}
}

// Impossible settings are usage errors too, not job failures (exit 3) or
// runs of some other job (exit 0):
//   - --workers/--mtu/--msg-len/--window 0 are silently replaced by the
//     defaults (Scenario.Apply reads 0 as "not set"), so e.g. --workers 0
//     runs 8 workers and exits 0;
//   - --queue -1 is not validated: every frame the switch forwards is
//     tail-dropped and the job fails with RETRY_EXC_ERR (exit 3);
//   - --link NaN parses (ParseRate accepts NaN) and runs with "NaN links".
func TestRunUsageErrorsNotCaught(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--workers", "0"}, "--workers 0"},
		{[]string{"--mtu", "0"}, "--mtu 0"},
		{[]string{"--msg-len", "0"}, "--msg-len 0"},
		{[]string{"--window", "0"}, "--window 0"},
		{[]string{"--queue", "-1"}, "queue"},
		{[]string{"--link", "NaN"}, "NaN"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runCLI(runArgs(append(append([]string{"--seed", "1"}, small...), c.args...)...)...)
			assert.Equal(t, 2, code, "stdout %q stderr %q", out, errOut)
			assert.Contains(t, errOut, c.want)
		})
	}
}

func TestRunJSON(t *testing.T) {
	for _, mode := range []string{"netreduce", "ring"} {
		t.Run(mode, func(t *testing.T) {
			m, _ := runJSON(t, append([]string{"--mode", mode, "--seed", "42"}, small...)...)
			for _, k := range []string{"exact", "mode", "workers", "bytes", "virtual_ns", "algbw_gbytes_per_s", "busbw_gbytes_per_s", "algbw_gbps", "busbw_gbps",
				"frames_sent", "retransmissions", "naks", "timeouts", "icrc_drops", "fault_drops", "switch", "seed", "wall_ns"} {
				assert.Contains(t, m, k)
			}
			sw, ok := m["switch"].(map[string]any)
			require.True(t, ok, "switch is an object")
			for _, k := range []string{"aggregations", "result_resends", "clt_misses"} {
				assert.Contains(t, sw, k, "switch.%s", k)
			}
			assert.Equal(t, true, m["exact"])
			assert.Equal(t, mode, m["mode"])
			assert.Equal(t, 4.0, num(t, m, "workers"))
			assert.Equal(t, float64(64<<10), num(t, m, "bytes"))
			assert.Equal(t, 42.0, num(t, m, "seed"))
			vns := num(t, m, "virtual_ns")
			require.Greater(t, vns, 0.0)
			alg := num(t, m, "algbw_gbps")
			assert.InDelta(t, float64(64<<10)*8/vns, alg, 1e-9, "algbw = bytes*8/virtual_ns")
			assert.InDelta(t, alg*2*3/4, num(t, m, "busbw_gbps"), 1e-9, "busbw = algbw*2(n-1)/n")
			// nccl-tests' unit: GB/s, 10^9 bytes per second.
			algB := num(t, m, "algbw_gbytes_per_s")
			assert.InDelta(t, float64(64<<10)/vns, algB, 1e-9, "algbw = bytes/virtual_ns in GB/s")
			assert.InDelta(t, algB*2*3/4, num(t, m, "busbw_gbytes_per_s"), 1e-9, "busbw in GB/s")
			assert.Greater(t, num(t, m, "frames_sent"), 0.0)
			for _, k := range []string{"retransmissions", "naks", "timeouts", "icrc_drops", "fault_drops"} {
				assert.Equal(t, 0.0, num(t, m, k), k)
			}
			if mode == "netreduce" {
				// 64 KiB in messages of 8×1024-8 bytes: 8 full messages of
				// 8 packets and one of 64 bytes.
				assert.Equal(t, 65.0, num(t, sw, "aggregations"))
			} else {
				assert.Equal(t, 0.0, num(t, sw, "aggregations"))
			}
		})
	}
}

func TestRunJSONWithFaults(t *testing.T) {
	m, _ := runJSON(t, append([]string{"--seed", "3", "--fault", "drop port=0 dir=out class=data nth=1",
		"--fault", "corrupt port=2 dir=in class=data nth=5"}, small...)...)
	assert.Equal(t, true, m["exact"])
	assert.Equal(t, 1.0, num(t, m, "fault_drops"))
	assert.GreaterOrEqual(t, num(t, m, "icrc_drops"), 1.0)
	assert.Greater(t, num(t, m, "retransmissions"), 0.0)
}

// The same seed gives the same run: identical JSON but for wall time.
func TestRunSameSeedSameJSON(t *testing.T) {
	strip := regexp.MustCompile(`"wall_ns":\d+`)
	for _, extra := range [][]string{
		{"--mode", "netreduce"},
		{"--mode", "ring", "--loss", "0.5%", "--duplicate", "1%", "--reorder", "5%", "--corrupt", "0.2%"},
		{"--mode", "netreduce", "--netem", "loss 0.5% delay 2us 1us", "--fault", "dup port=1 dir=in class=data every=7"},
	} {
		args := append(append([]string{"--seed", "1234"}, small...), extra...)
		_, a := runJSON(t, args...)
		_, b := runJSON(t, args...)
		assert.Equal(t, strip.ReplaceAllString(a, ""), strip.ReplaceAllString(b, ""), "%v", extra)
		assert.Regexp(t, `"wall_ns":\d+`, a)
	}
	// A different seed draws different tensors and PSNs; with loss, a
	// different fault pattern.
	args := append(append([]string{}, small...), "--loss", "1%")
	_, a := runJSON(t, append(args, "--seed", "1")...)
	_, b := runJSON(t, append(args, "--seed", "2")...)
	assert.NotEqual(t, strip.ReplaceAllString(a, ""), strip.ReplaceAllString(b, ""))
}

func TestRunSummary(t *testing.T) {
	code, out, errOut := runCLI(runArgs(append([]string{"--seed", "987654"}, small...)...)...)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	assert.Contains(t, out, "seed 987654", "the header names the seed")
	assert.Regexp(t, `(?m)^\s*seed\s+987654$`, out)
	assert.Contains(t, out, "EXACT")
	assert.Contains(t, out, "netreduce")
	assert.Contains(t, out, "4 workers")
	assert.Contains(t, out, "64KiB")
}

// Without --seed a fresh seed is drawn and printed, and replaying it gives
// the same run.
func TestRunFreshSeedIsPrintedAndReplays(t *testing.T) {
	m1, out1 := runJSON(t, append(append([]string{}, small...), "--loss", "0.5%")...)
	m2, _ := runJSON(t, append(append([]string{}, small...), "--loss", "0.5%")...)
	s1, s2 := m1["seed"].(json.Number).String(), m2["seed"].(json.Number).String()
	assert.NotEqual(t, s1, s2, "two runs without --seed draw different seeds")
	_, replay := runJSON(t, append(append([]string{}, small...), "--loss", "0.5%", "--seed", s1)...)
	strip := regexp.MustCompile(`"wall_ns":\d+`)
	assert.Equal(t, strip.ReplaceAllString(out1, ""), strip.ReplaceAllString(replay, ""))

	code, out, _ := runCLI(runArgs(small...)...)
	require.Equal(t, 0, code)
	mm := regexp.MustCompile(`(?m)^\s*seed\s+(\d+)$`).FindStringSubmatch(out)
	require.NotNil(t, mm, "the summary prints the seed: %s", out)
	_, err := strconv.ParseUint(mm[1], 10, 64)
	assert.NoError(t, err)
}

func TestRunRetryExhaustionExit3(t *testing.T) {
	code, out, errOut := runCLI(runArgs(append([]string{"--seed", "1", "--mode", "ring", "--retry-cnt", "1", "--timeout", "4",
		"--fault", "drop port=2 dir=in class=data"}, small...)...)...)
	assert.Equal(t, 3, code, "stdout %s\nstderr %s", out, errOut)
	assert.Contains(t, errOut, "rank 2 send QP to rank 3")
	assert.Contains(t, errOut, "QPN 0x11")
	assert.Contains(t, errOut, "RETRY_EXC_ERR")
	assert.Contains(t, errOut, "--seed 1", "the replay hint")
	assert.Contains(t, out, "FAILED")
	assert.Regexp(t, `(?m)^\s*seed\s+1$`, out)

	// --json still prints the result (not exact, with the error) and exits 3.
	code, out, errOut = runCLI(runArgs(append([]string{"--json", "--seed", "1", "--mode", "ring", "--retry-cnt", "1", "--timeout", "4",
		"--fault", "drop port=2 dir=in class=data"}, small...)...)...)
	assert.Equal(t, 3, code)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m), out)
	assert.Equal(t, false, m["exact"])
	assert.Contains(t, m["error"], "RETRY_EXC_ERR")
	assert.Contains(t, errOut, "rank 2")
}

func TestRunScenarioFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "job.yaml")
	require.NoError(t, os.WriteFile(path, []byte(`
workers: 3
mode: ring
tensor: 32KiB
msg_len: 4
dtype: i32
link: 25G
seed: 5
faults:
  - drop port=0 dir=out class=data nth=1
`), 0o644))

	// The file alone.
	m, _ := runJSON(t, "--scenario", path)
	assert.Equal(t, 3.0, num(t, m, "workers"))
	assert.Equal(t, "ring", m["mode"])
	assert.Equal(t, float64(32<<10), num(t, m, "bytes"))
	assert.Equal(t, "i32", m["dtype"])
	assert.Equal(t, 5.0, num(t, m, "seed"))
	assert.Equal(t, 1.0, num(t, m, "fault_drops"))
	assert.Equal(t, true, m["exact"])

	// Flags given override the file; faults add up.
	m, _ = runJSON(t, "--scenario", path, "--workers", "4", "--seed", "9", "--mode", "netreduce",
		"--fault", "drop port=1 dir=in class=data nth=2")
	assert.Equal(t, 4.0, num(t, m, "workers"))
	assert.Equal(t, "netreduce", m["mode"])
	assert.Equal(t, 9.0, num(t, m, "seed"))
	assert.Equal(t, float64(32<<10), num(t, m, "bytes"), "not given: from the file")
	assert.Equal(t, "i32", m["dtype"], "not given: from the file")
	assert.Equal(t, 2.0, num(t, m, "fault_drops"), "the file's fault and the flag's")
	assert.Equal(t, true, m["exact"])

	// Flags given with their default value still override.
	m, _ = runJSON(t, "--scenario", path, "--dtype", "f32", "--workers", "8")
	assert.Equal(t, "f32", m["dtype"])
	assert.Equal(t, 8.0, num(t, m, "workers"))

	// The same scenario through flags only gives the same run.
	_, viaFile := runJSON(t, "--scenario", path)
	_, viaFlags := runJSON(t, "--workers", "3", "--mode", "ring", "--tensor", "32KiB", "--msg-len", "4", "--dtype", "i32",
		"--link", "25G", "--seed", "5", "--fault", "drop port=0 dir=out class=data nth=1")
	strip := regexp.MustCompile(`"wall_ns":\d+`)
	assert.Equal(t, strip.ReplaceAllString(viaFile, ""), strip.ReplaceAllString(viaFlags, ""))

	// Errors in the file are usage errors naming the file.
	bad := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("workers: 3\nwokers: 4\n"), 0o644))
	code, out, errOut := runCLI("run", "--scenario", bad)
	assert.Equal(t, 2, code)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "bad.yaml")
	assert.Contains(t, errOut, "wokers")
	require.NoError(t, os.WriteFile(bad, []byte("mode: fast\n"), 0o644))
	code, _, errOut = runCLI("run", "--scenario", bad)
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "mode")
	assert.Contains(t, errOut, "fast")
}

func TestRunPcap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.pcapng")
	code, out, errOut := runCLI(runArgs(append([]string{"--seed", "11", "--pcap", path,
		"--fault", "drop port=1 dir=out class=data nth=2"}, small...)...)...)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, path, "the summary names the capture")

	recs, err := pcapio.ReadAll(path)
	require.NoError(t, err)
	require.NotEmpty(t, recs)
	ghosts := 0
	for _, r := range recs {
		for _, c := range r.Comments {
			if strings.Contains(c, "(not delivered)") {
				ghosts++
			}
		}
	}
	assert.Equal(t, 1, ghosts, "the dropped frame is in the capture")

	b, err := os.ReadFile(path)
	require.NoError(t, err)
	ng, err := pcapgo.NewNgReader(bytes.NewReader(b), pcapgo.DefaultNgReaderOptions)
	require.NoError(t, err)
	n := 0
	for {
		if _, _, err := ng.ReadPacketData(); err != nil {
			break
		}
		n++
	}
	assert.Equal(t, len(recs), n)
	require.Equal(t, 8, ng.NInterfaces())
	for i := 0; i < 8; i++ {
		ifc, err := ng.Interface(i)
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("port%d-%s", i/2, []string{"in", "out"}[i%2]), ifc.Name)
	}

	// Same seed, same capture, byte for byte.
	path2 := filepath.Join(t.TempDir(), "again.pcapng")
	code, _, _ = runCLI(runArgs(append([]string{"--seed", "11", "--pcap", path2,
		"--fault", "drop port=1 dir=out class=data nth=2"}, small...)...)...)
	require.Equal(t, 0, code)
	b2, err := os.ReadFile(path2)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(b, b2), "captures of the same run differ")

	// A capture that cannot be created is an error, not a crash.
	code, _, errOut = runCLI(runArgs(append([]string{"--pcap", filepath.Join(t.TempDir(), "no", "such", "dir", "x.pcapng")}, small...)...)...)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, errOut, "x.pcapng")
}

func TestRunTopLevel(t *testing.T) {
	code, out, errOut := runCLI() // bare inaemu: the help, exit 0
	assert.Equal(t, 0, code)
	assert.Empty(t, errOut)
	assert.Contains(t, out, "run")
	code, out, _ = runCLI("--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "run")
	assert.Contains(t, out, "decode")
	code, _, errOut = runCLI("frobnicate")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "frobnicate")
}

// Every transport, dtype and release rule runs from the CLI.
func TestRunVariants(t *testing.T) {
	for _, extra := range [][]string{
		{"--transport", "v2-ipv6"},
		{"--transport", "v1"},
		{"--dtype", "f16"},
		{"--dtype", "i32", "--pattern", "ramp"},
		{"--release", "paper"},
		{"--mtu", "4096", "--msg-len", "2", "--window", "4"},
		{"--link", "100G", "--latency", "500ns"},
	} {
		m, _ := runJSON(t, append(append([]string{"--seed", "2"}, small...), extra...)...)
		assert.Equal(t, true, m["exact"], "%v", extra)
	}
}

// Timeouts on TAPs with no NAK and no fault injected are the kernel's
// queues, and the summary says so; any sign of loss, an injected fault or
// the emulator (whose timeouts follow from its own links) keeps it quiet.
func TestQueueingHintOnlyForUnexplainedTAPTimeouts(t *testing.T) {
	tapTimeouts := func() *emu.Result { return &emu.Result{Backend: "tap", Timeouts: 12} }
	hint := queueingHint(tapTimeouts())
	assert.Contains(t, hint, "12 timeouts, no NAKs and no faults injected")
	assert.Contains(t, hint, "raise --timeout")

	for name, r := range map[string]func(r *emu.Result){
		"emulated":     func(r *emu.Result) { r.Backend = "emu" },
		"no timeouts":  func(r *emu.Result) { r.Timeouts = 0 },
		"a NAK":        func(r *emu.Result) { r.NAKs = 1 },
		"a wire fault": func(r *emu.Result) { r.Faults.Dropped = 1 },
		"netem loss":   func(r *emu.Result) { r.Faults.Lost = 1 },
		"a delay":      func(r *emu.Result) { r.Faults.Delayed = 1 },
	} {
		res := tapTimeouts()
		r(res)
		assert.Empty(t, queueingHint(res), name)
	}
}

// A failed work request is named in the job's words: wa's WRs of the
// sum's way down were "WR 1099511627778" (the leg's bit 1<<40 and the
// message), ring's "WR 16777216" (step<<24 | message).
func TestFailedWRNamedInTheJobsWords(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--mode", "wa", "--fault", "drop port=0 dir=out class=data nth=300"},
			"inaemu run: job failed: rank 4 QP to rank 0 (QPN 0x10000): message 2 of 0..8 of the sum (WR 2, RDMA_WRITE_WITH_IMM) completed with RETRY_EXC_ERR at "},
		{[]string{"--mode", "wa", "--fault", "drop port=4 dir=out class=data nth=300"},
			"inaemu run: job failed: rank 3 QP to rank 4 (QPN 0x10000): gradient message 0 of 0..8 (WR 0, RDMA_WRITE_WITH_IMM) completed with RETRY_EXC_ERR at "},
		{[]string{"--mode", "ring", "--fault", "drop port=1 dir=out class=data nth=300"},
			"inaemu run: job failed: rank 0 send QP to rank 1 (QPN 0x11): step 1 of 0..5, message 0 (RDMA_WRITE_WITH_IMM) completed with RETRY_EXC_ERR at "},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, _, errOut := runCLI(runArgs(append([]string{"--seed", "1", "--workers", "4", "--tensor", "1MiB", "--retry-cnt", "0"}, c.args...)...)...)
			assert.Equal(t, 3, code, errOut)
			assert.True(t, strings.HasPrefix(errOut, c.want), "%q", errOut)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
		})
	}
}

// The switch line names the counters of the program that ran: an ars
// run (and its replay) prints the AllReduce-Switch's, not NetReduce's
// zeros; a NetReduce run prints NetReduce's line alone.
func TestRunAndReplayPrintTheRunningProgramsSwitchLine(t *testing.T) {
	dir := t.TempDir()
	pcap := filepath.Join(dir, "ars.pcapng")
	code, out, errOut := runCLI(runArgs(append([]string{"--switch-program", "ars", "--transport", "v1", "--seed", "5", "--pcap", pcap}, small...)...)...)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Regexp(t, `(?m)^  switch    ars: [1-9]\d* aggregations, 0 result re-sends, .*; drops: 0 first-lost, 0 gap, 0 busy, 0 ICRC, 0 bad, 0 port; \d+ arbiter waits \(.* in all\)$`, out)
	assert.NotContains(t, out, "CLT misses", "NetReduce's line is not printed for a run it did not aggregate")

	code, out, errOut = runCLI("replay", pcap, "--through-switch", "--out", filepath.Join(dir, "replayed.pcapng"))
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Regexp(t, `(?m)^  switch    ars: [1-9]\d* aggregations, .*; \d+ forwarded, \d+ flooded$`, out)
	assert.NotContains(t, out, "CLT misses")

	code, out, errOut = runCLI(runArgs(append([]string{"--seed", "5"}, small...)...)...)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	assert.Regexp(t, `(?m)^  switch    [1-9]\d* aggregations, 0 result re-sends, 0 CLT misses, `, out)
	assert.NotContains(t, out, "ars:")
}

// lineReport is a program report that says itself in a line.
type lineReport int

func (r lineReport) Line() string { return fmt.Sprintf("%d things", int(r)) }

// programLines prints every program but NetReduce whose report has a
// line, one per switch when the reports did not sum, sorted by name.
func TestProgramLinesOnePerProgramThatHasOne(t *testing.T) {
	r := switching.Report{Programs: map[string]any{
		"netreduce": netreduce.Stats{Aggregations: 3},
		"zeta":      lineReport(1),
		"alpha":     switching.PerSwitch{lineReport(2), lineReport(3)},
		"mute":      struct{ N int }{4},
	}}
	assert.Equal(t, []string{"alpha: 2 things", "alpha: 3 things", "zeta: 1 things"}, programLines(r))
	assert.True(t, ranNetReduce(r))
	assert.False(t, ranNetReduce(switching.Report{Programs: map[string]any{"zeta": lineReport(1)}}))
}
