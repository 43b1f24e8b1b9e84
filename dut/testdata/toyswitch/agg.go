package main

import (
	"bytes"
	"encoding/binary"
)

// Release rules.
const (
	releaseSafe  = iota // message m's row is reused once every rank sent a first packet of m+N
	releasePaper        // NetReduce §3.1 as written: a packet of m clears slot (m+N) mod 2N
)

// Bugs the switch can be told to have.
const (
	bugNone      = iota
	bugDoubleAdd // no per-rank bitmap: a counter, and contributions accumulate
	bugStaleICRC // results keep the ICRC of the gradient frame they were built from
	bugWrongPort // a result for the host on port p leaves by port (p+1) mod H
	bugDropNAK   // NAKs are not forwarded (only ACKs are)
	bugLateSum   // a late packet of a released message gets the sum its slot holds now (a newer message's)
	bugWithhold  // one result per message (its first packet's, toward one receiver) is not sent until resent
	bugForgeACK  // the switch acknowledges each message on its receiver's behalf as its last result leaves
)

// connection is one ring connection: rank r's send QP to rank r+1's
// receive QP, entering the switch on port r.
type connection struct {
	rank     int
	src, dst []byte // expected source and destination address (IP or GID bytes)
	qp       uint32 // the receiver's QPN, learned from the first INA packet
	haveQP   bool
	anchored bool   // aMsg starts at aPSN
	aMsg     int64  //
	aPSN     uint32 //
	newest   int64  // newest message whose first packet was seen (-1: none)
	newestK  int    // its packet count (the INA header's MsgLen)
	// The forge-ack bug: the receiver's latest ACK (its headers are the
	// forgeries'), and its MSN less the messages it acknowledged.
	ack     []byte
	msnBase int64
}

// slot aggregates one packet position (message, offset) over the ranks.
type slot struct {
	have   uint64 // ranks whose packet is stored
	count  int    // packets taken (the double-add bug completes on this)
	done   bool   // the sum is made; results went out
	n      int    // data bytes of this packet
	sum    []byte
	frames [][]byte // per rank: its latest frame for this slot
	doff   []int    // per rank: where the data starts in frames[rank]
	acc    [][]byte // double-add bug: per-rank accumulators
}

func (s *slot) reset() { s.have, s.count, s.done = 0, 0, false }

// counters of the aggregator.
type aggStats struct {
	Packets       uint64 `json:"packets"`          // aggregation packets taken into a slot
	Aggregations  uint64 `json:"aggregations"`     // slots completed
	Results       uint64 `json:"results"`          // result packets sent on completion
	Resends       uint64 `json:"resends"`          // result packets sent again for a retransmission
	ICRCDrops     uint64 `json:"icrc_drops"`       // ring-connection frames with a bad ICRC
	FirstLost     uint64 `json:"first_lost"`       // packets of a message whose first packet was not seen
	StaleForwards uint64 `json:"stale_forwards"`   // packets of released messages, forwarded unchanged
	WindowDrops   uint64 `json:"window_drops"`     // packets too far ahead of the release point
	BadDrops      uint64 `json:"bad_drops"`        // bad INA header, offset, length or forged port
	Forged        uint64 `json:"forged,omitempty"` // the forge-ack bug: ACKs sent on a receiver's behalf
}

// netreduce is the aggregating part of the switch: one ring (RingID 0).
type netreduce struct {
	workers, window, msgLen, mtu, dtype, release, bug int

	conns    []*connection // by rank (= port)
	rows     [][]slot      // 2N rows of msgLen slots; row m mod 2N holds message m
	released int64         // safe rule: messages below this are done for good
	full     uint64        // bitmap of all ranks
	st       aggStats

	// out sends a result frame by its destination MAC, or with skew 1 by
	// the port after that one.
	out  func(frame []byte, skew int)
	scr  []byte // scratch for re-sent results
	view pkt
}

func newNetreduce(workers, window, msgLen, mtu, dtype, release, bug int, addr func(rank int) []byte) *netreduce {
	a := &netreduce{workers: workers, window: window, msgLen: msgLen, mtu: mtu, dtype: dtype, release: release, bug: bug}
	a.full = 1<<uint(workers) - 1
	if workers == 64 {
		a.full = ^uint64(0)
	}
	for r := range workers {
		a.conns = append(a.conns, &connection{rank: r, src: addr(r), dst: addr((r + 1) % workers), newest: -1})
	}
	a.rows = make([][]slot, 2*window)
	for i := range a.rows {
		a.rows[i] = make([]slot, msgLen)
	}
	return a
}

func isWrite(op byte) bool { return op >= opWriteFirst && op <= opWriteOnlyImm }

func isFirst(op byte) bool { return op == opWriteFirst || op == opWriteOnly || op == opWriteOnlyImm }

// psnDelta is a-b as a signed 24-bit distance.
func psnDelta(a, b uint32) int64 { return int64(int32((a-b)<<8) >> 8) }

// locate gives the message and the offset in it of the packet with psn:
// every message but the last has exactly msgLen packets, so the PSN
// distance from a known message start says both.
func (a *netreduce) locate(c *connection, psn uint32) (int64, int) {
	d := psnDelta(psn, c.aPSN)
	L := int64(a.msgLen)
	q := d / L
	if d%L < 0 {
		q--
	}
	return c.aMsg + q, int(d - q*L)
}

// connOf is the ring connection whose addresses p carries, or nil.
func (a *netreduce) connOf(p *pkt) *connection {
	src, dst := p.srcAddr(), p.dstAddr()
	for _, c := range a.conns {
		if bytes.Equal(src, c.src) && bytes.Equal(dst, c.dst) {
			return c
		}
	}
	return nil
}

// handle takes a parsed frame that arrived on port. It returns true when
// the frame is to be forwarded like any other (not aggregation traffic,
// or a duplicate of a released message), false when it was consumed.
func (a *netreduce) handle(p *pkt, port int) bool {
	op := p.opcode()
	if !isWrite(op) || len(p.srcAddr()) != len(a.conns[0].src) {
		return true
	}
	c := a.connOf(p)
	if c == nil {
		return true
	}
	if c.rank != port { // a member's addresses from another member's port: forged
		a.st.BadDrops++
		return false
	}
	if c.haveQP && p.destQP() != c.qp {
		return true // another QP pair between the same hosts: not the ring
	}
	if !icrcOK(p) {
		a.st.ICRCDrops++
		return false
	}
	pay := p.payload()
	var m int64
	var off int
	if isFirst(op) {
		if len(pay) < inaBytes || binary.BigEndian.Uint32(pay) != inaMagic {
			a.st.BadDrops++
			return false
		}
		ring, id, k, rank := pay[4], pay[5], int(pay[6]), int(pay[7])
		if ring != 0 || rank != c.rank || k < 1 || k > a.msgLen {
			a.st.BadDrops++
			return false
		}
		if !c.haveQP {
			c.qp, c.haveQP = p.destQP(), true
		}
		if !c.anchored {
			c.anchored, c.aMsg, c.aPSN = true, int64(id), p.psn()
		}
		m, off = a.locate(c, p.psn())
		if off != 0 || m < 0 || uint8(m) != id {
			a.st.BadDrops++
			return false
		}
		if m > c.newest {
			c.newest, c.newestK = m, k
			c.aMsg, c.aPSN = m, p.psn()
			a.advance()
		}
	} else {
		if !c.anchored {
			a.st.FirstLost++
			return false
		}
		m, off = a.locate(c, p.psn())
		switch {
		case m > c.newest || (m == c.newest && off >= c.newestK):
			a.st.FirstLost++ // its message's first packet has not come
			return false
		case off == 0 || m < 0:
			a.st.BadDrops++ // a middle or last packet where a message starts
			return false
		}
	}
	data := pay
	if off == 0 {
		data = pay[inaBytes:]
	}
	if len(pay) > a.mtu || len(data)%dtypeSize(a.dtype) != 0 {
		a.st.BadDrops++
		return false
	}
	w := int64(a.window)
	var s *slot
	if a.release == releasePaper {
		a.rows[(m+w)%(2*w)][off].reset()
		s = &a.rows[m%(2*w)][off]
	} else {
		switch {
		case m < a.released && a.bug == bugLateSum:
			// The slot now belongs to message m+2N (or later): once that
			// completed, its sum goes back in this old PSN.
			if s := &a.rows[m%(2*w)][off]; s.done && s.n == len(data) {
				a.resend(p, data, s)
				return false
			}
			a.st.StaleForwards++
			return true
		case m < a.released:
			a.st.StaleForwards++ // its receiver has the result: it re-ACKs and discards this
			return true
		case m >= a.released+2*w:
			a.st.WindowDrops++
			return false
		}
		s = &a.rows[m%(2*w)][off]
	}
	if s.done {
		if len(data) != s.n {
			a.st.BadDrops++
			return false
		}
		a.resend(p, data, s)
		return false
	}
	if s.count > 0 && len(data) != s.n {
		a.st.BadDrops++ // the ranks disagree on the packet's length
		return false
	}
	a.take(s, c.rank, p, data)
	complete := s.have == a.full
	if a.bug == bugDoubleAdd {
		complete = s.count == a.workers
	}
	if complete {
		a.complete(s, m, off)
	}
	return false
}

// take stores rank's packet in the slot.
func (a *netreduce) take(s *slot, rank int, p *pkt, data []byte) {
	if s.frames == nil {
		s.frames = make([][]byte, a.workers)
		s.doff = make([]int, a.workers)
	}
	a.st.Packets++
	if a.bug == bugDoubleAdd && s.count == 0 {
		// The slot's first packet: clear every rank's accumulator.
		if s.acc == nil {
			s.acc = make([][]byte, a.workers)
		}
		for k := range s.acc {
			if cap(s.acc[k]) < len(data) {
				s.acc[k] = make([]byte, len(data), a.mtu)
			}
			s.acc[k] = s.acc[k][:len(data)]
			fillIdentity(a.dtype, s.acc[k])
		}
	}
	s.frames[rank] = append(s.frames[rank][:0], p.f...)
	s.doff[rank] = p.pay + p.payLen - len(data)
	s.n = len(data)
	s.have |= 1 << uint(rank)
	s.count++
	if a.bug == bugDoubleAdd {
		addInto(a.dtype, s.acc[rank], data) // a second copy of rank's packet is added again
	}
}

// contribution is rank's data in a slot.
func (a *netreduce) contribution(s *slot, rank int) []byte {
	if a.bug == bugDoubleAdd {
		return s.acc[rank][:s.n]
	}
	return s.frames[rank][s.doff[rank] : s.doff[rank]+s.n]
}

// complete forms the sum in rank order and sends one result per
// connection: each rank's own frame (its connection's headers and INA
// header) with the sum in place of its data and a fresh ICRC.
func (a *netreduce) complete(s *slot, m int64, off int) {
	if cap(s.sum) < s.n {
		s.sum = make([]byte, a.mtu)
	}
	sum := s.sum[:s.n]
	copy(sum, a.contribution(s, 0))
	for k := 1; k < a.workers; k++ {
		addInto(a.dtype, sum, a.contribution(s, k))
	}
	s.done = true
	a.st.Aggregations++
	for k := 0; k < a.workers; k++ {
		if s.have&(1<<uint(k)) == 0 { // double-add bug: rank k never sent this packet
			continue
		}
		if a.bug == bugWithhold && off == 0 && int(m%int64(a.workers)) == k {
			continue // owed to rank k's receiver, sent only when rank k resends
		}
		f := s.frames[k]
		copy(f[s.doff[k]:], sum)
		a.emit(f)
		a.st.Results++
		if a.bug == bugForgeACK && off == a.msgLen-1 {
			a.forgeACK(a.conns[k], m, f)
		}
	}
}

// ack sees an ACK or NAK on its way from a receiver to its sender (the
// forge-ack bug learns the receiver's headers and MSN from it).
func (a *netreduce) ack(p *pkt) {
	if a.bug != bugForgeACK || p.payLen < 4 {
		return
	}
	src, dst := p.srcAddr(), p.dstAddr()
	for _, c := range a.conns {
		if !bytes.Equal(src, c.dst) || !bytes.Equal(dst, c.src) || !c.anchored {
			continue
		}
		aeth := p.payload()
		if aeth[0]>>5 != 0 { // a NAK: not a template
			return
		}
		m, off := a.locate(c, p.psn())
		done := m // messages the ACK covers, whole
		if off == a.msgLen-1 {
			done++
		}
		msn := int64(binary.BigEndian.Uint32(aeth) & 0xFFFFFF)
		c.ack, c.msnBase = append(c.ack[:0], p.f...), msn-done
		return
	}
}

// forgeACK acknowledges message m of connection c on its receiver's
// behalf as the message's last result (res) leaves toward the receiver:
// the receiver's own ACK for it, as it will send it once the result
// arrives (same PSN, syndrome and MSN), sent to the sender now.
func (a *netreduce) forgeACK(c *connection, m int64, res []byte) {
	if c.ack == nil {
		return // no ACK of the receiver seen yet to copy
	}
	var rp pkt
	if !parse(res, &rp) {
		return
	}
	f := append([]byte(nil), c.ack...)
	var ap pkt
	if !parse(f, &ap) || ap.payLen < 4 {
		return
	}
	psn := rp.psn()
	bth := ap.bth + 8
	binary.BigEndian.PutUint32(f[bth:], binary.BigEndian.Uint32(f[bth:])&0xFF000000|psn)
	aeth := f[ap.pay:]
	msn := uint32(c.msnBase+m+1) & 0xFFFFFF
	binary.BigEndian.PutUint32(aeth, uint32(aeth[0])<<24|msn)
	setICRC(&ap)
	a.st.Forged++
	a.out(f, 0)
}

// resend answers a gradient packet that met a completed slot: the packet
// itself with the sum in place of its data, back on its connection.
func (a *netreduce) resend(p *pkt, data []byte, s *slot) {
	a.scr = append(a.scr[:0], p.f...)
	at := p.pay + p.payLen - len(data)
	copy(a.scr[at:], s.sum[:s.n])
	a.emit(a.scr)
	a.st.Resends++
}

// emit sends a result frame, with a fresh ICRC and by its destination
// MAC, unless a bug says otherwise.
func (a *netreduce) emit(f []byte) {
	if !parse(f, &a.view) {
		return
	}
	if a.bug != bugStaleICRC {
		setICRC(&a.view)
	}
	skew := 0
	if a.bug == bugWrongPort {
		skew = 1
	}
	a.out(f, skew)
}

// advance moves the safe release point to min(newest) - N + 1 and frees
// the rows of the messages it passes for the messages 2N later.
func (a *netreduce) advance() {
	if a.release != releaseSafe {
		return
	}
	low := a.conns[0].newest
	for _, c := range a.conns[1:] {
		low = min(low, c.newest)
	}
	if low < 0 {
		return
	}
	w := int64(a.window)
	to := low - w + 1
	for m := a.released; m < to && m < a.released+2*w; m++ {
		for i := range a.rows[m%(2*w)] {
			a.rows[m%(2*w)][i].reset()
		}
	}
	a.released = max(a.released, to)
}
