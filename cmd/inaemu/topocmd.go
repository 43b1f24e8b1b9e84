package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/internal/units"
)

const topoUsage = `Usage: inaemu topo show [--topology SPEC] [--scenario FILE] [--workers N] [--link R] [--latency D] [--queue N] [--json] [--dot FILE]

show prints the topology a run would use: its nodes, its links with the names of
their two directions (what --fault link=NAME and the capture's interfaces call
them), and each switch's next hops towards every host NIC. See
'inaemu topo show --help' for the flags.`

// runTopo is 'inaemu topo': only 'show' for now.
func runTopo(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "show" {
		for _, a := range args {
			if a == "-h" || a == "-help" || a == "--help" {
				fmt.Fprintln(stdout, topoUsage)
				return exitOK
			}
		}
		fmt.Fprintln(stderr, "inaemu topo: want 'show' (see 'inaemu topo --help')")
		return exitUsage
	}
	return runTopoShow(args[1:], stdout, stderr)
}

// runTopoShow resolves a topology as 'inaemu run' does (the scenario's,
// --topology over it, links from --link/--latency/--queue where it sets
// none, the star of --workers hosts without one) and prints it: text in
// aligned columns, JSON (topo.Describe's layout) or Graphviz DOT.
func runTopoShow(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("topo show", "[--topology SPEC] [--scenario FILE] [--workers N] [--link R] [--latency D] [--queue N] [--json] [--dot FILE]", stdout, stderr)
	def := emu.DefaultConfig()
	spec := fs.String("topology", "", topologyHelp)
	file := fs.String("scenario", "", "take the topology (and its link settings) from a scenario `FILE`; flags given too override it")
	workers := fs.Int("workers", def.Workers, "`N` hosts of the default star (and of a star that does not say)")
	link := fs.String("link", units.FormatRate(def.Link.Rate), "link `RATE` wherever the topology sets none, e.g. 10G, 100G")
	latency := fs.String("latency", def.Link.Latency.String(), "one-way propagation delay `D` wherever the topology sets none")
	queue := fs.Int("queue", 1000, "egress queue per link direction, `N` frames, wherever the topology sets none")
	asJSON := fs.Bool("json", false, `print one JSON object: {"kind","oversubscription","nodes":[{"name","kind","gpus",...}],"links":[{"a","b","rate_gbps","latency_ns","queue","directions",...}],"routes":[{"switch","host","nic","next_hops"}]}`)
	dot := fs.String("dot", "", "write the topology as Graphviz DOT to `FILE` ('-': stdout, instead of the text)")
	if code, ok := fs.parseFlagsOnly(args); !ok {
		return code
	}
	if *dot == "-" && *asJSON {
		fs.usageError("--json and --dot -: both want stdout; give --dot a file")
		return exitUsage
	}
	t, ok := resolveTopology(fs, *spec, *file, *workers, *link, *latency, *queue)
	if !ok {
		return exitUsage
	}
	if *dot != "" {
		if *dot == "-" {
			fmt.Fprint(stdout, t.DOT())
			return exitOK
		}
		if err := os.WriteFile(*dot, []byte(t.DOT()), 0o644); err != nil {
			fmt.Fprintf(stderr, "inaemu topo show: %v\n", err)
			return exitUsage
		}
	}
	if *asJSON {
		if err := json.NewEncoder(stdout).Encode(t); err != nil {
			fmt.Fprintf(stderr, "inaemu topo show: %v\n", err)
			return exitSoftware
		}
		return exitOK
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
func resolveTopology(fs *cmdFlags, spec, file string, workers int, link, latency string, queue int) (*topo.Topology, bool) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	merged := &scenario.Scenario{}
	if file != "" {
		var err error
		if merged, err = scenario.Load(file); err != nil {
			fs.usageError("scenario: %v", err)
			return nil, false
		}
	}
	over := &scenario.Scenario{}
	if set["workers"] || file == "" {
		over.Workers = &workers
	}
	if set["link"] || file == "" {
		over.Link = link
	}
	if set["latency"] || file == "" {
		over.Latency = latency
	}
	if set["queue"] || file == "" {
		over.Queue = &queue
	}
	if spec != "" {
		sp, err := topo.ParseFlag(spec)
		if err != nil {
			fs.usageError("--topology: %v", err)
			return nil, false
		}
		over.Topology = sp
		if !set["workers"] {
			over.Workers = nil // a topology given without --workers shows all its hosts
		}
	}
	merged.Override(over)
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
