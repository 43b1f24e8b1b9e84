package job

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
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/nic/compress"
	"github.com/inaemu/inaemu/emu/nic/dcqcn"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// Mode names a job's collective algorithm, one registered with Register.
type Mode string

// DefaultMode is the mode of a job that names none: NetReduce's ring of
// RC WRITEs through the aggregating switch.
const DefaultMode Mode = "netreduce"

func (m Mode) String() string {
	if m == "" {
		return string(DefaultMode)
	}
	return string(m)
}

// ParseMode reads the name of a registered algorithm (AlgorithmNames:
// netreduce, ring, wa, verbs and the schemes over multi-GPU machines fr,
// pn, pr and ta today; any a package registers).
func ParseMode(s string) (Mode, error) {
	if _, ok := algorithms[Mode(s)]; ok {
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
	// Traffic is a traffic job's flows (mode traffic; job/traffic.go).
	Traffic *Traffic
	// Hier is a hier job's chunks, scheduler and policy (mode hier;
	// job/hier.go); nil: one chunk, the baseline schedule, FIFO.
	Hier *Hier
	// CC is the job's congestion control: "" or "none" (its NICs send at
	// line rate whatever the network says), or "dcqcn" (DCQCN in the NICs
	// of its ranks, emu/nic/dcqcn: their QPs send ECT(0), the receivers
	// answer CE marks with CNPs, the senders cut and regain their rate).
	CC string
	// DSCP is the codepoint the job's QPs send (the IPv4 TOS or traffic
	// class is DSCP<<2): a switch puts its frames in priority DSCP>>3
	// (switching.Priority). 0 by default, priority 0.
	DSCP int
	// Congestion is the network's buffers, PFC and egress queues
	// (run-wide: the switches' and links' settings; congestion.go).
	Congestion
	// Devices, if set, runs the job on real interfaces (a live backend,
	// e.g. emu/live's TAPs): wall-clock time, no emulated links, so no
	// faults, capture or link model; MaxVirtual bounds the wall time.
	// Only the ranks with a device run (and are checked) here.
	Devices Devices
}

// DefaultConfig is `inaemu run` with no flags.
func DefaultConfig() Config {
	return Config{Workers: 8, Mode: DefaultMode, Window: 2, MsgLen: 170, MTU: 1024, TensorBytes: 16 << 20,
		DType: tensor.F32, Transport: frames.V2IPv4, Link: fabric.LinkConfig{Rate: 10e9, Latency: time.Microsecond},
		Timeout: 14, RetryCnt: 7, CompressRate: compress.DefaultRate, Bcast: BcastUnicast, Verb: VerbWrite, CC: CCNone,
		SwitchProgram: netreduce.ProgramName, Congestion: Congestion{Buffer: switching.BufferConfig{Bytes: switching.DefaultBufferBytes}}}
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
	Traffic     *Traffic // a traffic job's flows
	CC          *string
	DSCP        *int
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
	// DCQCN is a job's congestion control's counters (Config.CC dcqcn),
	// summed over its ranks' NICs (a NIC shared with another job counts
	// both jobs' QPs).
	DCQCN *dcqcn.Stats `json:"dcqcn,omitempty"`
	// Flows are a traffic job's flows, each with its completion time and
	// throughput timeline.
	Flows []FlowResult `json:"flows,omitempty"`
	// Hier is a hier job's figures per dimension and link.
	Hier *HierReport `json:"hier,omitempty"`
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
	// Calibration is what the run measured of a device under test's path
	// before the job (inaemu run --dut; dut.Calibration's fields).
	Calibration any `json:"calibration,omitempty"`
	// PFC are the pause and ECN counters of every link direction and
	// priority that saw any (congestion settings only), Deadlocks the PFC
	// deadlocks that ended the run.
	PFC       []fabric.PFCStats `json:"pfc,omitempty"`
	Deadlocks []fabric.Deadlock `json:"deadlocks,omitempty"`
	// NICRx are the receive buffers of the NICs that have one
	// (--nic-rx-rate): drops, pauses sent, occupancy.
	NICRx []NICRx `json:"nic_rx,omitempty"`
}

// validateSettings is Validate's range check of one job's settings.
func (c *Config) validateSettings() error {
	bad := func(f string, a ...any) error { return &ConfigError{fmt.Errorf(f, a...)} }
	alg := Lookup(c.Mode)
	switch {
	case c.Workers < 2 || c.Workers > netreduce.MaxWorkers:
		return bad("--workers %d: want 2..%d", c.Workers, netreduce.MaxWorkers)
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
	case c.Compress != 0 && alg != nil && !alg.Compresses:
		return bad("--compress: %s jobs do not compress; ring and wa do (INCEPTIONN's ring and its worker-aggregator baseline)", c.Mode)
	case c.Compress != 0 && c.DType != tensor.F32:
		return bad("--compress: the codec compresses float32 gradients, not %s", c.DType)
	case c.Compress != 0 && c.Devices != nil:
		return bad("--compress: the compression engines are emulated NICs'; the TAP backend has none")
	case c.CompressRate < 0 || math.IsNaN(c.CompressRate) || math.IsInf(c.CompressRate, 0):
		return bad("--compress-rate: want a positive number of bits per second")
	case c.CC != "" && c.CC != CCNone && c.CC != CCDCQCN:
		return bad("--cc %q: want none or dcqcn", c.CC)
	case c.CC == CCDCQCN && c.Devices != nil:
		return bad("--cc dcqcn: DCQCN runs in the emulated NICs; the TAP backend and a device under test have none")
	case c.DSCP < 0 || c.DSCP > 63:
		return bad("--dscp %d: want a codepoint 0..63 (priority DSCP>>3)", c.DSCP)
	case c.DSCP != 0 && c.Compress != 0:
		return bad("--dscp %d with --compress: compressed packets are marked by their DSCP (%d), so a compressing job keeps DSCP 0", c.DSCP, frames.CompressedDSCP)
	case c.Bcast != "" && !c.Bcast.known():
		return bad("--bcast %q: %s", c.Bcast, bcastWant)
	case alg != nil && alg.Validate != nil:
		return alg.Validate(c)
	}
	return nil
}

// Collective is a job's algorithm at work. Its Algorithm set up the
// buffers and memory regions and whatever it needs in the switches; start
// posts the first work requests; onCompletion reacts to a worker's new
// completions; check compares every rank's result with the reference.
type Collective interface {
	Start() error
	OnCompletion(w *Worker)
	Check() *Mismatch
}

// Algorithm is a collective algorithm, the job mode that names it, and
// everything the runner would otherwise ask by mode: how its ranks are
// placed, what it validates, what memory it needs, what the switch must
// hold for it. Each algorithm registers one (Register) from its own file
// in emu/collective; the runner never names a mode.
type Algorithm struct {
	Mode Mode
	// Doc says what the mode does, for --help (ModeHelp).
	Doc string
	// New makes a job's collective on its Job, whose workers are placed
	// and (unless OwnConnections) have their ring of QPs, not connected.
	New func(j *Job) (Collective, error)
	// Plan, if set, makes a job of this mode the jobs that run it (a
	// multi-GPU scheme: its own job and its inter-machine jobs).
	Plan func(j JobConfig) ([]JobConfig, error)
	// OwnConnections: the collective makes and connects its own QPs (it
	// is a Connector) instead of the ring of them every other job has.
	OwnConnections bool
	// ExtraRank: the job has a rank more than its --workers (wa's
	// aggregator), on a host of its own.
	ExtraRank bool
	// OnGPUs: a job without Jobs runs on every GPU of the first --workers
	// hosts; NeedsGPUs: and refuses hosts without any.
	OnGPUs, NeedsGPUs bool
	// Compresses: the job may compress its gradients (--compress).
	Compresses bool
	// PointToPoint: the job moves data between pairs of ranks, no
	// collective, so its busbw is its algbw (nccl-tests' sendrecv).
	PointToPoint bool
	// InSwitch: the job aggregates in switches: it reports its release
	// rule, its frames may be forged at a switch port, and a switch
	// holds its ring (the fault validation and checker rely on it).
	InSwitch bool
	// Streams: in the emulator the job generates and checks its tensors
	// as it goes, so its memory grows with the window, not the tensor;
	// StreamsLive: on real interfaces too; StreamsWindow: with the window
	// only, not the message length (what a refusal suggests).
	Streams, StreamsLive, StreamsWindow bool
	// Validate checks a job's settings the algorithm adds to the common
	// ones (after them).
	Validate func(c *Config) error
	// ValidateJob checks a resolved job (its ranks, e.g. wa's host NICs;
	// its size on the wire); an error names the job where the run has
	// several or the message needs it.
	ValidateJob func(j JobConfig) error
	// ValidateRun checks the run's settings that only this algorithm
	// takes, given every job (e.g. --verb without a verbs job).
	ValidateRun func(c *Config, jobs []JobConfig) error
	// Memory estimates one job's memory into e (Buffers, Queues,
	// Largest, Switch) and returns the frames per link direction its
	// transport can have on the way; whole says e is complete as it is
	// (the job has no frames of its own).
	Memory func(c Config, e *MemoryEstimate) (outstanding int64, whole bool)
	// ServeSwitch installs what a switch serving the job on real
	// interfaces must hold (NetReduce: its ring), nil for nothing; the
	// live backend's ServeSwitch (emu/live) calls it.
	ServeSwitch func(c Config, sw *switching.Switch) error
}

// algorithms is the open set of collective algorithms, by mode name.
var algorithms = map[Mode]*Algorithm{}

// Register makes an algorithm available as a job mode.
func Register(a Algorithm) { algorithms[a.Mode] = &a }

// Lookup is the algorithm a mode names (nil for none).
func Lookup(m Mode) *Algorithm {
	if m == "" {
		m = DefaultMode
	}
	return algorithms[m]
}

// Connector is a collective that connects its own QPs (after the run has
// given the NICs their engines).
type Connector interface{ Connect() error }

// Reporter is a collective that adds figures of its own to its job's
// result (the workers that hold a result, the frames of its stages).
type Reporter interface{ Report(jr *JobResult) }

// ModeHelp lists the registered modes with what each does, for --help.
func ModeHelp() string {
	var b strings.Builder
	for i, n := range AlgorithmNames() {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s: %s", n, algorithms[Mode(n)].Doc)
	}
	return b.String()
}

// AlgorithmNames are the modes a job may take, sorted.
func AlgorithmNames() []string {
	var n []string
	for m := range algorithms {
		n = append(n, string(m))
	}
	sort.Strings(n)
	return n
}

// Worker is one rank of a job: a QP to its successor and one from its
// predecessor, on the NIC the rank is placed on.
type Worker struct {
	Job   *Job // the job it is a rank of
	Rank  int
	Local bool     // runs in this process (always, but with Devices)
	NIC   *nic.NIC // its NIC (a GPU rank's: its host's first)
	Host  string   // its host's name
	GPU   int      // the GPU it runs on, -1 for a rank on a NIC
	// SQ is the hop to the successor, RQ the hop from the predecessor: RC
	// QPs on the NIC, or a GPU link to a GPU of the same host. A job that
	// makes its own connections (ownConnections) has neither, and its QPs
	// in qps.
	SQ, RQ   Endpoint
	QPs      []Endpoint
	RecvMR   *roce.MR
	SendDone int
	RecvDone int
	SendWant int // send WRs the job posts in all
	RecvWant int // results (receive completions) the job expects
	DoneAt   time.Duration
	// NICs are the NICs of the rank's host other than NIC that QPs are
	// on (a job that makes its own connections over several of a host's
	// links, mode hier): their completions wake the rank too.
	NICs []*nic.NIC
	cqe  [64]roce.Completion
}

// Job drives one job: its workers, connections and algorithm.
type Job struct {
	run       *Session
	Index     int // the job's place in the run: its identifiers derive from it
	Name      string
	Ranks     []string
	Cfg       Config // the job's settings (Workers: its ranks)
	Fab       *fabric.Fabric
	Workers   []*Worker
	PSNs      RingPSNs // the connections' initial PSNs, from the seed
	Alg       Collective
	Err       error
	StartTime time.Duration // when the job is to post its first work requests (JobSpec.Start)
	Started   bool          // the job's first work requests are posted
	startAt   time.Duration // when they were (live: after the start barrier)
	// Per-job identifiers, so jobs sharing hosts never collide (the QPNs
	// are per rank, see qpnPair): the receive regions' rkeys and virtual
	// address.
	RecvVA uint64
	// Ring is the NetReduce Ring the job holds in a switch (nil: none),
	// ringSw that switch.
	Ring   *JobRing
	RingSw *switching.Switch
	// RingTree, for a multi-rack ring, are its switches (ring.Tree's).
	RingTree []*switching.Switch
	// Label is the mode the job reports, if not cfg.Mode (fr).
	Label Mode
	// A group's stage job (a multi-GPU scheme's inter-machine job) reads
	// its ranks' inputs and writes their results through IO, starts when
	// the group begins it and tells OnDone once when it has finished; the
	// group's own job has Group and no IO.
	IO     StageIO
	Group  Group
	OnDone func()
}

// StageIO is what a group's stage job reads and writes instead of its
// own tensors: rank r's input, and where its result goes.
type StageIO interface {
	Input(rank int) Source
	Output(rank int) []byte
}

// Group is a job that runs as several (a multi-GPU scheme: its own job,
// which moves data inside machines, and its inter-machine stage jobs).
// Its algorithm's Plan makes the JobConfigs; the runner makes each a Job
// and tells the group of every stage job it made.
type Group interface {
	// Name is the group's job name (its stages report it as PartOf).
	Name() string
	// AddStage records a stage job and returns what the job calls once
	// it has finished.
	AddStage(j *Job) (onDone func())
}

// Source is a rank's input tensor, read front to back a piece at a time:
// generated (workload.Stream) or, in a scheme's inter-machine job, a GPU's
// buffer an earlier stage filled.
type Source interface {
	MoveTo(elem int64)
	Fill(buf []byte)
}

// Input is rank's Input tensor.
func (r *Job) Input(rank int) Source {
	if r.IO != nil {
		return r.IO.Input(rank)
	}
	return workload.NewStream(r.Cfg.DType, r.Cfg.Pattern, rank, r.Cfg.Seed)
}

// InputAhead is rank's input tensor for a reader that takes it front to
// back: generated by a goroutine ahead of the event loop when there is a
// second processor for it (the bytes are the same), closed when the run
// ends.
func (r *Job) InputAhead(rank int) Source {
	if r.IO != nil || runtime.GOMAXPROCS(0) < 2 {
		return r.Input(rank)
	}
	a := workload.NewAhead(workload.NewStream(r.Cfg.DType, r.Cfg.Pattern, rank, r.Cfg.Seed), r.Cfg.TensorBytes)
	r.run.aheads = append(r.run.aheads, a)
	return a
}

// Output is where rank's result is kept (nil: it is only checked).
func (r *Job) Output(rank int) []byte {
	if r.IO == nil {
		return nil
	}
	return r.IO.Output(rank)
}

// Begin posts the job's first work requests now.
func (r *Job) Begin() error {
	r.startAt = r.Fab.Clock.Now()
	r.Started = true
	return r.Alg.Start()
}

// GPUPort is when w's GPU's port into its host's interconnect is free:
// shared by every link and job that sends from it.
func (r *Job) GPUPort(w *Worker) *time.Duration { return r.run.gpuPort(w) }

// Tenants reports whether the run has several jobs (a switch's refusal
// then names the job).
func (r *Job) Tenants() bool { return len(r.run.cfg.Jobs) > 1 }

// gpuPort is when w's GPU's port into its host's interconnect is free:
// shared by every link and job that sends from it.
func (u *Session) gpuPort(w *Worker) *time.Duration {
	gpu := topo.GPUName(w.Host, w.GPU)
	if u.gpuBusy[gpu] == nil {
		u.gpuBusy[gpu] = new(time.Duration)
	}
	return u.gpuBusy[gpu]
}

// Session is a fabric and its jobs.
type Session struct {
	cfg  Config
	Fab  *fabric.Fabric
	Jobs []*Job
	// gpuBusy is, per GPU, when its port into the host's interconnect is
	// free: every link and job sending from it shares it.
	gpuBusy map[string]*time.Duration
	// interrupted is set when Config.Context ended the run.
	interrupted *Interrupted
	// engines are the NICs given compression engines, and by which job.
	engines map[*nic.NIC]engineUse
	// dcqcn are the NICs given DCQCN (congestion.go).
	dcqcn map[*nic.NIC]*dcqcn.Offload
	// deadlock is when the PFC deadlock detector looks next, and after
	// how long a cycle's pauses count as one; deadlocks what it found.
	deadlockAt, deadlockAfter time.Duration
	deadlocks                 []fabric.Deadlock
	// aheads are the inputs generated ahead of the loop (inputAhead).
	aheads []*workload.Ahead
}

// closeAheads stops the goroutines generating inputs ahead.
func (u *Session) closeAheads() {
	for _, a := range u.aheads {
		a.Close()
	}
}

// Local lists the workers that run in this process.
func (r *Job) Local() []*Worker {
	var l []*Worker
	for _, w := range r.Workers {
		if w.Local {
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
	SendQPN = 0x11
	RecvQPN = 0x12
)

// RecvBaseVA is the first job's receive region; job j's is j·2^36 higher
// (a worker's region is at most a few times its tensor, at most 4 GiB).
const RecvBaseVA = 0x7f00_0000_0000

// RKey is the receive region key of the job's rank.
func (r *Job) RKey(rank int) uint32 { return 0x1000 + uint32(r.Index)<<8 + uint32(rank) }

// JobSeed is job j's seed for its tensors and initial PSNs: the run's own
// for the first job.
func JobSeed(seed uint64, j int) uint64 {
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
	u, err := NewSession(cfg)
	if err != nil {
		return nil, err
	}
	defer u.closeAheads()
	var res *Result
	if u.Fab.Live() {
		res = u.Jobs[0].serve()
	} else {
		for _, r := range u.Jobs {
			if r.IO != nil {
				continue // a scheme's inter-machine job: the scheme begins it
			}
			if r.StartTime == 0 {
				if err := r.Alg.Start(); err != nil {
					return nil, &ConfigError{err}
				}
				r.Started = true
				continue
			}
			r := r
			r.startAt = r.StartTime
			u.Fab.Clock.AfterFunc(r.startAt, func() {
				if err := r.Alg.Start(); err != nil {
					r.Err = &JobError{Msg: fmt.Sprintf("job %s: %v", r.Name, err)}
				}
				r.Started = true
			})
		}
		res = u.Loop()
	}
	res.Wall = time.Since(wallStart)
	res.WallNS = int64(res.Wall)
	runErr := u.Err()
	capErr := u.Fab.CloseCapture()
	if runErr != nil {
		res.Error = runErr.Error()
		for i, r := range u.Jobs { // the jobs that finished are still judged
			if r.Err == nil && r.finished() {
				m := r.Alg.Check()
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
	for i, r := range u.Jobs {
		m := r.Alg.Check()
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

// NewSession builds the fabric, and for every job the workers' QPs and
// buffers, its collective and its connections; the jobs are ready to start.
func NewSession(cfg Config) (*Session, error) {
	if cfg.MaxVirtual == 0 {
		cfg.MaxVirtual = time.Minute
	}
	specs, err := cfg.jobConfigs()
	if err != nil {
		return nil, err
	}
	var fab *fabric.Fabric
	if cfg.Devices != nil {
		fab, err = cfg.Devices.Fabric(cfg.Workers, cfg.Transport, cfg.Timing)
	} else {
		fc := fabric.Config{Topology: cfg.Topology, Hosts: cfg.starHosts(), Transport: cfg.Transport, Link: cfg.Link, Timing: cfg.Timing,
			SwitchMemory: cfg.SwitchMemory, Netem: cfg.Netem, Events: cfg.Events, Seed: cfg.Seed, Capture: cfg.Capture, OpenPorts: cfg.OpenPorts, SwitchProgram: cfg.SwitchProgram,
			DType: inSwitchDType(specs)}
		if err = cfg.Congestion.apply(&fc, specs); err == nil {
			fab, err = fabric.New(fc)
		}
	}
	if err != nil {
		return nil, &ConfigError{err}
	}
	u := &Session{cfg: cfg, Fab: fab, gpuBusy: map[string]*time.Duration{}, engines: map[*nic.NIC]engineUse{}}
	fail := func(err error) (*Session, error) {
		fab.Close()
		return nil, &ConfigError{err}
	}
	var hosts []*nic.NIC               // the NICs the jobs use, in order of first use
	onHost := map[*nic.NIC][]*Worker{} // the workers on each
	for j, js := range specs {
		r := &Job{run: u, Index: j, Name: js.Name, Ranks: js.Ranks, Cfg: js.Cfg, StartTime: js.Start, Fab: fab, RecvVA: RecvBaseVA + uint64(j)<<36,
			Label: js.Label, Group: js.Group, IO: js.IO}
		r.PSNs = initialPSNs(r.Cfg.Seed, len(js.Ranks))
		qps := jobQPNs(j, len(specs), js.Ranks)
		for i, name := range js.Ranks {
			w, err := placeRank(fab, r.Name, i, name)
			if err != nil {
				return fail(err)
			}
			w.Job, w.Local = r, !fab.Live() || w.NIC.Live
			r.Workers = append(r.Workers, w)
		}
		if js.GroupJob() {
			// A scheme job: its GPUs move data on their interconnects
			// (its inter-machine jobs, next, have the QPs).
			if r.Alg, err = Lookup(r.Cfg.Mode).New(r); err != nil {
				return fail(err)
			}
			u.Jobs = append(u.Jobs, r)
			continue
		}
		alg := Lookup(r.Cfg.Mode)
		if alg == nil {
			return fail(fmt.Errorf("job %s: no algorithm %q", r.Name, r.Cfg.Mode))
		}
		own := alg.OwnConnections
		for _, w := range r.Workers {
			h, n := w.NIC, len(r.Workers)
			if own {
				break
			}
			if succ := r.Workers[(w.Rank+1)%n]; IntraHop(w, succ) {
				hn, _ := fab.Topo.Node(w.Host)
				l := newIntraLink(fab.Clock, hn.Intra, u.gpuPort(w), w, succ)
				w.SQ, succ.RQ = intraSend{l}, intraRecv{l}
			} else {
				w.SQ = h.NewQP(qps[w.Rank].send)
			}
			if pred := r.Workers[(w.Rank+n-1)%n]; !IntraHop(pred, w) {
				w.RQ = h.NewQP(qps[w.Rank].recv)
			}
		}
		for _, w := range r.Workers {
			h := w.NIC
			if onHost[h] == nil {
				hosts = append(hosts, h)
			}
			onHost[h] = append(onHost[h], w)
		}
		if len(r.Local()) == 0 {
			return fail(errors.New("no worker has a device: nothing would run here"))
		}
		if r.Alg, err = alg.New(r); err != nil {
			return fail(err)
		}
		if err := u.enableCompression(r); err != nil {
			return fail(err)
		}
		if err := u.enableDCQCN(r); err != nil {
			return fail(err)
		}
		if own {
			if err := r.Alg.(Connector).Connect(); err != nil {
				return fail(err)
			}
		} else if err := r.connect(); err != nil {
			return fail(err)
		}
		for _, w := range r.Workers {
			for _, h := range w.NICs {
				if onHost[h] == nil {
					hosts = append(hosts, h)
				}
				if !slices.Contains(onHost[h], w) {
					onHost[h] = append(onHost[h], w)
				}
			}
		}
		if js.IO != nil {
			r.OnDone = js.Group.AddStage(r)
		}
		u.Jobs = append(u.Jobs, r)
	}
	for _, h := range hosts {
		ws := onHost[h]
		if !ws[0].Local {
			continue
		}
		if len(ws) == 1 {
			w := ws[0]
			h.OnCompletion = func() { w.Job.poll(w) }
		} else {
			h.OnCompletion = func() {
				for _, w := range ws {
					w.Job.poll(w)
				}
			}
		}
		if !fab.Live() {
			h.SendControl(h.GratuitousARP())
		}
	}
	return u, nil
}

// Err is the first job's error.
func (u *Session) Err() error {
	if u.interrupted != nil {
		return u.interrupted
	}
	for _, r := range u.Jobs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}

// qpnPair is the send and receive QPN of job j's k-th rank on a NIC (of
// J jobs): 0x11+2(j+J·k) and one more, so the first job's only rank on a
// NIC has what rxe hands out first.
func qpnPair(j, jobs, k int) (uint32, uint32) {
	s := SendQPN + 2*uint32(j+jobs*k)
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
func placeRank(fab *fabric.Fabric, job string, i int, name string) (*Worker, error) {
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
		return &Worker{Rank: i, NIC: h, Host: host, GPU: gpu}, nil
	}
	h, ok := fab.HostByName(name)
	if !ok {
		return nil, fmt.Errorf("job %s: rank %d is placed on %q, which the topology does not have", job, i, name)
	}
	return &Worker{Rank: i, NIC: h, Host: h.Host, GPU: -1}, nil
}

// IntraHop reports whether the hop from a to b stays on a host's GPU
// interconnect.
func IntraHop(a, b *Worker) bool { return a.GPU >= 0 && b.GPU >= 0 && a.Host == b.Host }

// connect makes the ring of RC connections (the job has set up its
// buffers): rank r's send QP to rank r+1's receive QP, where the hop
// leaves the host. Initial PSNs are drawn from the seed. Each connection
// must have a path through the fabric.
func (r *Job) connect() error {
	psns := r.PSNs
	n := len(r.Workers)
	for _, w := range r.Workers {
		succ := r.Workers[(w.Rank+1)%n]
		if IntraHop(w, succ) {
			continue
		}
		if !r.Fab.Reachable(w.NIC, succ.NIC) || !r.Fab.Reachable(succ.NIC, w.NIC) {
			return fmt.Errorf("job %s: rank %d (%s) and rank %d (%s) have no path between them in the topology", r.Name, w.Rank, w.NIC.Name, succ.Rank, succ.NIC.Name)
		}
	}
	// Queues deep enough for everything the job posts (the job posts every
	// receive up front, so no RNR NAK ever slows it).
	maxWR := 1
	for _, w := range r.Workers {
		maxWR = max(maxWR, w.SendWant+1, w.RecvWant+1)
	}
	base := roce.Config{MTU: r.Cfg.MTU, Timeout: r.Cfg.Timeout, RetryCnt: r.Cfg.RetryCnt, RNRRetry: 7, MinRNRTimer: 1,
		MaxSendWR: maxWR, MaxRecvWR: maxWR, Profile: r.Cfg.NIC,
		AdaptiveTimeout: r.Fab.Live()} // the wall clock's round trips are the machine's (roce/rto.go)
	for _, w := range r.Workers {
		succ := r.Workers[(w.Rank+1)%n]
		sq, ok := w.SQ.(*roce.QP)
		if !ok {
			continue
		}
		sc := base
		sc.SQPSN, sc.RQPSN = psns.Send[w.Rank], psns.SendR[w.Rank] // only ACKs arrive on a send QP
		path := r.PathTo(w.NIC, succ.NIC, succ.RQ.QPN())
		if r.Cfg.Compress != 0 { // every ring hop compresses (wa marks its own connections)
			path = MarkPath(path)
		}
		if err := sq.Connect(path, sc); err != nil {
			return err
		}
	}
	for _, w := range r.Workers {
		pred := r.Workers[(w.Rank+n-1)%n]
		rq, ok := w.RQ.(*roce.QP)
		if !ok {
			continue
		}
		rc := base
		rc.SQPSN, rc.RQPSN = psns.Recv[w.Rank], pred.SQ.(*roce.QP).Config().SQPSN
		if err := rq.Connect(r.PathTo(w.NIC, pred.NIC, pred.SQ.QPN()), rc); err != nil {
			return err
		}
	}
	return nil
}

// RingPSNs are a job's initial PSNs: per rank, its send QP's first PSN
// (the first PSN of its ring connection), the PSN its send QP expects (only
// ACKs arrive there), and its receive QP's first PSN (its ACKs).
type RingPSNs struct{ Send, SendR, Recv []uint32 }

// InitialPSNs are the initial PSNs of a job of ranks ranks with seed
// seed (a test that wants a connection across the 24-bit PSN wrap picks
// its seed by them).
func InitialPSNs(seed uint64, ranks int) RingPSNs { return initialPSNs(seed, ranks) }

// initialPSNs draws the job's initial PSNs from the seed, so a switch told
// the seed knows where each connection's first message starts.
func initialPSNs(seed uint64, n int) RingPSNs {
	rng := rand.New(rand.NewPCG(seed, 0x9E3779B9))
	psn := func() uint32 { return uint32(rng.Uint64()) & 0xFFFFFF }
	p := RingPSNs{make([]uint32, n), make([]uint32, n), make([]uint32, n)}
	for r := range n {
		p.Send[r], p.SendR[r] = psn(), psn()
	}
	for r := range n {
		p.Recv[r] = psn()
	}
	return p
}

// endpoint is the worker's sq (i = -2), rq (-1) or qps[i]; nil for none.
func (w *Worker) endpoint(i int) Endpoint {
	switch i {
	case -2:
		return w.SQ
	case -1:
		return w.RQ
	}
	return w.QPs[i]
}

// poll drains a worker's CQs into the job.
func (r *Job) poll(w *Worker) {
	if r.Err != nil {
		return
	}
	r.Alg.OnCompletion(w)
	if r.OnDone != nil && r.Err == nil && r.finished() {
		done := r.OnDone
		r.OnDone = nil
		done()
	}
}

// WRNamer is a collective whose work request IDs encode more than the
// WR's place (wa: which leg, ring: which step): it names the WR of a
// send completion in the job's words, for the error a failed one ends
// the job with ("WR 1099511627778" was wa's message 2 of the sum).
type WRNamer interface {
	NameWR(c roce.Completion) string
}

// QPPeers is a collective that names the rank at the other end of each
// of its own QPs.
type QPPeers interface {
	PeerOf(w *Worker, q Endpoint) int
}

// fail stops the job with a transport error naming the QP and the reason.
func (r *Job) fail(w *Worker, q Endpoint, c roce.Completion, what string) {
	if r.Err != nil {
		return
	}
	n := len(r.Workers)
	peer := (w.Rank + 1) % n
	dir := "send QP to rank"
	switch {
	case q == w.RQ:
		peer, dir = (w.Rank+n-1)%n, "receive QP from rank"
	case q != w.SQ:
		if p, ok := r.Alg.(QPPeers); ok {
			peer = p.PeerOf(w, q)
		}
		dir = "QP to rank"
	}
	job := ""
	if len(r.run.Jobs) > 1 || r.Index > 0 {
		job = "job " + r.Name + ": "
	}
	r.Err = &JobError{Msg: fmt.Sprintf("%srank %d %s %d (QPN %#x): %s completed with %s at %v (%s)",
		job, w.Rank, dir, peer, q.QPN(), what, c.Status, r.Fab.Clock.Now(), qpCounters(q)),
		QP: &QPFailure{Rank: w.Rank, Peer: peer, Send: q == w.SQ, Status: c.Status}}
}

func qpCounters(q Endpoint) string {
	c := counters(q)
	return fmt.Sprintf("sent %d, retransmitted %d, NAKs received %d, timeouts %d", c.SentPkts, c.RetransmittedPkts, c.PacketSeqErr, c.LocalAckTimeoutErr)
}

func (r *Job) finished() bool {
	if !r.Started {
		return false
	}
	for _, w := range r.Workers { // not r.local(): this runs every event and must not allocate
		if w.Local && (w.RecvDone < w.RecvWant || w.SendDone < w.SendWant) {
			return false
		}
	}
	return true
}

// running reports whether no job has failed and some job has work left.
func (u *Session) running() bool {
	done := true
	for _, r := range u.Jobs {
		if r.Err != nil {
			return false
		}
		done = done && r.finished()
	}
	return !done
}

// Loop runs the event Loop until every job is done, one fails or they run
// out of virtual time, and fills in the counters.
func (u *Session) Loop() *Result {
	c := u.Fab.Clock
	events := 0
	var stop <-chan struct{}
	if u.cfg.Context != nil {
		stop = u.cfg.Context.Done()
	}
	for u.running() {
		if !c.Step() {
			r := u.unfinished()
			r.Err = &JobError{Msg: fmt.Sprintf("job stalled at %v: nothing left to happen but %s", c.Now(), u.progress())}
			break
		}
		events++
		if c.Now() > u.cfg.MaxVirtual {
			u.unfinished().Err = &JobError{Msg: fmt.Sprintf("job did not finish within %v of virtual time: %s", u.cfg.MaxVirtual, u.progress())}
		}
		if events%PollEvents != 0 {
			continue
		}
		if u.cfg.Progress != nil {
			u.cfg.Progress(u.results())
		}
		if d := u.deadlocked(); d != nil {
			u.unfinished().Err = &JobError{Msg: fmt.Sprintf("job cannot finish: %v; so far%s", d, strings.TrimSuffix(u.progress(), ";"))}
			break
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
func (u *Session) results() (done, total int64) {
	for _, r := range u.Jobs {
		for _, w := range r.Workers {
			if w.Local {
				done += int64(w.RecvDone)
				total += int64(w.RecvWant)
			}
		}
	}
	return done, total
}

// unfinished is the first job that has not finished.
func (u *Session) unfinished() *Job {
	for _, r := range u.Jobs {
		if !r.finished() {
			return r
		}
	}
	return u.Jobs[0]
}

func (u *Session) progress() string {
	s := ""
	for _, r := range u.Jobs {
		if len(u.Jobs) > 1 {
			s += " job " + r.Name + ":"
		}
		s += r.progress()
	}
	return s
}

func (r *Job) progress() string {
	s := ""
	for _, w := range r.Local() {
		s += fmt.Sprintf(" rank %d %d/%d results %d/%d sends;", w.Rank, w.RecvDone, w.RecvWant, w.SendDone, w.SendWant)
	}
	if st, ok := r.Alg.(Staller); ok {
		if why := st.Stalled(); why != "" {
			s += " " + why
		}
	}
	return s
}

// Staller is a collective that can say why it waits when nothing is left
// to happen (a hier job without schedule consistency: the wait cycle).
type Staller interface{ Stalled() string }

// result is the run's figures: with one job, that job's (as before jobs
// were a list), with several, the sums and each job's own.
func (u *Session) result(events int) *Result {
	cfg := u.cfg
	res := &Result{Transport: cfg.Transport.String(), NIC: cfg.NIC.String(), Seed: cfg.Seed, Events: events, Backend: "emu"}
	if u.Fab.Live() {
		res.Backend = "tap"
	}
	seen := map[*nic.NIC]bool{}
	var end time.Duration
	var modes []string
	var top []int // the jobs that are not a scheme's inter-machine jobs
	for i, r := range u.Jobs {
		jr := r.Report()
		res.Jobs = append(res.Jobs, jr)
		end = max(end, time.Duration(jr.StartNS+jr.VirtualNS))
		for _, w := range r.Workers {
			for _, h := range append([]*nic.NIC{w.NIC}, w.NICs...) {
				if !seen[h] {
					seen[h] = true
					res.FramesSent += h.Stats.RoCESent + h.Stats.CtrlSent
				}
			}
			for i := -2; i < len(w.QPs); i++ {
				res.ICRCDrops += counters(w.endpoint(i)).RxICRCErrors
			}
		}
		if r.IO != nil {
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
		r, jr := u.Jobs[top[0]], res.Jobs[top[0]]
		res.Mode, res.Bytes, res.DType = jr.Mode, jr.Bytes, jr.DType
		res.VirtualNS, res.AlgBWGbps, res.BusBWGbps = jr.VirtualNS, jr.AlgBWGbps, jr.BusBWGbps
		res.AlgBWGBps, res.BusBWGBps = jr.AlgBWGBps, jr.BusBWGBps
		for _, w := range r.Local() {
			res.Ranks = append(res.Ranks, w.Rank)
		}
		if a := Lookup(r.Cfg.Mode); a != nil && a.InSwitch {
			res.Release = r.Cfg.Release.String()
		}
	} else {
		res.Mode = strings.Join(modes, "+")
		res.VirtualNS = int64(end)
	}
	for _, s := range u.Fab.Switches {
		res.Switch.Add(s.Report())
	}
	icrc, _ := res.Switch.AggregationDrops() // whichever programs aggregated
	res.ICRCDrops += icrc
	res.Faults = u.Fab.FaultStats()
	res.FaultDrops = res.Faults.Lost + res.Faults.Dropped
	res.QueueDrops = u.Fab.LinkStats().QueueDrops
	res.PFC = u.Fab.PFCStats()
	res.NICRx = u.nicRx()
	res.Deadlocks = u.deadlocks
	return res
}

// Report is the job's figures.
func (r *Job) Report() JobResult {
	cfg := r.Cfg
	mode := cfg.Mode
	if r.Label != "" {
		mode = r.Label
	}
	jr := JobResult{Name: r.Name, Mode: mode.String(), Ranks: r.Ranks, Workers: len(r.Workers), Bytes: cfg.TensorBytes,
		DType: cfg.DType.String(), StartNS: int64(r.startAt)}
	if r.IO != nil {
		jr.PartOf = r.Group.Name()
	}
	if rep, ok := r.Alg.(Reporter); ok {
		rep.Report(&jr)
	}
	if r.Ring != nil {
		ring := *r.Ring
		if r.RingSw != nil {
			ring.Counters, _ = netreduce.RingStatsOn(r.RingSw, r.Cfg.SwitchProgram, ring.ID)
		}
		ring.Tree = slices.Clone(ring.Tree)
		for i, s := range r.RingTree {
			t := &ring.Tree[i]
			t.Counters, _ = netreduce.RingStatsOn(s, r.Cfg.SwitchProgram, ring.ID)
			t.CTT = netreduce.CTTOn(s, r.Cfg.SwitchProgram, ring.ID)
			ring.Counters.Add(t.Counters)
		}
		jr.Ring = &ring
	}
	if r.Err != nil {
		jr.Error = r.Err.Error()
	}
	if cfg.Compress != 0 {
		jr.Compression = r.compressionReport()
	}
	if cfg.CC == CCDCQCN {
		jr.DCQCN = r.dcqcnReport()
	}
	var done time.Duration
	for _, w := range r.Workers {
		done = max(done, w.DoneAt)
		for i := -2; i < len(w.QPs); i++ {
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
		jr.AlgBWGbps = float64(jr.Bytes) * 8 / float64(done) // the tensor, or what a Reporter says the job moved
		jr.BusBWGbps = jr.AlgBWGbps * 2 * float64(jr.Workers-1) / float64(jr.Workers)
		if a := Lookup(mode); a != nil && a.PointToPoint {
			jr.BusBWGbps = jr.AlgBWGbps
		}
		jr.AlgBWGBps, jr.BusBWGBps = jr.AlgBWGbps/8, jr.BusBWGbps/8 // bytes/ns is GB/s
	}
	return jr
}

// Drain polls a worker's CQs, handing each completion to f; an error
// completion fails the job.
func (r *Job) Drain(w *Worker, f func(c roce.Completion)) {
	for i := -2; i < len(w.QPs); i++ {
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
						switch namer, ok := r.Alg.(WRNamer); {
						case !c.Recv && ok:
							what = namer.NameWR(c)
						case !c.Recv:
							what = fmt.Sprintf("WR %d (%s)", c.WRID, c.Opcode)
						}
						r.fail(w, q, c, what)
						return
					}
					f(c)
					if r.Err != nil {
						return
					}
				}
			}
		}
	}
}

// PathTo is the path of a connection of this job from NIC a to peer's QP
// dqpn: the NICs' addressing with the job's codepoint (DSCP), and ECT(0)
// when its congestion control reacts to ECN marks (DCQCN), as RoCE NICs
// send with ECN enabled. Every collective connects its QPs by it.
func (r *Job) PathTo(a, peer *nic.NIC, dqpn uint32) frames.Path {
	p := a.PathTo(peer, dqpn)
	p.TClass = r.Cfg.TClass()
	return p
}

// TClass is the traffic class (IPv4 TOS) of the job's QPs: DSCP<<2, with
// ECT(0) when its congestion control reacts to ECN marks. Frames sent on
// the job's behalf by others (a multi-rack NetReduce ring's switches) use
// it too.
func (c *Config) TClass() uint8 {
	tc := uint8(c.DSCP) << 2
	if c.CC == CCDCQCN {
		tc |= ECT0
	}
	return tc
}

// The congestion controls a job may have (Config.CC).
const (
	CCNone  = "none"
	CCDCQCN = "dcqcn"
)

// ECT0 is the ECN field's ECN-Capable Transport (0) codepoint (RFC 3168).
const ECT0 = 0b10

// inSwitchDType is the element type every job that aggregates in a switch
// sums, for the capture's section comment; "" when none does or when they
// differ (check's --dtype then says, and a mixed capture is judged as f32).
func inSwitchDType(jobs []JobConfig) string {
	d := ""
	for _, jc := range jobs {
		if a := Lookup(jc.Cfg.Mode); a == nil || !a.InSwitch {
			continue
		}
		switch s := jc.Cfg.DType.String(); {
		case d == "":
			d = s
		case d != s:
			return ""
		}
	}
	return d
}
