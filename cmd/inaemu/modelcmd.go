package main

import (
	"bytes"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/inaemu/inaemu/emu/commmodel"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// modelArgs are 'inaemu model' flags; gpus, alpha and b-intra take lists
// (a grid, as Fig. 7 sweeps them).
type modelArgs struct {
	taForm, size, bInter        string
	scheme, gpus, alpha, bIntra []string
	perHost                     int
	asJSON                      bool
	// the training-step model
	train   []string
	batch   int
	fusion  string
	overlap bool
}

// modelCommand is 'inaemu model': Appendix A's communication model.
func modelCommand(stdout, stderr io.Writer) *cobra.Command {
	var a modelArgs
	c := newCommand("model", "evaluate NetReduce's communication model (Appendix A) for flat ring, Tencent all-reduce, parallel NetReduce and parallel ring", stdout, stderr,
		func(e *cmdEnv, _ []string) int { return runModel(e, a) })
	c.Args = noArgs
	c.Long = `The time one all-reduce of --size bytes takes on --gpus GPUs, --per-host per machine, by
Eqs. (1)-(3) of NetReduce's Appendix A (ASPLOS '23): fr (one ring over all GPUs), ta (reduce to a
master per machine, ring of masters, broadcast), pn (n NetReduce rings with intra-machine
reduce-scatter before and all-gather after), pr (pn with Ring-AllReduce across machines, not in
the paper). --gpus, --alpha and --b-intra take comma-separated lists: every combination is one row,
as Fig. 7 sweeps P, B_intra and alpha. Rates are tc's: 100GBps is bytes, 100gbit bits. The paper
prints Eq. (2) in two forms that disagree; --ta-form chooses (docs/model.md).

With --train MODEL (alexnet, vgg16, resnet50 or a CSV file of layer,bytes,forward_ms,backward_ms)
it models a training iteration instead: the gradients fused into buckets of --fusion bytes in the
order the backward pass produces them, each bucket one all-reduce by the model above, iteration =
compute + communication not hidden behind the backward pass (all of it unless --overlap), and
images/s per GPU = --batch / iteration.`
	f := c.Flags()
	f.StringSliceVar(&a.scheme, "scheme", []string{"all"}, "fr, ta, pn, pr or all (a list for several)")
	f.StringSliceVar(&a.gpus, "gpus", []string{"32"}, "P, the job's GPUs (a list for a grid)")
	f.IntVar(&a.perHost, "per-host", 8, "n, GPUs per machine (a power of two for ta)")
	f.StringSliceVar(&a.alpha, "alpha", []string{"1us"}, "α, the per-hop latency of a ring step (a list for a grid)")
	f.StringVar(&a.size, "size", "100MB", "M, the gradient's bytes")
	f.StringSliceVar(&a.bIntra, "b-intra", []string{"100GBps"}, "bandwidth inside a machine (a list for a grid)")
	f.StringVar(&a.bInter, "b-inter", "12.5GBps", "bandwidth between machines (the NIC)")
	f.StringVar(&a.taForm, "ta-form", "closed", "Eq. (2)'s closed or bracketed form")
	f.BoolVar(&a.asJSON, "json", false, "print one JSON object")
	f.StringSliceVar(&a.train, "train", nil, "model a training step of these networks: alexnet, vgg16, resnet50 or a CSV file (a list for several)")
	f.IntVar(&a.batch, "batch", 32, "with --train: images per GPU per iteration")
	f.StringVar(&a.fusion, "fusion", "64MiB", "with --train: gradient bytes fused into one all-reduce (0: one per iteration)")
	f.BoolVar(&a.overlap, "overlap", false, "with --train: start a bucket's all-reduce as soon as the backward pass has produced it")
	return c
}

// modelRow is one combination's times (milliseconds) and the fastest.
type modelRow struct {
	GPUs       int                  `json:"gpus"`
	PerHost    int                  `json:"per_host"`
	AlphaNS    float64              `json:"alpha_ns"`
	BIntraGBps float64              `json:"b_intra_gbytes_per_s"`
	BInterGBps float64              `json:"b_inter_gbytes_per_s"`
	SizeBytes  float64              `json:"size_bytes"`
	TotalMS    map[string]float64   `json:"total_ms"`
	StagesMS   map[string][]float64 `json:"stages_ms"`
	Fastest    string               `json:"fastest"`
	FRPNExact  float64              `json:"fr_pn_threshold"`
	FRPNEq6    float64              `json:"fr_pn_threshold_eq6"`
	IntraInter float64              `json:"b_intra_over_b_inter"`
	TAFormUsed string               `json:"ta_form,omitempty"`
}

func runModel(e *cmdEnv, a modelArgs) int {
	var schemes []commmodel.Scheme
	for _, name := range a.scheme {
		s := commmodel.Scheme(strings.TrimSpace(name))
		switch {
		case name == "all":
			schemes = append(schemes, commmodel.Schemes...)
		case !slices.Contains(commmodel.Schemes, s):
			e.usageError("--scheme %s: want fr, ta, pn, pr or all", name)
			return exitUsage
		default:
			schemes = append(schemes, s)
		}
	}
	// In the model's order, each once.
	schemes = slices.DeleteFunc(slices.Clone(commmodel.Schemes), func(s commmodel.Scheme) bool { return !slices.Contains(schemes, s) })
	size, err := units.ParseSize(a.size)
	if err != nil || size <= 0 {
		e.usageError("--size %s: want a size such as 100MB or 64MiB", a.size)
		return exitUsage
	}
	inter, err := units.ParseRate(a.bInter)
	if err != nil {
		e.usageError("--b-inter: %v", err)
		return exitUsage
	}
	gpus, err1 := parseList("--gpus", a.gpus, func(s string) (int, error) {
		p, err := strconv.Atoi(s)
		if err != nil {
			return 0, fmt.Errorf("%s: want a whole number", s)
		}
		return p, nil
	})
	alphas, err2 := parseList("--alpha", a.alpha, func(s string) (float64, error) {
		d, err := faults.ParseDuration(s)
		return d.Seconds(), err
	})
	intras, err3 := parseList("--b-intra", a.bIntra, func(s string) (float64, error) {
		r, err := units.ParseRate(s)
		return r / 8, err
	})
	for _, err := range []error{err1, err2, err3} {
		if err != nil {
			e.usageError("%v", err)
			return exitUsage
		}
	}
	if slices.Contains(schemes, commmodel.TA) && a.perHost > 0 && !commmodel.PowerOfTwo(a.perHost) {
		e.usageError("--per-host %d: ta's model assumes a power of two GPUs per machine (Appendix A); choose --scheme fr, pn or pr", a.perHost)
		return exitUsage
	}
	if len(a.train) > 0 {
		return runTrain(e, a, schemes, gpus, alphas, intras, inter/8)
	}
	for _, name := range []string{"batch", "fusion", "overlap"} {
		if e.changed(name) {
			e.usageError("--%s is for --train", name)
			return exitUsage
		}
	}
	var rows []modelRow
	for _, P := range gpus {
		for _, bA := range intras {
			for _, al := range alphas {
				p := commmodel.Params{GPUs: P, PerHost: a.perHost, Alpha: al, Size: float64(size), BIntra: bA, BInter: inter / 8, TAForm: commmodel.TAForm(a.taForm)}
				if err := p.Validate(); err != nil {
					e.usageError("%v", err)
					return exitUsage
				}
				rows = append(rows, modelEval(p, schemes))
			}
		}
	}
	if a.asJSON {
		return e.writeJSONAs(reportSchema("model.appendix-a"), map[string]any{"model": "NetReduce Appendix A", "schemes": schemes, "rows": rows})
	}
	printModel(e.stdout, rows, schemes)
	return exitOK
}

func modelEval(p commmodel.Params, schemes []commmodel.Scheme) modelRow {
	exact, eq6 := commmodel.FRPNThreshold(p.GPUs, p.PerHost)
	row := modelRow{GPUs: p.GPUs, PerHost: p.PerHost, AlphaNS: p.Alpha * 1e9, BIntraGBps: p.BIntra / 1e9, BInterGBps: p.BInter / 1e9,
		SizeBytes: p.Size, TotalMS: map[string]float64{}, StagesMS: map[string][]float64{}, FRPNExact: exact, FRPNEq6: eq6, IntraInter: p.BIntra / p.BInter}
	best := -1.0
	for _, s := range schemes {
		t := commmodel.Eval(s, p)
		row.TotalMS[string(s)] = t.Total * 1e3
		st := make([]float64, len(t.Stages))
		for i, x := range t.Stages {
			st[i] = x * 1e3
		}
		row.StagesMS[string(s)] = st
		if best < 0 || t.Total < best {
			best, row.Fastest = t.Total, string(s)
		}
		if s == commmodel.TA {
			row.TAFormUsed = string(p.TAForm)
		}
	}
	return row
}

func printModel(w io.Writer, rows []modelRow, schemes []commmodel.Scheme) {
	r0 := rows[0]
	fmt.Fprintf(w, "NetReduce Appendix A: M = %.0f B (%s), n = %d per machine, B_inter = %g GB/s; times in ms\n", r0.SizeBytes, units.FormatBytes(int64(r0.SizeBytes)), r0.PerHost, r0.BInterGBps)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	head := "P\tB_intra GB/s\talpha us\t"
	for _, s := range schemes {
		head += string(s) + "\t"
	}
	fmt.Fprintln(tw, head+"fastest\t")
	for _, r := range rows {
		line := fmt.Sprintf("%d\t%g\t%g\t", r.GPUs, r.BIntraGBps, r.AlphaNS/1e3)
		for _, s := range schemes {
			line += fmt.Sprintf("%.3f\t", r.TotalMS[string(s)])
		}
		fmt.Fprintln(tw, line+r.Fastest+"\t")
	}
	_ = tw.Flush()
	if len(rows) == 1 {
		fmt.Fprintf(w, "fr vs pn: pn's bandwidth term wins from B_intra/B_inter = %.3f (2P(n-1)/(n(P-2)); Eq. (6) says %.3f); here %.3f\n", r0.FRPNExact, r0.FRPNEq6, r0.IntraInter)
	}
	if slices.Contains(schemes, commmodel.TA) {
		fmt.Fprintf(w, "ta: Eq. (2)'s %s form\n", r0.TAFormUsed)
	}
}

// parseList reads a list flag's values with parse; an error names the
// flag.
func parseList[T any](flag string, vals []string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, v := range vals {
		x, err := parse(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("%s: %v", flag, err)
		}
		out = append(out, x)
	}
	return out, nil
}

// trainRow is one network under one scheme (times in milliseconds).
type trainRow struct {
	Model       string             `json:"model"`
	Bytes       int64              `json:"gradient_bytes"`
	Scheme      string             `json:"scheme"`
	Buckets     int                `json:"buckets"`
	ComputeMS   float64            `json:"compute_ms"`
	CommMS      float64            `json:"comm_ms"`
	ExposedMS   float64            `json:"exposed_comm_ms"`
	IterationMS float64            `json:"iteration_ms"`
	Images      float64            `json:"images_per_s_per_gpu"`
	Gain        map[string]float64 `json:"gain_over,omitempty"` // this scheme's images/s over each other's, minus 1
}

// runTrain is 'inaemu model --train': the training-step model.
func runTrain(e *cmdEnv, a modelArgs, schemes []commmodel.Scheme, gpus []int, alphas, intras []float64, inter float64) int {
	if len(gpus) != 1 || len(alphas) != 1 || len(intras) != 1 {
		e.usageError("--train takes one --gpus, --alpha and --b-intra each, not lists")
		return exitUsage
	}
	if e.changed("size") {
		e.usageError("--size and --train: the network's layers give the bytes")
		return exitUsage
	}
	if a.batch < 1 {
		e.usageError("--batch %d: want at least 1 image", a.batch)
		return exitUsage
	}
	fusion, err := units.ParseSize(a.fusion)
	if err != nil || fusion < 0 {
		e.usageError("--fusion %s: want a size such as 64MiB, or 0", a.fusion)
		return exitUsage
	}
	// Size is each bucket's (TrainStep); 1 passes Validate.
	p := commmodel.Params{GPUs: gpus[0], PerHost: a.perHost, Alpha: alphas[0], Size: 1, BIntra: intras[0], BInter: inter, TAForm: commmodel.TAForm(a.taForm)}
	if err := p.Validate(); err != nil {
		e.usageError("%v", err)
		return exitUsage
	}
	var rows []trainRow
	for _, name := range a.train {
		name = strings.TrimSpace(name)
		m, ok := commmodel.Builtin(name)
		switch {
		case ok:
		case !strings.HasSuffix(name, ".csv"):
			e.usageError("--train %s: want %s or a .csv file", name, strings.Join(commmodel.BuiltinModels, ", "))
			return exitUsage
		default:
			if m, err = readModelFile(name); err != nil {
				fmt.Fprintf(e.stderr, "inaemu model: %v\n", err)
				return exitUsage // a bad input file, as for plot
			}
		}
		first := len(rows)
		for _, s := range schemes {
			st := commmodel.TrainStep(m, s, p, a.batch, fusion, a.overlap)
			rows = append(rows, trainRow{Model: m.Name, Bytes: m.Bytes(), Scheme: string(s), Buckets: st.Buckets, ComputeMS: st.Compute * 1e3,
				CommMS: st.Comm * 1e3, ExposedMS: st.Exposed * 1e3, IterationMS: st.Iteration * 1e3, Images: st.Images})
		}
		for i := first; i < len(rows); i++ {
			rows[i].Gain = map[string]float64{}
			for j := first; j < len(rows); j++ {
				if j != i {
					rows[i].Gain[rows[j].Scheme] = rows[i].Images/rows[j].Images - 1
				}
			}
		}
	}
	if a.asJSON {
		return e.writeJSONAs(reportSchema("model.training"), map[string]any{"model": "training step", "gpus": p.GPUs, "per_host": p.PerHost,
			"alpha_ns": p.Alpha * 1e9, "b_intra_gbytes_per_s": p.BIntra / 1e9, "b_inter_gbytes_per_s": p.BInter / 1e9,
			"batch": a.batch, "fusion_bytes": fusion, "overlap": a.overlap, "ta_form": p.TAForm, "rows": rows})
	}
	ov := "no overlap"
	if a.overlap {
		ov = "overlap with the backward pass"
	}
	fmt.Fprintf(e.stdout, "training step: P = %d, n = %d, alpha = %g us, B_intra = %g GB/s, B_inter = %g GB/s, batch %d, fusion %s, %s; times in ms\n",
		p.GPUs, p.PerHost, p.Alpha*1e6, p.BIntra/1e9, p.BInter/1e9, a.batch, units.FormatBytes(fusion), ov)
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "model\tgradients\tscheme\tbuckets\tcompute\tcomm\texposed\titeration\timages/s\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.1f\t\n", r.Model, units.FormatBytes(r.Bytes), r.Scheme, r.Buckets, r.ComputeMS, r.CommMS, r.ExposedMS, r.IterationMS, r.Images)
	}
	_ = tw.Flush()
	if slices.Contains(schemes, commmodel.PN) && len(schemes) > 1 {
		for _, r := range rows {
			if r.Scheme != string(commmodel.PN) {
				continue
			}
			line := r.Model + ": pn's images/s over"
			for _, s := range schemes {
				if s != commmodel.PN {
					line += fmt.Sprintf(" %s %+.1f%%", s, 100*r.Gain[string(s)])
				}
			}
			fmt.Fprintln(e.stdout, line)
		}
	}
	return exitOK
}

// readModelFile reads a network's CSV file.
func readModelFile(name string) (commmodel.Model, error) {
	b, err := readInput(name)
	if err != nil {
		return commmodel.Model{}, err
	}
	return commmodel.ReadModel(name, bytes.NewReader(b))
}
