package congestion

import (
	"github.com/inaemu/inaemu/emu"
)

// DCQCNPauses is one N:1 incast with PFC on, with or without DCQCN: the
// PFC frames the network sent (every direction and priority, the
// switch's pauses and refreshes and resumes alike: res.PFC's
// pauses_sent) and how the flows fared.
type DCQCNPauses struct {
	N           int     `json:"n"`
	DCQCN       bool    `json:"dcqcn"`
	PausesSent  uint64  `json:"pauses_sent"`
	PausedNS    int64   `json:"paused_ns"` // summed over the directions paused
	ECNMarks    uint64  `json:"ecn_marks"`
	CNPs        uint64  `json:"cnps"`
	Drops       uint64  `json:"queue_drops"`
	GoodputGbps float64 `json:"goodput_gbps"` // the job's bytes over its time
	Exact       bool    `json:"exact"`
}

// DCQCNPauseCount runs c with PFC on (c.DCQCN and c.RED as given) and
// counts its pauses.
func DCQCNPauseCount(c DCQCNIncast) (DCQCNPauses, error) {
	c.PFC = true
	res, err := emu.Run(c.Config())
	if err != nil {
		return DCQCNPauses{}, err
	}
	out := DCQCNPauses{N: c.Senders, DCQCN: c.DCQCN, Drops: res.QueueDrops + pfcBufferDrops(res.Switch.Buffer), Exact: res.Exact}
	for _, p := range res.PFC {
		out.PausesSent += p.PausesSent
		out.PausedNS += p.PausedNs
		out.ECNMarks += p.ECNMarks
	}
	j := res.Jobs[0]
	out.GoodputGbps = j.AlgBWGbps
	if j.DCQCN != nil {
		out.CNPs = j.DCQCN.CNPSent
	}
	return out, nil
}
