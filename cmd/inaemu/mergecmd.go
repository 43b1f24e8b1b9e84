package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/topo"
)

// mergeCommand is 'inaemu merge': shard reports into one.
func mergeCommand(stdout, stderr io.Writer) *cobra.Command {
	var asJSON, allowInconclusive bool
	c := newCommand("merge REPORT.json...", "combine the --json reports of 'conformance --shard' or 'sweep --shard' runs into the unsharded run's report", stdout, stderr,
		func(e *cmdEnv, files []string) int { return runMerge(e, files, asJSON, allowInconclusive) })
	c.Long = `Each file is the --json output of one shard of the same run (conformance: same seed, release,
suite and count; sweep: same job and grid); all N shards must be there, in any order. The merged
report is exactly the one the unsharded run prints, but for conformance's wall times, which are
the shards' summed. Exit status: as the unsharded run's (conformance: 1 a property fails, 5 none
fails but one is inconclusive against a device, 0 then with --allow-inconclusive; sweep:
1 a run ended wrong, 3 one failed in the transport), 2 when the reports do not make one run, cannot
be read, or a report's bookkeeping does not add up (a failing case, a cell or a count that is not
its shard's: the message names the file and the field).`
	c.Args = func(_ *cobra.Command, args []string) error {
		if len(args) == 0 {
			return fmt.Errorf("need the shard reports to merge")
		}
		return nil
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the merged report as one JSON object, as the run's --json does")
	c.Flags().BoolVar(&allowInconclusive, "allow-inconclusive", false, "conformance: exit 0, not 5, when no property fails but one is inconclusive (as conformance --allow-inconclusive)")
	addUnitsFlag(c)
	return c
}

// maxInputSize bounds a report, results or model file the user names
// (merge, plot sweep, model --train FILE.csv). They are kilobytes, a
// results file of thousands of runs a few MiB; the bound keeps a file
// named by mistake (/dev/zero) from being read into memory without end.
const maxInputSize = 16 << 20

// readInput reads such a file (a pipe too).
func readInput(name string) ([]byte, error) { return topo.ReadFileUpTo(name, maxInputSize) }

func runMerge(e *cmdEnv, files []string, asJSON, allowInconclusive bool) int {
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
		if err := strictJSON(b, &r, reportSchema("conformance")); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: not a conformance --json report: %v\n", files[k], err)
			return exitUsage
		}
		if err := checkConformanceShard(r); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: %v\n", files[k], err)
			return exitUsage
		}
		reports = append(reports, r)
	}
	shards := make([]*conformance.Shard, len(reports))
	for k, r := range reports {
		shards[k] = r.Shard
	}
	if err := enoughShards(files, shards); err != nil {
		fmt.Fprintf(e.stderr, "inaemu merge: %v\n", err)
		return exitUsage
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
	return printConformance(e, rep, asJSON, allowInconclusive, wall)
}

func kind(sweep bool) string {
	if sweep {
		return "sweep"
	}
	return "conformance"
}

// strictJSON decodes a report refusing fields v does not have, but its
// "schema" (reportSchema), which must be v's kind's if given (reports
// written before it was added have none).
func strictJSON(b []byte, v any, schema string) error {
	var keys map[string]json.RawMessage
	if err := json.Unmarshal(b, &keys); err != nil {
		return err
	}
	if raw, ok := keys["schema"]; ok {
		var got string
		if err := json.Unmarshal(raw, &got); err != nil || got != schema {
			return fmt.Errorf("schema %s: want %s", raw, strconv.Quote(schema))
		}
		delete(keys, "schema")
		var err error
		if b, err = json.Marshal(keys); err != nil {
			return err
		}
	}
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
		if err := strictJSON(b, &d, reportSchema("sweep")); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: not a sweep --json report: %v\n", files[k], err)
			return exitUsage
		}
		if d.Shard == nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s is not a shard's report (no \"shard\" in it)\n", files[k])
			return exitUsage
		}
		if err := checkSweepShard(d); err != nil {
			fmt.Fprintf(e.stderr, "inaemu merge: %s: %v\n", files[k], err)
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
	shards := make([]*conformance.Shard, len(docs))
	for k, d := range docs {
		shards[k] = d.Shard
	}
	if err := enoughShards(files, shards); err != nil {
		fmt.Fprintf(e.stderr, "inaemu merge: %v\n", err)
		return exitUsage
	}
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
	return printSweep(e, out, asJSON)
}

func points(rows []emu.SweepRow) []int {
	var p []int
	for _, r := range rows {
		p = append(p, r.Point)
	}
	return p
}

// A shard's report is checked before it is merged: the merge believes its
// bookkeeping (a tampered or damaged fail_at made "gbn FAILS
// (4611686018427387905 cases)", a shard count of 10^12 a set of 10^12
// shards), so every index in it must be a case the shard owns and every
// count agree with them. Errors name the field.

// checkShardOf checks a report's shard: index I of N shards.
func checkShardOf(sh conformance.Shard) error {
	if sh.Of < 1 || sh.Index < 0 || sh.Index >= sh.Of {
		return fmt.Errorf("shard %v: want index 0..N-1 of N shards", sh)
	}
	return nil
}

// enoughShards checks that there are as many reports as the first says
// shards, before the merge makes a set of that many (10^12 shards were
// 10^12 bytes): with fewer, it names a report of another run or the
// first shard missing.
func enoughShards(files []string, shards []*conformance.Shard) error {
	if shards[0] == nil || shards[0].Of <= len(shards) {
		return nil // the merge checks the rest
	}
	n := shards[0].Of
	for k, sh := range shards {
		switch {
		case sh == nil:
			return fmt.Errorf("%s is not a shard's report (no \"shard\" in it)", files[k])
		case sh.Of != n:
			return fmt.Errorf("%s is shard %v, %s one of %d shards", files[k], *sh, files[0], n)
		}
	}
	for i := 0; ; i++ { // one of 0..len(shards) is missing
		if !slices.ContainsFunc(shards, func(sh *conformance.Shard) bool { return sh.Index == i }) {
			return fmt.Errorf("shard %d/%d is missing", i, n)
		}
	}
}

// owned is how many of cases 0..n-1 the shard owns (i mod Of = Index).
func owned(sh conformance.Shard, n int) int {
	k := n / sh.Of
	if n%sh.Of > sh.Index {
		k++
	}
	return k
}

// checkCase checks that case i is one of the count cases the shard owns.
func checkCase(sh conformance.Shard, count int, field string, i int) error {
	if i < 0 || i >= count || !sh.Owns(i) {
		return fmt.Errorf("%s %d: not a case of shard %v (cases 0..%d with i mod %d = %d)", field, i, sh, count-1, sh.Of, sh.Index)
	}
	return nil
}

func checkConformanceShard(r conformance.Report) error {
	if r.Shard == nil {
		return nil // not a shard's: Merge says so
	}
	sh := *r.Shard
	if err := checkShardOf(sh); err != nil {
		return err
	}
	if r.Count < 1 {
		return fmt.Errorf("count %d: want 1 or more", r.Count)
	}
	for _, p := range r.Properties {
		rec := p.Shard
		if rec == nil {
			continue // Merge says so
		}
		bad := func(err error) error { return fmt.Errorf("property %s: %w", p.Name, err) }
		last := r.Count - 1 // the last case the shard may have run
		if rec.FailAt != -1 {
			if err := checkCase(sh, r.Count, "fail_at", rec.FailAt); err != nil {
				return bad(err)
			}
			if p.Passed {
				return bad(fmt.Errorf("fail_at %d, and passed", rec.FailAt))
			}
			last = rec.FailAt // it ran no case after it
			if want := owned(sh, last+1); p.Cases != want {
				return bad(fmt.Errorf("cases %d: want %d, shard %v's cases up to its fail_at %d", p.Cases, want, sh, rec.FailAt))
			}
		}
		if most := owned(sh, r.Count); p.Cases < 0 || p.Cases > most {
			return bad(fmt.Errorf("cases %d: shard %v owns %d of the %d cases", p.Cases, sh, most, r.Count))
		}
		if rec.StallAt != -1 {
			if err := checkCase(sh, last+1, "stall_at", rec.StallAt); err != nil {
				return bad(err)
			}
		}
		for k, i := range rec.Transport {
			if err := checkCase(sh, last+1, "transport", i); err != nil {
				return bad(err)
			}
			if k > 0 && i <= rec.Transport[k-1] {
				return bad(fmt.Errorf("transport: case %d after case %d (each case once, in order)", i, rec.Transport[k-1]))
			}
		}
		for k, i := range rec.Inconclusive {
			if err := checkCase(sh, last+1, "inconclusive", i); err != nil {
				return bad(err)
			}
			if k > 0 && i <= rec.Inconclusive[k-1] {
				return bad(fmt.Errorf("inconclusive: case %d after case %d (each case once, in order)", i, rec.Inconclusive[k-1]))
			}
		}
		if len(rec.Inconclusive) != p.Inconclusive {
			return bad(fmt.Errorf("inconclusive %d, and %d cases in its shard record", p.Inconclusive, len(rec.Inconclusive)))
		}
	}
	return nil
}

func checkSweepShard(d sweepDoc) error {
	sh := *d.Shard
	if err := checkShardOf(sh); err != nil {
		return err
	}
	if len(d.Rows) > 0 && d.Points < 1 {
		return fmt.Errorf("points %d: want the grid's size, 1 or more", d.Points)
	}
	for _, r := range d.Rows {
		if err := checkCase(sh, d.Points, "point", r.Point); err != nil {
			return err
		}
		if r.Runs != len(r.Seeds) || r.Exact < 0 || r.Failed < 0 || r.Wrong < 0 || r.Exact+r.Failed+r.Wrong != r.Runs {
			return fmt.Errorf("point %d: runs %d, seeds %d, exact %d, failed %d, wrong %d: want runs = seeds = exact + failed + wrong",
				r.Point, r.Runs, len(r.Seeds), r.Exact, r.Failed, r.Wrong)
		}
	}
	return nil
}
