package job

import (
	"fmt"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/topo"
)

// JobConfig is one job of a run, resolved: its name, the NICs its ranks
// run on, its settings as a Config (Workers: its rank count, Seed: the
// job's own, see jobSeed) and its start time.
type JobConfig struct {
	Name  string
	Ranks []string
	Cfg   Config
	Start time.Duration
	// Label, if set, is the mode the job reports (fr runs as a ring).
	Label Mode
	// Group is the group a job of a planned mode belongs to (a pn, pr
	// or ta scheme): the group's own job (IO nil) or one of its stage
	// jobs, which reads and writes through IO and starts when the group
	// says.
	Group Group
	IO    StageIO
}

// GroupJob reports whether the job is a group's own job (its stage jobs
// have the QPs and frames).
func (j *JobConfig) GroupJob() bool { return j.Group != nil && j.IO == nil }

// topology is the run's network: cfg.Topology or the star of Workers
// hosts.
func (c *Config) topology() (*topo.Topology, error) {
	if c.Topology != nil {
		return c.Topology, nil
	}
	return topo.Star(c.starHosts(), topo.LinkParams{Rate: c.Link.Rate, Latency: c.Link.Latency, Queue: c.Link.Queue})
}

// starHosts is how many hosts the default star has: one per worker, and
// for a wa job without Jobs one more, its aggregator.
func (c *Config) starHosts() int {
	if a := Lookup(c.Mode); a != nil && a.ExtraRank && len(c.Jobs) == 0 {
		return c.Workers + 1
	}
	return c.Workers
}

// jobConfigs resolves the run's jobs: Jobs, each with the run's settings
// where it sets none, or without Jobs one job of Workers ranks on the
// topology's first hosts.
func (c *Config) jobConfigs() ([]JobConfig, error) {
	bad := func(f string, a ...any) error { return &ConfigError{fmt.Errorf(f, a...)} }
	base := *c
	base.Jobs = nil
	alg := Lookup(c.Mode)
	if alg == nil {
		alg = &Algorithm{} // refused by Validate, after the settings
	}
	if len(c.Jobs) == 0 {
		// A Config built in code may hold anything: the CLI's range check
		// is not in front of it, and the slice below is sized by it.
		if c.Workers < 1 || c.Workers > topo.MaxHosts {
			return nil, bad("--workers %d: want 1..%d", c.Workers, topo.MaxHosts)
		}
		// A job with an extra rank (wa's aggregator) has it on a host of
		// its own: its ranks are one more than its workers, and the
		// refusal names the flag's value, not the ranks'.
		if alg.ExtraRank && c.Workers+1 > netreduce.MaxWorkers {
			return nil, bad("--workers %d: want 2..%d for --mode %s (its aggregator is a rank more)", c.Workers, netreduce.MaxWorkers-1, c.Mode)
		}
		ranks := make([]string, c.starHosts())
		for i := range ranks {
			ranks[i] = fmt.Sprintf("h%d", i)
		}
		base.Workers = len(ranks)
		if c.Topology != nil {
			hs := c.Topology.Hosts()
			if len(ranks) > len(hs) {
				if alg.ExtraRank {
					return nil, bad("--workers %d: a %s job needs a host more, its aggregator, and the topology has %d hosts", c.Workers, c.Mode, len(hs))
				}
				return nil, bad("--workers %d: the topology has %d hosts", c.Workers, len(hs))
			}
			for i := range ranks {
				ranks[i] = hs[i].Name
			}
			if alg.OnGPUs && hs[0].GPUs > 0 {
				// A scheme runs on every GPU of the first --workers hosts.
				ranks = ranks[:0]
				for _, h := range hs[:c.Workers] {
					for g := range h.GPUs {
						ranks = append(ranks, topo.GPUName(h.Name, g))
					}
				}
				base.Workers = len(ranks)
			}
		}
		if alg.NeedsGPUs && (c.Topology == nil || c.Topology.Hosts()[0].GPUs == 0) {
			return nil, bad("--mode %s runs over machines with several GPUs each, and these hosts have none: give a topology with GPUs (e.g. --topology star:hosts=4,gpus=8,intra=150G)", c.Mode)
		}
		return resolveMode(JobConfig{Name: "job0", Ranks: ranks, Cfg: base})
	}
	if c.Devices != nil {
		// The live fabric is a star whose rank r is host hr.
		if len(c.Jobs) > 1 {
			return nil, bad("the TAP backend runs one job")
		}
		for i, h := range c.Jobs[0].Ranks {
			if h != fmt.Sprintf("h%d", i) {
				return nil, bad("job %s: ranks: the TAP backend places rank r on host hr (h0, h1, ...), not %s on rank %d", c.Jobs[0].Name, h, i)
			}
		}
	}
	var out []JobConfig
	names := map[string]bool{}
	for i, js := range c.Jobs {
		name := js.Name
		if name == "" {
			name = fmt.Sprintf("job%d", i)
		}
		if names[name] {
			return nil, bad("job %q: two jobs have that name", name)
		}
		names[name] = true
		if len(js.Ranks) < 2 {
			return nil, bad("job %s: ranks: want at least two host NICs (e.g. [h0, h1])", name)
		}
		seen := map[string]bool{}
		for _, h := range js.Ranks {
			if seen[h] {
				return nil, bad("job %s: %s holds two ranks (one rank per NIC)", name, h)
			}
			seen[h] = true
		}
		if js.Start < 0 {
			return nil, bad("job %s: start %v: must not be negative", name, js.Start)
		}
		j := base
		j.Workers = len(js.Ranks)
		j.Seed = JobSeed(c.Seed, i)
		if js.Mode != "" {
			j.Mode = js.Mode
		}
		if js.TensorBytes != 0 {
			j.TensorBytes = js.TensorBytes
		}
		if js.Window != 0 {
			j.Window = js.Window
		}
		if js.MsgLen != 0 {
			j.MsgLen = js.MsgLen
		}
		if js.DType != nil {
			j.DType = *js.DType
		}
		if js.Release != nil {
			j.Release = *js.Release
		}
		if js.Compress != nil {
			j.Compress = *js.Compress
		}
		if js.Traffic != nil {
			j.Traffic = js.Traffic
		}
		if js.CC != nil {
			j.CC = *js.CC
		}
		if js.DSCP != nil {
			j.DSCP = *js.DSCP
		}
		jc, err := resolveMode(JobConfig{Name: name, Ranks: append([]string(nil), js.Ranks...), Cfg: j, Start: js.Start})
		if err != nil {
			return nil, err
		}
		out = append(out, jc...)
	}
	return out, nil
}

// resolveMode makes a job of a scheme mode what runs it: fr a ring job
// that says fr, pn, pr and ta a scheme job and its inter-machine jobs.
func resolveMode(j JobConfig) ([]JobConfig, error) {
	if err := j.Cfg.ResolvePattern(); err != nil {
		return nil, &ConfigError{err}
	}
	if a := Lookup(j.Cfg.Mode); a != nil && a.Plan != nil {
		return a.Plan(j)
	}
	return []JobConfig{j}, nil
}

// GPURank is the first of ranks that is a GPU ("" for none).
func GPURank(ranks []string) string {
	for _, rk := range ranks {
		if _, _, gpu := topo.GPUOf(rk); gpu {
			return rk
		}
	}
	return ""
}

// Validate reports a configuration Run would reject, as a *ConfigError:
// each job's settings, then the run as a whole (durations, fault targets,
// the memory the jobs need).
func (c *Config) Validate() error {
	c.Mode = Mode(c.Mode.String()) // a job that names no mode is DefaultMode's
	jobs, err := c.jobConfigs()
	if err != nil {
		return err
	}
	for _, name := range AlgorithmNames() {
		if a := algorithms[Mode(name)]; a.ValidateRun != nil {
			if err := a.ValidateRun(c, jobs); err != nil {
				return err
			}
		}
	}
	for _, j := range jobs {
		if err := j.Cfg.validateSettings(); err != nil {
			if len(c.Jobs) > 0 {
				return &ConfigError{fmt.Errorf("job %s: %v", j.Name, strings.TrimPrefix(err.Error(), "job "))}
			}
			return err
		}
		// Compression lives in NICs: GPUs, whose hops to GPUs of their
		// host never pass one, cannot take part (fr, pn, pr and ta and
		// their stages all run on GPUs).
		if g := GPURank(j.Ranks); g != "" && j.Cfg.Compress != 0 {
			return &ConfigError{fmt.Errorf("job %s: --compress: compressing jobs run on host NICs; %s is a GPU, whose hops to GPUs of its host never pass a NIC", j.Name, g)}
		}
		a := Lookup(j.Cfg.Mode)
		if a == nil {
			return &ConfigError{fmt.Errorf("job %s: mode %q: want %s", j.Name, j.Cfg.Mode, strings.Join(AlgorithmNames(), " or "))}
		}
		if a.ValidateJob != nil {
			if err := a.ValidateJob(j); err != nil {
				return &ConfigError{err}
			}
		}
	}
	return c.validateRun(jobs) // durations, fault targets, memory (validate.go)
}
