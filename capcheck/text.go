package capcheck

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// WriteText prints the report as `inaemu check` does: one line per
// violation (`RULE frame N qp 0x.. psn P: detail`), then a summary: each
// rule family's line (rules.go's families, written by the family's file)
// among what the capture and its vantage points add, the latencies, what
// went unchecked, and the verdict with its count per rule.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	for _, v := range r.Violations {
		b.WriteString(v.String())
		b.WriteByte('\n')
	}
	name := r.File
	if name == "" {
		name = "capture"
	}
	fmt.Fprintf(&b, "%s: %s (%d RoCE, %d malformed, %d not delivered), %s, %s\n", name, plural(r.Frames, "frame"),
		r.RoCEFrames, r.Malformed, r.Ghosts, plural(len(r.VantagePoints), "vantage point"), plural(r.Connections, "connection"))
	writeFamily(&b, r, famICRC)
	writeFamily(&b, r, famPacked)
	if r.Injected > 0 {
		kinds := make([]string, 0, len(r.InjectedKinds))
		for k := range r.InjectedKinds {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for i, k := range kinds {
			kinds[i] = fmt.Sprintf("%s %d", k, r.InjectedKinds[k])
		}
		fmt.Fprintf(&b, "  injected     %s annotated by the emulator's faults (%s): not violations; the recovery from them is checked\n",
			plural(r.Injected, "frame"), strings.Join(kinds, ", "))
	}
	if r.Snapped > 0 {
		fmt.Fprintf(&b, "  snapped      %s cut by the capture's snaplen: headers read, ICRC and payload not checked\n", plural(r.Snapped, "frame"))
	}
	if r.Skipped > 0 {
		fmt.Fprintf(&b, "  skipped      %s not readable as Ethernet, not checked (first: %s)\n", plural(r.Skipped, "frame"), r.SkippedWhy)
	}
	if r.Reordered > 0 {
		fmt.Fprintf(&b, "  reordered    %s overtaken on the way (reorder window %v), not violations\n", plural(r.Reordered, "frame"), time.Duration(r.ReorderWindowNS))
	}
	writeFamily(&b, r, famReadAtomic)
	if r.Clock == "wall" {
		fmt.Fprintf(&b, "  clock        %s\n", r.InFlightWhy)
	}
	for _, in := range r.Inferences {
		fmt.Fprintf(&b, "  inferred     %s\n", in)
	}
	if len(r.Unpaired) > 0 {
		fmt.Fprintf(&b, "  unpaired     %s whose responses could not be told apart, NOT CHECKED for nak-psn and extra-nak, psn-order only loosely (name them with --pair SRC,DST,REQQPN=RESPQPN): %s\n",
			plural(len(r.Unpaired), "request stream"), strings.Join(r.Unpaired, ", "))
	}
	writeFamily(&b, r, famAgg)
	writeFamily(&b, r, famOwed)
	writeFamily(&b, r, famINAPS)
	writeFamily(&b, r, famPFC)
	writeFamily(&b, r, famCNP)
	lat := func(label string, l LatencySummary) {
		if l.Count == 0 {
			fmt.Fprintf(&b, "  %-24s none\n", label)
			return
		}
		fmt.Fprintf(&b, "  %-24s n=%d min %v median %v max %v\n", label, l.Count,
			time.Duration(l.MinNS), time.Duration(l.MedianNS), time.Duration(l.MaxNS))
	}
	lat("retransmission latency", r.RetransLatency)
	lat("NAK generation latency", r.NAKGenLatency)
	lat("NAK response latency", r.NAKRespLatency)
	// What was not checked, so that a verdict never reads plain
	// "conforms" of a capture part of which went unread or unjudged.
	for _, u := range r.Unchecked {
		fmt.Fprintf(&b, "  unchecked    %s\n", u)
	}
	var unchecked []string
	if n := len(r.Unchecked); n > 0 {
		unchecked = append(unchecked, plural(n, "item")+" unchecked, listed above")
	}
	if r.Truncated != "" {
		unchecked = append(unchecked, fmt.Sprintf("the file after frame %d unchecked: cut short or damaged there", r.Frames))
	}
	clean := len(r.Violations) == 0
	if clean && len(r.Unchecked) > 0 {
		fmt.Fprintf(&b, "  result       undecidable: conforms as far as checked (%s)\n", strings.Join(unchecked, "; "))
	} else if clean && len(unchecked) > 0 {
		fmt.Fprintf(&b, "  result       conforms as far as checked (%s)\n", strings.Join(unchecked, "; "))
	} else if clean {
		b.WriteString("  result       conforms\n")
	} else {
		counts := r.RuleCounts()
		rules := make([]string, 0, len(counts))
		for k := range counts {
			rules = append(rules, k)
		}
		sort.Strings(rules)
		parts := make([]string, len(rules))
		for i, k := range rules {
			parts[i] = fmt.Sprintf("%s %d", k, counts[k])
		}
		fmt.Fprintf(&b, "  result       %s (%s)\n", plural(len(r.Violations), "violation"), strings.Join(parts, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
