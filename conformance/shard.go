package conformance

import (
	"fmt"
	"slices"
	"strings"

	"github.com/inaemu/inaemu/dut"
)

// Shard names the part of a suite one run does: case i belongs to shard
// i mod Of. Of 0 or 1 is the whole suite.
type Shard struct {
	Index int `json:"index"`
	Of    int `json:"of"`
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Of) }

// whole reports whether the shard is the whole suite.
func (s Shard) whole() bool { return s.Of <= 1 }

// Owns reports whether case (or grid cell) i is this shard's.
func (s Shard) Owns(i int) bool { return s.whole() || i%s.Of == s.Index }

// ShardSet checks that shard reports cover shards 0..of-1 once each.
type ShardSet struct{ seen []bool }

func NewShardSet(of int) *ShardSet { return &ShardSet{seen: make([]bool, of)} }

// Add takes one report's shard (of the set's count, checked by the
// caller, who knows what to call the report).
func (s *ShardSet) Add(sh Shard) error {
	switch {
	case sh.Index < 0 || sh.Index >= len(s.seen):
		return fmt.Errorf("shard %v is out of range", sh)
	case s.seen[sh.Index]:
		return fmt.Errorf("shard %v appears twice", sh)
	}
	s.seen[sh.Index] = true
	return nil
}

// Missing names the first shard no report was, if any.
func (s *ShardSet) Missing() error {
	if i := slices.Index(s.seen, false); i >= 0 {
		return fmt.Errorf("shard %d/%d is missing", i, len(s.seen))
	}
	return nil
}

// ShardRecord is what a shard's result keeps beside its verdict so that
// the shards' results merge into exactly the unsharded one: an unsharded
// run stops at its first failing case, counts the cases up to it, and
// notes what happened before it, so the merge needs the indices.
type ShardRecord struct {
	// FailAt is the index of the case this shard failed at (it ran no
	// case after it), -1 if none.
	FailAt int `json:"fail_at"`
	// Transport are the cases that ended in an allowed transport error.
	Transport []int `json:"transport,omitempty"`
	// StallAt and StallDetail: the first case that stalled unrecoverably
	// under the paper's release rule (aggregation), -1 if none.
	StallAt     int    `json:"stall_at"`
	StallDetail string `json:"stall_detail,omitempty"`
	// Inconclusive are the cases that ended inconclusive (against a
	// device); the result's FirstInconclusive says why the first did.
	Inconclusive []int `json:"inconclusive,omitempty"`
}

// Report is a conformance run's report: the suite's parameters and one
// result per property. Shard is set in a shard's report; Merge turns the
// shards' reports into the unsharded one.
type Report struct {
	Seed    uint64 `json:"seed"`
	Release string `json:"release"`
	Suite   string `json:"suite"`
	Count   int    `json:"count"`
	Shard   *Shard `json:"shard,omitempty"`
	// SwitchProgram is the switch program the NetReduce jobs aggregated
	// on when not netreduce (--switch-program).
	SwitchProgram string `json:"switch_program,omitempty"`
	DUT           string `json:"dut,omitempty"` // the device under test (--dut), if any
	// DUTMode is "ring" when the device only forwards (--dut-mode ring:
	// the suites ran ring jobs through it); empty when it aggregates.
	DUTMode   string `json:"dut_mode,omitempty"`
	DeviceLog string `json:"device_log,omitempty"` // the file that holds the device's output (--dut-cmd)
	// Calibration is what the run measured of the device's path before
	// its cases (--dut), which fitted their shapes and timeouts.
	Calibration *dut.Calibration `json:"calibration,omitempty"`
	Properties  []PropertyResult `json:"properties"`
	// Verdict is "inconclusive" (VerdictInconclusive) when no property
	// fails and one is inconclusive (see Judge); empty otherwise.
	Verdict string `json:"verdict,omitempty"`
}

// Merge combines the reports of shards 0..N-1 of one suite (same seed,
// release, suite and count) into the report the unsharded run gives:
// equal in every field but the wall times, which are summed (the work
// the shards did together). A missing, repeated or foreign shard is an
// error.
func Merge(reports []Report) (Report, error) {
	if len(reports) == 0 {
		return Report{}, fmt.Errorf("no shard reports")
	}
	first := reports[0]
	if first.Shard == nil {
		return Report{}, fmt.Errorf("report 1 is not a shard's (no \"shard\" in it)")
	}
	n := first.Shard.Of
	set := NewShardSet(n)
	for k, r := range reports {
		switch {
		case r.Shard == nil:
			return Report{}, fmt.Errorf("report %d is not a shard's (no \"shard\" in it)", k+1)
		case r.Shard.Of != n:
			return Report{}, fmt.Errorf("report %d is shard %v, report 1 of %d shards", k+1, *r.Shard, n)
		case r.Seed != first.Seed || r.Release != first.Release || r.Suite != first.Suite || r.Count != first.Count || r.SwitchProgram != first.SwitchProgram || r.DUTMode != first.DUTMode:
			return Report{}, fmt.Errorf("report %d is of another run (seed %d, release %s, suite %s, count %d, switch program %q, dut mode %q; report 1: seed %d, release %s, suite %s, count %d, switch program %q, dut mode %q)",
				k+1, r.Seed, r.Release, r.Suite, r.Count, r.SwitchProgram, r.DUTMode, first.Seed, first.Release, first.Suite, first.Count, first.SwitchProgram, first.DUTMode)
		case len(r.Properties) != len(first.Properties):
			return Report{}, fmt.Errorf("report %d has %d properties, report 1 %d", k+1, len(r.Properties), len(first.Properties))
		}
		if err := set.Add(*r.Shard); err != nil {
			return Report{}, fmt.Errorf("report %d: %w", k+1, err)
		}
	}
	if err := set.Missing(); err != nil {
		return Report{}, err
	}
	byShard := slices.Clone(reports) // the order the shards were given in is not the run's
	slices.SortFunc(byShard, func(a, b Report) int { return a.Shard.Index - b.Shard.Index })
	out := Report{Seed: first.Seed, Release: first.Release, Suite: first.Suite, Count: first.Count, Properties: []PropertyResult{},
		DUTMode: first.DUTMode, DUT: distinct(byShard, func(r Report) string { return r.DUT }),
		DeviceLog: distinct(byShard, func(r Report) string { return r.DeviceLog }), Calibration: slowest(byShard)}
	for p := range first.Properties {
		parts := make([]PropertyResult, len(reports))
		for k, r := range reports {
			parts[k] = r.Properties[p]
			if parts[k].Name != first.Properties[p].Name {
				return Report{}, fmt.Errorf("report %d: property %d is %s, report 1's %s", k+1, p+1, parts[k].Name, first.Properties[p].Name)
			}
			if parts[k].Shard == nil {
				return Report{}, fmt.Errorf("report %d: property %s carries no shard record", k+1, parts[k].Name)
			}
		}
		out.Properties = append(out.Properties, mergeProperty(parts, first.Count))
	}
	out.Judge()
	return out, nil
}

// distinct is what the shards' reports say of one thing (the device,
// its log), each different value once in shard order, joined by ", ":
// shards may run against one device each.
func distinct(reports []Report, of func(Report) string) string {
	var vals []string
	for _, r := range reports {
		if v := of(r); v != "" && !slices.Contains(vals, v) {
			vals = append(vals, v)
		}
	}
	return strings.Join(vals, ", ")
}

// slowest is the merged report's calibration: the slowest of the shards'
// (a failed one first, which fell back to the most conservative
// settings; else the lowest rate; the first shard's of equals), nil if
// none calibrated. It bounds what every shard's cases were fitted to.
func slowest(reports []Report) *dut.Calibration {
	var s *dut.Calibration
	for _, r := range reports {
		c := r.Calibration
		switch {
		case c == nil:
		case s == nil:
			s = c
		case !s.Measured():
		case !c.Measured() || c.Rate < s.Rate:
			s = c
		}
	}
	return s
}

// mergeProperty replays the unsharded loop over the shards' records:
// cases 0..F run (F the first failing case over all shards), the first
// stall before F is noted (or reported, with no failure), and the
// transport errors up to F are counted.
func mergeProperty(parts []PropertyResult, count int) PropertyResult {
	res := PropertyResult{Name: parts[0].Name, Passed: true}
	failAt, failBy := -1, -1
	stallAt, stallBy := -1, -1
	for k, p := range parts {
		res.Wall += p.Wall
		if f := p.Shard.FailAt; f >= 0 && (failAt < 0 || f < failAt) {
			failAt, failBy = f, k
		}
	}
	for k, p := range parts {
		if s := p.Shard.StallAt; s >= 0 && (failAt < 0 || s < failAt) && (stallAt < 0 || s < stallAt) {
			stallAt, stallBy = s, k
		}
	}
	res.Cases = count
	if cases := totalCases(parts); cases < count {
		res.Cases = cases // a suite with nothing to run (no frames) runs no case
	}
	if failAt >= 0 {
		res.Cases = failAt + 1
	}
	transport, inconclusive, firstInc, firstIncBy := 0, 0, -1, -1
	for k, p := range parts {
		for _, i := range p.Shard.Transport {
			if failAt < 0 || i <= failAt {
				transport++
			}
		}
		for _, i := range p.Shard.Inconclusive {
			if failAt < 0 || i <= failAt {
				inconclusive++
				if firstInc < 0 || i < firstInc {
					firstInc, firstIncBy = i, k
				}
			}
		}
	}
	switch {
	case failAt >= 0:
		copyVerdict(&res, parts[failBy])
		if stallAt >= 0 {
			res.Notes = append(res.Notes, stallNote(stallAt, parts[stallBy].Shard.StallDetail))
		}
	case stallAt >= 0:
		copyVerdict(&res, parts[stallBy]) // that shard failed on nothing else, so it reported the stall
	default:
		// A failure outside the cases (nothing to test): every shard says it.
		if i := slices.IndexFunc(parts, PropertyResult.Failed); i >= 0 {
			copyVerdict(&res, parts[i])
		}
	}
	if transport > 0 {
		res.Notes = append(res.Notes, transportNote(transport, res.Cases))
	}
	if inconclusive > 0 { // as noteInconclusive: the first is a shard's first
		res.Inconclusive, res.FirstInconclusive = inconclusive, parts[firstIncBy].FirstInconclusive
		res.noteInconclusive()
	}
	return res
}

func totalCases(parts []PropertyResult) int {
	total := 0
	for _, p := range parts {
		total += p.Cases
	}
	return total
}

// copyVerdict takes a failing shard's verdict: its failure, shrunk
// counterexample and replay command name global case indices already.
func copyVerdict(res *PropertyResult, p PropertyResult) {
	res.Passed, res.Failure, res.Counterexample, res.Replay = false, p.Failure, p.Counterexample, p.Replay
	for _, n := range p.Notes {
		if isOtherNote(n) {
			res.Notes = append(res.Notes, n)
		}
	}
}

// The suites' notes, written by one function each so that a merge writes
// them as a run does, and recognises them by the same words.
const (
	stallWords     = " also stalled unrecoverably: "
	transportWords = " cases ended in a transport error after a frame was destroyed more than retry_cnt times (allowed)"
)

func stallNote(i int, detail string) string { return fmt.Sprintf("case %d%s%s", i, stallWords, detail) }

func transportNote(n, cases int) string { return fmt.Sprintf("%d of %d%s", n, cases, transportWords) }

// isOtherNote: a note that is none of the three a merge recomputes (e.g.
// a counterexample that could not be written).
func isOtherNote(n string) bool {
	return !strings.Contains(n, stallWords) && !strings.HasSuffix(n, transportWords) && !strings.Contains(n, inconclusiveWords)
}

// failed, transport and stalled record case i in a shard's record; a run
// of the whole suite has none, and they do nothing.
func (r *ShardRecord) failed(i int) {
	if r != nil {
		r.FailAt = i
	}
}

func (r *ShardRecord) transport(i int) {
	if r != nil {
		r.Transport = append(r.Transport, i)
	}
}

func (r *ShardRecord) inconclusive(i int) {
	if r != nil {
		r.Inconclusive = append(r.Inconclusive, i)
	}
}

func (r *ShardRecord) stalled(i int, detail string) {
	if r != nil {
		r.StallAt, r.StallDetail = i, detail
	}
}

// record starts a result's shard record when the run is a shard.
func (o SuiteOptions) record(res *PropertyResult) {
	if !o.Shard.whole() {
		res.Shard = &ShardRecord{FailAt: -1, StallAt: -1}
	}
}
