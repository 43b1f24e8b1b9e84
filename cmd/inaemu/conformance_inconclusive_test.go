package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/internal/junit"
)

// inconclusiveShards writes two shard reports of a property against a
// device none of whose cases failed and three were inconclusive (cases
// 1, 2 and 4 of 6), as a run writes them, and returns their files.
func inconclusiveShards(t *testing.T) []string {
	dir := t.TempDir()
	var files []string
	for k := range 2 {
		p := conformance.PropertyResult{Name: "gbn", Passed: false, Cases: 3, Verdict: "inconclusive",
			Shard: &conformance.ShardRecord{FailAt: -1, StallAt: -1}}
		for i := k; i < 6; i += 2 {
			if i == 1 || i == 2 || i == 4 {
				p.Shard.Inconclusive = append(p.Shard.Inconclusive, i)
				p.Inconclusive++
				if p.FirstInconclusive == "" {
					p.FirstInconclusive = "case " + string(rune('0'+i)) + ": RETRY_EXC_ERR"
				}
			}
		}
		r := conformance.Report{Seed: 7, Release: "safe", Suite: "gbn", Count: 6, Shard: &conformance.Shard{Index: k, Of: 2},
			DUT: "tap:dv", Properties: []conformance.PropertyResult{p}, Verdict: "inconclusive"}
		b, err := json.Marshal(r)
		require.NoError(t, err)
		f := filepath.Join(dir, "shard"+string(rune('0'+k))+".json")
		require.NoError(t, os.WriteFile(f, b, 0o644))
		files = append(files, f)
	}
	return files
}

// TestInconclusiveExitStatus: a report whose only verdict besides holds
// is inconclusive exits 5 (the undecidable status) with one line on
// stderr, and prints the property as INCONCLUSIVE with its count and
// first case; --allow-inconclusive exits 0 and still prints it; the
// merged --json says "verdict":"inconclusive" per property and overall.
func TestInconclusiveExitStatus(t *testing.T) {
	files := inconclusiveShards(t)
	code, out, errOut := runCLI(append([]string{"merge"}, files...)...)
	require.Equal(t, 5, code, errOut)
	assert.Contains(t, out, "INCONCLUSIVE: 3 of 6 cases inconclusive (case 1: RETRY_EXC_ERR)")
	assert.NotContains(t, out, "holds")
	assert.Contains(t, out, "0 of 1 properties hold, 1 inconclusive")
	assert.Equal(t, 1, strings.Count(errOut, "\n"), errOut)
	assert.Contains(t, errOut, "inconclusive: no property fails, but 1 neither held nor failed")
	code, out2, _ := runCLI(append([]string{"merge", "--allow-inconclusive"}, files...)...)
	require.Equal(t, 0, code)
	assert.Equal(t, out, out2, "accepted, still reported")
	code, js, _ := runCLI(append([]string{"merge", "--json"}, files...)...)
	require.Equal(t, 5, code)
	var r conformance.Report
	require.NoError(t, json.Unmarshal([]byte(js), &r))
	require.Equal(t, "inconclusive", r.Verdict)
	require.Equal(t, "inconclusive", r.Properties[0].Verdict)
	require.Equal(t, 3, r.Properties[0].Inconclusive)
	require.False(t, r.Properties[0].Passed)
	require.Equal(t, "tap:dv", r.DUT)

	// A shard record that does not add up is refused: one line, exit 2.
	b, err := os.ReadFile(files[1])
	require.NoError(t, err)
	bad := filepath.Join(t.TempDir(), "bad.json")
	require.NoError(t, os.WriteFile(bad, []byte(strings.Replace(string(b), `"inconclusive":[1]`, `"inconclusive":[2]`, 1)), 0o644))
	code, _, errOut = runCLI("merge", files[0], bad)
	require.Equal(t, 2, code)
	assert.Contains(t, errOut, "property gbn: inconclusive 2: not a case of shard 1/2")
}

// TestInconclusiveJUnit: an inconclusive property is a JUnit failure of
// type "inconclusive" (a CI gate must not pass it as skipped or passed);
// a failing property's type stays its name.
func TestInconclusiveJUnit(t *testing.T) {
	rep := conformance.Report{Suite: "gbn", Properties: []conformance.PropertyResult{
		{Name: "gbn", Cases: 6, Inconclusive: 3, FirstInconclusive: "case 1: RETRY_EXC_ERR", Verdict: "inconclusive"},
		{Name: "icrc/x", Cases: 2, Failure: "bad"},
		{Name: "icrc/y", Passed: true, Cases: 2},
	}}
	var b bytes.Buffer
	require.NoError(t, junit.Write(&b, conformanceJUnit(rep, time.Second, time.Unix(0, 0))))
	x := b.String()
	assert.Contains(t, x, `<failure message="INCONCLUSIVE: 3 of 6 cases inconclusive (case 1: RETRY_EXC_ERR)" type="inconclusive">`)
	assert.Contains(t, x, `type="icrc/x"`)
	assert.Contains(t, x, `failures="2"`)
	assert.Contains(t, x, `skipped="0"`)
	assert.NotContains(t, x, "<skipped")
}
