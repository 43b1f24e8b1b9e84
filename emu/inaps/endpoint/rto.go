package endpoint

import "time"

// rtoEstimator is TCP's retransmission timer (RFC 6298): SRTT and RTTVAR
// with gains 1/8 and 1/4, RTO = SRTT + 4·RTTVAR, floored at the minimum
// (ESA: "RTO_min ... 1ms in our setting"); the first RTO is the minimum.
type rtoEstimator struct {
	min, srtt, rttvar time.Duration
	have              bool
}

func (r *rtoEstimator) sample(rtt time.Duration) {
	if !r.have {
		r.srtt, r.rttvar, r.have = rtt, rtt/2, true
		return
	}
	d := r.srtt - rtt
	if d < 0 {
		d = -d
	}
	r.rttvar += (d - r.rttvar) / 4
	r.srtt += (rtt - r.srtt) / 8
}

func (r *rtoEstimator) rto() time.Duration {
	if !r.have {
		return r.min
	}
	return min(max(r.min, r.srtt+4*r.rttvar), r.min*rtoCap)
}

// rtoCap bounds the RTO, back-off included, at this many times its floor
// (RFC 6298 allows a maximum; TCP's 60 s would be absurd at these time
// scales). A worker's RTT sample is the time to its parameter, so it
// takes in the wait for the job's slowest worker: one straggler's wait
// would otherwise set an RTO of tens of milliseconds, every loss after it
// would cost that much, and the stragglers it makes would feed it.
const rtoCap = 100

// backedOff is the RTO doubled n times, within the cap.
func (r *rtoEstimator) backedOff(n int) time.Duration {
	return min(r.rto()<<n, r.min*rtoCap)
}
