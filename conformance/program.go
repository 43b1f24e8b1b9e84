package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

// The suites run their NetReduce jobs on the switch program
// SuiteOptions.SwitchProgram names. A program other than NetReduce's may
// hold less (netreduce.Limits: the AllReduce-Switch's 4×128-frame buffer
// takes --window 1..2, --msg-len 1..128, --mtu 256..1024, f32 and i32, and
// no multi-rack trees): each case is drawn as for NetReduce, then fitted
// within the program's limits (fit*), so the papers' settings stay
// covered (the long-message shape's MsgLen becomes the limit, 128 for
// the AllReduce-Switch) and every fault kind and shape is still drawn.
// With NetReduce's own program nothing changes: its cases are the same,
// case for case.

// program is the switch program o names when it is not NetReduce's ("":
// the cases then name none, and are exactly NetReduce's).
func (o SuiteOptions) program() string {
	if o.SwitchProgram == netreduce.ProgramName {
		return ""
	}
	return o.SwitchProgram
}

// limits are the limits of o's program.
func (o SuiteOptions) limits() netreduce.Limits { return netreduce.LimitsOf(o.SwitchProgram) }

// noTrees is why a suite of multi-rack NetReduce rings does not run on
// o's program ("" when it does).
func (o SuiteOptions) noTrees() string {
	if p := o.program(); p != "" && !o.limits().Trees {
		return p + " has no multi-rack trees"
	}
	return ""
}

// fitWindow is a window within max (0: none), spread over 1..max rather
// than piled on max.
func fitWindow(w, max int) int {
	if max > 0 && w > max {
		return 1 + (w-1)%max
	}
	return w
}

// fitMsgLen is a message length within max: the longest the program
// takes, which for the papers' long messages is their setting (128).
func fitMsgLen(l, max int) int {
	if max > 0 && l > max {
		return max
	}
	return l
}

// fitMTU is an MTU within the limits: the drawn one if it fits, else one
// of those that fit, picked by the drawn one.
func fitMTU(m int, l netreduce.Limits) int {
	ok := func(m int) bool { return m >= l.MinMTU && (l.MaxMTU == 0 || m <= l.MaxMTU) }
	if ok(m) {
		return m
	}
	var fit []int
	for _, x := range mtus {
		if ok(x) {
			fit = append(fit, x)
		}
	}
	if len(fit) == 0 {
		return m // the program takes none of inaemu's MTUs: AddRing says so
	}
	return fit[slices.Index(mtus, m)%len(fit)]
}

// fitDType is an element type the program sums: the drawn one, else one
// of its own picked by the drawn one.
func fitDType(d tensor.DType, l netreduce.Limits) tensor.DType {
	if l.Fits(d) || len(l.DTypes) == 0 {
		return d
	}
	return l.DTypes[int(d)%len(l.DTypes)]
}

// fit draws c within the limits of o's program, which it records; with
// NetReduce's it leaves c as it is. A third of the cases (by their seed)
// also take a job seed whose random initial PSNs put a rank's ring
// connection across the 24-bit PSN wrap within the job (wrapSeed).
func (c *aggCase) fit(o SuiteOptions) {
	if o.program() == "" {
		return
	}
	l := o.limits()
	c.Program = o.SwitchProgram
	if l.MaxWorkers > 0 && c.Workers > l.MaxWorkers {
		c.Workers = l.MaxWorkers
		c.Events = slices.DeleteFunc(c.Events, func(e string) bool { return !portsFit([]string{e}, c.Workers) })
	}
	c.Window, c.MsgLen = fitWindow(c.Window, l.MaxWindow), fitMsgLen(c.MsgLen, l.MaxMsgLen)
	c.MTU, c.DType = fitMTU(c.MTU, l), fitDType(c.DType, l)
	if c.Seed%3 == 0 {
		c.Seed = wrapSeed(c.Seed, c.Workers, c.Elems*c.DType.Size()/c.MTU+1)
	}
}

// wrapSeed is the first job seed from seed on whose initial PSNs (drawn
// as the runner draws them, job.InitialPSNs) start some rank's ring
// connection fewer than frames PSNs before the 24-bit wrap, so its
// frames cross 0xFFFFFF → 0 in the switch's buffer; seed itself if none
// is found in a bounded search (a job of few frames, whose chance per
// seed is small).
func wrapSeed(seed uint64, ranks, frames int) uint64 {
	const space = wire.PSNMask + 1
	if ranks*frames < 64 {
		return seed
	}
	for k := uint64(1); k <= 4*space/uint64(ranks*frames); k++ {
		for _, p := range job.InitialPSNs(seed+k, ranks).Send {
			if space-int(p) < frames {
				return seed + k
			}
		}
	}
	return seed
}

// fit draws c's jobs within the limits of o's program (see aggCase.fit):
// the MTU, each job's window, message length and element type; every
// job's, since a scheme's NetReduce rings (pn) take its job's too.
func (c *tenantCase) fit(o SuiteOptions) {
	if o.program() == "" {
		return
	}
	l := o.limits()
	c.MTU = fitMTU(c.MTU, l)
	for _, j := range []*tenantJob{&c.A, &c.B, c.C} {
		if j != nil {
			j.Window, j.MsgLen, j.DType = fitWindow(j.Window, l.MaxWindow), fitMsgLen(j.MsgLen, l.MaxMsgLen), fitDType(j.DType, l)
			if inSwitch(j.Mode) {
				// A run takes a switch program only when one of its
				// jobs aggregates in the switch (inaemu refuses it
				// otherwise).
				c.Program = o.SwitchProgram
			}
		}
	}
}

// inSwitch reports whether a job of mode aggregates in a switch program:
// NetReduce's ring ("" or netreduce) and pn's parallel NetReduce rings.
func inSwitch(mode string) bool { return mode == "" || mode == "netreduce" || mode == "pn" }

// fit draws c within the limits of o's program (see aggCase.fit); one
// without multi-rack trees runs it on the star, without the faults aimed
// at the racks' links.
func (c *schemeCase) fit(o SuiteOptions) {
	if o.program() == "" {
		return
	}
	l := o.limits()
	if inSwitch(c.Mode) {
		c.Program = o.SwitchProgram
	}
	if !l.Trees && c.Racks {
		c.Racks, c.Spines = false, 1
		c.Events = slices.DeleteFunc(c.Events, func(e string) bool { return strings.Contains(e, "link=") })
	}
	c.Window, c.MsgLen = fitWindow(c.Window, l.MaxWindow), fitMsgLen(c.MsgLen, l.MaxMsgLen)
	c.MTU, c.DType = fitMTU(c.MTU, l), fitDType(c.DType, l)
}

// programNote is the note a suite whose cases run no NetReduce job adds
// when o names another program: it ran as it does for NetReduce.
func (o SuiteOptions) programNote() []string {
	if p := o.program(); p != "" {
		return []string{fmt.Sprintf("no aggregation in its cases (one RC connection): switch program %s sees none of their frames", p)}
	}
	return nil
}

// fitted is gen with each case fitted to o's program.
func fitted[C any](gen func(uint64) gopter.Gen, fit func(*C, SuiteOptions), o SuiteOptions) func(uint64) gopter.Gen {
	return func(seed uint64) gopter.Gen {
		return gen(seed).Map(func(c C) C {
			fit(&c, o)
			return c
		})
	}
}

// icrcDrops are the aggregation frames the run's switch programs dropped
// for their ICRC, whichever program aggregated.
func icrcDrops(res *emu.Result) uint64 {
	n, _ := res.Switch.AggregationDrops()
	return n
}
