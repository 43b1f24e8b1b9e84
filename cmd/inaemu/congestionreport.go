package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/internal/units"
)

// trafficWhat is the header's description of a traffic job without jobs:
// its pattern and what each flow moves.
func trafficWhat(cfg emu.Config) string {
	pattern := "incast"
	if t := cfg.Traffic; t != nil && t.Pattern != "" {
		pattern = t.Pattern
	}
	what := "traffic " + pattern + " (RDMA WRITE flows"
	if t := cfg.Traffic; t != nil && t.Rate > 0 {
		what += " paced at " + units.FormatRate(t.Rate)
	}
	return what + ")"
}

// printCongestion prints the network's congestion lines: the switches'
// buffer, PFC's pauses, ECN marks and DCQCN, and each traffic job's flows.
// A run without congestion settings prints none of them but its flows.
func printCongestion(w io.Writer, r *emu.Result) {
	var peak, dropEg, dropHead, dropFull, xoff, refresh, xon uint64
	var pausedPorts int
	var paused time.Duration
	for _, b := range r.Switch.Buffer {
		peak = max(peak, uint64(b.MaxBytes))
		dropEg += b.DropsEgress
		dropHead += b.DropsHeadroom
		dropFull += b.DropsFull
		xoff += b.PausesXOFF
		refresh += b.PausesRefresh
		xon += b.PausesXON
		paused += time.Duration(b.PausedNs)
		if b.PausesXOFF > 0 {
			pausedPorts++
		}
	}
	if drops := dropEg + dropHead + dropFull; drops > 0 || xoff > 0 {
		fmt.Fprintf(w, "  buffer    peak %.3f MB held by one ingress port and priority; %d drops (%d over the egress threshold, %d out of headroom, %d buffer full)\n",
			float64(peak)/1e6, drops, dropEg, dropHead, dropFull)
	}
	var nicPauses, marks uint64
	var prios []int
	for _, p := range r.PFC {
		if p.Switch == "" {
			nicPauses += p.PausesReceived
		}
		marks += p.ECNMarks
		if p.PausesSent > 0 && !slices.Contains(prios, p.Priority) {
			prios = append(prios, p.Priority)
		}
	}
	if xoff > 0 {
		slices.Sort(prios)
		fmt.Fprintf(w, "  pfc       priority %s: %d pauses sent by %d switch ports (%d XOFF, %d refreshed, %d XON), %v paused in all; NICs got %d\n",
			strings.Trim(fmt.Sprint(prios), "[]"), xoff+refresh+xon, pausedPorts, xoff, refresh, xon, paused.Round(time.Microsecond), nicPauses)
	}
	for _, n := range r.NICRx {
		if n.Drops == 0 && n.PausesXOFF == 0 {
			continue // a receiver the host kept up with (all in --json)
		}
		fmt.Fprintf(w, "  nic rx    %s: buffer peak %d B, %d drops, %d pauses sent (%d XOFF, %d refreshed, %d XON), %v paused\n",
			n.NIC, n.MaxBytes, n.Drops, n.PausesXOFF+n.PausesRefresh+n.PausesXON, n.PausesXOFF, n.PausesRefresh, n.PausesXON, time.Duration(n.PausedNs).Round(time.Microsecond))
	}
	for _, d := range r.Deadlocks {
		fmt.Fprintf(w, "  deadlock  %v\n", d)
	}
	if marks > 0 {
		fmt.Fprintf(w, "  ecn       %d frames marked CE by the switches' egress queues\n", marks)
	}
	for _, j := range r.Jobs {
		if d := j.DCQCN; d != nil {
			lowest := 0.0
			for _, q := range d.QPs {
				if lowest == 0 || q.MinRateBps < lowest {
					lowest = q.MinRateBps
				}
			}
			low := ""
			if lowest > 0 {
				low = fmt.Sprintf("; lowest QP rate %s", units.FormatRate(lowest))
			}
			fmt.Fprintf(w, "  dcqcn     %s%d CE-marked packets received, %d CNPs sent (%d suppressed within the interval), %d received, %d rate cuts%s\n",
				jobName(r, j), d.ECNMarkedReceived, d.CNPSent, d.CNPSuppressed, d.CNPReceived, d.RateDecreases, low)
		}
		if len(j.Flows) > 0 {
			printFlows(w, jobName(r, j), j)
		}
	}
}

// printFlows is a traffic job's line: its flows' completion times, their
// goodput together, and Jain's fairness index over the second half of the
// time they all ran.
func printFlows(w io.Writer, name string, j emu.JobResult) {
	done := 0
	for _, f := range j.Flows {
		if f.FCTNS > 0 {
			done++
		}
	}
	if done < len(j.Flows) {
		fmt.Fprintf(w, "  flows     %s%d of %d flows finished\n", name, done, len(j.Flows))
		return
	}
	var lo, hi time.Duration
	var bytes int64
	start, end := time.Duration(1<<62), time.Duration(0)
	lastStart := time.Duration(0)
	for i, f := range j.Flows {
		fct := time.Duration(f.FCTNS)
		if i == 0 || fct < lo {
			lo = fct
		}
		hi = max(hi, fct)
		bytes += f.Bytes
		s := time.Duration(f.StartNS)
		start = min(start, s)
		lastStart = max(lastStart, s)
		if e := s + fct; i == 0 || e < end {
			end = e // the first flow to finish
		}
	}
	first := time.Duration(j.StartNS)
	var span time.Duration
	for _, f := range j.Flows {
		span = max(span, time.Duration(f.StartNS+f.FCTNS)-start)
	}
	gbps := 0.0
	if span > 0 {
		gbps = float64(bytes) * 8 / float64(span)
	}
	jain := ""
	if end > lastStart && len(j.Flows) > 1 {
		mid := lastStart + (end-lastStart)/2
		jain = fmt.Sprintf("; Jain's index %.3f over the second half of the time all ran", collective.JainIndex(collective.WindowRates(j.Flows, first, mid, end)))
	}
	fmt.Fprintf(w, "  flows     %s%d flows, completion %v..%v, %.2f Gb/s together%s\n",
		name, len(j.Flows), lo.Round(time.Microsecond), hi.Round(time.Microsecond), gbps, jain)
}

// jobName is "job NAME: " in a run of several jobs, else "".
func jobName(r *emu.Result, j emu.JobResult) string {
	if len(r.Jobs) > 1 {
		return "job " + j.Name + ": "
	}
	return ""
}
