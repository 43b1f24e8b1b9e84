package tap

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Interfaces that belong to one process. A test (or any program that
// makes interfaces for its own run) names them with RunPrefix: its tag,
// an underscore and its process ID in base 36 ("itdt_1z3k-sw0"). Names
// no other run uses, so runs side by side on one machine never touch each
// other's interfaces; and names that say whose they are, so that when a
// run is killed (SIGKILL, a test binary's timeout) before its cleanup,
// the next run's SweepStale finds the interfaces whose process is gone
// and removes them.
//
// A name alone does not say it is a run's: a user's `inaemu tap up
// --prefix lab_x1` reads as PID 1189. So RunPrefix also marks the prefix
// as this run's (in this process's environment, which the programs it
// starts inherit: runPrefixesEnv), and Up gives the interfaces it makes
// under a marked prefix the alias RunAlias(PID) instead of Alias. The
// sweep takes only interfaces with that alias.

// maxRunTag bounds a run prefix's tag: with a 5-digit base-36 PID (every
// PID Linux gives, up to 2^22) the longest name, PREFIX-brNN, fits 15
// characters for up to 100 ranks.
const maxRunTag = 4

// RunPrefix is the prefix of this process's interfaces tagged tag (1 to
// 4 letters or digits).
// The prefix is marked as a run's (see above): the interfaces Up makes
// under it, here or in a program this process starts, are RunAlias's.
func RunPrefix(tag string) (string, error) {
	p, err := runPrefix(tag, os.Getpid())
	if err != nil {
		return "", err
	}
	markRun(p)
	return p, nil
}

// runPrefixesEnv lists, space-separated, the run prefixes of this process
// (and of the process that started it).
const runPrefixesEnv = "INAEMU_RUN_PREFIXES"

var markMu sync.Mutex

// markRun adds prefix to runPrefixesEnv.
func markRun(prefix string) {
	markMu.Lock()
	defer markMu.Unlock()
	list := os.Getenv(runPrefixesEnv)
	if slices.Contains(strings.Fields(list), prefix) {
		return
	}
	_ = os.Setenv(runPrefixesEnv, strings.TrimSpace(list+" "+prefix))
}

// RunAlias is the alias of the interfaces of the run of process pid
// ("inaemu test run 4711"); they are inaemu's, as Alias's are.
func RunAlias(pid int) string { return Alias + " test run " + strconv.Itoa(pid) }

// aliasFor is the alias Up gives the interfaces it makes under prefix:
// RunAlias for a prefix marked as a run's, Alias for any other.
func aliasFor(prefix string) string {
	markMu.Lock()
	list := os.Getenv(runPrefixesEnv)
	markMu.Unlock()
	if !slices.Contains(strings.Fields(list), prefix) {
		return Alias
	}
	pid, ok := prefixPID(prefix)
	if !ok {
		return Alias
	}
	return RunAlias(pid)
}

// runAliasPID reads the process ID from a RunAlias.
func runAliasPID(alias string) (int, bool) {
	id, ok := strings.CutPrefix(alias, Alias+" test run ")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(id)
	if err != nil || pid <= 0 || strconv.Itoa(pid) != id {
		return 0, false
	}
	return pid, true
}

// ours reports whether an interface's alias says inaemu made it.
func ours(alias string) bool {
	if alias == Alias {
		return true
	}
	_, ok := runAliasPID(alias)
	return ok
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
	if pid, ok = prefixPID(prefix); !ok {
		return "", 0, false
	}
	return prefix, pid, true
}

// prefixPID reads the process ID from a prefix shaped as RunPrefix's.
func prefixPID(prefix string) (int, bool) {
	tag, id, ok := strings.Cut(prefix, "_")
	if !ok || tag == "" || len(tag) > maxRunTag || id == "" || len(id) > 6 {
		return 0, false
	}
	n, err := strconv.ParseInt(id, 36, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 36) != id {
		return 0, false
	}
	return int(n), true
}
