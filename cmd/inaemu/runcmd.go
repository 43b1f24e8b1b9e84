package main

import (
	"bufio"
	crand "crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tap"
)

// exitJobFailed: the job failed with a transport error (retries exhausted...).
const exitJobFailed = 3

type faultList []string

func (f *faultList) String() string     { return strings.Join(*f, "; ") }
func (f *faultList) Set(s string) error { *f = append(*f, s); return nil }

// jobFlags are the flags that describe a job (run, switch and host take
// them; every process of a TAP job must be given the same ones).
type jobFlags struct {
	fs       *cmdFlags
	sc       scenario.Scenario
	seed     *uint64
	timeout  *int
	retry    *int
	flts     faultList
	scenario *string
	maxMem   *string // --max-memory (run and host); nil: no memory check (switch)
	topology *string // --topology; nil where not declared
	starOnly bool    // --topology and --switch-memory are declared only to be refused (TAP commands)
	faults   bool
	set      map[string]bool
}

// addJobFlags declares the job flags; faults adds the fault and scenario
// flags (only an emulated run has links to put faults on).
func addJobFlags(fs *cmdFlags, faults bool) *jobFlags {
	def := emu.DefaultConfig()
	j := &jobFlags{fs: fs, faults: faults}
	sc := &j.sc
	sc.Workers, sc.Window, sc.MsgLen, sc.MTU, sc.Queue = new(int), new(int), new(int), new(int), new(int)
	workersHelp := "number of workers H (2..64)"
	if faults {
		workersHelp += "; with a topology the job runs on its first H hosts (default: all of them)"
	}
	fs.IntVar(sc.Workers, "workers", def.Workers, workersHelp)
	fs.StringVar(&sc.Mode, "mode", def.Mode.String(), "allreduce algorithm: netreduce (through the aggregating switch) or ring (Ring-AllReduce; the switch only forwards)")
	fs.IntVar(sc.Window, "window", def.Window, "NetReduce window N: messages in flight per worker (1..32)")
	fs.IntVar(sc.MsgLen, "msg-len", def.MsgLen, "packets per message (1..255)")
	fs.IntVar(sc.MTU, "mtu", def.MTU, "path MTU: 256, 512, 1024, 2048 or 4096")
	fs.StringVar(&sc.Tensor, "tensor", units.FormatSize(def.TensorBytes), "tensor size per worker, e.g. 4MiB, 64MiB")
	fs.StringVar(&sc.DType, "dtype", def.DType.String(), "element type: f32, i32 (fixed point, wrapping) or f16")
	fs.StringVar(&sc.Pattern, "pattern", "random", "tensor contents: random (from the seed), zeros, ones or ramp")
	fs.StringVar(&sc.Transport, "transport", def.Transport.String(), "encapsulation: v2-ipv4, v2-ipv6 or v1")
	j.seed = fs.Uint64("seed", 0, "seed of every random choice (default: a fresh one, printed)")
	fs.StringVar(&sc.Release, "release", "safe", "aggregator release rule: safe, or paper (NetReduce §3.1 as written)")
	j.timeout = fs.Int("timeout", int(def.Timeout), "QP local ACK timeout exponent: 4.096us × 2^N")
	j.retry = fs.Int("retry-cnt", int(def.RetryCnt), "QP retry count (0..7; 7 means seven retries)")
	fs.StringVar(&sc.NIC, "nic", emu.DefaultConfig().NIC.String(), "NIC behaviour profile: commodity (a hardware RNIC as the IB spec says) or rxe (Linux soft-RoCE: 128 PSNs in flight, one NAK retry at a time, retry_cnt 7 infinite)")
	fs.StringVar(&sc.MaxTime, "max-time", "60s", "give up after this much virtual time (wall time on TAPs)")
	if !faults {
		return j
	}
	fs.StringVar(&sc.Link, "link", units.FormatRate(def.Link.Rate), "link rate in bit/s as tc writes it, e.g. 10G, 25Gbit, 100G (tc's bps suffixes are bytes/s)")
	fs.StringVar(&sc.Latency, "latency", def.Link.Latency.String(), "one-way propagation delay of each link")
	fs.IntVar(sc.Queue, "queue", 1000, "switch egress queue per port, frames")
	fs.StringVar(&sc.Netem, "netem", "", "netem options for every link direction, e.g. 'loss gemodel 1% 10% delay 5us 1us'")
	fs.StringVar(&sc.Loss, "loss", "", "netem loss on every link, both directions: P, or 'gemodel p r [1-h [1-k]]'")
	fs.StringVar(&sc.Reorder, "reorder", "", "netem reorder on every link: 'P [gap N]'")
	fs.StringVar(&sc.Duplicate, "duplicate", "", "netem duplicate probability on every link")
	fs.StringVar(&sc.Corrupt, "corrupt", "", "netem corrupt probability on every link (one random bit)")
	fs.Var(&j.flts, "fault", "deterministic fault 'ACTION key=value ...' (repeatable); ACTION drop|dup|corrupt|delay=D|hold=K|spoof=R; keys link=NAME (a link direction: hR-leafL, portR-in, ...; see 'inaemu topo show') or port=R dir=in|out, class=data|ack|nak|any qp=N psn=P nth=K every=K prob=P")
	j.scenario = fs.String("scenario", "", "read settings, faults, topology and jobs from a YAML file (flags given too override it)")
	return j
}

// addTopologyFlags declares --topology and --switch-memory. The TAP
// commands (switch, host) declare them only to refuse them with a reason:
// their network is the star of TAP ports, one per rank.
func (j *jobFlags) addTopologyFlags(starOnly bool) {
	j.starOnly = starOnly
	j.topology = j.fs.String("topology", "", topologyHelp)
	j.fs.StringVar(&j.sc.SwitchMemory, "switch-memory", "", "each switch's aggregation memory budget, a `SIZE` such as 64MiB (default: no bound); a NetReduce ring that does not fit is refused (exit 2)")
	if starOnly {
		j.fs.hidden = map[string]bool{"topology": true, "switch-memory": true}
	}
}

// topologyHelp is --topology's help (run and topo show).
const topologyHelp = "the network, `SPEC`: star, star:hosts=8, spine-leaf:leaves=2,hosts=4,spines=1[,uplink=40G], dims:4x4[,kinds=ring/switch], or FILE.yaml (the keys of a scenario's topology:); links it does not set take --link, --latency and --queue (default: the star of --workers hosts)"

// refuseTopology prints why --topology or --switch-memory cannot be used
// with a network of TAPs (a star, no emulated switch memory) and reports
// whether it did.
func (j *jobFlags) refuseTopology(where string) bool {
	for _, f := range []string{"topology", "switch-memory"} {
		if j.set[f] {
			j.fs.usageError("--%s: %s runs on the star of TAP ports (one per rank); topologies and switch memory are emulated only ('inaemu run' without --backend tap)", f, where)
			return true
		}
	}
	return false
}

// addMemoryFlag declares --max-memory, for the commands that allocate the
// job's buffers (run, host).
func (j *jobFlags) addMemoryFlag() {
	j.maxMem = j.fs.String("max-memory", "", "refuse a job that needs more memory than this (e.g. 8GiB, or off); default: the memory available (MemAvailable, or the cgroup's limit)")
}

// maxMemory is Config.MaxMemory from --max-memory.
func (j *jobFlags) maxMemory() (int64, error) {
	switch {
	case j.maxMem == nil:
		return -1, nil // the switch holds no tensors
	case *j.maxMem == "":
		return 0, nil
	case *j.maxMem == "off" || *j.maxMem == "none":
		return -1, nil
	}
	n, err := units.ParseSize(*j.maxMem)
	if err != nil {
		return 0, fmt.Errorf("--max-memory: %v, or off", err)
	}
	return n, nil
}

// config builds the job from the parsed flags (and scenario); false means
// a usage error has been printed.
func (j *jobFlags) config() (emu.Config, bool) {
	fs, sc := j.fs, &j.sc
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	j.set = set
	if j.starOnly && j.refuseTopology("inaemu "+fs.name) {
		return emu.Config{}, false
	}
	file := ""
	if j.scenario != nil {
		file = *j.scenario
	}
	cfg := emu.DefaultConfig()
	merged := &scenario.Scenario{}
	if file != "" {
		var err error
		if merged, err = scenario.Load(file); err != nil {
			fs.usageError("scenario: %v", err)
			return cfg, false
		}
		if merged.Seed != nil && !set["seed"] {
			*j.seed, set["seed"] = *merged.Seed, true
		}
	}
	// Flags given on the command line (and, without a scenario, the
	// defaults) override. Workers only when given: with a topology, no
	// --workers means every host.
	over := scenario.Scenario{Faults: j.flts}
	pick := func(name string, apply func()) {
		if set[name] || file == "" {
			apply()
		}
	}
	if set["workers"] {
		over.Workers = sc.Workers
	}
	pick("mode", func() { over.Mode = sc.Mode })
	pick("window", func() { over.Window = sc.Window })
	pick("msg-len", func() { over.MsgLen = sc.MsgLen })
	pick("mtu", func() { over.MTU = sc.MTU })
	pick("tensor", func() { over.Tensor = sc.Tensor })
	pick("dtype", func() { over.DType = sc.DType })
	pick("pattern", func() { over.Pattern = sc.Pattern })
	pick("transport", func() { over.Transport = sc.Transport })
	pick("release", func() { over.Release = sc.Release })
	pick("max-time", func() { over.MaxTime = sc.MaxTime })
	pick("timeout", func() { over.Timeout = j.timeout })
	pick("retry-cnt", func() { over.RetryCnt = j.retry })
	pick("nic", func() { over.NIC = sc.NIC })
	if j.faults {
		pick("link", func() { over.Link = sc.Link })
		pick("latency", func() { over.Latency = sc.Latency })
		pick("queue", func() { over.Queue = sc.Queue })
		for _, n := range []string{"netem", "loss", "reorder", "duplicate", "corrupt"} {
			if set[n] {
				over.Netem, over.Loss, over.Reorder, over.Duplicate, over.Corrupt = sc.Netem, sc.Loss, sc.Reorder, sc.Duplicate, sc.Corrupt
				break
			}
		}
	}
	if j.topology != nil && !j.starOnly {
		if set["topology"] {
			spec, err := topo.ParseFlag(*j.topology)
			if err != nil {
				fs.usageError("--topology: %v", err)
				return cfg, false
			}
			over.Topology = spec
		}
		over.SwitchMemory = sc.SwitchMemory
	}
	// One Apply of the file with the flags over it, so that a topology
	// from the file takes --link, --latency and --queue where it sets none.
	merged.Override(&over)
	if err := merged.Apply(&cfg); err != nil {
		if se := (*scenario.Error)(nil); file != "" && errors.As(err, &se) && !j.fromFlags(se.Key) {
			fs.usageError("scenario %s: %v", file, err)
		} else {
			fs.usageError("%v", err)
		}
		return cfg, false
	}
	if set["seed"] {
		cfg.Seed = *j.seed
	} else {
		var b [8]byte
		_, _ = crand.Read(b[:])
		cfg.Seed = binary.LittleEndian.Uint64(b[:]) >> 16 // short enough to type
	}
	mem, err := j.maxMemory()
	if err != nil {
		fs.usageError("%v", err)
		return cfg, false
	}
	cfg.MaxMemory = mem
	if err := cfg.Validate(); err != nil {
		fs.usageError("%v", err)
		return cfg, false
	}
	// The jobs' estimate fits; tell the garbage collector the limit too,
	// so garbage never takes the heap past it.
	if mem == 0 {
		mem, _ = emu.AvailableMemory()
	}
	if mem > 0 {
		debug.SetMemoryLimit(mem)
	}
	return cfg, true
}

// fromFlags reports whether the scenario key that Apply refused was given
// on the command line (so the error is the flag's, not the file's).
func (j *jobFlags) fromFlags(key string) bool {
	switch key {
	case "netem":
		return j.set["netem"] || j.set["loss"] || j.set["reorder"] || j.set["duplicate"] || j.set["corrupt"]
	case "workers":
		return j.set["workers"] || j.set["topology"]
	}
	return j.set[strings.ReplaceAll(key, "_", "-")]
}

func runRun(args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("run", "[flags]", stdout, stderr)
	jf := addJobFlags(fs, true)
	jf.addMemoryFlag()
	jf.addTopologyFlags(false)
	pcap := fs.String("pcap", "", "write a pcapng capture: one interface per link direction (on the star portR-in, portR-out), faults as comments")
	backend := fs.String("backend", "emu", "emu (emulated links in virtual time) or tap (real TAP interfaces and Linux bridges, wall-clock time; needs root)")
	prefix := fs.String("prefix", tap.DefaultPrefix, "with --backend tap: the interfaces' name prefix (see 'inaemu tap up')")
	asJSON := fs.Bool("json", false, "print one JSON object (exact, mode, workers, bytes, virtual_ns, algbw_gbps, busbw_gbps, frames_sent, retransmissions, naks, timeouts, icrc_drops, fault_drops, switch{...}, seed, ...)")
	if code, ok := fs.parseFlagsOnly(args); !ok {
		return code
	}
	cfg, ok := jf.config()
	if !ok {
		return exitUsage
	}
	switch *backend {
	case "emu":
	case "tap":
		if jf.refuseTopology("the TAP backend") {
			return exitUsage
		}
		if cfg.Topology != nil || cfg.SwitchMemory != 0 {
			fs.usageError("scenario %s: topology, switch_memory: the TAP backend runs on the star of TAP ports (one per rank); topologies and switch memory are emulated only", *jf.scenario)
			return exitUsage
		}
		if *pcap != "" {
			fs.usageError("--pcap records emulated links; on TAPs capture on the bridges (see the README)")
			return exitUsage
		}
		if !jf.set["timeout"] {
			cfg.Timeout = tapTimeout
		}
		return runOnTAPs(fs, cfg, *prefix, *asJSON)
	default:
		fs.usageError("--backend %q: want emu or tap", *backend)
		return exitUsage
	}
	var capFile *os.File
	var capBuf *bufio.Writer
	if *pcap != "" {
		var err error
		capFile, err = os.Create(*pcap)
		if err != nil {
			fmt.Fprintf(stderr, "inaemu run: %v\n", err)
			return exitUsage
		}
		capBuf = bufio.NewWriterSize(capFile, 1<<20)
		cfg.Capture = capBuf
	}
	if !*asJSON {
		printHeader(stdout, cfg)
	}
	res, runErr := emu.Run(cfg)
	if capFile != nil {
		err := capBuf.Flush()
		if err == nil {
			err = capFile.Close()
		}
		if err != nil && runErr == nil {
			runErr = err
		}
	}
	return reportJob(fs, res, runErr, *pcap, *asJSON)
}

// reportJob prints a job's result (text or JSON) and maps it to the exit
// code: 0 exact, 1 wrong result, 2 usage, 3 the job failed.
func reportJob(fs *cmdFlags, res *emu.Result, runErr error, pcap string, asJSON bool) int {
	stdout, stderr := fs.stdout, fs.stderr
	name := "inaemu " + fs.name
	var cerr *emu.ConfigError
	if errors.As(runErr, &cerr) {
		fs.usageError("%v", cerr)
		return exitUsage
	}
	if res == nil {
		fmt.Fprintf(stderr, "%s: %v\n", name, runErr)
		return exitJobFailed
	}
	if asJSON {
		enc := json.NewEncoder(stdout)
		if err := enc.Encode(res); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", name, err)
			return exitFail
		}
	} else {
		printSummary(stdout, res, pcap, runErr)
	}
	switch {
	case runErr != nil:
		fmt.Fprintf(stderr, "%s: job failed: %v (replay: --seed %d)\n", name, runErr, res.Seed)
		return exitJobFailed
	case !res.Exact:
		job := ""
		if len(res.Jobs) > 1 {
			job = "job " + wrongJob(res) + " "
		}
		fmt.Fprintf(stderr, "%s: RESULT DIFFERS: %srank %d element %d is %s, want %s (seed %d)\n",
			name, job, res.Mismatch.Rank, res.Mismatch.Element, res.Mismatch.Got, res.Mismatch.Want, res.Seed)
		return exitFail
	}
	return exitOK
}

// printHeader says what is about to run: the job, or the number of jobs,
// and the network.
func printHeader(w io.Writer, cfg emu.Config) {
	net := fmt.Sprintf("%s links, %v latency", units.FormatRate(cfg.Link.Rate), cfg.Link.Latency)
	if t := cfg.Topology; t != nil {
		net = fmt.Sprintf("on %s (%s, %s; default link %s, %v)", t.Kind, count(len(t.Hosts()), "host"), count(len(t.Switches()), "switch"),
			units.FormatRate(cfg.Link.Rate), cfg.Link.Latency)
	}
	if len(cfg.Jobs) == 0 {
		fmt.Fprintf(w, "inaemu run: %s allreduce, %d workers × %s %s, %s, seed %d\n",
			cfg.Mode, cfg.Workers, units.FormatSize(cfg.TensorBytes), cfg.DType, net, cfg.Seed)
		return
	}
	if cfg.Topology == nil {
		net = fmt.Sprintf("on the star of %d hosts, %s", cfg.Workers, net)
	}
	fmt.Fprintf(w, "inaemu run: %s %s, seed %d\n", count(len(cfg.Jobs), "job"), net, cfg.Seed)
}

// printJobs writes one line per job: name, mode, ranks, verdict, time and
// bandwidths, in aligned columns.
func printJobs(w io.Writer, r *emu.Result, runErr error) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, j := range r.Jobs {
		verdict := "exact"
		switch {
		case j.Error != "":
			verdict = "FAILED"
		case j.Mismatch != nil:
			verdict = "WRONG"
		case runErr != nil || !j.Exact:
			verdict = "not checked" // the run stopped before results were compared
		}
		at := time.Duration(j.VirtualNS).String()
		if j.StartNS > 0 {
			at += fmt.Sprintf(" from %v", time.Duration(j.StartNS))
		}
		fmt.Fprintf(tw, "  job       %s\t%s\t%d ranks\t%s\t%s\talgbw %.2f Gb/s\tbusbw %.2f Gb/s\n",
			j.Name, j.Mode, j.Workers, verdict, at, j.AlgBWGbps, j.BusBWGbps)
	}
	_ = tw.Flush()
}

// wrongJob is the name of the first job whose result differs ("" for
// none).
func wrongJob(r *emu.Result) string {
	for _, j := range r.Jobs {
		if j.Mismatch != nil {
			return j.Name
		}
	}
	return ""
}

func printSummary(w io.Writer, r *emu.Result, pcap string, runErr error) {
	multi := len(r.Jobs) > 1
	if multi {
		printJobs(w, r, runErr)
	}
	switch {
	case runErr != nil:
		fmt.Fprintf(w, "  result    FAILED: %v\n", runErr)
	case multi && r.Exact:
		fmt.Fprintf(w, "  result    EXACT: all %d ranks of the %d jobs hold the bit-exact sum\n", r.Workers, len(r.Jobs))
	case multi:
		fmt.Fprintf(w, "  result    WRONG: job %s rank %d element %d is %s, want %s\n", wrongJob(r), r.Mismatch.Rank, r.Mismatch.Element, r.Mismatch.Got, r.Mismatch.Want)
	case r.Exact && len(r.Ranks) < r.Workers:
		fmt.Fprintf(w, "  result    EXACT: rank %v holds the bit-exact sum (the other ranks ran elsewhere)\n", r.Ranks)
	case r.Exact:
		fmt.Fprintf(w, "  result    EXACT: all %d workers hold the bit-exact sum\n", r.Workers)
	default:
		fmt.Fprintf(w, "  result    WRONG: rank %d element %d is %s, want %s\n", r.Mismatch.Rank, r.Mismatch.Element, r.Mismatch.Got, r.Mismatch.Want)
	}
	switch {
	case runErr == nil && multi:
		fmt.Fprintf(w, "  time      %v virtual until the last job's end, %v wall\n", time.Duration(r.VirtualNS), r.Wall.Round(time.Millisecond))
	case runErr == nil && r.Backend == "tap":
		fmt.Fprintf(w, "  time      %v from start barrier to last result (algbw %.2f Gb/s, busbw %.2f Gb/s), %v wall in all\n",
			time.Duration(r.VirtualNS).Round(time.Microsecond), r.AlgBWGbps, r.BusBWGbps, r.Wall.Round(time.Millisecond))
	case runErr == nil:
		fmt.Fprintf(w, "  time      %v virtual (algbw %.2f Gb/s, busbw %.2f Gb/s), %v wall\n",
			time.Duration(r.VirtualNS), r.AlgBWGbps, r.BusBWGbps, r.Wall.Round(time.Millisecond))
	}
	fmt.Fprintf(w, "  frames    %d sent, %d retransmitted, %d NAKs, %d timeouts, %d ICRC drops (NIC profile %s)\n",
		r.FramesSent, r.Retransmissions, r.NAKs, r.Timeouts, r.ICRCDrops, r.NIC)
	if r.Backend != "tap" { // on TAPs there are no emulated links to fault
		f := r.Faults
		fmt.Fprintf(w, "  faults    %d lost, %d dropped by events, %d duplicated, %d corrupted, %d delayed, %d reordered, %d held, %d spoofed; %d queue drops\n",
			f.Lost, f.Dropped, f.Duplicated, f.Corrupted, f.Delayed, f.Reordered, f.Held, f.Spoofed, r.QueueDrops)
	}
	if strings.Contains(r.Mode, "netreduce") && r.Switch.Frames > 0 {
		s := r.Switch
		release := ""
		if r.Release != "" {
			release = " (release " + r.Release + ")"
		}
		fmt.Fprintf(w, "  switch    %d aggregations, %d result re-sends, %d CLT misses, %d first-lost drops, %d stale forwards, %d port drops%s\n",
			s.Aggregations, s.ResultResends, s.CLTMisses, s.FirstLostDrops, s.StaleForwards, s.PortDrops, release)
	}
	if pcap != "" {
		fmt.Fprintf(w, "  capture   %s (one interface per link direction; open it in Wireshark)\n", pcap)
	}
	fmt.Fprintf(w, "  seed      %d\n", r.Seed)
}
