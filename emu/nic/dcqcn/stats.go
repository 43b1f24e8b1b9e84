package dcqcn

// Stats count what a NIC's DCQCN did.
type Stats struct {
	CNPSent uint64 `json:"cnp_sent"`
	// CNPSuppressed are CE-marked data packets that made no CNP: one had
	// gone to their QP's peer within the interval.
	CNPSuppressed     uint64 `json:"cnp_suppressed"`
	CNPReceived       uint64 `json:"cnp_received"`
	RateDecreases     uint64 `json:"rate_decreases"`
	ECNMarkedReceived uint64 `json:"ecn_marked_received"` // CE-marked data packets for a local QP
	// QPs are the QPs DCQCN saw (a CNP or a marked packet), in the order
	// first seen.
	QPs []QPStats `json:"qps,omitempty"`
}

// QPStats are one QP's reaction point.
type QPStats struct {
	NIC string `json:"nic"` // the NIC the QP is on (QPNs repeat across NICs)
	QPN uint32 `json:"qpn"`
	// RateBps is the QP's current rate, MinRateBps the lowest it had,
	// TargetBps its target rate (all line rate before any CNP).
	RateBps    float64 `json:"rate_bps"`
	MinRateBps float64 `json:"min_rate_bps"`
	TargetBps  float64 `json:"target_bps"`
	Alpha      float64 `json:"alpha"`
	CNPs       uint64  `json:"cnp_received"`
}

// Add counts o's counters in s too (the QPs are not merged).
func (s *Stats) Add(o *Stats) {
	s.CNPSent += o.CNPSent
	s.CNPSuppressed += o.CNPSuppressed
	s.CNPReceived += o.CNPReceived
	s.RateDecreases += o.RateDecreases
	s.ECNMarkedReceived += o.ECNMarkedReceived
}

// Stats are the offload's counters and its QPs' rates now (each QP's
// state advanced to the clock's time first).
func (o *Offload) Stats() Stats {
	st := o.stats
	now := o.clock.Now()
	st.QPs = make([]QPStats, 0, len(o.order))
	for _, s := range o.order {
		if s.active {
			o.advance(s, now)
		}
		st.QPs = append(st.QPs, QPStats{NIC: o.nic.Name, QPN: s.q.QPN(), RateBps: s.rc, MinRateBps: s.minRc, TargetBps: s.rt, Alpha: s.alpha, CNPs: s.cnps})
	}
	return st
}

// Rate is local QP qpn's current rate in bit/s (line rate before its
// first CNP), its state advanced to the clock's time.
func (o *Offload) Rate(qpn uint32) float64 {
	s := o.qps[qpn]
	if s == nil || !s.active {
		return o.p.LineRate
	}
	o.advance(s, o.clock.Now())
	return s.rc
}
