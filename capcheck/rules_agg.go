package capcheck

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"

	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

// The agg-sum rule: NetReduce results leaving the switch (X-out) against
// the contributions that reached it (X-in). See Check.

type aggMsg struct {
	id   int64 // MsgID extended past 8 bits
	psn0 uint32
	n    int // packets (the header's MsgLen)
}

type aggConn struct {
	ring, rank uint8
	cur        int64
	msgs       []aggMsg
}

type aggKey struct {
	ring uint8
	msg  int64
	off  int
}

// maxAggSearch bounds how many recent messages a PSN is looked up in.
const maxAggSearch = 1024

func (c *aggConn) find(psn uint32) (aggMsg, int, bool) {
	for i, n := len(c.msgs)-1, 0; i >= 0 && n < maxAggSearch; i, n = i-1, n+1 {
		m := c.msgs[i]
		if d := int(wire.PSNDiff(psn, m.psn0)); d >= 0 && d < m.n {
			return m, d, true
		}
	}
	return aggMsg{}, 0, false
}

// place finds the message a first packet (WRITE FIRST or ONLY with an
// INA header: MsgID, MsgLen, at PSN psn) starts, or records a new one.
// The MsgID is 8 bits: it is extended to the message nearest the newest
// seen, and the PSN settles what the id cannot: a first packet whose id
// reads newer than the newest message but whose PSN is behind that
// message's start is a late copy of an old message (delayed or resent
// past a MsgID wrap), found by its PSN, never a new message.
// ok is false for a first packet that starts no known message and no new
// one.
func (c *aggConn) place(msgID uint8, msgLen int, psn uint32) (aggMsg, bool) {
	id := c.cur + int64(int8(msgID-uint8(c.cur)))
	byPSN := func() (aggMsg, bool) {
		for j := len(c.msgs) - 1; j >= 0 && j >= len(c.msgs)-maxAggSearch; j-- {
			if m := c.msgs[j]; m.psn0 == psn && uint8(m.id) == msgID {
				return m, true
			}
		}
		return aggMsg{}, false
	}
	for j := len(c.msgs) - 1; j >= 0 && j >= len(c.msgs)-maxAggSearch; j-- {
		if m := c.msgs[j]; m.id == id {
			if m.psn0 != psn {
				return byPSN()
			}
			return m, true
		}
	}
	if k := len(c.msgs); k > 0 && id > c.msgs[k-1].id && wire.PSNDiff(psn, c.msgs[k-1].psn0) < 0 {
		return byPSN() // the id says newer, the PSN older: a wrapped id
	}
	m := aggMsg{id: id, psn0: psn, n: max(msgLen, 1)}
	c.msgs = append(c.msgs, m)
	if len(c.msgs) > 2*maxAggSearch {
		c.msgs = append(c.msgs[:0], c.msgs[len(c.msgs)-maxAggSearch:]...)
	}
	c.cur = max(c.cur, id)
	return m, true
}

func isWriteData(op wire.Opcode) bool {
	switch op {
	case wire.WriteFirst, wire.WriteMiddle, wire.WriteLast, wire.WriteLastWithImm, wire.WriteOnly, wire.WriteOnlyWithImm:
		return true
	}
	return false
}

// isLinkTap reports whether an interface is the link of one host: a
// bridge inaemu's TAP backend made (PREFIX-brN), or any single interface
// when the caller says so.
func isLinkTap(name string, all bool) bool {
	if all {
		return true
	}
	i := strings.LastIndex(name, "-br")
	return i > 0 && len(name) > i+3 && strings.Trim(name[i+3:], "0123456789") == ""
}

// tapBridgeSet reports whether names are the bridges `inaemu tap up`
// makes for one topology, all of them (a capture on each, tshark -i
// PREFIX-brR ...): PREFIX-br0 .. PREFIX-br(k-1) for k names, one PREFIX,
// each once, in any order. Interfaces merely named like bridges (a
// user's ovs-br1, or a set with a gap) are not.
func tapBridgeSet(names []string) bool {
	prefix := ""
	seen := make([]bool, len(names))
	for i, n := range names {
		j := strings.LastIndex(n, "-br")
		if j <= 0 || i > 0 && n[:j] != prefix {
			return false
		}
		prefix = n[:j]
		r, err := strconv.Atoi(n[j+3:])
		if err != nil || r < 0 || r >= len(names) || seen[r] || strconv.Itoa(r) != n[j+3:] {
			return false
		}
		seen[r] = true
	}
	return len(names) > 0
}

// linkHostMACs learns, for each link-tap interface, its host's MAC: the
// unicast address in the most frames there (every frame on a host's link
// is from or to it), preferring an address seen on no other link (the
// switch's is on all of them).
func linkHostMACs(fs *frameStore, link []bool) map[int][6]byte {
	count := map[int]map[[6]byte]int{}
	for i := range fs.len() {
		ifc := fs.at(i).iface
		if ifc >= len(link) || !link[ifc] || !fs.at(i).hasMAC {
			continue
		}
		if count[ifc] == nil {
			count[ifc] = map[[6]byte]int{}
		}
		for _, mac := range [][6]byte{fs.at(i).dstMAC, fs.at(i).srcMAC} {
			if hostAddr(mac) {
				count[ifc][mac]++
			}
		}
	}
	links := map[[6]byte]int{} // the link-tap interfaces each address is seen on
	for _, m := range count {
		for mac := range m {
			links[mac]++
		}
	}
	host := map[int][6]byte{}
	for ifc, m := range count {
		own := map[[6]byte]int{}
		for mac, k := range m {
			if links[mac] == 1 {
				own[mac] = k
			}
		}
		if len(own) == 0 {
			own = m
		}
		host[ifc] = mostCommonMAC(own)
	}
	return host
}

// hostSides says which way a frame crosses the switch, for the rules
// that judge what reaches a switch against what leaves it (agg-sum, the
// inaps family): sideIn (X-in, the host's side of its link) or sideOut
// (X-out, toward the host); sideTap when neither can be told, and a link
// between switches keeps its sideFwd or sideRev.
type hostSides struct {
	fs      *frameStore
	side    []uint8
	link    []bool
	hostMAC map[int][6]byte
	// any: some interface carries frames toward a switch.
	any bool
}

// newHostSides reads the interfaces' sides: by name (X-in, X-out), as
// orientHostLinks settled them (a host's A-B/B-A link), and on a link
// tap (one interface carrying both directions of one host's link, a TAP
// backend bridge PREFIX-brN or any single interface with linkTaps) per
// frame, by the host's MAC (the unicast address in the most frames
// there): from it reaches the switch, to it leaves the switch.
func newHostSides(fs *frameStore, names []string, ifaceSide []uint8, hostLink []bool, linkTaps bool) *hostSides {
	h := &hostSides{fs: fs, side: make([]uint8, len(names)), link: make([]bool, len(names))}
	side, link := h.side, h.link
	if allNames(names, faultwireName) {
		// faultwire's capture of a device under test (inaemu run --dut,
		// inaemu wire): the device is judged where it stands, on its own
		// side of the wire: wR-swR is what reached it, swR-wR what it
		// sent. The host side (hR-wR, wR-hR) shows the same frames before
		// and after the wire's faults, not the device's inputs and
		// outputs: a frame the wire dropped on its way in appears there
		// and never reached the device.
		for i, n := range names {
			switch {
			case strings.HasPrefix(n, "w") && strings.Contains(n, "-sw"):
				side[i], h.any = sideIn, true
			case strings.HasPrefix(n, "sw"):
				side[i] = sideOut
			}
		}
		return h
	}
	for i, n := range names {
		switch {
		case strings.HasSuffix(n, "-in"):
			side[i], h.any = sideIn, true
		case strings.HasSuffix(n, "-out"):
			side[i] = sideOut
		case hostLink[i]:
			side[i] = ifaceSide[i]
			h.any = h.any || side[i] == sideIn
		case ifaceSide[i] == sideFwd || ifaceSide[i] == sideRev:
			// A link between switches: neither contributions reaching an
			// aggregating switch from a host nor results on their way to one.
		case isLinkTap(n, linkTaps):
			link[i], h.any = true, true
		}
	}
	if h.any {
		h.hostMAC = linkHostMACs(fs, link)
	}
	return h
}

// of is frame i's side.
func (h *hostSides) of(i int) uint8 {
	f := h.fs.at(i)
	if f.iface >= len(h.side) {
		return sideTap
	}
	if !h.link[f.iface] {
		return h.side[f.iface]
	}
	switch mac := h.hostMAC[f.iface]; {
	case f.srcMAC == mac:
		return sideIn
	case f.dstMAC == mac, f.dstMAC == [6]byte{} && f.srcMAC != [6]byte{}:
		// to the host, or, with no destination recorded (a cooked
		// capture), from the other end of its link
		return sideOut
	}
	return sideTap
}

// aggReorder is how many frames agg-sum holds back to put a capture of
// several interfaces in time order (dumpcap interleaves them only
// roughly) while it reads the payloads as a stream.
const aggReorder = 4096

// aggKeep is how many messages behind a ring's newest agg-sum keeps the
// contributions of: twice the largest NetReduce window (32 messages in
// flight per worker). A result or late duplicate of an older message is
// counted as unchecked.
const aggKeep = 64

// checkAggregation applies agg-sum (see Check), reading the payloads
// again in capture order (payloads), in time order within aggReorder
// frames; its memory is bounded by the messages in flight.
func checkAggregation(payloads func(yield func(i int, data []byte) bool) error, fs *frameStore, names []string, ifaceSide []uint8, hostLink []bool, linkTaps bool, dt tensor.DType, tag uint32, hdr int, trees map[uint8][]uint64, rep *Report, report func(rule string, f *checkFrame, detail string)) error {
	sides := newHostSides(fs, names, ifaceSide, hostLink, linkTaps)
	if !sides.any {
		return nil
	}
	frameSide := sides.of
	usable := func(i int) bool {
		f := fs.at(i)
		return f.class == fcRequest && f.icrcOK && !f.ghost && !f.snapped && !f.forged && isWriteData(f.op) && frameSide(i) != sideTap
	}
	// Ring sizes: the highest rank seen on a ring's INA headers, plus
	// one. And whether the usable frames are in time order already (one
	// writer, as the emulator's): such a capture is judged as it is read,
	// a frame's bytes copied only when it is kept (a contribution);
	// otherwise frames are held back, copied, and judged in time order.
	ringH := map[uint8]int{}
	ordered, last := true, int64(0)
	for i := range fs.len() {
		if !usable(i) {
			continue
		}
		f := fs.at(i)
		if f.hasINA && f.inaTag == tag && frameSide(i) == sideIn {
			ringH[f.inaRing] = max(ringH[f.inaRing], int(f.inaRank)+1)
		}
		ordered, last = ordered && f.ts >= last, f.ts
	}
	if len(ringH) == 0 {
		return nil
	}
	a := &aggregator{fs: fs, dt: dt, tag: tag, hdr: hdr, rep: rep, report: report, ringH: ringH, trees: trees,
		conns: map[checkStreamKey]*aggConn{}, pkts: map[aggKey]*aggPacket{}, changed: -1}
	var held aggHeap
	// A held frame's bytes come from a.free and go back to it once
	// judged, or, for a contribution, once replaced or forgotten.
	judge := func() {
		fr := held.pop()
		if !a.frame(fr) {
			a.free = append(a.free, fr.data[:0])
		}
	}
	err := payloads(func(i int, data []byte) bool {
		if i >= fs.len() || !usable(i) {
			return true
		}
		if f := fs.at(i); int(f.payOff)+int(f.payLen) > len(data) {
			a.changed = i
			return false
		}
		if ordered {
			a.frame(aggFrame{fs.at(i).ts, i, frameSide(i), data, true})
			return true
		}
		held.push(aggFrame{fs.at(i).ts, i, frameSide(i), append(a.buffer(len(data)), data...), false})
		if held.Len() > aggReorder {
			judge()
		}
		return true
	})
	for held.Len() > 0 {
		judge()
	}
	if err == nil && a.changed >= 0 {
		err = fmt.Errorf("frame %d is shorter than when first read: the capture changed while it was checked", a.changed+1)
	}
	return err
}

// aggFrame is a usable frame: held back for time order, or borrowed
// (its bytes are the reader's until the next frame).
type aggFrame struct {
	ts       int64
	i        int
	side     uint8
	data     []byte
	borrowed bool
}

// buffer returns an empty buffer with room for n bytes, from a.free when
// one there is large enough.
func (a *aggregator) buffer(n int) []byte {
	var buf []byte
	if k := len(a.free); k > 0 {
		buf, a.free = a.free[k-1], a.free[:k-1]
	}
	if cap(buf) < n {
		buf = make([]byte, 0, (n+127)&^127) // a frame of the same MTU fits later
	}
	return buf
}

// aggHeap is a min-heap of held frames by (time, index), typed so that
// holding a frame neither boxes it nor calls through an interface.
type aggHeap []aggFrame

func (h aggHeap) Len() int { return len(h) }

func (h aggHeap) less(a, b int) bool {
	return h[a].ts < h[b].ts || (h[a].ts == h[b].ts && h[a].i < h[b].i)
}

func (h *aggHeap) push(x aggFrame) {
	*h = append(*h, x)
	s := *h
	for j := len(s) - 1; j > 0; {
		parent := (j - 1) / 2
		if !s.less(j, parent) {
			break
		}
		s[j], s[parent] = s[parent], s[j]
		j = parent
	}
}

func (h *aggHeap) pop() aggFrame {
	s := *h
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	s[last] = aggFrame{}
	s = s[:last]
	for j := 0; ; {
		c := 2*j + 1
		if c >= len(s) {
			break
		}
		if c+1 < len(s) && s.less(c+1, c) {
			c++
		}
		if !s.less(c, j) {
			break
		}
		s[j], s[c] = s[c], s[j]
		j = c
	}
	*h = s
	return top
}

// aggregator holds agg-sum's state: the connections, and the
// contributions of the messages in flight.
type aggregator struct {
	fs     *frameStore
	dt     tensor.DType
	tag    uint32
	hdr    int // header bytes before a WRITE FIRST's data (aggHeaderLen)
	rep    *Report
	report func(rule string, f *checkFrame, detail string)
	ringH  map[uint8]int
	trees  map[uint8][]uint64 // multi-rack rings: each leaf's ranks, in the tree's order
	part   []byte             // scratch: a leaf's partial
	conns  map[checkStreamKey]*aggConn
	pkts   map[aggKey]*aggPacket
	free   [][]byte     // frame buffers to reuse
	newest [256]int64   // per ring, the newest message id
	spare  []*aggPacket // evicted packets, to reuse with their buffers
	n      int
	// changed is the first frame whose bytes no longer hold the payload
	// the first pass placed (-1: none).
	changed int
}

// frame judges or keeps one frame; kept says whether the aggregator
// holds on to fr.data (a contribution).
func (a *aggregator) frame(fr aggFrame) (kept bool) {
	f := a.fs.at(fr.i)
	if a.n++; a.n%(1<<12) == 0 {
		a.evict()
	}
	k := f.key()
	conn := a.conns[k]
	pay := fr.data[f.payOff : f.payOff+f.payLen]
	if fr.side == sideIn {
		var m aggMsg
		var off int
		if h := inaOf(f.op, pay, a.tag); h != nil {
			if conn == nil {
				conn = &aggConn{ring: h.RingID(), rank: h.Rank(), cur: int64(h.MsgID())}
				a.conns[k] = conn
			} else if conn.ring != h.RingID() || conn.rank != h.Rank() {
				return false // the switch refuses a connection changing ring or rank
			}
			var ok bool
			if m, ok = conn.place(h.MsgID(), int(h.MsgLen()), f.psn); !ok {
				return false
			}
			a.newest[conn.ring] = max(a.newest[conn.ring], conn.cur)
			if m.psn0 != f.psn || len(pay) < a.hdr {
				return false
			}
			pay = pay[a.hdr:]
		} else {
			if conn == nil || f.op.IsFirst() {
				return false
			}
			var ok bool
			if m, off, ok = conn.find(f.psn); !ok || off == 0 {
				return false
			}
		}
		ak := aggKey{conn.ring, m.id, off}
		p := a.pkts[ak]
		if p == nil {
			p = a.packet()
			a.pkts[ak] = p
		}
		for len(p.cs) <= int(conn.rank) {
			p.cs, p.bufs = append(p.cs, nil), append(p.bufs, nil)
		}
		if old := p.bufs[conn.rank]; old != nil {
			a.free = append(a.free, old[:0])
		}
		if fr.borrowed {
			start := int(f.payOff+f.payLen) - len(pay) // past the INA header, if any
			fr.data = append(a.buffer(len(fr.data)), fr.data...)
			pay = fr.data[start : f.payOff+f.payLen]
		}
		p.cs[conn.rank], p.bufs[conn.rank] = pay, fr.data
		p.summed = false
		return true
	}
	// A frame leaving the switch: a result if its connection is known.
	if conn == nil {
		return false
	}
	rep, dt := a.rep, a.dt
	m, off, ok := conn.find(f.psn)
	if !ok {
		rep.AggUnchecked++
		return false
	}
	if off == 0 {
		if !hasTag(pay, a.tag) || len(pay) < a.hdr {
			rep.AggUnchecked++
			return false
		}
		pay = pay[a.hdr:]
	}
	ak := aggKey{conn.ring, m.id, off}
	p := a.pkts[ak]
	var cs [][]byte
	if p != nil {
		cs = p.cs
	}
	H := a.ringH[conn.ring]
	complete := H > 0 && len(cs) >= H
	for r := 0; complete && r < H; r++ {
		complete = cs[r] != nil && len(cs[r]) == len(cs[0])
	}
	if !complete || len(cs[0])%dt.Size() != 0 {
		rep.AggUnchecked++
		return false
	}
	if !p.summed {
		a.sum(p, cs, H, a.trees[conn.ring])
		p.summed = true
	}
	sum := p.sum
	switch {
	case bytes.Equal(sum, pay):
		rep.AggChecked++
		p.verified = true
	case p.verified && int(conn.rank) < len(cs) && bytes.Equal(pay, cs[conn.rank]):
		rep.AggForwarded++
	case len(pay) != len(sum):
		a.report(RuleAggSum, f, fmt.Sprintf("result carries %d data bytes, the %d contributions of ring %d message %d packet %d carry %d", len(pay), H, conn.ring, m.id, off, len(sum)))
	default:
		order := "rank-order"
		if a.trees[conn.ring] != nil {
			order = "tree-order"
		}
		el := 0
		for el*dt.Size() < len(sum) && bytes.Equal(sum[el*dt.Size():(el+1)*dt.Size()], pay[el*dt.Size():(el+1)*dt.Size()]) {
			el++
		}
		a.report(RuleAggSum, f, fmt.Sprintf("result is not the %s %s sum of the %d contributions (ring %d, message %d, packet %d): element %d is %s, want %s",
			order, dt, H, conn.ring, m.id, off, el, tensor.Value(dt, pay, el), tensor.Value(dt, sum, el)))
	}
	return false
}

// sum forms p.sum from the H contributions cs: in rank order, or for a
// multi-rack ring in the tree's (each leaf's ranks in rank order, then
// the leaves' partials in child order).
func (a *aggregator) sum(p *aggPacket, cs [][]byte, H int, tree []uint64) {
	if tree == nil {
		p.sum = append(p.sum[:0], cs[0]...)
		for r := 1; r < H; r++ {
			tensor.Add(a.dt, p.sum, cs[r])
		}
		return
	}
	for gi, ranks := range tree {
		a.part = a.part[:0]
		for r := 0; r < H; r++ {
			switch {
			case ranks&(1<<r) == 0:
			case len(a.part) == 0:
				a.part = append(a.part, cs[r]...)
			default:
				tensor.Add(a.dt, a.part, cs[r])
			}
		}
		if gi == 0 {
			p.sum = append(p.sum[:0], a.part...)
		} else {
			tensor.Add(a.dt, p.sum, a.part)
		}
	}
}

// aggPacket is what agg-sum holds of one packet of a message: each
// rank's contribution (a payload within a frame buffer from a.free) and
// their rank-order sum, cached (summed) because every rank's connection
// carries the same result, and redone only when a contribution changes.
type aggPacket struct {
	cs       [][]byte
	bufs     [][]byte // the frames cs are in
	sum      []byte
	summed   bool
	verified bool // some result matched the sum
}

// evict forgets the contributions of messages aggKeep behind their
// ring's newest: their results were judged long ago.
func (a *aggregator) evict() {
	for k, p := range a.pkts {
		if k.msg < a.newest[k.ring]-aggKeep {
			for _, b := range p.bufs {
				if b != nil {
					a.free = append(a.free, b[:0])
				}
			}
			delete(a.pkts, k)
			a.spare = append(a.spare, p)
		}
	}
}

// packet returns an empty aggPacket, an evicted one when there is one
// (with its slices' room, so a ring's packets stop allocating).
func (a *aggregator) packet() *aggPacket {
	k := len(a.spare)
	if k == 0 {
		return &aggPacket{}
	}
	p := a.spare[k-1]
	a.spare = a.spare[:k-1]
	clear(p.cs)
	clear(p.bufs)
	*p = aggPacket{cs: p.cs[:0], bufs: p.bufs[:0], sum: p.sum[:0]}
	return p
}

// hasTag reports whether payload starts with an INA header carrying tag.
func hasTag(payload []byte, tag uint32) bool {
	return len(payload) >= wire.INALen && wire.INA(payload).Tag() == tag
}

// inaOf is the INA header of an RDMA WRITE FIRST or ONLY whose payload
// starts with tag (a switch may use another InetTag than inaemu's), else
// nil.
func inaOf(op wire.Opcode, payload []byte, tag uint32) wire.INA {
	if !op.IsWrite() || !op.IsFirst() || !hasTag(payload, tag) {
		return nil
	}
	return wire.INA(payload[:wire.INALen:wire.INALen])
}

// RuleAggSum names a NetReduce result that is not the sum of its
// contributions.
const RuleAggSum = "agg-sum"

func aggSummary(r *Report) string {
	if r.AggChecked+r.AggUnchecked+r.AggForwarded == 0 {
		return ""
	}
	order := "rank-order"
	if r.AggTreeOrder {
		order = "reduction-order (rank order in one switch, tree order across racks)"
	}
	return fmt.Sprintf("%d results equal the %s sum, %d unchecked (contributions not all seen), %d stale duplicates forwarded",
		r.AggChecked, order, r.AggUnchecked, r.AggForwarded)
}
