package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inaemu/inaemu/internal/testtool"
)

// TestBuildsOffLinux: the whole module builds, and vets with its tests, for
// macOS and Windows, where the TAP commands say they need Linux. TAPs,
// netlink and raw sockets are Linux-only; this keeps them behind build
// constraints (the tap package's *_linux.go files).
func TestBuildsOffLinux(t *testing.T) {
	goBin, err := exec.LookPath("go")
	testtool.Require(t, "cross-build", err)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	for _, goos := range []string{"darwin", "windows"} {
		for _, verb := range []string{"build", "vet"} {
			cmd := exec.Command(goBin, verb, "./...")
			cmd.Dir = root
			cmd.Env = append(os.Environ(), "GOOS="+goos, "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("GOOS=%s go %s ./...: %v\n%s", goos, verb, err, strings.TrimSpace(string(out)))
			}
		}
	}
}
