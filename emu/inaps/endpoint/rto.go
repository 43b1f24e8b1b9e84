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
	return max(r.min, r.srtt+4*r.rttvar)
}
