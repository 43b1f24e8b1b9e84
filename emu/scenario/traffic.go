package scenario

import (
	"errors"
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// Flow is one flow of a traffic job in a scenario, its hosts named as
// the job's ranks:
//
//	jobs:
//	  - name: bg
//	    mode: traffic
//	    ranks: [h0, h1, h2]
//	    flows:
//	      - {from: h1, to: h0, bytes: 1MB, start: 10us, rate: 10G}
//	      - {from: h2, to: h0, bytes: 1MiB}
//
// bytes is a size, start a time (netem's spelling), rate a rate (tc's);
// start and rate may be left out (0: with the job, unpaced).
type Flow struct {
	From  string `yaml:"from"`
	To    string `yaml:"to"`
	Bytes string `yaml:"bytes"`
	Start string `yaml:"start,omitempty"`
	Rate  string `yaml:"rate,omitempty"`
}

// flowKeys are the keys a flow takes.
var flowKeys = []string{"from", "to", "bytes", "start", "rate"}

// UnmarshalYAML reads one flow, refusing a key it does not know (the
// decoder of a job's value does not inherit the file's strictness).
func (f *Flow) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: a flow is a mapping, e.g. {from: h1, to: h0, bytes: 1MiB}", n.Line)
	}
	var out Flow
	dst := map[string]*string{"from": &out.From, "to": &out.To, "bytes": &out.Bytes, "start": &out.Start, "rate": &out.Rate}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		p, ok := dst[k.Value]
		if !ok {
			return fmt.Errorf("line %d: flow: unknown key %q (a flow takes %s)", k.Line, k.Value, strings.Join(flowKeys, ", "))
		}
		if v.Kind != yaml.ScalarNode {
			return fmt.Errorf("line %d: flow: %s: want a value, e.g. %s", v.Line, k.Value, map[string]string{
				"from": "h1", "to": "h0", "bytes": "1MiB", "start": "10us", "rate": "10G"}[k.Value])
		}
		*p = v.Value
	}
	*f = out
	return nil
}

// applyTraffic sets a traffic job's keys on its spec: traffic (the
// pattern), sink, rate, depth, bin and flows. emu checks the flows
// against the job's ranks and links.
func (j *Job) applyTraffic(js *emu.JobSpec) error {
	if j.Traffic == "" && j.Sink == "" && j.Rate == "" && j.Depth == nil && j.Bin == "" && len(j.Flows) == 0 {
		return nil
	}
	t := &emu.Traffic{Pattern: j.Traffic, Sink: j.Sink}
	var err error
	if j.Rate != "" {
		if t.Rate, err = units.ParseRate(j.Rate); err != nil {
			return fmt.Errorf("rate: %v", err)
		}
	}
	if j.Depth != nil {
		if *j.Depth < 1 {
			return fmt.Errorf("depth: %d: want 1 or more", *j.Depth)
		}
		t.Depth = *j.Depth
	}
	if j.Bin != "" {
		if t.Bin, err = faults.ParseDuration(j.Bin); err != nil {
			return fmt.Errorf("bin: %v", err)
		}
		if t.Bin <= 0 {
			return errors.New("bin: want a positive time, e.g. 10us")
		}
	}
	for i, f := range j.Flows {
		bad := func(key string, e error) error {
			return fmt.Errorf("flows: flow %d (%s -> %s): %s: %v", i, f.From, f.To, key, e)
		}
		fl := emu.Flow{From: f.From, To: f.To}
		if f.From == "" || f.To == "" {
			return fmt.Errorf("flows: flow %d: want from and to, e.g. {from: h1, to: h0, bytes: 1MiB}", i)
		}
		if f.Bytes == "" {
			return bad("bytes", errors.New("want a size, e.g. 1MiB"))
		}
		if fl.Bytes, err = units.ParseSize(f.Bytes); err != nil {
			return bad("bytes", err)
		}
		if f.Start != "" {
			if fl.Start, err = faults.ParseDuration(f.Start); err != nil {
				return bad("start", err)
			}
		}
		if f.Rate != "" {
			if fl.Rate, err = units.ParseRate(f.Rate); err != nil {
				return bad("rate", err)
			}
		}
		t.Flows = append(t.Flows, fl)
	}
	js.Traffic = t
	return nil
}
