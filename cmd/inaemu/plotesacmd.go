package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/graphs"
)

// plotESAArgs are plot esa's flags.
type plotESAArgs struct {
	out, title   string
	wire, asJSON bool
}

// plotESACommand is 'inaemu plot esa': one of ESA's evaluation figures
// drawn as the paper draws it, from 'inaemu inaps figure N --json'.
func plotESACommand(stdout, stderr io.Writer) *cobra.Command {
	var a plotESAArgs
	c := newCommand("esa FIGURE.json... --out FILE.svg", "one of ESA's figures (8, 9, 10, 11) as the paper draws it, from inaps figure --json output", stdout, stderr,
		func(e *cmdEnv, pos []string) int { return runPlotESA(e, pos, a) })
	c.Long = `Draws the report of 'inaemu inaps figure N --json' (or the reports of all its --shard runs, in
one file or several) as ESA's paper does: Fig. 8 and Fig. 9 the average JCT in ms against the jobs
and against the workers per job, one line per policy and one panel per mix (all A, all B,
A:B = 1:1); Fig. 10 the utilisation in % as bars per policy grouped by mix; Fig. 11 the JCT
speed-up over ATP-style (fcfs) of ESA, Straw1 and Straw2, grouped by mix. Legends use the paper's
names: esa ESA, fcfs ATP-style, static SwitchML-style, straw1 Straw1, straw2 Straw2. A cell with no
exact run has no mean and is left out (named in the output). Exit status 2 when an input is not a
figure report, the figure is not 8 to 11, or cells are missing (a shard's report not given).`
	c.Args = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return errors.New("need a figure report (inaemu inaps figure N --json output)")
		}
		return nil
	}
	f := c.Flags()
	f.StringVar(&a.out, "out", "", "the picture to write: FILE.svg, FILE.png or FILE.pdf (required)")
	f.StringVar(&a.title, "title", "", "the picture's title (default: the figure's number, what it shows and its seeds)")
	f.BoolVar(&a.wire, "wire", false, "Fig. 10: the utilisation of the wire bytes (mean_utilisation_wire) instead of the payload's")
	f.BoolVar(&a.asJSON, "json", false, `print one JSON object: {"out","figure","title","x","y","mixes","policies","points":[{"mix","policy","name","x","y"}],"left_out"}, the points drawn`)
	_ = c.MarkFlagRequired("out")
	_ = c.MarkFlagFilename("out", "svg", "png", "pdf")
	return c
}

func runPlotESA(e *cmdEnv, files []string, a plotESAArgs) int {
	format := pictureFormat(a.out)
	if format == "" {
		e.usageError("--out %s: want a .svg, .png or .pdf file", a.out)
		return exitUsage
	}
	fail := func(err error) int {
		fmt.Fprintf(e.stderr, "inaemu plot: %v\n", err)
		return exitUsage
	}
	figs, err := readPlotInputs(files, graphs.ReadESAFigures)
	if err != nil {
		return fail(err)
	}
	fig, err := graphs.MergeESA(figs)
	if err != nil {
		return fail(err)
	}
	chart, err := graphs.NewESAChart(fig, graphs.ESAOptions{Title: a.title, Wire: a.wire})
	if err != nil {
		return fail(fmt.Errorf("%s: %v", fig.Source, err))
	}
	if code, ok := writePicture(e, a.out, format, chart.Write); !ok {
		return code
	}
	if a.asJSON {
		return e.writeJSON(struct {
			Out string `json:"out"`
			*graphs.ESAChart
		}{a.out, chart})
	}
	fmt.Fprintf(e.stdout, "inaemu plot: %s: Fig. %d, %d points of %d cells\n", a.out, chart.Figure, len(chart.Points), len(fig.Cells))
	for _, l := range chart.LeftOut {
		fmt.Fprintf(e.stdout, "  left out: %s\n", l)
	}
	return exitOK
}
