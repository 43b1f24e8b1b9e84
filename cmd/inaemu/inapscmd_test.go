package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// inapsModels writes a small model (two layers of 100 fragments) and one
// with its numel column missing, and returns their paths.
func inapsModels(t *testing.T) (good, bad string) {
	dir := t.TempDir()
	good, bad = filepath.Join(dir, "small.csv"), filepath.Join(dir, "nonumel.csv")
	require.NoError(t, os.WriteFile(good, []byte("layer_index, numel, forward_pass_ns, backward_pass_ns, partitions\n0, 6200, 10000, 0, 2\n1, 6200, 10000, 0, 2\n"), 0o644))
	require.NoError(t, os.WriteFile(bad, []byte("layer_index, forward_pass_ns, backward_pass_ns\n0, 10000, 0\n"), 0o644))
	return good, bad
}

// TestINAPSBadInput: each bad input to inaps run and inaps figure is
// refused with one line naming the flag (or argument), exit 2, and no Go
// trace.
func TestINAPSBadInput(t *testing.T) {
	good, bad := inapsModels(t)
	small := []string{"--jobs", "2", "--workers", "3", "--models", good}
	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"unknown policy", append([]string{"inaps", "run", "--policy", "lifo"}, small...), []string{"--policy", `"lifo"`, "esa"}},
		{"memory below one aggregator", append([]string{"inaps", "run", "--switch-memory", "247B"}, small...), []string{"--switch-memory", "248"}},
		{"memory beyond 65535 aggregators", append([]string{"inaps", "run", "--switch-memory", "16252928B"}, small...), []string{"--switch-memory", "65535"}},
		{"model without numel", []string{"inaps", "run", "--jobs", "2", "--workers", "3", "--models", bad}, []string{"--models", "numel"}},
		{"model file missing", []string{"inaps", "run", "--jobs", "2", "--workers", "3", "--models", filepath.Join(t.TempDir(), "none.csv")}, []string{"--models", "none.csv"}},
		{"33 workers", []string{"inaps", "run", "--jobs", "2", "--workers", "33", "--models", good}, []string{"--workers 33", "32"}},
		{"no jobs", []string{"inaps", "run", "--jobs", "0", "--models", good}, []string{"--jobs 0", "1..64"}},
		{"fault port beyond the hosts", append([]string{"inaps", "run", "--fault", "drop port=8 dir=in nth=1"}, small...), []string{"--fault", "port 8", "0..7"}},
		{"fault port beyond the hosts (static: no PS)", append([]string{"inaps", "run", "--policy", "static", "--fault", "drop port=6 dir=out nth=1"}, small...), []string{"--fault", "port 6", "0..5"}},
		{"bad netem", append([]string{"inaps", "run", "--netem", "loss lots"}, small...), []string{"--netem", `"lots"`}},
		{"figure 12", []string{"inaps", "figure", "12"}, []string{"figure", `"12"`, "8"}},
		{"no seeds", []string{"inaps", "figure", "8", "--seeds", "0"}, []string{"--seeds 0", "1..1000"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, out, errOut := runGuarded(c.args...)
			t.Logf("%s", errOut)
			assert.Empty(t, out)
			assert.Equal(t, 2, code, "stderr %q", errOut)
			assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line on stderr: %q", errOut)
			for _, no := range []string{"goroutine", "panic", "internal error", "runtime."} {
				assert.NotContains(t, errOut, no)
			}
			for _, w := range c.want {
				assert.Contains(t, errOut, w)
			}
		})
	}
}

// TestINAPSRunSmall: a small run under each PS policy is exact, says so,
// and its --json is one object with exact true.
func TestINAPSRunSmall(t *testing.T) {
	good, _ := inapsModels(t)
	for _, pol := range []string{"esa", "fcfs", "static"} {
		t.Run(pol, func(t *testing.T) {
			args := []string{"inaps", "run", "--policy", pol, "--jobs", "2", "--workers", "3", "--models", good, "--switch-memory", "148800B", "--seed", "11"}
			code, out, errOut := runGuarded(args...)
			require.Equal(t, 0, code, "stdout %s\nstderr %s", out, errOut)
			assert.Contains(t, out, "EXACT")
			assert.Contains(t, out, "seed      11")
			code, out, errOut = runGuarded(append(args, "--json")...)
			require.Equal(t, 0, code, "stderr %s", errOut)
			var r struct {
				Exact  bool   `json:"exact"`
				Policy string `json:"policy"`
				Seed   uint64 `json:"seed"`
				Jobs   []struct {
					Results uint64 `json:"results_checked"`
				} `json:"jobs"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &r), "%s", out)
			assert.True(t, r.Exact)
			assert.Equal(t, pol, r.Policy)
			assert.EqualValues(t, 11, r.Seed)
			require.Len(t, r.Jobs, 2)
			assert.Positive(t, r.Jobs[0].Results)
		})
	}
}
