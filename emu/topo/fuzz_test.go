package topo

import (
	"strings"
	"testing"
	"time"
)

// FuzzTopology: any --topology flag and any topology YAML is parsed and
// built without a panic, and every refusal is one line.
func FuzzTopology(f *testing.F) {
	for _, s := range []string{"star", "star:hosts=2,gpus=4,intra=300G,alpha=1us",
		"spine-leaf:leaves=2,hosts=4,spines=2,uplink=20G", "dims:4x4,kinds=ring/switch,links=100G/50G,latency=500ns/1us,links_per_host=2/1",
		"dims:2x3,kinds=fc,gpus=8,intra=300G,alpha=1us", "spine-leaf:leaves=0", "dims:0x99999999"} {
		f.Add(s)
	}
	f.Add("spine-leaf: {leaves: 2, hosts: 2, spines: 1, uplink: 40G}\n")
	f.Add("switches: [a, b]\nhosts: [{name: h0, switch: a}, {name: h1, switch: b}]\nlinks: [{a: a, b: b, rate: 10G}]\n")
	def := LinkParams{Rate: 10e9, Latency: time.Microsecond}
	f.Fuzz(func(t *testing.T, s string) {
		for _, parse := range []func(string) (*Spec, error){ParseFlag, func(s string) (*Spec, error) { return ParseYAML([]byte(s)) }} {
			sp, err := parse(s)
			if err == nil {
				_, err = sp.Build(def)
			}
			if err != nil && strings.Contains(err.Error(), "\n") {
				t.Fatalf("a refusal of more than one line: %q", err)
			}
		}
	})
}
