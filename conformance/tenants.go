package conformance

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/tensor"
)

// tenantJob is one tenant's job: NetReduce (Mode ""), Ring-AllReduce,
// the worker-aggregator baseline (wa: its last rank the aggregator) or a
// scheme over multi-GPU machines (fr, pn, pr, ta: its ranks every GPU of
// its hosts).
type tenantJob struct {
	Mode                  string
	Hosts                 []int // rank r runs on host Hosts[r] (a scheme's machines)
	Window, MsgLen, Elems int
	DType                 tensor.DType
}

// minElems is the fewest elements j's tensor may have: one for
// NetReduce, one per rank for a ring or wa job, one per GPU for a scheme
// (four per machine at most).
func (j tenantJob) minElems() int {
	if j.Mode == "" {
		return 1
	}
	return 4 * len(j.Hosts)
}

// tenantModes are the modes a tenant's job is drawn from, NetReduce and
// Ring-AllReduce more often.
var tenantModes = []string{"", "", "", "ring", "ring", "wa", "fr", "pn", "pr", "ta"}

// tenantCase is two or three jobs of any modes sharing one star switch on
// disjoint hosts (NetReduce §6: disjoint ring IDs and memory), faulted
// only through b: one-shot faults of every kind on b's links, and
// forgeries of each job's frames entering by another job's host ports.
type tenantCase struct {
	Seed   uint64
	Hosts  int // the star's hosts
	GPUs   int // each host's GPUs (0: none), where a scheme's ranks run
	MTU    int
	A, B   tenantJob
	C      *tenantJob // a third job, clean as a, or nil
	Events []string   // in --fault form with host numbers
	// Program is the switch program the NetReduce jobs aggregate on ("":
	// netreduce).
	Program string
}

func (c tenantCase) String() string {
	s := fmt.Sprintf("hosts=%d gpus=%d mtu=%d seed=%d a=%+v b=%+v", c.Hosts, c.GPUs, c.MTU, c.Seed, c.A, c.B)
	if c.C != nil {
		s += fmt.Sprintf(" c=%+v", *c.C)
	}
	if c.Program != "" {
		s += " switch-program=" + c.Program
	}
	return s + fmt.Sprintf(" faults=%q", c.Events)
}

// scenario is the case as a scenario file; without faults, the baseline
// the clean jobs' figures are compared with.
func (c tenantCase) scenario(faults bool) *scenario.Scenario {
	seed, mtu := c.Seed, c.MTU
	sc := &scenario.Scenario{MTU: &mtu, Seed: &seed, Mode: "netreduce", MaxTime: "120s",
		Topology: &topo.Spec{Kind: "star", Hosts: topo.HostsSpec{Count: c.Hosts}},
		Jobs:     []scenario.Job{c.A.job("a", c.GPUs), c.B.job("b", c.GPUs)}, SwitchProgram: c.Program}
	if c.GPUs > 0 {
		sc.Topology.GPUs, sc.Topology.Intra, sc.Topology.Alpha = c.GPUs, "150G", "1us"
	}
	if c.C != nil {
		sc.Jobs = append(sc.Jobs, c.C.job("c", c.GPUs))
	}
	if faults {
		sc.Faults = append([]string(nil), c.Events...)
	}
	return sc
}

// job is j as a scenario's job: ranks on its hosts' NICs or, for a
// scheme, on every GPU of its hosts (gpus each).
func (j tenantJob) job(name string, gpus int) scenario.Job {
	win, l := j.Window, j.MsgLen
	mode := j.Mode
	if mode == "" {
		mode = "netreduce"
	}
	job := scenario.Job{Name: name, Mode: mode, Tensor: strconv.Itoa(j.Elems * j.DType.Size()), Window: &win, MsgLen: &l, DType: j.DType.String()}
	for _, h := range j.Hosts {
		if !emu.IsGPUScheme(emu.Mode(j.Mode)) {
			job.Ranks = append(job.Ranks, fmt.Sprintf("h%d", h))
			continue
		}
		for g := range gpus {
			job.Ranks = append(job.Ranks, topo.GPUName(fmt.Sprintf("h%d", h), g))
		}
	}
	return job
}

// genTenantJob draws a job of 2-5 ranks on hosts: the papers' long
// messages (MsgLen 128-255, 170 often) or short ones (1-32), window 1-4,
// 2-12 messages, any dtype.
func genTenantJob(r interface{ Intn(int) int }, hosts []int, mtu int) tenantJob {
	j := tenantJob{Hosts: hosts, Window: 1 + r.Intn(4), DType: tensor.DType(r.Intn(3))}
	if r.Intn(2) == 0 {
		j.MsgLen = 128 + r.Intn(128)
		if r.Intn(2) == 0 {
			j.MsgLen = 170
		}
	} else {
		j.MsgLen = 1 + r.Intn(32)
	}
	per := (j.MsgLen*mtu - 8) / j.DType.Size()
	j.Elems = (1+r.Intn(11))*per + 1 + r.Intn(per)
	return j
}

// maxOtherElems bounds the tensors of jobs other than NetReduce, whose
// every byte crosses the network 2(n-1)/n times or more.
const maxOtherElems = 200_000

// tenantCaseGen draws two or three jobs, each NetReduce, ring, wa or a
// GPU scheme (tenantModes), as genTenantJob draws them (at most
// maxOtherElems elements but for NetReduce; a wa job has 2-4 workers and
// its aggregator, a scheme 2-3 machines of the hosts' 2 or 4 GPUs), on a
// star of their hosts and up to two more in random places; up to six
// one-shot faults of every kind (genFaultEvent) on b's links; and up to
// three forgeries of one job's frame by a host of another. The schedule
// is bounded, so every job must finish exact.
func tenantCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := tenantCase{Seed: seed, MTU: mtus[r.Intn(len(mtus))]}
		n := 2 + r.Intn(2)
		modes := make([]string, n)
		sizes := make([]int, n)
		for i := range modes {
			modes[i] = tenantModes[r.Intn(len(tenantModes))]
			switch {
			case modes[i] == "wa":
				sizes[i] = 3 + r.Intn(3)
			case emu.IsGPUScheme(emu.Mode(modes[i])):
				sizes[i] = 2 + r.Intn(2)
				c.GPUs = 2 << r.Intn(2)
			default:
				sizes[i] = 2 + r.Intn(4)
			}
			c.Hosts += sizes[i]
		}
		c.Hosts += r.Intn(3)
		perm := r.Perm(c.Hosts)
		jobs := make([]tenantJob, n)
		for i := range jobs {
			jobs[i] = genTenantJob(r, perm[:sizes[i]], c.MTU)
			perm = perm[sizes[i]:]
			jobs[i].Mode = modes[i]
			if modes[i] != "" {
				jobs[i].Elems = min(jobs[i].Elems, maxOtherElems)
			}
		}
		c.A, c.B = jobs[0], jobs[1]
		if n == 3 {
			c.C = &jobs[2]
		}
		frames := func(j tenantJob) int { return j.Elems*j.DType.Size()/c.MTU + 1 }
		timeout := int(emu.DefaultConfig().Timeout)
		for range r.Intn(maxBoundedEvents + 1) {
			c.Events = append(c.Events, onHostsOf(genFaultEvent(r, len(c.B.Hosts), frames(c.B), timeout, faultKinds), c.B.Hosts))
		}
		for range r.Intn(4) {
			// Job v's frame forged by a host of job f, entering by f's port.
			if vi, fi := r.Intn(n), r.Intn(n); vi != fi {
				v, f := jobs[vi], jobs[fi]
				c.Events = append(c.Events, fmt.Sprintf("spoof=%d port=%d dir=in class=data nth=%d",
					f.Hosts[r.Intn(len(f.Hosts))], v.Hosts[r.Intn(len(v.Hosts))], 1+r.Intn(frames(v))))
			}
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// onHostsOf rewrites an event's rank numbers (port=R, spoof=R) as the
// hosts of a job whose rank r runs on hosts[r].
func onHostsOf(ev string, hosts []int) string {
	f := strings.Fields(ev)
	for i, tok := range f {
		for _, key := range []string{"port=", "spoof="} {
			if v, ok := strings.CutPrefix(tok, key); ok {
				if r, err := strconv.Atoi(v); err == nil && r < len(hosts) {
					f[i] = key + strconv.Itoa(hosts[r])
				}
			}
		}
	}
	return strings.Join(f, " ")
}

// isolationSlack is how far a clean job's virtual time may move when b is
// faulted.
const isolationSlack = 0.005

// runTenantCase runs the case without and with its faults: "" when every
// job is exact in both (the schedule is bounded), every forgery was
// dropped at the host port it entered by (port security) and nothing else
// was taken for one but corrupted frames (forgeryDrops), and each job but
// b (and b's stages) has the same counters and a virtual time within
// isolationSlack in both; else why not.
func runTenantCase(c tenantCase) aggOutcome {
	var runs [2]*emu.Result
	for i, faults := range []bool{false, true} {
		cfg := emu.DefaultConfig()
		if err := c.scenario(faults).Apply(&cfg); err != nil {
			return aggOutcome{fail: "setup", detail: err.Error()}
		}
		res, err := emu.Run(cfg)
		var je *emu.JobError
		switch {
		case errors.As(err, &je):
			return aggOutcome{fail: "transport", detail: fmt.Sprintf("faults=%v: a bounded schedule broke a job: %s", faults, je.Msg)}
		case err != nil:
			return aggOutcome{fail: "setup", detail: err.Error()}
		}
		for _, j := range res.Jobs {
			if !j.Exact {
				m := j.Mismatch
				return aggOutcome{fail: "wrong", detail: fmt.Sprintf("faults=%v: WRONG RESULT in job %s (%s): rank %d element %d is %s, want %s", faults, j.Name, j.Mode, m.Rank, m.Element, m.Got, m.Want)}
			}
		}
		runs[i] = res
	}
	if d := forgeryDrops(runs[1], false); d != "" {
		return aggOutcome{fail: "security", detail: "every job exact, but " + d}
	}
	for k, a0 := range runs[0].Jobs {
		a := runs[1].Jobs[k]
		if a.Name == "b" || a.PartOf == "b" {
			continue
		}
		type counter struct {
			name      string
			was, with uint64
		}
		for _, n := range []counter{{"frames sent", a0.FramesSent, a.FramesSent}, {"retransmissions", a0.Retransmissions, a.Retransmissions},
			{"NAKs", a0.NAKs, a.NAKs}, {"timeouts", a0.Timeouts, a.Timeouts}} {
			if n.was != n.with {
				return aggOutcome{fail: "interference", detail: fmt.Sprintf("b's faults changed %s's %s: %d without them, %d with", a.Name, n.name, n.was, n.with)}
			}
		}
		if d := float64(a.VirtualNS)/float64(a0.VirtualNS) - 1; d > isolationSlack || d < -isolationSlack {
			return aggOutcome{fail: "interference", detail: fmt.Sprintf("b's faults moved %s's virtual time by %+.2f %%: %v without them, %v with",
				a.Name, 100*d, time.Duration(a0.VirtualNS), time.Duration(a.VirtualNS))}
		}
	}
	return aggOutcome{}
}

// TenantSuite checks, for generated runs of two or three jobs of any
// modes sharing a switch on disjoint hosts, that faults and forgeries
// reaching the switch through one tenant change nothing of the others:
// their results, counters and virtual completion times (within 0.5 %) are
// those of the same run without them; that every job ends exact; and that
// port security dropped every forgery.
func TenantSuite(o SuiteOptions) []PropertyResult {
	if o.DUT != nil {
		return []PropertyResult{skipped("tenants/isolation", "needs several jobs on one switch and the emulator's per-job counters and virtual times")}
	}
	return exactSuite(o, "tenants", "tenants/isolation", fitted(tenantCaseGen, (*tenantCase).fit, o), runTenantCase, shrinkTenant,
		func(c tenantCase) *scenario.Scenario { return c.scenario(true) },
		// Interference takes the run with and without b's faults, a
		// forgery dropped by the wrong check the run's counters.
		func(out aggOutcome) bool { return out.fail != "interference" && out.fail != "security" })
}

// jobShrinks are the steps that make a job smaller: half the elements,
// half the message length, a smaller window; each reports whether the
// job is still valid.
var jobShrinks = []func(j *tenantJob) bool{
	func(j *tenantJob) bool { j.Elems /= 2; return j.Elems >= j.minElems() },
	func(j *tenantJob) bool { j.MsgLen /= 2; return j.MsgLen >= 1 },
	func(j *tenantJob) bool { j.Window--; return j.Window >= 1 },
}

// shrinkTenant makes a failing case smaller while it fails the same way:
// fewer faults, no third job, fewer elements, shorter messages, smaller
// windows.
func shrinkTenant(c tenantCase, out aggOutcome) (tenantCase, aggOutcome) {
	shrinkCase(&c, 200, failsAs(runTenantCase, &out), func(try func(tenantCase) bool) bool {
		changed := dropEachEvent(c.Events, func(fewer []string) bool {
			d := c
			d.Events = fewer
			return try(d)
		})
		if c.C != nil {
			d := c
			d.C = nil
			changed = try(d) || changed
		}
		for _, job := range []func(*tenantCase) *tenantJob{func(c *tenantCase) *tenantJob { return &c.A }, func(c *tenantCase) *tenantJob { return &c.B },
			func(c *tenantCase) *tenantJob { return c.C }} {
			for _, shrink := range jobShrinks {
				d := c
				if d.C != nil {
					cc := *d.C
					d.C = &cc
				}
				if j := job(&d); j != nil && shrink(j) && try(d) {
					changed = true
				}
			}
		}
		return changed
	})
	return c, out
}
