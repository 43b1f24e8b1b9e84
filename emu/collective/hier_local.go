package collective

import (
	"errors"
	"fmt"
	"slices"

	"github.com/inaemu/inaemu/emu/themis"
)

// A hier job without schedule consistency (job.Hier.LocalOrder): what
// the Themis paper's §4.6.2 warns of. Each rank serves each dimension by
// the policy among the chunks ready on it, in the order they became
// ready there; when runtime variation (a delayed frame) makes two peers
// of a dimension pick different chunks, each waits for the other's
// blocks of the chunk it picked, and nothing is left to happen. The run
// then stops (job stalled) and Stalled names the wait cycle, found by
// themis.CheckOrders on the orders the ranks followed.

// localNext is the stage dimension d of the rank serves next: by the
// job's policy among the chunks whose current stage is on d and not yet
// begun, in their local order of arrival; false when none is ready.
func (j *hierJob) localNext(hr *hierRank, d int) (themis.OpRef, bool) {
	pol := themis.Policy(j.h.Policy)
	if pol == "" {
		pol = themis.FIFO
	}
	var ready []themis.ReadyChunk
	for c, st := range j.p.sched {
		if s := hr.stage[c]; s < len(st) && !hr.started[c] && st[s].dim == d {
			ready = append(ready, themis.Ready(j.hs.scheds[c], s, hr.readySeq[c]))
		}
	}
	k := themis.Next(pol, ready)
	if k < 0 {
		return themis.OpRef{}, false
	}
	return themis.OpRef{Chunk: ready[k].Chunk, Stage: ready[k].Stage}, true
}

// Stalled is why a hier job without consistency waits: the wait cycle
// among the ranks' orders (each dimension's stages as the rank served
// them, then those it has not reached, in chunk order), "" when there is
// none (or consistency was on).
func (j *hierJob) Stalled() string {
	if !j.h.LocalOrder {
		return ""
	}
	hs := j.hs
	orders := make([][][]themis.OpRef, len(j.ranks))
	for r, hr := range j.ranks {
		orders[r] = make([][]themis.OpRef, len(hs.topo))
		for k, d := range hs.dim {
			o := slices.Clone(hr.served[d])
			for c, cs := range hs.scheds {
				for s, st := range cs.Stages {
					if op := (themis.OpRef{Chunk: c, Stage: s}); st.Dim == k && !slices.Contains(o, op) {
						o = append(o, op)
					}
				}
			}
			orders[r][k] = o
		}
	}
	var wc *themis.WaitCycle
	if err := themis.CheckOrders(hs.topo, hs.scheds, orders); errors.As(err, &wc) {
		return fmt.Sprintf("schedule consistency is off (local order) and %v", err)
	}
	return ""
}
