package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/graphs"
)

// plotThemisArgs are plot themis's flags.
type plotThemisArgs struct {
	out, title string
	asJSON     bool
}

// plotThemisCommand is 'inaemu plot themis': Themis's Fig. 9, each
// dimension's activity per 100 µs over a run, from a hier job's report or
// the flow-level executor's timeline.
func plotThemisCommand(stdout, stderr io.Writer) *cobra.Command {
	var a plotThemisArgs
	c := newCommand("themis RUN... --out FILE.svg", "Themis's Fig. 9: each dimension's activity per 100 µs over a run, from run --mode hier --json or themis run --timeline", stdout, stderr,
		func(e *cmdEnv, pos []string) int { return runPlotThemis(e, pos, a) })
	c.Long = `Draws Themis's Fig. 9 (Rashidi et al., ISCA '22, §6.2): per network dimension, the share of each
100 µs bin during which it was active, against time in ms, one line per dimension ("dim 1", "dim 2",
...). Inputs, any mix of them: 'inaemu run --mode hier --json' output (a panel per hier job: its
jobs[].hier.dims[].timeline_chunks, the chunks with a stage under way at some rank, time-weighted; a
bin can exceed 100 % when stages of different chunks overlap at different ranks), the CSV 'inaemu
themis run --timeline FILE' writes (a panel per file, its collectives one after another at their
start), or an emu/themis/flow Result as JSON (Bin, Dims[].Activity). Each timeline is its own panel,
stacked on one time and one activity scale, so that baseline and Themis runs given together compare at
a glance (the faster ends further left). Exit status 2 when an input is none of these or has no
activity to draw.`
	c.Args = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return errors.New("need a run with an activity timeline (inaemu run --mode hier --json output or an inaemu themis run --timeline CSV)")
		}
		return nil
	}
	f := c.Flags()
	f.StringVar(&a.out, "out", "", "the picture to write: FILE.svg, FILE.png or FILE.pdf (required)")
	f.StringVar(&a.title, "title", "", "the picture's title (default: what it shows and the bin)")
	f.BoolVar(&a.asJSON, "json", false, `print one JSON object: {"out","title","x","y","panels":[{"source","title","bin_ns","dims":[{"dim","name","kind","points":[{"bin","start_ms","activity_pct"}]}]}]}, the points drawn`)
	_ = c.MarkFlagRequired("out")
	_ = c.MarkFlagFilename("out", "svg", "png", "pdf")
	return c
}

func runPlotThemis(e *cmdEnv, files []string, a plotThemisArgs) int {
	format := pictureFormat(a.out)
	if format == "" {
		e.usageError("--out %s: want a .svg, .png or .pdf file", a.out)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "inaemu plot: %v\n", err)
		return exitUsage
	}
	runs, err := readPlotInputs(files, graphs.ReadThemisActivity)
	if err != nil {
		return fail(err)
	}
	chart, err := graphs.NewThemisChart(runs, graphs.ThemisOptions{Title: a.title})
	if err != nil {
		return fail(err)
	}
	if code, ok := writePicture(e, a.out, format, chart.Write); !ok {
		return code
	}
	if a.asJSON {
		return e.writeJSON(struct {
			Out string `json:"out"`
			*graphs.ThemisChart
		}{a.out, chart})
	}
	bins := 0
	for _, p := range chart.Panels {
		for _, d := range p.Dims {
			bins = max(bins, len(d.Points))
		}
	}
	fmt.Fprintf(e.stdout, "inaemu plot: %s: %d panels, up to %d bins\n", a.out, len(chart.Panels), bins)
	return exitOK
}
