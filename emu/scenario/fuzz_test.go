package scenario

import (
	"strings"
	"testing"

	"github.com/inaemu/inaemu/emu"
)

// FuzzScenario: any bytes as a scenario file are parsed, applied to the
// default job and validated without a panic, and every refusal is one
// line (what the CLI prints after "inaemu run: ").
func FuzzScenario(f *testing.F) {
	f.Add([]byte(fullScenario))
	f.Add([]byte("mode: wa\nworkers: 4\nbcast: worker-tree\ncompress: 2^-10\npattern: lognormal:-9,2\n"))
	f.Add([]byte("topology:\n  spine-leaf: {leaves: 2, hosts: 2, spines: 1}\njobs:\n  - {name: a, mode: netreduce, ranks: [h0, h1]}\n"))
	f.Add([]byte("mode: pn\ntopology: \"star:hosts=2,gpus=4,intra=300G\"\n"))
	f.Add([]byte("tensor: 1e300GiB\nlink: -5G\nlatency: NaN\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Parse(b)
		if err == nil {
			cfg := emu.DefaultConfig()
			if err = s.Apply(&cfg); err == nil {
				err = cfg.Validate()
			}
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Fatalf("a refusal of more than one line: %q", err)
		}
	})
}
