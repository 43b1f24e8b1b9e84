package taptest

import "github.com/vishvananda/netlink"

// errDumpInterrupted is netlink's answer when a parallel interface change
// interrupted a dump: the listing is asked again.
var errDumpInterrupted = netlink.ErrDumpInterrupted
