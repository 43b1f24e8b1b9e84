// Command inaemu is the CLI of the in-network-aggregation RoCE emulator.
// It is thin: each subcommand parses flags, calls a package, and formats the
// result. Exit codes: 0 success, 1 a check failed (a result differs), 2
// usage error or unreadable input, 3 the emulated job failed (transport
// error), 4 TAP devices cannot be used here (no /dev/net/tun or no
// CAP_NET_ADMIN).
package main

import (
	"fmt"
	"io"
	"os"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "emulate an allreduce (NetReduce or Ring) through the aggregating switch, with faults", runRun},
		{"conformance", "run the property suites (aggregation, go-back-N, checksum) with shrunk counterexamples", runConformance},
		{"tap", "create (up) or remove (down) the TAP interfaces and bridges of a job on real interfaces", runTap},
		{"switch", "run the aggregating switch on TAP ports (one process; hosts join with 'inaemu host')", runSwitch},
		{"host", "run one worker on a TAP interface, in its own process", runHost},
		{"replay", "feed a capture through the emulated switch offline and write what it emits", runReplay},
		{"decode", "print every frame of a pcap/pcapng capture, one line (or JSON object) each", runDecode},
		{"check", "check a capture: ICRCs, go-back-N on both sides, latencies, NetReduce sums", runCheck},
	}
}

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func usage(w io.Writer) {
	fmt.Fprintln(w, "inaemu - emulator and test harness for in-network aggregation over RoCE")
	fmt.Fprintln(w, "\nUsage: inaemu COMMAND [flags] [args]")
	fmt.Fprintln(w, "\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'inaemu COMMAND --help' for a command's flags.")
}

func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		usage(stderr)
		return exitUsage
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		usage(stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name == args[0] {
			return c.run(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "inaemu: unknown command %q (see 'inaemu --help')\n", args[0])
	return exitUsage
}
