package conformance

import (
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
)

// reportJSON is a report as JSON without its wall times, which are the
// only fields a merge may not reproduce.
func reportJSON(t *testing.T, r Report) string {
	t.Helper()
	r.Properties = append([]PropertyResult(nil), r.Properties...)
	for i := range r.Properties {
		r.Properties[i].Wall = 0
	}
	b, err := json.MarshalIndent(r, "", " ")
	require.NoError(t, err)
	return string(b)
}

// Shards 0..N-1 of a suite, merged in any order, give exactly the report
// of the unsharded run with the same seed: passing suites, and the paper
// release rule's failing aggregation suite, whose unsharded run stops at
// its first wrong result after cases that stalled and cases that ended
// in allowed transport errors, spread over the shards.
func TestShardsMergeIntoTheUnshardedReport(t *testing.T) {
	for _, c := range []struct {
		name  string
		suite string
		run   func(SuiteOptions) []PropertyResult
		o     SuiteOptions
		of    int
		fails bool
	}{
		// Seed 1: a wrong result at case 3, a stall at case 4 after it (not
		// noted); seed 2: a wrong result at case 82 after a stall at case 3; seed 9:
		// stalls only (the first is the failure); seed 35: a stall and an
		// allowed transport error.
		{"aggregation-paper-1", "aggregation", AggregationSuite, SuiteOptions{Count: 100, Seed: 1, Release: netreduce.Paper}, 3, true},
		{"aggregation-paper-2", "aggregation", AggregationSuite, SuiteOptions{Count: 100, Seed: 2, Release: netreduce.Paper}, 3, true},
		{"aggregation-paper-9", "aggregation", AggregationSuite, SuiteOptions{Count: 100, Seed: 9, Release: netreduce.Paper}, 4, true},
		{"aggregation-paper-35", "aggregation", AggregationSuite, SuiteOptions{Count: 100, Seed: 35, Release: netreduce.Paper}, 2, true},
		{"aggregation-safe", "aggregation", AggregationSuite, SuiteOptions{Count: 24, Seed: 4, Release: netreduce.Safe}, 4, false},
		{"gbn", "gbn", GBNSuite, SuiteOptions{Count: 30, Seed: 3}, 2, false},
		{"icrc", "icrc", ICRCSuite, SuiteOptions{Count: 6, Seed: 2}, 3, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.o.OutDir = t.TempDir()
			head := Report{Seed: c.o.Seed, Release: c.o.Release.String(), Suite: c.suite, Count: c.o.Count}
			whole := head
			whole.Properties = c.run(c.o)
			var parts []Report
			for k := range c.of {
				o := c.o
				o.Shard = Shard{Index: k, Of: c.of}
				part := head
				part.Shard = &o.Shard
				part.Properties = c.run(o)
				// Through JSON, as shard reports travel between machines.
				b, err := json.Marshal(part)
				require.NoError(t, err)
				var back Report
				require.NoError(t, json.Unmarshal(b, &back))
				parts = append(parts, back)
			}
			rand.New(rand.NewPCG(uint64(c.of), 1)).Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
			merged, err := Merge(parts)
			require.NoError(t, err)
			require.Equal(t, reportJSON(t, whole), reportJSON(t, merged))
			failed := false
			for _, p := range whole.Properties {
				failed = failed || !p.Passed
			}
			require.Equal(t, c.fails, failed)
		})
	}
}

// Shard reports that do not make one run are refused, each with its
// reason.
func TestMergeRefusesMismatchedShards(t *testing.T) {
	rec := func(idx, of int, seed uint64) Report {
		return Report{Seed: seed, Release: "safe", Suite: "gbn", Count: 4, Shard: &Shard{idx, of},
			Properties: []PropertyResult{{Name: "gbn", Passed: true, Cases: 2, Shard: &ShardRecord{FailAt: -1, StallAt: -1}}}}
	}
	for _, c := range []struct {
		parts []Report
		want  string
	}{
		{nil, "no shard reports"},
		{[]Report{rec(0, 2, 1)}, "shard 1/2 is missing"},
		{[]Report{rec(0, 2, 1), rec(0, 2, 1)}, "shard 0/2 appears twice"},
		{[]Report{rec(0, 2, 1), rec(1, 2, 9)}, "report 2 is of another run"},
		{[]Report{rec(0, 2, 1), rec(1, 3, 1)}, "report 2 is shard 1/3, report 1 of 2 shards"},
		{[]Report{rec(0, 2, 1), rec(2, 2, 1)}, "report 2: shard 2/2 is out of range"},
		{[]Report{{Seed: 1, Suite: "gbn"}}, "report 1 is not a shard's"},
	} {
		_, err := Merge(c.parts)
		require.ErrorContains(t, err, c.want)
	}
}
