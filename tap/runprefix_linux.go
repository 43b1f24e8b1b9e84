package tap

import (
	"errors"
	"fmt"
	"sort"
	"syscall"

	"github.com/vishvananda/netlink"
)

// alive reports whether process pid exists.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// SweepStale removes the interfaces a run made under its prefix
// (RunPrefix; they carry RunAlias, with its process ID) whose process is
// gone: what a killed run left. Interfaces with the plain Alias stay,
// whatever their prefix looks like: a user made them. It returns the
// names removed.
func SweepStale() ([]string, error) {
	if err := Usable(); err != nil {
		return nil, err
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	stale := map[string]bool{}
	for _, l := range links {
		a := l.Attrs()
		pid, ok := runAliasPID(a.Alias)
		if !ok {
			continue
		}
		if prefix, owner, ok := RunOwner(a.Name); ok && owner == pid && !alive(pid) && ownedName(prefix, a.Name) {
			stale[prefix] = true
		}
	}
	prefixes := make([]string, 0, len(stale))
	for p := range stale {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	var removed []string
	for _, p := range prefixes {
		names, err := Down(p)
		removed = append(removed, names...)
		if err != nil {
			return removed, err
		}
	}
	return removed, nil
}
