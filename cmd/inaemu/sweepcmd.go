package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// sweepArgs are sweep's own flags: the grid's axes.
type sweepArgs struct {
	modes, links, latency, loss, netems, shard string
	seeds                                      int
	asJSON                                     bool
}

// sweepDoc is sweep's --json report. Shard and Points are set in a
// shard's report (Points: the whole grid's size), for inaemu merge.
type sweepDoc struct {
	Workers     int                `json:"workers"`
	TensorBytes int64              `json:"tensor_bytes"`
	DType       string             `json:"dtype"`
	Window      int                `json:"window"`
	MsgLen      int                `json:"msg_len"`
	MTU         int                `json:"mtu"`
	NIC         string             `json:"nic"`
	Timeout     uint8              `json:"timeout"`
	LatencyNS   int64              `json:"latency_ns"`
	Shard       *conformance.Shard `json:"shard,omitempty"`
	Points      int                `json:"points,omitempty"`
	Rows        []emu.SweepRow     `json:"rows"`
}

// sweepCommand is 'inaemu sweep': one job over a grid.
func sweepCommand(stdout, stderr io.Writer) *cobra.Command {
	var a sweepArgs
	var jf *jobFlags
	c := newCommand("sweep", "run a job over a grid of algorithms, link rates and impairments (goodput against loss, ...)", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runSweep(e, jf, a) })
	c.Args = noArgs
	c.Long = `Report: a row per cell (mode, link, impairment; --json rows[], its grid index point) with its runs
(one per seed), how many ended exact, failed (a transport error) and wrong (a result that
differs), and medians over the exact runs of algbw and busbw (in --units; JSON both
algbw_gbytes_per_s and algbw_gbps, ...), retrans (data packets sent again) and timeouts (ACK
timeouts that fired). Every field: docs/reports.md.`
	jf = addJobFlags(c, scenario.JobGroup)
	jf.addMemoryFlag()
	f := c.Flags()
	f.StringVar(&a.modes, "modes", "netreduce,ring", "algorithms, comma-separated: netreduce, ring, wa")
	f.StringVar(&a.links, "links", "10G", "link rates, comma-separated, as tc writes them (10G or 10gbit, 100G; 10gbps is bytes: 80 Gbit/s)")
	f.StringVar(&a.latency, "latency", "1us", "one-way propagation delay of each link, as netem writes it (1us; a bare number is nanoseconds)")
	f.StringVar(&a.loss, "loss", "0,0.01%,0.1%,1%", "netem loss rates on every link, comma-separated (0: no impairment); '' for none")
	f.StringVar(&a.netems, "netem", "", "further impairments: netem settings separated by ';', e.g. 'reorder 5% gap 3;duplicate 5%'")
	f.IntVar(&a.seeds, "seeds", 3, "runs per cell, with seeds --seed, --seed+1, ...")
	f.StringVar(&a.shard, "shard", "", "run shard `I/N` of the grid's cells (cell k when k mod N = I; or N: I from JOB_COMPLETION_INDEX or SLURM_ARRAY_TASK_ID); merge the --json reports with 'inaemu merge'")
	f.BoolVar(&a.asJSON, "json", false, `print one JSON object: {"workers","tensor_bytes",...,"latency_ns","shard","points","rows":[{"point","mode","link","netem","runs","exact","failed","wrong","algbw_gbytes_per_s","busbw_gbytes_per_s","algbw_gbps","busbw_gbps","retransmissions","timeouts","seeds","errors"}]}`)
	addUnitsFlag(c)
	return c
}

// runSweep runs one job over a grid: algorithms × link rates × impairments
// (netem loss rates and whole netem settings), several seeds each, and
// prints a row per cell: runs that ended exact, failed (transport error)
// or wrong, and the median bandwidth of the exact ones.
func runSweep(fs *cmdEnv, jf *jobFlags, a sweepArgs) int {
	stderr := fs.stderr
	interruptible.Store(true) // Ctrl-C stops the sweep cleanly (fs.ctx)
	if a.seeds < 1 || a.seeds > 1000 {
		fs.usageError("--seeds %d: want 1..1000", a.seeds)
		return exitUsage
	}
	base, ok := jf.config(fs)
	if !ok {
		return exitUsage
	}
	noteValue(fs, "--latency ", scenario.Duration, a.latency)
	for _, l := range splitList(a.links, ",") {
		noteValue(fs, "--links ", scenario.Rate, l)
	}
	for _, n := range splitList(a.netems, ";") {
		noteNetem(fs, n)
	}
	lat, err := faults.ParseDuration(a.latency)
	if err != nil {
		fs.usageError("--latency: %v", err)
		return exitUsage
	}
	base.Link.Latency = lat
	var points []emu.SweepPoint
	var impair []string
	for _, l := range splitList(a.loss, ",") {
		p, err := faults.ParsePercent(l)
		if err != nil {
			fs.usageError("--loss: %v", err)
			return exitUsage
		}
		if p == 0 {
			impair = append(impair, "")
		} else {
			impair = append(impair, "loss "+l)
		}
	}
	impair = append(impair, splitList(a.netems, ";")...)
	if len(impair) == 0 {
		fs.usageError("nothing to sweep: give --loss or --netem values")
		return exitUsage
	}
	for _, m := range splitList(a.modes, ",") {
		mode, err := emu.ParseMode(m)
		if err != nil {
			fs.usageError("--modes: %v", err)
			return exitUsage
		}
		for _, l := range splitList(a.links, ",") {
			rate, err := units.ParseRate(l)
			if err != nil {
				fs.usageError("--links: %v", err)
				return exitUsage
			}
			for _, n := range impair {
				points = append(points, emu.SweepPoint{Mode: mode, Rate: rate, Netem: n})
			}
		}
	}
	doc := sweepDoc{Workers: base.Workers, TensorBytes: base.TensorBytes, DType: base.DType.String(), Window: base.Window, MsgLen: base.MsgLen,
		MTU: base.MTU, NIC: base.NIC.String(), Timeout: base.Timeout, LatencyNS: int64(lat), Rows: []emu.SweepRow{}}
	var shard conformance.Shard // the zero shard owns every cell
	if fs.changed("shard") {
		if shard, err = parseShard(a.shard, os.Getenv); err != nil {
			fs.usageError("%v", err)
			return exitUsage
		}
	}
	var mine []emu.SweepPoint
	var index []int // the grid index of each point run here
	for k, p := range points {
		if shard.Owns(k) {
			mine, index = append(mine, p), append(index, k)
		}
	}
	if shard.Of > 1 {
		doc.Shard, doc.Points = &shard, len(points)
	}
	points = mine // none when there are more shards than cells: an empty report
	if len(points) == 0 {
		return printSweep(fs, doc, a.asJSON)
	}
	var ss []uint64
	for i := 0; i < a.seeds; i++ {
		ss = append(ss, base.Seed+uint64(i))
	}
	bar := startProgress(fs, "sweep", "runs", a.asJSON)
	base.Context = fs.ctx
	rows, err := emu.Sweep(base, points, ss, func(done, total int) { bar.observe(int64(done), int64(total)) })
	bar.stop()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		fmt.Fprintf(stderr, "inaemu sweep: %v\n", err)
		return exitInterrupted
	}
	if err != nil {
		fs.usageError("%v", err)
		return exitUsage
	}
	for i := range rows {
		rows[i].Point = index[i]
	}
	doc.Rows = rows
	return printSweep(fs, doc, a.asJSON)
}

// printSweep prints a sweep's report (a run's, a shard's or a merge's)
// and returns the exit status: 1 when a run ended wrong, 3 when one
// failed in the transport.
func printSweep(e *cmdEnv, doc sweepDoc, asJSON bool) int {
	stdout := e.stdout
	rows := doc.Rows
	code := exitOK
	for _, r := range rows {
		switch {
		case r.Wrong > 0:
			code = exitFail
		case r.Failed > 0 && code == exitOK:
			code = exitJobFailed
		}
	}
	if asJSON {
		if c := e.writeJSONAs(reportSchema("sweep"), doc); c != exitOK { // merge's too
			return c
		}
		return code
	}
	seeds := ""
	if len(rows) > 0 && len(rows[0].Seeds) > 0 {
		ss := rows[0].Seeds
		seeds = fmt.Sprintf(", seeds %d..%d", ss[0], ss[len(ss)-1])
	}
	shard := ""
	if doc.Shard != nil {
		shard = fmt.Sprintf(", shard %v of %d cells", *doc.Shard, doc.Points)
	}
	fmt.Fprintf(stdout, "inaemu sweep: %d workers × %s %s, window %d, msg-len %d, MTU %d, NIC %s, timeout 2^%d × 4.096us, %v latency%s%s\n",
		doc.Workers, units.FormatSize(doc.TensorBytes), doc.DType, doc.Window, doc.MsgLen, doc.MTU, doc.NIC, doc.Timeout, time.Duration(doc.LatencyNS), seeds, shard)
	w := len("impairment")
	for _, r := range rows {
		w = max(w, len(r.Netem))
	}
	bw := e.bw.String()
	fmt.Fprintf(stdout, "%-10s %-6s %-*s %5s %6s %7s %6s %13s %13s %10s %9s\n",
		"mode", "link", w, "impairment", "runs", "exact", "failed", "wrong", "algbw("+bw+")", "busbw("+bw+")", "retrans", "timeouts")
	for _, r := range rows {
		n := r.Netem
		if n == "" {
			n = "none"
		}
		fmt.Fprintf(stdout, "%-10s %-6s %-*s %5d %6d %7d %6d %13s %13s %10.0f %9.0f\n",
			r.Mode, r.Link, w, n, r.Runs, r.Exact, r.Failed, r.Wrong, units.Sig3(e.bw.FromGbps(r.AlgBWGbps)), units.Sig3(e.bw.FromGbps(r.BusBWGbps)), r.Retrans, r.Timeouts)
		for _, e := range r.Errors {
			fmt.Fprintf(stdout, "    %s\n", e)
		}
	}
	return code
}

// splitList splits s at sep, trimming blanks and dropping empty items.
func splitList(s, sep string) []string {
	var out []string
	for _, x := range strings.Split(s, sep) {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return out
}
