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
		fmt.Fprintln(stdout, "\n  psn   PSN against time per connection (data, retransmissions, ACKs, NAKs, injected faults),\n        the shape of Wireshark's tcptrace graph, as SVG")
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	switch args[0] {
	case "psn":
		return runPlotPSN(args[1:], stdout, stderr)
	}
	fmt.Fprintf(stderr, "inaemu plot: unknown picture %q: want psn (see 'inaemu plot --help')\n", args[0])
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
	case !strings.HasSuffix(*out, ".svg") && !strings.HasSuffix(*out, ".png") && !strings.HasSuffix(*out, ".pdf"):
		fs.usageError("--out %s: want a .svg, .png or .pdf file", *out)
		return exitUsage
	case *maxConns < 1:
		fs.usageError("--max %d: want 1 or more", *maxConns)
		return exitUsage
	}
	format := (*out)[strings.LastIndexByte(*out, '.')+1:]
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
