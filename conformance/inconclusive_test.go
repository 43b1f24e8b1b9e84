package conformance

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
)

// toyProperty runs count cases through the suites' bookkeeping (eachCase,
// inconclusive, noteInconclusive): the cases in inc end inconclusive, case
// failAt (if any) fails. Its outcomes do not depend on the shard.
func toyProperty(o SuiteOptions, inc map[int]bool, failAt int) []PropertyResult {
	res := PropertyResult{Name: "toy", Passed: true}
	eachCase(o, "toy", &res, func(i int, _ uint64) bool {
		if inc[i] {
			res.inconclusive(i, aggOutcome{inconclusive: true, detail: fmt.Sprintf("RETRY_EXC_ERR at case %d", i)})
		}
		if i == failAt {
			res.Failure = "WRONG RESULT"
			return false
		}
		return true
	})
	res.noteInconclusive()
	return []PropertyResult{res}
}

// TestInconclusiveVerdict: a property with no failing case and some
// inconclusive ones is inconclusive (not passed, no failure), and so is
// its report; a failure anywhere is a failure, inconclusive cases noted.
func TestInconclusiveVerdict(t *testing.T) {
	o := SuiteOptions{Count: 10}
	p := toyProperty(o, map[int]bool{2: true, 5: true, 7: true}, -1)[0]
	require.False(t, p.Passed, "inconclusive cases alone do not hold")
	require.True(t, p.Undecided())
	require.False(t, p.Failed())
	require.Equal(t, "inconclusive", p.Verdict)
	require.Empty(t, p.Failure)
	require.Equal(t, 3, p.Inconclusive)
	require.Equal(t, "case 2: RETRY_EXC_ERR at case 2", p.FirstInconclusive)
	require.Len(t, p.Notes, 1)
	require.True(t, strings.HasPrefix(p.Notes[0], "3 of 10 cases inconclusive: "), p.Notes[0])
	holds := toyProperty(o, nil, -1)[0]
	require.True(t, holds.Passed)
	require.Empty(t, holds.Verdict)
	fails := toyProperty(o, map[int]bool{2: true, 7: true}, 5)[0]
	require.True(t, fails.Failed())
	require.Empty(t, fails.Verdict)
	require.Equal(t, 1, fails.Inconclusive, "case 7 is after the failure: never run")

	r := Report{Properties: []PropertyResult{holds, p}}
	r.Judge()
	require.Equal(t, "inconclusive", r.Verdict)
	r.Properties = append(r.Properties, fails)
	r.Judge()
	require.Empty(t, r.Verdict, "a failure anywhere decides")
	r.Properties = []PropertyResult{holds, skipped("x", "why")}
	r.Judge()
	require.Empty(t, r.Verdict)

	b, err := json.Marshal(p)
	require.NoError(t, err)
	require.Contains(t, string(b), `"passed":false`)
	require.Contains(t, string(b), `"inconclusive":3,"first_inconclusive":"case 2: RETRY_EXC_ERR at case 2","verdict":"inconclusive"`)
}

// TestMergeKeepsInconclusive: shards merge into the unsharded report with
// the inconclusive cases summed (up to the first failing case), their
// note and first case, and the verdict; the merged report keeps the
// devices, their mode, logs and the slowest calibration.
func TestMergeKeepsInconclusive(t *testing.T) {
	for _, c := range []struct {
		name   string
		inc    map[int]bool
		failAt int
		want   int // inconclusive cases, counted by hand
	}{
		{"inconclusive only", map[int]bool{2: true, 5: true, 7: true}, -1, 3},
		{"a failure after some", map[int]bool{2: true, 5: true, 7: true}, 6, 2},
		{"a failure before all", map[int]bool{7: true, 9: true}, 3, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := SuiteOptions{Count: 10}
			head := Report{Seed: 1, Release: "safe", Suite: "toy", Count: 10, DUTMode: "ring"}
			whole := head
			whole.Properties = toyProperty(o, c.inc, c.failAt)
			whole.Judge()
			cals := []*dut.Calibration{{Mode: "ring", Rate: 40000}, {Mode: "ring", Rate: 15000}, {Mode: "ring", Rate: 30000}}
			var parts []Report
			for k := range 3 {
				o.Shard = Shard{Index: k, Of: 3}
				part := head
				part.Shard = &o.Shard
				part.DUT = fmt.Sprintf("tap:d%d", k%2)
				part.DeviceLog = fmt.Sprintf("dev%d.log", k)
				part.Calibration = cals[k]
				part.Properties = toyProperty(o, c.inc, c.failAt)
				part.Judge()
				b, err := json.Marshal(part)
				require.NoError(t, err)
				var back Report
				require.NoError(t, json.Unmarshal(b, &back))
				parts = append([]Report{back}, parts...) // reversed
			}
			merged, err := Merge(parts)
			require.NoError(t, err)
			require.Equal(t, reportJSON(t, Report{Properties: whole.Properties}), reportJSON(t, Report{Properties: merged.Properties}))
			require.Equal(t, c.want, merged.Properties[0].Inconclusive)
			require.Equal(t, whole.Verdict, merged.Verdict)
			require.Equal(t, c.failAt < 0, merged.Verdict == "inconclusive")
			require.Equal(t, "tap:d0, tap:d1", merged.DUT, "each device once, in shard order")
			require.Equal(t, "ring", merged.DUTMode)
			require.Equal(t, "dev0.log, dev1.log, dev2.log", merged.DeviceLog)
			require.Equal(t, 15000.0, merged.Calibration.Rate, "the slowest shard's")
		})
	}
	failed := []*dut.Calibration{{Rate: 9000}, {Error: "stalled"}, {Rate: 100}}
	var parts []Report
	for k, cal := range failed {
		parts = append(parts, Report{Seed: 1, Suite: "toy", Count: 3, Shard: &Shard{k, 3}, Calibration: cal,
			Properties: []PropertyResult{{Name: "toy", Passed: true, Cases: 1, Shard: &ShardRecord{FailAt: -1, StallAt: -1}}}})
	}
	merged, err := Merge(parts)
	require.NoError(t, err)
	require.Equal(t, "stalled", merged.Calibration.Error, "a failed calibration is the slowest: its shard ran the fallback")
	parts[1].DUTMode = "ring"
	_, err = Merge(parts)
	require.ErrorContains(t, err, "report 2 is of another run")
}
