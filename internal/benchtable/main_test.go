package main

import (
	"bufio"
	"bytes"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testdata/bench.txt is what `make bench` wrote on a 2-core machine (5
// rounds). The expected medians are computed here from its lines with
// plain string splitting, not with benchfmt.
func TestTableFromRealOutput(t *testing.T) {
	in, err := os.ReadFile("testdata/bench.txt")
	require.NoError(t, err)
	want := map[string]float64{} // benchmark name -> median ratio
	rounds := map[string][]float64{}
	sc := bufio.NewScanner(bytes.NewReader(in))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0][:strings.LastIndexByte(f[0], '-')], "Benchmark")
		for i := 2; i+1 < len(f); i += 2 {
			if u := f[i+1]; u == "ratio" || u == "x_crc32" || u == "x_raw" {
				v, err := strconv.ParseFloat(f[i], 64)
				require.NoError(t, err)
				rounds[name] = append(rounds[name], v)
			}
		}
	}
	require.NotEmpty(t, rounds)
	for name, v := range rounds {
		sort.Float64s(v)
		want[name] = v[(len(v)-1)/2]
	}

	var out, errOut bytes.Buffer
	require.Equal(t, 0, run(bytes.NewReader(in), &out, &errOut), errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	assert.True(t, strings.HasPrefix(lines[0], "package "), lines[0])
	got := map[string]string{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		got[f[1]] = l
	}
	for name, r := range want {
		require.Contains(t, got, name)
		assert.Contains(t, got[name], " "+strconv.FormatFloat(r, 'f', 3, 64)+" ", name)
	}
	assert.Contains(t, got["ICRC/v2-ipv4/1KiB"], ">= 0.9")
	assert.Contains(t, got["Build/v1"], "no raw limit")
	assert.Contains(t, got["Aggregate8x1KiB/crc32"], "(a raw limit)")
	assert.Contains(t, got["TAPPort"], "raw_port_fps")
}

func TestFailuresFailTheTable(t *testing.T) {
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, run(strings.NewReader("PASS\nok x 1s\n"), &out, &errOut))
	assert.Contains(t, errOut.String(), "no benchmark results")
	errOut.Reset()
	in := "pkg: p\nBenchmarkX-2 10 5 ns/op 0.5 ratio\n--- FAIL: BenchmarkY\nFAIL\n"
	assert.Equal(t, 1, run(strings.NewReader(in), &out, &errOut))
	assert.Contains(t, errOut.String(), "a benchmark failed")
}
