package scenario

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/internal/units"
)

// Option is one setting of a run, declared once: its key in a scenario
// file, the flag that gives it on the command line, its help and its
// default. The field it sets is the Scenario field whose YAML tag is Key,
// so a flag and a file can never disagree on where a setting goes; the
// command line registers one flag per Option (cmd/inaemu) and the files
// read the same fields.
type Option struct {
	Key   string // the scenario key: msg_len
	Flag  string // the flag's name: msg-len (the key with - for _, but faults: --fault)
	Arg   string // the value's name in the help: N, SIZE, RATE, D
	Help  string
	Group Group
	// Default is the value a run takes without the option, as the flag
	// shows it ("" for none); it is emu.DefaultConfig's setting written
	// out, not a second default.
	Default string
	// Kind says how the value is read, for the notes on surprising
	// spellings (rates and durations follow tc).
	Kind Kind
	// Min and Max bound a Number that sizes the run (a slice per
	// worker, a slot per message in flight) or fits a field: a value
	// outside them is refused before anything is built from it. Max 0:
	// no bounds here (emu checks what is left).
	Min, Max int
}

// Check refuses a Number outside the option's bounds.
func (o Option) Check(n int) error {
	if o.Max != 0 && (n < o.Min || n > o.Max) {
		return fmt.Errorf("want %d..%d", o.Min, o.Max)
	}
	return nil
}

// Group is the kind of setting: which commands take an Option.
type Group int

const (
	// JobGroup: the job every process of a run takes (run, sweep,
	// switch, host).
	JobGroup Group = iota
	// LinkGroup: the emulated links (run, topo show).
	LinkGroup
	// FaultGroup: impairments of the emulated links (run).
	FaultGroup
	// NetworkGroup: the topology and the switches' memory (run, topo
	// show; refused on TAPs).
	NetworkGroup
)

// Kind is how an Option's value is spelled.
type Kind int

const (
	Text     Kind = iota // a word or a spec
	Number               // an integer
	Rate                 // a link rate, tc's way (units.ParseRate)
	Duration             // a time, tc's way (faults.ParseDuration)
	Size                 // a byte count (units.ParseSize)
	List                 // repeatable: each flag adds one (faults)
)

// Exceptions are the scenario keys that have no flag, and why.
var Exceptions = map[string]string{
	"jobs": "a list of jobs, each with its own ranks and settings: a structure only a file can say",
}

// Options are the settings of a run, in the order --help lists them.
func Options() []Option {
	def := emu.DefaultConfig()
	return []Option{
		// One worker is one machine of GPUs for a scheme (fr, pn, pr, ta);
		// emu refuses it elsewhere.
		{Key: "workers", Arg: "N", Group: JobGroup, Kind: Number, Default: fmt.Sprint(def.Workers), Min: 1, Max: netreduce.MaxWorkers,
			Help: "number of workers H (2..64; a scheme over GPUs: 1..64 machines); with a topology the job runs on its first H hosts (default there: all of them)"},
		{Key: "mode", Arg: "MODE", Group: JobGroup, Default: def.Mode.String(),
			Help: "the job's algorithm, one of the registered modes: " + emu.ModeHelp()},
		{Key: "verb", Arg: "VERB", Group: JobGroup, Default: def.Verb.String(),
			Help: "what a --mode verbs job does, each rank against the next through the switch, checked bit for bit: write, read (RDMA READ), fetch-add or cmp-swap (8-byte atomics; see docs/verbs.md)"},
		{Key: "window", Arg: "N", Group: JobGroup, Kind: Number, Default: fmt.Sprint(def.Window), Min: 1, Max: netreduce.MaxWindow,
			Help: "NetReduce window N: messages in flight per worker (1..32)"},
		{Key: "msg_len", Arg: "K", Group: JobGroup, Kind: Number, Default: fmt.Sprint(def.MsgLen), Min: 1, Max: netreduce.MaxMsgLen,
			Help: "packets per message (1..255)"},
		{Key: "mtu", Arg: "BYTES", Group: JobGroup, Kind: Number, Default: fmt.Sprint(def.MTU),
			Help: "path MTU: 256, 512, 1024, 2048 or 4096"},
		{Key: "tensor", Arg: "SIZE", Group: JobGroup, Kind: Size, Default: units.FormatSize(def.TensorBytes),
			Help: "tensor size per worker, e.g. 4MiB, 64MiB, 4MB, or bytes"},
		{Key: "dtype", Arg: "TYPE", Group: JobGroup, Default: def.DType.String(),
			Help: "element type: f32, i32 (fixed point, wrapping) or f16"},
		{Key: "pattern", Arg: "PATTERN", Group: JobGroup, Default: def.Pattern.String(),
			Help: "tensor contents: random (from the seed), zeros, ones, ramp, or float32 gradients: lognormal:MU,SIGMA (magnitudes e^N(MU,SIGMA); presets lognormal:resnet50, lognormal:hdc) or table3:NET[,K] (INCEPTIONN Table III's class shares for alexnet, hdc, resnet50 or vgg16 at bound 2^-K, default the --compress bound)"},
		{Key: "transport", Arg: "ENCAP", Group: JobGroup, Default: def.Transport.String(),
			Help: "encapsulation: v2-ipv4, v2-ipv6 or v1"},
		{Key: "seed", Arg: "S", Group: JobGroup, Kind: Number,
			Help: "seed of every random choice (default: a fresh one, printed)"},
		{Key: "release", Arg: "RULE", Group: JobGroup, Default: def.Release.String(),
			Help: "aggregator release rule: safe, or paper (NetReduce §3.1 as written)"},
		{Key: "compress", Arg: "BOUND", Group: JobGroup,
			Help: "compress float32 data in the NICs as INCEPTIONN does, with error bound BOUND = 2^-K (2^-10, 2^-8, 2^-6 in the paper; K alone also reads): every hop of a ring job, the gradients of a wa job (default: off)"},
		{Key: "compress_rate", Arg: "RATE", Group: JobGroup, Kind: Rate, Default: units.FormatRate(def.CompressRate),
			Help: "each NIC compression engine's rate in bits of uncompressed data per second (the paper's: 256 bits per 100 MHz cycle)"},
		{Key: "cc", Arg: "CC", Group: JobGroup, Default: "none",
			Help: "the job's congestion control in its NICs: none (line rate whatever the network says) or dcqcn (DCQCN, Zhu et al. SIGCOMM '15: ECT(0) on its frames, CNPs from the receivers, rate cuts and recovery in the senders; docs/congestion.md)"},
		{Key: "traffic", Arg: "PATTERN", Group: JobGroup,
			Help: "what a --mode traffic job's flows are: incast (the default: every rank to the last, or --sink), all-to-all (every ordered pair) or permutation (each rank to one other, drawn from the seed); each moves --tensor bytes with RDMA WRITEs checked bit for bit (docs/traffic.md)"},
		{Key: "sink", Arg: "HOST", Group: JobGroup,
			Help: "a traffic incast's sink, one of the job's ranks (default: the last)"},
		{Key: "flow_rate", Arg: "RATE", Group: JobGroup, Kind: Rate,
			Help: "pace each traffic flow at RATE, tc's way (default: as fast as its writes complete)"},
		{Key: "chunks", Arg: "N", Group: JobGroup, Kind: Number, Min: 1, Max: 4096,
			Help: "a --mode hier job's chunks (1..4096; default 1): its tensor cut into N equal chunks, each pipelined through its own RS and AG stages (docs/themis.md)"},
		{Key: "scheduler", Arg: "NAME", Group: JobGroup,
			Help: "a --mode hier job's order of dimensions per chunk: baseline (RS on dimension 1..D, then AG on D..1; the default) or themis (Themis's greedy choice per chunk on the dimensions' loads, Rashidi et al. ISCA '22)"},
		{Key: "policy", Arg: "NAME", Group: JobGroup,
			Help: "a --mode hier job's order of service on each dimension: fifo (chunks in the order they become ready; the default) or scf (smallest chunk first)"},
		{Key: "collective", Arg: "NAME", Group: JobGroup,
			Help: "a --mode hier job's collective: all-reduce (the default), reduce-scatter (each rank ends with its shard of the sum) or all-gather (each rank starts with its shard of --tensor and ends with every rank's) (docs/themis.md)"},
		{Key: "ina_dims", Arg: "D[,D...]", Group: JobGroup,
			Help: "a --mode hier job's in-network aggregation dimensions (from 1): switch dimensions whose switches run each chunk's AR stage (its RS and AG meeting there) as one NetReduce aggregation per group (docs/themis.md)"},
		{Key: "consistency", Arg: "on|off", Group: JobGroup,
			Help: "a --mode hier job's schedule consistency: on (every rank serves a dimension's chunks in the one order all compute; the default) or off (each in the order its chunks become ready locally, as without Themis's §4.6 rule: a disagreement ends the run naming the wait cycle)"},
		{Key: "dscp", Arg: "N", Group: JobGroup, Kind: Number, Default: "0", Min: 0, Max: 63,
			Help: "the DSCP the job's QPs send (0..63): the switches queue its frames in priority DSCP>>3 (RoCE's customary 26 is priority 3)"},
		{Key: "bcast", Arg: "WAY", Group: JobGroup, Default: string(def.Bcast),
			Help: "how a wa job's aggregator sends the sum back: unicast (to each worker in turn), tree (a binomial tree over the aggregator and the workers) or worker-tree (each summed message straight to worker 0, then a binomial tree over the workers: the (p + log2 p)·n·β of INCEPTIONN's model)"},
		{Key: "timeout", Arg: "EXP", Group: JobGroup, Kind: Number, Default: fmt.Sprint(def.Timeout), Min: 0, Max: 31,
			Help: "QP local ACK timeout exponent: 4.096us × 2^EXP (14 ≈ 67 ms, as perftest sets it)"},
		{Key: "retry_cnt", Arg: "N", Group: JobGroup, Kind: Number, Default: fmt.Sprint(def.RetryCnt), Min: 0, Max: 7,
			Help: "QP retry count (0..7; 7 means seven retries, forever with --nic rxe)"},
		{Key: "nic", Arg: "PROFILE", Group: JobGroup, Default: def.NIC.String(),
			Help: "NIC behaviour profile: commodity (a hardware RNIC as the IB spec says) or rxe (Linux soft-RoCE: 128 PSNs in flight, one NAK retry at a time, retry_cnt 7 infinite)"},
		{Key: "max_time", Arg: "D", Group: JobGroup, Kind: Duration, Default: "60s",
			Help: "give up after this much virtual time (wall time on TAPs); a time as tc writes it, e.g. 60s, 500ms"},
		{Key: "link", Arg: "RATE", Group: LinkGroup, Kind: Rate, Default: units.FormatRate(def.Link.Rate),
			Help: "link rate as tc writes it: 10G or 10gbit (bits), 100mbit; tc's bps suffixes are bytes per second (10gbps = 80 Gbit/s)"},
		{Key: "latency", Arg: "D", Group: LinkGroup, Kind: Duration, Default: def.Link.Latency.String(),
			Help: "one-way propagation delay of each link, a time as netem writes it: 1us, 500ns, 2ms (a bare number is nanoseconds, as netem reads it)"},
		{Key: "queue", Arg: "FRAMES", Group: LinkGroup, Kind: Number, Default: "1000",
			Help: "egress queue per link direction, frames"},
		{Key: "netem", Arg: "SPEC", Group: FaultGroup,
			Help: "netem options for every link direction, e.g. 'loss gemodel 1% 10% delay 5us 1us'"},
		{Key: "loss", Arg: "P", Group: FaultGroup,
			Help: "netem loss on every link, both directions: P, or 'gemodel p r [1-h [1-k]]'"},
		{Key: "reorder", Arg: "SPEC", Group: FaultGroup,
			Help: "netem reorder on every link: 'P [gap N]'"},
		{Key: "duplicate", Arg: "P", Group: FaultGroup,
			Help: "netem duplicate probability on every link"},
		{Key: "corrupt", Arg: "P", Group: FaultGroup,
			Help: "netem corrupt probability on every link (one random bit)"},
		{Key: "faults", Flag: "fault", Arg: "SPEC", Group: FaultGroup, Kind: List,
			Help: "deterministic fault 'ACTION key=value ...' (repeatable); ACTION drop|dup|corrupt|delay=D|hold=K|spoof=R; keys link=NAME (a link direction: hR-leafL, portR-in, ...; see 'inaemu topo show') or port=R dir=in|out, class=data|ack|nak|cnp|pause|any qp=N psn=P nth=K every=K prob=P%"},
		{Key: "topology", Arg: "SPEC", Group: NetworkGroup,
			Help: "the network: star, star:hosts=8, spine-leaf:leaves=2,hosts=4,spines=1[,uplink=40G], dims:4x4[,kinds=ring/switch], or FILE.yaml (the keys of a scenario's topology:); links it does not set take --link, --latency and --queue (default: the star of --workers hosts)"},
		{Key: "switch_memory", Arg: "SIZE", Group: NetworkGroup, Kind: Size,
			Help: "each switch's aggregation memory budget, e.g. 64MiB (default: no bound); a NetReduce ring that does not fit is refused (exit 2)"},
		{Key: "switch_program", Arg: "NAME", Group: NetworkGroup, Default: def.SwitchProgram,
			Help: "the switch program NetReduce jobs aggregate on: " + programList()},
		{Key: "port_security", Arg: "on|off", Group: NetworkGroup, Default: "on",
			Help: "switch host ports take their own NIC's source MAC and address only, as port security and IP source guard do; off leaves forged frames to the switch programs' own checks (a spoof= aimed at a job no program checks is then refused)"},
		{Key: "switch_buffer", Arg: "SIZE", Group: NetworkGroup, Kind: Size, Default: "12MB",
			Help: "each switch's shared packet buffer (a Broadcom Trident II's by default); given, or with --pfc, --red or --sched, its memory manager admits, drops and pauses by it instead of the --queue frame limit (docs/congestion.md)"},
		{Key: "pfc", Arg: "PRIOS", Group: NetworkGroup, Default: "off",
			Help: "PFC (802.1Qbb) on the switches' ports and NICs: off, on (lossless the priorities the jobs send on, DSCP>>3), or priorities 0..7 such as 3 or 3,4"},
		{Key: "pfc_xoff", Arg: "SIZE", Group: NetworkGroup, Default: "dynamic",
			Help: "the XOFF threshold per ingress port and lossless priority: a size, or dynamic (alpha × the free shared buffer, as commodity switches configure it)"},
		{Key: "pfc_alpha", Arg: "A", Group: NetworkGroup,
			Help: "the dynamic threshold's factor alpha, e.g. 1, 0.5 or 1/8 (default: docs/congestion.md)"},
		{Key: "pfc_headroom", Arg: "SIZE", Group: NetworkGroup,
			Help: "what a lossless ingress port and priority may hold beyond XOFF while its pause takes effect (default: from the port's link rate and delay)"},
		{Key: "sched", Arg: "SCHED", Group: NetworkGroup,
			Help: "the switch egress queues per priority and their scheduler: strict, dwrr, or dwrr:W0,...,W7 (weights 1..100); default: one FIFO per port, or strict with --pfc or --red"},
		{Key: "red", Arg: "KMIN,KMAX,PMAX", Group: NetworkGroup, Default: "off",
			Help: "RED/ECN marking of every switch egress queue per priority: off, or CE on ECN-capable frames with probability 0 below KMIN bytes queued, rising to PMAX at KMAX, 1 above (DCQCN's: 5KB,200KB,1%)"},
		{Key: "nic_rx_rate", Arg: "RATE", Group: NetworkGroup, Kind: Rate,
			Help: "a slow receiver: each host drains its NIC's receive buffer at RATE (e.g. 5G behind a 10G link); a NIC whose buffer crosses XOFF pauses its link's lossless priorities (with --pfc), else drops what does not fit (default: off, the host takes every frame at once)"},
		{Key: "nic_rx_buffer", Arg: "SIZE", Group: NetworkGroup, Kind: Size,
			Help: "each NIC's receive buffer with --nic-rx-rate (default: 262016 B, a ConnectX port's; at least two 4352 B frames)"},
	}
}

// FlagName is the option's flag: Flag, or the key with - for _.
func (o Option) FlagName() string {
	if o.Flag != "" {
		return o.Flag
	}
	return strings.ReplaceAll(o.Key, "_", "-")
}

// Field is the Scenario field the option sets, addressable: a string, a
// *int, a *uint64, a []string or a *topo.Spec.
func (o Option) Field(s *Scenario) (reflect.Value, error) {
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		if yamlKey(v.Type().Field(i)) == o.Key {
			return v.Field(i), nil
		}
	}
	return reflect.Value{}, fmt.Errorf("scenario: option %q has no field", o.Key)
}

// Keys are the scenario's top-level keys, in the order of its fields.
func Keys() []string {
	t := reflect.TypeFor[Scenario]()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = yamlKey(t.Field(i))
	}
	return keys
}

func yamlKey(f reflect.StructField) string { return strings.Split(f.Tag.Get("yaml"), ",")[0] }

// OptionByKey is the option of a scenario key, if it has one.
func OptionByKey(key string) (Option, bool) {
	for _, o := range Options() {
		if o.Key == key {
			return o, true
		}
	}
	return Option{}, false
}

// programList is the registered switch programs with their help, as the
// flag's help lists them.
func programList() string {
	var b strings.Builder
	for i, n := range netreduce.RingPrograms() {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(n + " (" + switching.ProgramDoc(n) + ")")
	}
	return b.String()
}
