package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gopacket/gopacket"
	"github.com/gopacket/gopacket/layers"
	"github.com/gopacket/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/internal/units"
)

// runGuarded runs the CLI as main does, behind the panic guard.
func runGuarded(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = guarded(args, &o, &e, run)
	return code, o.String(), e.String()
}

// oneLine asserts a usage error as a user sees it: exit 2, one line on
// stderr with the command's prefix, no Go trace and no internal error.
func oneLine(t *testing.T, code int, errOut, prefix string, want ...string) {
	t.Helper()
	assert.Equal(t, 2, code, "stderr %q", errOut)
	assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line on stderr: %q", errOut)
	assert.True(t, strings.HasPrefix(errOut, prefix), "%q", errOut)
	for _, bad := range []string{"goroutine", "panic", "internal error", "runtime."} {
		assert.NotContains(t, errOut, bad)
	}
	for _, w := range want {
		assert.Contains(t, errOut, w)
	}
}

// Bad input to run: durations beyond the 1h bound (or not durations at
// all) wherever one is parsed, faults aimed at ports, spoofing ports or
// QPs the job does not have, jobs too big for the memory and sizes beyond
// the limits. Each is one line and exit 2, never a run, a wrap-around or
// the Go runtime's death.
func TestRunBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"--max-time", "1e13"}, []string{`"1e13" is beyond the 1h limit for durations`}},
		{[]string{"--max-time", "2h"}, []string{`"2h" is beyond the 1h limit`}},
		{[]string{"--max-time", "9999999999h"}, []string{`"9999999999h" is beyond the 1h limit`}},
		{[]string{"--max-time", "NaN"}, []string{`"NaN" is not a duration`}},
		{[]string{"--max-time", "-5"}, []string{`"-5" is not a duration`}},
		{[]string{"--latency", "1e13"}, []string{`"1e13" is beyond the 1h limit`}},
		{[]string{"--latency", "Inf"}, []string{`"Inf" is beyond the 1h limit`}},
		{[]string{"--latency", "1e400"}, []string{`"1e400" is beyond the 1h limit`}},
		{[]string{"--netem", "delay 1e13"}, []string{`bad token "1e13"`, "beyond the 1h limit"}},
		{[]string{"--netem", "delay 5us 1e300"}, []string{`bad token "1e300"`, "beyond the 1h limit"}},
		{[]string{"--netem", "delay 5us 3h"}, []string{`bad token "3h"`, "beyond the 1h limit"}},
		{[]string{"--fault", "delay=1e300 port=0 dir=in class=data nth=1"}, []string{`bad token "delay=1e300"`, "beyond the 1h limit"}},
		{[]string{"--fault", "delay=90m port=0"}, []string{`"delay=90m"`, "beyond the 1h limit"}},
		{[]string{"--fault", "drop port=9 dir=in class=data nth=1"}, []string{`"drop port=9 dir=in class=data nth=1"`, "port=9", "0..3"}},
		{[]string{"--fault", "drop port=4"}, []string{"port=4", "0..3"}},
		{[]string{"--fault", "spoof=7 port=0 class=data nth=2"}, []string{"spoof=7", "0..3"}},
		{[]string{"--fault", "drop qp=5 dir=in"}, []string{"qp=0x5", "0x11", "0x12"}},
		{[]string{"--workers", "64", "--tensor", "1GiB", "--max-memory", "100MiB"}, []string{"the job needs ≈", "(64 workers, window 2), 100 MiB allowed by --max-memory; use "}},
		{[]string{"--workers", "64", "--tensor", "1GiB", "--mode", "ring", "--msg-len", "170", "--max-memory", "100MiB"}, []string{"(64 workers, window 2), 100 MiB allowed by --max-memory; use fewer workers, a smaller --window or a shorter --msg-len"}},
		{[]string{"--workers", "64", "--tensor", "1GiB", "--mode", "ring", "--max-memory", "100MiB"}, []string{"(64 workers, window 2), 100 MiB allowed by --max-memory; use a longer --msg-len"}},
		{[]string{"--workers", "64", "--mode", "ring", "--mtu", "256", "--msg-len", "170", "--tensor", "64MiB", "--latency", "1h", "--max-memory", "256MiB"}, []string{"--latency"}},
		{[]string{"--max-memory", "lots"}, []string{"--max-memory", `"lots"`}},
		{[]string{"--tensor", "1e30"}, []string{`"1e30"`}},
		{[]string{"--tensor", "99999999999999999999999GiB"}, []string{"99999999999999999999999GiB"}},
		{[]string{"--tensor", "5GiB"}, []string{"at most 4GiB"}},
		{[]string{"--timeout", "99"}, []string{"timeout"}},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runGuarded(runArgs(append(append([]string{}, small...), c.args...)...)...)
			assert.Empty(t, out, "nothing on stdout for a usage error")
			oneLine(t, code, errOut, "inaemu run: ", c.want...)
		})
	}
}

// A scenario file is checked by the same rules as flags.
func TestRunBadScenario(t *testing.T) {
	dir := t.TempDir()
	for name, c := range map[string]struct {
		yaml string
		want []string
	}{
		"max_time": {"workers: 4\ntensor: 64KiB\nmax_time: 1e13\n", []string{"max_time", `"1e13" is beyond the 1h limit`}},
		"latency":  {"workers: 4\ntensor: 64KiB\nlatency: 2h\n", []string{"latency", `"2h" is beyond the 1h limit`}},
		"netem":    {"workers: 4\ntensor: 64KiB\nnetem: delay 1e13\n", []string{"netem", "beyond the 1h limit"}},
		"port":     {"workers: 4\ntensor: 64KiB\nfaults:\n  - drop port=9 dir=in class=data nth=1\n", []string{"port=9", "0..3"}},
		"qp":       {"workers: 4\ntensor: 64KiB\nfaults:\n  - drop qp=0x99\n", []string{"qp=0x99", "0x11"}},
		"memory":   {"workers: 64\ntensor: 4GiB\nmode: ring\nmsg_len: 1\nmtu: 256\n", []string{"the job needs ≈", "(64 workers, window 2)", "100 GiB allowed by --max-memory"}},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(dir, name+".yaml")
			require.NoError(t, os.WriteFile(path, []byte(c.yaml), 0o644))
			args := []string{"run", "--scenario", path}
			if name == "memory" {
				args = append(args, "--max-memory", "100GiB") // an override still refuses what exceeds it
			}
			code, out, errOut := runGuarded(args...)
			assert.Empty(t, out)
			oneLine(t, code, errOut, "inaemu run: ", c.want...)
		})
	}
}

// A job too big for this machine is refused with no --max-memory given,
// before anything is allocated: the Go runtime's out-of-memory death
// (exit 2 with a 138-line trace) cannot happen for it.
func TestRunRefusesWhatDoesNotFit(t *testing.T) {
	cfg := emu.DefaultConfig()
	// A work request per 256-byte message of 64 × 4 GiB: terabytes.
	cfg.Mode, cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.MTU = emu.Ring, 64, 4<<30, 1, 256
	need := emu.EstimateMemory(cfg).Total
	if avail, ok := emu.AvailableMemory(); !ok || avail >= need {
		t.Skipf("available memory unknown or at least %s", units.FormatBytes(need))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, out, errOut := runGuarded("run", "--workers", "64", "--tensor", "4GiB", "--mode", "ring", "--msg-len", "1", "--mtu", "256")
	runtime.ReadMemStats(&after)
	assert.Empty(t, out)
	oneLine(t, code, errOut, "inaemu run: ", "the job needs ≈", "(64 workers, window 2)", " available; use a longer --msg-len")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "refused before allocating the job")
	// The case: 64 workers × 1 GiB.
	cfg = emu.DefaultConfig()
	cfg.Workers, cfg.TensorBytes = 64, 1<<30
	if avail, _ := emu.AvailableMemory(); avail < emu.EstimateMemory(cfg).Total {
		code, _, errOut = runGuarded("run", "--workers", "64", "--tensor", "1GiB")
		oneLine(t, code, errOut, "inaemu run: ", "(64 workers, window 2)")
	}
}

// truncatedCopies writes captures cut inside a record: a classic pcap cut
// right after a record header (which used to read as a clean end of file)
// and a pcapng cut inside an Enhanced Packet Block.
func truncatedCopies(t *testing.T) (pcap, pcapng string) {
	t.Helper()
	dir := t.TempDir()
	data, err := os.ReadFile(checkGolden("icrc.pcap"))
	require.NoError(t, err)
	// The file header is 24 bytes; the first record's header says how
	// long its data is.
	n := 24 + 16 + int(uint32(data[32])|uint32(data[33])<<8|uint32(data[34])<<16|uint32(data[35])<<24) + 16
	pcap = filepath.Join(dir, "cut.pcap")
	require.NoError(t, os.WriteFile(pcap, data[:n], 0o644))
	data, err = os.ReadFile(checkGolden("psn_order.pcapng"))
	require.NoError(t, err)
	pcapng = filepath.Join(dir, "cut.pcapng")
	require.NoError(t, os.WriteFile(pcapng, data[:len(data)-40], 0o644))
	return pcap, pcapng
}

// decode and replay say where a capture is cut, in one line, and exit 2
// (decode after printing the frames before the cut, as tshark does).
// check checks the frames before the cut, prints its report, warns in one
// line and exits 2 (1 if it found a violation).
func TestTruncatedCaptureCommands(t *testing.T) {
	pcap, pcapng := truncatedCopies(t)
	out := filepath.Join(t.TempDir(), "out.pcapng")
	for _, c := range []struct {
		args   []string
		prefix string
		want   string
	}{
		{[]string{"decode", pcap}, "inaemu decode: ", pcap + ": frame 2: truncated record at byte "},
		{[]string{"decode", pcap, "--json"}, "inaemu decode: ", "truncated record at byte "},
		{[]string{"replay", pcap, "--through-switch", "--out", out}, "inaemu replay: ", "truncated record at byte "},
		{[]string{"decode", pcapng}, "inaemu decode: ", "truncated Enhanced Packet Block at byte "},
		{[]string{"replay", pcapng, "--through-switch", "--out", out}, "inaemu replay: ", "truncated Enhanced Packet Block at byte "},
	} {
		t.Run(strings.Join(c.args[:1], " ")+" "+filepath.Base(c.args[1]), func(t *testing.T) {
			code, _, errOut := runGuarded(c.args...)
			oneLine(t, code, errOut, c.prefix, c.want, "present)")
		})
	}
	// check: icrc.pcap's second record is 16 bytes of header and no data;
	// the first frame is checked, and the warning says where the file ends.
	code, out, errOut := runGuarded("check", pcap)
	require.Equal(t, 2, code)
	assert.Contains(t, out, "1 frame (1 RoCE")
	assert.Contains(t, out, "result       conforms")
	assert.Regexp(t, `^inaemu check: warning: .*cut\.pcap: frame 2: truncated record at byte \d+ \(header says \d+ bytes, 0 present\): the 1 frames before it were checked\n$`, errOut)
	// psn_order.pcapng cut in its last block: its violations before the
	// cut are still found (exit 1), with the warning.
	code, out, errOut = runGuarded("check", pcapng, "--vantage", "sender")
	require.Equal(t, 1, code)
	assert.Contains(t, out, "psn-order frame 6 ")
	assert.Contains(t, errOut, "inaemu check: warning: ")
	assert.Equal(t, 1, strings.Count(errOut, "\n"))
	// tshark reads the same frames before the cut.
	if testtool.HaveTshark() {
		got, _, _ := testtool.Run(t, "tshark", "-r", pcapng, "-T", "fields", "-e", "frame.number")
		var j map[string]any
		_, jout, _ := runGuarded("check", pcapng, "--json")
		require.NoError(t, json.Unmarshal([]byte(jout), &j))
		assert.EqualValues(t, strings.Count(got, "\n"), j["frames"])
		assert.Contains(t, j["truncated"], "truncated Enhanced Packet Block")
	}
}

// A capture damaged in the middle (a pcapng block whose length field is
// nonsense) is checked up to the damage, as tshark reads it: the frames
// before it are reported, the warning names the frame and the byte, and
// the exit status is 2. With nothing readable before the damage the file
// is refused.
func TestDamagedCaptureCheck(t *testing.T) {
	data, err := os.ReadFile(checkGolden("psn_order.pcapng"))
	require.NoError(t, err)
	// Walk the blocks (type, total length) and damage the length field of
	// the fourth Enhanced Packet Block.
	off, epbs, at := 0, 0, -1
	for off+8 <= len(data) {
		typ, n := binary.LittleEndian.Uint32(data[off:]), int(binary.LittleEndian.Uint32(data[off+4:]))
		if typ == 6 {
			if epbs == 3 {
				at = off
				break
			}
			epbs++
		}
		off += n
	}
	require.Positive(t, at, "psn_order.pcapng has four packet blocks")
	bad := append([]byte(nil), data...)
	binary.LittleEndian.PutUint32(bad[at+4:], 7)
	path := filepath.Join(t.TempDir(), "damaged.pcapng")
	require.NoError(t, os.WriteFile(path, bad, 0o644))
	code, out, errOut := runGuarded("check", path, "--json")
	require.Equal(t, 2, code, errOut)
	var j map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &j))
	assert.EqualValues(t, 3, j["frames"])
	assert.Contains(t, j["truncated"], "frame 4: damaged at or after byte "+strconv.Itoa(at))
	assert.Regexp(t, `^inaemu check: warning: .*damaged\.pcapng: frame 4: damaged at or after byte \d+: .*: the 3 frames before it were checked\n$`, errOut)
	if testtool.HaveTshark() {
		got, _, _ := testtool.Run(t, "tshark", "-r", path, "-T", "fields", "-e", "frame.number")
		assert.Equal(t, 3, strings.Count(got, "\n"), "tshark reads the same frames")
	}
	// Damage after frames none of which is RoCE: the refusal names the
	// damage too (it had said only "none of its 3 frames is RoCE").
	plain := slices.Clone(bad)
	off = 0
	for epbs = 0; epbs < 3; epbs++ {
		for binary.LittleEndian.Uint32(plain[off:]) != 6 {
			off += int(binary.LittleEndian.Uint32(plain[off+4:]))
		}
		plain[off+28+12] ^= 0xFF // the packet's EtherType: not IP, not RoCEv1
		off += int(binary.LittleEndian.Uint32(plain[off+4:]))
	}
	require.NoError(t, os.WriteFile(path, plain, 0o644))
	code, out, errOut = runGuarded("check", path)
	require.Equal(t, 2, code, errOut)
	assert.Empty(t, out)
	assert.Regexp(t, `^inaemu check: .*damaged\.pcapng: frame 4: damaged at or after byte \d+: .*, and none of the 3 frames before it is RoCE or INA-PS: nothing to check\n$`, errOut)
}

// Go's own flag durations (check --in-flight, switch --duration: wall
// time, not bounded to an hour) overflow into a one-line usage error too,
// and a negative one is refused.
func TestFlagDurations(t *testing.T) {
	for _, c := range []struct {
		args   []string
		prefix string
		want   string
	}{
		{[]string{"check", checkGolden("icrc.pcap"), "--in-flight", "9999999999h"}, "inaemu check: ", "in-flight"},
		{[]string{"check", checkGolden("icrc.pcap"), "--in-flight", "-1s"}, "inaemu check: ", "--in-flight -1s"},
		{[]string{"switch", "--tap", "ina", "--duration", "9999999999h"}, "inaemu switch: ", "duration"},
		{[]string{"switch", "--tap", "ina", "--duration", "-5s"}, "inaemu switch: ", "--duration -5s"},
		{[]string{"switch", "--tap", "ina", "--max-time", "1e13"}, "inaemu switch: ", "beyond the 1h limit"},
		{[]string{"host", "--tap", "ina-h0", "--rank", "0", "--seed", "1", "--max-memory", "lots"}, "inaemu host: ", "--max-memory"},
		{[]string{"host", "--tap", "ina-h0", "--rank", "0", "--seed", "1", "--workers", "64", "--tensor", "1GiB", "--max-memory", "100MiB"}, "inaemu host: ", "the job needs ≈"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runGuarded(c.args...)
			assert.Empty(t, out)
			oneLine(t, code, errOut, c.prefix, c.want)
		})
	}
}

// An unexpected panic is one line and exit 70 (EX_SOFTWARE), however the
// panic value is spelled.
func TestPanicGuard(t *testing.T) {
	var o, e bytes.Buffer
	code := guarded([]string{"x"}, &o, &e, func([]string, io.Writer, io.Writer) int {
		var m map[string]int
		m["boom"]++ // a runtime error: assignment to entry in nil map
		return 0
	})
	assert.Equal(t, 70, code)
	assert.Equal(t, "inaemu: internal error: assignment to entry in nil map; please report it with the command line\n", e.String())
	e.Reset()
	code = guarded(nil, &o, &e, func([]string, io.Writer, io.Writer) int { panic("two\nlines") })
	assert.Equal(t, 70, code)
	assert.Equal(t, "inaemu: internal error: two lines; please report it with the command line\n", e.String())
	// Without a panic the guard is invisible.
	e.Reset()
	code = guarded([]string{"--help"}, &o, &e, run)
	assert.Equal(t, 0, code)
	assert.Empty(t, e.String())
}

// A frame of a link type nobody reads (an 802.11 interface beside the
// Ethernet ones) keeps its frame number and is skipped with a count: check
// still checks the others and names their frames as Wireshark does, and
// decode prints a line for it and reads on.
func TestSkippedFrameKeepsNumbering(t *testing.T) {
	recs, names, err := pcapio.ReadAllNamed(checkGolden("psn_order.pcapng"))
	require.NoError(t, err)
	require.NotEmpty(t, names)
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{Name: "wlan0", LinkType: layers.LinkTypeIEEE802_11}, pcapgo.NgWriterOptions{})
	require.NoError(t, err)
	ids := map[int]int{}
	for i, n := range names {
		ids[i], err = w.AddInterface(pcapgo.NgInterface{Name: n, LinkType: layers.LinkTypeEthernet})
		require.NoError(t, err)
	}
	t0 := recs[0].Info.Timestamp
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: t0, CaptureLength: 30, Length: 30}, make([]byte, 30)))
	for _, r := range recs {
		ci := r.Info
		ci.InterfaceIndex = ids[ci.InterfaceIndex]
		require.NoError(t, w.WritePacket(ci, r.Data))
	}
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "wifi.pcapng")
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))

	code, out, errOut := runGuarded("check", path, "--vantage", "sender")
	require.Equal(t, 1, code, errOut)
	assert.Contains(t, out, "psn-order frame 7 ", "frame 6 of the original is frame 7 behind the 802.11 frame")
	assert.Contains(t, out, "  skipped      1 frame not readable as Ethernet, not checked (first: ")
	assert.Contains(t, out, fmt.Sprintf("%d frames", len(recs)+1))
	code, out, errOut = runGuarded("decode", path)
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(recs)+1)
	assert.Regexp(t, `^1 0\.000000000 wlan0 not-read len=30: link type 105 \(802\.11\)`, lines[0])
	assert.Regexp(t, `^2 `, lines[1])
	if testtool.HaveTshark() {
		got, _, _ := testtool.Run(t, "tshark", "-r", path, "-Y", "infiniband.bth.psn", "-T", "fields", "-e", "frame.number")
		assert.Contains(t, strings.Fields(got), "7", "tshark numbers the frames the same way")
	}
}

// A count that sizes the run (workers, window, messages) is refused before
// anything is built from it, naming the flag and its range: --workers -1
// was a panic (makeslice: len out of range, exit 70), --workers 10^12 the
// Go runtime's out-of-memory death, ring's --window -3 a stalled job
// (exit 3), gpus=10^11 an out-of-memory kill.
func TestCountFlagsInRange(t *testing.T) {
	dir := t.TempDir()
	negative := filepath.Join(dir, "negative.yaml")
	require.NoError(t, os.WriteFile(negative, []byte("workers: -1\n"), 0o644))
	capture := filepath.Join(dir, "in.pcapng")
	code, _, errOut := runGuarded(runArgs(append(append([]string{}, small...), "--seed", "1", "--pcap", capture)...)...)
	require.Equal(t, 0, code, errOut)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--workers", "-1"}, "--workers -1: want 1..64"},
		{[]string{"run", "--workers", "1000000000000"}, "--workers 1000000000000: want 1..64"},
		{[]string{"run", "--mode", "wa", "--workers", "-1"}, "--workers -1: want 1..64"},
		{[]string{"run", "--mode", "ring", "--window", "-3"}, "--window -3: want 1..32"},
		{[]string{"run", "--msg-len", "256"}, "--msg-len 256: want 1..255"},
		{[]string{"run", "--timeout", "-1"}, "--timeout -1: want 0..31"},
		{[]string{"run", "--retry-cnt", "8"}, "--retry-cnt 8: want 0..7"},
		{[]string{"sweep", "--workers", "-1"}, "--workers -1: want 1..64"},
		{[]string{"host", "--tap", "ina-h0", "--rank", "0", "--seed", "1", "--workers", "-1"}, "--workers -1: want 1..64"},
		{[]string{"run", "--scenario", negative}, "scenario " + negative + ": workers: -1: want 1..64"},
		{[]string{"run", "--topology", "star:hosts=4,gpus=100000000000,intra=150G", "--mode", "fr"}, "100000000000 GPUs: want at most 64"},
		{[]string{"replay", capture, "--through-switch", "--out", filepath.Join(dir, "out.pcapng"), "--workers", "-1"}, "--workers -1: want 2..64, or 0 for the default"},
		{[]string{"replay", capture, "--through-switch", "--out", filepath.Join(dir, "out.pcapng"), "--window", "99"}, "--window 99: want 1..32"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runGuarded(c.args...)
			assert.Empty(t, out)
			oneLine(t, code, errOut, "inaemu "+c.args[0]+": ", c.want)
		})
	}
}

// A file read whole is read up to a bound: --scenario /dev/zero read
// without end and died of the Go runtime's out-of-memory (a trace of
// hundreds of lines), and so did a --topology file, merge's shard reports,
// plot's results and model's CSV. Now each is one line naming the file.
func TestInputFilesBounded(t *testing.T) {
	if _, err := os.Stat("/dev/zero"); err != nil {
		t.Skip("no /dev/zero here")
	}
	dir := t.TempDir()
	link := func(name string) string { // a name the command takes for its kind of file
		p := filepath.Join(dir, name)
		require.NoError(t, os.Symlink("/dev/zero", p))
		return p
	}
	big := filepath.Join(dir, "big.yaml") // a regular file one byte over
	require.NoError(t, os.WriteFile(big, bytes.Repeat([]byte("\n"), 4<<20+1), 0o644))
	topology, csv := link("zero.yaml"), link("zero.csv")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--scenario", "/dev/zero"}, "scenario: /dev/zero: too large: more than 4MiB"},
		{[]string{"run", "--scenario", big}, big + ": too large: more than 4MiB"},
		{[]string{"topo", "show", "--topology", topology}, topology + ": too large: more than 4MiB"},
		{[]string{"merge", "/dev/zero"}, "inaemu merge: /dev/zero: too large: more than 16MiB"},
		{[]string{"plot", "sweep", "--x", "workers", "--out", filepath.Join(dir, "x.svg"), "/dev/zero"}, "inaemu plot: /dev/zero: too large: more than 16MiB"},
		{[]string{"model", "--train", csv}, "inaemu model: " + csv + ": too large: more than 16MiB"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			code, out, errOut := runGuarded(c.args...)
			runtime.ReadMemStats(&after)
			assert.Empty(t, out)
			oneLine(t, code, errOut, "inaemu ", c.want)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(256<<20), "read up to the bound only")
		})
	}
}
