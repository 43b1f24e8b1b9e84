package topo

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/inaemu/inaemu/internal/units"
)

// flagKeys are the keys each kind takes on the command line, in the order
// errors list them.
var flagKeys = map[string][]string{
	"star":       {"hosts", "link", "latency", "queue", "gpus", "intra", "alpha"},
	"spine-leaf": {"leaves", "hosts", "spines", "link", "uplink", "latency", "uplink_latency", "queue", "gpus", "intra", "alpha"},
	"dims":       {"kinds", "links", "link", "latency", "queue", "links_per_host", "gpus", "intra", "alpha"},
}

// perDim are the dims keys that take a value per dimension.
var perDim = map[string]bool{"kinds": true, "links": true, "latency": true, "queue": true, "links_per_host": true}

// ParseFlag reads the command-line form of a topology:
//
//	star[:hosts=8,link=10G,latency=1us,queue=1000]
//	spine-leaf:leaves=2,hosts=4,spines=1[,link=10G,uplink=40G,latency=1us,uplink_latency=1us,queue=1000]
//	dims:4x4x4[,kinds=ring/switch/fc,links=100G/50G,link=25G,latency=500ns/1us,queue=1000,links_per_host=2/1]
//	(link= is every dimension's rate where links= gives none)
//	FILE.yaml, FILE.yml (see Load)
//
// Every form but a file also takes gpus=N,intra=RATE,alpha=DURATION for
// each host. spine-leaf's hosts is the hosts per leaf. A dims setting is
// one value per dimension separated by "/", or one value for all; a
// dimension's kind defaults to switch. What is left out is left to
// Spec.Build.
func ParseFlag(s string) (*Spec, error) {
	sp, err := parseFlag(s)
	if err != nil { // it quotes the flag's text, which may hold line breaks
		return nil, errors.New(lineBreaks.Replace(err.Error()))
	}
	return sp, nil
}

func parseFlag(s string) (*Spec, error) {
	if strings.HasSuffix(s, ".yaml") || strings.HasSuffix(s, ".yml") {
		return Load(s)
	}
	kind, rest, _ := strings.Cut(s, ":")
	keys, ok := flagKeys[kind]
	if !ok {
		return nil, fmt.Errorf("topology %q: want star, spine-leaf:..., dims:PxQ... or a .yaml file", s)
	}
	sp := &Spec{Kind: kind}
	var fields []string
	if rest != "" {
		fields = strings.Split(rest, ",")
	}
	if kind == "dims" {
		if len(fields) == 0 || strings.Contains(fields[0], "=") {
			return nil, fmt.Errorf("dims: want the sizes first, e.g. dims:4x4")
		}
		for _, p := range strings.Split(fields[0], "x") {
			n, err := strconv.Atoi(p)
			if err != nil || n < 1 {
				return nil, fmt.Errorf("dims: size %q in %s: want a whole number, 1 or more", p, fields[0])
			}
			sp.Dims = append(sp.Dims, DimSpec{Size: n})
		}
		fields = fields[1:]
	}
	seen := map[string]bool{}
	for _, f := range fields {
		key, val, ok := strings.Cut(f, "=")
		switch {
		case !ok:
			return nil, fmt.Errorf("%s: %q: want key=value (%s)", kind, f, strings.Join(keys, ", "))
		case !slices.Contains(keys, key):
			return nil, fmt.Errorf("%s: unknown key %q (want %s)", kind, key, strings.Join(keys, ", "))
		case seen[key]:
			return nil, fmt.Errorf("%s: %s given twice", kind, key)
		}
		seen[key] = true
		vals := []string{val}
		if kind == "dims" && perDim[key] {
			if vals = strings.Split(val, "/"); len(vals) != 1 && len(vals) != len(sp.Dims) {
				return nil, fmt.Errorf("dims: %s=%s: %d values for %d dimensions", key, val, len(vals), len(sp.Dims))
			}
		}
		for _, v := range vals {
			if err := checkFlag(key, v); err != nil {
				return nil, fmt.Errorf("%s: %s=%s: %v", kind, key, val, err)
			}
		}
		if kind == "dims" && perDim[key] {
			for i := range sp.Dims {
				setDim(&sp.Dims[i], key, vals[min(i, len(vals)-1)])
			}
			continue
		}
		set(sp, key, val)
	}
	return sp, nil
}

// checkFlag checks one value, so that errors name the key as the command
// line spells it.
func checkFlag(key, v string) error {
	var err error
	switch key {
	case "hosts", "leaves", "spines", "queue", "links_per_host", "gpus":
		least := 1
		if key == "gpus" {
			least = 0
		}
		if n, e := strconv.Atoi(v); e != nil || n < least {
			err = fmt.Errorf("want a whole number, %d or more", least)
		}
	case "link", "links", "uplink", "intra":
		_, err = units.ParseRate(v)
	case "latency", "uplink_latency", "alpha":
		_, err = units.ParseDuration(v)
	case "kinds":
		if v != "ring" && v != "fc" && v != "switch" {
			err = fmt.Errorf("kind %q: want ring, fc or switch", v)
		}
	}
	return err
}

func atoi(s string) int { n, _ := strconv.Atoi(s); return n } // checked by checkFlag

func set(sp *Spec, key, v string) {
	switch key {
	case "hosts":
		if sp.Kind == "spine-leaf" {
			sp.HostsPerLeaf = atoi(v)
		} else {
			sp.Hosts.Count = atoi(v)
		}
	case "leaves":
		sp.Leaves = atoi(v)
	case "spines":
		sp.Spines = atoi(v)
	case "queue":
		sp.Queue = atoi(v)
	case "gpus":
		sp.GPUs = atoi(v)
	case "link":
		sp.Link = v
	case "uplink":
		sp.Uplink = v
	case "latency":
		sp.Latency = v
	case "uplink_latency":
		sp.UplinkLatency = v
	case "intra":
		sp.Intra = v
	case "alpha":
		sp.Alpha = v
	}
}

func setDim(d *DimSpec, key, v string) {
	switch key {
	case "kinds":
		d.Kind = v
	case "links":
		d.Link = v
	case "latency":
		d.Latency = v
	case "queue":
		d.Queue = atoi(v)
	case "links_per_host":
		d.LinksPerHost = atoi(v)
	}
}
