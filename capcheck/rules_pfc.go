package capcheck

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/inaemu/inaemu/internal/pcapio"
)

// The pfc family: MAC Control frames (EtherType 0x8808) that pause a
// link's transmitter, IEEE 802.3x PAUSE and IEEE 802.1Qbb priority-based
// flow control (PFC), judged on their own (pfc-format), against the frames
// the paused transmitter sent (pfc-paused-send) and, at the end of the
// capture, as a cycle of pauses between switches (pfc-deadlock).
//
// A PFC frame as captured (no FCS), IEEE 802.1Qbb clause 36 / IEEE 802.3
// Annex 31D:
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        destination 01-80-C2-00-00-01, source (12 bytes)       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     EtherType 0x8808          |        opcode 0x0101          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| reserved (0)  |e7 ... e0 (class-enable vector)| time[0]       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  ... time[1] to time[7], 2 bytes each (pause quanta)          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|  zero padding to 60 bytes (64 with the FCS: minFrameSize)     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A PAUSE frame (802.3 Annex 31B) has opcode 0x0001 and one pause_time
// after it, for every priority at once. One quantum is 512 bit times at
// the link's rate; a time of 0 resumes (XON). Every fact here is cited in
// docs/congestion.md's "Checks" section.

// Rule names of the pfc family.
const (
	RulePFCFormat     = "pfc-format"
	RulePFCPausedSend = "pfc-paused-send"
	RulePFCDeadlock   = "pfc-deadlock"
)

// MAC Control numbers (IEEE 802.3 clause 31, Annexes 31A, 31B, 31D).
const (
	etherTypeMACControl = 0x8808
	macCtlPause         = 0x0001 // 802.3x PAUSE
	macCtlPFC           = 0x0101 // 802.1Qbb PFC
	macCtlLen           = 60     // minFrameSize less the 4-byte FCS
	pauseQuantumBits    = 512
)

// pfcAddress is the MAC Control multicast address PAUSE and PFC frames
// are sent to (802.3 Annex 31B; 802.1Qbb requires it for PFC).
var pfcAddress = [6]byte{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01}

// DefaultDeadlockAfter is CheckOptions.DeadlockAfter's default: how long
// every direction of a cycle must have been paused, together, at the end
// of a capture for pfc-deadlock (far above a congested link's pauses,
// which a draining queue lifts within microseconds).
const DefaultDeadlockAfter = time.Millisecond

// macCtl is a MAC Control frame: its number, opcode and, for PAUSE and
// PFC, what it pauses (enable: priorities; quanta per priority). bad says
// what is wrong with its format ("" for nothing); a frame that is bad,
// corrupted by a fault or not a PAUSE or PFC frame pauses nothing the
// checker can be sure of (pauseUncertain).
type macCtl struct {
	frame  int
	opcode uint16
	enable uint8
	quanta [8]uint16
	bad    string
}

// isPause: a well-formed PAUSE or PFC frame, which the receiving MAC acts
// on.
func (m *macCtl) isPause() bool {
	return m.bad == "" && (m.opcode == macCtlPause || m.opcode == macCtlPFC)
}

// parseMACControl reads a frame whose EtherType (behind its tags) is
// 0x8808; ok is false for any other frame. It never allocates.
func parseMACControl(b []byte, frame int) (m macCtl, ok bool) {
	off := afterTags(b)
	if off+2 > len(b) || binary.BigEndian.Uint16(b[off:]) != etherTypeMACControl {
		return m, false
	}
	m.frame = frame
	if off != 12 {
		// The MAC Control sublayer recognises 0x8808 right after the
		// source address only: a tagged one is data to the receiver.
		m.bad = "a VLAN-tagged MAC Control frame: the receiving MAC acts only on Length/Type 0x8808 right after the source address (IEEE 802.3 31.4), so it pauses nothing"
		return m, true
	}
	if len(b) < 16 {
		m.bad = fmt.Sprintf("a MAC Control frame of %d bytes has no opcode", len(b))
		return m, true
	}
	m.opcode = binary.BigEndian.Uint16(b[14:])
	dstPFC := [6]byte(b[0:6]) == pfcAddress
	switch m.opcode {
	case macCtlPause:
		if len(b) >= 18 {
			q := binary.BigEndian.Uint16(b[16:])
			m.enable = 0xFF
			for i := range m.quanta {
				m.quanta[i] = q
			}
		}
	case macCtlPFC:
		if len(b) >= 34 {
			if b[16] != 0 {
				m.bad = fmt.Sprintf("PFC class-enable vector 0x%02x%02x: its high octet is reserved and transmitted as zero (IEEE 802.1Qbb; Wireshark: \"8 MSbs of ENBV must be 0\")", b[16], b[17])
			}
			m.enable = b[17]
			for i := range m.quanta {
				m.quanta[i] = binary.BigEndian.Uint16(b[18+2*i:])
			}
		}
		if !dstPFC && m.bad == "" {
			m.bad = fmt.Sprintf("PFC frame to %s: PFC frames go to 01:80:c2:00:00:01 (IEEE 802.1Qbb; Wireshark: \"Destination address must be 01-80-C2-00-00-01\")", macText(b[0:6]))
		}
	default:
		if dstPFC {
			m.bad = fmt.Sprintf("MAC Control opcode 0x%04x to 01:80:c2:00:00:01 is neither PAUSE (0x0001) nor PFC (0x0101)", m.opcode)
		}
		return m, true
	}
	if n := len(b); n != macCtlLen && n != macCtlLen+4 && m.bad == "" {
		m.bad = fmt.Sprintf("a %s frame of %d bytes: MAC Control frames are minFrameSize, 64 bytes with the FCS (60 captured without it; IEEE 802.3 31.4)", opName(m.opcode), n)
	}
	return m, true
}

func opName(op uint16) string {
	if op == macCtlPFC {
		return "PFC"
	}
	return "PAUSE"
}

func macText(b []byte) string {
	return fmt.Sprintf("%02x:%02x:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3], b[4], b[5])
}

// framePriority is the priority (0..7) a frame is queued and paused at,
// as a data-centre switch classifies it: the DSCP's top three bits (IPv4
// ToS >> 5, IPv6 traffic class >> 5, RoCEv1's GRH traffic class >> 5),
// else the outer VLAN tag's PCP, else 0; ip says the frame is IP or
// RoCEv1 (the traffic PFC governs; ARP and LLDP are left alone), ce that
// its IP ECN field is CE (11).
func framePriority(b []byte) (prio uint8, ip, ce bool) {
	if len(b) >= 16 && binary.BigEndian.Uint16(b[12:]) == 0x8100 || len(b) >= 16 && binary.BigEndian.Uint16(b[12:]) == 0x88A8 {
		prio = b[14] >> 5
	}
	off := afterTags(b)
	if off+2+2 > len(b) {
		return prio, false, false
	}
	l3 := b[off+2:]
	switch binary.BigEndian.Uint16(b[off:]) {
	case 0x0800:
		if l3[0]>>4 == 4 {
			return l3[1] >> 5, true, l3[1]&3 == 3
		}
	case 0x86DD:
		if l3[0]>>4 == 6 {
			tc := l3[0]<<4 | l3[1]>>4
			return tc >> 5, true, tc&3 == 3
		}
	case 0x8915: // RoCEv1: the GRH's traffic class; no ECN
		tc := l3[0]<<4 | l3[1]>>4
		return tc >> 5, true, false
	}
	return prio, false, false
}

// pauseSpan is a stretch of time a direction's transmitter was paused for
// one priority without a break: from the arrival of the pause frame
// (frame) that started it to its expiry, a resume, or a frame that may
// have ended it.
type pauseSpan struct {
	on, off int64
	frame   int // the pause frame that started it
	last    int // the latest pause frame that refreshed it
}

// pfcState is what the pfc family found, per interface and priority: the
// spans its transmitter was paused by frames captured on the reverse
// interface.
type pfcState struct {
	spans [][8][]pauseSpan // by the paused direction's interface
	rev   []int            // the interface of the reverse direction, -1 none
	rate  []float64        // bits/s of an interface, 0 unknown
	links []linkName       // each interface's link and side by its name
}

// linkRate is interface i's rate in bits per second (0: unknown):
// CheckOptions.LinkRates by its name, then by its link's, then LinkRate,
// then what the capture states (InterfaceRates).
func (c *checker) linkRate(i int, l linkName) float64 {
	if r, ok := c.opt.LinkRates[c.ifaceNames[i]]; ok {
		return r
	}
	if r, ok := c.opt.LinkRates[l.vp]; ok && l.vp != "" {
		return r
	}
	if c.opt.LinkRate > 0 {
		return c.opt.LinkRate
	}
	if i < len(c.opt.InterfaceRates) && c.opt.InterfaceRates[i] > 0 {
		return c.opt.InterfaceRates[i]
	}
	return 0
}

// interfaceLinks are a capture's statements of its interfaces' links as
// CheckOptions.InterfaceRates and InterfaceDelays (nil, nil for none).
func interfaceLinks(ifaces []pcapio.Interface) (rates []float64, delays []time.Duration) {
	stated := false
	rates, delays = make([]float64, len(ifaces)), make([]time.Duration, len(ifaces))
	for i, in := range ifaces {
		rates[i], delays[i] = float64(in.Speed), -1
		if in.HasDelay {
			delays[i] = in.Delay
		}
		stated = stated || in.Speed != 0 || in.HasDelay
	}
	if !stated {
		return nil, nil
	}
	return rates, delays
}

// ifaceLinks places every interface on its link by its name (a zero
// linkName for none): unlike the vantage points, also the directions
// that carried no frame (a paused one may have sent nothing).
func (c *checker) ifaceLinks() []linkName {
	byName := pairLinkNames(c.ifaceNames)
	out := make([]linkName, len(c.ifaceNames))
	for i, n := range c.ifaceNames {
		out[i] = byName[n]
	}
	return out
}

// reverseIfaces pairs each interface with the other direction of its
// link (X-in with X-out, A-B with B-A), -1 when that was not captured.
func reverseIfaces(links []linkName) []int {
	rev := make([]int, len(links))
	for i := range rev {
		rev[i] = -1
	}
	for i, a := range links {
		for j, b := range links {
			if i != j && a.vp != "" && a.vp == b.vp && a.side != b.side {
				rev[i] = j
			}
		}
	}
	return rev
}

// pfcRules applies the pfc family to the MAC Control frames parsing
// found (ctl, in capture order).
func (c *checker) pfcRules(ctl []macCtl) {
	if len(ctl) == 0 {
		return
	}
	rep := c.rep
	links := c.ifaceLinks()
	st := &pfcState{spans: make([][8][]pauseSpan, len(c.ifaceNames)), rev: reverseIfaces(links), rate: make([]float64, len(c.ifaceNames)), links: links}
	for i := range st.rate {
		st.rate[i] = c.linkRate(i, links[i])
	}
	type miss struct{ noRate, noRev int }
	missing := make([]miss, len(c.ifaceNames))
	for k := range ctl {
		m := &ctl[k]
		f := c.fs.at(m.frame)
		if f.ghost {
			continue // never arrived: paused nothing
		}
		rep.PFCFrames++
		if m.bad != "" && !f.injected {
			c.violation(RulePFCFormat, f, "%s", m.bad)
		}
		paused := st.rev[f.iface]
		if paused < 0 {
			if m.isPause() {
				missing[f.iface].noRev++
			}
			continue
		}
		rate := st.rate[paused]
		if rate <= 0 {
			if m.isPause() {
				missing[f.iface].noRate++
			}
			continue
		}
		if !m.isPause() || f.injected {
			// A frame the receiver may or may not have acted on (a
			// malformed one, one a fault corrupted, an opcode that is no
			// pause) may have been a resume: what was paused is no
			// longer known to be.
			for p := range 8 {
				st.end(paused, p, f.ts)
			}
			continue
		}
		rep.PFCPauses++
		for p := range 8 {
			if m.enable&(1<<p) == 0 {
				continue
			}
			st.pause(paused, p, f.ts, m.frame, quantaDuration(m.quanta[p], rate))
		}
	}
	for i, ms := range missing {
		name := c.ifaceNames[i]
		if ms.noRev > 0 {
			rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("%s: %s not judged by pfc-paused-send or pfc-deadlock: the direction they pause was not captured (or not named as its link's other direction)", name, plural(ms.noRev, "PAUSE/PFC frame")))
		}
		if ms.noRate > 0 {
			rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("%s: %s not judged by pfc-paused-send or pfc-deadlock: the link's rate is unknown (the capture states no if_speed for it), so are the pauses' lengths (give --link-rate)", name, plural(ms.noRate, "PAUSE/PFC frame")))
		}
	}
	c.pausedSend(st)
	c.deadlocks(st)
}

// quantaDuration is q pause quanta at rate bits/s, in ns, rounded up.
func quantaDuration(q uint16, rate float64) int64 {
	return int64(math.Ceil(float64(q) * pauseQuantumBits * 1e9 / rate))
}

// pause applies a pause (d > 0) or resume (d == 0) of priority p arriving
// at time t at interface i's transmitter: the timer is loaded with the
// new time, whatever was left of the old one (IEEE 802.1Qbb).
func (st *pfcState) pause(i, p int, t int64, frame int, d int64) {
	ss := st.spans[i][p]
	if n := len(ss); n > 0 && ss[n-1].off > t {
		ss[n-1].off = t + d
		if d > 0 {
			ss[n-1].last = frame
		}
		return
	}
	if d > 0 {
		st.spans[i][p] = append(ss, pauseSpan{on: t, off: t + d, frame: frame, last: frame})
	}
}

// end cuts a running pause of priority p at t (nothing is known after).
func (st *pfcState) end(i, p int, t int64) {
	if ss := st.spans[i][p]; len(ss) > 0 && ss[len(ss)-1].off > t {
		ss[len(ss)-1].off = t
	}
}

// linkDelay is the tolerance pfc-paused-send allows between a pause's
// capture and the transmitter's stopping, beyond the frame on the line,
// for frames captured on interface i: CheckOptions.LinkDelay, else the
// propagation delay the capture states for i's link (exact for the
// emulator, whose MAC acts on a pause as it arrives), else the in-flight
// tolerance.
func (c *checker) linkDelay(i int) int64 {
	if c.opt.LinkDelay > 0 {
		return c.opt.LinkDelay.Nanoseconds()
	}
	if i < len(c.opt.InterfaceDelays) && c.opt.InterfaceDelays[i] >= 0 {
		return c.opt.InterfaceDelays[i].Nanoseconds()
	}
	return c.inFlight
}

// pausedSend is pfc-paused-send: a frame of a paused priority whose
// transmission must have started inside a pause. A frame captured at t
// (its fault delay taken off) with n bytes started at most t - n·8/rate
// before (the capture shows it whole) and at least t - (n+24)·8/rate -
// delay (preamble, FCS and gap on the line; delay for the propagation
// and the receiving MAC's response, linkDelay). It is a
// violation when the earliest start is after the pause began and the
// latest before it ended: the frame cannot have been on the line when
// the pause arrived. Reported once per pause span, at its first such
// frame, with their number.
func (c *checker) pausedSend(st *pfcState) {
	delays := make([]int64, len(c.ifaceNames))
	for i := range delays {
		delays[i] = c.linkDelay(i)
	}
	type hit struct {
		first *checkFrame
		n     int
		span  *pauseSpan
		prio  int
		delay int64
	}
	hits := map[*pauseSpan]*hit{}
	var order []*hit
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if !f.ipLike || f.ghost || f.dupCopy {
			continue
		}
		p := int(f.prio)
		ss := st.spans[f.iface][p]
		if len(ss) == 0 {
			continue
		}
		rate, delay := st.rate[f.iface], delays[f.iface]
		n := float64(f.wireLen)
		sMax := f.eff - int64(n*8e9/rate)
		sMin := f.eff - int64(math.Ceil((n+24)*8e9/rate)) - delay
		// the last span that began before sMin
		k := sort.Search(len(ss), func(k int) bool { return ss[k].on >= sMin }) - 1
		if k < 0 || sMax >= ss[k].off {
			continue
		}
		sp := &st.spans[f.iface][p][k]
		h := hits[sp]
		if h == nil {
			h = &hit{first: f, span: sp, prio: p, delay: delay}
			hits[sp] = h
			order = append(order, h)
		}
		h.n++
	}
	for _, h := range order {
		more := ""
		if h.n > 1 {
			more = fmt.Sprintf("; %d frames of priority %d in all were sent inside this pause", h.n, h.prio)
		}
		c.violation(RulePFCPausedSend, h.first, "priority %d frame sent while the direction was paused for it: paused from %s (PAUSE/PFC frame %d on %s) until %s, and it started after %s + its line time + %v%s",
			h.prio, c.relTime(h.span.on), h.span.frame+1, c.ifaceNames[c.fs.at(h.span.frame).iface], c.relTime(h.span.off),
			c.relTime(h.span.on), time.Duration(h.delay), more)
	}
}

// relTime is a capture time as Wireshark's frame.time_relative.
func (c *checker) relTime(ns int64) string {
	return fmt.Sprintf("%.9fs", float64(ns-c.t0)/1e9)
}

// pausedEdge is a direction between two nodes whose transmitter was still
// paused for a priority at the end of the capture, since span.on.
type pausedEdge struct {
	from, to string
	iface    int
	span     pauseSpan
}

// linkEnds are the nodes a link direction leaves and enters, from its
// name's link (A~B, A~B#k) and side; ok is false for a host's link (X-in,
// X-out, or an A-B pair read as a host's) or a single interface.
func (c *checker) linkEnds(st *pfcState, i int) (from, to string, ok bool) {
	l := st.links[i]
	if (l.side != sideFwd && l.side != sideRev) || c.ifaceHostLink[i] || (st.rev[i] >= 0 && c.ifaceHostLink[st.rev[i]]) {
		return "", "", false
	}
	side := l.side
	base, _, _ := strings.Cut(l.vp, "#")
	a, b, ok := strings.Cut(base, "~")
	if !ok {
		return "", "", false
	}
	if side == sideRev {
		a, b = b, a
	}
	return a, b, true
}

// deadlocks is pfc-deadlock: per priority, the directions between
// switches still paused at the end of the capture (the last frame's
// time), and every cycle they form in which all have been paused together
// for at least CheckOptions.DeadlockAfter. Each cycle is one violation,
// reported at the pause frame that closed it (the latest to begin).
func (c *checker) deadlocks(st *pfcState) {
	after := c.opt.DeadlockAfter
	if after == 0 {
		after = DefaultDeadlockAfter
	}
	if after < 0 {
		return
	}
	var end int64
	for i := range c.fs.len() {
		end = max(end, c.fs.at(i).ts)
	}
	for p := range 8 {
		out := map[string][]pausedEdge{}
		var nodes []string
		for i := range st.spans {
			ss := st.spans[i][p]
			if len(ss) == 0 || ss[len(ss)-1].off <= end {
				continue
			}
			from, to, ok := c.linkEnds(st, i)
			if !ok {
				continue
			}
			if out[from] == nil {
				nodes = append(nodes, from)
			}
			out[from] = append(out[from], pausedEdge{from, to, i, ss[len(ss)-1]})
		}
		sort.Strings(nodes)
		for _, cyc := range pauseCycles(nodes, out) {
			since, closer := int64(math.MinInt64), cyc[0]
			var names []string
			for _, e := range cyc {
				if e.span.on > since {
					since, closer = e.span.on, e
				}
				names = append(names, fmt.Sprintf("%s→%s (%s, paused since %s by frame %d)", e.from, e.to, c.ifaceNames[e.iface], c.relTime(e.span.on), e.span.frame+1))
			}
			if end-since < after.Nanoseconds() {
				continue
			}
			c.violation(RulePFCDeadlock, c.fs.at(closer.span.frame), "priority %d: a cycle of %d directions between switches, each paused for it without a break from %s to the end of the capture (%s, %v ≥ %v): %s",
				p, len(cyc), c.relTime(since), c.relTime(end), time.Duration(end-since), after, strings.Join(names, ", "))
		}
	}
}

// maxCycles bounds the cycles pfc-deadlock reports per priority.
const maxCycles = 64

// pauseCycles are the simple cycles of the paused directions, each once
// (it starts at its smallest node), in the nodes' order.
func pauseCycles(nodes []string, out map[string][]pausedEdge) [][]pausedEdge {
	var cycles [][]pausedEdge
	for _, start := range nodes {
		var path []pausedEdge
		on := map[string]bool{start: true}
		var walk func(n string)
		walk = func(n string) {
			for _, e := range out[n] {
				if len(cycles) >= maxCycles {
					return
				}
				switch {
				case e.to == start:
					cycles = append(cycles, append(append([]pausedEdge(nil), path...), e))
				case e.to > start && !on[e.to]:
					on[e.to] = true
					path = append(path, e)
					walk(e.to)
					path = path[:len(path)-1]
					on[e.to] = false
				}
			}
		}
		walk(start)
	}
	return cycles
}

func pfcSummary(r *Report) string {
	if r.PFCFrames == 0 {
		return ""
	}
	return fmt.Sprintf("%s, %d PAUSE/PFC judged against the frames they paused", plural(r.PFCFrames, "MAC Control frame"), r.PFCPauses)
}
