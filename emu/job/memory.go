package job

import (
	"bufio"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unsafe"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/roce"
)

// MemoryEstimate is what a job will hold in memory at its peak, by part,
// in bytes. It is computed from the Config alone, before anything is
// allocated, so a job too big for the machine is refused instead of
// dying in the Go runtime's out-of-memory abort.
//
// The parts follow what the jobs, the switch and the links allocate:
//
//   - Buffers, NetReduce: per worker a send buffer and a result buffer of
//     M messages × MsgLen×MTU bytes (M = ⌈T / (MsgLen×MTU - 8)⌉, 8 bytes
//     of INA header per message), plus one T-byte scratch tensor the
//     setup fills every rank's send buffer from:
//     ≈ T × (1 + 2W × stride/chunk). Ring: per worker its input (T), the
//     copy it reduces in place (T) and one receive region per step,
//     2(W-1) × ⌈T/W⌉, plus the check's references (T in all, garbage by
//     the end): ≈ T × (1 + W × (2 + 2(W-1)/W)) ≈ 4WT.
//   - Queues: the work requests a job posts: every QP's send and receive
//     rings are sized for the most WRs any worker posts (M+1 in NetReduce,
//     2(W-1) × ⌈⌈T/W⌉ / (MsgLen×MTU)⌉ + 1 in Ring). A worker fills the send
//     ring of its send QP and the receive ring of its receive QP; counted
//     twice, for the other two rings and the completions. Ring adds one
//     bool per message per step.
//   - Switch (NetReduce): the aggregator array, 2N×MsgLen aggregators of
//     W frame slots of MTU+160 bytes and an MTU-byte sum each. The slab is
//     one allocation; only the aggregators the job uses, min(M, 2N)×MsgLen
//     of them, are ever touched.
//   - Links: every frame in a link's queue or on its wire holds a
//     4352-byte buffer. Per direction that is at most what the transport
//     can have outstanding (NetReduce: N×MsgLen packets and as many
//     results and ACKs; Ring: a chunk's packets and their ACKs) and at
//     most what fits: twice the full-size frames the link's delay
//     (latency + netem delay + 4 × jitter) holds at its rate (data one
//     way, as many ACKs the other), plus the switch's egress queue.
//   - Base: the Go runtime, the code and the fabric (64 MiB).
type MemoryEstimate struct {
	Buffers int64 `json:"buffers"`
	Queues  int64 `json:"queues"`
	Switch  int64 `json:"switch"`
	Links   int64 `json:"links"`
	Base    int64 `json:"base"`
	Total   int64 `json:"total"`
	// Largest is the biggest single allocation (a buffer or the slab); it
	// must fit in an int.
	Largest int64 `json:"largest"`
}

const (
	memBase = 64 << 20
	// WRBytes is what one posted work request costs a QP's rings: a send
	// queue entry (the WR and its PSN range) and a receive queue entry.
	WRBytes = int64(unsafe.Sizeof(roce.SendWR{})) + 16 + int64(unsafe.Sizeof(roce.RecvWR{}))
	// FrameBytes is one frame in a link: its pooled buffer and its slot
	// in the queue or the in-flight list (which grows by doubling).
	FrameBytes = int64(fabric.MaxFrame) + 2*64
	// dataFrameOverhead is what a full data frame adds to its MTU of
	// payload on the wire, rounded down: Ethernet, IPv4, UDP, BTH, ICRC,
	// and preamble, FCS and inter-frame gap.
	dataFrameOverhead = 64
)

// EstimateMemory is the memory the job cfg describes will need at its
// peak (see MemoryEstimate). cfg must have passed the range checks of
// Validate (workers, window, message length, MTU, tensor size).
func EstimateMemory(cfg Config) MemoryEstimate {
	w := int64(cfg.Workers)
	mtu := int64(cfg.MTU)
	var e MemoryEstimate
	e.Base = memBase
	var outstanding int64 // frames per link direction the transport can have on the way
	if alg := Lookup(cfg.Mode); alg != nil && alg.Memory != nil {
		var whole bool
		if outstanding, whole = alg.Memory(cfg, &e); whole {
			e.Total = e.Buffers + e.Base
			return e
		}
	}
	if cfg.Devices == nil { // the TAP backend has no emulated links
		// A direction carries data at most at its rate, and as many ACKs
		// (or results) as data frames went the other way.
		link := worstLink(cfg)
		delay := link.Latency + cfg.Netem.Delay + 4*cfg.Netem.Jitter
		onWire := 2*delay.Seconds()*link.Rate/float64(8*(mtu+dataFrameOverhead)) + 2
		queue := link.Queue
		if queue == 0 {
			queue = 1000
		}
		in := min(float64(outstanding), onWire)                 // host → switch: the host sends when the line is free
		out := min(float64(outstanding), onWire+float64(queue)) // switch → host: the egress queue too
		e.Links = w * int64(in+out) * FrameBytes
	}
	e.Total = e.Buffers + e.Queues + e.Switch + e.Links + e.Base
	return e
}

// worstLink is the link the estimate sizes every link by: cfg.Link, or
// with a topology its largest rate, latency and queue (a bound: a worker's
// frames may cross any of them).
func worstLink(cfg Config) fabric.LinkConfig {
	if cfg.Topology == nil {
		return cfg.Link
	}
	var w fabric.LinkConfig
	for _, l := range cfg.Topology.Links {
		w.Rate, w.Latency, w.Queue = max(w.Rate, l.Rate), max(w.Latency, l.Latency), max(w.Queue, l.QueueLen())
	}
	return w
}

func CeilDiv(a, b int64) int64 { return (a + b - 1) / b }

// AvailableMemory is how much memory a job may use here: MemAvailable of
// /proc/meminfo, or less if the process's memory cgroup (v2 memory.max,
// v1 memory.limit_in_bytes) leaves less. ok is false where neither can be
// read (not Linux): then nothing is known and no job is refused for it.
func AvailableMemory() (avail int64, ok bool) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemAvailable:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err == nil && kb >= 0 {
				avail, ok = kb<<10, true
			}
		}
	}
	if !ok {
		return 0, false
	}
	if lim, used, found := cgroupMemory(); found && lim-used < avail {
		avail = max(lim-used, 0)
	}
	return avail, true
}

// cgroupMemory reads the memory limit and usage of the process's cgroup.
func cgroupMemory() (limit, used int64, ok bool) {
	read := func(path string) (int64, bool) {
		b, err := os.ReadFile(path)
		if err != nil {
			return 0, false
		}
		v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		if err != nil || v < 0 || v >= 1<<62 { // "max", or v1's unlimited
			return 0, false
		}
		return v, true
	}
	var dirs []string
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if p, ok := strings.CutPrefix(line, "0::"); ok {
				dirs = append(dirs, filepath.Join("/sys/fs/cgroup", p))
			}
		}
	}
	dirs = append(dirs, "/sys/fs/cgroup")
	for _, d := range dirs {
		if l, ok := read(filepath.Join(d, "memory.max")); ok {
			u, _ := read(filepath.Join(d, "memory.current"))
			return l, u, true
		}
	}
	if l, ok := read("/sys/fs/cgroup/memory/memory.limit_in_bytes"); ok {
		u, _ := read("/sys/fs/cgroup/memory/memory.usage_in_bytes")
		return l, u, true
	}
	return 0, 0, false
}

// EstimateRunMemory is the memory a run's jobs will need at their peak
// together: each job's estimate, the emulator's own base once.
func EstimateRunMemory(cfg Config) MemoryEstimate {
	jobs, err := cfg.jobConfigs()
	if err != nil {
		return EstimateMemory(cfg)
	}
	if len(cfg.Jobs) == 0 && len(jobs) == 1 {
		// The one job as it runs: its mode resolved (fr is a ring over
		// every GPU) and its ranks counted (wa's aggregator too).
		return EstimateMemory(jobs[0].Cfg)
	}
	var e MemoryEstimate
	for _, j := range jobs {
		x := EstimateMemory(j.Cfg)
		e.Buffers += x.Buffers
		e.Queues += x.Queues
		e.Switch += x.Switch
		e.Links += x.Links
		e.Largest = max(e.Largest, x.Largest)
	}
	e.Base = memBase
	e.Total = e.Buffers + e.Queues + e.Switch + e.Links + e.Base
	return e
}

// checkMemory refuses a run whose estimate exceeds the memory it may use:
// cfg.MaxMemory if set (negative: no limit), else AvailableMemory.
func (c *Config) checkMemory(jobs []JobConfig) error {
	e := EstimateRunMemory(*c)
	if e.Largest > math.MaxInt || e.Total < 0 {
		return fmt.Errorf("the job's buffers (%s) do not fit in this platform's address space; use a smaller --tensor", units.FormatBytes(e.Largest))
	}
	limit, what := c.MaxMemory, "allowed by --max-memory"
	if limit < 0 {
		return nil
	}
	if limit == 0 {
		var ok bool
		if limit, ok = AvailableMemory(); !ok {
			return nil
		}
		what = "available"
	}
	if e.Total <= limit {
		return nil
	}
	hint := "use fewer workers or a smaller --tensor"
	// A job whose tensors are generated and checked as they go holds what
	// grows with the workers and the window, not the tensor: NetReduce,
	// and the ring in the emulator (on live links its receive MR covers
	// every step).
	var streaming, window bool
	if a := Lookup(jobs[0].Cfg.Mode); len(jobs) == 1 && a != nil {
		streaming = a.Streams && (jobs[0].Cfg.Devices == nil || a.StreamsLive)
		window = a.StreamsWindow
	}
	switch {
	case streaming && window:
		hint = "use fewer workers or a smaller --window"
	case streaming:
		hint = "use fewer workers, a smaller --window or a shorter --msg-len"
	}
	switch max(e.Buffers, e.Links, e.Base, e.Queues) {
	case e.Queues:
		hint = "use a longer --msg-len, fewer workers or a smaller --tensor (every message is a posted work request)"
	case e.Base:
		hint = fmt.Sprintf("the emulator itself needs about %s", units.FormatBytes(e.Base))
	case e.Links: // never the buffers' size otherwise: the switch touches at most half as much, the queues less
		hint = "use a smaller --latency, netem delay or --queue (every frame on the way holds a buffer)"
	}
	if len(jobs) > 1 {
		return fmt.Errorf("the %d jobs need ≈%s together, %s %s; %s", len(jobs), units.FormatBytes(e.Total), units.FormatBytes(limit), what, hint)
	}
	j := jobs[0].Cfg // the one job's own workers and tensor
	size := fmt.Sprintf("%d workers × %s × %.1f", j.Workers, units.FormatBytes(j.TensorBytes), float64(e.Total)/float64(int64(j.Workers)*j.TensorBytes))
	if streaming {
		size = fmt.Sprintf("%d workers, window %d", j.Workers, j.Window)
	}
	return fmt.Errorf("the job needs ≈%s (%s), %s %s; %s", units.FormatBytes(e.Total), size, units.FormatBytes(limit), what, hint)
}
