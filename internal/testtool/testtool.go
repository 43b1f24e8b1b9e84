// Package testtool runs the external tools interop tests compare against
// (tshark, scapy). A missing tool skips the test with a loud one-line
// reason, except under CI (CI set in the environment), where it fails: the
// CI image must install it.
package testtool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Hints says how to install each tool.
var Hints = map[string]string{
	"tshark":       "apt-get install tshark",
	"scapy":        "apt-get install python3-scapy (used through /usr/bin/python3)",
	"dpdk-testpmd": "apt-get install dpdk-dev",
}

// SystemPython is Debian's python3, which has python3-scapy; the python3
// first on PATH may be a pyenv without it.
const SystemPython = "/usr/bin/python3"

// Need skips (or, under CI, fails) the test when check reports the tool
// missing.
func Need(t testing.TB, name string, check func() bool) {
	t.Helper()
	if check() {
		return
	}
	Require(t, "interop", fmt.Errorf("%s not installed (%s)", name, Hints[name]))
}

// Require skips (or, under CI, fails) the test when err says something it
// needs is missing here (a tool, root privileges); what names the kind of
// test in the one-line reason. An err matching errors.ErrUnsupported
// (TAP devices on a system other than Linux) skips even under CI: nothing
// a CI image installs would provide it.
func Require(t testing.TB, what string, err error) {
	t.Helper()
	if err == nil {
		return
	}
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("SKIP %s: %v", what, err)
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("FAIL %s: %v; CI is set and must provide it", what, err)
	}
	t.Skipf("SKIP %s: %v", what, err)
}

// Run runs a command with a generous deadline (no sleeping) and returns its
// stdout, its stderr and its error.
func Run(t testing.TB, name string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	if name == "tshark" {
		// tshark as installed, without the user's profile and personal
		// plugins: a user who ran inaemu dissector --install would have
		// the dissector loaded twice by the tests that give it with -X.
		home := t.TempDir()
		cmd.Env = append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

// HaveTshark reports whether tshark runs.
func HaveTshark() bool {
	if _, err := exec.LookPath("tshark"); err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, "tshark", "--version").Run() == nil
}

// HaveScapy reports whether the system python has scapy's RoCE support.
func HaveScapy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return exec.CommandContext(ctx, SystemPython, "-c", "import scapy.contrib.roce").Run() == nil
}

var (
	builtMu  sync.Mutex
	builtDir string
	built    = map[string]string{}
)

// Build builds the Go program pkg (an import path, or a directory
// relative to the test's package) once per test binary, for tests that
// run it as a separate process, and returns the executable's path; it is
// called name, in a directory of its own (a test may put it on PATH). The
// build is kept per program and name: a test that puts "inaemu" on PATH
// must not get the build another test named "device".
func Build(t testing.TB, pkg, name string) string {
	t.Helper()
	builtMu.Lock()
	defer builtMu.Unlock()
	key := pkg + "\x00" + name
	if p, ok := built[key]; ok {
		return p
	}
	if builtDir == "" {
		dir, err := os.MkdirTemp("", "inaemu-test-bin")
		if err != nil {
			t.Fatalf("go build %s: %v", pkg, err)
		}
		builtDir = dir
	}
	dir, err := os.MkdirTemp(builtDir, "") // a directory of its own, even after a failed build
	if err != nil {
		t.Fatalf("go build %s: %v", pkg, err)
	}
	p := filepath.Join(dir, name)
	if out, err := exec.Command("go", "build", "-o", p, pkg).CombinedOutput(); err != nil {
		t.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	built[key] = p
	return p
}
