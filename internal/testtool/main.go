package testtool

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// tmpPrefix names the temporary directory a test binary run by Main
// keeps everything in: "inaemu-test-PID-".
const tmpPrefix = "inaemu-test-"

// Main runs a package's tests (call it from TestMain) with TMPDIR set to
// a directory of the test binary's own, removed when the tests end: the
// programs Build makes, device logs written to the default place, and
// whatever a child process leaves in its temporary directory go there,
// not into the machine's. A test binary killed before it could remove
// its directory leaves it behind; the next Main removes those whose
// process is gone.
func Main(m *testing.M) {
	base := os.TempDir()
	sweepTemp(base)
	dir, err := os.MkdirTemp(base, fmt.Sprintf("%s%d-", tmpPrefix, os.Getpid()))
	if err != nil {
		fmt.Fprintln(os.Stderr, "testtool: a temporary directory:", err)
		os.Exit(2)
	}
	os.Setenv("TMPDIR", dir)
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// sweepTemp removes base's directories of test binaries that are gone.
func sweepTemp(base string) {
	entries, _ := os.ReadDir(base)
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), tmpPrefix)
		if !ok || !e.IsDir() {
			continue
		}
		pid, _, _ := strings.Cut(rest, "-")
		n, err := strconv.Atoi(pid)
		if err != nil || n <= 0 || n == os.Getpid() {
			continue
		}
		if processGone(n) {
			os.RemoveAll(filepath.Join(base, e.Name()))
		}
	}
}
