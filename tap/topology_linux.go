package tap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
)

// txQueueLen is each TAP's queue towards its reader: deep enough for a
// window of full messages (NetReduce N × MsgLen) from every rank.
const txQueueLen = 10000

// Up creates (or completes) the topology: the TAPs and bridges that are
// missing, each up, with IPv6 off and the MTU set. It is idempotent. It
// returns the names it created. A Wired topology has no bridges: a TAP
// left in one by an earlier Up leaves it (or frames would cross twice).
func Up(t Topology) ([]string, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if err := Usable(); err != nil {
		return nil, err
	}
	alias := aliasFor(t.Prefix)
	var made []string
	for r := 0; r < t.Workers; r++ {
		var br netlink.Link
		if !t.Wired {
			var created bool
			var err error
			br, created, err = ensureBridge(t.Bridge(r), alias)
			if created { // even when a later step failed: the caller removes it
				made = append(made, t.Bridge(r))
			}
			if err != nil {
				return made, err
			}
		}
		for _, name := range []string{t.SwitchPort(r), t.Host(r)} {
			created, err := ensureTAP(name, br, alias)
			if created {
				made = append(made, name)
			}
			if err != nil {
				return made, err
			}
		}
	}
	return made, nil
}

// Down removes the topology's interfaces that inaemu made (those with
// Alias, or a run's RunAlias), whatever their number; it is idempotent and returns the names it
// removed.
func Down(prefix string) ([]string, error) {
	if err := Usable(); err != nil {
		return nil, err
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var removed []string
	// TAPs first, so no bridge is removed with ports still in it.
	for _, wantBridge := range []bool{false, true} {
		for _, l := range links {
			a := l.Attrs()
			if !ours(a.Alias) || !ownedName(prefix, a.Name) {
				continue
			}
			if _, isBridge := l.(*netlink.Bridge); isBridge != wantBridge {
				continue
			}
			if err := netlink.LinkDel(l); err != nil && !errors.Is(err, os.ErrNotExist) {
				return removed, fmt.Errorf("remove %s: %w", a.Name, err)
			}
			removed = append(removed, a.Name)
		}
	}
	return removed, nil
}

func ensureBridge(name, alias string) (netlink.Link, bool, error) {
	created := false
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return nil, false, fmt.Errorf("look up %s: %w", name, err)
		}
		la := netlink.NewLinkAttrs()
		la.Name, la.MTU = name, DefaultMTU
		br := &netlink.Bridge{LinkAttrs: la}
		if err := netlink.LinkAdd(br); err != nil {
			return nil, false, fmt.Errorf("create bridge %s: %w", name, err)
		}
		created = true
		if l, err = netlink.LinkByName(name); err != nil {
			return nil, created, fmt.Errorf("look up %s: %w", name, err)
		}
		if err := netlink.LinkSetAlias(l, alias); err != nil { // first, so Down finds it whatever fails next
			return nil, created, fmt.Errorf("%s: set alias: %w", name, err)
		}
	} else if _, ok := l.(*netlink.Bridge); !ok {
		return nil, false, fmt.Errorf("%s exists and is a %s, not a bridge", name, l.Type())
	}
	// A link, not a LAN: ports forward as soon as they have carrier, and the
	// bridge neither snoops nor sends multicast queries.
	for _, set := range [][2]string{{"forward_delay", "0"}, {"multicast_snooping", "0"}, {"stp_state", "0"}} {
		if err := os.WriteFile("/sys/class/net/"+name+"/bridge/"+set[0], []byte(set[1]+"\n"), 0o644); err != nil {
			return nil, created, fmt.Errorf("%s: set %s %s: %w", name, set[0], set[1], err)
		}
	}
	if err := quiet(l, alias); err != nil {
		return nil, created, err
	}
	return l, created, nil
}

// ensureTAP makes the TAP name (if missing) and puts it in bridge br, or
// in none when br is nil; a TAP it makes gets alias.
func ensureTAP(name string, br netlink.Link, alias string) (bool, error) {
	created := false
	l, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) {
			return false, fmt.Errorf("look up %s: %w", name, err)
		}
		// water creates the persistent TAP; closing the descriptor leaves it.
		d, err := Open(name)
		if err != nil {
			return false, err
		}
		d.Close()
		created = true
		if l, err = netlink.LinkByName(name); err != nil {
			return created, fmt.Errorf("look up %s: %w", name, err)
		}
		if err := netlink.LinkSetAlias(l, alias); err != nil {
			return created, fmt.Errorf("%s: set alias: %w", name, err)
		}
	} else if l.Type() != "tuntap" {
		return false, fmt.Errorf("%s exists and is a %s, not a TAP", name, l.Type())
	}
	if err := netlink.LinkSetTxQLen(l, txQueueLen); err != nil {
		return created, fmt.Errorf("%s: set txqueuelen: %w", name, err)
	}
	switch {
	case br == nil && l.Attrs().MasterIndex != 0:
		if err := netlink.LinkSetNoMaster(l); err != nil {
			return created, fmt.Errorf("%s: leave its bridge: %w", name, err)
		}
	case br != nil && l.Attrs().MasterIndex != br.Attrs().Index:
		if err := netlink.LinkSetMaster(l, br); err != nil {
			return created, fmt.Errorf("%s: join bridge %s: %w", name, br.Attrs().Name, err)
		}
	}
	return created, quiet(l, alias)
}

// quiet marks an interface as inaemu's, sets its MTU, turns IPv6 off (no
// router solicitations, DAD or MLD reports: the kernel's chatter) and
// brings it up. It has no IPv4 address, so the kernel sends no ARP either.
func quiet(l netlink.Link, alias string) error {
	name := l.Attrs().Name
	if l.Attrs().Alias == "" {
		if err := netlink.LinkSetAlias(l, alias); err != nil {
			return fmt.Errorf("%s: set alias: %w", name, err)
		}
	}
	if l.Attrs().MTU != DefaultMTU {
		if err := netlink.LinkSetMTU(l, DefaultMTU); err != nil {
			return fmt.Errorf("%s: set MTU %d: %w", name, DefaultMTU, err)
		}
	}
	if err := disableIPv6(name); err != nil {
		return err
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("%s: set up: %w", name, err)
	}
	return nil
}

// disableIPv6 writes the interface's disable_ipv6 sysctl. A kernel without
// IPv6 has no such file and no IPv6 chatter.
func disableIPv6(name string) error {
	p := "/proc/sys/net/ipv6/conf/" + name + "/disable_ipv6"
	if _, err := os.Stat("/proc/sys/net/ipv6"); err != nil {
		return nil
	}
	if err := os.WriteFile(p, []byte("1\n"), 0o644); err != nil {
		return fmt.Errorf("%s: turn IPv6 off: %w", name, err)
	}
	return nil
}

// Remove deletes the named interfaces (those Up reported it created); names
// already gone are skipped.
func Remove(names []string) error {
	var first error
	// TAPs before bridges, as in Down.
	for _, wantBridge := range []bool{false, true} {
		for _, n := range names {
			l, err := netlink.LinkByName(n)
			if err != nil {
				continue
			}
			if _, isBridge := l.(*netlink.Bridge); isBridge != wantBridge {
				continue
			}
			if err := netlink.LinkDel(l); err != nil && first == nil {
				first = fmt.Errorf("remove %s: %w", n, err)
			}
		}
	}
	return first
}

// WaitUp waits until every named interface is up with its carrier seen
// (a process holds the TAP open) and, if it is a bridge port, forwarding.
// The kernel applies a new carrier asynchronously, and until then frames
// sent out of the interface, or bridged to it, are dropped. An interface
// whose driver reports no operational state (operstate "unknown", as the
// TAPs DPDK's tap driver makes) counts as up once it has a carrier.
func WaitUp(ctx context.Context, names ...string) error {
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		var notYet []string
		for _, n := range names {
			st, err := os.ReadFile("/sys/class/net/" + n + "/brport/state")
			if !operUp(n) || (err == nil && strings.TrimSpace(string(st)) != "3") { // 3: BR_STATE_FORWARDING
				notYet = append(notYet, n)
			}
		}
		if len(notYet) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%v not up and forwarding: %w", notYet, ctx.Err())
		case <-tick.C:
		}
	}
}

// operUp: the interface's operational state is up, or unknown with a
// carrier (RFC 2863 states are the driver's to report; many never do).
func operUp(name string) bool {
	op, _ := os.ReadFile("/sys/class/net/" + name + "/operstate")
	switch strings.TrimSpace(string(op)) {
	case "up":
		return true
	case "unknown":
		c, _ := os.ReadFile("/sys/class/net/" + name + "/carrier")
		return strings.TrimSpace(string(c)) == "1"
	}
	return false
}
