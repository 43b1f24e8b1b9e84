package conformance

import (
	"cmp"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/tensor"
)

// fuzzChoices draws a scenario's choices from fuzz bytes, one byte a
// choice; past the end every choice is 0.
type fuzzChoices struct {
	b []byte
	i int
}

func (f *fuzzChoices) Intn(n int) int {
	if f.i >= len(f.b) || n <= 1 {
		f.i++
		return 0
	}
	f.i++
	return int(f.b[f.i-1]) % n
}

// fuzzTopologyKinds are the kinds fuzzScenario builds: the generators'
// and a custom graph.
var fuzzTopologyKinds = []string{"star", "spine-leaf", "dims", "custom"}

// fuzzScenario builds a small run from fuzz bytes: the first picks the
// mode (every mode emu has), the second the topology kind (star,
// spine-leaf of 1-3 spines, dims of ring, fc or switch dimensions, or a
// custom graph of 1-3 switches, hosts on any, links between any two
// nodes), then hosts with or without GPUs, the flat form or one or two
// jobs on named hosts or GPUs, window, message length, MTU, dtype, a
// tensor of at most 2 KiB, ACK timeout, port security, wa's broadcast,
// compression, and up to three one-shot faults of every kind on any link
// direction or host port. Whatever it builds may be invalid: Validate
// says so.
func fuzzScenario(b []byte) *scenario.Scenario {
	r := &fuzzChoices{b: b}
	modes := emu.AlgorithmNames()
	mode := modes[r.Intn(len(modes))]
	sp := &topo.Spec{Kind: fuzzTopologyKinds[r.Intn(len(fuzzTopologyKinds))]}
	hosts := 0
	switch sp.Kind {
	case "star":
		sp.Hosts.Count = 2 + r.Intn(5)
		hosts = sp.Hosts.Count
	case "spine-leaf":
		sp.Leaves, sp.HostsPerLeaf, sp.Spines = 1+r.Intn(3), 1+r.Intn(3), 1+r.Intn(3)
		hosts = sp.Leaves * sp.HostsPerLeaf
	case "dims":
		hosts = 1
		for range 1 + r.Intn(2) {
			d := topo.DimSpec{Size: 2 + r.Intn(3), Kind: []string{"ring", "fc", "switch"}[r.Intn(3)]}
			sp.Dims = append(sp.Dims, d)
			hosts *= d.Size
		}
	default:
		sws := 1 + r.Intn(3)
		for s := range sws {
			sp.Switches = append(sp.Switches, topo.SwitchSpec{Name: fmt.Sprintf("s%d", s)})
		}
		hosts = 2 + r.Intn(5)
		for h := range hosts {
			name := fmt.Sprintf("h%d", h)
			sp.Hosts.List = append(sp.Hosts.List, topo.HostSpec{Name: name})
			sp.Links = append(sp.Links, topo.LinkSpec{A: name, B: fmt.Sprintf("s%d", r.Intn(sws))})
		}
		for s := 1; s < sws; s++ { // a chain of the switches, and more links
			sp.Links = append(sp.Links, topo.LinkSpec{A: fmt.Sprintf("s%d", s-1), B: fmt.Sprintf("s%d", s)})
		}
		node := func(k int) string {
			if k >= sws {
				return fmt.Sprintf("h%d", k-sws)
			}
			return fmt.Sprintf("s%d", k)
		}
		for range r.Intn(3) {
			a := r.Intn(sws + hosts)
			sp.Links = append(sp.Links, topo.LinkSpec{A: node(a), B: node((a + 1 + r.Intn(sws+hosts-1)) % (sws + hosts))})
		}
	}
	gpus := []int{0, 0, 1, 2, 4}[r.Intn(5)]
	if emu.IsGPUScheme(emu.Mode(mode)) && gpus == 0 {
		gpus = 2 * r.Intn(3) // mostly a scheme's GPUs, sometimes none
	}
	if gpus > 0 {
		sp.GPUs, sp.Intra, sp.Alpha = gpus, "150G", "1us"
	}
	win, msgLen, mtu := 1+r.Intn(4), 1+r.Intn(8), mtus[r.Intn(len(mtus))]
	dt := tensor.DType(r.Intn(3))
	seed, to := uint64(r.Intn(256)), 8+r.Intn(7)
	sc := &scenario.Scenario{Mode: mode, Topology: sp, Window: &win, MsgLen: &msgLen, MTU: &mtu, DType: dt.String(),
		Tensor: fmt.Sprint((1 + r.Intn(512)) * dt.Size()), Seed: &seed, Timeout: &to, MaxTime: "10s"}
	if r.Intn(4) == 0 {
		sc.PortSecurity = "off"
	}
	if mode == "wa" {
		sc.Bcast = []string{"unicast", "tree", "worker-tree"}[r.Intn(3)]
	}
	if r.Intn(8) == 0 {
		sc.Compress = fmt.Sprintf("2^-%d", 6+2*r.Intn(3))
	}
	// The flat form (workers) or jobs of any modes on any hosts or GPUs.
	if n := r.Intn(3); n == 0 {
		w := 2 + r.Intn(max(hosts-1, 1))
		sc.Workers = &w
	} else {
		free := fuzzPerm(r, hosts)
		n = max(1, min(n, hosts/2))
		for j := range n {
			job := scenario.Job{Name: fmt.Sprintf("j%d", j)}
			if r.Intn(2) == 0 {
				job.Mode = modes[r.Intn(len(modes))]
			}
			for range min(2+r.Intn(3), len(free)-2*(n-1-j)) { // two hosts left for each next job
				h := free[0]
				free = free[1:]
				if m := cmp.Or(job.Mode, mode); emu.IsGPUScheme(emu.Mode(m)) && gpus > 0 {
					for k := range gpus {
						job.Ranks = append(job.Ranks, topo.GPUName(fmt.Sprintf("h%d", h), k))
					}
				} else {
					job.Ranks = append(job.Ranks, fmt.Sprintf("h%d", h))
				}
			}
			sc.Jobs = append(sc.Jobs, job)
		}
	}
	// Faults on any direction of the built topology or on a host port.
	var dirs []string
	if t, err := sp.Build(topo.LinkParams{Rate: 10e9}); err == nil {
		dirs = t.DirectionNames()
	}
	for range r.Intn(4) {
		at := fmt.Sprintf("port=%d dir=%s", r.Intn(hosts), []string{"in", "out"}[r.Intn(2)])
		if len(dirs) > 0 && r.Intn(2) == 0 {
			at = "link=" + dirs[r.Intn(len(dirs))]
		}
		act := []string{"drop", "dup", "corrupt", fmt.Sprintf("delay=%dus", 1+r.Intn(3000)), fmt.Sprintf("hold=%d", 1+r.Intn(8)), "spoof"}[r.Intn(6)]
		if act == "spoof" {
			port := r.Intn(hosts)
			act, at = fmt.Sprintf("spoof=%d", (port+1+r.Intn(max(hosts-1, 1)))%hosts), fmt.Sprintf("port=%d dir=in", port)
		}
		sc.Faults = append(sc.Faults, fmt.Sprintf("%s %s class=%s nth=%d", act, at, []string{"data", "ack", "nak", "any"}[r.Intn(4)], 1+r.Intn(20)))
	}
	return sc
}

// fuzzPerm is a permutation of 0..n-1 drawn from r.
func fuzzPerm(r *fuzzChoices, n int) []int {
	p := make([]int, n)
	for i := range p {
		j := r.Intn(i + 1)
		p[i], p[j] = p[j], i
	}
	return p
}

// fuzzMaxRanks bounds the runs FuzzRunAnyScenario runs: at most this many
// ranks in all (tensors are at most 2 KiB).
const fuzzMaxRanks = 16

// FuzzRunAnyScenario builds a scenario of every mode and topology kind
// from fuzz bytes (fuzzScenario), applies and validates it: a refusal is
// one line, never a panic. A valid scenario of at most fuzzMaxRanks ranks
// runs: it ends with every job exact, or with a transport error (a
// JobError: its faults broke a connection) or a setup refusal (a
// ConfigError) of one line; nothing else, and no panic.
func FuzzRunAnyScenario(f *testing.F) {
	// The seeds: for every mode and topology kind, the first two inputs of
	// a fixed sequence that build a valid run (where one exists among the
	// first 300) and the first that is refused.
	rng := rand.New(rand.NewPCG(1, 2))
	for m := range emu.AlgorithmNames() {
		for k := range fuzzTopologyKinds {
			valid, refused := 0, 0
			for try := 0; try < 300 && (valid < 2 || refused < 1); try++ {
				b := make([]byte, 48)
				for i := range b {
					b[i] = byte(rng.Uint32())
				}
				b[0], b[1] = byte(m), byte(k)
				cfg := emu.DefaultConfig()
				err := fuzzScenario(b).Apply(&cfg)
				if err == nil {
					err = cfg.Validate()
				}
				switch {
				case err == nil && valid < 2:
					valid++
				case err != nil && refused < 1:
					refused++
				default:
					continue
				}
				f.Add(b)
			}
		}
	}
	f.Add([]byte{})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		sc := fuzzScenario(b)
		cfg := emu.DefaultConfig()
		err := sc.Apply(&cfg)
		if err == nil {
			err = cfg.Validate()
		}
		if err != nil {
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("a refusal of more than one line: %q", err)
			}
			return
		}
		ranks := cfg.Workers
		if emu.IsGPUScheme(cfg.Mode) && gpus(sc) > 0 {
			ranks *= gpus(sc)
		}
		if len(cfg.Jobs) > 0 {
			ranks = 0
			for _, j := range cfg.Jobs {
				ranks += len(j.Ranks)
			}
		}
		if ranks > fuzzMaxRanks {
			return
		}
		res, err := emu.Run(cfg)
		var je *emu.JobError
		var ce *emu.ConfigError
		switch {
		case errors.As(err, &je) || errors.As(err, &ce):
			if strings.Contains(err.Error(), "\n") {
				t.Fatalf("an error of more than one line: %q", err)
			}
		case err != nil:
			t.Fatalf("neither a result nor a transport error nor a refusal: %v\n%s", err, marshal(sc))
		case !res.Exact:
			for _, j := range res.Jobs {
				if m := j.Mismatch; m != nil {
					t.Fatalf("WRONG RESULT in job %s (%s): rank %d element %d is %s, want %s\n%s", j.Name, j.Mode, m.Rank, m.Element, m.Got, m.Want, marshal(sc))
				}
			}
			t.Fatalf("not exact: %+v\n%s", res.Mismatch, marshal(sc))
		}
	})
}

func gpus(sc *scenario.Scenario) int { return sc.Topology.GPUs }

func marshal(sc *scenario.Scenario) string {
	b, err := sc.Marshal()
	if err != nil {
		return err.Error()
	}
	return string(b)
}
