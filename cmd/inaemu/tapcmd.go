package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/tap"
)

// tapCommand is 'inaemu tap up|down'.
func tapCommand(stdout, stderr io.Writer) *cobra.Command {
	c := parentCommand("tap", "command", "create (up) or remove (down) the TAP interfaces and bridges of a job on real interfaces", stdout, stderr)
	c.Long = "up creates, for each rank r, the switch port PREFIX-swR, the host NIC PREFIX-hR (persistent TAPs) and the\n" +
		"bridge PREFIX-brR joining them, MTU 9000, IPv6 off; down removes every interface with that prefix that\n" +
		"inaemu made. Both are idempotent."
	for _, verb := range []string{"up", "down"} {
		var prefix string
		var workers int
		var asJSON, wired bool
		short := map[string]string{"up": "create the TAPs and bridges of --workers ranks", "down": "remove every interface with the prefix that inaemu made"}[verb]
		sub := newCommand(verb, short, stdout, stderr, func(e *cmdEnv, _ []string) int { return runTap(e, verb, prefix, workers, wired, asJSON) })
		sub.Args = noArgs
		f := sub.Flags()
		if verb == "up" {
			f.IntVar(&workers, "workers", 8, "number of ranks H: H switch ports, H host NICs, H bridges")
			f.BoolVar(&wired, "wired", false, "no bridges: TAPs only, for 'inaemu wire' or a device under test ('--dut tap:PREFIX'); TAPs in a bridge leave it")
		}
		f.StringVar(&prefix, "prefix", tap.DefaultPrefix, "interface name prefix")
		f.BoolVar(&asJSON, "json", false, "print {\"created\": [...]} or {\"removed\": [...]}")
		c.AddCommand(sub)
	}
	return c
}

func runTap(fs *cmdEnv, verb, prefix string, workers int, wired, asJSON bool) int {
	stdout := fs.stdout
	topo := tap.Topology{Prefix: prefix, Workers: workers, Wired: wired}
	if verb == "up" {
		if err := topo.Validate(); err != nil {
			fs.usageError("%v", err)
			return exitUsage
		}
	}
	if code := needTAP(fs); code != 0 {
		return code
	}
	var names []string
	var err error
	key := "created"
	if verb == "up" {
		names, err = tap.Up(topo)
	} else {
		key = "removed"
		names, err = tap.Down(prefix)
	}
	if err != nil {
		return tapFailure(fs, err)
	}
	if names == nil {
		names = []string{}
	}
	if asJSON {
		return fs.writeJSON(map[string][]string{key: names})
	}
	if len(names) == 0 {
		fmt.Fprintf(stdout, "inaemu tap %s: nothing to do (%s)\n", verb, map[string]string{"up": "all interfaces exist", "down": "no interface of inaemu's with prefix " + prefix}[verb])
	} else {
		fmt.Fprintf(stdout, "inaemu tap %s: %s %s\n", verb, key, strings.Join(names, " "))
	}
	if verb == "up" && !wired {
		fmt.Fprintf(stdout, "  watch a link: tshark -i %s   (all: %s)\n", topo.Bridge(0), "-i "+strings.Join(topo.Bridges(), " -i "))
	}
	if verb == "up" && wired {
		fmt.Fprintf(stdout, "  no bridges: join %s..%s to %s..%s with 'inaemu wire', or test a device on %s..%s with '--dut tap:%s'\n",
			topo.Host(0), topo.Host(workers-1), topo.SwitchPort(0), topo.SwitchPort(workers-1), topo.SwitchPort(0), topo.SwitchPort(workers-1), prefix)
	}
	return exitOK
}
