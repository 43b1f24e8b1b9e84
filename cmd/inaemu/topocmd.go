package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/internal/units"
)

// topoCommand is 'inaemu topo show'.
func topoCommand(stdout, stderr io.Writer) *cobra.Command {
	c := parentCommand("topo", "command", "show a topology: nodes, links and their direction names, each switch's routes (text, JSON or Graphviz DOT)", stdout, stderr)
	var asJSON bool
	var dot string
	var jf *jobFlags
	show := newCommand("show", "print the topology a run would use", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runTopoShow(e, jf, asJSON, dot) })
	show.Long = `show prints the topology a run would use: its nodes, its links with the names of
their two directions (what --fault link=NAME and the capture's interfaces call
them), and each switch's next hops towards every host NIC.`
	show.Args = noArgs
	jf = &jobFlags{cmd: show}
	for _, o := range scenario.Options() {
		if o.Key == "workers" || o.Key == "topology" || o.Group == scenario.LinkGroup {
			jf.addOption(o)
		}
	}
	jf.addScenarioFlag()
	f := show.Flags()
	f.BoolVar(&asJSON, "json", false, `print one JSON object: {"kind","oversubscription","nodes":[{"name","kind","gpus",...}],"links":[{"a","b","rate_gbps","latency_ns","queue","directions",...}],"routes":[{"switch","host","nic","next_hops"}]}`)
	f.StringVar(&dot, "dot", "", "write the topology as Graphviz DOT to `FILE` ('-': stdout, instead of the text)")
	c.AddCommand(show)
	return c
}

// runTopoShow resolves a topology as 'inaemu run' does (the scenario's,
// --topology over it, links from --link/--latency/--queue where it sets
// none, the star of --workers hosts without one) and prints it: text in
// aligned columns, JSON (topo.Describe's layout) or Graphviz DOT.
func runTopoShow(fs *cmdEnv, jf *jobFlags, asJSON bool, dotFile string) int {
	stdout, stderr := fs.stdout, fs.stderr
	if dotFile == "-" && asJSON {
		fs.usageError("--json and --dot -: both want stdout; give --dot a file")
		return exitUsage
	}
	t, ok := resolveTopology(fs, jf)
	if !ok {
		return exitUsage
	}
	if dotFile != "" {
		if dotFile == "-" {
			fmt.Fprint(stdout, t.DOT())
			return exitOK
		}
		if err := os.WriteFile(dotFile, []byte(t.DOT()), 0o644); err != nil {
			return ioError(stderr, fs.name, "--dot "+dotFile, err)
		}
	}
	if asJSON {
		return fs.writeJSON(t)
	}
	d, err := t.Describe()
	if err != nil {
		fmt.Fprintf(stderr, "inaemu topo show: %v\n", err)
		return exitSoftware
	}
	printTopology(stdout, t, d)
	return exitOK
}

// resolveTopology builds the topology from the scenario file and the flags
// given (their defaults without a file), through the scenario's own Apply
// so the result is the network 'inaemu run' would build; false means a
// usage error has been printed.
func resolveTopology(fs *cmdEnv, jf *jobFlags) (*topo.Topology, bool) {
	merged, ok := jf.merged(fs)
	if !ok {
		return nil, false
	}
	file := jf.scenario
	cfg := emu.DefaultConfig()
	if err := merged.Apply(&cfg); err != nil {
		if file != "" {
			fs.usageError("scenario %s: %v", file, err)
		} else {
			fs.usageError("%v", err)
		}
		return nil, false
	}
	if cfg.Topology != nil {
		return cfg.Topology, true
	}
	t, err := topo.Star(cfg.Workers, topo.LinkParams{Rate: cfg.Link.Rate, Latency: cfg.Link.Latency, Queue: cfg.Link.Queue})
	if err != nil {
		fs.usageError("--workers %d: %v", cfg.Workers, err)
		return nil, false
	}
	return t, true
}

// printTopology writes the topology as text: a summary line, then the
// nodes, the links and the routes, each a table in aligned columns.
func printTopology(w io.Writer, t *topo.Topology, d *topo.Description) {
	over := "n/a"
	if o := t.Oversubscription(); o > 0 {
		over = fmt.Sprintf("%g:1", o)
	}
	fmt.Fprintf(w, "topology  %s: %s, %s, %s, oversubscription %s\n",
		t.Kind, count(len(t.Hosts()), "host"), count(len(t.Switches()), "switch"), count(len(t.Links), "link"), over)

	table := func(title string, header string, rows func(tw io.Writer)) {
		fmt.Fprintf(w, "\n%s\n", title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  "+header)
		rows(tw)
		_ = tw.Flush()
	}
	table("nodes", "NAME\tKIND\tGPUS\tLINKS", func(tw io.Writer) {
		for _, n := range t.Nodes {
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\n", n.Name, n.Kind, n.GPUs, len(n.Links))
		}
	})
	table("links", "A\tB\tRATE\tLATENCY\tQUEUE\tA->B\tB->A", func(tw io.Writer) {
		for _, l := range t.Links {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%v\t%d\t%s\t%s\n", l.A, l.B, units.FormatRate(l.Rate), l.Latency, l.QueueLen(), l.AB, l.BA)
		}
	})
	if len(d.Routes) == 0 {
		fmt.Fprintf(w, "\nroutes\n  none: no switches (hosts reach only the hosts they are linked to)\n")
		return
	}
	table("routes", "SWITCH\tTO\tNEXT-HOPS", func(tw io.Writer) {
		for _, r := range d.Routes {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", r.Switch, topo.NICName(r.Host, r.NIC), strings.Join(r.NextHops, ","))
		}
	})
}

// count writes n things: "1 host", "3 switches".
func count(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	if strings.HasSuffix(thing, "ch") {
		return fmt.Sprintf("%d %ses", n, thing)
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
