package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fullDisk is standard output on a full disk.
type fullDisk struct{}

func (fullDisk) Write([]byte) (int, error) { return 0, syscall.ENOSPC }

// An output that cannot be written is exit 74 (EX_IOERR) and one line
// naming it: --pcap /dev/full was exit 3 and "job failed", as if the
// network had failed, --json on a full disk exit 1 ("a result differs"),
// the text summary on a full disk exit 0.
func TestOutputWriteErrors(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full here")
	}
	dir := t.TempDir()
	svg := filepath.Join(dir, "full.svg") // plot wants the picture's extension
	require.NoError(t, os.Symlink("/dev/full", svg))
	capture := filepath.Join(dir, "in.pcapng")
	code, _, errOut := runCLI(runArgs(append([]string{"--seed", "1", "--pcap", capture}, small...)...)...)
	require.Equal(t, 0, code, errOut)
	for _, c := range []struct {
		args []string
		want string
	}{
		// The capture written at the end (it fits the buffer), and one
		// that fills the buffer during the run (the emulator's error).
		{runArgs(append([]string{"--seed", "1", "--pcap", "/dev/full"}, small...)...), "inaemu run: --pcap /dev/full: no space left on device\n"},
		{runArgs("--seed", "1", "--workers", "4", "--tensor", "4MiB", "--pcap", "/dev/full"), "inaemu run: --pcap /dev/full: no space left on device\n"},
		{runArgs(append([]string{"--seed", "1", "--pcap", filepath.Join(dir, "no", "x.pcapng")}, small...)...), "inaemu run: --pcap " + filepath.Join(dir, "no", "x.pcapng") + ": no such file or directory\n"},
		{[]string{"replay", capture, "--through-switch", "--out", "/dev/full"}, "inaemu replay: --out /dev/full: no space left on device\n"},
		{[]string{"plot", "psn", capture, "--out", svg}, "inaemu plot psn: --out " + svg + ": no space left on device\n"},
		{[]string{"topo", "show", "--dot", "/dev/full"}, "inaemu topo show: --dot /dev/full: no space left on device\n"},
	} {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			code, out, errOut := runGuarded(c.args...)
			assert.Equal(t, 74, code, errOut)
			assert.Equal(t, c.want, errOut)
			assert.NotContains(t, out, "capture ", "the summary offers no capture that was not written")
		})
	}
	// The report on standard output.
	for _, args := range [][]string{
		runArgs(append([]string{"--seed", "1"}, small...)...),
		runArgs(append([]string{"--seed", "1", "--json"}, small...)...),
		{"topo", "show", "--json"},
		{"decode", capture},
	} {
		t.Run(strings.Join(args, " ")+" >/dev/full", func(t *testing.T) {
			var e bytes.Buffer
			code := guarded(args, fullDisk{}, &e, run)
			assert.Equal(t, 74, code, e.String())
			assert.Regexp(t, `^inaemu [a-z ]+: standard output: no space left on device\n$`, e.String())
		})
	}
}
