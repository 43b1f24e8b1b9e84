// Package input reads what `inaemu themis` runs: a multi-dimensional
// platform (one of the paper's Table 2 platforms by name, or a --dims
// spec of per-dimension kind, size, bandwidth and latency) and a
// workload, a small Chakra-like list of collectives, each with its size
// and the dimensions it involves, in YAML or JSON.
//
// Everything is validated before anything runs and every error is one
// line: ASTRA-sim's users report traces that fail silently (0 cycles,
// astra-sim/astra-sim issues #158 and #215), so here an unknown field, an
// empty list, an unknown collective, a size of zero or a dimension the
// platform does not have stops the run.
package input

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/themis/flow"
	"github.com/inaemu/inaemu/internal/units"
)

// Platform is a topology with what the model itself does not need: each
// dimension's links per NPU, by which the per-link traffic is the
// per-NPU traffic divided (the paper's Table 2 counts a dimension's
// bandwidth as BW per link × links per NPU).
type Platform struct {
	Name     string // the Table 2 name, or "" for a --dims spec
	Topology themis.Topology
	Links    []int // per dimension, at least 1
}

// table2Links are the links per NPU of the paper's Table 2 ("Links/NPU"),
// by platform; the executor's presets (flow.Platform) hold the aggregate
// bandwidth per NPU, which is BW/link × these.
var table2Links = map[string][]int{
	"2D-SW_SW":           {6, 1},
	"3D-SW_SW_SW_homo":   {4, 4, 1},
	"3D-SW_SW_SW_hetero": {8, 4, 1},
	"3D-FC_Ring_SW":      {7, 4, 1},
	"4D-Ring_SW_SW_SW":   {2, 8, 4, 1},
	"4D-Ring_FC_Ring_SW": {2, 7, 6, 1},
}

// NamedPlatform is one of Table 2's platforms.
func NamedPlatform(name string) (Platform, error) {
	t, err := flow.Platform(name)
	if err != nil {
		return Platform{}, fmt.Errorf("unknown platform %q: want one of %s", name, strings.Join(flow.Platforms(), ", "))
	}
	links := table2Links[name]
	if len(links) != len(t) {
		// A preset without its links: per-link traffic is then per NPU.
		links = ones(len(t))
	}
	return Platform{Name: name, Topology: t, Links: append([]int(nil), links...)}, nil
}

func ones(n int) []int {
	l := make([]int, n)
	for i := range l {
		l[i] = 1
	}
	return l
}

// DimsSyntax is the --dims spec's grammar, for help texts and errors.
const DimsSyntax = "KIND:SIZE:BW[:LATENCY[:LINKS]],... dim 1 first, e.g. ring:4:200GB/s:500ns,switch:8:100GB/s:700ns; KIND ring, fc, switch or ina (a switch whose all-reduce NetReduce aggregates in one step); BW the dimension's bandwidth per NPU (all its links, one direction) as a rate: 100GB/s (bytes), 800G or 800Gbit/s (bits); LATENCY the step latency (default 0); LINKS the NPU's links in the dimension, for per-link traffic (default 1)"

// ParseDims reads a --dims spec (DimsSyntax) into a validated platform.
func ParseDims(spec string) (Platform, error) {
	if strings.TrimSpace(spec) == "" {
		return Platform{}, errors.New("empty dimension list: want " + DimsSyntax[:strings.Index(DimsSyntax, ";")])
	}
	var p Platform
	for i, f := range strings.Split(spec, ",") {
		d, links, err := parseDim(strings.TrimSpace(f))
		if err != nil {
			return Platform{}, fmt.Errorf("dim%d %q: %v", i+1, f, err)
		}
		p.Topology = append(p.Topology, d)
		p.Links = append(p.Links, links)
	}
	if err := p.Topology.Validate(); err != nil {
		return Platform{}, errors.New(strings.TrimPrefix(err.Error(), "themis: "))
	}
	return p, nil
}

func parseDim(s string) (themis.Dim, int, error) {
	parts := strings.Split(s, ":")
	if len(parts) < 3 || len(parts) > 5 {
		return themis.Dim{}, 0, errors.New("want KIND:SIZE:BW[:LATENCY[:LINKS]], e.g. switch:8:100GB/s:700ns")
	}
	var d themis.Dim
	d.Kind = themis.DimKind(parts[0])
	switch d.Kind {
	case themis.Ring, themis.FC, themis.Switch, themis.INA:
	default:
		return d, 0, fmt.Errorf("unknown kind %q: want ring, fc, switch or ina", parts[0])
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n < 2 || n > 1<<20 {
		return d, 0, fmt.Errorf("size %q: want a whole number of NPUs, at least 2", parts[1])
	}
	if (d.Kind == themis.Switch || d.Kind == themis.INA) && bits.OnesCount(uint(n)) != 1 {
		return d, 0, fmt.Errorf("%s size %d: halving-doubling needs a power of two", d.Kind, n)
	}
	d.Size = n
	if d.BW, err = ParseBandwidth(parts[2]); err != nil {
		return d, 0, err
	}
	links := 1
	if len(parts) > 3 && parts[3] != "" {
		if d.Latency, err = units.ParseDuration(parts[3]); err != nil {
			return d, 0, fmt.Errorf("latency: %v", err)
		}
		if d.Latency < 0 || d.Latency > time.Second {
			return d, 0, fmt.Errorf("latency %q: want 0 to 1s", parts[3])
		}
	}
	if len(parts) > 4 {
		if links, err = strconv.Atoi(parts[4]); err != nil || links < 1 || links > 1024 {
			return d, 0, fmt.Errorf("links %q: want a whole number 1..1024", parts[4])
		}
	}
	return d, links, nil
}

// ParseBandwidth reads a bandwidth as a rate in bytes per second:
// "100GB/s" is bytes (as the paper's Table 2 is read by ASTRA-sim's
// link-bandwidth, GB/s), every spelling units.ParseRate reads is bits
// ("800G", "800Gbit/s", tc's "100gbps" is bytes as tc says).
func ParseBandwidth(s string) (float64, error) {
	t := strings.TrimSpace(s)
	if strings.HasSuffix(t, "B/s") {
		t = strings.TrimSuffix(t, "B/s") + "Bps" // tc's bytes spelling
	}
	r, err := units.ParseRate(t)
	if err != nil {
		return 0, fmt.Errorf("bandwidth %q: want e.g. 100GB/s (bytes per second) or 800G (bits per second)", s)
	}
	return r / 8, nil
}

// Collective is one entry of a workload.
type Collective struct {
	// Name labels the collective in reports (default: its index and kind).
	Name string `yaml:"name,omitempty" json:"name,omitempty"`
	// Collective is all-reduce, reduce-scatter or all-gather (Chakra's
	// ALL_REDUCE, REDUCE_SCATTER, ALL_GATHER).
	Collective string `yaml:"collective" json:"collective"`
	// Size is the bytes per NPU (an all-reduce's or reduce-scatter's
	// input, an all-gather's output): a whole number of bytes or a size
	// such as 64MiB.
	Size string `yaml:"size" json:"size"`
	// Dims are the involved dimensions, numbered from 1 as the paper does
	// (Chakra's involved_dim); empty means all.
	Dims []int `yaml:"dims,omitempty" json:"dims,omitempty"`
}

// Workload is a list of collectives, run one after the other.
type Workload struct {
	Collectives []Collective `yaml:"collectives" json:"collectives"`
}

// Item is a validated collective.
type Item struct {
	Name       string
	Collective themis.Collective
	Bytes      float64 // per NPU
	Dims       []int   // 0-based, increasing; every dimension when the input named none
}

// ParseWorkload reads a workload (YAML, or JSON, which YAML reads too)
// strictly: an unknown key, a second document, an empty list, an unknown
// collective, a size that is not a positive whole number of bytes, or a
// dimension outside 1..D (or named twice) is a one-line error.
func ParseWorkload(b []byte, t themis.Topology) ([]Item, error) {
	var w Workload
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&w); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty workload: want collectives: [{collective: all-reduce, size: 64MiB}, ...]")
		}
		return nil, yamlError(err)
	}
	var extra any
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, errors.New("more than one YAML document: want one workload")
	}
	return w.Validate(t)
}

// Validate checks the workload against a topology of len(t) dimensions.
func (w Workload) Validate(t themis.Topology) ([]Item, error) {
	if len(w.Collectives) == 0 {
		return nil, errors.New("no collectives: the list is empty")
	}
	items := make([]Item, len(w.Collectives))
	for i, c := range w.Collectives {
		it, err := c.item(len(t))
		if err != nil {
			return nil, fmt.Errorf("collective %d: %v", i+1, err)
		}
		if it.Name == "" {
			it.Name = fmt.Sprintf("%d:%s", i+1, it.Collective)
		}
		items[i] = it
	}
	return items, nil
}

func (c Collective) item(D int) (Item, error) {
	it := Item{Name: c.Name, Collective: themis.Collective(c.Collective)}
	switch it.Collective {
	case themis.AllReduce, themis.ReduceScatter, themis.AllGather:
	case "":
		return it, errors.New("no collective: want all-reduce, reduce-scatter or all-gather")
	default:
		return it, fmt.Errorf("unknown collective %q: want all-reduce, reduce-scatter or all-gather", c.Collective)
	}
	n, err := ParseSize(c.Size)
	if err != nil {
		return it, err
	}
	it.Bytes = n
	if len(c.Dims) == 0 {
		for d := range D {
			it.Dims = append(it.Dims, d)
		}
		return it, nil
	}
	seen := make([]bool, D)
	for _, d := range c.Dims {
		if d < 1 || d > D {
			return it, fmt.Errorf("dims: dimension %d out of range: the platform has dims 1..%d", d, D)
		}
		if seen[d-1] {
			return it, fmt.Errorf("dims: dimension %d named twice", d)
		}
		seen[d-1] = true
	}
	for d := range D {
		if seen[d] {
			it.Dims = append(it.Dims, d)
		}
	}
	return it, nil
}

// ParseSize reads a collective's size per NPU: a positive whole number of
// bytes, plain or with a unit (64MiB, 1GB), up to 1 TiB.
func ParseSize(s string) (float64, error) {
	if strings.TrimSpace(s) == "" {
		return 0, errors.New("no size: want bytes per NPU, e.g. 64MiB")
	}
	if v, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil && v <= 0 {
		return 0, fmt.Errorf("size %s: want more than 0 bytes", s)
	}
	n, err := units.ParseSize(s)
	if err != nil {
		return 0, err
	}
	return float64(n), nil
}

var unknownField = regexp.MustCompile(`^(line \d+): field (.*) not found in type .*$`)

// yamlError makes a decoding error one line and names an unknown key as
// a key (yaml.v3 names the Go type), as emu/topo does for topologies.
func yamlError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(err.Error()))
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = unknownField.ReplaceAllString(strings.NewReplacer("\r", `\r`, "\n", `\n`).Replace(m), `$1: unknown key "$2"`)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// Sub is the topology of the involved dimensions, in their order.
func Sub(t themis.Topology, dims []int) themis.Topology {
	s := make(themis.Topology, len(dims))
	for i, d := range dims {
		s[i] = t[d]
	}
	return s
}

// Schedule schedules one collective on the dimensions it involves and
// returns its chunks and log in the full topology's numbering: each
// stage's Dim, each decision's Order, and loads as long as t with 0 on
// the dimensions the collective does not involve. (The scheduler sees
// only the involved dimensions, as ASTRA-sim's OfflineGreedy skips
// dimensions that are not involved.)
func Schedule(t themis.Topology, it Item, cfg themis.Config) ([]themis.ChunkSchedule, themis.Log, error) {
	scheds, log, err := themis.Schedule(Sub(t, it.Dims), it.Collective, it.Bytes, cfg)
	if err != nil {
		return nil, nil, err
	}
	if len(it.Dims) == len(t) {
		return scheds, log, nil
	}
	for i := range scheds {
		for j := range scheds[i].Stages {
			scheds[i].Stages[j].Dim = it.Dims[scheds[i].Stages[j].Dim]
		}
	}
	widen := func(v []float64) []float64 {
		out := make([]float64, len(t))
		for k, x := range v {
			out[it.Dims[k]] = x
		}
		return out
	}
	for i := range log {
		d := &log[i]
		for k, x := range d.Order {
			d.Order[k] = it.Dims[x]
		}
		d.Before, d.Added, d.After = widen(d.Before), widen(d.Added), widen(d.After)
	}
	return scheds, log, nil
}
