package job

import (
	"fmt"
	"github.com/inaemu/inaemu/emu/netreduce"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
)

// validateRun is the part of Validate that looks at the run as a whole,
// after the range checks of each job's settings: durations within
// faults.MaxDuration (a Config built in code, not parsed, may hold
// anything), faults that can match something in this run, and the memory
// the jobs need against the memory there is (see checkMemory).
func (c *Config) validateRun(jobs []JobConfig) error {
	bad := func(f string, a ...any) error { return &ConfigError{fmt.Errorf(f, a...)} }
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--max-time", c.MaxVirtual}, {"--latency", c.Link.Latency}, {"netem delay", c.Netem.Delay}, {"netem jitter", c.Netem.Jitter}} {
		if d.v < 0 || d.v > faults.MaxDuration {
			return bad("%s %v: want 0..%v", d.name, d.v, faults.MaxDuration)
		}
	}
	if err := c.Congestion.check(); err != nil {
		return &ConfigError{err}
	}
	for _, j := range jobs {
		if j.Start > faults.MaxDuration {
			return bad("job %s: start %v: want 0..%v", j.Name, j.Start, faults.MaxDuration)
		}
		if c.MaxVirtual > 0 && j.Start >= c.MaxVirtual {
			return bad("job %s: start %v is not before --max-time %v", j.Name, j.Start, c.MaxVirtual)
		}
	}
	t, err := c.topology()
	if err != nil {
		return &ConfigError{err}
	}
	for i := range c.Events {
		if err := c.checkEvent(&c.Events[i], t, jobs); err != nil {
			return &ConfigError{err}
		}
	}
	if err := c.checkMemory(jobs); err != nil {
		return &ConfigError{err}
	}
	return nil
}

// checkEvent refuses a fault that names a link, a port or a QP the run
// does not have: it would never fire, and the run would pass for a run
// with the fault.
func (c *Config) checkEvent(ev *faults.Event, t *topo.Topology, jobs []JobConfig) error {
	spec := ev.Spec
	if spec == "" {
		spec = ev.Action.String()
	}
	hosts := len(t.Hosts())
	qpns := []string{}
	qpOK, inSwitch := ev.QP < 0, false
	for j, jc := range jobs {
		if jc.GroupJob() {
			continue // a scheme job: its inter-machine jobs have the QPs
		}
		var mine []string
		seen := map[uint32]bool{}
		for _, q := range jobQPNs(j, len(jobs), jc.Ranks) {
			for _, n := range []uint32{q.send, q.recv} {
				if n != 0 && !seen[n] {
					seen[n] = true
					qpOK = qpOK || ev.QP == int64(n)
					mine = append(mine, fmt.Sprintf("%#x", n))
				}
			}
		}
		if len(mine) > 0 {
			qpns = append(qpns, fmt.Sprintf("%s (job %s)", strings.Join(mine, ", "), jc.Name))
		}
		inSwitch = inSwitch || Lookup(jc.Cfg.Mode).InSwitch
	}
	portKey := "the job's switch ports are 0..%d (port R faces rank R)"
	if c.Topology != nil {
		portKey = "port=R names host hR's first link: the topology's hosts are 0..%d"
	}
	if ev.Link != "" {
		if _, _, ok := t.Direction(ev.Link); !ok {
			names := t.DirectionNames()
			if len(names) > 8 {
				names = append(names[:8:8], "...")
			}
			return fmt.Errorf("--fault %q: link=%s: the topology has no such link direction (%s; inaemu topo show lists them)", spec, ev.Link, strings.Join(names, ", "))
		}
	}
	if ev.Action == faults.ActSpoof && c.OpenPorts && ev.Port >= 0 && ev.Port < hosts {
		if jc := forgedJob(ev, t.Hosts()[ev.Port].Name, jobs); jc != nil {
			return fmt.Errorf("--fault %q: with port security off, a forgery of job %s's frames (%s mode) reaches its receiver: no switch program checks them and a forged WRITE is simply written (keep port security on, or aim the spoof at a NetReduce job's QP with qp=)", spec, jc.Name, jc.Cfg.Mode)
		}
		if ev.From >= 0 && ev.From < hosts {
			if name, sw := uncheckedEntry(ev, t, jobs); name != "" {
				return fmt.Errorf("--fault %q: with port security off, a forgery of job %s's frames entering %s, a switch that holds none of its ranks, passes there as ordinary traffic and reaches its receiver (keep port security on, or forge from a host under one of the job's switches)", spec, name, sw)
			}
		}
	}
	if ev.Action == faults.ActSpoof && ev.From >= 0 && ev.From < hosts {
		// The forgery enters by host From's first link. A switch at its end
		// drops it, whatever job it forges (port security: a bound host
		// port takes its own host's frames only); a host there would take
		// it, as a NIC takes what its link brings.
		h := t.Hosts()[ev.From]
		if l := &t.Links[h.Links[0]]; !isSwitch(t, l.Other(h.Name)) {
			return fmt.Errorf("--fault %q: spoof=%d: %s's first link goes to %s, not to a switch: a forgery must enter a switch's port", spec, ev.From, h.Name, l.Other(h.Name))
		}
	}
	if ev.Port >= 0 && ev.Port < hosts && ev.Link == "" {
		// port=R is host R's first link to its switch; a first link to
		// another host has no switch side for dir= to name.
		h := t.Hosts()[ev.Port]
		if l := &t.Links[h.Links[0]]; !isSwitch(t, l.Other(h.Name)) {
			return fmt.Errorf("--fault %q: port=%d: %s's first link goes to %s, not to a switch; name a link direction instead (link=%s)", spec, ev.Port, h.Name, l.Other(h.Name), l.From(h.Name))
		}
	}
	switch {
	case ev.Port >= hosts:
		return fmt.Errorf("--fault %q: port=%d: "+portKey, spec, ev.Port, hosts-1)
	case ev.Action == faults.ActSpoof && ev.From >= hosts:
		return fmt.Errorf("--fault %q: spoof=%d: "+portKey, spec, ev.From, hosts-1)
	case ev.Action == faults.ActDelay && (ev.Delay <= 0 || ev.Delay > faults.MaxDuration):
		return fmt.Errorf("--fault %q: delay %v: want more than 0 and at most %v", spec, ev.Delay, faults.MaxDuration)
	}
	if inSwitch && ev.QP >= 0 && netreduce.IsTreeQPN(uint32(ev.QP)) {
		qpOK = true // a multi-rack ring's switch-to-switch frames
	}
	if !qpOK {
		if len(jobs) == 1 {
			return fmt.Errorf("--fault %q: qp=%#x: the job's QPs are %#x (every host's send QP: ACKs and NAKs arrive there) and %#x (its receive QP: requests arrive there)",
				spec, ev.QP, SendQPN, RecvQPN)
		}
		return fmt.Errorf("--fault %q: qp=%#x: the jobs' QPs are %s (send QP, receive QP)", spec, ev.QP, strings.Join(qpns, ", "))
	}
	return nil
}

func isSwitch(t *topo.Topology, name string) bool {
	n, ok := t.Node(name)
	return ok && n.Kind == topo.KindSwitch
}

// forgedJob is a job, other than a NetReduce one, whose frames a spoof
// event copies: a job with a rank on host (its frames cross the host's
// link into the switch) and, if the event names a QP, that QP; nil if none.
func forgedJob(ev *faults.Event, host string, jobs []JobConfig) *JobConfig {
	for j := range jobs {
		jc := &jobs[j]
		if jc.GroupJob() || Lookup(jc.Cfg.Mode).InSwitch {
			continue // a scheme's inter-machine jobs are in jobs themselves
		}
		if hasRankOn(jc.Ranks, host) && (ev.QP < 0 || jobHasQP(j, len(jobs), jc.Ranks, ev.QP)) {
			return jc
		}
	}
	return nil
}

// uncheckedEntry is a NetReduce job whose frames a spoof event copies (a
// rank on the victim host, the QP if named) and the switch the forgery
// enters by (host From's first link), when that switch holds none of the
// job's ranks: its accelerator has no connection of the ring to bind, so
// the forgery is forwarded like any frame. "" if there is none.
func uncheckedEntry(ev *faults.Event, t *topo.Topology, jobs []JobConfig) (job, sw string) {
	hs := t.Hosts()
	victim, from := hs[ev.Port].Name, hs[ev.From]
	entry := t.Links[from.Links[0]].Other(from.Name)
	for j, jc := range jobs {
		if jc.GroupJob() || !Lookup(jc.Cfg.Mode).InSwitch || !hasRankOn(jc.Ranks, victim) {
			continue
		}
		if ev.QP >= 0 && !jobHasQP(j, len(jobs), jc.Ranks, ev.QP) {
			continue
		}
		held := false
		for _, r := range jc.Ranks {
			h, _, _ := strings.Cut(r, ":")
			if n, ok := t.Node(h); ok {
				for _, l := range n.Links {
					held = held || t.Links[l].Other(h) == entry
				}
			}
		}
		if !held {
			return jc.Name, entry
		}
	}
	return "", ""
}

// hasRankOn: one of ranks runs on host.
func hasRankOn(ranks []string, host string) bool {
	for _, r := range ranks {
		if h, _, _ := strings.Cut(r, ":"); h == host {
			return true
		}
	}
	return false
}

// jobHasQP: qp is one of job j's QPNs.
func jobHasQP(j, jobs int, ranks []string, qp int64) bool {
	for _, q := range jobQPNs(j, jobs, ranks) {
		if qp == int64(q.send) || qp == int64(q.recv) {
			return true
		}
	}
	return false
}
