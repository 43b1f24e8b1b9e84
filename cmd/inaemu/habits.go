package main

import (
	"fmt"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// rootLong is the root command's description: what 'inaemu', 'inaemu
// --help' and the man page inaemu(1) say after the commands.
const rootLong = `Run 'inaemu' alone or 'inaemu --help' for this help (exit 0), 'inaemu --version' for the build.

Exit status: 0 success; 1 a check failed (a result differs, a capture violates a rule); 2 a usage
error or unreadable input; 3 the emulated job failed (transport error); 4 TAP devices cannot be
used here; 5 check could not decide (no violation, part of the capture unchecked:
--allow-unchecked accepts it); 70 an internal error (a bug); 74 an output could not be created or written; 130
interrupted.

Bandwidths (algbw, busbw) are printed with three significant digits in GB/s (10^9 bytes per
second, as nccl-tests prints them) by default, or in Gbit/s with --units Gbit/s, in text and
plots alike; --json reports carry both. --json prints one JSON object on one line, with a
"schema" field naming its kind and version (inaemu.run/1, inaemu.check/1, ...). Every field of
the reports is defined in docs/reports.md.`

// versionString is what --version prints after "inaemu ": the module's
// version ("(devel)" for a build from a working tree), its VCS revision
// and whether the tree had changes, and the Go release.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module information)"
	}
	return formatVersion(bi)
}

func formatVersion(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	switch {
	case rev == "":
		v += ", revision unknown (built without VCS information: -buildvcs=false or outside a repository)"
	default:
		if len(rev) > 12 {
			rev = rev[:12]
		}
		v += ", revision " + rev
		if when != "" {
			v += " of " + when
		}
		if modified {
			v += " with uncommitted changes (vcs.modified)"
		}
	}
	if bi.GoVersion != "" {
		v += ", " + bi.GoVersion
	}
	return v
}

var unknownFlagRE = regexp.MustCompile(`^unknown (?:flag: --(\S+)|shorthand flag: '.' in -(\S+))$`)

// suggestFlag adds "did you mean --NAME?" to an unknown flag's error
// when one of the command's long flags is near it (cobra suggests
// commands only): "unknown flag: --wokers; did you mean --workers?".
func suggestFlag(c *cobra.Command, err error) error {
	m := unknownFlagRE.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	typed, _, _ := strings.Cut(m[1]+m[2], "=")
	if best := nearestFlag(c, typed); best != "" {
		return fmt.Errorf("%w; did you mean --%s?", err, best)
	}
	return err
}

// nearestFlag is the long flag of c nearest to typed by Levenshtein
// distance, if near enough to be a typo: at most 2 edits (1 for names
// of up to 4 letters), or typed is a prefix of exactly one flag. "" for
// none.
func nearestFlag(c *cobra.Command, typed string) string {
	if typed == "" {
		return ""
	}
	best, bestD := "", 1<<30
	var prefixed []string
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		if strings.HasPrefix(f.Name, typed) {
			prefixed = append(prefixed, f.Name)
		}
		if d := levenshtein(strings.ToLower(typed), f.Name); d < bestD {
			best, bestD = f.Name, d
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	limit := 2
	if len(typed) <= 4 {
		limit = 1
	}
	switch {
	case bestD <= limit:
		return best
	case len(prefixed) == 1:
		return prefixed[0]
	}
	return ""
}

// levenshtein is the edit distance between a and b (insertions,
// deletions and substitutions of bytes).
func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// schemaVersion is the version of every --json report's layout: it
// changes when a field is removed, renamed or changes meaning (new
// fields may come without it). docs/reports.md lists the fields.
const schemaVersion = 1

// reportSchema is the schema of a command's --json report: "inaemu." and
// the command's path with dots, then the version: inaemu.run/1,
// inaemu.topo.show/1. 'inaemu host' prints a run's report.
func reportSchema(name string) string {
	if name == "host" {
		name = "run"
	}
	return fmt.Sprintf("inaemu.%s/%d", strings.ReplaceAll(name, " ", "."), schemaVersion)
}

// withSchema puts "schema": schema first in the JSON object b (b
// unchanged if it is not an object).
func withSchema(schema string, b []byte) []byte {
	if schema == "" || len(b) < 2 || b[0] != '{' {
		return b
	}
	head := `{"schema":` + strconv.Quote(schema)
	if b[1] == '}' {
		return append([]byte(head), b[1:]...)
	}
	return append([]byte(head+","), b[1:]...)
}

// addUnitsFlag gives a command that prints bandwidths --units (read by
// newCommand into cmdEnv.bw).
func addUnitsFlag(c *cobra.Command) {
	c.Flags().String("units", "GB/s", "the `UNIT` bandwidths (algbw, busbw) are printed and drawn in, three significant digits: GB/s (10^9 bytes/s, as nccl-tests prints them) or Gbit/s (10^9 bits/s, as link rates are written); --json carries both")
	_ = c.RegisterFlagCompletionFunc("units", cobra.FixedCompletions([]string{"GB/s", "Gbit/s"}, cobra.ShellCompDirectiveNoFileComp))
}

// runLong defines the fields of run's report in its help (every field,
// with the JSON keys: docs/reports.md).
const runLong = "Report (--json keys in brackets; every field in docs/reports.md):\n\n" +
	"    result  EXACT when every rank holds the bit-exact sum [exact]; else the first\n" +
	"            element that differs [mismatch] or the transport error [error]\n" +
	"    time    from the job's start to its last rank's last result, virtual time\n" +
	"            [virtual_ns] (on TAPs and devices: wall clock from the start barrier);\n" +
	"            algbw = the bytes of a rank / time, busbw = algbw × 2(n-1)/n (nccl-tests'),\n" +
	"            in --units [algbw_gbytes_per_s, algbw_gbps, busbw_...]; wall: the\n" +
	"            process's time [wall_ns]\n" +
	"    frames  RoCE frames the NICs sent [frames_sent]; data packets sent again by\n" +
	"            go-back-N [retransmissions]; NAK-sequence-errors responders sent [naks];\n" +
	"            requester ACK timeouts that fired [timeouts]; frames dropped for a bad ICRC\n" +
	"            by the switch and the NICs [icrc_drops]\n" +
	"    faults  what the fault stages did [faults{lost,dropped,duplicated,corrupted,\n" +
	"            delayed,reordered,held,spoofed}]; frames full link queues dropped\n" +
	"            [queue_drops]\n" +
	"    switch  aggregators completed [switch.aggregations]; results sent again\n" +
	"            [result_resends]; packets of no known connection [clt_misses]; packets of\n" +
	"            a message whose first packet was not seen [first_lost_drops]; duplicates of\n" +
	"            released messages forwarded [stale_forwards]; a member's frames from\n" +
	"            another port [port_drops]; another switch program's own counters on a\n" +
	"            line of its own ('switch    ars: ...') [switch.ars{...}]"
