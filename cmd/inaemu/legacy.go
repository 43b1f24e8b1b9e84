package main

import (
	"io"

	"github.com/spf13/cobra"
)

// legacyCommand wraps a command not yet declared with cobra flags: it
// parses its own arguments (flags.go) until it is migrated.
func legacyCommand(name, short string, stdout, stderr io.Writer, f func([]string, io.Writer, io.Writer) int) *cobra.Command {
	return &cobra.Command{Use: name, Short: short, DisableFlagParsing: true,
		RunE: func(c *cobra.Command, args []string) error {
			if code := f(args, stdout, stderr); code != exitOK {
				return exitCode(code)
			}
			return nil
		}}
}

func runCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("run", "emulate an allreduce (NetReduce or Ring) through the aggregating switch, with faults", o, e, runRun)
}
func topoCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("topo", "show a topology: nodes, links and their direction names, each switch's routes (text, JSON or Graphviz DOT)", o, e, runTopo)
}
func sweepCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("sweep", "run a job over a grid of algorithms, link rates and impairments (goodput against loss, ...)", o, e, runSweep)
}
func conformanceCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("conformance", "run the property suites (aggregation, go-back-N, checksum) with shrunk counterexamples", o, e, runConformance)
}
func tapCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("tap", "create (up) or remove (down) the TAP interfaces and bridges of a job on real interfaces", o, e, runTap)
}
func switchCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("switch", "run the aggregating switch on TAP ports (one process; hosts join with 'inaemu host')", o, e, runSwitch)
}
func hostCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("host", "run one worker on a TAP interface, in its own process", o, e, runHost)
}
func replayCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("replay", "feed a capture through the emulated switch offline and write what it emits", o, e, runReplay)
}
func plotCommand(o, e io.Writer) *cobra.Command {
	return legacyCommand("plot", "draw pictures as SVG: PSN against time per connection from any capture", o, e, runPlot)
}
