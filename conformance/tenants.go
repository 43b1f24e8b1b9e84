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
	"github.com/inaemu/inaemu/emu/tensor"
)

// tenantJob is one tenant's NetReduce job.
type tenantJob struct {
	Hosts                 []int // rank r runs on host Hosts[r]
	Window, MsgLen, Elems int
	DType                 tensor.DType
}

// tenantCase is two NetReduce jobs sharing one star switch on disjoint
// hosts (NetReduce §6: disjoint ring IDs and memory), a faulted only
// through b: one-shot faults of every kind on b's links, and forgeries
// across the tenants — b's frames entering by a's ports, a's frames forged
// by b's hosts.
type tenantCase struct {
	Seed   uint64
	Hosts  int // the star's hosts
	MTU    int
	A, B   tenantJob
	Events []string // in --fault form with host numbers
}

func (c tenantCase) String() string {
	return fmt.Sprintf("hosts=%d mtu=%d seed=%d a=%+v b=%+v faults=%q", c.Hosts, c.MTU, c.Seed, c.A, c.B, c.Events)
}

// scenario is the case as a scenario file; without faults, the baseline
// a's figures are compared with.
func (c tenantCase) scenario(faults bool) *scenario.Scenario {
	seed, mtu, w := c.Seed, c.MTU, c.Hosts
	// Without a topology the network is the star of Workers hosts.
	sc := &scenario.Scenario{Workers: &w, MTU: &mtu, Seed: &seed, Mode: "netreduce", MaxTime: "120s",
		Jobs: []scenario.Job{c.A.job("a"), c.B.job("b")}}
	if faults {
		sc.Faults = append([]string(nil), c.Events...)
	}
	return sc
}

func (j tenantJob) job(name string) scenario.Job {
	win, l := j.Window, j.MsgLen
	job := scenario.Job{Name: name, Mode: "netreduce", Tensor: strconv.Itoa(j.Elems * j.DType.Size()), Window: &win, MsgLen: &l, DType: j.DType.String()}
	for _, h := range j.Hosts {
		job.Ranks = append(job.Ranks, fmt.Sprintf("h%d", h))
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

// tenantCaseGen draws two jobs on a star of 4-12 hosts in random places,
// up to six one-shot faults of every kind (genFaultEvent) on b's links,
// and up to two forgeries across the tenants. The schedule is bounded, so
// both jobs must finish exact.
func tenantCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		na, nb := 2+r.Intn(4), 2+r.Intn(4)
		c := tenantCase{Seed: seed, Hosts: na + nb + r.Intn(3), MTU: mtus[r.Intn(len(mtus))]}
		perm := r.Perm(c.Hosts)
		c.A = genTenantJob(r, perm[:na], c.MTU)
		c.B = genTenantJob(r, perm[na:na+nb], c.MTU)
		framesB := c.B.Elems*c.B.DType.Size()/c.MTU + 1
		framesA := c.A.Elems*c.A.DType.Size()/c.MTU + 1
		timeout := int(emu.DefaultConfig().Timeout)
		for range r.Intn(maxBoundedEvents + 1) {
			c.Events = append(c.Events, onHostsOf(genFaultEvent(r, nb, framesB, timeout, faultKinds), c.B.Hosts))
		}
		for range r.Intn(3) {
			a, b := c.A.Hosts[r.Intn(na)], c.B.Hosts[r.Intn(nb)]
			if r.Intn(2) == 0 { // b's frame forged into a's port
				c.Events = append(c.Events, fmt.Sprintf("spoof=%d port=%d dir=in class=data nth=%d", a, b, 1+r.Intn(framesB)))
			} else { // b's host forges a's frame
				c.Events = append(c.Events, fmt.Sprintf("spoof=%d port=%d dir=in class=data nth=%d", b, a, 1+r.Intn(framesA)))
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

// isolationSlack is how far a's virtual time may move when b is faulted.
const isolationSlack = 0.005

// runTenantCase runs the case without and with b's faults: "" when a is
// exact in both with the same counters and virtual times within
// isolationSlack, and b is exact (its schedule is bounded); else why not.
func runTenantCase(c tenantCase) aggOutcome {
	var jobs [2][]emu.JobResult
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
				return aggOutcome{fail: "wrong", detail: fmt.Sprintf("faults=%v: WRONG RESULT in job %s: rank %d element %d is %s, want %s", faults, j.Name, m.Rank, m.Element, m.Got, m.Want)}
			}
		}
		jobs[i] = res.Jobs
	}
	a0, a := jobs[0][0], jobs[1][0]
	type counter struct {
		name      string
		was, with uint64
	}
	for _, k := range []counter{{"frames sent", a0.FramesSent, a.FramesSent}, {"retransmissions", a0.Retransmissions, a.Retransmissions},
		{"NAKs", a0.NAKs, a.NAKs}, {"timeouts", a0.Timeouts, a.Timeouts}} {
		if k.was != k.with {
			return aggOutcome{fail: "interference", detail: fmt.Sprintf("b's faults changed a's %s: %d without them, %d with", k.name, k.was, k.with)}
		}
	}
	if d := float64(a.VirtualNS)/float64(a0.VirtualNS) - 1; d > isolationSlack || d < -isolationSlack {
		return aggOutcome{fail: "interference", detail: fmt.Sprintf("b's faults moved a's virtual time by %+.2f %%: %v without them, %v with",
			100*d, time.Duration(a0.VirtualNS), time.Duration(a.VirtualNS))}
	}
	return aggOutcome{}
}

// TenantSuite checks, for generated pairs of NetReduce jobs sharing a
// switch on disjoint hosts, that faults and forgeries reaching the switch
// through one tenant change nothing of the other: its result, counters
// and virtual completion time (within 0.5 %) are those of the same run
// without them, and both jobs end exact.
func TenantSuite(o SuiteOptions) []PropertyResult {
	if o.DUT != nil {
		return []PropertyResult{skipped("tenants/isolation", "needs several jobs on one switch and the emulator's per-job counters and virtual times")}
	}
	return exactSuite(o, "tenants", "tenants/isolation", tenantCaseGen, runTenantCase, shrinkTenant,
		func(c tenantCase) *scenario.Scenario { return c.scenario(true) },
		func(out aggOutcome) bool { return out.fail != "interference" }) // that takes the run with and without b's faults
}

// jobShrinks are the steps that make a job smaller: half the elements,
// half the message length, a smaller window; each reports whether the
// job is still valid.
var jobShrinks = []func(j *tenantJob) bool{
	func(j *tenantJob) bool { j.Elems /= 2; return j.Elems >= 1 },
	func(j *tenantJob) bool { j.MsgLen /= 2; return j.MsgLen >= 1 },
	func(j *tenantJob) bool { j.Window--; return j.Window >= 1 },
}

// shrinkTenant makes a failing case smaller while it fails the same way:
// fewer faults, fewer elements, shorter messages, smaller windows.
func shrinkTenant(c tenantCase, out aggOutcome) (tenantCase, aggOutcome) {
	shrinkCase(&c, 200, failsAs(runTenantCase, &out), func(try func(tenantCase) bool) bool {
		changed := dropEachEvent(c.Events, func(fewer []string) bool {
			d := c
			d.Events = fewer
			return try(d)
		})
		for _, job := range []func(*tenantCase) *tenantJob{func(c *tenantCase) *tenantJob { return &c.A }, func(c *tenantCase) *tenantJob { return &c.B }} {
			for _, shrink := range jobShrinks {
				d := c
				j := job(&d)
				if shrink(j) && try(d) {
					changed = true
				}
			}
		}
		return changed
	})
	return c, out
}
