package experiment

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/endpoint"
	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// The loss tests make each of ESA's five loss cases (its §5.3; docs/esa.md)
// happen once, deterministically: a clean run's capture says which frame
// on which link direction is the one the case loses (the nth frame
// there), a drop event takes exactly that frame, and the faulted run's
// capture shows its ghost, so the test knows the case happened and not a
// neighbour of it. Each run must end exact, and the counters must show
// the recovery path the case takes.

// lossModel is two layers of 6,200 values (100 fragments each) in two
// partitions of 50: 200 fragments per iteration.
func lossModel(t testing.TB) *train.Model {
	const csv = "layer_index, numel, forward_pass_ns, backward_pass_ns, partitions\n" +
		"0, 6200, 10000, 0, 2\n1, 6200, 10000, 0, 2\n"
	m, err := train.ParseModel("loss", strings.NewReader(csv))
	require.NoError(t, err)
	return m
}

// lossConfig is jobs × workers under pol with aggs aggregators (0: the
// default pool, where two jobs' 256 window slots each rarely meet).
func lossConfig(t testing.TB, pol inaps.Policy, jobs, workers, aggs int) Config {
	m := lossModel(t)
	c := Config{Policy: pol, Aggregators: aggs, Seed: 11, StartSpread: time.Millisecond, Jitter: 300 * time.Microsecond}
	for j := range jobs {
		c.Jobs = append(c.Jobs, JobSpec{Name: string(rune('a' + j)), Model: m, Workers: workers})
	}
	return c
}

// psHost is job j's PS's host (port): the workers first, job after job,
// then one PS per job.
func psHost(c Config, j int) int {
	n := 0
	for _, s := range c.Jobs {
		n += s.Workers
	}
	return n + j
}

// workerHost is job j's worker w's host.
func workerHost(c Config, j, w int) int {
	n := 0
	for _, s := range c.Jobs[:j] {
		n += s.Workers
	}
	return n + w
}

// capFrame is one frame a link direction carried (or a ghost: one a fault
// dropped, written where it would have arrived).
type capFrame struct {
	at    time.Duration
	data  []byte
	ghost bool
	spec  string // the comments
}

// inaps is the frame's INA-PS header: the frame's own (EtherType
// 0x0700) or the one a channel message carries; ok false for neither
// (a channel ACK).
func (f capFrame) inaps() (h wire.INAPS, kind endpoint.Kind, ok bool) {
	switch {
	case inaps.IsINAPS(f.data):
		return wire.INAPS(f.data[inaps.HeaderOff:inaps.FrameLen]), 0, true
	case endpoint.IsChannel(f.data):
		k := endpoint.Kind(f.data[42])
		if len(f.data) >= endpoint.ChannelFrameLen {
			return wire.INAPS(f.data[52 : 52+wire.INAPSLen]), k, true
		}
		return nil, k, false
	}
	return nil, 0, false
}

func (f capFrame) String() string {
	h, k, ok := f.inaps()
	g := ""
	if f.ghost {
		g = " (ghost)"
	}
	switch {
	case !ok:
		return fmt.Sprintf("%v channel kind %#x%s", f.at, k, g)
	case k != 0:
		return fmt.Sprintf("%v channel kind %d job %d iter %d seq %d bitmap %#x%s", f.at, k, h.Job(), h.Key(), h.Seq(), h.Bitmap(), g)
	}
	return fmt.Sprintf("%v flags %#x job %d iter %d seq %d bitmap %#x agg %d prio %d tlen %d%s", f.at, h.Flags(), h.Job(), h.Key(), h.Seq(), h.Bitmap(), h.Aggregator(), h.Priority(), h.TensorLength(), g)
}

// frameKind names what an INA-PS frame (not a channel message) is, from
// its flags and fields: a worker's gradient, a result, a diverted
// gradient (a collision sent raw to the PS: it keeps its worker's
// tensor length), an evicted partial (built by the switch from an
// aggregator: tensor length 0), a reminder, a flushed or completed
// aggregate (fcfs).
func frameKind(f capFrame) string {
	h, k, ok := f.inaps()
	if !ok || k != 0 {
		return "channel"
	}
	fl := h.Flags() &^ wire.INAPSFlagECN
	switch {
	case fl&wire.INAPSFlagACK != 0:
		return "result"
	case h.IsReminder():
		return "reminder"
	case fl == 0:
		return "gradient" // or fcfs's completed aggregate to the PS
	case fl == wire.INAPSFlagResend:
		return "resend"
	case fl == wire.INAPSFlagCollision && h.TensorLength() != 0:
		return "diverted"
	case fl == wire.INAPSFlagCollision:
		return "evicted"
	}
	return "other"
}

// capture is a run's frames per link direction ("port3-in", "port3-out").
type capture map[string][]capFrame

func readCapture(t testing.TB, b []byte) capture {
	t.Helper()
	r, err := pcapio.NewReader("run.pcapng", bytes.NewReader(b))
	require.NoError(t, err)
	recs, names, err := r.All()
	require.NoError(t, err)
	c := capture{}
	for _, rec := range recs {
		n := names[rec.Info.InterfaceIndex]
		c[n] = append(c[n], capFrame{at: time.Duration(rec.Info.Timestamp.UnixNano()), data: rec.Data,
			ghost: pcapio.IsGhost(rec.Comments), spec: strings.Join(rec.Comments, "; ")})
	}
	return c
}

// dirName is the capture's name of host port's link direction: in is
// host to switch.
func dirName(port int, in bool) string {
	if in {
		return fmt.Sprintf("port%d-in", port)
	}
	return fmt.Sprintf("port%d-out", port)
}

// runCapture runs cfg with a capture and requires it exact.
func runCapture(t *testing.T, cfg Config) (*Result, capture) {
	t.Helper()
	var buf bytes.Buffer
	cfg.Capture = &buf
	res, err := Run(cfg)
	require.NoError(t, err)
	return res, readCapture(t, buf.Bytes())
}

// ghosts are the frames the events dropped, by link direction.
func (c capture) ghosts() map[string][]capFrame {
	g := map[string][]capFrame{}
	for n, fs := range c {
		for _, f := range fs {
			if f.ghost {
				g[n] = append(g[n], f)
			}
		}
	}
	return g
}

// nth is the 1-based place of the first frame on link direction dir for
// which want holds (0: none), as a drop event's nth= counts it: every
// frame the direction carries, in order.
func (c capture) nth(dir string, want func(capFrame) bool) (int, capFrame) {
	for i, f := range c[dir] {
		if want(f) {
			return i + 1, f
		}
	}
	return 0, capFrame{}
}

func drop(t testing.TB, port int, in bool, nth int) faults.Event {
	t.Helper()
	d := "out"
	if in {
		d = "in"
	}
	ev, err := faults.Parse(fmt.Sprintf("drop port=%d dir=%s nth=%d", port, d, nth))
	require.NoError(t, err)
	return ev
}

// requireExact fails with the run's failures and counters.
func requireExact(t *testing.T, r *Result) {
	t.Helper()
	require.True(t, r.Exact, "failures %v\nswitch %+v\nps %+v\nworkers %+v", r.Failures, r.Switch, r.PS, r.Workers)
}

func logCounters(t *testing.T, r *Result) {
	t.Helper()
	t.Logf("switch %+v", r.Switch)
	t.Logf("ps %+v", r.PS)
	t.Logf("workers %+v faults %+v", r.Workers, r.Faults)
}

// The determinism the tests rely on (the same config gives the same
// frames) is TestDeterminism's; a run's Wall is the one field that is
// not a function of its Config.
func sameRun(a, b *Result) bool {
	x, y := *a, *b
	x.Wall, y.Wall = 0, 0
	return reflect.DeepEqual(x, y)
}

// key is a fragment of a job: what the recovery of a loss is about.
type key struct {
	job  uint16
	iter uint64
	seq  uint16
}

func keyOfFrame(f capFrame) key {
	h, _, _ := f.inaps()
	return key{h.Job(), h.Key(), h.Seq()}
}

// recovery counts the messages about k that hosts sent (each counted
// once, on the link into the switch), by what they are: the worker's
// reminder to the PS ("worker-reminder"), the PS's to the switch
// ("ps-reminder", and "reminder-back:value" or "reminder-back:empty" on
// its return), the PS's resend request to worker w ("resend-request:w"),
// a worker's gradient over the channel ("retransmission:w"), the PS's
// query ("query"), a worker's answer ("answer"/"not-held"), the PS's
// unicast result ("parameter"), and a gradient sent again to the switch
// with isResend ("resend:w", fcfs and static).
func (c capture) recovery(k key, cfg Config) map[string]int {
	out := map[string]int{}
	for n, fs := range c {
		in := strings.HasSuffix(n, "-in")
		for _, f := range fs {
			if f.ghost {
				continue
			}
			h, kind, ok := f.inaps()
			if !ok || (key{h.Job(), h.Key(), h.Seq()}) != k {
				continue
			}
			w := bitIndex(h.Bitmap())
			switch kind {
			case 0:
				switch fk := frameKind(f); {
				case fk == "reminder" && in:
					out["ps-reminder"]++
				case fk == "reminder" && h.Bitmap() != 0:
					out["reminder-back:value"]++
				case fk == "reminder":
					out["reminder-back:empty"]++
				case fk == "resend" && in && isWorkerPort(cfg, n):
					out[fmt.Sprintf("resend:%d", w)]++
				}
			case endpoint.KindReminder:
				if in {
					out["worker-reminder"]++
				}
			case endpoint.KindResend:
				if !in {
					out[fmt.Sprintf("resend-request:%d", workerOfPort(cfg, n))]++
				}
			case endpoint.KindGradient:
				if in {
					out[fmt.Sprintf("retransmission:%d", w)]++
				}
			case endpoint.KindQuery:
				if !in {
					out["query"]++
				}
			case endpoint.KindAnswer:
				if in {
					out["answer"]++
				}
			case endpoint.KindNotHeld:
				if in {
					out["not-held"]++
				}
			case endpoint.KindParameter:
				if !in {
					out["parameter"]++
				}
			}
		}
	}
	return out
}

func bitIndex(b uint32) int {
	for i := range 32 {
		if b&(1<<i) != 0 {
			return i
		}
	}
	return 32
}

func portOf(name string) int {
	var p int
	fmt.Sscanf(name, "port%d-", &p)
	return p
}

func isWorkerPort(cfg Config, name string) bool { return portOf(name) < psHost(cfg, 0) }

// workerOfPort is the rank of the worker on a port (its job's).
func workerOfPort(cfg Config, name string) int {
	p := portOf(name)
	for _, s := range cfg.Jobs {
		if p < s.Workers {
			return p
		}
		p -= s.Workers
	}
	return -1
}

// lossCase is one loss made to happen: the clean run, the frame chosen
// and its place, the faulted run.
type lossCase struct {
	cfg          Config
	clean, fault *Result
	cleanCap     capture
	faultCap     capture
	dir          string
	lost         capFrame
	key          key
	got          map[string]int // recovery of key in the faulted run
}

// makeLoss runs cfg clean, takes the first frame on link direction
// (port, in) that pick accepts, drops it (the nth frame of that
// direction) in a second run, and requires that run to have dropped
// exactly it and to end exact.
func makeLoss(t *testing.T, cfg Config, port int, in bool, pick func(c capture, f capFrame) bool) *lossCase {
	t.Helper()
	lc := &lossCase{cfg: cfg, dir: dirName(port, in)}
	lc.clean, lc.cleanCap = runCapture(t, cfg)
	requireExact(t, lc.clean)
	nth, f := lc.cleanCap.nth(lc.dir, func(f capFrame) bool { return pick(lc.cleanCap, f) })
	require.Positive(t, nth, "no frame on %s to lose (%d frames there)", lc.dir, len(lc.cleanCap[lc.dir]))
	lc.lost, lc.key = f, keyOfFrame(f)
	cfg.Events = append(cfg.Events, drop(t, port, in, nth))
	lc.fault, lc.faultCap = runCapture(t, cfg)
	g := lc.faultCap.ghosts()
	require.Len(t, g, 1, "one direction lost a frame")
	require.Len(t, g[lc.dir], 1, "the frame lost is on %s", lc.dir)
	require.Equal(t, f.data, g[lc.dir][0].data, "the frame lost is the %dth on %s: %s, not %s", nth, lc.dir, f, g[lc.dir][0])
	require.EqualValues(t, 1, lc.fault.Faults.Dropped)
	lc.got = lc.faultCap.recovery(lc.key, cfg)
	t.Logf("lost %s on %s (nth=%d); recovery of job %d iteration %d seq %d: %v", f, lc.dir, nth, lc.key.job, lc.key.iter, lc.key.seq, lc.got)
	logCounters(t, lc.fault)
	requireExact(t, lc.fault)
	return lc
}

// quiet reports whether the clean run needed no recovery for f's
// fragment (no channel message, no resend, no reminder about it), so
// that whatever the faulted run does about it is the loss's recovery.
func quiet(cfg Config) func(c capture, f capFrame) bool {
	return func(c capture, f capFrame) bool { return len(c.recovery(keyOfFrame(f), cfg)) == 0 }
}

func kindIs(kind string, also ...func(c capture, f capFrame) bool) func(c capture, f capFrame) bool {
	return func(c capture, f capFrame) bool {
		if frameKind(f) != kind {
			return false
		}
		for _, a := range also {
			if !a(c, f) {
				return false
			}
		}
		return true
	}
}

func (lc *lossCase) requireRecovery(t *testing.T, what ...string) {
	t.Helper()
	for _, w := range what {
		require.Positive(t, lc.got[w], "no %s for the lost fragment: %v", w, lc.got)
	}
}

// Case 1 (no collision, no preemption): a worker's gradient is lost on
// its uplink. Under ESA the PS knows nothing: the workers' reminder
// (dupACK or timeout) reaches the PS, the PS reminds the switch, which
// returns the others' partial, and the PS asks the worker that lost it
// alone to resend over the channel. SwitchML- and ATP-style workers send
// it to the switch again (isResend).
func TestLossCase1GradientLostOnUplink(t *testing.T) {
	for _, pol := range []inaps.Policy{inaps.ESA, inaps.FCFS, inaps.Static} {
		t.Run(pol.String(), func(t *testing.T) {
			cfg := lossConfig(t, pol, 2, 3, 0)
			port := workerHost(cfg, 0, 1)
			lc := makeLoss(t, cfg, port, true, kindIs("gradient", func(_ capture, f capFrame) bool {
				h, _, _ := f.inaps()
				return h.Seq() == 20
			}))
			require.Zero(t, lc.fault.Switch.Collisions, "no collision")
			switch pol {
			case inaps.ESA:
				lc.requireRecovery(t, "worker-reminder", "ps-reminder", "reminder-back:value", "resend-request:1", "retransmission:1")
				require.Equal(t, 1, lc.got["resend-request:1"]+lc.got["resend-request:0"]+lc.got["resend-request:2"], "selective: only the worker that lost it resends")
				require.Positive(t, lc.fault.PS.WorkerReminder)
				require.Positive(t, lc.fault.PS.RemindersValue)
				require.Positive(t, lc.fault.PS.ResendRequests)
				require.Positive(t, lc.fault.Workers.Retransmits)
			case inaps.FCFS:
				lc.requireRecovery(t, "resend:1")
				require.Positive(t, lc.fault.Switch.Flushed)
			case inaps.Static:
				lc.requireRecovery(t, "resend:1")
				require.Positive(t, lc.fault.Workers.Retransmits)
			}
		})
	}
}

// seqIs picks the frames of fragment seq.
func seqIs(seq uint16) func(c capture, f capFrame) bool {
	return func(_ capture, f capFrame) bool {
		h, _, _ := f.inaps()
		return h.Seq() == seq
	}
}

// Case 2 (no collision, no preemption): the switch's result multicast is
// lost to one worker. Under ESA that worker reminds the PS; the PS
// reminds the switch, which holds nothing (the task completed and its
// aggregator is free), so the PS queries every worker, one answers from
// its cache, and the PS sends the result on. ATP-style, the worker's
// isResend reaches the PS, which answers it again; SwitchML-style, the
// switch answers it from the slot's kept copy.
func TestLossCase2ResultLostToOneWorker(t *testing.T) {
	for _, pol := range []inaps.Policy{inaps.ESA, inaps.FCFS, inaps.Static} {
		t.Run(pol.String(), func(t *testing.T) {
			cfg := lossConfig(t, pol, 2, 3, 0)
			lc := makeLoss(t, cfg, workerHost(cfg, 1, 2), false, kindIs("result", seqIs(20)))
			require.Zero(t, lc.fault.Switch.Collisions, "no collision")
			switch pol {
			case inaps.ESA:
				lc.requireRecovery(t, "worker-reminder", "ps-reminder", "reminder-back:empty", "query", "answer")
				require.Equal(t, 3, lc.got["query"], "the PS asks every worker of the job")
				require.Positive(t, lc.fault.PS.RemindersEmpty)
				require.Positive(t, lc.fault.PS.Queries)
				require.Positive(t, lc.fault.PS.QueryForwarded)
				require.Positive(t, lc.fault.Workers.QueryAnswers)
				require.Zero(t, lc.fault.PS.ResendRequests, "a worker held the result: nobody resends")
			case inaps.FCFS:
				lc.requireRecovery(t, "resend:2")
				require.Positive(t, lc.fault.PS.Reanswers)
			case inaps.Static:
				lc.requireRecovery(t, "resend:2")
				require.Positive(t, lc.fault.Switch.Retransmits, "answered from the slot's kept result")
			}
		})
	}
}

// Case 2, when no worker received the result: the PS's queries all come
// back "not held", so the PS aggregates the fragment itself: every
// worker resends over the channel.
func TestLossCase2ResultLostToEveryWorker(t *testing.T) {
	cfg := lossConfig(t, inaps.ESA, 2, 3, 0)
	_, clean := runCapture(t, cfg)
	var k key
	for w := range 3 {
		port := workerHost(cfg, 0, w)
		nth, f := clean.nth(dirName(port, false), func(f capFrame) bool { return frameKind(f) == "result" && seqIs(30)(clean, f) })
		require.Positive(t, nth)
		k = keyOfFrame(f)
		cfg.Events = append(cfg.Events, drop(t, port, false, nth))
	}
	r, c := runCapture(t, cfg)
	got := c.recovery(k, cfg)
	t.Logf("recovery of job %d iteration %d seq %d: %v", k.job, k.iter, k.seq, got)
	logCounters(t, r)
	requireExact(t, r)
	require.EqualValues(t, 3, r.Faults.Dropped)
	require.Zero(t, r.Switch.Collisions)
	for _, w := range []string{"worker-reminder", "ps-reminder", "reminder-back:empty", "query", "not-held",
		"resend-request:0", "resend-request:1", "resend-request:2", "retransmission:0", "retransmission:1", "retransmission:2"} {
		require.Positive(t, got[w], "no %s: %v", w, got)
	}
	require.Zero(t, got["answer"], "nobody held it")
	require.Zero(t, r.PS.QueryForwarded)
	require.Positive(t, r.Switch.PSMulticasts, "the PS multicast the result it aggregated")
}

// collisionConfig is three jobs of three workers sharing 600
// aggregators: a few hundred collisions, most fragments untouched.
func collisionConfig(t testing.TB, pol inaps.Policy) Config {
	return lossConfig(t, pol, 3, 3, 600)
}

// psWith is the port of the first job's PS whose downlink, in a clean
// run of cfg, carries a frame pick accepts.
func psWith(t *testing.T, cfg Config, pick func(c capture, f capFrame) bool) int {
	t.Helper()
	_, c := runCapture(t, cfg)
	for j := range cfg.Jobs {
		if n, _ := c.nth(dirName(psHost(cfg, j), false), func(f capFrame) bool { return pick(c, f) }); n > 0 {
			return psHost(cfg, j)
		}
	}
	t.Fatalf("no PS downlink carries a frame to lose")
	return 0
}

// Case 3 (collision, no preemption): a gradient the switch diverted to
// the PS (it failed to preempt) is lost on the PS's downlink. Recovery
// is the workers' reminder; the PS, reminding the switch, finds the
// contribution missing and asks its worker to resend. ATP-style, the
// workers send isResend to the switch.
func TestLossCase3DivertedGradientLost(t *testing.T) {
	for _, pol := range []inaps.Policy{inaps.ESA, inaps.FCFS} {
		t.Run(pol.String(), func(t *testing.T) {
			cfg := collisionConfig(t, pol)
			pick := kindIs("diverted", quiet(cfg))
			lc := makeLoss(t, cfg, psWith(t, cfg, pick), false, pick)
			h, _, _ := lc.lost.inaps()
			w := bitIndex(h.Bitmap())
			require.Positive(t, lc.fault.Switch.Collisions)
			require.Positive(t, lc.fault.Switch.Diverted)
			switch pol {
			case inaps.ESA:
				require.Positive(t, lc.fault.Switch.FailedPreempts)
				lc.requireRecovery(t, "worker-reminder", "ps-reminder", fmt.Sprintf("resend-request:%d", w), fmt.Sprintf("retransmission:%d", w))
			case inaps.FCFS:
				lc.requireRecovery(t, fmt.Sprintf("resend:%d", w))
			}
		})
	}
}

// Case 4 (collision, preemption): the partial a preemption evicted is
// lost on the PS's downlink. The workers it named never get the result:
// their reminder reaches the PS, which asks them to resend.
func TestLossCase4EvictedPartialLost(t *testing.T) {
	for _, pol := range []inaps.Policy{inaps.ESA, inaps.Straw1} {
		t.Run(pol.String(), func(t *testing.T) {
			cfg := collisionConfig(t, pol)
			pick := kindIs("evicted", quiet(cfg))
			lc := makeLoss(t, cfg, psWith(t, cfg, pick), false, pick)
			h, _, _ := lc.lost.inaps()
			require.Positive(t, lc.fault.Switch.Preemptions)
			require.Positive(t, lc.fault.Switch.Evicted)
			lc.requireRecovery(t, "worker-reminder", "ps-reminder")
			for w := range 3 {
				if h.Bitmap()&(1<<w) != 0 {
					lc.requireRecovery(t, fmt.Sprintf("resend-request:%d", w), fmt.Sprintf("retransmission:%d", w))
				}
			}
		})
	}
}

// Case 5 (collision, preemption): a task's partial was evicted to the PS
// (so the PS has an entry), then another worker's gradient of the same
// task is lost on its way to the switch. The PS's reminder recovers it:
// the switch returns what it holds and the PS asks the worker that lost
// its gradient to resend.
func TestLossCase5OtherWorkersPacketOfPreemptedTaskLost(t *testing.T) {
	for _, pol := range []inaps.Policy{inaps.ESA, inaps.Straw1} {
		t.Run(pol.String(), func(t *testing.T) {
			cfg := collisionConfig(t, pol)
			_, clean := runCapture(t, cfg)
			// The first evicted partial of job 1 whose fragment needed no
			// other recovery, naming fewer than all its workers, and a
			// missing worker's gradient that reached the switch after it.
			for j := range cfg.Jobs {
				for _, ev := range clean[dirName(psHost(cfg, j), false)] {
					h, _, _ := ev.inaps()
					if frameKind(ev) != "evicted" || h.Bitmap() == 7 || len(clean.recovery(keyOfFrame(ev), cfg)) != 0 {
						continue
					}
					for w := range 3 {
						if h.Bitmap()&(1<<w) != 0 {
							continue
						}
						port := workerHost(cfg, j, w)
						nth, g := clean.nth(dirName(port, true), func(f capFrame) bool {
							return frameKind(f) == "gradient" && keyOfFrame(f) == keyOfFrame(ev) && f.at > ev.at
						})
						if nth == 0 {
							continue
						}
						t.Logf("evicted %s; dropping worker %d's %s", ev, w, g)
						lc := makeLoss(t, cfg, port, true, func(_ capture, f capFrame) bool { return bytes.Equal(f.data, g.data) })
						require.Positive(t, lc.fault.Switch.Evicted)
						lc.requireRecovery(t, "ps-reminder", fmt.Sprintf("resend-request:%d", w), fmt.Sprintf("retransmission:%d", w))
						return
					}
				}
			}
			t.Fatal("no evicted partial with a later gradient of its task to lose")
		})
	}
}

var allPolicies = []inaps.Policy{inaps.Static, inaps.FCFS, inaps.ESA, inaps.Straw1, inaps.Straw2}

// TestLossNetem: duplicated, reordered and corrupted frames on every
// link, with collisions and preemptions, leave every policy exact. A
// corrupted INA-PS frame (or channel datagram) carries no check of its
// own: the receiving MAC's FCS drops it, so corruption is loss there.
func TestLossNetem(t *testing.T) {
	for _, c := range []struct {
		name, netem string
		check       func(t *testing.T, r *Result)
	}{
		{"duplicate", "duplicate 2%", func(t *testing.T, r *Result) { require.Positive(t, r.Faults.Duplicated) }},
		{"reorder", "delay 20us reorder 10%", func(t *testing.T, r *Result) { require.Positive(t, r.Faults.Reordered) }},
		{"corrupt", "corrupt 0.5%", func(t *testing.T, r *Result) {
			require.Positive(t, r.Faults.Corrupted)
			require.Positive(t, r.FCSDrops, "corrupted INA-PS frames die at the FCS")
		}},
	} {
		for _, pol := range allPolicies {
			t.Run(c.name+"/"+pol.String(), func(t *testing.T) {

				cfg := collisionConfig(t, pol)
				var err error
				cfg.Netem, err = faults.ParseNetem(c.netem)
				require.NoError(t, err)
				r, err := Run(cfg)
				require.NoError(t, err)
				requireExact(t, r)
				c.check(t, r)
				if pol != inaps.Static {
					require.Positive(t, r.Switch.Collisions)
				}
				t.Logf("faults %+v, FCS drops %d; switch: %d collisions, %d preemptions, %d duplicates; ps: %d reminders, %d resend requests; workers: %d reminders, %d retransmissions, %d duplicate results",
					r.Faults, r.FCSDrops, r.Switch.Collisions, r.Switch.Preemptions, r.Switch.Duplicates, r.PS.Reminders, r.PS.ResendRequests, r.Workers.Reminders, r.Workers.Retransmits, r.Workers.DupResults)
			})
		}
	}
}

// TestLossPSDelayBeyondRTO: a PS slower than the retransmission timer's
// floor (3 ms per fragment it completes, RTO_min 1 ms) makes workers
// and the PS time out on fragments that are not lost; the duplicates
// this sets off (reminders, resends, results twice) must not change any
// sum.
func TestLossPSDelayBeyondRTO(t *testing.T) {
	for _, pol := range allPolicies {
		t.Run(pol.String(), func(t *testing.T) {
			cfg := collisionConfig(t, pol)
			cfg.PSDelay = 3 * time.Millisecond
			r, err := Run(cfg)
			require.NoError(t, err)
			requireExact(t, r)
			if pol.HasPS() {
				require.Positive(t, r.PS.Completed)
				require.Positive(t, r.Workers.Timeouts, "fragments the PS completes come after the workers' RTO")
			}
			t.Logf("jct %v; ps %+v; workers: %d timeouts, %d dupACKs, %d reminders, %d retransmissions, %d duplicate results",
				r.MeanJCT, r.PS, r.Workers.Timeouts, r.Workers.DupACKs, r.Workers.Reminders, r.Workers.Retransmits, r.Workers.DupResults)
		})
	}
}

// TestDeterminism: the same Config twice gives the same Result (every
// counter, every job's JCT and iteration times), with random faults on
// every link; only the wall time differs.
func TestDeterminism(t *testing.T) {
	em, err := faults.ParseNetem("loss 0.5% duplicate 1% corrupt 0.2%")
	require.NoError(t, err)
	for _, pol := range allPolicies {
		t.Run(pol.String(), func(t *testing.T) {
			cfg := collisionConfig(t, pol)
			cfg.Netem = em
			cfg.Iterations = 2
			a, err := Run(cfg)
			require.NoError(t, err)
			b, err := Run(cfg)
			require.NoError(t, err)
			require.Positive(t, a.Faults.Lost)
			t.Logf("exact %v, jct %v, %d lost, %d duplicated, %d corrupted", a.Exact, a.MeanJCT, a.Faults.Lost, a.Faults.Duplicated, a.Faults.Corrupted)
			require.True(t, sameRun(a, b), "two runs of one config differ:\n%+v\n%+v", a, b)
			cfg.Seed++
			c, err := Run(cfg)
			require.NoError(t, err)
			require.False(t, sameRun(a, c), "another seed, the same run")
		})
	}
}
