package emu

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/nic/compress"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// Mode names a job's collective algorithm: netreduce, ring, or any other
// registered with RegisterAlgorithm.
type Mode string

const (
	NetReduce Mode = "netreduce" // the ring of RC WRITEs through the aggregating switch
	Ring      Mode = "ring"      // Ring-AllReduce: reduce-scatter then all-gather; the switch only forwards
	WA        Mode = "wa"        // worker-aggregator: workers send to an aggregator host, which sums and sends back
)

func (m Mode) String() string {
	if m == "" {
		return string(NetReduce)
	}
	return string(m)
}

// ParseMode reads the name of a registered algorithm (AlgorithmNames:
// netreduce, ring, wa, verbs, ...) or of a scheme over multi-GPU machines
// (fr, pn, pr, ta).
func ParseMode(s string) (Mode, error) {
	_, alg := algorithms[Mode(s)]
	if _, sch := schemeModes[Mode(s)]; alg || sch {
		return Mode(s), nil
	}
	return "", fmt.Errorf("mode %q: want %s", s, strings.Join(AlgorithmNames(), " or "))
}

// Config is a run: a fabric and its jobs. Without Jobs it is one
// allreduce job of Workers ranks on hosts h0.. with the settings below;
// each of Jobs takes those settings unless it sets its own.
type Config struct {
	Workers     int
	Mode        Mode
	Verb        Verb  // what a verbs job's ranks do (job_verbs.go)
	Window      int   // NetReduce N: messages in flight per worker
	MsgLen      int   // packets per message (both modes)
	MTU         int   // path MTU
	TensorBytes int64 // per worker
	DType       tensor.DType
	Pattern     workload.Pattern
	Transport   frames.Transport
	Link        fabric.LinkConfig
	Timing      switching.Timing // zero: switching.DefaultTiming
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
	// Topology, if set, is the network (Link fills what it leaves unset);
	// nil is the star of Workers hosts, host r on switch port r.
	Topology *topo.Topology
	// SwitchMemory bounds each switch's aggregation memory (bytes; 0: no
	// bound): a ring that does not fit is refused at setup.
	SwitchMemory int64
	// SwitchProgram is the switch program a NetReduce job aggregates on
	// (a name switching.RegisterProgram was given; "": netreduce).
	SwitchProgram string
	// OpenPorts turns the switches' port security off (see
	// switching.Switch.Bind), as on a switch that has none: a spoofed frame
	// then meets only the switch programs' own checks (NetReduce binds each
	// ring connection to its member's port), so a spoof aimed at a job no
	// program checks is refused.
	OpenPorts bool
	// Jobs, if given, are the run's jobs, placed on the topology's hosts.
	Jobs []JobSpec
	// Context, if set, stops an emulated run when it is done (Ctrl-C):
	// the event loop looks at it every PollEvents events and then ends the
	// run as at a normal end (the capture closed, the Result filled in so
	// far) with an *Interrupted error. On TAPs, close the devices instead.
	Context context.Context
	// Progress, if set, is told every PollEvents events, and once at the
	// end, how many results the ranks of the run have received of how
	// many they will: a result is one message of the tensor delivered to
	// a rank, the unit in which every algorithm completes, so done only
	// grows and reaches total when every rank holds its sum. It runs on
	// the event loop: it must be quick (it is called a few thousand times
	// a second at most, and the loop allocates nothing to call it).
	Progress func(done, total int64)
	// Compress, if not 0, is K of the error bound 2^-K with which ring
	// and wa jobs compress their float32 data in the NICs (INCEPTIONN:
	// frames/inceptionn, emu/nic); CompressRate is the engines' rate in
	// bit/s of uncompressed data (0: 25.6 Gb/s).
	Compress     int
	CompressRate float64
	// Bcast is how a wa job's aggregator sends the sum back: BcastUnicast
	// (to every worker in turn; the default), BcastTree (a binomial tree)
	// or BcastWorkerTree (streamed to worker 0, a binomial tree from there).
	Bcast Bcast
	// Devices, if set, runs the job on real interfaces (the TAP backend):
	// wall-clock time, no emulated links, so no faults, capture or link
	// model; MaxVirtual bounds the wall time. Only the ranks with a device
	// run (and are checked) here.
	Devices *live.Devices
}

// DefaultConfig is `inaemu run` with no flags.
func DefaultConfig() Config {
	return Config{Workers: 8, Mode: NetReduce, Window: 2, MsgLen: 170, MTU: 1024, TensorBytes: 16 << 20,
		DType: tensor.F32, Transport: frames.V2IPv4, Link: fabric.LinkConfig{Rate: 10e9, Latency: time.Microsecond},
		Timeout: 14, RetryCnt: 7, CompressRate: compress.DefaultRate, Bcast: BcastUnicast, Verb: VerbWrite,
		SwitchProgram: netreduce.ProgramName}
}

// Bcast is the way back of a wa job's sum.
type Bcast string

const (
	BcastUnicast    Bcast = "unicast"
	BcastTree       Bcast = "tree"
	BcastWorkerTree Bcast = "worker-tree"
)

// bcastWant is what ParseBcast reads, for its errors.
const bcastWant = "want unicast, tree or worker-tree"

// ParseBcast reads unicast, tree or worker-tree.
func ParseBcast(s string) (Bcast, error) {
	if b := Bcast(s); b.known() {
		return b, nil
	}
	return "", fmt.Errorf("%q: %s", s, bcastWant)
}

func (b Bcast) known() bool { return b == BcastUnicast || b == BcastTree || b == BcastWorkerTree }

// ConfigError is a job that cannot be set up as described (usage error).
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// CaptureError is a capture (Config.Capture) that could not be written
// (a full disk, ...): a local failure, not the network's. The run
// finished and its Result is judged as without it.
type CaptureError struct{ Err error }

func (e *CaptureError) Error() string { return "capture: " + e.Err.Error() }
func (e *CaptureError) Unwrap() error { return e.Err }

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

// JobSpec is one job of a run: ranks placed on host NICs, an algorithm, a
// tensor and a start time. Zero fields take the run's settings.
type JobSpec struct {
	Name        string
	Mode        Mode
	Ranks       []string // the NIC each rank runs on, in rank order: "h3" (h3's first NIC), "h3:nic1"
	TensorBytes int64
	Start       time.Duration // when the job posts its first work requests
	Window      int
	MsgLen      int
	DType       *tensor.DType
	Release     *netreduce.Release
	Compress    *int
}

// JobResult is what one job of a run did.
type JobResult struct {
	Name      string   `json:"name"`
	Mode      string   `json:"mode"`
	Exact     bool     `json:"exact"`
	Ranks     []string `json:"ranks"`
	Workers   int      `json:"workers"`
	Bytes     int64    `json:"bytes"`
	DType     string   `json:"dtype"`
	StartNS   int64    `json:"start_ns"`
	VirtualNS int64    `json:"virtual_ns"` // from its start to its last rank's last result
	// Bandwidths as nccl-tests defines them (algbw = bytes/time, busbw =
	// algbw × 2(n-1)/n), in GB/s (10^9 bytes/s) as nccl-tests prints them,
	// and in Gbit/s (the keys of earlier versions).
	AlgBWGBps       float64   `json:"algbw_gbytes_per_s"`
	BusBWGBps       float64   `json:"busbw_gbytes_per_s"`
	AlgBWGbps       float64   `json:"algbw_gbps"`
	BusBWGbps       float64   `json:"busbw_gbps"`
	FramesSent      uint64    `json:"frames_sent"`
	Retransmissions uint64    `json:"retransmissions"`
	NAKs            uint64    `json:"naks"`
	Timeouts        uint64    `json:"timeouts"`
	Mismatch        *Mismatch `json:"mismatch,omitempty"`
	Error           string    `json:"error,omitempty"`
	// PartOf names the scheme job (pn, pr, ta) this job is the
	// inter-machine stage of; that job's figures include this one's.
	PartOf string `json:"part_of,omitempty"`
	// Ring is a NetReduce job's ring: where it aggregates, its RingID and
	// the aggregation memory it reserves there.
	Ring *JobRing `json:"ring,omitempty"`
	// Compression is a compressing job's (Config.Compress).
	Compression *CompressionReport `json:"compression,omitempty"`
}

// JobRing is a NetReduce ring on a switch: tenants of one switch hold
// disjoint RingIDs and memory, each reserved against its budget.
type JobRing struct {
	Switch      string `json:"switch"`
	ID          uint8  `json:"id"`
	MemoryBytes int64  `json:"memory_bytes"`
	// Counters are the accelerator's counters of the ring's frames (the
	// run's switch counters hold every ring's, and frames of no ring);
	// a multi-rack ring's, summed over its switches.
	Counters netreduce.Stats `json:"counters"`
	// Tree is a multi-rack ring's switches (Switch is its spine): the
	// spine, then the leaves in the tree's order, each with its
	// Connection Translation Table and counters.
	Tree []TreeSwitch `json:"tree,omitempty"`
}

// TreeSwitch is one switch of a multi-rack ring.
type TreeSwitch struct {
	Switch      string               `json:"switch"`
	Role        string               `json:"role"`            // spine or leaf
	Ranks       []int                `json:"ranks,omitempty"` // a leaf's local ranks
	MemoryBytes int64                `json:"memory_bytes"`
	CTT         []netreduce.CTTEntry `json:"ctt"`
	Counters    netreduce.Stats      `json:"counters"`
}

// Result is what a run did. With one job its fields are that job's; with
// several, Jobs has each job's figures and the run's mode, bytes and
// bandwidths are left out (virtual_ns is the last job's end).
type Result struct {
	Exact           bool             `json:"exact"`
	Mode            string           `json:"mode"`
	Backend         string           `json:"backend"` // emu (virtual time) or tap (wall-clock time on devices)
	Ranks           []int            `json:"ranks"`   // the ranks that ran, and were checked, in this process
	Workers         int              `json:"workers"`
	Bytes           int64            `json:"bytes"`
	DType           string           `json:"dtype"`
	Transport       string           `json:"transport"`
	Release         string           `json:"release,omitempty"`
	NIC             string           `json:"nic"`
	Seed            uint64           `json:"seed"`
	VirtualNS       int64            `json:"virtual_ns"`
	AlgBWGBps       float64          `json:"algbw_gbytes_per_s"` // GB/s (10^9 bytes/s), as nccl-tests prints
	BusBWGBps       float64          `json:"busbw_gbytes_per_s"`
	AlgBWGbps       float64          `json:"algbw_gbps"` // Gbit/s
	BusBWGbps       float64          `json:"busbw_gbps"`
	FramesSent      uint64           `json:"frames_sent"`
	Retransmissions uint64           `json:"retransmissions"`
	NAKs            uint64           `json:"naks"`
	Timeouts        uint64           `json:"timeouts"`
	ICRCDrops       uint64           `json:"icrc_drops"`
	FaultDrops      uint64           `json:"fault_drops"`
	QueueDrops      uint64           `json:"queue_drops"`
	Faults          faults.Stats     `json:"faults"`
	Switch          switching.Report `json:"switch"`
	Mismatch        *Mismatch        `json:"mismatch,omitempty"`
	Error           string           `json:"error,omitempty"`
	Jobs            []JobResult      `json:"jobs"`
	Events          int              `json:"events"`
	WallNS          int64            `json:"wall_ns"`
	Wall            time.Duration    `json:"-"`
	// DeviceLog names the file that holds a device under test's output
	// (inaemu run --dut): kept out of the report, its last lines shown
	// when the run fails.
	DeviceLog string `json:"device_log,omitempty"`
}

// validateSettings is Validate's range check of one job's settings.
func (c *Config) validateSettings() error {
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
	case c.Compress != 0 && (c.Compress < inceptionn.MinBound || c.Compress > inceptionn.MaxBound):
		return bad("--compress 2^-%d: want K in %d..%d (the paper's are 6, 8 and 10)", c.Compress, inceptionn.MinBound, inceptionn.MaxBound)
	case c.Compress != 0 && c.Mode != Ring && c.Mode != WA:
		return bad("--compress: %s jobs do not compress; ring and wa do (INCEPTIONN's ring and its worker-aggregator baseline)", c.Mode)
	case c.Compress != 0 && c.DType != tensor.F32:
		return bad("--compress: the codec compresses float32 gradients, not %s", c.DType)
	case c.Compress != 0 && c.Devices != nil:
		return bad("--compress: the compression engines are emulated NICs'; the TAP backend has none")
	case c.CompressRate < 0 || math.IsNaN(c.CompressRate) || math.IsInf(c.CompressRate, 0):
		return bad("--compress-rate: want a positive number of bits per second")
	case c.Mode == WA && c.Devices != nil:
		return bad("--mode wa runs on emulated links; the TAP backend runs ring and netreduce jobs")
	case c.Bcast != "" && !c.Bcast.known():
		return bad("--bcast %q: %s", c.Bcast, bcastWant)
	}
	return nil
}

// collective is a job's algorithm at work. Its Algorithm set up the
// buffers and memory regions and whatever it needs in the switches; start
// posts the first work requests; onCompletion reacts to a worker's new
// completions; check compares every rank's result with the reference.
type collective interface {
	start() error
	onCompletion(w *worker)
	check() *Mismatch
}

// Algorithm makes a job's collective on its runner (whose workers have
// their QPs, not yet connected).
type Algorithm func(r *runner) (collective, error)

// algorithms is the open set of collective algorithms, by mode name; each
// registers itself (RegisterAlgorithm) from its own file.
var algorithms = map[Mode]Algorithm{}

// RegisterAlgorithm makes an algorithm available as a job mode.
func RegisterAlgorithm(m Mode, a Algorithm) { algorithms[m] = a }

// ownConnections are the modes whose collective makes its own QPs and
// connections (a connector) instead of the ring of them every other job
// has: its workers' QPs are in qps.
var ownConnections = map[Mode]bool{}

// connector is a collective that connects its own QPs (after the run has
// given the NICs their engines).
type connector interface{ connect() error }

// AlgorithmNames are the modes a job may take, sorted: the registered
// algorithms and the multi-GPU schemes.
func AlgorithmNames() []string {
	var n []string
	for m := range algorithms {
		n = append(n, string(m))
	}
	for m := range schemeModes {
		n = append(n, string(m))
	}
	sort.Strings(n)
	return n
}

// worker is one rank of a job: a QP to its successor and one from its
// predecessor, on the NIC the rank is placed on.
type worker struct {
	job   *runner // the job it is a rank of
	rank  int
	local bool     // runs in this process (always, but with Devices)
	h     *nic.NIC // its NIC (a GPU rank's: its host's first)
	host  string   // its host's name
	gpu   int      // the GPU it runs on, -1 for a rank on a NIC
	// sq is the hop to the successor, rq the hop from the predecessor: RC
	// QPs on the NIC, or a GPU link to a GPU of the same host. A job that
	// makes its own connections (ownConnections) has neither, and its QPs
	// in qps.
	sq, rq   endpoint
	qps      []endpoint
	recvMR   *roce.MR
	sendDone int
	recvDone int
	sendWant int // send WRs the job posts in all
	recvWant int // results (receive completions) the job expects
	doneAt   time.Duration
	cqe      [64]roce.Completion
}

// runner drives one job: its workers, connections and algorithm.
type runner struct {
	run     *run
	index   int // the job's place in the run: its identifiers derive from it
	name    string
	ranks   []string
	cfg     Config // the job's settings (Workers: its ranks)
	fab     *fabric.Fabric
	workers []*worker
	psns    ringPSNs // the connections' initial PSNs, from the seed
	job     collective
	err     error
	start   time.Duration // when the job is to post its first work requests (JobSpec.Start)
	started bool          // the job's first work requests are posted
	startAt time.Duration // when they were (live: after the start barrier)
	// Per-job identifiers, so jobs sharing hosts never collide (the QPNs
	// are per rank, see qpnPair): the receive regions' rkeys and virtual
	// address.
	recvVA uint64
	// ring is the NetReduce ring the job holds in a switch (nil: none),
	// ringSw that switch.
	ring   *JobRing
	ringSw *switching.Switch
	// ringTree, for a multi-rack ring, are its switches (ring.Tree's).
	ringTree []*switching.Switch
	// label is the mode the job reports, if not cfg.Mode (fr).
	label Mode
	// A scheme's inter-machine job (scheme.go) reads its ranks' inputs
	// and writes their results through io, starts when the scheme begins
	// it and tells onDone once when it has finished; the scheme job itself
	// has sch and no io.
	io     *stageIO
	sch    *scheme
	onDone func()
}

// source is a rank's input tensor, read front to back a piece at a time:
// generated (workload.Stream) or, in a scheme's inter-machine job, a GPU's
// buffer an earlier stage filled.
type source interface {
	MoveTo(elem int64)
	Fill(buf []byte)
}

// input is rank's input tensor.
func (r *runner) input(rank int) source {
	if r.io != nil {
		return r.io.input(rank)
	}
	return workload.NewStream(r.cfg.DType, r.cfg.Pattern, rank, r.cfg.Seed)
}

// inputAhead is rank's input tensor for a reader that takes it front to
// back: generated by a goroutine ahead of the event loop when there is a
// second processor for it (the bytes are the same), closed when the run
// ends.
func (r *runner) inputAhead(rank int) source {
	if r.io != nil || runtime.GOMAXPROCS(0) < 2 {
		return r.input(rank)
	}
	a := workload.NewAhead(workload.NewStream(r.cfg.DType, r.cfg.Pattern, rank, r.cfg.Seed), r.cfg.TensorBytes)
	r.run.aheads = append(r.run.aheads, a)
	return a
}

// output is where rank's result is kept (nil: it is only checked).
func (r *runner) output(rank int) []byte {
	if r.io == nil {
		return nil
	}
	return r.io.output(rank)
}

// begin posts the job's first work requests now.
func (r *runner) begin() error {
	r.startAt = r.fab.Clock.Now()
	r.started = true
	return r.job.start()
}

// gpuPort is when w's GPU's port into its host's interconnect is free:
// shared by every link and job that sends from it.
func (u *run) gpuPort(w *worker) *time.Duration {
	gpu := topo.GPUName(w.host, w.gpu)
	if u.gpuBusy[gpu] == nil {
		u.gpuBusy[gpu] = new(time.Duration)
	}
	return u.gpuBusy[gpu]
}

// run is a fabric and its jobs.
type run struct {
	cfg  Config
	fab  *fabric.Fabric
	jobs []*runner
	// gpuBusy is, per GPU, when its port into the host's interconnect is
	// free: every link and job sending from it shares it.
	gpuBusy map[string]*time.Duration
	// interrupted is set when Config.Context ended the run.
	interrupted *Interrupted
	// engines are the NICs given compression engines, and by which job.
	engines map[*nic.NIC]engineUse
	// aheads are the inputs generated ahead of the loop (inputAhead).
	aheads []*workload.Ahead
}

// closeAheads stops the goroutines generating inputs ahead.
func (u *run) closeAheads() {
	for _, a := range u.aheads {
		a.Close()
	}
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

// HostMAC is host r's first NIC's MAC (nic.MAC(r, 0)).
func HostMAC(r int) net.HardwareAddr { return nic.MAC(r, 0) }

// QP numbers of the first job on every host (rxe hands out 17 first, like
// a fresh host); job j's are 2j higher.
const (
	sendQPN = 0x11
	recvQPN = 0x12
)

// recvBaseVA is the first job's receive region; job j's is j·2^36 higher
// (a worker's region is at most a few times its tensor, at most 4 GiB).
const recvBaseVA = 0x7f00_0000_0000

// rkey is the receive region key of the job's rank.
func (r *runner) rkey(rank int) uint32 { return 0x1000 + uint32(r.index)<<8 + uint32(rank) }

// jobSeed is job j's seed for its tensors and initial PSNs: the run's own
// for the first job.
func jobSeed(seed uint64, j int) uint64 {
	if j == 0 {
		return seed
	}
	x := seed + uint64(j)*0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	return x ^ x>>31
}

// Run builds the fabric, runs the jobs to their end and checks every
// result. A *ConfigError means the configuration is unusable; a *JobError
// that a job failed in the network (the Result then says what happened so
// far).
func Run(cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxVirtual == 0 {
		cfg.MaxVirtual = time.Minute
	}
	wallStart := time.Now()
	u, err := newRun(cfg)
	if err != nil {
		return nil, err
	}
	defer u.closeAheads()
	var res *Result
	if u.fab.Live() {
		res = u.jobs[0].serve()
	} else {
		for _, r := range u.jobs {
			if r.io != nil {
				continue // a scheme's inter-machine job: the scheme begins it
			}
			if r.start == 0 {
				if err := r.job.start(); err != nil {
					return nil, &ConfigError{err}
				}
				r.started = true
				continue
			}
			r := r
			r.startAt = r.start
			u.fab.Clock.AfterFunc(r.startAt, func() {
				if err := r.job.start(); err != nil {
					r.err = &JobError{Msg: fmt.Sprintf("job %s: %v", r.name, err)}
				}
				r.started = true
			})
		}
		res = u.loop()
	}
	res.Wall = time.Since(wallStart)
	res.WallNS = int64(res.Wall)
	runErr := u.err()
	capErr := u.fab.CloseCapture()
	if runErr != nil {
		res.Error = runErr.Error()
		for i, r := range u.jobs { // the jobs that finished are still judged
			if r.err == nil && r.finished() {
				m := r.job.check()
				res.Jobs[i].Mismatch, res.Jobs[i].Exact = m, m == nil
			}
		}
		var je *JobError
		var ie *Interrupted
		if !errors.As(runErr, &je) && !errors.As(runErr, &ie) {
			return res, &JobError{Msg: runErr.Error()}
		}
		return res, runErr
	}
	res.Exact = true
	for i, r := range u.jobs {
		m := r.job.check()
		res.Jobs[i].Mismatch, res.Jobs[i].Exact = m, m == nil
		if m != nil && res.Mismatch == nil {
			res.Mismatch, res.Exact = m, false
		}
	}
	if capErr != nil { // the run went well and is judged; only its record is lost
		return res, &CaptureError{capErr}
	}
	return res, nil
}

// newRun builds the fabric, and for every job the workers' QPs and
// buffers, its collective and its connections; the jobs are ready to start.
func newRun(cfg Config) (*run, error) {
	if cfg.MaxVirtual == 0 {
		cfg.MaxVirtual = time.Minute
	}
	specs, err := cfg.jobConfigs()
	if err != nil {
		return nil, err
	}
	var fab *fabric.Fabric
	if cfg.Devices != nil {
		fab, err = live.NewFabric(cfg.Workers, cfg.Transport, cfg.Timing, *cfg.Devices)
	} else {
		fab, err = fabric.New(fabric.Config{Topology: cfg.Topology, Hosts: cfg.starHosts(), Transport: cfg.Transport, Link: cfg.Link, Timing: cfg.Timing,
			SwitchMemory: cfg.SwitchMemory, Netem: cfg.Netem, Events: cfg.Events, Seed: cfg.Seed, Capture: cfg.Capture, OpenPorts: cfg.OpenPorts, SwitchProgram: cfg.SwitchProgram})
	}
	if err != nil {
		return nil, &ConfigError{err}
	}
	u := &run{cfg: cfg, fab: fab, gpuBusy: map[string]*time.Duration{}, engines: map[*nic.NIC]engineUse{}}
	fail := func(err error) (*run, error) {
		fab.Close()
		return nil, &ConfigError{err}
	}
	var hosts []*nic.NIC               // the NICs the jobs use, in order of first use
	onHost := map[*nic.NIC][]*worker{} // the workers on each
	for j, js := range specs {
		r := &runner{run: u, index: j, name: js.name, ranks: js.ranks, cfg: js.cfg, start: js.start, fab: fab, recvVA: recvBaseVA + uint64(j)<<36,
			label: js.label, sch: js.sch, io: js.io}
		r.psns = initialPSNs(r.cfg.Seed, len(js.ranks))
		qps := jobQPNs(j, len(specs), js.ranks)
		for i, name := range js.ranks {
			w, err := placeRank(fab, r.name, i, name)
			if err != nil {
				return fail(err)
			}
			w.job, w.local = r, !fab.Live() || w.h.Live
			r.workers = append(r.workers, w)
		}
		if js.schemeJob() {
			// A scheme job: its GPUs move data on their interconnects
			// (its inter-machine jobs, next, have the QPs).
			r.job = newSchemeJob(r, js.sch)
			u.jobs = append(u.jobs, r)
			continue
		}
		own := ownConnections[r.cfg.Mode]
		for _, w := range r.workers {
			h, n := w.h, len(r.workers)
			if own {
				break
			}
			if succ := r.workers[(w.rank+1)%n]; intraHop(w, succ) {
				hn, _ := fab.Topo.Node(w.host)
				l := newIntraLink(fab.Clock, hn.Intra, u.gpuPort(w), w, succ)
				w.sq, succ.rq = intraSend{l}, intraRecv{l}
			} else {
				w.sq = h.NewQP(qps[w.rank].send)
			}
			if pred := r.workers[(w.rank+n-1)%n]; !intraHop(pred, w) {
				w.rq = h.NewQP(qps[w.rank].recv)
			}
		}
		for _, w := range r.workers {
			h := w.h
			if onHost[h] == nil {
				hosts = append(hosts, h)
			}
			onHost[h] = append(onHost[h], w)
		}
		if len(r.local()) == 0 {
			return fail(errors.New("no worker has a device: nothing would run here"))
		}
		alg := algorithms[r.cfg.Mode]
		if alg == nil {
			return fail(fmt.Errorf("job %s: no algorithm %q", r.name, r.cfg.Mode))
		}
		if r.job, err = alg(r); err != nil {
			return fail(err)
		}
		if err := u.enableCompression(r); err != nil {
			return fail(err)
		}
		if own {
			if err := r.job.(connector).connect(); err != nil {
				return fail(err)
			}
		} else if err := r.connect(); err != nil {
			return fail(err)
		}
		if js.io != nil {
			js.sch.stages = append(js.sch.stages, r)
			r.onDone = js.sch.job.stageDone
		}
		u.jobs = append(u.jobs, r)
	}
	for _, h := range hosts {
		ws := onHost[h]
		if !ws[0].local {
			continue
		}
		if len(ws) == 1 {
			w := ws[0]
			h.OnCompletion = func() { w.job.poll(w) }
		} else {
			h.OnCompletion = func() {
				for _, w := range ws {
					w.job.poll(w)
				}
			}
		}
		if !fab.Live() {
			h.SendControl(h.GratuitousARP())
		}
	}
	return u, nil
}

// err is the first job's error.
func (u *run) err() error {
	if u.interrupted != nil {
		return u.interrupted
	}
	for _, r := range u.jobs {
		if r.err != nil {
			return r.err
		}
	}
	return nil
}

// qpnPair is the send and receive QPN of job j's k-th rank on a NIC (of
// J jobs): 0x11+2(j+J·k) and one more, so the first job's only rank on a
// NIC has what rxe hands out first.
func qpnPair(j, jobs, k int) (uint32, uint32) {
	s := sendQPN + 2*uint32(j+jobs*k)
	return s, s + 1
}

// rankQPNs are a rank's send and receive QPNs (0: that hop is between
// GPUs of one host, with no QP).
type rankQPNs struct{ send, recv uint32 }

// jobQPNs gives the QPNs of job j's (of J) ranks by their placement: the
// k-th rank on a NIC (a GPU rank's NIC is its host's first) gets
// qpnPair(j, J, k) for the hops that leave the host.
func jobQPNs(j, jobs int, ranks []string) []rankQPNs {
	nicOf := func(name string) string {
		if host, _, gpu := topo.GPUOf(name); gpu {
			return host
		}
		return name
	}
	intra := func(a, b string) bool {
		ha, _, ga := topo.GPUOf(a)
		hb, _, gb := topo.GPUOf(b)
		return ga && gb && ha == hb
	}
	n := len(ranks)
	onNIC := map[string]int{}
	out := make([]rankQPNs, n)
	for i, name := range ranks {
		k := onNIC[nicOf(name)]
		onNIC[nicOf(name)]++
		s, r := qpnPair(j, jobs, k)
		if !intra(name, ranks[(i+1)%n]) {
			out[i].send = s
		}
		if !intra(ranks[(i+n-1)%n], name) {
			out[i].recv = r
		}
	}
	return out
}

// placeRank makes rank i of a job on the NIC or GPU name names: "h3",
// "h3:nic1", "h3:gpu2" (a GPU's RDMA traffic uses its host's first NIC).
func placeRank(fab *fabric.Fabric, job string, i int, name string) (*worker, error) {
	if host, gpu, isGPU := topo.GPUOf(name); isGPU {
		if fab.Topo == nil {
			return nil, fmt.Errorf("job %s: rank %d is placed on %q: GPUs are emulated only", job, i, name)
		}
		n, ok := fab.Topo.Node(host)
		switch {
		case !ok:
			return nil, fmt.Errorf("job %s: rank %d is placed on %q: the topology has no host %s", job, i, name, host)
		case gpu >= n.GPUs:
			return nil, fmt.Errorf("job %s: rank %d is placed on %q: %s has %d GPUs (gpu0..gpu%d)", job, i, name, host, n.GPUs, n.GPUs-1)
		}
		h, _ := fab.HostByName(host)
		return &worker{rank: i, h: h, host: host, gpu: gpu}, nil
	}
	h, ok := fab.HostByName(name)
	if !ok {
		return nil, fmt.Errorf("job %s: rank %d is placed on %q, which the topology does not have", job, i, name)
	}
	return &worker{rank: i, h: h, host: h.Host, gpu: -1}, nil
}

// intraHop reports whether the hop from a to b stays on a host's GPU
// interconnect.
func intraHop(a, b *worker) bool { return a.gpu >= 0 && b.gpu >= 0 && a.host == b.host }

// connect makes the ring of RC connections (the job has set up its
// buffers): rank r's send QP to rank r+1's receive QP, where the hop
// leaves the host. Initial PSNs are drawn from the seed. Each connection
// must have a path through the fabric.
func (r *runner) connect() error {
	psns := r.psns
	n := len(r.workers)
	for _, w := range r.workers {
		succ := r.workers[(w.rank+1)%n]
		if intraHop(w, succ) {
			continue
		}
		if !r.fab.Reachable(w.h, succ.h) || !r.fab.Reachable(succ.h, w.h) {
			return fmt.Errorf("job %s: rank %d (%s) and rank %d (%s) have no path between them in the topology", r.name, w.rank, w.h.Name, succ.rank, succ.h.Name)
		}
	}
	// Queues deep enough for everything the job posts (the job posts every
	// receive up front, so no RNR NAK ever slows it).
	maxWR := 1
	for _, w := range r.workers {
		maxWR = max(maxWR, w.sendWant+1, w.recvWant+1)
	}
	base := roce.Config{MTU: r.cfg.MTU, Timeout: r.cfg.Timeout, RetryCnt: r.cfg.RetryCnt, RNRRetry: 7, MinRNRTimer: 1,
		MaxSendWR: maxWR, MaxRecvWR: maxWR, Profile: r.cfg.NIC,
		AdaptiveTimeout: r.fab.Live()} // the wall clock's round trips are the machine's (roce/rto.go)
	for _, w := range r.workers {
		succ := r.workers[(w.rank+1)%n]
		sq, ok := w.sq.(*roce.QP)
		if !ok {
			continue
		}
		sc := base
		sc.SQPSN, sc.RQPSN = psns.send[w.rank], psns.sendR[w.rank] // only ACKs arrive on a send QP
		path := w.h.PathTo(succ.h, succ.rq.QPN())
		if r.cfg.Compress != 0 { // every ring hop compresses (wa marks its own connections)
			path = markPath(path)
		}
		if err := sq.Connect(path, sc); err != nil {
			return err
		}
	}
	for _, w := range r.workers {
		pred := r.workers[(w.rank+n-1)%n]
		rq, ok := w.rq.(*roce.QP)
		if !ok {
			continue
		}
		rc := base
		rc.SQPSN, rc.RQPSN = psns.recv[w.rank], pred.sq.(*roce.QP).Config().SQPSN
		if err := rq.Connect(w.h.PathTo(pred.h, pred.sq.QPN()), rc); err != nil {
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

// endpoint is the worker's sq (i = -2), rq (-1) or qps[i]; nil for none.
func (w *worker) endpoint(i int) endpoint {
	switch i {
	case -2:
		return w.sq
	case -1:
		return w.rq
	}
	return w.qps[i]
}

// poll drains a worker's CQs into the job.
func (r *runner) poll(w *worker) {
	if r.err != nil {
		return
	}
	r.job.onCompletion(w)
	if r.onDone != nil && r.err == nil && r.finished() {
		done := r.onDone
		r.onDone = nil
		done()
	}
}

// wrNamer is a collective whose work request IDs encode more than the
// WR's place (wa: which leg, ring: which step): it names the WR of a
// send completion in the job's words, for the error a failed one ends
// the job with ("WR 1099511627778" was wa's message 2 of the sum).
type wrNamer interface {
	nameWR(c roce.Completion) string
}

// qpPeers is a collective that names the rank at the other end of each
// of its own QPs.
type qpPeers interface {
	peerOf(w *worker, q endpoint) int
}

// fail stops the job with a transport error naming the QP and the reason.
func (r *runner) fail(w *worker, q endpoint, c roce.Completion, what string) {
	if r.err != nil {
		return
	}
	n := len(r.workers)
	peer := (w.rank + 1) % n
	dir := "send QP to rank"
	switch {
	case q == w.rq:
		peer, dir = (w.rank+n-1)%n, "receive QP from rank"
	case q != w.sq:
		if p, ok := r.job.(qpPeers); ok {
			peer = p.peerOf(w, q)
		}
		dir = "QP to rank"
	}
	job := ""
	if len(r.run.jobs) > 1 || r.index > 0 {
		job = "job " + r.name + ": "
	}
	r.err = &JobError{Msg: fmt.Sprintf("%srank %d %s %d (QPN %#x): %s completed with %s at %v (%s)",
		job, w.rank, dir, peer, q.QPN(), what, c.Status, r.fab.Clock.Now(), qpCounters(q)),
		QP: &QPFailure{Rank: w.rank, Peer: peer, Send: q == w.sq, Status: c.Status}}
}

func qpCounters(q endpoint) string {
	c := counters(q)
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

// running reports whether no job has failed and some job has work left.
func (u *run) running() bool {
	done := true
	for _, r := range u.jobs {
		if r.err != nil {
			return false
		}
		done = done && r.finished()
	}
	return !done
}

// loop runs the event loop until every job is done, one fails or they run
// out of virtual time, and fills in the counters.
func (u *run) loop() *Result {
	c := u.fab.Clock
	events := 0
	var stop <-chan struct{}
	if u.cfg.Context != nil {
		stop = u.cfg.Context.Done()
	}
	for u.running() {
		if !c.Step() {
			r := u.unfinished()
			r.err = &JobError{Msg: fmt.Sprintf("job stalled at %v: nothing left to happen but %s", c.Now(), u.progress())}
			break
		}
		events++
		if c.Now() > u.cfg.MaxVirtual {
			u.unfinished().err = &JobError{Msg: fmt.Sprintf("job did not finish within %v of virtual time: %s", u.cfg.MaxVirtual, u.progress())}
		}
		if events%PollEvents != 0 {
			continue
		}
		if u.cfg.Progress != nil {
			u.cfg.Progress(u.results())
		}
		select {
		case <-stop: // nil without a Context: never ready
			done, total := u.results()
			u.interrupted = &Interrupted{At: c.Now(), Results: done, Want: total, Cause: context.Cause(u.cfg.Context)}
		default:
		}
		if u.interrupted != nil {
			break
		}
	}
	if u.cfg.Progress != nil {
		u.cfg.Progress(u.results())
	}
	return u.result(events)
}

// PollEvents is how often (in events) the event loop reports progress
// and looks for a stop: a few thousand times a second at most, so neither
// costs anything measurable, and a stop is seen within a millisecond of
// wall time.
const PollEvents = 4096

// Interrupted is a run stopped through Config.Context before its jobs
// ended: when, and how many results its ranks had received of how many.
type Interrupted struct {
	At            time.Duration // the virtual time it stopped at
	Results, Want int64         // results received, and in all (Config.Progress)
	Cause         error         // the context's cause (context.Canceled, ...)
}

func (e *Interrupted) Error() string {
	return fmt.Sprintf("interrupted at %v of virtual time, %d of %d results received", e.At, e.Results, e.Want)
}

func (e *Interrupted) Unwrap() error { return e.Cause }

// results is how many results the run's local ranks have received, of
// how many they will (Config.Progress). It allocates nothing.
func (u *run) results() (done, total int64) {
	for _, r := range u.jobs {
		for _, w := range r.workers {
			if w.local {
				done += int64(w.recvDone)
				total += int64(w.recvWant)
			}
		}
	}
	return done, total
}

// unfinished is the first job that has not finished.
func (u *run) unfinished() *runner {
	for _, r := range u.jobs {
		if !r.finished() {
			return r
		}
	}
	return u.jobs[0]
}

func (u *run) progress() string {
	s := ""
	for _, r := range u.jobs {
		if len(u.jobs) > 1 {
			s += " job " + r.name + ":"
		}
		s += r.progress()
	}
	return s
}

func (r *runner) progress() string {
	s := ""
	for _, w := range r.local() {
		s += fmt.Sprintf(" rank %d %d/%d results %d/%d sends;", w.rank, w.recvDone, w.recvWant, w.sendDone, w.sendWant)
	}
	return s
}

// result is the run's figures: with one job, that job's (as before jobs
// were a list), with several, the sums and each job's own.
func (u *run) result(events int) *Result {
	cfg := u.cfg
	res := &Result{Transport: cfg.Transport.String(), NIC: cfg.NIC.String(), Seed: cfg.Seed, Events: events, Backend: "emu"}
	if u.fab.Live() {
		res.Backend = "tap"
	}
	seen := map[*nic.NIC]bool{}
	var end time.Duration
	var modes []string
	var top []int // the jobs that are not a scheme's inter-machine jobs
	for i, r := range u.jobs {
		jr := r.jobResult()
		res.Jobs = append(res.Jobs, jr)
		end = max(end, time.Duration(jr.StartNS+jr.VirtualNS))
		for _, w := range r.workers {
			if !seen[w.h] {
				seen[w.h] = true
				res.FramesSent += w.h.Stats.RoCESent + w.h.Stats.CtrlSent
			}
			for i := -2; i < len(w.qps); i++ {
				res.ICRCDrops += counters(w.endpoint(i)).RxICRCErrors
			}
		}
		if r.io != nil {
			continue // counted in its scheme job's figures
		}
		top = append(top, i)
		modes = append(modes, jr.Mode)
		res.Workers += jr.Workers
		res.Retransmissions += jr.Retransmissions
		res.NAKs += jr.NAKs
		res.Timeouts += jr.Timeouts
	}
	if len(top) == 1 {
		r, jr := u.jobs[top[0]], res.Jobs[top[0]]
		res.Mode, res.Bytes, res.DType = jr.Mode, jr.Bytes, jr.DType
		res.VirtualNS, res.AlgBWGbps, res.BusBWGbps = jr.VirtualNS, jr.AlgBWGbps, jr.BusBWGbps
		res.AlgBWGBps, res.BusBWGBps = jr.AlgBWGBps, jr.BusBWGBps
		for _, w := range r.local() {
			res.Ranks = append(res.Ranks, w.rank)
		}
		if r.cfg.Mode == NetReduce {
			res.Release = r.cfg.Release.String()
		}
	} else {
		res.Mode = strings.Join(modes, "+")
		res.VirtualNS = int64(end)
	}
	for _, s := range u.fab.Switches {
		res.Switch.Add(s.Report())
	}
	res.ICRCDrops += netreduce.StatsOf(res.Switch).ICRCDrops
	res.Faults = u.fab.FaultStats()
	res.FaultDrops = res.Faults.Lost + res.Faults.Dropped
	res.QueueDrops = u.fab.LinkStats().QueueDrops
	return res
}

// jobResult is one job's figures.
func (r *runner) jobResult() JobResult {
	cfg := r.cfg
	mode := cfg.Mode
	if r.label != "" {
		mode = r.label
	}
	workers := len(r.workers)
	if wa, ok := r.job.(*waJob); ok {
		workers = wa.p // the aggregator holds no result
	}
	jr := JobResult{Name: r.name, Mode: mode.String(), Ranks: r.ranks, Workers: workers, Bytes: cfg.TensorBytes,
		DType: cfg.DType.String(), StartNS: int64(r.startAt)}
	if r.io != nil {
		jr.PartOf = r.sch.name
	}
	if r.sch != nil && r.io == nil { // a scheme job (jobConfig.schemeJob): its inter-machine jobs' frames
		for _, st := range r.sch.stages {
			k := st.jobResult()
			jr.FramesSent += k.FramesSent
			jr.Retransmissions += k.Retransmissions
			jr.NAKs += k.NAKs
			jr.Timeouts += k.Timeouts
		}
	}
	if r.ring != nil {
		ring := *r.ring
		if r.ringSw != nil {
			ring.Counters, _ = netreduce.RingStatsOn(r.ringSw, r.cfg.SwitchProgram, ring.ID)
		}
		ring.Tree = slices.Clone(ring.Tree)
		for i, s := range r.ringTree {
			t := &ring.Tree[i]
			t.Counters, _ = netreduce.RingStatsOn(s, r.cfg.SwitchProgram, ring.ID)
			t.CTT = netreduce.CTTOn(s, r.cfg.SwitchProgram, ring.ID)
			ring.Counters.Add(t.Counters)
		}
		jr.Ring = &ring
	}
	if r.err != nil {
		jr.Error = r.err.Error()
	}
	if cfg.Compress != 0 {
		jr.Compression = r.compressionReport()
	}
	var done time.Duration
	for _, w := range r.workers {
		done = max(done, w.doneAt)
		for i := -2; i < len(w.qps); i++ {
			k := counters(w.endpoint(i))
			jr.FramesSent += k.SentPkts
			jr.Retransmissions += k.RetransmittedPkts
			jr.NAKs += k.OutOfSequence + k.SendRNRErr + k.RemoteErrors
			jr.Timeouts += k.LocalAckTimeoutErr
		}
	}
	if done > 0 {
		done -= r.startAt
	}
	jr.VirtualNS = int64(done)
	if done > 0 {
		jr.AlgBWGbps = float64(cfg.TensorBytes) * 8 / float64(done)
		jr.BusBWGbps = jr.AlgBWGbps * 2 * float64(workers-1) / float64(workers)
		jr.AlgBWGBps, jr.BusBWGBps = jr.AlgBWGbps/8, jr.BusBWGbps/8 // bytes/ns is GB/s
	}
	return jr
}

// drain polls a worker's CQs, handing each completion to f; an error
// completion fails the job.
func (r *runner) drain(w *worker, f func(c roce.Completion)) {
	for i := -2; i < len(w.qps); i++ {
		q := w.endpoint(i)
		if q == nil {
			continue
		}
		for _, cq := range []*roce.CQ{q.SendCQ(), q.RecvCQ()} {
			for cq.Len() > 0 {
				n := cq.Poll(w.cqe[:])
				for _, c := range w.cqe[:n] {
					if c.Status != roce.StatusSuccess {
						what := "a receive"
						switch namer, ok := r.job.(wrNamer); {
						case !c.Recv && ok:
							what = namer.nameWR(c)
						case !c.Recv:
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
