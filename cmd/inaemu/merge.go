package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/conformance"
)

// mergeCommand is 'inaemu merge': shard reports into one.
func mergeCommand(stdout, stderr io.Writer) *cobra.Command {
	var asJSON bool
	c := newCommand("merge REPORT.json...", "combine the --json reports of 'conformance --shard I/N' runs into the unsharded run's report", stdout, stderr,
		func(e *cmdEnv, files []string) int { return runMerge(e, files, asJSON) })
	c.Long = `Each file is the --json output of one shard of the same run (same seed, release, suite and
count); all N shards must be there, in any order. The merged report is exactly the one the
unsharded run prints, but for the wall times, which are the shards' summed. Exit status: 0
every property holds, 1 one fails, 2 the reports do not make one run (or cannot be read).`
	c.Args = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return fmt.Errorf("need the shard reports to merge")
		}
		return nil
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the merged report as one JSON object, as 'conformance --json' does")
	return c
}

func runMerge(e *cmdEnv, files []string, asJSON bool) int {
	var reports []conformance.Report
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %v\n", err)
			return exitUsage
		}
		var r conformance.Report
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: not a conformance --json report: %v\n", name, err)
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
	return printConformance(e.stdout, e.stderr, rep, asJSON, wall)
}
