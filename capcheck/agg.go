package capcheck

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/inaemu/inaemu/emu/tensor"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
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

// linkHostMACs learns, for each link-tap interface, its host's MAC: the
// unicast address in the most frames there (every frame on a host's link
// is from or to it).
func linkHostMACs(recs []pcapio.Record, fs []checkFrame, link []bool) map[int][6]byte {
	count := map[int]map[[6]byte]int{}
	for i := range fs {
		ifc := fs[i].iface
		if ifc >= len(link) || !link[ifc] || len(recs[i].Data) < 12 {
			continue
		}
		if count[ifc] == nil {
			count[ifc] = map[[6]byte]int{}
		}
		for _, mac := range [][6]byte{[6]byte(recs[i].Data[0:6]), [6]byte(recs[i].Data[6:12])} {
			if mac[0]&1 == 0 {
				count[ifc][mac]++
			}
		}
	}
	host := map[int][6]byte{}
	for ifc, m := range count {
		host[ifc] = mostCommonMAC(m)
	}
	return host
}

// checkAggregation applies agg-sum. hostLink marks the A-B and B-A
// interfaces of host links, whose side (sideIn or sideOut) is in ifaceSide.
func checkAggregation(recs []pcapio.Record, fs []checkFrame, names []string, ifaceSide []uint8, hostLink []bool, linkTaps bool, dt tensor.DType, tag uint32, rep *Report, report func(rule string, f *checkFrame, detail string)) {
	side := make([]uint8, len(names))
	link := make([]bool, len(names))
	any := false
	for i, n := range names {
		switch {
		case strings.HasSuffix(n, "-in"):
			side[i], any = sideIn, true
		case strings.HasSuffix(n, "-out"):
			side[i] = sideOut
		case hostLink[i]:
			side[i] = ifaceSide[i]
			any = any || side[i] == sideIn
		case ifaceSide[i] == sideFwd || ifaceSide[i] == sideRev:
			// A link between switches: neither contributions reaching an
			// aggregating switch from a host nor results on their way to one.
		case isLinkTap(n, linkTaps):
			link[i], any = true, true
		}
	}
	if !any {
		return
	}
	// On a link tap a frame's side is its direction: from the host to the
	// switch, or from the switch to the host.
	hostMAC := linkHostMACs(recs, fs, link)
	frameSide := func(i int) uint8 {
		f := &fs[i]
		if f.iface >= len(side) {
			return sideTap
		}
		if !link[f.iface] {
			return side[f.iface]
		}
		mac, d := hostMAC[f.iface], recs[i].Data
		switch {
		case [6]byte(d[6:12]) == mac:
			return sideIn
		case [6]byte(d[0:6]) == mac:
			return sideOut
		}
		return sideTap
	}
	usable := func(i int) bool {
		f := &fs[i]
		return f.class == fcRequest && f.icrcOK && !f.ghost && !f.snapped && isWriteData(f.op) && frameSide(i) != sideTap
	}
	var v frames.View
	// Ring sizes: the highest rank seen on a ring's INA headers, plus one.
	ringH := map[uint8]int{}
	for i := range fs {
		if !usable(i) || frameSide(i) != sideIn || v.Parse(recs[i].Data) != nil {
			continue
		}
		if h := inaOf(&v, tag); h != nil {
			ringH[h.RingID()] = max(ringH[h.RingID()], int(h.Rank())+1)
		}
	}
	if len(ringH) == 0 {
		return
	}
	conns := map[checkStreamKey]*aggConn{}
	contrib := map[aggKey][][]byte{}
	verified := map[aggKey]bool{}
	// In time order: a capture of several interfaces (dumpcap's) need not
	// interleave them exactly, and a result must come after its
	// contributions.
	order := make([]int, len(fs))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return fs[order[a]].ts < fs[order[b]].ts })
	for _, i := range order {
		f := &fs[i]
		if !usable(i) || v.Parse(recs[i].Data) != nil {
			continue
		}
		k := f.key()
		conn := conns[k]
		pay := v.Payload()
		if frameSide(i) == sideIn {
			var m aggMsg
			var off int
			if h := inaOf(&v, tag); h != nil {
				if conn == nil {
					conn = &aggConn{ring: h.RingID(), rank: h.Rank(), cur: int64(h.MsgID())}
					conns[k] = conn
				} else if conn.ring != h.RingID() || conn.rank != h.Rank() {
					continue // the switch refuses a connection changing ring or rank
				}
				id := conn.cur + int64(int8(h.MsgID()-uint8(conn.cur)))
				conn.cur = max(conn.cur, id)
				found := false
				for j := len(conn.msgs) - 1; j >= 0 && j >= len(conn.msgs)-maxAggSearch; j-- {
					if conn.msgs[j].id == id {
						m, found = conn.msgs[j], true
						break
					}
				}
				if !found {
					m = aggMsg{id: id, psn0: f.psn, n: max(int(h.MsgLen()), 1)}
					conn.msgs = append(conn.msgs, m)
				}
				if m.psn0 != f.psn {
					continue
				}
				pay = pay[wire.INALen:]
			} else {
				if conn == nil || f.op.IsFirst() {
					continue
				}
				var ok bool
				if m, off, ok = conn.find(f.psn); !ok || off == 0 {
					continue
				}
			}
			ak := aggKey{conn.ring, m.id, off}
			cs := contrib[ak]
			for len(cs) <= int(conn.rank) {
				cs = append(cs, nil)
			}
			cs[conn.rank] = pay
			contrib[ak] = cs
			continue
		}
		// A frame leaving the switch: a result if its connection is known.
		if conn == nil {
			continue
		}
		m, off, ok := conn.find(f.psn)
		if !ok {
			rep.AggUnchecked++
			continue
		}
		if off == 0 {
			if !hasTag(pay, tag) {
				rep.AggUnchecked++
				continue
			}
			pay = pay[wire.INALen:]
		}
		ak := aggKey{conn.ring, m.id, off}
		cs := contrib[ak]
		H := ringH[conn.ring]
		complete := len(cs) >= H
		for r := 0; complete && r < H; r++ {
			complete = cs[r] != nil && len(cs[r]) == len(cs[0])
		}
		if !complete || len(cs[0])%dt.Size() != 0 {
			rep.AggUnchecked++
			continue
		}
		sum := append([]byte(nil), cs[0]...)
		for r := 1; r < H; r++ {
			tensor.Add(dt, sum, cs[r])
		}
		switch {
		case bytes.Equal(sum, pay):
			rep.AggChecked++
			verified[ak] = true
		case verified[ak] && int(conn.rank) < len(cs) && bytes.Equal(pay, cs[conn.rank]):
			rep.AggForwarded++
		case len(pay) != len(sum):
			report(RuleAggSum, f, fmt.Sprintf("result carries %d data bytes, the %d contributions of ring %d message %d packet %d carry %d", len(pay), H, conn.ring, m.id, off, len(sum)))
		default:
			el := 0
			for el*dt.Size() < len(sum) && bytes.Equal(sum[el*dt.Size():(el+1)*dt.Size()], pay[el*dt.Size():(el+1)*dt.Size()]) {
				el++
			}
			report(RuleAggSum, f, fmt.Sprintf("result is not the rank-order %s sum of the %d contributions (ring %d, message %d, packet %d): element %d is %s, want %s",
				dt, H, conn.ring, m.id, off, el, tensor.Value(dt, pay, el), tensor.Value(dt, sum, el)))
		}
	}
}

// hasTag reports whether payload starts with an INA header carrying tag.
func hasTag(payload []byte, tag uint32) bool {
	return len(payload) >= wire.INALen && wire.INA(payload).Tag() == tag
}

// inaOf is the INA header of an RDMA WRITE FIRST or ONLY whose payload
// starts with tag (a switch may use another InetTag than inaemu's), else
// nil.
func inaOf(v *frames.View, tag uint32) wire.INA {
	op := v.Opcode()
	if !op.IsWrite() || !op.IsFirst() || !hasTag(v.Payload(), tag) {
		return nil
	}
	return wire.INA(v.Payload()[:wire.INALen:wire.INALen])
}
