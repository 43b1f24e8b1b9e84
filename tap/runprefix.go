package tap

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Interfaces that belong to one process. A test (or any program that
// makes interfaces for its own run) names them with RunPrefix: its tag,
// an underscore and its process ID in base 36 ("itdt_1z3k-sw0"). Names
// no other run uses, so runs side by side on one machine never touch each
// other's interfaces; and names that say whose they are, so that when a
// run is killed (SIGKILL, a test binary's timeout) before its cleanup,
// the next run's SweepStale finds the interfaces whose process is gone
// and removes them.

// maxRunTag bounds a run prefix's tag: with a 5-digit base-36 PID (every
// PID Linux gives, up to 2^22) the longest name, PREFIX-brNN, fits 15
// characters for up to 100 ranks.
const maxRunTag = 4

// RunPrefix is the prefix of this process's interfaces tagged tag (1 to
// 4 letters or digits).
func RunPrefix(tag string) (string, error) {
	return runPrefix(tag, os.Getpid())
}

func runPrefix(tag string, pid int) (string, error) {
	if tag == "" || len(tag) > maxRunTag || strings.Trim(tag, "abcdefghijklmnopqrstuvwxyz0123456789") != "" {
		return "", fmt.Errorf("run prefix tag %q: want 1 to %d lower-case letters or digits", tag, maxRunTag)
	}
	return tag + "_" + strconv.FormatInt(int64(pid), 36), nil
}

// RunOwner reads the process ID from the prefix of an interface name
// made with RunPrefix ("itdt_1z3k-sw0" → "itdt_1z3k", 1z3k in base 36).
func RunOwner(name string) (prefix string, pid int, ok bool) {
	prefix, _, ok = strings.Cut(name, "-")
	if !ok {
		return "", 0, false
	}
	tag, id, ok := strings.Cut(prefix, "_")
	if !ok || tag == "" || len(tag) > maxRunTag || id == "" || len(id) > 6 {
		return "", 0, false
	}
	n, err := strconv.ParseInt(id, 36, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 36) != id {
		return "", 0, false
	}
	return prefix, int(n), true
}
