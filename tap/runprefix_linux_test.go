package tap

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/inaemu/inaemu/internal/testtool"
)

// deadPID is a process ID no process has: above the kernel's pid_max,
// and, offset by this process's own, no other run of this test uses it.
func deadPID(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	require.NoError(t, err)
	max, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	pid := max + os.Getpid()
	require.False(t, alive(pid), "PID %d", pid)
	return pid
}

// linkNames lists the interfaces named PREFIX-*.
func linkNames(t *testing.T, prefix string) []string {
	t.Helper()
	links, err := netlink.LinkList()
	require.NoError(t, err)
	var out []string
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, prefix+"-") {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// TestSweepStaleTakesOnlyDeadTestRuns needs root: the sweep every TAP
// test starts with removes a killed test run's interfaces, and leaves a
// live run's and a user's whose prefix merely looks like a run's
// (`inaemu tap up --prefix lab_x1` reads as PID 1189 in base 36) whatever
// that PID is doing.
func TestSweepStaleTakesOnlyDeadTestRuns(t *testing.T) {
	testtool.Require(t, "tap", Usable())
	pid := deadPID(t)

	// A user's topology under a prefix shaped tag_base36, its "PID" gone.
	user := "usr_" + strconv.FormatInt(int64(pid), 36)
	_, owner, ok := RunOwner(user + "-sw0")
	require.True(t, ok, "the prefix reads as a run's")
	require.Equal(t, pid, owner)
	t.Cleanup(func() { Down(user) })
	made, err := Up(Topology{Prefix: user, Workers: 1})
	require.NoError(t, err)
	require.Len(t, made, 3)

	// A killed test run's: marked as a run's prefix (as RunPrefix marks
	// this process's), of the same dead PID.
	dead, err := runPrefix("tdd", pid)
	require.NoError(t, err)
	markRun(dead)
	t.Cleanup(func() { Down(dead) })
	deadMade, err := Up(Topology{Prefix: dead, Workers: 1, Wired: true})
	require.NoError(t, err)
	require.Len(t, deadMade, 2)

	// This run's, alive.
	live, err := RunPrefix("tdl")
	require.NoError(t, err)
	t.Cleanup(func() { Down(live) })
	liveMade, err := Up(Topology{Prefix: live, Workers: 1, Wired: true})
	require.NoError(t, err)
	require.Len(t, liveMade, 2)

	for prefix, want := range map[string]string{user: Alias, dead: RunAlias(pid), live: RunAlias(os.Getpid())} {
		for _, n := range linkNames(t, prefix) {
			l, err := netlink.LinkByName(n)
			require.NoError(t, err)
			require.Equal(t, want, l.Attrs().Alias, n)
		}
	}

	gone, err := SweepStale()
	require.NoError(t, err)
	for _, n := range gone {
		require.False(t, strings.HasPrefix(n, user+"-"), "the sweep removed %s, a user's", n)
		require.False(t, strings.HasPrefix(n, live+"-"), "the sweep removed %s, a live run's", n)
	}
	require.Empty(t, linkNames(t, dead), "a dead run's interfaces go")
	require.ElementsMatch(t, made, linkNames(t, user), "a user's interfaces stay")
	require.ElementsMatch(t, liveMade, linkNames(t, live), "a live run's interfaces stay")
	removed, err := Down(live)
	require.NoError(t, err)
	require.ElementsMatch(t, liveMade, removed, "tap down removes a run's")
	removed, err = Down(user)
	require.NoError(t, err)
	require.ElementsMatch(t, made, removed, "tap down still removes a user's")
}
