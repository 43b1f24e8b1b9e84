// Package taptest is for tests on real interfaces (TAPs, bridges) and the
// processes that hold them: names of the test's own, and nothing left
// behind, even by a run that was killed.
//
// Prefix gives a test a prefix no other run uses (tap.RunPrefix: its tag
// and this process's ID), removes the interfaces when the test ends, and,
// once per process, first sweeps away the interfaces of runs whose process
// is gone (tap.SweepStale): a test binary killed by go test's -timeout, or
// by hand, never runs its cleanups, and its persistent TAPs would stay.
// Command starts a helper process that the kernel kills when this one
// dies (Pdeathsig), so a killed test leaves no switch or host running.
package taptest

import (
	"errors"
	"os/exec"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/tap"
)

var sweep sync.Once

// Prefix skips (or, under CI, fails) a test that cannot make TAPs, and
// returns the prefix of its interfaces, tagged tag (1-4 letters or
// digits, distinct among the package's tests). The interfaces under it
// are removed when the test ends.
func Prefix(t testing.TB, tag string) string {
	t.Helper()
	testtool.Require(t, "tap", tap.Usable())
	sweep.Do(func() {
		if gone, err := tap.SweepStale(); err != nil {
			t.Logf("sweeping the interfaces of killed runs: %v", err)
		} else if len(gone) > 0 {
			t.Logf("removed %d interfaces that killed runs left: %v", len(gone), gone)
		}
	})
	prefix, err := tap.RunPrefix(tag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tap.Down(prefix); err != nil { // nothing, unless a test of this process reuses its tag
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := tap.Down(prefix); err != nil {
			t.Errorf("tap down %s: %v", prefix, err)
		}
		if left := Interfaces(t, prefix); len(left) > 0 {
			t.Errorf("interfaces left under %s: %v", prefix, left)
		}
	})
	return prefix
}

// Interfaces lists the interfaces named PREFIX-*.
func Interfaces(t testing.TB, prefix string) []string {
	t.Helper()
	links, err := netlink.LinkList()
	// A dump that another process's interface changes interrupted
	// (parallel TAP tests) is asked again, as netlink documents.
	for try := 0; errors.Is(err, errDumpInterrupted) && try < 10; try++ {
		links, err = netlink.LinkList()
	}
	if err != nil {
		t.Fatalf("list interfaces: %v", err)
	}
	var out []string
	for _, l := range links {
		if n := l.Attrs().Name; len(n) > len(prefix) && n[:len(prefix)+1] == prefix+"-" {
			out = append(out, n)
		}
	}
	return out
}

// Command is exec.Command for a process that must not outlive the test:
// the kernel kills it (SIGKILL) when the test process dies, however it
// dies (see procattr_linux.go).
func Command(name string, args ...string) *exec.Cmd {
	c := exec.Command(name, args...)
	c.SysProcAttr = procAttr()
	return c
}

// Isolated is Command for a program that makes interfaces under names it
// does not choose (an example that runs `inaemu tap up` with the default
// prefix ina): it runs in network, mount and PID namespaces of its own
// (unshare(1), with /sys mounted afresh so /sys/class/net shows the new
// network namespace). Its interfaces are seen by nobody else, and when it
// ends, or this process dies (Pdeathsig on unshare, --kill-child on the
// namespace's first process), every process in it is killed and its
// interfaces go with the namespace. Without unshare the error says so.
func Isolated(name string, args ...string) (*exec.Cmd, error) {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, err
	}
	inner := append([]string{"--net", "--mount", "--pid", "--fork", "--kill-child", "--",
		"sh", "-c", `mount -t sysfs sysfs /sys && ip link set lo up 2>/dev/null; exec "$@"`, "sh", name}, args...)
	return Command(unshare, inner...), nil
}

// Tie makes cmd (not yet started) die with the test process, as Command's
// processes do.
func Tie(cmd *exec.Cmd) *exec.Cmd {
	cmd.SysProcAttr = procAttr()
	return cmd
}
