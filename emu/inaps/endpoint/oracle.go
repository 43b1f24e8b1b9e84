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
	spare   []*oracleSum
	tmp     inaps.Vec
	floats  Floats
	fl      [inaps.Values]float32
	// Checked counts results checked; Wrong the results that were not
	// the sum; First describes the first wrong one.
	Checked, Wrong uint64
	First          string
}

type oracleSum struct {
	v        inaps.Vec
	overflow bool // some worker sent the fragment as raw floats
	left     int
}

// NewOracle is the oracle of job (its workers and the run's seed; fl:
// its gradients' float path, if on).
func NewOracle(seed uint64, job uint16, workers int, fl Floats) *Oracle {
	return &Oracle{seed: seed, job: job, workers: workers, floats: fl, sums: map[uint64]*oracleSum{}}
}

// sum computes a fragment's result as the switch and the PS must: the
// wrapping int32 sum, or with floats the fixed-point sum, or (a worker
// overflowed) the float result of Floats.FloatResult.
func (o *Oracle) sum(iter, seq uint32) *oracleSum {
	var s *oracleSum
	if n := len(o.spare); n > 0 {
		s, o.spare = o.spare[n-1], o.spare[:n-1]
		*s = oracleSum{left: o.workers}
	} else {
		s = &oracleSum{left: o.workers}
	}
	var raw map[int]*inaps.Vec
	for w := 0; w < o.workers; w++ {
		if o.floats.On() {
			GradientFloats(&o.fl, o.seed, o.job, w, iter, seq)
			if o.floats.Quantise(&o.fl, o.workers, &o.tmp) {
				if raw == nil {
					raw = map[int]*inaps.Vec{}
				}
				v := o.tmp
				raw[w] = &v
				continue
			}
		} else {
			GradientVec(&o.tmp, o.seed, o.job, w, iter, seq)
		}
		for i := range s.v {
			s.v[i] += o.tmp[i]
		}
	}
	if raw != nil {
		ints := s.v
		o.floats.FloatResult(&ints, raw, &s.v)
		s.overflow = true
	}
	return s
}

// Check compares a result a worker kept with the sum, and reports
// whether it is right.
func (o *Oracle) Check(iter, seq uint32, h wire.INAPS, rank int) bool {
	k := uint64(iter)<<32 | uint64(seq)
	s := o.sums[k]
	if s == nil {
		s = o.sum(iter, seq)
		o.sums[k] = s
	}
	o.Checked++
	ok := true
	if ovf := h.Flags()&wire.INAPSFlagOverflow != 0; ovf != s.overflow {
		ok = false
		if o.Wrong == 0 {
			o.First = fmt.Sprintf("job %d worker %d iteration %d fragment %d: overflow flag %v, want %v", o.job, rank, iter, seq, ovf, s.overflow)
		}
		o.Wrong++
	}
	for i := range s.v {
		if ok && h.Value(i) != s.v[i] {
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
		o.spare = append(o.spare, s)
	}
	return ok
}

// Open is how many sums some worker has not checked yet.
func (o *Oracle) Open() int { return len(o.sums) }
