package endpoint

import (
	"fmt"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/frames/wire"
)

// Oracle knows what every result of a job must be: the wrapping int32
// sum of its workers' gradients, computed here from the same seeds,
// apart from any switch or PS. It computes each fragment's sum once and
// keeps it until every worker has checked its copy.
type Oracle struct {
	seed    uint64
	job     uint16
	workers int
	sums    map[uint64]*oracleSum
	tmp     inaps.Vec
	// Checked counts results checked; Wrong the results that were not
	// the sum; First describes the first wrong one.
	Checked, Wrong uint64
	First          string
}

type oracleSum struct {
	v    inaps.Vec
	left int
}

// NewOracle is the oracle of job (its workers and the run's seed).
func NewOracle(seed uint64, job uint16, workers int) *Oracle {
	return &Oracle{seed: seed, job: job, workers: workers, sums: map[uint64]*oracleSum{}}
}

// Check compares a result a worker kept with the sum, and reports
// whether it is right.
func (o *Oracle) Check(iter, seq uint32, h wire.INAPS, rank int) bool {
	k := uint64(iter)<<32 | uint64(seq)
	s := o.sums[k]
	if s == nil {
		s = &oracleSum{left: o.workers}
		for w := 0; w < o.workers; w++ {
			GradientVec(&o.tmp, o.seed, o.job, w, iter, seq)
			for i := range s.v {
				s.v[i] += o.tmp[i]
			}
		}
		o.sums[k] = s
	}
	o.Checked++
	ok := true
	for i := range s.v {
		if h.Value(i) != s.v[i] {
			ok = false
			if o.Wrong == 0 {
				o.First = fmt.Sprintf("job %d worker %d iteration %d fragment %d: value %d is %d, the sum is %d (bitmap %#x)", o.job, rank, iter, seq, i, h.Value(i), s.v[i], h.Bitmap())
			}
			o.Wrong++
			break
		}
	}
	if s.left--; s.left == 0 {
		delete(o.sums, k)
	}
	return ok
}

// Open is how many sums some worker has not checked yet.
func (o *Oracle) Open() int { return len(o.sums) }
