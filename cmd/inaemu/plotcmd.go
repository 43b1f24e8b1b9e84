package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/graphs"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// plotCommand is 'inaemu plot psn|sweep|esa': pictures.
func plotCommand(stdout, stderr io.Writer) *cobra.Command {
	c := parentCommand("plot", "picture", "draw pictures as SVG: PSN against time per connection from any capture", stdout, stderr)
	c.Long = `  psn    PSN against time per connection (data, retransmissions, ACKs, NAKs, injected faults),
         the shape of Wireshark's tcptrace graph
  sweep  bandwidth against a swept parameter (loss, link, workers, ...) from sweep or run --json output
  esa    one of ESA's figures (8, 9, 10, 11) as the paper draws it, from inaps figure --json output
  themis Themis's Fig. 9: each dimension's activity per 100 µs, from run --mode hier --json or themis run --timeline`
	c.AddCommand(plotPSNCommand(stdout, stderr), plotSweepCommand(stdout, stderr), plotESACommand(stdout, stderr), plotThemisCommand(stdout, stderr))
	return c
}

// plotPSNArgs are plot psn's flags.
type plotPSNArgs struct {
	out, title string
	maxConns   int
	asJSON     bool
}

func plotPSNCommand(stdout, stderr io.Writer) *cobra.Command {
	var a plotPSNArgs
	c := newCommand("psn CAPTURE --out FILE.svg", "PSN against time per connection (data, retransmissions, ACKs, NAKs, injected faults)", stdout, stderr,
		func(e *cmdEnv, pos []string) int { return runPlotPSN(e, pos[0], a) })
	c.Args = oneCapture
	f := c.Flags()
	f.StringVar(&a.out, "out", "", "the picture to write: FILE.svg, FILE.png or FILE.pdf (required)")
	f.IntVar(&a.maxConns, "max", 8, "draw at most this many connections, the first ones seen")
	f.StringVar(&a.title, "title", "", "the picture's title (default: the capture's name)")
	f.BoolVar(&a.asJSON, "json", false, "also print one JSON object: the connections drawn and their points by kind")
	_ = c.MarkFlagRequired("out")
	_ = c.MarkFlagFilename("out", "svg", "png", "pdf")
	return c
}

func runPlotPSN(fs *cmdEnv, file string, a plotPSNArgs) int {
	stdout, stderr := fs.stdout, fs.stderr
	pos := []string{file}
	out, maxConns, title, asJSON := &a.out, &a.maxConns, &a.title, &a.asJSON
	switch {
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
	ioErr, err := writeFile(*out, func(w io.Writer) error {
		return graphs.WritePSN(w, conns, graphs.PSNOptions{Title: *title, Max: *maxConns, Format: format})
	})
	if ioErr != nil {
		return ioError(stderr, fs.name, "--out "+*out, ioErr)
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
		return fs.writeJSON(map[string]any{"out": *out, "connections": len(conns), "drawn": js})
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

// plotSweepArgs are plot sweep's flags.
type plotSweepArgs struct {
	out, x, title string
	bus, logX     bool
}

func plotSweepCommand(stdout, stderr io.Writer) *cobra.Command {
	var a plotSweepArgs
	c := newCommand("sweep RESULT.json... --x PARAM --out FILE.svg", "bandwidth against a swept parameter (loss, link, workers, ...) from sweep or run --json output", stdout, stderr,
		func(e *cmdEnv, pos []string) int { return runPlotSweep(e, pos, a) })
	c.Args = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return errors.New("need at least one result file (inaemu sweep --json or inaemu run --json output)")
		}
		return nil
	}
	f := c.Flags()
	f.StringVar(&a.out, "out", "", "the picture to write: FILE.svg, FILE.png or FILE.pdf (required)")
	f.StringVar(&a.x, "x", "", "the parameter on the x axis: loss (% of a sweep's netem loss), link (Gbit/s), or a numeric field of run results (workers, bytes, ...) (required)")
	f.BoolVar(&a.bus, "busbw", false, "plot busbw instead of algbw")
	f.BoolVar(&a.logX, "log-x", false, "a logarithmic x axis (points at 0 are left out)")
	f.StringVar(&a.title, "title", "", "the picture's title")
	addUnitsFlag(c)
	_ = c.MarkFlagRequired("x")
	_ = c.MarkFlagRequired("out")
	_ = c.MarkFlagFilename("out", "svg", "png", "pdf")
	return c
}

func runPlotSweep(fs *cmdEnv, pos []string, a plotSweepArgs) int {
	stdout, stderr := fs.stdout, fs.stderr
	out, x, bus, logX, title := &a.out, &a.x, &a.bus, &a.logX, &a.title
	if pictureFormat(*out) == "" {
		fs.usageError("--out %s: want a .svg, .png or .pdf file", *out)
		return exitUsage
	}
	var samples []graphs.Sample
	for _, name := range pos {
		b, err := readInput(name)
		if err != nil {
			fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
			return exitUsage
		}
		s, err := graphs.ReadResults(name, bytes.NewReader(b))
		if err != nil {
			fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
			return exitUsage
		}
		samples = append(samples, s...)
	}
	ioErr, err := writeFile(*out, func(w io.Writer) error {
		return graphs.WriteSweep(w, samples, graphs.SweepOptions{X: *x, BusBW: *bus, LogX: *logX, Title: *title, Format: pictureFormat(*out), Unit: fs.bw})
	})
	if ioErr != nil {
		return ioError(stderr, fs.name, "--out "+*out, ioErr)
	}
	if err != nil {
		os.Remove(*out)
		fmt.Fprintf(stderr, "inaemu plot: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stdout, "inaemu plot: %s: %d results\n", *out, len(samples))
	return exitOK
}
