package conformance

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// aggCase is one generated NetReduce job and its fault schedule.
type aggCase struct {
	Workers, Window, MsgLen, MTU int
	Elems                        int // tensor elements per worker
	DType                        tensor.DType
	Seed                         uint64
	Timeout                      int      // the QPs' ACK timeout exponent
	Events                       []string // one-shot deterministic events (nth=K); port=R and spoof=R name ranks
	Netem                        string   // random impairments on every link, or ""
	// Topology and Hosts place the job off the plain star (empty: the
	// star of Workers hosts, rank r on hr): Topology in --topology form,
	// Hosts[r] the host of rank r.
	Topology string
	Hosts    []int
	// Program is the switch program the job aggregates on ("": netreduce).
	Program string
	// Ring: the job is a Ring-AllReduce instead (the hosts add, the
	// switch only forwards), run through a device that only forwards
	// (DUT.Mode ring; forDevice sets it up).
	Ring bool
}

// host is the host rank r runs on.
func (c aggCase) host(r int) int {
	if len(c.Hosts) == 0 {
		return r
	}
	return c.Hosts[r]
}

// place draws where the job runs, from a generator seeded by the case
// itself (so the case's other draws are what they were): a third of the
// cases on the plain star, a third on a bigger star with idle hosts, rank
// r on a random host, a third under one leaf of a spine-leaf with one or
// two spines, ranks in random order. The switch then binds each member to
// a port other than its rank, and a forgery can come from another leaf.
func (c *aggCase) place() {
	h := fnv.New64a()
	h.Write([]byte(c.String()))
	r := rand.New(rand.NewPCG(h.Sum64(), 0x5EED))
	switch r.IntN(3) {
	case 1:
		n := c.Workers + 1 + r.IntN(4)
		c.Topology, c.Hosts = fmt.Sprintf("star:hosts=%d", n), r.Perm(n)[:c.Workers]
	case 2:
		leaf := r.IntN(2)
		c.Topology = fmt.Sprintf("spine-leaf:leaves=2,hosts=%d,spines=%d", c.Workers, 1+r.IntN(2))
		for _, p := range r.Perm(c.Workers) {
			c.Hosts = append(c.Hosts, leaf*c.Workers+p)
		}
	}
}

// dutMinTimeout is the smallest ACK timeout exponent a case runs with
// against a device (≈67 ms, the emulator's default): its timers run on
// the wall clock, and a frame waits its turn in the queues of the live
// hosts, the wire and the device. Above it the calibration decides
// (dut.Calibration.Timeout): the path's measured rate sets how long a
// window of the case's shape waits in those queues.
const dutMinTimeout = dut.MinTimeout

// dutMaxInFlight bounds a case's packets in flight per rank (window ×
// message length, and a message's own length) against a device whatever
// the calibration says, and the calibration may cut it further
// (dut.Calibration.MaxInFlight). For the same reason a case against a
// device keeps its one-shot faults and drops its random impairments:
// under netem loss of a few tenths of a percent the live hosts exhaust
// their retries with inaemu's own switch too.
const dutMaxInFlight = 170

// forDevice fits a case to a device under test with ports ports whose
// path cal measured: the plain star (the device is one switch), at most
// ports workers (events naming a port beyond go), messages and a window
// of at most dutMaxInFlight packets and what cal allows, no random
// impairments, and a timeout of at least what cal says the shape needs
// (dutMinTimeout without a calibration), every delay event scaled by the
// same factor, so a delay that outlasted the timeout still does and one
// that did not still does not. Every setting ends up in the case, so its
// scenario replays it exactly.
func (c aggCase) forDevice(ports int, cal dut.Calibration) aggCase {
	c.Topology, c.Hosts = "", nil
	c.Events = append([]string(nil), c.Events...)
	if c.Netem != "" {
		// Bounded schedules only: see dutMaxInFlight.
		c.Netem, c.Timeout = "", int(emu.DefaultConfig().Timeout)
	}
	if c.Workers > ports {
		c.Workers = ports
		var keep []string
		for _, e := range c.Events {
			if portsFit([]string{e}, ports) {
				keep = append(keep, e)
			}
		}
		c.Events = keep
	}
	limit := cal.MaxInFlight(c.Workers, dutMaxInFlight)
	if c.Ring {
		return c.forRing(limit, cal)
	}
	c.MsgLen = min(c.MsgLen, limit)
	if c.Window*c.MsgLen > limit {
		c.Window = max(1, limit/c.MsgLen)
	}
	return c.withTimeout(max(dutMinTimeout, cal.Timeout(c.Workers, c.Window*c.MsgLen)))
}

// forRing is forDevice's fit of a ring job (c.Ring) through a device that
// only forwards, with at most limit packets in flight per rank. A ring
// rank keeps up to 4·window+8 messages of step 0 unacknowledged
// (ringWindow in emu/collective/ring.go), so the message length, then the
// window, is cut until those fit the limit. A ring needs an element per
// rank. Forged copies (spoof events) go: a learning switch that sees a
// rank's MAC arrive on another port moves the MAC there, as Ethernet
// switches do, and no switch program is there to refuse the forgery.
func (c aggCase) forRing(limit int, cal dut.Calibration) aggCase {
	c.Elems = max(c.Elems, c.Workers)
	c.Events = slices.DeleteFunc(c.Events, func(e string) bool { return strings.HasPrefix(e, "spoof") })
	c.MsgLen = max(1, min(c.MsgLen, limit/ringOutstanding(c.Window)))
	if ringOutstanding(c.Window)*c.MsgLen > limit {
		c.Window = max(1, (limit/c.MsgLen-8)/4)
	}
	return c.withTimeout(max(dutMinTimeout, cal.Timeout(c.Workers, ringOutstanding(c.Window)*c.MsgLen)))
}

// ringOutstanding is how many messages a ring rank keeps unacknowledged
// with window w (emu/collective's ringWindow).
func ringOutstanding(w int) int { return 4*w + 8 }

// withTimeout raises the case's timeout exponent to at least t, every
// delay event scaled by the same factor.
func (c aggCase) withTimeout(t int) aggCase {
	if c.Timeout >= t {
		return c
	}
	c.Events = append([]string(nil), c.Events...)
	scale := 1 << (t - c.Timeout)
	for i, e := range c.Events {
		f := strings.Fields(e)
		if us, ok := strings.CutPrefix(f[0], "delay="); ok {
			if n, err := strconv.Atoi(strings.TrimSuffix(us, "us")); err == nil {
				f[0] = fmt.Sprintf("delay=%dus", n*scale)
			}
		}
		c.Events[i] = strings.Join(f, " ")
	}
	c.Timeout = t
	return c
}

// onHosts rewrites an event's rank numbers (port=R, spoof=R) as the hosts
// the ranks run on.
func (c aggCase) onHosts(ev string) string {
	f := strings.Fields(ev)
	for i, tok := range f {
		for _, key := range []string{"port=", "spoof="} {
			if v, ok := strings.CutPrefix(tok, key); ok {
				if r, err := strconv.Atoi(v); err == nil && r < c.Workers {
					f[i] = key + strconv.Itoa(c.host(r))
				}
			}
		}
	}
	return strings.Join(f, " ")
}

// bounded: a finite schedule of at most maxBoundedEvents one-shot faults,
// which the transport's retry budget must always absorb. Random netem has
// no bound: a case may legitimately exhaust the retries.
func (c aggCase) bounded() bool { return c.Netem == "" && len(c.Events) <= maxBoundedEvents }

const maxBoundedEvents = 6

func (c aggCase) scenario(rel netreduce.Release) *scenario.Scenario {
	w, n, l, m := c.Workers, c.Window, c.MsgLen, c.MTU
	seed, to := c.Seed, c.Timeout
	sc := &scenario.Scenario{Workers: &w, Timeout: &to, Mode: "netreduce", Window: &n, MsgLen: &l, MTU: &m,
		Tensor: fmt.Sprint(c.Elems * c.DType.Size()), DType: c.DType.String(), Seed: &seed,
		Release: rel.String(), Netem: c.Netem, MaxTime: "120s", SwitchProgram: c.Program}
	if c.Ring {
		sc.Mode, sc.SwitchProgram = "ring", "" // a ring job runs on no switch program
	}
	for _, e := range c.Events {
		sc.Faults = append(sc.Faults, c.onHosts(e))
	}
	if c.Topology != "" {
		spec, err := topo.ParseFlag(c.Topology)
		if err != nil {
			panic(err) // place writes only valid forms
		}
		sc.Topology = spec
		job := scenario.Job{Name: "nr"}
		for r := 0; r < c.Workers; r++ {
			job.Ranks = append(job.Ranks, fmt.Sprintf("h%d", c.host(r)))
		}
		sc.Jobs = []scenario.Job{job}
	}
	return sc
}

func (c aggCase) String() string {
	s := fmt.Sprintf("workers=%d window=%d msg-len=%d mtu=%d tensor=%d×%s timeout=%d seed=%d netem=%q faults=%q",
		c.Workers, c.Window, c.MsgLen, c.MTU, c.Elems, c.DType, c.Timeout, c.Seed, c.Netem, c.Events)
	if c.Topology != "" {
		s += fmt.Sprintf(" topology=%s hosts=%v", c.Topology, c.Hosts[:c.Workers])
	}
	if c.Program != "" {
		s += " switch-program=" + c.Program
	}
	if c.Ring {
		s += " mode=ring"
	}
	return s
}

var mtus = []int{256, 512, 1024, 2048, 4096}

// The aggregation suite's fault kinds: every action the fault stage has,
// with short and long delays and holds. A long delay (1.1 to 8 times the
// default ACK timeout) outlasts the timeout, so the sender goes back and
// the job moves on; in the many-message shapes the frame then arrives more
// than 128 messages late, after its MsgID has wrapped past it. A long
// hold (130-700 frames) does the same by frame count.
var faultKinds = []string{"drop", "dup", "corrupt", "delay", "long-delay", "hold", "long-hold", "spoof"}

// ringFaultKinds are the kinds for a ring job through a forwarding
// device: all but forged copies (see forRing).
var ringFaultKinds = faultKinds[:len(faultKinds)-1]

// genFaultEvent draws one one-shot event for a job of h workers whose
// links carry about frames frames each way, so events land anywhere in
// the job, not only at its start.
func genFaultEvent(r interface{ Intn(int) int }, h, frames, timeout int, kinds []string) string {
	kind := kinds[r.Intn(len(kinds))]
	class := []string{"data", "ack", "nak", "any"}[r.Intn(4)]
	dir := []string{"in", "out"}[r.Intn(2)]
	port := r.Intn(h)
	nth := 1 + r.Intn(max(frames, 1))
	if r.Intn(3) == 0 {
		nth = 1 + r.Intn(min(frames, 40)+1) // the job's start, where first packets and CLT setup are
	}
	act := kind
	switch kind {
	case "delay":
		act = fmt.Sprintf("delay=%dus", 1+r.Intn(2000)) // up to twice the default ACK timeout
	case "long-delay":
		act = fmt.Sprintf("delay=%dus", longDelay(r, timeout))
	case "hold":
		act = fmt.Sprintf("hold=%d", 1+r.Intn(8))
	case "long-hold":
		act = fmt.Sprintf("hold=%d", 130+r.Intn(570))
	case "spoof":
		// A host on another port forges the member's aggregation frame.
		from := (port + 1 + r.Intn(h-1)) % h
		return fmt.Sprintf("spoof=%d port=%d dir=in class=data nth=%d", from, port, nth)
	}
	return fmt.Sprintf("%s port=%d dir=%s class=%s nth=%d", act, port, dir, class, nth)
}

// longDelay is 1.05 to 8 ACK timeouts of exponent exp, in µs.
func longDelay(r interface{ Intn(int) int }, exp int) int {
	t := int(roce.AckTimeout(uint8(exp)) / time.Microsecond)
	if r.Intn(2) == 0 {
		return t + t/20 + r.Intn(t) // just past it: the job is still running
	}
	return t + t/20 + r.Intn(7*t)
}

// timeouts are the ACK timeout exponents jobs with one-shot faults are
// generated with: the default (≈67 ms, perftest's) and short ones (≈1 and
// 4 ms) under which a late frame arrives while a job of hundreds of
// messages still runs.
var timeouts = []int{int(emu.DefaultConfig().Timeout), int(emu.DefaultConfig().Timeout), 8, 8, 10}

// genNetem draws random impairments within what a commodity RNIC must
// survive: loss up to 1 % (random or Gilbert-Elliott bursts of mean loss
// up to 1 %), reordering up to 5 % with any gap, duplication up to 5 %,
// corruption up to 0.1 %, delay jitter.
func genNetem(r interface {
	Intn(int) int
	Float64() float64
}) string {
	var parts []string
	switch r.Intn(3) {
	case 0:
		parts = append(parts, fmt.Sprintf("loss %.3f%%", r.Float64()))
	case 1:
		// Mean loss p/(p+r) × (1-h): keep it at or below 1 %.
		p, rr := 0.1+r.Float64()*2, 10+r.Float64()*60
		h := min(1, (p+rr)/p*0.01*r.Float64()) // 1-h, so the mean stays ≤ 1 %
		parts = append(parts, fmt.Sprintf("loss gemodel %.2f%% %.2f%% %.2f%%", p, rr, 100*h))
	}
	if r.Intn(2) == 0 {
		parts = append(parts, fmt.Sprintf("reorder %.2f%% gap %d", r.Float64()*5, 1+r.Intn(10)))
	}
	if r.Intn(2) == 0 {
		parts = append(parts, fmt.Sprintf("duplicate %.2f%%", r.Float64()*5))
	}
	if r.Intn(2) == 0 {
		parts = append(parts, fmt.Sprintf("corrupt %.3f%%", r.Float64()*0.1))
	}
	if r.Intn(3) == 0 {
		parts = append(parts, fmt.Sprintf("delay %dus %dus", 1+r.Intn(5), 1+r.Intn(3)))
	}
	if len(parts) == 0 {
		parts = append(parts, "duplicate 1%")
	}
	return strings.Join(parts, " ")
}

// Shapes of generated jobs.
const (
	shapePaper = iota // the papers' and the defaults' settings: long messages
	shapeWrap         // short messages, many of them: MsgIDs and aggregators wrap
	shapeSmall        // anything small
)

// aggCaseGen generates jobs in three shapes, a third each: the papers'
// settings (2-8 workers, window 1-4, MsgLen 128-255 with 170 often, MTU
// 1024, 2-6 messages); many short messages (2-4 workers, window 1-32,
// MsgLen 1-3, MTU 256, 300-1100 messages, so the 8-bit MsgID wraps one to
// four times); and small jobs of 2-16 workers, window 1-8, MsgLen 1-32, any
// MTU and dtype. Each gets up to six one-shot faults of every kind
// (genFaultEvent) and, in half of the cases, random impairments on
// every link (genNetem). The jobs are on the plain star; the aggregation
// suite places them (place), the ICRC suites keep the star's interface
// order.
func aggCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := aggCase{Seed: seed, DType: tensor.DType(r.Intn(3)), Timeout: timeouts[r.Intn(len(timeouts))]}
		msgs := 0
		switch r.Intn(3) {
		case shapePaper:
			c.Workers, c.Window, c.MTU = 2+r.Intn(7), 1+r.Intn(4), 1024
			c.MsgLen = 128 + r.Intn(128)
			if r.Intn(2) == 0 {
				c.MsgLen = 170
			}
			msgs = 2 + r.Intn(5)
		case shapeWrap:
			c.Workers, c.Window, c.MsgLen, c.MTU = 2+r.Intn(3), 1+r.Intn(32), 1+r.Intn(3), 256
			if r.Intn(2) == 0 {
				c.Window = 1 + r.Intn(2)
			}
			msgs = 300 + r.Intn(800)
		default:
			c.Workers, c.Window, c.MsgLen, c.MTU = 2+r.Intn(15), 1+r.Intn(8), 1+r.Intn(32), mtus[r.Intn(len(mtus))]
			c.Elems = 1 + r.Intn(16384)
		}
		if msgs > 0 {
			// Whole messages but the last, which is a random part.
			per := (c.MsgLen*c.MTU - 8) / c.DType.Size()
			c.Elems = (msgs-1)*per + 1 + r.Intn(per)
		}
		frames := c.Elems*c.DType.Size()/c.MTU + 1
		n := r.Intn(maxBoundedEvents + 1)
		if msgs >= 300 && r.Intn(4) != 0 {
			// Where the 8-bit MsgID bites: a gradient frame into the switch
			// held back around a short timeout (≈1 ms; half to 2.4 times
			// it), the job runs on (the sender goes back, or the others'
			// NAKs make it), one-packet messages a few µs each, so the frame
			// arrives up to hundreds of messages late, often after its
			// MsgID has wrapped, while the job still runs.
			c.Timeout, c.Window, c.MsgLen = 8, 1+r.Intn(4)/3, 1
			msgs = 700 + r.Intn(400)
			per := (c.MTU - 8) / c.DType.Size()
			c.Elems = (msgs-1)*per + 1 + r.Intn(per)
			t := int(roce.AckTimeout(uint8(c.Timeout)) / time.Microsecond)
			late := 2 + r.Intn(3)
			for k := 0; k < late; k++ {
				c.Events = append(c.Events, fmt.Sprintf("delay=%dus port=%d dir=in class=data nth=%d",
					t/2+r.Intn(t*19/10), r.Intn(c.Workers), 1+r.Intn(msgs/4)))
			}
			n = min(n, maxBoundedEvents-late)
		}
		for i := 0; i < n; i++ {
			c.Events = append(c.Events, genFaultEvent(r, c.Workers, frames, c.Timeout, faultKinds))
		}
		if r.Intn(2) == 0 {
			// Random impairments run with the default timeout. With ≈1 ms
			// a rank can spend its seven retries waiting for another
			// rank's go-back-N under jitter (a NetReduce QP advances only
			// when every rank's packet arrives): a failure of the timeout
			// setting that no fault log can excuse, so not a case for a
			// property that must hold.
			c.Netem, c.Timeout = genNetem(r), int(emu.DefaultConfig().Timeout)
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

// aggOutcome classifies a run: "" holds, otherwise why the property fails.
type aggOutcome struct {
	fail      string // "wrong", "transport" or "setup"; "" when the property holds
	detail    string
	transport bool // ended in an allowed transport failure
	// inconclusive: against a device, a transport failure with nothing
	// to blame (neither a fault nor device evidence); fail is "".
	inconclusive bool
	// silent: against a device, a failure whose only evidence is that the
	// device sent nothing through a stall (settle confirms it once).
	silent bool
}

// retryBudget is the jobs' retry_cnt + 1: an exchange broken that many
// times exhausts the retries of a QP that gets no other response.
var retryBudget = int(emu.DefaultConfig().RetryCnt) + 1

func runAggCase(o SuiteOptions, c aggCase, rel netreduce.Release) aggOutcome {
	out, _ := runAggCaseOn(o, c, rel)
	return out
}

// runAggCaseOn is runAggCase that also returns, against a device, the
// records of the wire's capture (nil in the emulator).
func runAggCaseOn(o SuiteOptions, c aggCase, rel netreduce.Release) (aggOutcome, []pcapio.Record) {
	cfg := emu.DefaultConfig()
	if err := c.scenario(rel).Apply(&cfg); err != nil {
		return aggOutcome{fail: "setup", detail: err.Error()}, nil
	}
	// Against a device a run does not replay its timing: the fault log
	// that may excuse a failure is this run's.
	var capture bytes.Buffer
	if o.DUT != nil {
		cfg.Capture = &capture
	}
	res, err := o.runJob(cfg)
	var recs []pcapio.Record
	if o.DUT != nil {
		recs, _ = readRecords(&capture)
		// What the device emitted and owed is judged first (device_judge.go).
		if out, bad := deviceFirst(recs, c, res, err); bad {
			return out, recs
		}
	}
	var je *emu.JobError
	switch {
	case errors.As(err, &je):
		if !c.bounded() {
			var names []string
			if o.DUT == nil {
				recs, names, _, _ = captureNamed(o, c.scenario(rel)) // capturing never changes an emulated run
			}
			if why := budgetExceeded(c, recs, je); why != "" {
				return aggOutcome{transport: true, detail: why}, recs
			}
			if why := attemptsBroken(c, recs, names, je); why != "" {
				return aggOutcome{transport: true, detail: why}, recs
			}
		}
		if o.DUT != nil {
			return blameDevice(c.Workers, recs, err, je), recs
		}
		return aggOutcome{fail: "transport", detail: "the job failed though the fault log shows no exchange of the ring broken retry_cnt+1 times: " + je.Msg}, recs
	case err != nil:
		return aggOutcome{fail: "setup", detail: err.Error()}, recs
	case !res.Exact:
		return wrongResult(res.Mismatch), recs
	}
	return aggOutcome{}, recs
}

// budgetExceeded reads the case's fault log (the annotations of a capture
// of the same run, recs) and, when a QP's work
// completed with RETRY_EXC_ERR, names one PSN of one ring connection whose
// exchange the faults broke at least retryBudget times: its request or
// the response to it destroyed (lost, dropped or corrupted) on any link
// it crosses, extra copies that netem duplicated not counted. Each such
// break costs the sender one retry, so retries provably ran out. The PSN
// may be on any of the ring's connections, not only the failing QP's: a
// NetReduce QP
// advances only when every rank's packet of its message has reached the
// switch, so a rank whose packet is destroyed eight times holds every
// other rank's QP for as long, and whichever timer runs out first fails.
// Any other failure (a stall, a result out of order, another status) is
// never excused. "" if nothing excuses it.
func budgetExceeded(c aggCase, recs []pcapio.Record, je *emu.JobError) string {
	f := retriesRanOut(je)
	if f == nil {
		return ""
	}
	type key struct {
		rank int
		psn  uint32
	}
	hits := map[key]int{}
	for _, x := range loggedRingFrames(c, recs, nil) {
		if !x.destroyed {
			continue
		}
		k := key{x.rank, x.psn}
		if hits[k]++; hits[k] >= retryBudget {
			return fmt.Sprintf("PSN %d of rank %d's connection: its request or response was destroyed %d times (retry_cnt %d allows %d retries; rank %d's QP failed)", k.psn, k.rank, hits[k], retryBudget-1, retryBudget-1, f.Rank)
		}
	}
	return ""
}

// retriesRanOut is the failed QP when the job failed because a send QP's
// retries ran out (RETRY_EXC_ERR), the one failure a fault log can
// excuse; nil otherwise.
func retriesRanOut(je *emu.JobError) *emu.QPFailure {
	if f := je.QP; f != nil && f.Status == roce.StatusRetryExcErr && f.Send {
		return f
	}
	return nil
}

// loggedFrame is a frame of a ring connection in a run's fault log.
type loggedFrame struct {
	rank      int // the connection's sender
	psn       uint32
	at        time.Duration
	request   bool // a request on its sender's link into its switch (else a result, ACK or NAK, or a request further on)
	destroyed bool // lost, dropped or corrupted
}

// loggedRingFrames reads the frames of c's ring connections in a fault log
// (recs), by MAC (the switch rebuilds results from the requester's own
// headers): requests rank r → r+1, responses back. Extra copies netem
// duplicated are left out. names are the capture's interfaces: with
// them, a request is marked as on its sender's uplink ("portH-in" on the
// plain star, "hH-SWITCH" on any other topology); without (a device's
// wire), none is.
func loggedRingFrames(c aggCase, recs []pcapio.Record, names []string) []loggedFrame {
	ring := map[[2][6]byte]int{}
	uplink := map[string]int{} // interface name → the rank whose uplink it is
	for r := 0; r < c.Workers; r++ {
		ring[[2][6]byte{[6]byte(emu.HostMAC(c.host(r))), [6]byte(emu.HostMAC(c.host((r + 1) % c.Workers)))}] = r
	}
	for _, n := range names {
		for r := 0; r < c.Workers; r++ {
			if h := c.host(r); n == fmt.Sprintf("port%d-in", h) || strings.HasPrefix(n, fmt.Sprintf("h%d-", h)) {
				uplink[n] = r
			}
		}
	}
	var fs []loggedFrame
	var v frames.View
	for _, r := range recs {
		if len(r.Data) < 12 || v.Parse(r.Data) != nil {
			continue
		}
		destroyed, copied := pcapio.IsGhost(r.Comments), false
		for _, cm := range r.Comments {
			destroyed = destroyed || strings.Contains(cm, "corrupt")
			copied = copied || strings.Contains(cm, "duplicate")
		}
		if copied {
			continue
		}
		src, dst := [6]byte(r.Data[6:12]), [6]byte(r.Data[0:6])
		response := v.Opcode().IsAck()
		pair := [2][6]byte{src, dst}
		if response {
			pair = [2][6]byte{dst, src}
		}
		rank, ok := ring[pair]
		if !ok {
			continue
		}
		x := loggedFrame{rank: rank, psn: v.PSN(), at: time.Duration(r.Info.Timestamp.UnixNano()), destroyed: destroyed}
		if idx := r.Info.InterfaceIndex; !response && idx >= 0 && idx < len(names) {
			up, isUplink := uplink[names[idx]]
			x.request = isUplink && up == rank
		}
		fs = append(fs, x)
	}
	return fs
}

// attemptsBroken reads the fault log of an emulated run (recs, on the
// interfaces names: "portN-in" or "hN-leaf0" is host N's link into its
// switch) when a QP's work completed with RETRY_EXC_ERR, and names a ring
// connection and message offset whose every attempt met a destroyed
// frame of its exchange, at least retryBudget attempts: the sender's
// request of that PSN destroyed, the result or ACK of it destroyed, or
// another rank's request of the same message (the same PSN offset from
// its connection's first) destroyed, that rank's contribution reaching
// the switch only at the window's end or later, so the aggregate stayed
// incomplete. The attempts are the sender's requests of the PSN at the
// switch's ingress, each window running to the next. budgetExceeded
// needs one frame destroyed that often; here the breaks may come from
// different frames, as when a burst of another rank's losses is followed
// by a burst on the result's link (Gilbert-Elliott loss). Each break
// costs the sender that retry, so the retries provably ran out. "" if the
// log does not show it (or the interfaces are not the emulator's).
func attemptsBroken(c aggCase, recs []pcapio.Record, names []string, je *emu.JobError) string {
	f := retriesRanOut(je)
	if f == nil || len(names) == 0 {
		return ""
	}
	fs := loggedRingFrames(c, recs, names)
	base := map[int]uint32{} // each connection's first request PSN
	for _, x := range fs {
		if _, seen := base[x.rank]; !seen && x.request {
			base[x.rank] = x.psn
		}
	}
	offset := func(x loggedFrame) (uint32, bool) {
		b, ok := base[x.rank]
		return (x.psn - b) & 0xFFFFFF, ok
	}
	type key struct {
		rank int
		off  uint32
	}
	attempts := map[key][]time.Duration{}
	for _, x := range fs {
		if d, ok := offset(x); ok && x.request {
			k := key{x.rank, d}
			attempts[k] = append(attempts[k], x.at)
		}
	}
	// arrived[rank, off]: when that rank's contribution first reached the
	// switch whole.
	arrived := map[key]time.Duration{}
	for _, x := range fs {
		if d, ok := offset(x); ok && x.request && !x.destroyed {
			if t, seen := arrived[key{x.rank, d}]; !seen || x.at < t {
				arrived[key{x.rank, d}] = x.at
			}
		}
	}
	// The destroyed frames by offset: a stalled run has thousands of
	// offsets retransmitted retryBudget times, each window looks at its
	// own offset's few losses only.
	lost := map[uint32][]loggedFrame{}
	for _, x := range fs {
		if d, ok := offset(x); ok && x.destroyed {
			lost[d] = append(lost[d], x)
		}
	}
	for k, ts := range attempts {
		if len(ts) < retryBudget {
			continue
		}
		broken := 0
		for i, t := range ts {
			end := time.Duration(1<<63 - 1)
			if i+1 < len(ts) {
				end = ts[i+1]
			}
			for _, x := range lost[k.off] {
				d, _ := offset(x)
				if x.at < t || x.at >= end {
					continue
				}
				own := x.rank == k.rank
				// Another rank's loss breaks this attempt only if its
				// contribution reached the switch no sooner than the
				// window's end (the aggregate stayed incomplete).
				if t0, in := arrived[key{x.rank, d}]; own || x.request && (!in || t0 >= end) {
					broken++
					break
				}
			}
		}
		if broken >= retryBudget {
			return fmt.Sprintf("PSN offset %d of rank %d's connection: each of %d attempts met a destroyed frame of its exchange (its request, its result or ACK, or another rank's contribution not yet at the switch), retry_cnt %d allows %d retries; rank %d's QP failed",
				k.off, k.rank, broken, retryBudget-1, retryBudget-1, f.Rank)
		}
	}
	return ""
}

// AggregationSuite checks, for generated jobs and fault schedules, that
// every worker ends with the bit-exact rank-order sum. With random values,
// a contribution counted twice or not at all changes the sum, so an exact
// result also shows each rank counted exactly once. A job may end in a
// transport error only when its fault log shows a frame destroyed more
// often than the retry budget allows; any other transport error (a stall
// the transport cannot recover) is a failure, and a wrong result always
// is. Under the safe rule the suite stops at the first failure; under the
// paper's rule, whose stalls are known, it goes on looking for a wrong
// result, the finding users most need, and reports that.
func AggregationSuite(o SuiteOptions) []PropertyResult {
	name := "aggregation/release=" + o.Release.String()
	start := time.Now()
	res := PropertyResult{Name: name, Passed: true}
	o.record(&res)
	transport := 0
	var stall *struct {
		i    int
		c    aggCase
		out  aggOutcome
		seed uint64
	}
	report := func(i int, c aggCase, out aggOutcome, seed uint64) {
		o.reportAgg(&res, i, c, out, func(d aggCase) aggOutcome { return runAggCase(o, d, o.Release) },
			fmt.Sprintf("aggregation-%s-%s-%d", o.Release, out.fail, seed),
			o.rerun("--suite aggregation --release "+o.Release.String(), i))
	}
	for i := 0; i < o.Count; i++ {
		if !o.Shard.Owns(i) {
			continue
		}
		seed := caseSeed(o.Seed, name, i)
		o.startCase(name, i, seed)
		c := sample(aggCaseGen(seed), seed).(aggCase)
		c.fit(o)
		if o.DUT != nil {
			c = o.fitCase(c)
		} else {
			c.place()
		}
		c, out := res.settled(i, c, func(d aggCase) aggOutcome { return runAggCase(o, d, o.Release) })
		res.Cases++
		if out.transport {
			transport++
			res.Shard.transport(i)
		}
		if o.Progress != nil {
			o.Progress(name)
		}
		if out.fail == "" {
			continue
		}
		if o.Release == netreduce.Paper && out.fail == "transport" {
			if stall == nil {
				stall = &struct {
					i    int
					c    aggCase
					out  aggOutcome
					seed uint64
				}{i, c, out, seed}
				res.Shard.stalled(i, out.detail)
			}
			continue
		}
		report(i, c, out, seed)
		res.Shard.failed(i)
		break
	}
	if stall != nil {
		if res.Passed {
			report(stall.i, stall.c, stall.out, stall.seed)
		} else {
			res.Notes = append(res.Notes, stallNote(stall.i, stall.out.detail))
		}
	}
	if transport > 0 {
		res.Notes = append(res.Notes, transportNote(transport, res.Cases))
	}
	res.noteInconclusive()
	res.Wall = time.Since(start)
	return []PropertyResult{res}
}

// reportAgg is reportShrunk for an aggregation case judged by run.
func (o SuiteOptions) reportAgg(res *PropertyResult, i int, c aggCase, out aggOutcome, run func(aggCase) aggOutcome, file, replay string) {
	shrink := func(c aggCase, out aggOutcome) (aggCase, aggOutcome) { return shrinkAgg(o, c, run, out) }
	scenarioOf := func(c aggCase) *scenario.Scenario { return c.scenario(o.Release) }
	reportShrunk(o, res, i, c, out, shrink, scenarioOf, nil, file, replay)
}

// shrinkAgg makes a failing case smaller while it fails the same way (run
// judges a case): fewer faults, no random part, fewer workers, a smaller
// tensor, shorter messages, a smaller window and MTU.
func shrinkAgg(o SuiteOptions, c aggCase, run func(aggCase) aggOutcome, out aggOutcome) (aggCase, aggOutcome) {
	shrinkCase(&c, o.shrinkBudget(300), failsAs(run, &out), func(try func(aggCase) bool) bool {
		changed := false
		if c.Netem != "" {
			d := c
			d.Netem = ""
			changed = try(d) || changed
		}
		changed = dropEachEvent(c.Events, func(fewer []string) bool {
			d := c
			d.Events = fewer
			return try(d)
		}) || changed
		for _, w := range []int{2, c.Workers - 1} {
			if w >= 2 && w < c.Workers && portsFit(c.Events, w) {
				d := c
				d.Workers = w
				if try(d) {
					changed = true
					break
				}
			}
		}
		least := 1
		if c.Ring {
			least = c.Workers // a ring needs an element per rank
		}
		for _, e := range []int{least, c.Elems / 2} {
			if e >= least && e < c.Elems {
				d := c
				d.Elems = e
				if try(d) {
					changed = true
					break
				}
			}
		}
		for _, l := range []int{1, c.MsgLen / 2} {
			if l >= 1 && l < c.MsgLen {
				d := c
				d.MsgLen = l
				if try(d) {
					changed = true
					break
				}
			}
		}
		for _, n := range []int{1, c.Window - 1} {
			if n >= 1 && n < c.Window {
				d := c
				d.Window = n
				if try(d) {
					changed = true
					break
				}
			}
		}
		if c.MTU > 256 {
			d := c
			d.MTU = 256
			changed = try(d) || changed
		}
		if c.DType != tensor.F32 {
			d := c
			d.DType = tensor.F32
			changed = try(d) || changed
		}
		return changed
	})
	return c, out
}

// portsFit: every event's port exists with w workers.
func portsFit(events []string, w int) bool {
	for _, e := range events {
		for _, f := range strings.Fields(e) {
			var p int
			if _, err := fmt.Sscanf(f, "port=%d", &p); err == nil && p >= w {
				return false
			}
			if _, err := fmt.Sscanf(f, "spoof=%d", &p); err == nil && p >= w {
				return false
			}
		}
	}
	return true
}
