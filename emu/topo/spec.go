package topo

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/inaemu/inaemu/internal/units"
)

// Spec is a topology written down: the YAML mapping a scenario file's
// topology key and a --topology file hold, and what ParseFlag reads the
// command-line form into. Rates and durations keep their written form
// (10G, 1us) until Build reads them. Omitted link, latency and queue
// settings fall back to the Spec's own, then to Build's defaults; omitted
// gpus, intra and alpha on a custom host to the Spec's.
//
//	kind: star
//	hosts: 8
//	link: 10G
//	latency: 1us
//
//	kind: spine-leaf
//	leaves: 2
//	hosts_per_leaf: 4
//	spines: 1
//	uplink: 40G
//
//	kind: dims
//	dims: [{size: 4, kind: ring, link: 100G, links_per_host: 2}, {size: 4, kind: switch}]
//
//	kind: custom   # may be left out when links are given
//	hosts: [{name: a, gpus: 4, intra: 300G, alpha: 1us}, {name: b}]
//	switches: [{name: tor}]
//	links: [{a: a, b: tor, link: 25G}, {a: b, b: tor}]
type Spec struct {
	Kind string `yaml:"kind,omitempty"` // star, spine-leaf, dims or custom

	// Hosts is the star's host count or the custom topology's hosts.
	Hosts        HostsSpec    `yaml:"hosts,omitempty"`
	Leaves       int          `yaml:"leaves,omitempty"`
	HostsPerLeaf int          `yaml:"hosts_per_leaf,omitempty"`
	Spines       int          `yaml:"spines,omitempty"`
	Dims         []DimSpec    `yaml:"dims,omitempty"`
	Switches     []SwitchSpec `yaml:"switches,omitempty"`
	Links        []LinkSpec   `yaml:"links,omitempty"`

	Link          string `yaml:"link,omitempty"`    // link rate, e.g. 10G
	Latency       string `yaml:"latency,omitempty"` // e.g. 1us
	Queue         int    `yaml:"queue,omitempty"`   // frames
	Uplink        string `yaml:"uplink,omitempty"`  // spine-leaf uplink rate (default: link)
	UplinkLatency string `yaml:"uplink_latency,omitempty"`

	GPUs  int    `yaml:"gpus,omitempty"`  // per host
	Intra string `yaml:"intra,omitempty"` // interconnect rate between a host's GPUs
	Alpha string `yaml:"alpha,omitempty"` // interconnect cost per transfer step
}

// HostsSpec is the hosts key: a count (star) or a list (custom).
type HostsSpec struct {
	Count int
	List  []HostSpec
}

// HostSpec is one host of a custom topology.
type HostSpec struct {
	Name  string `yaml:"name"`
	GPUs  int    `yaml:"gpus,omitempty"`
	Intra string `yaml:"intra,omitempty"`
	Alpha string `yaml:"alpha,omitempty"`
}

// SwitchSpec is one switch of a custom topology.
type SwitchSpec struct {
	Name string `yaml:"name"`
}

// LinkSpec is one link of a custom topology. A host-switch link may name
// either end as a: Build puts the host first.
type LinkSpec struct {
	A       string `yaml:"a"`
	B       string `yaml:"b"`
	Link    string `yaml:"link,omitempty"`
	Latency string `yaml:"latency,omitempty"`
	Queue   int    `yaml:"queue,omitempty"`
}

// DimSpec is one dimension of a dims topology (see Dims).
type DimSpec struct {
	Size         int    `yaml:"size"`
	Kind         string `yaml:"kind,omitempty"` // ring, fc or switch (default)
	Link         string `yaml:"link,omitempty"`
	Latency      string `yaml:"latency,omitempty"`
	Queue        int    `yaml:"queue,omitempty"`
	LinksPerHost int    `yaml:"links_per_host,omitempty"`
}

// IsZero tells the YAML encoder an unset hosts key is empty.
func (h HostsSpec) IsZero() bool { return h.Count == 0 && h.List == nil }

// MarshalYAML writes the count or the list.
func (h HostsSpec) MarshalYAML() (any, error) {
	if h.List != nil {
		return h.List, nil
	}
	return h.Count, nil
}

// UnmarshalYAML reads a count or a list of hosts. The list's keys are
// checked here: a custom unmarshaler's decoder does not inherit the
// caller's strictness, and an unknown key must not pass for a typo-free
// file.
func (h *HostsSpec) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.SequenceNode {
		return n.Decode(&h.Count)
	}
	known := yamlKeys(reflect.TypeFor[HostSpec]())
	var bad []string
	for _, item := range n.Content {
		if item.Kind != yaml.MappingNode {
			continue // Decode reports it
		}
		for i := 0; i < len(item.Content); i += 2 {
			if k := item.Content[i]; !known[k.Value] {
				bad = append(bad, fmt.Sprintf("line %d: field %s not found in type topo.HostSpec", k.Line, k.Value))
			}
		}
	}
	if bad != nil {
		return &yaml.TypeError{Errors: bad}
	}
	return n.Decode(&h.List)
}

func yamlKeys(t reflect.Type) map[string]bool {
	keys := map[string]bool{}
	for i := range t.NumField() {
		keys[yamlKey(t.Field(i))] = true
	}
	return keys
}

func yamlKey(f reflect.StructField) string { return strings.Split(f.Tag.Get("yaml"), ",")[0] }

// MaxFileSize bounds a topology or scenario file. They are kilobytes;
// the bound keeps a file named by mistake (/dev/zero, a capture) from
// being read into memory without end.
const MaxFileSize = 4 << 20

// ReadFile reads a topology or scenario file of at most MaxFileSize
// bytes.
func ReadFile(path string) ([]byte, error) { return ReadFileUpTo(path, MaxFileSize) }

// ReadFileUpTo reads a file the user names, of at most max bytes. It
// reads a pipe too (--scenario <(...)), so it bounds what it reads rather
// than asking for a regular file.
func ReadFileUpTo(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: too large: more than %s", path, units.FormatSize(max))
	}
	return b, nil
}

// Load reads a topology file; unknown keys are errors.
func Load(path string) (*Spec, error) {
	b, err := ReadFile(path)
	if err != nil {
		return nil, err
	}
	s, err := ParseYAML(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return s, nil
}

// ParseYAML reads a topology from YAML; unknown keys are errors naming the
// key.
func ParseYAML(b []byte) (*Spec, error) {
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		if err == io.EOF {
			return nil, errors.New("empty topology")
		}
		return nil, YAMLError(err)
	}
	return &s, nil
}

var unknownField = regexp.MustCompile(`^(line \d+): field (.*) not found in type .*$`)

// YAMLError makes a YAML decoding error one line: yaml.v3 lists type
// errors on lines of their own, quotes a value with its line breaks and
// calls an unknown key a field not found in a Go type.
func YAMLError(err error) error {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return errors.New(lineBreaks.Replace(err.Error()))
	}
	msgs := make([]string, len(te.Errors))
	for i, m := range te.Errors {
		msgs[i] = unknownField.ReplaceAllString(lineBreaks.Replace(m), `$1: unknown key "$2"`)
	}
	return errors.New(strings.Join(msgs, "; "))
}

// lineBreaks escapes the line breaks of a value an error quotes.
var lineBreaks = strings.NewReplacer("\r", `\r`, "\n", `\n`)

// Marshal writes the spec as YAML.
func (s *Spec) Marshal() ([]byte, error) { return yaml.Marshal(s) }

// kind is the spec's kind, custom when only links say so.
func (s *Spec) kind() string {
	if s.Kind == "" && len(s.Links) > 0 {
		return "custom"
	}
	return s.Kind
}

// keysFor are the keys each kind takes (kind, gpus, intra, alpha, link,
// latency and queue go with all).
var keysFor = map[string]string{
	"star":       "hosts",
	"spine-leaf": "leaves hosts_per_leaf spines uplink uplink_latency",
	"dims":       "dims",
	"custom":     "hosts switches links",
}

// Build makes the topology. def supplies the link rate, latency and queue
// wherever the spec leaves them out. A star needs its host count set
// (callers fill Hosts.Count from their worker count when it is 0).
func (s *Spec) Build(def LinkParams) (*Topology, error) {
	kind := s.kind()
	own, ok := keysFor[kind]
	if !ok {
		return nil, fmt.Errorf("kind %q: want star, spine-leaf, dims or custom", s.Kind)
	}
	// A key of another kind is most likely a mistake about this one.
	v := reflect.ValueOf(s).Elem()
	for i := range v.NumField() {
		key := yamlKey(v.Type().Field(i))
		if !v.Field(i).IsZero() && !strings.Contains(" kind gpus intra alpha link latency queue "+own+" ", " "+key+" ") {
			return nil, fmt.Errorf("%s: not a key of a %s topology (%s)", key, kind, own)
		}
	}
	base, err := params(def, "", s.Link, s.Latency, s.Queue)
	if err != nil {
		return nil, err
	}
	intra, err := intraOf(Intra{}, "", s.Intra, s.Alpha)
	if err != nil {
		return nil, err
	}
	var t *Topology
	switch kind {
	case "star":
		if s.Hosts.List != nil {
			return nil, errors.New("hosts: a star takes a count")
		}
		t, err = Star(s.Hosts.Count, base)
	case "spine-leaf":
		var up LinkParams
		if up, err = params(base, "uplink ", s.Uplink, s.UplinkLatency, 0); err == nil {
			t, err = SpineLeaf(s.Leaves, s.HostsPerLeaf, s.Spines, base, up)
		}
	case "dims":
		dims := make([]Dim, len(s.Dims))
		for i, d := range s.Dims {
			dims[i] = Dim{Size: d.Size, Kind: d.Kind, LinksPerHost: d.LinksPerHost}
			if dims[i].LinkParams, err = params(base, fmt.Sprintf("dims[%d] ", i), d.Link, d.Latency, d.Queue); err != nil {
				return nil, err
			}
		}
		t, err = Dims(dims)
	case "custom":
		return s.custom(base, intra)
	}
	if err != nil {
		return nil, err
	}
	if s.GPUs != 0 || intra != (Intra{}) {
		for i := range t.Nodes {
			if t.Nodes[i].Kind == KindHost {
				t.Nodes[i].GPUs, t.Nodes[i].Intra = s.GPUs, intra
			}
		}
		if err := t.Validate(); err != nil {
			return nil, fmt.Errorf("%s: %v", kind, err)
		}
	}
	return t, nil
}

func (s *Spec) custom(base LinkParams, intra Intra) (*Topology, error) {
	if s.Hosts.Count != 0 {
		return nil, errors.New("hosts: a custom topology takes a list of hosts ({name: h0}, ...)")
	}
	b := newBuilder("custom")
	kinds := map[string]Kind{}
	for i, h := range s.Hosts.List {
		in, err := intraOf(intra, fmt.Sprintf("hosts[%d] ", i), h.Intra, h.Alpha)
		if err != nil {
			return nil, err
		}
		g := s.GPUs
		if h.GPUs != 0 {
			g = h.GPUs
		}
		b.t.Nodes = append(b.t.Nodes, Node{Name: h.Name, Kind: KindHost, GPUs: g, Intra: in})
		kinds[h.Name] = KindHost
	}
	for _, sw := range s.Switches {
		b.node(sw.Name, KindSwitch)
		kinds[sw.Name] = KindSwitch
	}
	for i, l := range s.Links {
		p, err := params(base, fmt.Sprintf("links[%d] ", i), l.Link, l.Latency, l.Queue)
		if err != nil {
			return nil, err
		}
		a, z := l.A, l.B
		if kinds[a] == KindSwitch && kinds[z] == KindHost {
			a, z = z, a
		}
		b.link(a, z, p, 0)
	}
	return b.done(0)
}

// params overrides def with whatever of rate, latency and queue is set;
// errors name the key, after prefix.
func params(def LinkParams, prefix, rate, latency string, queue int) (LinkParams, error) {
	p := def
	var err error
	if rate != "" {
		if p.Rate, err = units.ParseRate(rate); err != nil {
			return p, fmt.Errorf("%slink: %v", prefix, err)
		}
	}
	if latency != "" {
		if p.Latency, err = units.ParseDuration(latency); err != nil {
			return p, fmt.Errorf("%slatency: %v", prefix, err)
		}
	}
	if queue != 0 {
		p.Queue = queue
	}
	return p, nil
}

func intraOf(def Intra, prefix, rate, alpha string) (Intra, error) {
	in := def
	var err error
	if rate != "" {
		if in.Rate, err = units.ParseRate(rate); err != nil {
			return in, fmt.Errorf("%sintra: %v", prefix, err)
		}
	}
	if alpha != "" {
		if in.Alpha, err = units.ParseDuration(alpha); err != nil {
			return in, fmt.Errorf("%salpha: %v", prefix, err)
		}
	}
	return in, nil
}
