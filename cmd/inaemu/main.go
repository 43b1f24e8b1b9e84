// Command inaemu is the CLI of the in-network-aggregation RoCE emulator.
// It is thin: each subcommand parses flags, calls a package, and formats the
// result. Exit codes: 0 success, 1 a check failed (a result differs), 2
// usage error or unreadable input, 3 the emulated job failed (transport
// error), 4 TAP devices cannot be used here (no /dev/net/tun or no
// CAP_NET_ADMIN), 70 an internal error (a bug: a panic, reported in one
// line).
package main

import (
	"fmt"
	"io"
	"os"
	"strings"
)

const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	// exitSoftware is EX_SOFTWARE (sysexits.h): an internal error.
	exitSoftware = 70
)

type command struct {
	name    string
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"run", "emulate an allreduce (NetReduce or Ring) through the aggregating switch, with faults", runRun},
		{"topo", "show a topology: nodes, links and their direction names, each switch's routes (text, JSON or Graphviz DOT)", runTopo},
		{"sweep", "run a job over a grid of algorithms, link rates and impairments (goodput against loss, ...)", runSweep},
		{"conformance", "run the property suites (aggregation, go-back-N, checksum) with shrunk counterexamples", runConformance},
		{"tap", "create (up) or remove (down) the TAP interfaces and bridges of a job on real interfaces", runTap},
		{"switch", "run the aggregating switch on TAP ports (one process; hosts join with 'inaemu host')", runSwitch},
		{"host", "run one worker on a TAP interface, in its own process", runHost},
		{"replay", "feed a capture through the emulated switch offline and write what it emits", runReplay},
		{"decode", "print every frame of a pcap/pcapng capture, one line (or JSON object) each", runDecode},
		{"check", "check a capture: ICRCs, go-back-N on both sides, latencies, NetReduce sums", runCheck},
		{"plot", "draw pictures as SVG: PSN against time per connection from any capture", runPlot},
	}
}

func main() { os.Exit(guarded(os.Args[1:], os.Stdout, os.Stderr, run)) }

// guarded runs the command and turns a panic into one line on stderr and
// exit 70: a user never sees a Go trace. Bad input never gets here; it is
// a usage error (exit 2) with its own reason. (A panic in another
// goroutine, and the runtime's fatal errors such as running out of
// memory, cannot be recovered; run refuses jobs too big for the machine
// before allocating them.)
func guarded(args []string, stdout, stderr io.Writer, f func([]string, io.Writer, io.Writer) int) (code int) {
	defer func() {
		if p := recover(); p != nil {
			msg := strings.Join(strings.Fields(fmt.Sprint(p)), " ")
			fmt.Fprintf(stderr, "inaemu: internal error: %s; please report it with the command line\n", msg)
			code = exitSoftware
		}
	}()
	return f(args, stdout, stderr)
}

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
