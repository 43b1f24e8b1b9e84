package main

import (
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/emu/netreduce"
)

func runConformance(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("conformance", "[--suite aggregation|gbn|icrc|all] [--count N] [--seed S] [--release safe|paper] [--out DIR] [--json]", stdout, stderr)
	names := []string{}
	for _, s := range conformance.Suites {
		names = append(names, s.Name)
	}
	suite := fs.String("suite", "all", "which property suite: "+strings.Join(names, ", ")+" or all")
	count := fs.Int("count", 100, "generated cases per property")
	seed := fs.Uint64("seed", 0, "the suite's seed (default: a fresh one, printed)")
	release := fs.String("release", "safe", "aggregator release rule the aggregation suite runs against: safe or paper")
	out := fs.String("out", "counterexamples", "directory for shrunk counterexamples (a scenario file and its pcapng each)")
	asJSON := fs.Bool("json", false, `print one JSON object: {"seed":S,"properties":[{"name","passed","cases","counterexample"},...]}`)
	if code, ok := fs.parseFlagsOnly(args); !ok {
		return code
	}
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
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == "seed" })
	if !set {
		var b [8]byte
		_, _ = crand.Read(b[:])
		*seed = binary.LittleEndian.Uint64(b[:]) >> 16
	}
	opts := conformance.SuiteOptions{Count: *count, Seed: *seed, Release: rel, OutDir: *out}
	if isTerminal(stderr) {
		opts.Progress = func(name string, done, total int) {
			if done == total || done%10 == 0 {
				fmt.Fprintf(stderr, "\r%-40s %d/%d", name, done, total)
				if done == total {
					fmt.Fprintln(stderr)
				}
			}
		}
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "inaemu conformance: seed %d, %d cases per property, release %s\n", *seed, *count, rel)
	}
	start := time.Now()
	var results []conformance.PropertyResult
	for _, r := range run {
		results = append(results, r(opts)...)
	}
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

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}
