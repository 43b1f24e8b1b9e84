package dut

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/internal/taptest"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

// killHelperEnv names the file through which TestKilledRunHelper, run by
// TestKilledRunLeavesNothing as a test binary of its own, says what it
// made.
const killHelperEnv = "INAEMU_KILL_HELPER"

// TestKilledRunLeavesNothing: a test binary that made wired TAPs and
// started `inaemu switch` on them as a device is killed with SIGKILL (as
// go test's -timeout or a user's kill -9 does: no cleanup runs). The
// switch dies with it (Pdeathsig), and the next run's sweep removes the
// TAPs the dead run left (their names carry its process ID), and only
// those: a live run's interfaces stay.
func TestKilledRunLeavesNothing(t *testing.T) {
	live := taptest.Prefix(t, "kl") // this run's: the sweep must leave them
	_, err := tap.Up(tap.Topology{Prefix: live, Workers: 1, Wired: true})
	require.NoError(t, err)
	bin := testtool.Build(t, "github.com/inaemu/inaemu/cmd/inaemu", "inaemu")
	report := filepath.Join(t.TempDir(), "made")
	helper := taptest.Command(os.Args[0], "-test.run", "^TestKilledRunHelper$", "-test.timeout", "10m")
	helper.Env = append(os.Environ(), killHelperEnv+"="+report, "INAEMU_BIN="+bin)
	var out strings.Builder
	helper.Stdout, helper.Stderr = &out, &out
	require.NoError(t, helper.Start())
	exited := make(chan error, 1)
	go func() { exited <- helper.Wait() }()

	// Wait for the helper to say what it made (or to fail).
	var made []string
	ctx, cancel := context.WithTimeout(context.Background(), testtool.Budget(2*time.Minute))
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for made == nil {
		select {
		case err := <-exited:
			t.Fatalf("the helper ended before it was killed (%v):\n%s", err, out.String())
		case <-ctx.Done():
			_ = helper.Process.Kill()
			t.Fatalf("the helper made nothing within %v:\n%s", testtool.Budget(2*time.Minute), out.String())
		case <-tick.C:
			if b, err := os.ReadFile(report); err == nil && strings.HasSuffix(string(b), "\n") {
				made = strings.Fields(string(b))
			}
		}
	}
	require.Len(t, made, 2, "prefix and the switch's PID")
	prefix := made[0]
	sw, err := strconv.Atoi(made[1])
	require.NoError(t, err)
	t.Cleanup(func() { tap.Down(prefix) }) // should the test fail halfway
	require.ElementsMatch(t, []string{prefix + "-sw0", prefix + "-h0", prefix + "-sw1", prefix + "-h1"}, taptest.Interfaces(t, prefix))
	require.True(t, running(sw), "the switch runs before the kill")

	require.NoError(t, helper.Process.Signal(syscall.SIGKILL))
	<-exited
	for running(sw) { // the kernel's SIGKILL is on its way: no fixed wait
		select {
		case <-ctx.Done():
			t.Fatalf("the switch (PID %d) outlived the test binary that started it", sw)
		case <-tick.C:
		}
	}
	// Persistent TAPs outlive their process; the next run's sweep finds
	// them by the dead PID in their names.
	require.Len(t, taptest.Interfaces(t, prefix), 4, "the killed run's TAPs, until a sweep")
	gone, err := tap.SweepStale()
	require.NoError(t, err)
	require.Subset(t, gone, []string{prefix + "-sw0", prefix + "-h0", prefix + "-sw1", prefix + "-h1"})
	require.Empty(t, taptest.Interfaces(t, prefix))
	require.Equal(t, []string{live + "-sw0", live + "-h0"}, taptest.Interfaces(t, live), "a live run's interfaces stay")
}

// running reports whether process pid runs (a zombie waiting for its
// reaper does not).
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// TestKilledRunHelper is the test binary TestKilledRunLeavesNothing
// kills: it makes wired TAPs, starts `inaemu switch` on them through the
// device command, reports both, and waits to be killed. Run by itself it
// does nothing.
func TestKilledRunHelper(t *testing.T) {
	report := os.Getenv(killHelperEnv)
	if report == "" {
		t.Skip("run by TestKilledRunLeavesNothing")
	}
	prefix, err := tap.RunPrefix("kh")
	require.NoError(t, err)
	_, err = tap.Up(tap.Topology{Prefix: prefix, Workers: 2, Wired: true})
	require.NoError(t, err)
	d := Device{Prefix: prefix, Command: "exec " + os.Getenv("INAEMU_BIN") + " switch --tap $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS", Log: io.Discard}
	cfg := emu.DefaultConfig()
	cfg.Workers = 2
	_, err = d.start(cfg, 2*time.Minute)
	require.NoError(t, err)
	kids := children(t)
	require.Len(t, kids, 1, "the switch's process (the device command's exec)")
	pid := kids[0]
	require.NoError(t, os.WriteFile(report, []byte(fmt.Sprintf("%s %d\n", prefix, pid)), 0o644))
	time.Sleep(10 * time.Minute) // until killed: this is the run being killed, not a wait for a result
}

// children lists this process's children (from every process's stat:
// a child forked by any of its threads).
func children(t *testing.T) []int {
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state, ppid, ...
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			pids = append(pids, pid)
		}
	}
	return pids
}
