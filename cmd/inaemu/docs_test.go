package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/testtool"
)

// TestDissectorPrintsTheLuaFile: what `inaemu dissector` prints is the
// repository's contrib/wireshark/inaemu.lua, byte for byte.
func TestDissectorPrintsTheLuaFile(t *testing.T) {
	want, err := os.ReadFile(filepath.Join("..", "..", "contrib", "wireshark", "inaemu.lua"))
	require.NoError(t, err)
	code, out, errOut := runCLI("dissector")
	require.Equal(t, exitOK, code, errOut)
	assert.Equal(t, string(want), out)

	code, _, errOut = runCLI("dissector", "--dir", t.TempDir())
	assert.Equal(t, exitUsage, code)
	assert.Contains(t, errOut, "give --install too")
}

// TestDissectorInstallLoadsInTshark: after `inaemu dissector --install`,
// run from a directory that is not the repository, tshark started from
// anywhere knows the ina protocol without -X lua_script.
func TestDissectorInstallLoadsInTshark(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	bin := inaemuBinary(t)
	home, elsewhere := t.TempDir(), t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"))

	protocols := func() string {
		cmd := exec.Command("tshark", "-G", "protocols")
		cmd.Dir, cmd.Env = elsewhere, env
		out, err := cmd.Output()
		require.NoError(t, err)
		return string(out)
	}
	hasINA := func(s string) bool {
		for _, l := range strings.Split(s, "\n") {
			if f := strings.Split(l, "\t"); len(f) >= 3 && f[2] == "ina" {
				return true
			}
		}
		return false
	}
	require.False(t, hasINA(protocols()), "the ina protocol is known before the install: the test proves nothing")

	cmd := exec.Command(bin, "dissector", "--install")
	cmd.Dir, cmd.Env = elsewhere, env
	out, err := cmd.Output()
	require.NoError(t, err)
	path := strings.TrimSpace(string(out))
	assert.True(t, strings.HasPrefix(path, home), "installed into %s, not under HOME %s", path, home)
	assert.FileExists(t, path)
	assert.True(t, hasINA(protocols()), "tshark does not load the installed dissector from %s", path)
}

// TestReadmeExitStatusTable: the README's exit status table lists every
// status the CLI exits with, and no other.
func TestReadmeExitStatusTable(t *testing.T) {
	text, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, table, ok := strings.Cut(string(text), "## Exit status")
	require.True(t, ok, "the README has no Exit status section")
	table, _, _ = strings.Cut(table, "\n## ")
	var listed []int
	for _, l := range strings.Split(table, "\n") {
		var code int
		if _, err := fmt.Sscanf(l, "| %d |", &code); err == nil {
			listed = append(listed, code)
		}
	}
	want := []int{exitOK, exitFail, exitUsage, exitJobFailed, exitNoPrivilege, exitUndecidable, exitSoftware, exitIO, exitInterrupted}
	assert.ElementsMatch(t, want, listed)
}

// TestDissectorInstallWithoutHome: with no home folder and no tshark to
// ask, --install says so in one line and exits 2 (name a folder with
// --dir), not 1, which is for a failure a command was asked to find.
func TestDissectorInstallWithoutHome(t *testing.T) {
	bin := inaemuBinary(t)
	cmd := exec.Command(bin, "dissector", "--install")
	cmd.Env = []string{"PATH=" + t.TempDir()}
	var errOut strings.Builder
	cmd.Stderr = &errOut
	err := cmd.Run()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, exitUsage, ee.ExitCode())
	assert.Equal(t, 1, strings.Count(errOut.String(), "\n"), errOut.String())
	assert.Contains(t, errOut.String(), "--dir")
}
