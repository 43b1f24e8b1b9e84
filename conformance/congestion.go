package conformance

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/nic/dcqcn"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// The congestion suite (issue 36): generated runs of traffic jobs (and
// now and then a collective beside them) through switches with a shared
// buffer, PFC, priority queues, RED/ECN and DCQCN, under faults of every
// kind, pauses and CNPs included. What must hold is in runCongCase.

// congNet is a case's network: the star of Hosts hosts, or a spine-leaf
// of Leaves leaves × PerLeaf hosts under Spines spines (hosts h0.. leaf
// by leaf), every host link at Gbps, the uplinks at Uplink Gb/s.
type congNet struct {
	Star                    bool
	Hosts                   int // the star's
	Leaves, PerLeaf, Spines int
	Gbps, Uplink            int
}

func (n congNet) hosts() int {
	if n.Star {
		return n.Hosts
	}
	return n.Leaves * n.PerLeaf
}

func (n congNet) String() string {
	if n.Star {
		return fmt.Sprintf("star %d×%dG", n.Hosts, n.Gbps)
	}
	return fmt.Sprintf("spine-leaf %d×%d spines=%d %dG uplink=%dG", n.Leaves, n.PerLeaf, n.Spines, n.Gbps, n.Uplink)
}

// hostLink is the name of host h's link direction into the network (in)
// or out of it.
func (n congNet) hostLink(h int, in bool) string {
	if n.Star {
		if in {
			return fmt.Sprintf("port%d-in", h)
		}
		return fmt.Sprintf("port%d-out", h)
	}
	leaf := fmt.Sprintf("leaf%d", h/n.PerLeaf)
	if in {
		return fmt.Sprintf("h%d-%s", h, leaf)
	}
	return fmt.Sprintf("%s-h%d", leaf, h)
}

// trunks are the switch-to-switch link directions.
func (n congNet) trunks() []string {
	var t []string
	for l := range n.Leaves {
		for s := range n.Spines {
			t = append(t, fmt.Sprintf("leaf%d-spine%d", l, s), fmt.Sprintf("spine%d-leaf%d", s, l))
		}
	}
	if n.Star {
		return nil
	}
	return t
}

// ports is the most ports a switch has, and the fastest link's rate.
func (n congNet) ports() (int, float64) {
	if n.Star {
		return n.Hosts, float64(n.Gbps) * 1e9
	}
	return max(n.PerLeaf+n.Spines, n.Leaves), float64(max(n.Gbps, n.Uplink)) * 1e9
}

// congFlow is a listed flow of a traffic job, its ends as indexes into
// the job's hosts.
type congFlow struct {
	From, To int
	Bytes    int
	Start    time.Duration
	RateG    int // pacing in Gb/s, 0: none
}

// congJob is one job: a traffic job of a pattern (incast to its last
// host, all-to-all, permutation) or of listed flows, or a ring or
// netreduce allreduce, on hosts of the network, with its own DSCP,
// congestion control and start.
type congJob struct {
	Mode    string // traffic, ring, netreduce
	Hosts   []int
	Pattern string // a traffic job's: incast, all-to-all, permutation; "" with Flows
	Bytes   int    // each pattern flow's, or the collective's tensor
	RateG   int    // the pattern flows' pacing in Gb/s, 0: none
	Flows   []congFlow
	MsgLen  int
	Start   time.Duration
	DSCP    int
	CC      string // none, dcqcn
}

func (j congJob) String() string {
	s := fmt.Sprintf("%s%v dscp=%d cc=%s", j.Mode, j.Hosts, j.DSCP, j.CC)
	switch {
	case j.Mode != "traffic":
		s += fmt.Sprintf(" tensor=%d", j.Bytes)
	case j.Pattern != "":
		s += fmt.Sprintf(" %s bytes=%d", j.Pattern, j.Bytes)
		if j.RateG > 0 {
			s += fmt.Sprintf(" rate=%dG", j.RateG)
		}
	default:
		var fs []string
		for _, f := range j.Flows {
			x := fmt.Sprintf("h%d→h%d:%d", j.Hosts[f.From], j.Hosts[f.To], f.Bytes)
			if f.Start > 0 {
				x += "@" + nsText(f.Start)
			}
			if f.RateG > 0 {
				x += fmt.Sprintf("/%dG", f.RateG)
			}
			fs = append(fs, x)
		}
		s += " flows=[" + strings.Join(fs, " ") + "]"
	}
	if j.Start > 0 {
		s += " start=" + nsText(j.Start)
	}
	return s
}

// flowBytes is what the job moves.
func (j congJob) flowBytes() int {
	n := len(j.Hosts)
	switch {
	case j.Mode != "traffic":
		return j.Bytes * n
	case j.Pattern == "incast" || j.Pattern == "permutation":
		return j.Bytes * max(n-1, 1)
	case j.Pattern == "all-to-all":
		return j.Bytes * n * (n - 1)
	}
	s := 0
	for _, f := range j.Flows {
		s += f.Bytes
	}
	return s
}

// congCase is one generated run: the network, its jobs, the switches'
// buffer, PFC and queue settings, and the faults. Empty strings are the
// defaults (the buffer's 12 MB, dynamic XOFF, α 1, headroom from each
// port's link, strict priority, no RED).
type congCase struct {
	Seed     uint64
	Net      congNet
	MTU      int
	Timeout  int
	Jobs     []congJob
	PFC      string // off, on, or priorities
	Buffer   string
	XOFF     string
	Alpha    string
	Headroom string
	Sched    string
	RED      string
	Netem    string
	Events   []string
}

func (c congCase) String() string {
	var js []string
	for _, j := range c.Jobs {
		js = append(js, "{"+j.String()+"}")
	}
	s := fmt.Sprintf("%s mtu=%d timeout=%d pfc=%s", c.Net, c.MTU, c.Timeout, c.PFC)
	for _, kv := range [][2]string{{"buffer", c.Buffer}, {"xoff", c.XOFF}, {"alpha", c.Alpha}, {"headroom", c.Headroom}, {"sched", c.Sched}, {"red", c.RED}} {
		if kv[1] != "" {
			s += " " + kv[0] + "=" + kv[1]
		}
	}
	s += " jobs=" + strings.Join(js, " ")
	if c.Netem != "" {
		s += fmt.Sprintf(" netem=%q", c.Netem)
	}
	return s + fmt.Sprintf(" faults=%q seed=%d", c.Events, c.Seed)
}

// congMaxTime is a case's budget of virtual time: the slowest cases that
// hold (a lost resume at 10 Gb/s waits out a 3.4 ms pause; a long delay
// or a lost last packet waits out an ACK timeout of up to 67 ms, and a
// retry may wait out another) end in well under a second.
const congMaxTime = 2 * time.Second

func (c congCase) scenario() *scenario.Scenario {
	seed, mtu, to := c.Seed, c.MTU, c.Timeout
	sc := &scenario.Scenario{Seed: &seed, MTU: &mtu, Timeout: &to, Link: fmt.Sprintf("%dG", c.Net.Gbps), MaxTime: congMaxTime.String(),
		PFC: c.PFC, SwitchBuffer: c.Buffer, PFCXoff: c.XOFF, PFCAlpha: c.Alpha, PFCHeadroom: c.Headroom, Sched: c.Sched, RED: c.RED,
		Netem: c.Netem, Faults: slices.Clone(c.Events)}
	if c.Net.Star {
		h := c.Net.Hosts
		sc.Workers = &h
	} else {
		sc.Topology = &topo.Spec{Kind: "spine-leaf", Leaves: c.Net.Leaves, HostsPerLeaf: c.Net.PerLeaf, Spines: c.Net.Spines, Uplink: fmt.Sprintf("%dG", c.Net.Uplink)}
	}
	for i, j := range c.Jobs {
		dscp, ml := j.DSCP, j.MsgLen
		sj := scenario.Job{Name: fmt.Sprintf("j%d", i), Mode: j.Mode, Tensor: strconv.Itoa(j.Bytes), DSCP: &dscp, CC: j.CC, MsgLen: &ml}
		if j.Start > 0 {
			sj.Start = nsText(j.Start)
		}
		for _, h := range j.Hosts {
			sj.Ranks = append(sj.Ranks, fmt.Sprintf("h%d", h))
		}
		if j.Mode == "traffic" {
			if j.Pattern != "" {
				sj.Traffic = j.Pattern
				if j.RateG > 0 {
					sj.Rate = fmt.Sprintf("%dG", j.RateG)
				}
			} else {
				sj.Tensor = ""
				for _, f := range j.Flows {
					sf := scenario.Flow{From: sj.Ranks[f.From], To: sj.Ranks[f.To], Bytes: strconv.Itoa(f.Bytes)}
					if f.Start > 0 {
						sf.Start = nsText(f.Start)
					}
					if f.RateG > 0 {
						sf.Rate = fmt.Sprintf("%dG", f.RateG)
					}
					sj.Flows = append(sj.Flows, sf)
				}
			}
		}
		sc.Jobs = append(sc.Jobs, sj)
	}
	return sc
}

// lossless is the priorities PFC protects in the case (as the run
// resolves --pfc: on is every job's DSCP>>3).
func (c congCase) lossless() uint8 {
	var m uint8
	switch c.PFC {
	case "", "off":
	case "on":
		for _, j := range c.Jobs {
			m |= 1 << (j.DSCP >> 3)
		}
	default:
		for _, f := range strings.Split(c.PFC, ",") {
			p, _ := strconv.Atoi(f)
			m |= 1 << p
		}
	}
	return m
}

// faulty reports whether anything in the case touches frames.
func (c congCase) faulty() bool { return c.Netem != "" || len(c.Events) > 0 }

// congDSCPs are the codepoints jobs are drawn from: 0 (best effort), the
// class selectors CS1-CS5 and AF31 (26, RoCE's usual codepoint on NVIDIA
// NICs, priority 3), AF41 (34) and EF (46); CNPs go at 48 (priority 6).
// Several map to one priority, and DSCP>>3 differs from DSCP mod 8 for
// most, so a component that maps a codepoint differently from
// switching.Priority puts its frames in the wrong class.
var congDSCPs = []int{0, 8, 16, 24, 26, 26, 34, 40, 46}

// congRates are the host links' rates, in Gb/s.
var congRates = []int{10, 25, 40, 100}

// congPatterns are a traffic job's patterns; "" lists its flows.
var congPatterns = []string{"incast", "incast", "all-to-all", "permutation", ""}

// congMaxBytes bounds what a case's jobs move in all, so a case takes a
// few milliseconds of virtual time and tens of milliseconds of wall time.
const congMaxBytes = 1 << 20

// congCaseGen draws a case: a star of 2-8 hosts or a spine-leaf of 2-4
// leaves × 1-2 hosts under 1-2 spines (uplinks as fast as a host link,
// oversubscribed, or as fast as the leaf's hosts together), every host
// link at 10, 25, 40 or 100 Gb/s; one or two traffic jobs (incast,
// all-to-all, permutation, or listed flows with start offsets and
// pacing rates; the second on any hosts, sharing NICs with the first)
// and sometimes a ring or netreduce allreduce on hosts of its own; each
// job its DSCP and, half of the time, DCQCN; PFC off, on (every job's
// priority lossless) or on a list of priorities; the buffer the default
// or tight (a little above the headroom every lossless ingress
// reserves), XOFF dynamic (α from 1/8 to 2) or static, headroom from the
// links or too small; strict priority or DWRR (equal or random weights);
// RED off or on; any MTU; up to six one-shot faults of every kind (drop,
// duplicate, corrupt, delay, delay beyond the ACK timeout, hold) aimed at
// any class (data, ACKs, NAKs, PFC frames, CNPs) on host links and
// trunks either way, and in a third of the cases netem impairments of
// every link.
func congCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := congCase{Seed: seed, MTU: []int{512, 1024, 1024, 4096}[r.Intn(4)], Timeout: []int{14, 14, 10}[r.Intn(3)]}
		c.Net.Gbps = congRates[r.Intn(len(congRates))]
		if r.Intn(2) == 0 {
			c.Net.Star, c.Net.Hosts = true, 2+r.Intn(7)
		} else {
			c.Net.Leaves, c.Net.PerLeaf, c.Net.Spines = 2+r.Intn(3), 1+r.Intn(2), 1+r.Intn(2)
			c.Net.Uplink = c.Net.Gbps
			if r.Intn(2) == 0 {
				c.Net.Uplink *= c.Net.PerLeaf
			}
		}
		hosts := c.Net.hosts()
		// The first traffic job on 2..all hosts; a collective on 2-3
		// hosts it leaves free, a third of the time; a second traffic
		// job on any hosts, a third of the time.
		perm := r.Perm(hosts)
		k := 2 + r.Intn(hosts-1)
		if hosts-k >= 2 && r.Intn(3) == 0 {
			k = min(k, hosts-2)
		}
		c.Jobs = append(c.Jobs, genCongTraffic(r, perm[:k]))
		if free := perm[k:]; len(free) >= 2 && r.Intn(3) == 0 {
			n := 2 + r.Intn(min(len(free), 3)-1)
			// NetReduce on a spine-leaf aggregates on a tree across the
			// racks, its frames between leaves and spines of the job's
			// class.
			j := congJob{Mode: "ring", Hosts: free[:n], MsgLen: 1 + r.Intn(32)}
			if r.Intn(2) == 0 {
				j.Mode = "netreduce"
			}
			j.Bytes = 4 * n * (1 + r.Intn(8192))
			c.Jobs = append(c.Jobs, j)
		}
		if r.Intn(3) == 0 {
			p2 := r.Perm(hosts)
			c.Jobs = append(c.Jobs, genCongTraffic(r, p2[:2+r.Intn(hosts-1)]))
		}
		for i := range c.Jobs {
			j := &c.Jobs[i]
			j.DSCP = congDSCPs[r.Intn(len(congDSCPs))]
			j.CC = []string{"none", "dcqcn"}[r.Intn(2)]
			if i > 0 && r.Intn(2) == 0 {
				j.Start = time.Duration(r.Intn(50_000))
			}
		}
		fitCongBytes(&c)
		switch r.Intn(4) {
		case 0:
			c.PFC = "off"
		case 1, 2:
			c.PFC = "on"
		default:
			var ps []string
			for pr := range 8 {
				if r.Intn(3) == 0 {
					ps = append(ps, strconv.Itoa(pr))
				}
			}
			if len(ps) == 0 {
				ps = []string{strconv.Itoa(c.Jobs[0].DSCP >> 3)}
			}
			c.PFC = strings.Join(ps, ",")
		}
		genCongBuffer(r, &c)
		switch r.Intn(3) {
		case 1:
			c.Sched = "dwrr"
		case 2:
			var w []string
			for range 8 {
				w = append(w, strconv.Itoa(1+r.Intn(8)))
			}
			c.Sched = "dwrr:" + strings.Join(w, ",")
		}
		if r.Intn(2) == 0 {
			kmin := 1 + r.Intn(20)
			c.RED = fmt.Sprintf("%dKB,%dKB,%d%%", kmin, kmin+1+r.Intn(200), 1+r.Intn(100))
		}
		c.dropUnused()
		// Half of the cases are clean (the pause-time property and the
		// zero-drop rule judge only those); of the others a third have
		// netem on every link.
		if r.Intn(2) == 0 {
			return gopter.NewGenResult(c, gopter.NoShrinker)
		}
		if r.Intn(3) == 0 {
			c.Netem = genNetem(r)
		}
		frames := congMaxBytes / c.MTU / 4
		for range 1 + r.Intn(maxBoundedEvents) {
			c.Events = append(c.Events, genCongEvent(r, c, frames))
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// genCongTraffic draws a traffic job on hosts: a pattern of flows of a
// few KB to 256 KB, sometimes paced, or 1-6 listed flows between its
// hosts with their own sizes, start offsets (up to 50 µs) and rates.
func genCongTraffic(r interface{ Intn(int) int }, hosts []int) congJob {
	j := congJob{Mode: "traffic", Hosts: slices.Clone(hosts), Pattern: congPatterns[r.Intn(len(congPatterns))], MsgLen: 1 + r.Intn(16)}
	size := func() int { return []int{1, 4, 16, 64, 256}[r.Intn(5)]<<10 + 4*r.Intn(1024) } // whole f32 elements
	if j.Pattern != "" {
		j.Bytes = size()
		if r.Intn(4) == 0 {
			j.RateG = 1 + r.Intn(10)
		}
		return j
	}
	for range 1 + r.Intn(6) {
		f := congFlow{From: r.Intn(len(hosts)), Bytes: size()}
		f.To = (f.From + 1 + r.Intn(len(hosts)-1)) % len(hosts)
		if r.Intn(2) == 0 {
			f.Start = time.Duration(r.Intn(50_000))
		}
		if r.Intn(3) == 0 {
			f.RateG = 1 + r.Intn(10)
		}
		j.Flows = append(j.Flows, f)
	}
	return j
}

// fitCongBytes scales the jobs' sizes down until they move at most
// congMaxBytes together.
func fitCongBytes(c *congCase) {
	for {
		total := 0
		for _, j := range c.Jobs {
			total += j.flowBytes()
		}
		if total <= congMaxBytes {
			return
		}
		for i := range c.Jobs {
			j := &c.Jobs[i]
			if j.Mode != "traffic" {
				j.Bytes = max(4*len(j.Hosts), j.Bytes/2/(4*len(j.Hosts))*(4*len(j.Hosts)))
			} else {
				j.Bytes = max(4, j.Bytes/8*4)
			}
			for k := range j.Flows {
				j.Flows[k].Bytes = max(4, j.Flows[k].Bytes/8*4)
			}
		}
	}
}

// genCongBuffer draws the buffer settings: the default 12 MB or a tight
// buffer (32 KB to 1 MB more than the headroom every port reserves for
// each lossless priority); dynamic XOFF with the default α or one from
// 1/8 to 2, or a static XOFF of 4-64 KB that fits the buffer; headroom
// from each port's link or, a sixth of the time, 1-16 KB (too small for
// what is in flight: lossless frames may then be dropped, as headroom
// drops only).
func genCongBuffer(r interface{ Intn(int) int }, c *congCase) {
	if r.Intn(6) == 0 {
		c.Headroom = fmt.Sprintf("%d", 1024*(1+r.Intn(16)))
	}
	ports, rate := c.Net.ports()
	cfg := switching.BufferConfig{}
	if c.Headroom != "" {
		cfg.Headroom, _ = strconv.ParseInt(c.Headroom, 10, 64)
	}
	hdrm := cfg.PortHeadroom(switching.PortLink{Rate: rate, Prop: time.Microsecond})
	reserved := int64(ports*bits.OnesCount8(c.lossless())) * hdrm
	size := int64(switching.DefaultBufferBytes)
	if r.Intn(4) != 0 || reserved+(1<<20) > size {
		size = reserved + int64([]int{32, 128, 512, 1024}[r.Intn(4)])<<10
		c.Buffer = strconv.FormatInt(size, 10)
	}
	switch r.Intn(4) {
	case 1:
		c.Alpha = []string{"1/8", "1/4", "1/2", "2"}[r.Intn(4)]
	case 2, 3:
		if x := int64(4+r.Intn(61)) << 10; x+hdrm <= size && x <= size-reserved {
			c.XOFF = strconv.FormatInt(x, 10)
		}
	}
}

// congKinds are the fault kinds of one-shot events.
var congKinds = []string{"drop", "drop", "dup", "corrupt", "delay", "long-delay", "hold"}

// genCongEvent draws one one-shot event: any kind, at any class (data,
// ACKs, NAKs, any frame, and more often than their share PFC frames and
// CNPs, the first few of which a run has), on a host link either way or
// (on a spine-leaf) a trunk.
func genCongEvent(r interface{ Intn(int) int }, c congCase, frames int) string {
	kind := congKinds[r.Intn(len(congKinds))]
	class := []string{"data", "ack", "nak", "any", "pause", "pause", "cnp", "cnp"}[r.Intn(8)]
	link := c.Net.hostLink(r.Intn(c.Net.hosts()), r.Intn(2) == 0)
	if t := c.Net.trunks(); len(t) > 0 && r.Intn(3) == 0 {
		link = t[r.Intn(len(t))]
	}
	nth := 1 + r.Intn(max(frames, 1))
	if class == "pause" || class == "cnp" || r.Intn(3) == 0 {
		nth = 1 + r.Intn(8)
	}
	act := kind
	switch kind {
	case "delay":
		act = fmt.Sprintf("delay=%dus", 1+r.Intn(200))
	case "long-delay":
		act = fmt.Sprintf("delay=%dus", longDelay(r, c.Timeout))
	case "hold":
		act = fmt.Sprintf("hold=%d", 1+r.Intn(8))
	}
	return fmt.Sprintf("%s link=%s class=%s nth=%d", act, link, class, nth)
}

// congRun is one run of a case: its report and capture (when asked for),
// or why it has none.
func congRun(sc *scenario.Scenario, capture bool) (*emu.Result, []byte, aggOutcome) {
	cfg := emu.DefaultConfig()
	if err := sc.Apply(&cfg); err != nil {
		return nil, nil, aggOutcome{fail: "setup", detail: err.Error()}
	}
	var buf bytes.Buffer
	if capture {
		cfg.Capture = &buf
	}
	res, err := emu.Run(cfg)
	var je *emu.JobError
	switch {
	case errors.As(err, &je):
		return nil, nil, aggOutcome{fail: "unfinished", detail: "the job did not end: " + je.Msg}
	case err != nil:
		return nil, nil, aggOutcome{fail: "setup", detail: err.Error()}
	case !res.Exact:
		return nil, nil, wrongResult(res.Mismatch)
	}
	return res, buf.Bytes(), aggOutcome{}
}

// congCapture judges a fault-free run's capture with the capture checker
// (package capcheck), which knows nothing of the emulator: the capture
// states each interface's link rate and propagation delay, so it judges
// every PFC frame alone. Its pfc-format and pfc-paused-send rules must
// find nothing (no transmitter, NIC or switch, sends a priority its link's
// far end paused, beyond what was on the line when the pause arrived),
// and every PFC frame must be judged; with DCQCN on, neither may cnp-rate
// (no two CNPs for one QP within the interval). The other rules judge
// what the other suites cover.
func congCapture(c congCase, capture []byte) string {
	rd, err := pcapio.NewReader("capture", bytes.NewReader(capture))
	if err != nil {
		return "the capture does not read: " + err.Error()
	}
	defer rd.Close()
	recs, names, err := rd.All()
	if err != nil {
		return "the capture does not read: " + err.Error()
	}
	opt := capcheck.CheckOptions{Interfaces: names}
	for _, in := range rd.InterfaceLinks() {
		d := time.Duration(-1)
		if in.HasDelay {
			d = in.Delay
		}
		opt.InterfaceRates, opt.InterfaceDelays = append(opt.InterfaceRates, float64(in.Speed)), append(opt.InterfaceDelays, d)
	}
	rep := capcheck.Check(recs, opt)
	dcqcnOn := false
	for _, j := range c.Jobs {
		dcqcnOn = dcqcnOn || j.CC == "dcqcn"
	}
	for _, v := range rep.Violations {
		if v.Rule == capcheck.RulePFCFormat || v.Rule == capcheck.RulePFCPausedSend || v.Rule == capcheck.RuleCNPRate && dcqcnOn {
			return fmt.Sprintf("the capture checker: %s", v)
		}
	}
	if rep.PFCPauses != rep.PFCFrames {
		return fmt.Sprintf("the capture checker judged %d of the capture's %d PFC frames (every link's rate is stated)", rep.PFCPauses, rep.PFCFrames)
	}
	return ""
}

// runCongCase runs the case and says which property, if any, it breaks:
//
//   - unfinished, wrong: every job ends, each flow's bytes and each
//     allreduce's sum exact, within congMaxTime (whatever the faults:
//     a lost, corrupted, duplicated or late pause, resume or CNP is
//     survivable);
//   - buffer: every switch's buffer holds nothing at the end, per
//     ingress and per egress (port, priority), and each drop the memory
//     manager made is counted once on each side;
//   - lossless-drop: a lossless priority's frames are only ever dropped
//     for want of headroom and, with the headroom from each port's link
//     and no faults, never;
//   - pause-time: without faults, no transmitter is paused for a
//     priority longer than the switch at the far end kept it paused
//     (between its pause and its resume), give or take a frame's time
//     per pause frame;
//   - cnp-rate: no QP receives more than one CNP per DCQCN interval
//     (⌊T/interval⌋+1 in a run of T), but for copies a fault made;
//   - capture: without faults, the capture checker finds every PFC
//     frame well formed, no frame sent on a direction its far end had
//     paused for the frame's priority, and, with DCQCN, no two CNPs for
//     a QP within the interval (congCapture);
//   - nondeterministic: every fourth case runs twice and its pcapng
//     captures must be the same bytes.
func runCongCase(c congCase) aggOutcome {
	sc := c.scenario()
	twice := c.Seed%4 == 0
	res, capture, out := congRun(sc, twice || !c.faulty())
	if out.fail != "" {
		return out
	}
	if d := congBuffer(res, !c.faulty() && res.Retransmissions == 0); d != "" {
		return aggOutcome{fail: "buffer", detail: d}
	}
	if d := congLossless(c, res); d != "" {
		return aggOutcome{fail: "lossless-drop", detail: d}
	}
	if !c.faulty() {
		if d := congPauseTime(c, res); d != "" {
			return aggOutcome{fail: "pause-time", detail: d}
		}
	}
	if d := congCNPRate(c, res); d != "" {
		return aggOutcome{fail: "cnp-rate", detail: d}
	}
	if !c.faulty() {
		if d := congCapture(c, capture); d != "" {
			return aggOutcome{fail: "capture", detail: d}
		}
	}
	if twice {
		if _, again, o2 := congRun(sc, true); o2.fail != "" || !bytes.Equal(again, capture) {
			sum, sum2 := sha256.Sum256(capture), sha256.Sum256(again)
			return aggOutcome{fail: "nondeterministic", detail: fmt.Sprintf("the same seed ran twice gave different captures (sha256 %x, then %x; %s)", sum[:8], sum2[:8], o2.detail)}
		}
	}
	return aggOutcome{}
}

// congBuffer: a switch's drops add up the same by ingress and by egress,
// nothing is held negative, and, when drained (the run's end finds no
// frame of it still on its way: no faults and nothing re-sent, whose
// redundant copies may still be queued when the last job completes),
// every switch's buffer rows hold nothing.
func congBuffer(res *emu.Result, drained bool) string {
	ing, eg := map[string]uint64{}, map[string]uint64{}
	for _, u := range res.Switch.Buffer {
		if u.Bytes < 0 || u.Frames < 0 || drained && (u.Bytes != 0 || u.Frames != 0) {
			return fmt.Sprintf("%s ingress %d priority %d still holds %d B in %d frames at the end", u.Switch, u.Port, u.Priority, u.Bytes, u.Frames)
		}
		ing[u.Switch] += u.DropsEgress + u.DropsHeadroom + u.DropsFull
	}
	for _, e := range res.Switch.Egress {
		if e.Bytes < 0 || e.Frames < 0 || drained && (e.Bytes != 0 || e.Frames != 0) {
			return fmt.Sprintf("%s egress %d priority %d still holds %d B in %d frames at the end", e.Switch, e.Port, e.Priority, e.Bytes, e.Frames)
		}
		eg[e.Switch] += e.Drops
	}
	for _, sw := range slices.Sorted(func(yield func(string) bool) {
		for s := range ing {
			if !yield(s) {
				return
			}
		}
	}) {
		if ing[sw] != eg[sw] {
			return fmt.Sprintf("%s dropped %d frames by its ingress rows, %d by its egress rows", sw, ing[sw], eg[sw])
		}
	}
	return ""
}

// congLossless: lossless priorities lose frames that came in by a port
// only for want of headroom, and none at all with the links' headroom
// and no faults.
func congLossless(c congCase, res *emu.Result) string {
	m := c.lossless()
	for _, u := range res.Switch.Buffer {
		// Frames a switch program sends from a timer (port -1) have no
		// upstream to pause: the shared pool takes them or drops them.
		// Those it sends while processing a frame (NetReduce's results)
		// are charged to that frame's port and judged with it
		// (docs/congestion.md, the switch buffer).
		if m&(1<<u.Priority) == 0 || u.Port < 0 {
			continue
		}
		if u.DropsEgress+u.DropsFull > 0 {
			return fmt.Sprintf("%s ingress %d lossless priority %d: %d frames dropped over the egress threshold, %d for a full buffer (a lossless frame may only meet full headroom)",
				u.Switch, u.Port, u.Priority, u.DropsEgress, u.DropsFull)
		}
		if u.DropsHeadroom > 0 && c.Headroom == "" && !c.faulty() {
			return fmt.Sprintf("%s ingress %d lossless priority %d: %d frames dropped with full headroom, with the links' headroom and no faults",
				u.Switch, u.Port, u.Priority, u.DropsHeadroom)
		}
	}
	return ""
}

// reverseDir is the name of the link direction opposite to d.
func reverseDir(d string) string {
	if s, ok := strings.CutSuffix(d, "-in"); ok {
		return s + "-out"
	}
	if s, ok := strings.CutSuffix(d, "-out"); ok {
		return s + "-in"
	}
	a, b, _ := strings.Cut(d, "-")
	return b + "-" + a
}

// congPauseTime: each transmitter paused for a priority stayed paused no
// longer than the switch whose ingress it feeds kept it paused, plus a
// maximum frame's time and a microsecond per PFC frame the switch sent
// (a pause waits for the frame on the line before it goes, and so does
// its resume) and a microsecond more.
func congPauseTime(c congCase, res *emu.Result) string {
	type key struct {
		sw        string
		port, pri int
	}
	out := map[string]key{} // a switch's egress direction → its port
	for _, p := range res.PFC {
		if p.Switch != "" {
			out[p.Direction] = key{p.Switch, p.Port, 0}
		}
	}
	rows := map[key]switching.BufferUse{}
	for _, u := range res.Switch.Buffer {
		rows[key{u.Switch, u.Port, u.Priority}] = u
	}
	slow := float64(c.Net.Gbps) * 1e9
	if !c.Net.Star {
		slow = float64(min(c.Net.Gbps, c.Net.Uplink)) * 1e9
	}
	frame := time.Duration(float64((c.MTU+200)*8) / slow * 1e9)
	for _, p := range res.PFC {
		if p.PausedNs == 0 {
			continue
		}
		k, ok := out[reverseDir(p.Direction)]
		k.pri = p.Priority
		u := rows[k]
		pauses := int64(u.PausesXOFF + u.PausesRefresh + u.PausesXON)
		tol := pauses*int64(frame+time.Microsecond) + int64(time.Microsecond)
		if !ok || p.PausedNs > u.PausedNs+tol {
			return fmt.Sprintf("%s was paused for priority %d for %v; the switch at its far end (%s port %d) kept it paused %v with %d PFC frames (tolerance %v)",
				p.Direction, p.Priority, time.Duration(p.PausedNs), k.sw, k.port, time.Duration(u.PausedNs), pauses, time.Duration(tol))
		}
	}
	return ""
}

// congCNPRate: at most ⌊T/N⌋+1 CNPs reach each QP in a run of T (DCQCN's
// notification point sends at most one per QP per interval N), but for
// the copies faults made (each duplicate counted once, whatever it
// copied).
func congCNPRate(c congCase, res *emu.Result) string {
	iv := dcqcn.DefaultParams(float64(c.Net.Gbps) * 1e9).CNPInterval
	bound := uint64(res.VirtualNS/iv.Nanoseconds()) + 1
	var excess uint64
	worst := ""
	for _, j := range res.Jobs {
		if j.DCQCN == nil {
			continue
		}
		for _, q := range j.DCQCN.QPs {
			if q.CNPs > bound {
				excess += q.CNPs - bound
				if worst == "" {
					worst = fmt.Sprintf("job %s's QP %#x received %d CNPs in %v (at most %d at one per %v)", j.Name, q.QPN, q.CNPs, time.Duration(res.VirtualNS), bound, iv)
				}
			}
		}
	}
	if excess > res.Faults.Duplicated {
		return fmt.Sprintf("%s; %d CNPs beyond the bound in all, %d frames duplicated by faults", worst, excess, res.Faults.Duplicated)
	}
	return ""
}

// CongestionSuite checks, for generated runs of traffic jobs (and a
// collective beside them) through shared-buffer switches with PFC,
// priority queues, RED/ECN and DCQCN, under faults aimed at every class
// of frame (PFC frames and CNPs included), that every job ends exact,
// the buffers balance and end empty, lossless priorities lose nothing
// they should not, pauses last as long as the switches ask, CNPs keep
// their interval, and a seed gives the same capture (runCongCase).
func CongestionSuite(o SuiteOptions) []PropertyResult {
	const name = "congestion/invariants"
	if o.DUT != nil {
		return []PropertyResult{skipped(name, "needs the emulator's switch buffers, PFC and DCQCN counters")}
	}
	rs := exactSuite(o, "congestion", name, congCaseGen, runCongCase, shrinkCong, congCase.scenario,
		func(out aggOutcome) bool {
			return out.fail == "unfinished" || out.fail == "wrong" || out.fail == "setup"
		})
	if o.program() != "" {
		rs[0].Notes = append(rs[0].Notes, "the congestion suite's netreduce jobs run on the netreduce program, not "+o.SwitchProgram)
	}
	return rs
}

// shrinkCong makes a failing case smaller while it fails the same way:
// fewer faults, no netem, fewer jobs, flows and hosts of a job, fewer
// bytes, no pacing or start offsets, fewer spines, and default queue
// settings (strict priority, no RED, no DCQCN).
func shrinkCong(c congCase, out aggOutcome) (congCase, aggOutcome) {
	shrinkCase(&c, 150, failsAs(runCongCase, &out), func(try func(congCase) bool) bool {
		changed := dropEachEvent(c.Events, func(fewer []string) bool {
			d := c.clone()
			d.Events = fewer
			return try(d)
		})
		if c.Netem != "" {
			d := c.clone()
			d.Netem = ""
			changed = try(d) || changed
		}
		for i := 0; i < len(c.Jobs) && len(c.Jobs) > 1; i++ {
			d := c.clone()
			d.Jobs = slices.Delete(d.Jobs, i, i+1)
			if d.PFC != "on" || d.lossless() == c.lossless() { // the same lossless priorities
				if try(d) {
					changed, i = true, i-1
				}
			}
		}
		steps := []func(d *congCase) bool{
			func(d *congCase) bool { ok := d.Sched != ""; d.Sched = ""; return ok },
			func(d *congCase) bool { ok := d.RED != ""; d.RED = ""; return ok },
			func(d *congCase) bool { ok := d.Alpha != ""; d.Alpha = ""; return ok },
			func(d *congCase) bool { ok := !d.Net.Star && d.Net.Spines > 1; d.Net.Spines = 1; return ok },
		}
		for k := range c.Jobs {
			steps = append(steps,
				func(d *congCase) bool { j := &d.Jobs[k]; ok := j.CC == "dcqcn"; j.CC = "none"; return ok },
				func(d *congCase) bool { j := &d.Jobs[k]; ok := j.Start > 0; j.Start = 0; return ok },
				func(d *congCase) bool {
					j := &d.Jobs[k]
					ok := j.RateG > 0
					j.RateG = 0
					for f := range j.Flows {
						ok = ok || j.Flows[f].RateG > 0 || j.Flows[f].Start > 0
						j.Flows[f].RateG, j.Flows[f].Start = 0, 0
					}
					return ok
				},
				func(d *congCase) bool { // half the bytes
					j := &d.Jobs[k]
					unit := 4
					if j.Mode != "traffic" {
						unit = 4 * len(j.Hosts)
					}
					ok := j.Bytes/2 >= unit
					j.Bytes = max(unit, j.Bytes/2/unit*unit)
					for f := range j.Flows {
						ok = ok || j.Flows[f].Bytes > 4
						j.Flows[f].Bytes = max(4, j.Flows[f].Bytes/8*4)
					}
					return ok
				},
				func(d *congCase) bool { // a traffic job's last host (not a listed flow's end)
					j := &d.Jobs[k]
					if j.Mode != "traffic" || len(j.Hosts) <= 2 || j.Pattern == "" {
						return false
					}
					j.Hosts = j.Hosts[:len(j.Hosts)-1]
					return true
				},
				func(d *congCase) bool { // a listed flow fewer
					j := &d.Jobs[k]
					if len(j.Flows) <= 1 {
						return false
					}
					j.Flows = j.Flows[:len(j.Flows)-1]
					return true
				})
		}
		for _, step := range steps {
			d := c.clone()
			if step(&d) && try(d) {
				changed = true
			}
		}
		return changed
	})
	return c, out
}

// clone is c with its own jobs and flows, so a shrinking step edits a
// copy.
func (c congCase) clone() congCase {
	d := c
	d.Events = slices.Clone(c.Events)
	d.Jobs = make([]congJob, len(c.Jobs))
	for i, j := range c.Jobs {
		j.Hosts, j.Flows = slices.Clone(j.Hosts), slices.Clone(j.Flows)
		d.Jobs[i] = j
	}
	return d
}

// dropUnused clears the buffer settings nothing acts on, which a run
// refuses (exit 2): XOFF, alpha and headroom without PFC, the buffer's
// size without any congestion setting.
func (c *congCase) dropUnused() {
	if c.PFC == "off" {
		c.XOFF, c.Alpha, c.Headroom = "", "", ""
		if c.Sched == "" && c.RED == "" {
			c.Buffer = ""
		}
	}
}
