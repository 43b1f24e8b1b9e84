package main

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/emu/netreduce"
)

// conformanceArgs are conformance's flags.
type conformanceArgs struct {
	suite, release, out string
	count               int
	seed                uint64
	asJSON              bool
}

// conformanceCommand is 'inaemu conformance': the property suites.
func conformanceCommand(stdout, stderr io.Writer) *cobra.Command {
	var a conformanceArgs
	var names []string
	for _, s := range conformance.Suites {
		names = append(names, s.Name)
	}
	c := newCommand("conformance", "run the property suites (aggregation, go-back-N, checksum) with shrunk counterexamples", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runConformance(e, a, names) })
	c.Args = noArgs
	f := c.Flags()
	f.StringVar(&a.suite, "suite", "all", "which property suite: "+strings.Join(names, ", ")+" or all")
	f.IntVar(&a.count, "count", 100, "generated cases per property")
	f.Uint64Var(&a.seed, "seed", 0, "the suite's seed (default: a fresh one, printed)")
	f.StringVar(&a.release, "release", "safe", "aggregator release rule the aggregation suite runs against: safe or paper")
	f.StringVar(&a.out, "out", "counterexamples", "directory for shrunk counterexamples (a scenario file and its pcapng each)")
	f.BoolVar(&a.asJSON, "json", false, `print one JSON object: {"seed":S,"properties":[{"name","passed","cases","counterexample"},...]}`)
	completeWords(c, map[string][]string{"suite": append(names, "all"), "release": {"safe", "paper"}})
	_ = c.MarkFlagDirname("out")
	return c
}

func runConformance(fs *cmdEnv, a conformanceArgs, names []string) int {
	stdout, stderr := fs.stdout, fs.stderr
	suite, count, seed, release, out, asJSON := &a.suite, &a.count, &a.seed, &a.release, &a.out, &a.asJSON
	rel, err := netreduce.ParseRelease(*release)
	if err != nil {
		fs.usageError("%v", err)
		return exitUsage
	}
	if *count < 1 {
		fs.usageError("--count %d: want at least 1", *count)
		return exitUsage
	}
	var run []func(conformance.SuiteOptions) []conformance.PropertyResult
	for _, s := range conformance.Suites {
		if *suite == "all" || *suite == s.Name {
			run = append(run, s.Run)
		}
	}
	if len(run) == 0 {
		fs.usageError("--suite %q: want %s or all", *suite, strings.Join(names, ", "))
		return exitUsage
	}
	if !fs.changed("seed") {
		var b [8]byte
		_, _ = crand.Read(b[:])
		*seed = binary.LittleEndian.Uint64(b[:]) >> 16
	}
	opts := conformance.SuiteOptions{Count: *count, Seed: *seed, Release: rel, OutDir: *out}
	bar := startProgress(fs, "conformance", "cases", *asJSON)
	opts.Progress = func(name string, done, total int) {
		interruptNote.Store(fmt.Sprintf("inaemu conformance: interrupted in %s after %d of %d cases (seed %d)", name, done, total, *seed))
		bar.label(name)
		bar.observe(int64(done), int64(total))
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "inaemu conformance: seed %d, %d cases per property, release %s\n", *seed, *count, rel)
	}
	start := time.Now()
	var results []conformance.PropertyResult
	for _, r := range run {
		results = append(results, r(opts)...)
	}
	bar.stop()
	failed := 0
	for _, r := range results {
		if !r.Passed {
			failed++
		}
	}
	if *asJSON {
		type prop struct {
			Name           string   `json:"name"`
			Passed         bool     `json:"passed"`
			Cases          int      `json:"cases"`
			Counterexample *string  `json:"counterexample"`
			Failure        string   `json:"failure,omitempty"`
			Replay         string   `json:"replay,omitempty"`
			Notes          []string `json:"notes,omitempty"`
			WallNS         int64    `json:"wall_ns"`
		}
		doc := struct {
			Seed       uint64 `json:"seed"`
			Release    string `json:"release"`
			Properties []prop `json:"properties"`
		}{Seed: *seed, Release: rel.String(), Properties: []prop{}}
		for _, r := range results {
			doc.Properties = append(doc.Properties, prop{r.Name, r.Passed, r.Cases, r.Counterexample, r.Failure, r.Replay, r.Notes, int64(r.Wall)})
		}
		if err := json.NewEncoder(stdout).Encode(&doc); err != nil {
			fmt.Fprintf(stderr, "inaemu conformance: %v\n", err)
			return exitFail
		}
	} else {
		for _, r := range results {
			verdict := "holds"
			if !r.Passed {
				verdict = "FAILS"
			}
			fmt.Fprintf(stdout, "  %-40s %s (%d cases, %v)\n", r.Name, verdict, r.Cases, r.Wall.Round(time.Millisecond))
			for _, n := range r.Notes {
				fmt.Fprintf(stdout, "      note: %s\n", n)
			}
			if !r.Passed {
				fmt.Fprintf(stdout, "      %s\n", r.Failure)
				if r.Counterexample != nil {
					fmt.Fprintf(stdout, "      counterexample: %s (and its .pcapng)\n", *r.Counterexample)
				}
				fmt.Fprintf(stdout, "      replay: %s\n", r.Replay)
			}
		}
		fmt.Fprintf(stdout, "  %d of %d properties hold (%v)\n", len(results)-failed, len(results), time.Since(start).Round(time.Millisecond))
	}
	if failed > 0 {
		return exitFail
	}
	return exitOK
}
