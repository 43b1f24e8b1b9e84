package capcheck

import (
	"fmt"
	"strings"
)

// The owed family: what an aggregating switch owed a receiver and did not
// send. agg-sum judges every result that left the switch; result-lost
// judges a result that never did.
//
// A NetReduce cell (ring, message, packet) is complete once every rank's
// contribution has reached the switch (X-in; on faultwire's capture of a
// device, wR-swR); the switch then owes each rank's connection its
// result (X-out; swR-wR). Rank r's result is lost when the switch sent
// other ranks' results of the cell but not rank r's before rank r's
// sender resent the packet (a retransmission reaching the switch after
// the last contribution; a fault's duplicate copy is no retransmission).
//
// The capture's order between two interfaces proves nothing by itself
// (the switch may still be writing the cell's results while the
// retransmission is captured on its way in), so the verdict waits for
// evidence that the switch had handled the retransmission and written
// everything it owed rank r's receiver before: a later frame the switch
// sent rank r's receiver, the result of a cell that rank r's own
// contribution, reaching the switch after the retransmission, completed
// (a switch handles each port's frames in the order they arrive, and a
// cell's results are written while its last contribution is handled).
// Up to that frame the switch must have sent rank r's receiver the cell's
// result twice: once when the cell completed, once for the
// retransmission (a packet of a summed message gets the stored result
// again, or, once released, goes on unchanged). Fewer is a violation;
// with no such later frame the cell is not judged.
//
// The rule needs a record of every frame the switch sent, made before
// any fault of the link acted on it: faultwire's capture of a device
// (swR-wR is what the wire read from the device; its faults act after,
// and are written on the host's side). It is applied to such captures
// only. Elsewhere (the emulator's X-out, a tap) a frame is written where
// it comes out of the link, so a result a fault delayed past the end of
// the capture is never written at all, and its absence proves nothing.
// Frames dropped or corrupted on the way in never reached the switch,
// and forged copies (spoof) are no rank's contribution.

// RuleResultLost names a result the switch owed a receiver and never sent.
const RuleResultLost = "result-lost"

// owedCellKey is a cell: ring, message (MsgID extended past 8 bits) and
// packet offset.
type owedCellKey struct {
	ring uint8
	msg  int64
	off  int
}

// owedCell is what the capture shows of a cell, per rank: the positions
// (in capture order) of its contributions that reached the switch, and of
// the results that left it on the rank's connection.
type owedCell struct {
	in, out map[uint8][]int
	// last is the position of the contribution that completed the cell
	// (-1: not all ranks' came), lastRank its rank.
	last     int
	lastRank uint8
}

// resultLostRule applies result-lost (see above) with sides telling where
// each frame crosses the switch.
// Multi-rack rings (trees: their switch-to-switch frames were seen) are
// not judged: no one switch holds every contribution of their cells.
func (c *checker) resultLostRule(sides *hostSides, tag uint32, trees map[uint8][]uint64) {
	fs := c.fs
	if !sides.any || !allNames(c.ifaceNames, faultwireName) {
		return
	}
	// The frames in capture order. faultwire, the only writer of these
	// names, records both sides of the device from its one loop: a frame
	// reaching the device right after the write to it, a frame leaving it
	// when the loop reads it, so a device's output always follows its
	// cause in the file. That order is causal; the timestamps are the
	// wall clock's (time.Now, not monotonic), which a clock step (NTP)
	// can reorder, fabricating "before the resend" and "after" relations.
	var order []int
	for i := range fs.len() {
		f := fs.at(i)
		if f.class != fcRequest || f.snapped || !isWriteData(f.op) {
			continue
		}
		if s := sides.of(i); s == sideIn || s == sideOut {
			order = append(order, i)
		}
	}
	conns := map[checkStreamKey]*aggConn{}
	cells := map[owedCellKey]*owedCell{}
	var keys []owedCellKey
	ringH := map[uint8]int{}
	type placed struct {
		cell owedCellKey
		rank uint8
	}
	at := make([]placed, len(order)) // each position's cell (rank 255: none)
	for pos, i := range order {
		at[pos].rank = 255
		f := fs.at(i)
		k := f.key()
		conn := conns[k]
		var m aggMsg
		var off int
		if sides.of(i) == sideIn {
			if !f.icrcOK || f.ghost || f.forged {
				continue // never reached the switch whole, or no rank's
			}
			if f.hasINA && f.inaTag == tag {
				if trees[f.inaRing] != nil {
					continue
				}
				if conn == nil {
					conn = &aggConn{ring: f.inaRing, rank: f.inaRank, cur: int64(f.inaMsg)}
					conns[k] = conn
				} else if conn.ring != f.inaRing || conn.rank != f.inaRank {
					continue
				}
				ringH[conn.ring] = max(ringH[conn.ring], int(conn.rank)+1)
				var ok bool
				if m, ok = conn.place(f.inaMsg, int(f.inaLen), f.psn); !ok {
					continue
				}
			} else {
				var ok bool
				if conn == nil || f.op.IsFirst() {
					continue
				}
				if m, off, ok = conn.find(f.psn); !ok || off == 0 {
					continue
				}
			}
		} else {
			// A frame leaving the switch: a result, delivered or not; a
			// corrupted one counts only if the fault corrupted it (its
			// headers are then the switch's).
			if conn == nil || !f.icrcOK && !f.ghost && !f.injected {
				continue
			}
			var ok bool
			if m, off, ok = conn.find(f.psn); !ok {
				continue
			}
		}
		ck := owedCellKey{conn.ring, m.id, off}
		cell := cells[ck]
		if cell == nil {
			cell = &owedCell{in: map[uint8][]int{}, out: map[uint8][]int{}, last: -1}
			cells[ck] = cell
			keys = append(keys, ck)
		}
		if sides.of(i) == sideIn {
			cell.in[conn.rank] = append(cell.in[conn.rank], pos)
		} else {
			cell.out[conn.rank] = append(cell.out[conn.rank], pos)
		}
		at[pos] = placed{ck, conn.rank}
	}
	// Where each cell completed: the latest of its ranks' first
	// contributions.
	for _, ck := range keys {
		cell := cells[ck]
		H := ringH[ck.ring]
		for r := 0; r < H; r++ {
			in := cell.in[uint8(r)]
			if len(in) == 0 {
				cell.last = -1
				break
			}
			if in[0] > cell.last {
				cell.last, cell.lastRank = in[0], uint8(r)
			}
		}
	}
	// Each connection's results in capture order, to find the later frame
	// that proves the switch handled a retransmission.
	outs := map[[2]int64][]int{} // (ring, rank) → positions
	for pos := range order {
		if p := at[pos]; p.rank != 255 && sides.of(order[pos]) == sideOut {
			k := [2]int64{int64(p.cell.ring), int64(p.rank)}
			outs[k] = append(outs[k], pos)
		}
	}
	frame := func(pos int) int { return order[pos] + 1 }
	frames := func(ps []int) string {
		s := make([]string, len(ps))
		for j, p := range ps {
			s[j] = fmt.Sprint(frame(p))
		}
		return strings.Join(s, ", ")
	}
	for _, ck := range keys {
		cell := cells[ck]
		if cell.last < 0 {
			continue
		}
		H := ringH[ck.ring]
		for r := uint8(0); int(r) < H; r++ {
			// The sender's first retransmission after the cell completed.
			resent := -1
			for _, p := range cell.in[r] {
				if p > cell.last && !fs.at(order[p]).dupCopy {
					resent = p
					break
				}
			}
			if resent < 0 {
				continue
			}
			before, others := false, -1
			for _, p := range cell.out[r] {
				before = before || p > cell.last && p < resent
			}
			for q := uint8(0); int(q) < H; q++ {
				for _, p := range cell.out[q] {
					if q != r && p > cell.last && p < resent && (others < 0 || p < others) {
						others = p
					}
				}
			}
			if before || others < 0 {
				continue // it left before the resend, or the cell's results did not
			}
			// The proof the switch handled the retransmission: rank r's
			// connection's result of a cell rank r itself completed, with a
			// contribution that reached the switch after the resend.
			marker := -1
			for _, p := range outs[[2]int64{int64(ck.ring), int64(r)}] {
				if p <= resent {
					continue
				}
				y := cells[at[p].cell]
				if y.last > resent && y.lastRank == r && p > y.last {
					marker = p
					break
				}
			}
			if marker < 0 {
				continue
			}
			c.rep.OwedJudged++
			var left []int
			for _, p := range cell.out[r] {
				if p > cell.last && p < marker {
					left = append(left, p)
				}
			}
			if len(left) >= 2 {
				continue
			}
			var firsts []int
			for q := 0; q < H; q++ {
				firsts = append(firsts, cell.in[uint8(q)][0])
			}
			carried := "no result for it left the switch before frame " + fmt.Sprint(frame(marker))
			for _, p := range cell.out[r] {
				if p > resent {
					carried = fmt.Sprintf("the result that finally carried it left at frame %d", frame(p))
					break
				}
			}
			c.violation(RuleResultLost, fs.at(order[resent]),
				"rank %d's result of ring %d message %d packet %d was owed and not sent: all %d contributions reached the switch (frames %s), rank %d's result left (frame %d), rank %d's did not before its sender resent the packet (this frame); %s (frame %d, a later result to the same receiver, shows the switch had handled the resend)",
				r, ck.ring, ck.msg, ck.off, H, frames(firsts), at[others].rank, frame(others), r, carried, frame(marker))
		}
	}
}

func owedSummary(r *Report) string {
	if r.RuleCounts()[RuleResultLost] == 0 {
		return "" // the aggregation line speaks for the results that left
	}
	return fmt.Sprintf("%d resent packets judged for the result owed, %d results lost", r.OwedJudged, r.RuleCounts()[RuleResultLost])
}
