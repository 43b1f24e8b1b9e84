package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/inaemu/inaemu/graphs"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// runPlot draws pictures: `plot psn CAPTURE --out FILE.svg`.
func runPlot(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "--help" || args[0] == "-h" || args[0] == "help" {
		fmt.Fprintln(stdout, "Usage: inaemu plot psn CAPTURE --out FILE.svg [--max N] [--title T] [--json]")
		fmt.Fprintln(stdout, "       inaemu plot sweep RESULT.json... --x PARAM --out FILE.svg [--busbw] [--log-x] [--title T]")
		fmt.Fprintln(stdout, "\n  psn    PSN against time per connection (data, retransmissions, ACKs, NAKs, injected faults),\n         the shape of Wireshark's tcptrace graph")
		fmt.Fprintln(stdout, "  sweep  bandwidth against a swept parameter (loss, link, workers, ...) from sweep or run --json output")
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "psn":
		return runPlotPSN(args[1:], stdout, stderr)
	case "sweep":
		return runPlotSweep(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "inaemu plot: unknown picture %q: want psn or sweep (see 'inaemu plot --help')\n", args[0])
	return exitUsage
}

func runPlotPSN(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("plot psn", "CAPTURE --out FILE.svg [flags]", stdout, stderr)
	out := fs.String("out", "", "the picture to write: FILE.svg, FILE.png or FILE.pdf (required)")
	maxConns := fs.Int("max", 8, "draw at most this many connections, the first ones seen")
	title := fs.String("title", "", "the picture's title (default: the capture's name)")
	asJSON := fs.Bool("json", false, "also print one JSON object: the connections drawn and their points by kind")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	switch {
	case len(pos) != 1:
		fs.usageError("need exactly one capture file, got %d arguments", len(pos))
		return exitUsage
	case *out == "":
		fs.usageError("need --out FILE.svg")
		return exitUsage
	case pictureFormat(*out) == "":
		fs.usageError("--out %s: want a .svg, .png or .pdf file", *out)
		return exitUsage
	case *maxConns < 1:
		fs.usageError("--max %d: want 1 or more", *maxConns)
		return exitUsage
	}
	format := pictureFormat(*out)
	recs, names, err := pcapio.ReadAllNamed(pos[0])
	if err != nil {
		fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
		return exitUsage
	}
	conns := graphs.Traces(recs, names)
	if len(conns) == 0 {
		fmt.Fprintf(stderr, "inaemu plot: %s: no RoCE frames to draw\n", pos[0])
		return exitUsage
	}
	if *title == "" {
		*title = pos[0]
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
		return exitUsage
	}
	err = graphs.WritePSN(f, conns, graphs.PSNOptions{Title: *title, Max: *maxConns, Format: format})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		fmt.Fprintf(stderr, "inaemu plot: %s: %v\n", *out, err)
		return exitUsage
	}
	type connJSON struct {
		Conn   string         `json:"connection"`
		Points map[string]int `json:"points"`
	}
	var js []connJSON
	for i, c := range conns {
		if i == *maxConns {
			break
		}
		cj := connJSON{Conn: c.String(), Points: map[string]int{}}
		for _, p := range c.Points {
			cj.Points[p.Kind.String()]++
		}
		js = append(js, cj)
	}
	if *asJSON {
		json.NewEncoder(stdout).Encode(map[string]any{"out": *out, "connections": len(conns), "drawn": js})
		return exitOK
	}
	fmt.Fprintf(stdout, "inaemu plot: %s: %d connections, %d drawn\n", *out, len(conns), len(js))
	return exitOK
}

// pictureFormat is the format a picture's file name asks for: svg, png,
// pdf, or "" for none of them.
func pictureFormat(name string) string {
	for _, f := range []string{"svg", "png", "pdf"} {
		if strings.HasSuffix(name, "."+f) {
			return f
		}
	}
	return ""
}

func runPlotSweep(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("plot sweep", "RESULT.json... --x PARAM --out FILE.svg [flags]", stdout, stderr)
	out := fs.String("out", "", "the picture to write: FILE.svg, FILE.png or FILE.pdf (required)")
	x := fs.String("x", "", "the parameter on the x axis: loss (% of a sweep's netem loss), link (Gbit/s), or a numeric field of run results (workers, bytes, ...) (required)")
	bus := fs.Bool("busbw", false, "plot busbw instead of algbw")
	logX := fs.Bool("log-x", false, "a logarithmic x axis (points at 0 are left out)")
	title := fs.String("title", "", "the picture's title")
	pos, err := fs.parse(args)
	if err != nil {
		return flagExit(err)
	}
	switch {
	case len(pos) == 0:
		fs.usageError("need at least one result file (inaemu sweep --json or inaemu run --json output)")
		return exitUsage
	case *out == "" || *x == "":
		fs.usageError("need --x PARAM and --out FILE.svg")
		return exitUsage
	case pictureFormat(*out) == "":
		fs.usageError("--out %s: want a .svg, .png or .pdf file", *out)
		return exitUsage
	}
	var samples []graphs.Sample
	for _, name := range pos {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
			return exitUsage
		}
		s, err := graphs.ReadResults(name, f)
		f.Close()
		if err != nil {
			fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
			return exitUsage
		}
		samples = append(samples, s...)
	}
	f, err := os.Create(*out)
	if err != nil {
		fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
		return exitUsage
	}
	err = graphs.WriteSweep(f, samples, graphs.SweepOptions{X: *x, BusBW: *bus, LogX: *logX, Title: *title, Format: pictureFormat(*out)})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out)
		fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "inaemu plot: %s: %d results\n", *out, len(samples))
	return exitOK
}
