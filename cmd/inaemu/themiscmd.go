package main

import (
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/themis/flow"
	"github.com/inaemu/inaemu/emu/themis/input"
	"github.com/inaemu/inaemu/internal/units"
)

// themisFlags are the inputs 'themis schedule' and 'themis run' share: the
// platform, the collectives and the scheduler.
type themisFlags struct {
	platform, dims, collective, size, scheduler, workload string
	chunks                                                int
	chargeAK, rsOnly, asJSON, asCSV                       bool
}

func addThemisFlags(c *cobra.Command, a *themisFlags) {
	f := c.Flags()
	f.StringVar(&a.platform, "platform", "", "one of the paper's Table 2 platforms: "+strings.Join(flow.Platforms(), ", "))
	f.StringVar(&a.dims, "dims", "", "the platform's dimensions instead of --platform: "+input.DimsSyntax)
	f.StringVar(&a.collective, "collective", "all-reduce", "all-reduce, reduce-scatter or all-gather")
	f.StringVar(&a.size, "size", "1GiB", "the collective's bytes per NPU (an all-reduce's or reduce-scatter's input, an all-gather's output): 100MB, 1GiB, bytes")
	f.StringVar(&a.workload, "workload", "", "run the collectives of a YAML or JSON `FILE` one after the other instead of --collective and --size: collectives: [{collective: all-reduce, size: 64MiB, dims: [1, 2]}, ...] (dims numbered from 1; default all)")
	f.IntVar(&a.chunks, "chunks", 64, "chunks each collective is cut into (the paper: 64)")
	f.StringVar(&a.scheduler, "scheduler", "themis", "inter-dimension scheduler: baseline (RS on dim 1..D, AG back) or themis (Algorithm 1, greedy per chunk)")
	f.BoolVar(&a.chargeAK, "charge-ak", true, "the scheduler's loads start at each dimension's fixed delay A_K, as the paper's Algorithm 1 (line 2) does; --charge-ak=false as ASTRA-sim's code does")
	f.BoolVar(&a.rsOnly, "load-rs-only", false, "charge an all-reduce chunk's RS half only to the loads (ASTRA-sim's OfflineGreedy); default both halves, as the paper's Fig. 7")
	f.BoolVar(&a.asJSON, "json", false, "print one JSON object (docs/themis.md)")
	f.BoolVar(&a.asCSV, "csv", false, "print CSV with a header line (docs/themis.md)")
}

// themisInput is what the flags resolve to.
type themisInput struct {
	plat  input.Platform
	items []input.Item
	cfg   themis.Config
}

// resolve checks the shared flags: exactly one of --platform and --dims,
// the collectives, the scheduler's settings. Every error is a usage error.
func (a *themisFlags) resolve(e *cmdEnv) (themisInput, bool) {
	bad := func(f string, v ...any) (themisInput, bool) {
		e.usageError(f, v...)
		return themisInput{}, false
	}
	var in themisInput
	var err error
	switch {
	case a.platform != "" && a.dims != "":
		return bad("--platform and --dims: give one")
	case a.platform != "":
		if in.plat, err = input.NamedPlatform(a.platform); err != nil {
			return bad("--platform: %v", err)
		}
	case a.dims != "":
		if in.plat, err = input.ParseDims(a.dims); err != nil {
			return bad("--dims: %v", err)
		}
	default:
		return bad("want --platform NAME (%s) or --dims SPEC", strings.Join(flow.Platforms(), ", "))
	}
	if a.asJSON && a.asCSV {
		return bad("--json and --csv: give one")
	}
	if a.chunks < 1 || a.chunks > 1<<16 {
		return bad("--chunks %d: want 1..%d", a.chunks, 1<<16)
	}
	switch themis.Scheduler(a.scheduler) {
	case themis.Baseline, themis.Themis:
	default:
		return bad("--scheduler %q: want baseline or themis", a.scheduler)
	}
	in.cfg = themis.Config{Scheduler: themis.Scheduler(a.scheduler), Chunks: a.chunks, ChargeAK: a.chargeAK, LoadRSOnly: a.rsOnly}
	if a.workload != "" {
		if e.changed("collective") || e.changed("size") {
			return bad("--workload names its collectives and sizes: drop --collective and --size")
		}
		b, err := os.ReadFile(a.workload)
		if err != nil {
			return bad("--workload: %v", err)
		}
		if in.items, err = input.ParseWorkload(b, in.plat.Topology); err != nil {
			return bad("--workload %s: %v", a.workload, err)
		}
	} else {
		w := input.Workload{Collectives: []input.Collective{{Collective: a.collective, Size: a.size}}}
		if in.items, err = w.Validate(in.plat.Topology); err != nil {
			msg := strings.TrimPrefix(err.Error(), "collective 1: ")
			if strings.Contains(msg, "size") {
				return bad("--size: %s", msg)
			}
			return bad("--collective: %s", msg)
		}
		in.items[0].Name = a.collective
	}
	// A chunk of less than a byte per NPU moves nothing a run could
	// measure.
	for _, it := range in.items {
		if it.Bytes/float64(a.chunks) < 1 {
			return bad("%s: %v bytes in %d chunks: want at least one byte per chunk", it.Name, it.Bytes, a.chunks)
		}
	}
	return in, true
}

// themisCommand is 'inaemu themis schedule|run'.
func themisCommand(stdout, stderr io.Writer) *cobra.Command {
	c := parentCommand("themis", "command", "Themis's hierarchical collectives on multi-dimensional platforms: schedules and the flow-level mode (docs/themis.md)", stdout, stderr)
	c.Long = `  schedule  each chunk's dimension order as the scheduler picks it, with its loads and threshold test
  run       the flow-level mode: the schedule executed on a fluid model of the platform (time, bytes, utilisation)`
	c.AddCommand(themisScheduleCommand(stdout, stderr), themisRunCommand(stdout, stderr))
	return c
}

func themisScheduleCommand(stdout, stderr io.Writer) *cobra.Command {
	var a themisFlags
	c := newCommand("schedule", "each chunk's dimension order, loads and threshold decision", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runThemisSchedule(e, &a) })
	c.Args = noArgs
	c.Long = `The collective (or each collective of --workload) is cut into --chunks chunks and the scheduler
gives each its stages: baseline RS on dim 1..D then AG on D..1; themis Algorithm 1, the dimensions
in increasing load unless the loads' gap is under the threshold (the time of a chunkSize/16 RS on the
least-loaded dimension), then the baseline order. One line per chunk: its stages, whether it took
the baseline order, the gap and the threshold, the loads before, what it added and the loads after
(µs; seconds in --json and --csv). Dimensions are numbered from 1, as the paper does.`
	addThemisFlags(c, &a)
	completeWords(c, map[string][]string{"platform": flow.Platforms(), "collective": {"all-reduce", "reduce-scatter", "all-gather"}, "scheduler": {"baseline", "themis"}})
	return c
}

type themisRunArgs struct {
	policy, timeline string
	active           int
	noFixed          bool
}

func themisRunCommand(stdout, stderr io.Writer) *cobra.Command {
	var a themisFlags
	var r themisRunArgs
	c := newCommand("run", "run the schedule on the flow-level model: time, per-dimension bytes and utilisation", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runThemisFlow(e, &a, r) })
	c.Args = noArgs
	c.Long = `The flow-level mode (emu/themis/flow): one representative NPU, each dimension a server of its
bandwidth per NPU serving --active chunks at a time, picked by --policy; a stage is its fixed delay
(steps × step latency) then its bytes at an equal share of the dimension's bandwidth. The
collectives of --workload run one after the other, each scheduled afresh. Reports the time, per
dimension the bytes each NPU sent, per link (bytes per NPU / links per NPU) and in total (× NPUs),
the busy time and the utilisation (bytes / (BW × time)), and the bandwidth-weighted average
utilisation (the paper's §6.1). --timeline writes each dimension's activity per 100 µs (Fig. 9).`
	addThemisFlags(c, &a)
	f := c.Flags()
	f.StringVar(&r.policy, "policy", "fifo", "intra-dimension policy: fifo or scf (smallest chunk first)")
	f.IntVar(&r.active, "active", flow.DefaultActivePerDim, "chunks each dimension serves at once (ASTRA-sim's active-chunks-per-dimension)")
	f.BoolVar(&r.noFixed, "no-fixed-delay", false, "run without the stages' fixed delays (the bandwidth-only model)")
	f.StringVar(&r.timeline, "timeline", "", "write each dimension's activity per 100 µs window as CSV to `FILE` (Fig. 9's data)")
	completeWords(c, map[string][]string{"platform": flow.Platforms(), "collective": {"all-reduce", "reduce-scatter", "all-gather"}, "scheduler": {"baseline", "themis"}, "policy": {"fifo", "scf"}})
	return c
}

// Reports. Dimensions are numbered from 1 in every output.

type themisDimDoc struct {
	Dim       int     `json:"dim"`
	Kind      string  `json:"kind"`
	Size      int     `json:"size"`
	BW        float64 `json:"bw_bytes_per_s"`
	LatencyNs int64   `json:"latency_ns"`
	Links     int     `json:"links_per_npu"`
}

type themisHead struct {
	Platform  string         `json:"platform,omitempty"`
	NPUs      int            `json:"npus"`
	Dims      []themisDimDoc `json:"dims"`
	Scheduler string         `json:"scheduler"`
	Chunks    int            `json:"chunks"`
	ChargeAK  bool           `json:"charge_ak"`
	RSOnly    bool           `json:"load_rs_only"`
}

func (in themisInput) head() themisHead {
	h := themisHead{Platform: in.plat.Name, NPUs: in.plat.Topology.NPUs(), Scheduler: string(in.cfg.Scheduler), Chunks: in.cfg.Chunks, ChargeAK: in.cfg.ChargeAK, RSOnly: in.cfg.LoadRSOnly}
	for d, x := range in.plat.Topology {
		h.Dims = append(h.Dims, themisDimDoc{Dim: d + 1, Kind: string(x.Kind), Size: x.Size, BW: x.BW, LatencyNs: x.Latency.Nanoseconds(), Links: in.plat.Links[d]})
	}
	return h
}

func (h themisHead) String() string {
	var dims, sizes []string
	for _, d := range h.Dims {
		sizes = append(sizes, strconv.Itoa(d.Size))
		dims = append(dims, fmt.Sprintf("dim%d %s %d × %s/s %v", d.Dim, d.Kind, d.Size, gbs(d.BW), time.Duration(d.LatencyNs)))
	}
	name := h.Platform
	if name == "" {
		name = "--dims"
	}
	ak := "A_K not charged"
	if h.ChargeAK {
		ak = "A_K charged"
	}
	return fmt.Sprintf("%s (%s = %d NPUs: %s), %s scheduler, %d chunks, %s", name, strings.Join(sizes, "x"), h.NPUs, strings.Join(dims, ", "), h.Scheduler, h.Chunks, ak)
}

// gbs is a bandwidth in bytes per second as GB (10^9 bytes).
func gbs(bw float64) string { return strconv.FormatFloat(bw/1e9, 'f', -1, 64) + " GB" }

type themisStageDoc struct {
	Dim    int     `json:"dim"`
	Op     string  `json:"op"`
	In     float64 `json:"in_bytes"`
	Out    float64 `json:"out_bytes"`
	Sent   float64 `json:"sent_bytes"`
	TimeNs int64   `json:"time_ns"`
}

type themisChunkDoc struct {
	Chunk     int              `json:"chunk"`
	Bytes     float64          `json:"bytes"`
	Stages    []themisStageDoc `json:"stages"`
	Order     []int            `json:"order"`
	Baseline  bool             `json:"baseline_order"`
	Gap       float64          `json:"gap_s"`
	Threshold float64          `json:"threshold_s"`
	Before    []float64        `json:"loads_before_s"`
	Added     []float64        `json:"added_s"`
	After     []float64        `json:"loads_after_s"`
}

type themisScheduleCollective struct {
	Name       string           `json:"name"`
	Collective string           `json:"collective"`
	Bytes      float64          `json:"bytes"`
	Dims       []int            `json:"dims"`
	Chunks     []themisChunkDoc `json:"chunks"`
}

type themisScheduleDoc struct {
	themisHead
	Collectives []themisScheduleCollective `json:"collectives"`
}

func oneBased(dims []int) []int {
	out := make([]int, len(dims))
	for i, d := range dims {
		out[i] = d + 1
	}
	return out
}

// stagesText is a chunk's stages as "RS1 RS2 AG2 AG1".
func stagesText(st []themisStageDoc) string {
	f := make([]string, len(st))
	for i, s := range st {
		f[i] = fmt.Sprintf("%s%d", s.Op, s.Dim)
	}
	return strings.Join(f, " ")
}

func runThemisSchedule(e *cmdEnv, a *themisFlags) int {
	in, ok := a.resolve(e)
	if !ok {
		return exitUsage
	}
	doc := themisScheduleDoc{themisHead: in.head()}
	for _, it := range in.items {
		scheds, log, err := input.Schedule(in.plat.Topology, it, in.cfg)
		if err != nil {
			e.usageError("%s: %v", it.Name, err)
			return exitUsage
		}
		c := themisScheduleCollective{Name: it.Name, Collective: string(it.Collective), Bytes: it.Bytes, Dims: oneBased(it.Dims)}
		for i, s := range scheds {
			d := log[i]
			cd := themisChunkDoc{Chunk: s.Chunk, Bytes: s.Bytes, Order: oneBased(d.Order), Baseline: d.Baseline, Gap: d.Gap, Threshold: d.Threshold,
				Before: d.Before, Added: d.Added, After: d.After}
			for _, st := range s.Stages {
				cd.Stages = append(cd.Stages, themisStageDoc{Dim: st.Dim + 1, Op: string(st.Op), In: st.InBytes, Out: st.OutBytes, Sent: st.SentBytes, TimeNs: st.Time.Nanoseconds()})
			}
			c.Chunks = append(c.Chunks, cd)
		}
		doc.Collectives = append(doc.Collectives, c)
	}
	switch {
	case a.asJSON:
		return e.writeJSON(doc)
	case a.asCSV:
		return writeThemisCSV(e, scheduleCSV(doc))
	}
	w := e.stdout
	fmt.Fprintf(w, "inaemu themis schedule: %s\n", doc.themisHead)
	for _, c := range doc.Collectives {
		fmt.Fprintf(w, "%s: %s of %s per NPU on dims %s\n", c.Name, c.Collective, bytesText(c.Bytes), intsText(c.Dims))
		fmt.Fprintf(w, "  %5s  %-*s  %-8s  %12s  %12s  %s  %s  %s\n", "chunk", stagesWidth(c), "stages", "decision", "gap_us", "threshold_us", "loads before (µs)", "added (µs)", "loads after (µs)")
		for _, k := range c.Chunks {
			kind := "greedy"
			if k.Baseline {
				kind = "baseline"
			}
			fmt.Fprintf(w, "  %5d  %-*s  %-8s  %12.3f  %12.3f  %s  %s  %s\n", k.Chunk, stagesWidth(c), stagesText(k.Stages), kind, k.Gap*1e6, k.Threshold*1e6, usText(k.Before), usText(k.Added), usText(k.After))
		}
	}
	return exitOK
}

func stagesWidth(c themisScheduleCollective) int {
	w := len("stages")
	for _, k := range c.Chunks {
		w = max(w, len(stagesText(k.Stages)))
	}
	return w
}

func usText(v []float64) string {
	f := make([]string, len(v))
	for i, x := range v {
		f[i] = strconv.FormatFloat(x*1e6, 'f', 3, 64)
	}
	return "(" + strings.Join(f, ", ") + ")"
}

func intsText(v []int) string {
	f := make([]string, len(v))
	for i, x := range v {
		f[i] = strconv.Itoa(x)
	}
	return strings.Join(f, ",")
}

// bytesText is a size for people, exact when it is not a whole unit.
func bytesText(b float64) string {
	if b == float64(int64(b)) {
		return fmt.Sprintf("%s (%d bytes)", themisSize(int64(b)), int64(b))
	}
	return strconv.FormatFloat(b, 'g', -1, 64) + " bytes"
}

// themisSize is units.FormatSize's binary units, else decimal ones
// (Table 2's link rates and sizes are often decimal).
func themisSize(n int64) string {
	if s := units.FormatSize(n); strings.HasSuffix(s, "iB") {
		return s
	}
	for _, u := range []struct {
		suf string
		m   int64
	}{{"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.suf)
		}
	}
	return fmt.Sprintf("%dB", n)
}

func fmtF(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

// scheduleCSV: one row per chunk; per-dimension columns d1..dD.
func scheduleCSV(doc themisScheduleDoc) [][]string {
	head := []string{"collective", "name", "chunk", "bytes", "stages", "order", "baseline_order", "gap_s", "threshold_s"}
	for _, pre := range []string{"before_s_d", "added_s_d", "after_s_d"} {
		for d := range doc.Dims {
			head = append(head, fmt.Sprintf("%s%d", pre, d+1))
		}
	}
	rows := [][]string{head}
	for i, c := range doc.Collectives {
		for _, k := range c.Chunks {
			r := []string{strconv.Itoa(i + 1), c.Name, strconv.Itoa(k.Chunk), fmtF(k.Bytes), stagesText(k.Stages), intsText(k.Order), strconv.FormatBool(k.Baseline), fmtF(k.Gap), fmtF(k.Threshold)}
			for _, v := range [][]float64{k.Before, k.Added, k.After} {
				for _, x := range v {
					r = append(r, fmtF(x))
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

func writeThemisCSV(e *cmdEnv, rows [][]string) int {
	w := csv.NewWriter(e.stdout)
	_ = w.WriteAll(rows) // its error is the recorder's: a full disk
	if err := w.Error(); err != nil {
		return ioError(e.stderr, e.name, "standard output", err)
	}
	return exitOK
}

// The flow-level run.

type themisTraffic struct {
	Dim          int     `json:"dim"`
	BytesPerNPU  float64 `json:"bytes_per_npu"`
	BytesPerLink float64 `json:"bytes_per_link"`
	BytesTotal   float64 `json:"bytes_total"`
	BusyNs       int64   `json:"busy_ns"`
	Utilisation  float64 `json:"utilisation"`
}

type themisRunCollective struct {
	Name        string          `json:"name"`
	Collective  string          `json:"collective"`
	Bytes       float64         `json:"bytes"`
	Dims        []int           `json:"involved_dims"`
	StartNs     int64           `json:"start_ns"`
	TimeNs      int64           `json:"time_ns"`
	Seconds     float64         `json:"seconds"`
	Utilisation float64         `json:"utilisation"`
	Traffic     []themisTraffic `json:"traffic"`

	activity, serving [][]float64 // per dimension, per window
	start             float64     // seconds
}

type themisRunDoc struct {
	themisHead
	Policy      string                `json:"policy"`
	Active      int                   `json:"active_per_dim"`
	NoFixed     bool                  `json:"no_fixed_delay"`
	TimeNs      int64                 `json:"time_ns"`
	Seconds     float64               `json:"seconds"`
	Utilisation float64               `json:"utilisation"`
	Traffic     []themisTraffic       `json:"traffic"`
	Collectives []themisRunCollective `json:"collectives"`
	BinNs       int64                 `json:"timeline_bin_ns"`
}

// themisTrafficOf is each dimension's measures over seconds: per NPU, per link
// (each dimension's algorithm spreads its bytes evenly over the NPU's
// links in it, as the paper's aggregate bandwidth per NPU assumes) and
// over all NPUs.
func themisTrafficOf(p input.Platform, bytes []float64, busy []float64, seconds float64) ([]themisTraffic, float64) {
	out := make([]themisTraffic, len(p.Topology))
	var sum, bw float64
	for d, x := range p.Topology {
		t := themisTraffic{Dim: d + 1, BytesPerNPU: bytes[d], BytesPerLink: bytes[d] / float64(p.Links[d]),
			BytesTotal: bytes[d] * float64(p.Topology.NPUs()), BusyNs: themisDur(busy[d]).Nanoseconds()}
		if seconds > 0 {
			t.Utilisation = bytes[d] / (x.BW * seconds)
		}
		out[d] = t
		sum += bytes[d]
		bw += x.BW
	}
	if seconds > 0 {
		return out, sum / (seconds * bw)
	}
	return out, 0
}

func themisDur(s float64) time.Duration { return time.Duration(s*1e9 + 0.5) }

func runThemisFlow(e *cmdEnv, a *themisFlags, r themisRunArgs) int {
	in, ok := a.resolve(e)
	if !ok {
		return exitUsage
	}
	pol := themis.Policy(r.policy)
	if err := pol.Validate(); err != nil {
		e.usageError("--policy %q: want fifo or scf", r.policy)
		return exitUsage
	}
	if r.active < 1 || r.active > 1<<16 {
		e.usageError("--active %d: want 1..%d chunks per dimension", r.active, 1<<16)
		return exitUsage
	}
	doc := themisRunDoc{themisHead: in.head(), Policy: string(pol), Active: r.active, NoFixed: r.noFixed, BinNs: flow.DefaultTimelineBin.Nanoseconds()}
	D := len(in.plat.Topology)
	bytes, busy := make([]float64, D), make([]float64, D)
	var now float64
	for _, it := range in.items {
		scheds, _, err := input.Schedule(in.plat.Topology, it, in.cfg)
		if err != nil {
			e.usageError("%s: %v", it.Name, err)
			return exitUsage
		}
		res, err := flow.Run(in.plat.Topology, scheds, flow.Config{ActivePerDim: r.active, Policy: pol, NoFixedDelay: r.noFixed})
		if err != nil {
			e.usageError("%s: %v", it.Name, err)
			return exitUsage
		}
		cb, cbusy := make([]float64, D), make([]float64, D)
		c := themisRunCollective{Name: it.Name, Collective: string(it.Collective), Bytes: it.Bytes, Dims: oneBased(it.Dims),
			StartNs: themisDur(now).Nanoseconds(), TimeNs: res.Time.Nanoseconds(), Seconds: res.Seconds, start: now}
		for d, x := range res.Dims {
			cb[d], cbusy[d] = x.Bytes, x.Busy.Seconds()
			bytes[d] += x.Bytes
			busy[d] += x.Busy.Seconds()
			c.activity = append(c.activity, x.Activity)
			c.serving = append(c.serving, x.Serving)
		}
		c.Traffic, c.Utilisation = themisTrafficOf(in.plat, cb, cbusy, res.Seconds)
		doc.Collectives = append(doc.Collectives, c)
		now += res.Seconds
	}
	doc.Seconds, doc.TimeNs = now, themisDur(now).Nanoseconds()
	doc.Traffic, doc.Utilisation = themisTrafficOf(in.plat, bytes, busy, now)
	if r.timeline != "" {
		ioErr, _ := writeFile(r.timeline, func(w io.Writer) error { return writeTimeline(w, doc) })
		if ioErr != nil {
			return ioError(e.stderr, e.name, r.timeline, ioErr)
		}
	}
	switch {
	case a.asJSON:
		return e.writeJSON(doc)
	case a.asCSV:
		return writeThemisCSV(e, runCSV(doc))
	}
	w := e.stdout
	fmt.Fprintf(w, "inaemu themis run: %s; policy %s, %d active per dimension%s\n", doc.themisHead, doc.Policy, doc.Active, map[bool]string{true: ", no fixed delays"}[doc.NoFixed])
	for _, c := range doc.Collectives {
		fmt.Fprintf(w, "%s: %s of %s per NPU on dims %s: %s, average utilisation %.4f\n", c.Name, c.Collective, bytesText(c.Bytes), intsText(c.Dims), msText(c.Seconds), c.Utilisation)
	}
	fmt.Fprintf(w, "  %3s  %-6s  %5s  %10s  %5s  %16s  %16s  %18s  %12s  %11s\n", "dim", "kind", "size", "GB/s/NPU", "links", "bytes/NPU", "bytes/link", "bytes (all NPUs)", "busy (ms)", "utilisation")
	for d, t := range doc.Traffic {
		x := doc.Dims[d]
		fmt.Fprintf(w, "  %3d  %-6s  %5d  %10s  %5d  %16.0f  %16.0f  %18.0f  %12.4f  %11.4f\n", t.Dim, x.Kind, x.Size, strconv.FormatFloat(x.BW/1e9, 'f', -1, 64), x.Links, t.BytesPerNPU, t.BytesPerLink, t.BytesTotal, float64(t.BusyNs)/1e6, t.Utilisation)
	}
	fmt.Fprintf(w, "  total %s, average utilisation %.4f (bandwidth-weighted, §6.1)\n", msText(doc.Seconds), doc.Utilisation)
	if r.timeline != "" {
		fmt.Fprintf(w, "  timeline %s (activity per %v window)\n", r.timeline, flow.DefaultTimelineBin)
	}
	return exitOK
}

func msText(s float64) string { return strconv.FormatFloat(s*1e3, 'f', 4, 64) + " ms" }

// runCSV: per collective then for the whole run ("total"), one row per
// dimension and one ("all") for the bandwidth-weighted average.
func runCSV(doc themisRunDoc) [][]string {
	rows := [][]string{{"collective", "name", "dim", "kind", "size", "bw_bytes_per_s", "links_per_npu", "bytes_per_npu", "bytes_per_link", "bytes_total", "busy_ns", "utilisation", "time_ns"}}
	add := func(idx, name string, tr []themisTraffic, util float64, timeNs int64) {
		var sum, sumAll float64
		for d, t := range tr {
			x := doc.Dims[d]
			rows = append(rows, []string{idx, name, strconv.Itoa(t.Dim), x.Kind, strconv.Itoa(x.Size), fmtF(x.BW), strconv.Itoa(x.Links),
				fmtF(t.BytesPerNPU), fmtF(t.BytesPerLink), fmtF(t.BytesTotal), strconv.FormatInt(t.BusyNs, 10), fmtF(t.Utilisation), strconv.FormatInt(timeNs, 10)})
			sum, sumAll = sum+t.BytesPerNPU, sumAll+t.BytesTotal
		}
		rows = append(rows, []string{idx, name, "all", "", "", "", "", fmtF(sum), "", fmtF(sumAll), "", fmtF(util), strconv.FormatInt(timeNs, 10)})
	}
	for i, c := range doc.Collectives {
		add(strconv.Itoa(i+1), c.Name, c.Traffic, c.Utilisation, c.TimeNs)
	}
	add("total", "", doc.Traffic, doc.Utilisation, doc.TimeNs)
	return rows
}

// writeTimeline writes Fig. 9's data: per collective, per 100 µs window
// of it, each dimension's activity (the share of the window a chunk was
// at the dimension, queued or served) then its serving share. A
// collective's windows start at its own start, so the run's time is
// start_us; its last window may be partial (its shares are of a full
// window).
func writeTimeline(w io.Writer, doc themisRunDoc) error {
	cw := csv.NewWriter(w)
	head := []string{"collective", "window", "start_us"}
	for d := range doc.Dims {
		head = append(head, fmt.Sprintf("d%d_activity", d+1))
	}
	for d := range doc.Dims {
		head = append(head, fmt.Sprintf("d%d_serving", d+1))
	}
	if err := cw.Write(head); err != nil {
		return err
	}
	bin := float64(doc.BinNs) / 1e3
	for i, c := range doc.Collectives {
		n := 0
		if len(c.activity) > 0 {
			n = len(c.activity[0])
		}
		for k := range n {
			r := []string{strconv.Itoa(i + 1), strconv.Itoa(k), strconv.FormatFloat(c.start*1e6+float64(k)*bin, 'f', 3, 64)}
			for _, a := range c.activity {
				r = append(r, strconv.FormatFloat(a[k], 'f', 6, 64))
			}
			for _, s := range c.serving {
				r = append(r, strconv.FormatFloat(s[k], 'f', 6, 64))
			}
			if err := cw.Write(r); err != nil {
				return err
			}
		}
	}
	cw.Flush()
	return cw.Error()
}
