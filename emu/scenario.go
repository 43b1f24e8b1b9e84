package emu

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/tensor"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/roce"
)

// Scenario is a job written down: the settings `inaemu run` takes as flags,
// with the same names and value syntax, and its faults. Fields left out
// (nil or "") keep their defaults. A scenario file is YAML:
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
type Scenario struct {
	Workers   *int     `yaml:"workers,omitempty"`
	Mode      string   `yaml:"mode,omitempty"`
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
}

// LoadScenario reads a scenario file; unknown keys are errors.
func LoadScenario(path string) (*Scenario, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseScenario(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// ParseScenario reads a scenario from YAML; unknown keys are errors.
func ParseScenario(b []byte) (*Scenario, error) {
	var s Scenario
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && err != io.EOF { // an empty file changes nothing
		return nil, err
	}
	return &s, nil
}

// Marshal writes the scenario as YAML.
func (s *Scenario) Marshal() ([]byte, error) { return yaml.Marshal(s) }

// Apply sets the scenario's non-empty fields on cfg. The netem shorthands
// (loss, reorder, duplicate, corrupt) and netem itself are combined into
// one netem setting for every link direction.
func (s *Scenario) Apply(cfg *Config) error {
	var err error
	set := func(name string, f func() error) {
		if err == nil {
			if e := f(); e != nil {
				err = fmt.Errorf("%s: %v", name, e)
			}
		}
	}
	for _, f := range []struct {
		v   *int
		dst *int
	}{{s.Workers, &cfg.Workers}, {s.Window, &cfg.Window}, {s.MsgLen, &cfg.MsgLen}, {s.MTU, &cfg.MTU}, {s.Queue, &cfg.Link.Queue}} {
		if f.v != nil {
			*f.dst = *f.v
		}
	}
	if s.Seed != nil {
		cfg.Seed = *s.Seed
	}
	if s.Timeout != nil {
		set("timeout", func() error {
			if *s.Timeout < 0 || *s.Timeout > 31 {
				return fmt.Errorf("%d: want an exponent 0..31", *s.Timeout)
			}
			cfg.Timeout = uint8(*s.Timeout)
			return nil
		})
	}
	if s.RetryCnt != nil {
		set("retry_cnt", func() error {
			if *s.RetryCnt < 0 || *s.RetryCnt > 7 {
				return fmt.Errorf("%d: want 0..7", *s.RetryCnt)
			}
			cfg.RetryCnt = uint8(*s.RetryCnt)
			return nil
		})
	}
	if s.Mode != "" {
		set("mode", func() (e error) { cfg.Mode, e = ParseMode(s.Mode); return })
	}
	if s.Tensor != "" {
		set("tensor", func() (e error) { cfg.TensorBytes, e = units.ParseSize(s.Tensor); return })
	}
	if s.DType != "" {
		set("dtype", func() (e error) { cfg.DType, e = tensor.ParseDType(s.DType); return })
	}
	if s.Pattern != "" {
		set("pattern", func() (e error) { cfg.Pattern, e = tensor.ParsePattern(s.Pattern); return })
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
	return err
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
