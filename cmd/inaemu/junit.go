package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/internal/junit"
)

// junitHelp is the --junit flag's help on check and conformance.
const junitHelp = "also write a JUnit XML report to `FILE` for CI systems: %s (see docs/reports.md)"

// writeJUnit writes r to path ("" for none): exitIO, in one line naming
// --junit, if it cannot be created or written.
func writeJUnit(fs *cmdEnv, path string, r junit.Report) int {
	if path == "" {
		return exitOK
	}
	ioErr, err := writeFile(path, func(w io.Writer) error { return junit.Write(w, r) })
	if ioErr == nil {
		ioErr = err
	}
	if ioErr != nil {
		return ioError(fs.stderr, fs.name, "--junit "+path, ioErr)
	}
	return exitOK
}

// checkRules are the rules 'inaemu check' applies, one testcase each in
// its JUnit report (a rule a violation names that is not here gets one
// too).
var checkRules = capcheck.RuleNames()

// checkJUnit is check's report as JUnit: a testcase per rule, a failure
// per violation (its message the violation's line, with the frame
// number), a testcase "unchecked" that fails with a failure per
// unchecked item, or is skipped with --allow-unchecked, and for a file cut
// short or damaged (or payloads agg-sum could not read again) a testcase
// "unread" that fails.
func checkJUnit(file string, rep *capcheck.Report, unchecked []string, allowUnchecked bool, took time.Duration, start time.Time) junit.Report {
	byRule := map[string][]junit.Failure{}
	rules := append([]string{}, checkRules...)
	for _, v := range rep.Violations {
		if _, ok := byRule[v.Rule]; !ok && !contains(rules, v.Rule) {
			rules = append(rules, v.Rule)
		}
		text := fmt.Sprintf("frame %d (index %d), interface %s, time %v, qp %#06x, psn %d: %s", v.Frame, v.Index, v.Interface, time.Duration(v.TimeNS), v.QP, v.PSN, v.Detail)
		if v.Inferred != "" {
			text += "\ninferred: " + v.Inferred
		}
		byRule[v.Rule] = append(byRule[v.Rule], junit.Failure{Message: v.String(), Type: v.Rule, Text: text})
	}
	s := junit.Suite{Name: "inaemu check " + file, Timestamp: start, Hostname: hostname(), Time: took,
		Properties: [][2]string{{"file", file}, {"frames", fmt.Sprint(rep.Frames)}, {"roce_frames", fmt.Sprint(rep.RoCEFrames)}, {"connections", fmt.Sprint(rep.Connections)}}}
	for _, r := range rules {
		s.Cases = append(s.Cases, junit.Case{Name: r, Classname: "inaemu.check", Failures: byRule[r]})
	}
	if len(unchecked) > 0 {
		c := junit.Case{Name: "unchecked", Classname: "inaemu.check"}
		if allowUnchecked {
			c.Skipped = fmt.Sprintf("%d unchecked, accepted by --allow-unchecked", len(unchecked))
			c.SystemOut = strings.Join(unchecked, "\n")
		} else {
			for _, u := range unchecked {
				c.Failures = append(c.Failures, junit.Failure{Message: u, Type: "unchecked"})
			}
		}
		s.Cases = append(s.Cases, c)
	}
	// What was never read is not a pass, whatever else the report says
	// (check exits 2 on it, or 1 with a violation before the cut).
	if rep.Truncated != "" || rep.AggError != "" {
		c := junit.Case{Name: "unread", Classname: "inaemu.check"}
		if rep.Truncated != "" {
			c.Failures = append(c.Failures, junit.Failure{Type: "truncated",
				Message: fmt.Sprintf("%s: the file after frame %d was not read (the frames before it were checked)", rep.Truncated, rep.Frames)})
		}
		if rep.AggError != "" {
			c.Failures = append(c.Failures, junit.Failure{Type: "agg-error", Message: "agg-sum stopped: " + rep.AggError})
		}
		s.Cases = append(s.Cases, c)
	}
	return junit.Report{Name: "inaemu check", Suites: []junit.Suite{s}}
}

// conformanceJUnit is conformance's report as JUnit: a testcase per
// property, failed with the failure, its counterexample and replay
// command, or skipped with its reason.
func conformanceJUnit(rep conformance.Report, took time.Duration, start time.Time) junit.Report {
	name := "inaemu conformance --suite " + rep.Suite
	s := junit.Suite{Name: name, Timestamp: start, Hostname: hostname(), Time: took,
		Properties: [][2]string{{"seed", fmt.Sprint(rep.Seed)}, {"count", fmt.Sprint(rep.Count)}, {"release", rep.Release}, {"suite", rep.Suite}}}
	if rep.Shard != nil {
		s.Properties = append(s.Properties, [2]string{"shard", fmt.Sprint(*rep.Shard)})
	}
	if rep.DUT != "" {
		s.Properties = append(s.Properties, [2]string{"dut", rep.DUT})
	}
	for _, p := range rep.Properties {
		c := junit.Case{Name: p.Name, Classname: "inaemu.conformance", Time: p.Wall, Skipped: p.Skipped}
		switch {
		case p.Undecided():
			// Not skipped: a CI gate must not pass it silently. A failure
			// of its own type, so a reader tells it from a property's.
			msg := fmt.Sprintf("INCONCLUSIVE: %d of %d cases inconclusive (%s)", p.Inconclusive, p.Cases, p.FirstInconclusive)
			c.Failures = []junit.Failure{{Message: msg, Type: conformance.VerdictInconclusive, Text: msg}}
		case !p.Passed && p.Skipped == "":
			text := []string{p.Failure}
			if p.Counterexample != nil {
				text = append(text, "counterexample: "+*p.Counterexample)
			}
			if p.Replay != "" {
				text = append(text, "replay: "+p.Replay)
			}
			c.Failures = []junit.Failure{{Message: p.Failure, Type: p.Name, Text: strings.Join(text, "\n")}}
		}
		if len(p.Notes) > 0 {
			c.SystemOut = strings.Join(p.Notes, "\n")
		}
		s.Cases = append(s.Cases, c)
	}
	return junit.Report{Name: "inaemu conformance", Suites: []junit.Suite{s}}
}

func hostname() string {
	h, err := os.Hostname()
	if err != nil {
		return "localhost"
	}
	return h
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
