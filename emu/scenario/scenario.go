// Package scenario reads and writes scenarios. A scenario is a run of the
// emulator written down as YAML: the settings `inaemu run` takes as flags
// (same names with _ for -, same value syntax), its faults, and optionally
// the network (a topology and each switch's aggregation memory) and the
// jobs placed on it. Apply turns a scenario into an emu.Config; emu itself
// knows nothing of files.
//
// The flat form describes one allreduce on the star of `workers` hosts:
//
//	workers: 8
//	mode: netreduce
//	tensor: 4MiB
//	link: 10G
//	latency: 1us
//	seed: 42
//	netem: "loss 0.1%"
//	faults:
//	  - drop port=0 dir=out class=data nth=1
//
// A topology and jobs make it a run of several jobs on any network:
//
//	link: 10G
//	topology: {kind: spine-leaf, leaves: 2, hosts_per_leaf: 4, spines: 1, uplink: 40G}
//	switch_memory: 64MiB
//	jobs:
//	  - {name: a, mode: netreduce, ranks: [h0, h1, h2, h3], tensor: 4MiB}
//	  - {name: b, mode: ring, ranks: [h4, h5, h6, h7], tensor: 4MiB, start: 50us}
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/inceptionn"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// Scenario is a run written down: the settings `inaemu run` takes as
// flags, with the same names and value syntax, its faults, and optionally
// its topology, switch memory and jobs. Fields left out (nil or "") keep
// their defaults.
type Scenario struct {
	Workers   *int     `yaml:"workers,omitempty"`
	Mode      string   `yaml:"mode,omitempty"`
	Verb      string   `yaml:"verb,omitempty"`
	Window    *int     `yaml:"window,omitempty"`
	MsgLen    *int     `yaml:"msg_len,omitempty"`
	MTU       *int     `yaml:"mtu,omitempty"`
	Tensor    string   `yaml:"tensor,omitempty"`
	DType     string   `yaml:"dtype,omitempty"`
	Pattern   string   `yaml:"pattern,omitempty"`
	Transport string   `yaml:"transport,omitempty"`
	Link      string   `yaml:"link,omitempty"`
	Latency   string   `yaml:"latency,omitempty"`
	Queue     *int     `yaml:"queue,omitempty"`
	Seed      *uint64  `yaml:"seed,omitempty"`
	Release   string   `yaml:"release,omitempty"`
	Timeout   *int     `yaml:"timeout,omitempty"`
	RetryCnt  *int     `yaml:"retry_cnt,omitempty"`
	NIC       string   `yaml:"nic,omitempty"`
	MaxTime   string   `yaml:"max_time,omitempty"`
	Netem     string   `yaml:"netem,omitempty"`
	Loss      string   `yaml:"loss,omitempty"`
	Reorder   string   `yaml:"reorder,omitempty"`
	Duplicate string   `yaml:"duplicate,omitempty"`
	Corrupt   string   `yaml:"corrupt,omitempty"`
	Faults    []string `yaml:"faults,omitempty"`
	Compress  string   `yaml:"compress,omitempty"`
	Bcast     string   `yaml:"bcast,omitempty"`
	// CompressRate is the NICs' compression engines' rate.
	CompressRate string `yaml:"compress_rate,omitempty"`
	// CC is the jobs' congestion control (none or dcqcn) and DSCP the
	// codepoint their QPs send.
	CC   string `yaml:"cc,omitempty"`
	DSCP *int   `yaml:"dscp,omitempty"`
	// Traffic, Sink and FlowRate are a traffic job's pattern, incast's
	// sink and each flow's pacing (a job's traffic, sink and rate keys).
	Traffic  string `yaml:"traffic,omitempty"`
	Sink     string `yaml:"sink,omitempty"`
	FlowRate string `yaml:"flow_rate,omitempty"`
	// Chunks, Scheduler, Policy and Collective are a hier job's: the
	// chunks its tensor is cut into, the scheduler of their dimension
	// orders (baseline or themis), the dimensions' order of service (fifo
	// or scf) and its collective (all-reduce, reduce-scatter or
	// all-gather).
	Chunks     *int   `yaml:"chunks,omitempty"`
	Scheduler  string `yaml:"scheduler,omitempty"`
	Policy     string `yaml:"policy,omitempty"`
	Collective string `yaml:"collective,omitempty"`
	// Consistency is on (every rank serves a dimension's chunks in the
	// one order all compute) or off (each in its own local order: a
	// disagreement ends the run with the wait cycle named).
	Consistency string `yaml:"consistency,omitempty"`
	// INADims are a hier job's in-network aggregation dimensions: switch
	// dimensions (1-based, comma-separated) whose switches run a chunk's
	// AR stage as NetReduce (docs/themis.md, Packet mode).
	INADims string `yaml:"ina_dims,omitempty"`

	// Topology is the network; link, latency and queue it leaves out come
	// from the scenario's. Without it the network is the star of workers
	// hosts, as it always was. A star's hosts default to workers; with a
	// topology and no jobs, the job runs on its first workers hosts, or on
	// all of them when workers is not given.
	Topology *topo.Spec `yaml:"topology,omitempty"`
	// SwitchMemory is each switch's aggregation memory budget (a size,
	// e.g. 64MiB; not given: no bound).
	SwitchMemory string `yaml:"switch_memory,omitempty"`
	// SwitchProgram is the switch program NetReduce jobs aggregate on (a
	// registered name: netreduce by default).
	SwitchProgram string `yaml:"switch_program,omitempty"`
	// PortSecurity is on (default: each switch host port takes its own
	// NIC's frames only) or off.
	PortSecurity string `yaml:"port_security,omitempty"`
	// SwitchBuffer is each switch's shared buffer (a size); PFC the
	// lossless priorities (off, on, or a list); PFCXoff a static XOFF
	// threshold (a size) or dynamic; PFCAlpha the dynamic threshold's
	// factor; PFCHeadroom the headroom per ingress port and priority;
	// Sched the egress scheduler (strict, or dwrr[:W0,...,W7]); RED the
	// egress queues' ECN marking (off, or KMIN,KMAX,PMAX).
	SwitchBuffer string `yaml:"switch_buffer,omitempty"`
	PFC          string `yaml:"pfc,omitempty"`
	PFCXoff      string `yaml:"pfc_xoff,omitempty"`
	PFCAlpha     string `yaml:"pfc_alpha,omitempty"`
	PFCHeadroom  string `yaml:"pfc_headroom,omitempty"`
	Sched        string `yaml:"sched,omitempty"`
	RED          string `yaml:"red,omitempty"`
	// NICRxRate is how fast each host drains its NIC's receive buffer (a
	// rate; not given: at once) and NICRxBuffer that buffer's size.
	NICRxRate   string `yaml:"nic_rx_rate,omitempty"`
	NICRxBuffer string `yaml:"nic_rx_buffer,omitempty"`
	// Jobs are the run's jobs; without them the run is one job of workers
	// ranks on hosts h0, h1, ...
	Jobs []Job `yaml:"jobs,omitempty"`
}

// Job is one job of a scenario: the host NICs its ranks run on (h3 is
// host h3's first NIC, h3:nic1 its second) and the settings it does not
// take from the scenario. Omitted keys take the scenario's settings (and
// so the command line's).
type Job struct {
	Name     string   `yaml:"name,omitempty"`
	Mode     string   `yaml:"mode,omitempty"`
	Ranks    []string `yaml:"ranks,omitempty"`
	Tensor   string   `yaml:"tensor,omitempty"`
	Start    string   `yaml:"start,omitempty"` // when the job starts, e.g. 50us
	Window   *int     `yaml:"window,omitempty"`
	MsgLen   *int     `yaml:"msg_len,omitempty"`
	DType    string   `yaml:"dtype,omitempty"`
	Release  string   `yaml:"release,omitempty"`
	Compress string   `yaml:"compress,omitempty"`
	CC       string   `yaml:"cc,omitempty"`
	DSCP     *int     `yaml:"dscp,omitempty"`

	// A traffic job's flows (docs/traffic.md): a pattern (incast,
	// all-to-all, permutation) of tensor-sized flows, incast's sink, the
	// pattern flows' pacing rate, the WRs each flow keeps outstanding, the
	// timelines' bin, or flows listed one by one (traffic.go).
	Traffic string `yaml:"traffic,omitempty"`
	Sink    string `yaml:"sink,omitempty"`
	Rate    string `yaml:"rate,omitempty"`
	Depth   *int   `yaml:"depth,omitempty"`
	Bin     string `yaml:"bin,omitempty"`
	Flows   []Flow `yaml:"flows,omitempty"`
}

// Error is a setting Apply cannot use. Key is where it is, as a scenario
// file spells it: a key (tensor, topology, switch_memory), or "job NAME"
// for a job's settings (then Err names the job's key).
type Error struct {
	Key string
	Err error
}

func (e *Error) Error() string { return e.Key + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// Load reads a scenario file (at most topo.MaxFileSize bytes); unknown
// keys are errors.
func Load(path string) (*Scenario, error) {
	b, err := topo.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// Parse reads a scenario from YAML. Unknown keys are errors that name the
// key, at the top, inside topology and inside each job; every error is
// one line.
func Parse(b []byte) (*Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && err != io.EOF { // an empty file changes nothing
		return nil, topo.YAMLError(err)
	}
	return &s, nil
}

// jobKeys are the keys a job takes, in the order its doc lists them.
var jobKeys = func() []string {
	t := reflect.TypeFor[Job]()
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i] = strings.Split(t.Field(i).Tag.Get("yaml"), ",")[0]
	}
	return keys
}()

// UnmarshalYAML reads one job, key by key, so that an unknown key or a
// value of the wrong type is an error naming the job and the key. (The
// decoder of a custom unmarshaler does not inherit the caller's
// strictness, so the keys are checked here.)
func (j *Job) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a job is a mapping, e.g. {name: a, ranks: [h0, h1]}", n.Line)
	}
	label := fmt.Sprintf("at line %d", n.Line)
	for i := 0; i+1 < len(n.Content); i += 2 {
		if k, v := n.Content[i], n.Content[i+1]; k.Value == "name" && v.Kind == yaml.ScalarNode {
			label = v.Value
		}
	}
	var out Job
	fields := reflect.ValueOf(&out).Elem()
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if seen[k.Value] {
			return fmt.Errorf("line %d: job %s: %s given twice", k.Line, label, k.Value)
		}
		seen[k.Value] = true
		f := -1
		for fi, key := range jobKeys {
			if key == k.Value {
				f = fi
			}
		}
		if f < 0 {
			return fmt.Errorf("line %d: job %s: unknown key %q (a job takes %s)", k.Line, label, k.Value, strings.Join(jobKeys, ", "))
		}
		if err := v.Decode(fields.Field(f).Addr().Interface()); err != nil {
			msg := topo.YAMLError(err).Error()
			msg = strings.TrimPrefix(msg, fmt.Sprintf("line %d: ", v.Line))
			return fmt.Errorf("line %d: job %s: %s: %s", k.Line, label, k.Value, msg)
		}
	}
	*j = out
	return nil
}

// Marshal writes the scenario as YAML.
func (s *Scenario) Marshal() ([]byte, error) { return yaml.Marshal(s) }

// netemKeys are the settings Apply combines into one netem setting.
var netemKeys = map[string]bool{"Netem": true, "Loss": true, "Reorder": true, "Duplicate": true, "Corrupt": true}

// Override sets on s every setting o gives, as command-line flags override
// a scenario file: each non-empty field of o replaces s's, o's faults are
// added to s's, and a netem setting or shorthand in o replaces all of s's
// netem settings (they describe one netem setting together).
func (s *Scenario) Override(o *Scenario) {
	sv, ov := reflect.ValueOf(s).Elem(), reflect.ValueOf(o).Elem()
	netem := false
	for name := range netemKeys {
		netem = netem || !ov.FieldByName(name).IsZero()
	}
	for i := range sv.NumField() {
		name := sv.Type().Field(i).Name
		switch {
		case name == "Faults":
			s.Faults = append(append([]string(nil), s.Faults...), o.Faults...)
		case netemKeys[name]:
			if netem {
				sv.Field(i).Set(ov.Field(i))
			}
		case !ov.Field(i).IsZero():
			sv.Field(i).Set(ov.Field(i))
		}
	}
}

// Apply sets the scenario's non-empty fields on cfg. The netem shorthands
// (loss, reorder, duplicate, corrupt) and netem itself are combined into
// one netem setting for every link direction. A topology is built with
// cfg's link settings (after the scenario's) wherever it sets none, and
// jobs are checked against it. Errors are *Error, one line each.
func (s *Scenario) Apply(cfg *emu.Config) error {
	var err error
	set := func(name string, f func() error) {
		if err == nil {
			if e := f(); e != nil {
				err = &Error{Key: name, Err: e}
			}
		}
	}
	// The counts are checked before anything is sized by them: -1
	// workers was a slice of length -1.
	for _, f := range []struct {
		key string
		v   *int
		dst func(int)
	}{
		{"workers", s.Workers, func(n int) { cfg.Workers = n }},
		{"window", s.Window, func(n int) { cfg.Window = n }},
		{"msg_len", s.MsgLen, func(n int) { cfg.MsgLen = n }},
		{"mtu", s.MTU, func(n int) { cfg.MTU = n }},
		{"queue", s.Queue, func(n int) { cfg.Link.Queue = n }},
		{"timeout", s.Timeout, func(n int) { cfg.Timeout = uint8(n) }},
		{"retry_cnt", s.RetryCnt, func(n int) { cfg.RetryCnt = uint8(n) }},
	} {
		if f.v != nil {
			set(f.key, func() error {
				o, _ := OptionByKey(f.key)
				if err := o.Check(*f.v); err != nil {
					return fmt.Errorf("%d: %v", *f.v, err)
				}
				f.dst(*f.v)
				return nil
			})
		}
	}
	if s.Seed != nil {
		cfg.Seed = *s.Seed
	}
	if s.Mode != "" {
		set("mode", func() (e error) { cfg.Mode, e = emu.ParseMode(s.Mode); return })
	}
	if s.Verb != "" {
		set("verb", func() (e error) { cfg.Verb, e = emu.ParseVerb(s.Verb); return })
	}
	if s.Tensor != "" {
		set("tensor", func() (e error) { cfg.TensorBytes, e = units.ParseSize(s.Tensor); return })
	}
	if s.DType != "" {
		set("dtype", func() (e error) { cfg.DType, e = tensor.ParseDType(s.DType); return })
	}
	if s.Pattern != "" {
		set("pattern", func() (e error) { cfg.Pattern, e = emu.ParsePattern(s.Pattern); return })
	}
	if s.Transport != "" {
		set("transport", func() (e error) { cfg.Transport, e = ParseTransport(s.Transport); return })
	}
	if s.Link != "" {
		set("link", func() (e error) { cfg.Link.Rate, e = units.ParseRate(s.Link); return })
	}
	if s.Latency != "" {
		set("latency", func() (e error) { cfg.Link.Latency, e = faults.ParseDuration(s.Latency); return })
	}
	if s.MaxTime != "" {
		set("max_time", func() (e error) { cfg.MaxVirtual, e = faults.ParseDuration(s.MaxTime); return })
	}
	if s.NIC != "" {
		set("nic", func() (e error) { cfg.NIC, e = roce.ParseProfile(s.NIC); return })
	}
	if s.Release != "" {
		set("release", func() (e error) { cfg.Release, e = netreduce.ParseRelease(s.Release); return })
	}
	if n := s.NetemSpec(); n != "" {
		set("netem", func() (e error) { cfg.Netem, e = faults.ParseNetem(n); return })
	}
	for _, f := range s.Faults {
		set("fault", func() error {
			ev, e := faults.Parse(f)
			cfg.Events = append(cfg.Events, ev)
			return e
		})
	}
	if s.Compress != "" {
		set("compress", func() (e error) { cfg.Compress, e = inceptionn.ParseBound(s.Compress); return })
	}
	if s.Bcast != "" {
		set("bcast", func() (e error) { cfg.Bcast, e = emu.ParseBcast(s.Bcast); return })
	}
	if s.CompressRate != "" {
		set("compress_rate", func() (e error) { cfg.CompressRate, e = units.ParseRate(s.CompressRate); return })
	}
	if s.SwitchMemory != "" {
		set("switch_memory", func() (e error) { cfg.SwitchMemory, e = units.ParseSize(s.SwitchMemory); return })
	}
	if s.SwitchProgram != "" {
		set("switch_program", func() error { cfg.SwitchProgram = s.SwitchProgram; return switching.CheckProgram(s.SwitchProgram) })
	}
	if s.PortSecurity != "" {
		set("port_security", func() error {
			switch s.PortSecurity {
			case "on", "off":
				cfg.OpenPorts = s.PortSecurity == "off"
				return nil
			}
			return fmt.Errorf("port security %q: want on or off", s.PortSecurity)
		})
	}
	if s.CC != "" {
		set("cc", func() (e error) { cfg.CC, e = emu.ParseCC(s.CC); return })
	}
	if s.DSCP != nil {
		set("dscp", func() error { cfg.DSCP = *s.DSCP; return nil })
	}
	if s.Traffic != "" || s.Sink != "" || s.FlowRate != "" {
		set("traffic", func() error {
			t := &emu.Traffic{Pattern: s.Traffic, Sink: s.Sink}
			if s.FlowRate != "" {
				r, e := units.ParseRate(s.FlowRate)
				if e != nil {
					return fmt.Errorf("flow_rate: %v", e)
				}
				t.Rate = r
			}
			cfg.Traffic = t
			return nil
		})
	}
	if s.Chunks != nil || s.Scheduler != "" || s.Policy != "" || s.Collective != "" || s.Consistency != "" || s.INADims != "" {
		set("chunks", func() error {
			h := &emu.Hier{Scheduler: s.Scheduler, Policy: s.Policy, Collective: s.Collective}
			switch s.Consistency {
			case "", "on":
			case "off":
				h.LocalOrder = true
			default:
				return fmt.Errorf("consistency %q: want on or off", s.Consistency)
			}
			if s.INADims != "" {
				for _, f := range strings.Split(s.INADims, ",") {
					d, err := strconv.Atoi(strings.TrimSpace(f))
					if err != nil || d < 1 {
						return fmt.Errorf("ina_dims %q: want dimensions from 1, comma-separated (e.g. 2 or 2,3)", s.INADims)
					}
					h.INADims = append(h.INADims, d)
				}
			}
			if s.Chunks != nil {
				o, _ := OptionByKey("chunks")
				if err := o.Check(*s.Chunks); err != nil {
					return fmt.Errorf("%d: %v", *s.Chunks, err)
				}
				h.Chunks = *s.Chunks
			}
			cfg.Hier = h
			return nil
		})
	}
	s.applyCongestion(cfg, set)
	if err != nil {
		return err
	}
	if s.Topology != nil {
		if err := s.applyTopology(cfg); err != nil {
			return err
		}
	}
	return s.applyJobs(cfg)
}

// applyTopology builds the scenario's topology on cfg's link settings and
// sizes the single job to it.
func (s *Scenario) applyTopology(cfg *emu.Config) error {
	spec := *s.Topology
	if spec.Kind == "star" && spec.Hosts.IsZero() {
		spec.Hosts.Count = cfg.Workers
	}
	t, err := spec.Build(topo.LinkParams{Rate: cfg.Link.Rate, Latency: cfg.Link.Latency, Queue: cfg.Link.Queue})
	if err != nil {
		return &Error{Key: "topology", Err: err}
	}
	cfg.Topology = t
	if len(s.Jobs) > 0 {
		return nil
	}
	hosts := len(t.Hosts())
	switch {
	case s.Workers == nil:
		cfg.Workers = hosts
	case *s.Workers > hosts:
		return &Error{Key: "workers", Err: fmt.Errorf("%d: the %s topology has %d hosts", *s.Workers, t.Kind, hosts)}
	}
	return nil
}

// applyJobs turns the scenario's jobs into cfg.Jobs, checking each rank's
// NIC against the network (the topology, or the star of cfg.Workers
// hosts).
func (s *Scenario) applyJobs(cfg *emu.Config) error {
	if len(s.Jobs) == 0 {
		return nil
	}
	nics, hostsNote := nicNames(cfg)
	jobs := make([]emu.JobSpec, 0, len(s.Jobs))
	for i, j := range s.Jobs {
		name := j.Name
		if name == "" {
			name = fmt.Sprintf("job%d", i) // as emu names an unnamed job
		}
		js := emu.JobSpec{Name: j.Name, Ranks: append([]string(nil), j.Ranks...)}
		var err error
		set := func(key string, f func() error) {
			if err == nil {
				if e := f(); e != nil {
					err = &Error{Key: "job " + name, Err: fmt.Errorf("%s: %v", key, e)}
				}
			}
		}
		set("ranks", func() error {
			if len(j.Ranks) < 2 {
				return errors.New("want at least two host NICs, e.g. [h0, h1]")
			}
			for _, r := range j.Ranks {
				if !nics[r] {
					return fmt.Errorf("%q: the network has no such host NIC or GPU (%s)", r, hostsNote)
				}
			}
			return nil
		})
		if j.Mode != "" {
			set("mode", func() (e error) { js.Mode, e = emu.ParseMode(j.Mode); return })
		}
		if j.Tensor != "" {
			set("tensor", func() (e error) { js.TensorBytes, e = units.ParseSize(j.Tensor); return })
		}
		if j.Start != "" {
			set("start", func() (e error) { js.Start, e = faults.ParseDuration(j.Start); return })
		}
		if j.Window != nil {
			set("window", func() error { js.Window = *j.Window; return atLeastOne(*j.Window) })
		}
		if j.MsgLen != nil {
			set("msg_len", func() error { js.MsgLen = *j.MsgLen; return atLeastOne(*j.MsgLen) })
		}
		if j.DType != "" {
			set("dtype", func() error {
				d, e := tensor.ParseDType(j.DType)
				js.DType = &d
				return e
			})
		}
		if j.Release != "" {
			set("release", func() error {
				r, e := netreduce.ParseRelease(j.Release)
				js.Release = &r
				return e
			})
		}
		if j.Compress != "" {
			set("compress", func() error {
				k, e := inceptionn.ParseBound(j.Compress)
				js.Compress = &k
				return e
			})
		}
		if j.CC != "" {
			set("cc", func() error {
				cc, e := emu.ParseCC(j.CC)
				js.CC = &cc
				return e
			})
		}
		if j.DSCP != nil {
			set("dscp", func() error { d := *j.DSCP; js.DSCP = &d; return nil })
		}
		set("traffic", func() error { return j.applyTraffic(&js) })
		if err != nil {
			return err
		}
		jobs = append(jobs, js)
	}
	cfg.Jobs = jobs
	return nil
}

// atLeastOne refuses 0 and less where emu would read 0 as "not set".
func atLeastOne(v int) error {
	if v < 1 {
		return fmt.Errorf("%d: want 1 or more", v)
	}
	return nil
}

// nicNames are the names of cfg's network's host NICs (a host's first NIC
// is the host's name, its i-th "NAME:nicI"), and a note saying which there
// are, for errors.
func nicNames(cfg *emu.Config) (map[string]bool, string) {
	names := map[string]bool{}
	if cfg.Topology == nil {
		for r := range cfg.Workers {
			names[fmt.Sprintf("h%d", r)] = true
		}
		return names, fmt.Sprintf("the star of workers=%d has h0..h%d", cfg.Workers, cfg.Workers-1)
	}
	for _, p := range cfg.Topology.Places() {
		names[p] = true
	}
	hosts := cfg.Topology.Hosts()
	note := fmt.Sprintf("the %s topology's hosts are %s", cfg.Topology.Kind, hosts[0].Name)
	if len(hosts) > 1 {
		note += ".." + hosts[len(hosts)-1].Name
	}
	return names, note
}

// NetemSpec is the netem setting the scenario asks for: netem, then the
// shorthands, each with its netem keyword.
func (s *Scenario) NetemSpec() string {
	parts := []string{}
	if s.Netem != "" {
		parts = append(parts, s.Netem)
	}
	for _, kv := range [][2]string{{"loss", s.Loss}, {"reorder", s.Reorder}, {"duplicate", s.Duplicate}, {"corrupt", s.Corrupt}} {
		if kv[1] != "" {
			parts = append(parts, kv[0]+" "+kv[1])
		}
	}
	return strings.Join(parts, " ")
}

// ParseTransport reads v2-ipv4 (also v2, ipv4), v2-ipv6 (ipv6) or v1.
func ParseTransport(s string) (frames.Transport, error) {
	switch strings.ToLower(s) {
	case "v2-ipv4", "v2", "ipv4", "rocev2":
		return frames.V2IPv4, nil
	case "v2-ipv6", "ipv6":
		return frames.V2IPv6, nil
	case "v1", "rocev1":
		return frames.V1, nil
	}
	return 0, fmt.Errorf("transport %q: want v2-ipv4, v2-ipv6 or v1", s)
}
