package emu

import (
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/tensor"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/roce"
)

// Mode is the allreduce algorithm.
type Mode uint8

const (
	NetReduce Mode = iota // the ring of RC WRITEs through the aggregating switch
	Ring                  // Ring-AllReduce: reduce-scatter then all-gather; the switch only forwards
)

func (m Mode) String() string { return [...]string{"netreduce", "ring"}[m&1] }

// ParseMode reads netreduce or ring.
func ParseMode(s string) (Mode, error) {
	switch s {
	case "netreduce":
		return NetReduce, nil
	case "ring":
		return Ring, nil
	}
	return 0, fmt.Errorf("mode %q: want netreduce or ring", s)
}

// Config is one allreduce job on one fabric.
type Config struct {
	Workers     int
	Mode        Mode
	Window      int   // NetReduce N: messages in flight per worker
	MsgLen      int   // packets per message (both modes)
	MTU         int   // path MTU
	TensorBytes int64 // per worker
	DType       tensor.DType
	Pattern     tensor.Pattern
	Transport   frames.Transport
	Link        LinkConfig
	Timing      SwitchTiming // zero: DefaultTiming
	Release     netreduce.Release
	Seed        uint64
	Netem       faults.Netem
	Events      []faults.Event
	// Timeout is the QPs' local ACK timeout exponent (4.096 µs × 2^Timeout)
	// and RetryCnt their retry count (0-7).
	Timeout  uint8
	RetryCnt uint8
	// NIC is the hosts' transport behaviour profile (roce.Commodity by
	// default; roce.RXE models Linux soft-RoCE).
	NIC roce.Profile
	// MaxVirtual bounds the job's virtual time (0: one minute).
	MaxVirtual time.Duration
	// MaxMemory is the memory the job may need (EstimateMemory); 0: what
	// the machine has available, negative: no limit.
	MaxMemory int64
	Capture   io.Writer
	// Devices, if set, runs the job on real interfaces (the TAP backend):
	// wall-clock time, no emulated links, so no faults, capture or link
	// model; MaxVirtual bounds the wall time. Only the ranks with a device
	// run (and are checked) here.
	Devices *Devices
}

// DefaultConfig is `inaemu run` with no flags.
func DefaultConfig() Config {
	return Config{Workers: 8, Mode: NetReduce, Window: 2, MsgLen: 170, MTU: 1024, TensorBytes: 16 << 20,
		DType: tensor.F32, Transport: frames.V2IPv4, Link: LinkConfig{Rate: 10e9, Latency: time.Microsecond},
		Timeout: 14, RetryCnt: 7}
}

// ConfigError is a job that cannot be set up as described (usage error).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// JobError is a job that failed in the network: a QP's work completed in
// error (retries exhausted, ...) or the job could not finish.
type JobError struct {
	Msg string
	// QP, when a queue pair's work completed in error, says which.
	QP *QPFailure
}

// QPFailure names the queue pair whose work completed in error: rank's
// send QP (requests to Peer, the next rank) or receive QP (requests from
// Peer, the previous rank), and the completion status.
type QPFailure struct {
	Rank, Peer int
	Send       bool
	Status     roce.Status
}

func (e *JobError) Error() string { return e.Msg }

// Mismatch is the first element where a worker's result differs from the
// reference.
type Mismatch struct {
	Rank    int    `json:"rank"`
	Element int64  `json:"element"`
	Got     string `json:"got"`
	Want    string `json:"want"`
}

// SwitchReport is the switch part of a Result.
type SwitchReport struct {
	netreduce.Stats
	SwitchStats
}

// Result is what a job did.
type Result struct {
	Exact           bool          `json:"exact"`
	Mode            string        `json:"mode"`
	Backend         string        `json:"backend"` // emu (virtual time) or tap (wall-clock time on devices)
	Ranks           []int         `json:"ranks"`   // the ranks that ran, and were checked, in this process
	Workers         int           `json:"workers"`
	Bytes           int64         `json:"bytes"`
	DType           string        `json:"dtype"`
	Transport       string        `json:"transport"`
	Release         string        `json:"release,omitempty"`
	NIC             string        `json:"nic"`
	Seed            uint64        `json:"seed"`
	VirtualNS       int64         `json:"virtual_ns"`
	AlgBWGbps       float64       `json:"algbw_gbps"`
	BusBWGbps       float64       `json:"busbw_gbps"`
	FramesSent      uint64        `json:"frames_sent"`
	Retransmissions uint64        `json:"retransmissions"`
	NAKs            uint64        `json:"naks"`
	Timeouts        uint64        `json:"timeouts"`
	ICRCDrops       uint64        `json:"icrc_drops"`
	FaultDrops      uint64        `json:"fault_drops"`
	QueueDrops      uint64        `json:"queue_drops"`
	Faults          faults.Stats  `json:"faults"`
	Switch          SwitchReport  `json:"switch"`
	Mismatch        *Mismatch     `json:"mismatch,omitempty"`
	Error           string        `json:"error,omitempty"`
	Events          int           `json:"events"`
	WallNS          int64         `json:"wall_ns"`
	Wall            time.Duration `json:"-"`
}

// Validate reports a configuration Run would reject, as a *ConfigError.
func (c *Config) Validate() error {
	bad := func(f string, a ...any) error { return &ConfigError{fmt.Errorf(f, a...)} }
	switch {
	case c.Workers < 2 || c.Workers > netreduce.MaxWorkers:
		return bad("--workers %d: want 2..%d", c.Workers, netreduce.MaxWorkers)
	case c.Mode == NetReduce && (c.Window < 1 || c.Window > netreduce.MaxWindow):
		return bad("--window %d: want 1..%d", c.Window, netreduce.MaxWindow)
	case c.MsgLen < 1 || c.MsgLen > netreduce.MaxMsgLen:
		return bad("--msg-len %d: want 1..%d packets (the INA header's MsgLen is 8 bits)", c.MsgLen, netreduce.MaxMsgLen)
	case c.MTU != 256 && c.MTU != 512 && c.MTU != 1024 && c.MTU != 2048 && c.MTU != 4096:
		return bad("--mtu %d: want 256, 512, 1024, 2048 or 4096", c.MTU)
	case c.DType > tensor.F16:
		return bad("unknown dtype")
	case c.TensorBytes <= 0 || c.TensorBytes%int64(c.DType.Size()) != 0:
		return bad("--tensor %d bytes: want a positive multiple of the %s element size (%d)", c.TensorBytes, c.DType, c.DType.Size())
	case c.TensorBytes > 4<<30:
		return bad("--tensor %d bytes: at most 4GiB per worker", c.TensorBytes)
	case c.Mode == Ring && c.TensorBytes/int64(c.DType.Size()) < int64(c.Workers):
		return bad("--tensor: ring mode needs at least one element per worker")
	case !(c.Link.Rate > 0) || math.IsInf(c.Link.Rate, 0):
		return bad("--link: rate must be a positive number of bits per second")
	case c.Link.Queue < 0:
		return bad("--queue %d: want a positive number of frames (0: the default, 1000)", c.Link.Queue)
	case c.Link.Latency < 0:
		return bad("--latency: must not be negative")
	case c.Timeout > 31 || c.RetryCnt > 7:
		return bad("timeout exponent 0..31, retry count 0..7")
	case c.Devices != nil && (c.Netem != (faults.Netem{}) || len(c.Events) > 0):
		return bad("faults act on emulated links; the TAP backend has none (run without --backend tap to inject them)")
	case c.Devices != nil && c.Capture != nil:
		return bad("--pcap records emulated links; on TAPs capture on the bridges (tshark -i PREFIX-br0 ...)")
	}
	return c.validateJob() // durations, fault targets, memory (validate.go)
}

// job is an allreduce algorithm running on the fabric's hosts.
type job interface {
	// start posts the first work requests.
	start() error
	// onCompletion handles host r's new completions.
	onCompletion(w *worker)
	// check compares every worker's result with the reference.
	check() *Mismatch
}

// worker is one rank: a QP to its successor and one from its predecessor.
type worker struct {
	rank     int
	local    bool // runs in this process (always, but with Devices)
	h        *Host
	sq, rq   *roce.QP
	recvMR   *roce.MR
	sendDone int
	recvDone int
	sendWant int // send WRs the job posts in all
	recvWant int // results (receive completions) the job expects
	doneAt   time.Duration
	cqe      [64]roce.Completion
}

// runner drives one job to its end.
type runner struct {
	cfg     Config
	fab     *Fabric
	workers []*worker
	psns    ringPSNs // the connections' initial PSNs, from the seed
	job     job
	err     error
	started bool          // the job's first work requests are posted
	startAt time.Duration // when (live: after the start barrier)
}

// local lists the workers that run in this process.
func (r *runner) local() []*worker {
	var l []*worker
	for _, w := range r.workers {
		if w.local {
			l = append(l, w)
		}
	}
	return l
}

// QP numbers on every host: rxe hands out 17 first, like a fresh host.
const (
	sendQPN = 0x11
	recvQPN = 0x12
)

// Run builds the fabric, runs the job to its end and checks the result.
// A *ConfigError means the configuration is unusable; a *JobError that the
// job failed in the network (the Result then says what happened so far).
func Run(cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxVirtual == 0 {
		cfg.MaxVirtual = time.Minute
	}
	wallStart := time.Now()
	r, err := newRunner(cfg)
	if err != nil {
		return nil, err
	}
	var res *Result
	if r.fab.Live() {
		res = r.serve()
	} else {
		if err := r.job.start(); err != nil {
			return nil, &ConfigError{err}
		}
		r.started = true
		res = r.loop()
	}
	res.Wall = time.Since(wallStart)
	res.WallNS = int64(res.Wall)
	if cerr := r.fab.CloseCapture(); cerr != nil && r.err == nil {
		r.err = fmt.Errorf("capture: %w", cerr)
	}
	if r.err != nil {
		res.Error = r.err.Error()
		var je *JobError
		if !errors.As(r.err, &je) {
			return res, &JobError{Msg: r.err.Error()}
		}
		return res, r.err
	}
	res.Mismatch = r.job.check()
	res.Exact = res.Mismatch == nil
	return res, nil
}

// newRunner builds the fabric, the workers' QPs and buffers, the job and
// the connections; the job is ready to start.
func newRunner(cfg Config) (*runner, error) {
	var fab *Fabric
	var err error
	if cfg.Devices != nil {
		fab, err = NewLiveFabric(cfg.Workers, cfg.Transport, cfg.Timing, *cfg.Devices)
	} else {
		fab, err = NewFabric(FabricConfig{Hosts: cfg.Workers, Transport: cfg.Transport, Link: cfg.Link, Timing: cfg.Timing,
			Netem: cfg.Netem, Events: cfg.Events, Seed: cfg.Seed, Capture: cfg.Capture})
	}
	if err != nil {
		return nil, &ConfigError{err}
	}
	r := &runner{cfg: cfg, fab: fab, psns: initialPSNs(cfg.Seed, cfg.Workers)}
	for i, h := range fab.Hosts {
		r.workers = append(r.workers, &worker{rank: i, h: h, sq: h.NewQP(sendQPN), rq: h.NewQP(recvQPN), local: !fab.Live() || h.live})
	}
	if len(r.local()) == 0 {
		fab.Close()
		return nil, &ConfigError{errors.New("no worker has a device: nothing would run here")}
	}
	switch cfg.Mode {
	case NetReduce:
		r.job, err = newNetReduceJob(r)
	default:
		r.job, err = newRingJob(r)
	}
	if err != nil {
		fab.Close()
		return nil, &ConfigError{err}
	}
	if err := r.connect(); err != nil {
		fab.Close()
		return nil, &ConfigError{err}
	}
	for _, w := range r.local() {
		w := w
		w.h.OnCompletion = func() { r.poll(w) }
		if !fab.Live() {
			w.h.SendControl(w.h.GratuitousARP())
		}
	}
	return r, nil
}

// connect makes the ring of RC connections (the job has set up its
// buffers): rank r's send QP to rank r+1's receive QP. Initial PSNs are
// drawn from the seed.
func (r *runner) connect() error {
	psns := r.psns
	n := r.cfg.Workers
	// Queues deep enough for everything the job posts (the job posts every
	// receive up front, so no RNR NAK ever slows it).
	maxWR := 1
	for _, w := range r.workers {
		maxWR = max(maxWR, w.sendWant+1, w.recvWant+1)
	}
	base := roce.Config{MTU: r.cfg.MTU, Timeout: r.cfg.Timeout, RetryCnt: r.cfg.RetryCnt, RNRRetry: 7, MinRNRTimer: 1,
		MaxSendWR: maxWR, MaxRecvWR: maxWR, Profile: r.cfg.NIC}
	for _, w := range r.workers {
		sc := base
		sc.SQPSN, sc.RQPSN = psns.send[w.rank], psns.sendR[w.rank] // only ACKs arrive on a send QP
		if err := w.sq.Connect(w.h.PathTo(r.workers[(w.rank+1)%n].h, recvQPN), sc); err != nil {
			return err
		}
	}
	for _, w := range r.workers {
		pred := r.workers[(w.rank+n-1)%n]
		rc := base
		rc.SQPSN, rc.RQPSN = psns.recv[w.rank], pred.sq.Config().SQPSN
		if err := w.rq.Connect(w.h.PathTo(pred.h, sendQPN), rc); err != nil {
			return err
		}
	}
	return nil
}

// ringPSNs are a job's initial PSNs: per rank, its send QP's first PSN
// (the first PSN of its ring connection), the PSN its send QP expects (only
// ACKs arrive there), and its receive QP's first PSN (its ACKs).
type ringPSNs struct{ send, sendR, recv []uint32 }

// initialPSNs draws the job's initial PSNs from the seed, so a switch told
// the seed knows where each connection's first message starts.
func initialPSNs(seed uint64, n int) ringPSNs {
	rng := rand.New(rand.NewPCG(seed, 0x9E3779B9))
	psn := func() uint32 { return uint32(rng.Uint64()) & 0xFFFFFF }
	p := ringPSNs{make([]uint32, n), make([]uint32, n), make([]uint32, n)}
	for r := range n {
		p.send[r], p.sendR[r] = psn(), psn()
	}
	for r := range n {
		p.recv[r] = psn()
	}
	return p
}

// poll drains a worker's CQs into the job.
func (r *runner) poll(w *worker) {
	if r.err != nil {
		return
	}
	r.job.onCompletion(w)
}

// fail stops the job with a transport error naming the QP and the reason.
func (r *runner) fail(w *worker, q *roce.QP, c roce.Completion, what string) {
	if r.err != nil {
		return
	}
	peer := (w.rank + 1) % r.cfg.Workers
	dir := "send QP to rank"
	if q == w.rq {
		peer, dir = (w.rank+r.cfg.Workers-1)%r.cfg.Workers, "receive QP from rank"
	}
	r.err = &JobError{Msg: fmt.Sprintf("rank %d %s %d (QPN %#x): %s completed with %s at %v (%s)",
		w.rank, dir, peer, q.QPN(), what, c.Status, r.fab.Clock.Now(), qpCounters(q)),
		QP: &QPFailure{Rank: w.rank, Peer: peer, Send: q == w.sq, Status: c.Status}}
}

func qpCounters(q *roce.QP) string {
	c := q.Counters
	return fmt.Sprintf("sent %d, retransmitted %d, NAKs received %d, timeouts %d", c.SentPkts, c.RetransmittedPkts, c.PacketSeqErr, c.LocalAckTimeoutErr)
}

func (r *runner) finished() bool {
	if !r.started {
		return false
	}
	for _, w := range r.workers { // not r.local(): this runs every event and must not allocate
		if w.local && (w.recvDone < w.recvWant || w.sendDone < w.sendWant) {
			return false
		}
	}
	return true
}

// loop runs the event loop until the job is done, fails or runs out of
// virtual time, and fills in the counters.
func (r *runner) loop() *Result {
	c := r.fab.Clock
	events := 0
	for r.err == nil && !r.finished() {
		if !c.Step() {
			r.err = &JobError{Msg: fmt.Sprintf("job stalled at %v: nothing left to happen but %s", c.Now(), r.progress())}
			break
		}
		events++
		if c.Now() > r.cfg.MaxVirtual {
			r.err = &JobError{Msg: fmt.Sprintf("job did not finish within %v of virtual time: %s", r.cfg.MaxVirtual, r.progress())}
		}
	}
	return r.result(events)
}

func (r *runner) progress() string {
	s := ""
	for _, w := range r.local() {
		s += fmt.Sprintf(" rank %d %d/%d results %d/%d sends;", w.rank, w.recvDone, w.recvWant, w.sendDone, w.sendWant)
	}
	return s
}

func (r *runner) result(events int) *Result {
	cfg := r.cfg
	res := &Result{Mode: cfg.Mode.String(), Workers: cfg.Workers, Bytes: cfg.TensorBytes, DType: cfg.DType.String(),
		Transport: cfg.Transport.String(), NIC: cfg.NIC.String(), Seed: cfg.Seed, Events: events, Backend: "emu"}
	if r.fab.Live() {
		res.Backend = "tap"
	}
	for _, w := range r.local() {
		res.Ranks = append(res.Ranks, w.rank)
	}
	if cfg.Mode == NetReduce {
		res.Release = cfg.Release.String()
	}
	var done time.Duration
	for _, w := range r.workers {
		done = max(done, w.doneAt)
		res.FramesSent += w.h.Stats.RoCESent + w.h.Stats.CtrlSent
		for _, q := range []*roce.QP{w.sq, w.rq} {
			k := q.Counters
			res.Retransmissions += k.RetransmittedPkts
			res.NAKs += k.OutOfSequence + k.SendRNRErr + k.RemoteErrors
			res.Timeouts += k.LocalAckTimeoutErr
			res.ICRCDrops += k.RxICRCErrors
		}
	}
	if done > 0 {
		done -= r.startAt
	}
	res.VirtualNS = int64(done)
	if done > 0 {
		res.AlgBWGbps = float64(cfg.TensorBytes) * 8 / float64(done)
		res.BusBWGbps = res.AlgBWGbps * 2 * float64(cfg.Workers-1) / float64(cfg.Workers)
	}
	if r.fab.Switch != nil {
		res.Switch = SwitchReport{Stats: r.fab.Switch.Accel.Stats, SwitchStats: r.fab.Switch.Stats}
		res.ICRCDrops += res.Switch.ICRCDrops
	}
	res.Faults = r.fab.FaultStats()
	res.FaultDrops = res.Faults.Lost + res.Faults.Dropped
	res.QueueDrops = r.fab.LinkStats().QueueDrops
	return res
}

// drain polls a worker's CQs, handing each completion to f; an error
// completion fails the job.
func (r *runner) drain(w *worker, f func(c roce.Completion)) {
	for _, q := range []*roce.QP{w.sq, w.rq} {
		for _, cq := range []*roce.CQ{q.SendCQ(), q.RecvCQ()} {
			for cq.Len() > 0 {
				n := cq.Poll(w.cqe[:])
				for _, c := range w.cqe[:n] {
					if c.Status != roce.StatusSuccess {
						what := "a receive"
						if !c.Recv {
							what = fmt.Sprintf("WR %d (%s)", c.WRID, c.Opcode)
						}
						r.fail(w, q, c, what)
						return
					}
					f(c)
					if r.err != nil {
						return
					}
				}
			}
		}
	}
}
