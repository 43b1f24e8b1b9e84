package job

import "time"

// Traffic is what a traffic job (mode traffic, emu/collective/traffic.go)
// moves: RC RDMA WRITE flows between its ranks, each flow its own QP pair,
// given by a pattern over the ranks or listed one by one. The zero value
// is an incast of the job's tensor size from every rank to the last.
type Traffic struct {
	// Pattern is incast (every rank but the sink to the sink), all-to-all
	// (every ordered pair) or permutation (a derangement drawn from the
	// job's seed: each rank sends to one other and receives from one);
	// "" is Flows when there are some, else incast.
	Pattern string
	// Sink is incast's sink, named as the job's ranks ("": the last rank).
	Sink string
	// Bytes is what each flow of a pattern moves (0: the job's tensor
	// size), Rate the bits per second it is paced at (0: as fast as its
	// WRs complete).
	Bytes int64
	Rate  float64
	// Flows are the flows of a job without a pattern.
	Flows []Flow
	// Depth bounds each flow's outstanding WRs (0: the default, 16).
	Depth int
	// Bin is the width of the flows' throughput timelines' bins (0: a
	// hundredth of the run as the job expects it, see docs/traffic.md).
	Bin time.Duration
}

// Flow is one flow of a traffic job: From's QP writes Bytes into To's
// region, starting Start after the job does, paced at Rate bits per
// second (0: unpaced).
type Flow struct {
	From, To string // ranks' NIC names, as the job's Ranks spell them
	Bytes    int64  // 0: Traffic.Bytes, else the job's tensor size
	Start    time.Duration
	Rate     float64
}

// FlowResult is what one flow of a traffic job did.
type FlowResult struct {
	From  string `json:"from"`
	To    string `json:"to"`
	Bytes int64  `json:"bytes"`
	// RateBps is the flow's pacing (0: none).
	RateBps float64 `json:"rate_bps,omitempty"`
	// StartNS is when its first WR was posted (virtual time), FCTNS from
	// then to its last WR's completion, GoodputGbps its bytes over FCTNS.
	StartNS     int64   `json:"start_ns"`
	FCTNS       int64   `json:"fct_ns"`
	GoodputGbps float64 `json:"goodput_gbps"`
	// Timeline is the bytes the flow delivered in each bin of BinNS from
	// the job's start (a WR's bytes spread evenly from the later of its
	// posting and the previous completion to its own completion).
	BinNS    int64   `json:"bin_ns"`
	Timeline []int64 `json:"timeline_bytes"`
}
