package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/internal/units"
)

// mergeCommand is 'inaemu merge': shard reports into one.
func mergeCommand(stdout, stderr io.Writer) *cobra.Command {
	var asJSON bool
	c := newCommand("merge REPORT.json...", "combine the --json reports of 'conformance --shard' or 'sweep --shard' runs into the unsharded run's report", stdout, stderr,
		func(e *cmdEnv, files []string) int { return runMerge(e, files, asJSON) })
	c.Long = `Each file is the --json output of one shard of the same run (conformance: same seed, release,
suite and count; sweep: same job and grid); all N shards must be there, in any order. The merged
report is exactly the one the unsharded run prints, but for conformance's wall times, which are
the shards' summed. Exit status: as the unsharded run's (conformance: 1 a property fails; sweep:
1 a run ended wrong, 3 one failed in the transport), 2 when the reports do not make one run or
cannot be read.`
	c.Args = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return fmt.Errorf("need the shard reports to merge")
		}
		return nil
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the merged report as one JSON object, as the run's --json does")
	return c
}

// maxInputSize bounds a report, results or model file the user names
// (merge, plot sweep, model --train FILE.csv). They are kilobytes, a
// results file of thousands of runs a few MiB; the bound keeps a file
// named by mistake (/dev/zero) from being read into memory without end.
const maxInputSize = 16 << 20

// readInput reads such a file. It reads a pipe too (<(...)), so it bounds
// what it reads rather than asking for a regular file.
func readInput(name string) ([]byte, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxInputSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxInputSize {
		return nil, fmt.Errorf("%s: too large: more than %s", name, units.FormatSize(maxInputSize))
	}
	return b, nil
}

func runMerge(e *cmdEnv, files []string, asJSON bool) int {
	var raw [][]byte
	sweep := false
	for k, name := range files {
		b, err := readInput(name)
		if err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %v\n", err)
			return exitUsage
		}
		var keys map[string]json.RawMessage
		if err := json.Unmarshal(b, &keys); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: not a --json report: %v\n", name, err)
			return exitUsage
		}
		_, isSweep := keys["rows"]
		if k == 0 {
			sweep = isSweep
		} else if isSweep != sweep {
			fmt.Fprintf(e.stderr, "inaemu merge: %s is a %s report, %s a %s report\n", name, kind(isSweep), files[0], kind(sweep))
			return exitUsage
		}
		raw = append(raw, b)
	}
	if sweep {
		return mergeSweeps(e, files, raw, asJSON)
	}
	var reports []conformance.Report
	for k, b := range raw {
		var r conformance.Report
		if err := strictJSON(b, &r); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: not a conformance --json report: %v\n", files[k], err)
			return exitUsage
		}
		reports = append(reports, r)
	}
	rep, err := conformance.Merge(reports)
	if err != nil {
		fmt.Fprintf(e.stderr, "inaemu merge: %v\n", err)
		return exitUsage
	}
	var wall time.Duration
	for _, p := range rep.Properties {
		wall += p.Wall
	}
	if !asJSON {
		fmt.Fprintf(e.stdout, "inaemu conformance: seed %d, %d cases per property, release %s, %d shards merged\n", rep.Seed, rep.Count, rep.Release, len(reports))
	}
	return printConformance(e, rep, asJSON, wall)
}

func kind(sweep bool) string {
	if sweep {
		return "sweep"
	}
	return "conformance"
}

func strictJSON(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// mergeSweeps puts the shards' rows back in grid order under the one
// header they share.
func mergeSweeps(e *cmdEnv, files []string, raw [][]byte, asJSON bool) int {
	var docs []sweepDoc
	for k, b := range raw {
		var d sweepDoc
		if err := strictJSON(b, &d); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: not a sweep --json report: %v\n", files[k], err)
			return exitUsage
		}
		if d.Shard == nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s is not a shard's report (no \"shard\" in it)\n", files[k])
			return exitUsage
		}
		docs = append(docs, d)
	}
	head := func(d sweepDoc) sweepDoc {
		d.Rows, d.Shard = nil, nil
		return d
	}
	first := docs[0]
	n := first.Shard.Of
	set := conformance.NewShardSet(n)
	out := head(first)
	for k, d := range docs {
		switch {
		case d.Shard.Of != n:
			fmt.Fprintf(e.stderr, "inaemu merge: %s is shard %v, %s one of %d shards\n", files[k], *d.Shard, files[0], n)
			return exitUsage
		case !reflect.DeepEqual(head(d), head(first)):
			fmt.Fprintf(e.stderr, "inaemu merge: %s is of another sweep than %s (job or grid differ)\n", files[k], files[0])
			return exitUsage
		}
		if err := set.Add(*d.Shard); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: %v\n", files[k], err)
			return exitUsage
		}
		out.Rows = append(out.Rows, d.Rows...)
	}
	if err := set.Missing(); err != nil {
		fmt.Fprintf(e.stderr, "inaemu merge: %v\n", err)
		return exitUsage
	}
	slices.SortFunc(out.Rows, func(a, b emu.SweepRow) int { return a.Point - b.Point })
	for i, r := range out.Rows {
		if r.Point != i {
			fmt.Fprintf(e.stderr, "inaemu merge: the shards hold cells %v of a grid of %d\n", points(out.Rows), first.Points)
			return exitUsage
		}
	}
	if len(out.Rows) != first.Points {
		fmt.Fprintf(e.stderr, "inaemu merge: the shards hold %d cells of a grid of %d\n", len(out.Rows), first.Points)
		return exitUsage
	}
	out.Points = 0 // as the unsharded run prints it
	return printSweep(e.stdout, out, asJSON)
}

func points(rows []emu.SweepRow) []int {
	var p []int
	for _, r := range rows {
		p = append(p, r.Point)
	}
	return p
}
