package capcheck

import (
	"fmt"
	"math"
	"net/netip"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/inaemu/inaemu/frames/wire"
)

// Interface sides of a merged vantage point (sideIn..sideRev are the
// numbers of pcapio's SideIn..SideRev).
const (
	sideTap uint8 = iota // a single-interface vantage point
	sideIn               // X-in: host X → switch (or a host link's A-B)
	sideOut              // X-out: switch → host X (or its B-A)
	sideFwd              // A-B of a link between switches (A < B)
	sideRev              // B-A of a link between switches
	nSides
)

// checkPosition is where a vantage point watches a connection from.
type checkPosition uint8

const (
	posTap        checkPosition = iota // a tap on the sender's side of any loss
	posSender                          // the sender's link
	posReceiver                        // the receiver's link
	posDownstream                      // a tap on the receiver's side of loss
	posMidPath                         // a link between switches
	posTapMid                          // a tap with loss on both sides
)

func (p checkPosition) String() string {
	return [...]string{"tap-sender", "sender", "receiver", "tap-receiver", "mid-path", "tap-mid"}[p]
}

// isTap: a single-interface vantage point.
func (p checkPosition) isTap() bool { return p == posTap || p == posDownstream || p == posTapMid }

// judgesSender: psn-order and the sender-side latencies apply.
func (p checkPosition) judgesSender() bool { return p == posTap || p == posSender }

// seesGaps: NAK generation latency applies.
func (p checkPosition) seesGaps() bool { return p != posSender }

type checker struct {
	opt        CheckOptions
	fs         *frameStore
	rep        *Report
	ifaceNames []string
	ifaceVP    []*checkVantage
	ifaceSide  []uint8
	// ifaceHostLink: the interface is an A-B or B-A direction of a host's
	// link (orientHostLinks); agg-sum takes its side as X-in's or X-out's.
	ifaceHostLink []bool
	vantages      []*checkVantage
	retrans       []int64
	nakGen        []int64
	nakResp       []int64
	inFlight      int64 // ns
	reorderW      int64 // ns; 0: no reordering allowed
	t0            int64 // the first frame's timestamp
	spans         map[checkStreamKey]*psnSpan
	addrs         []netip.Addr
	addrIdx       map[netip.Addr]uint32
	// ghostPSN: a fault dropped a request with this key and PSN somewhere
	// in the capture.
	ghostPSN map[ghostKey]bool
	// resolvedReq and resolvedResp are the streams paired by trying
	// every consistent pairing (streamRulesUnderAll).
	resolvedReq, resolvedResp map[checkStreamKey]bool
	// origin maps a fork's vantage points to the original checker's.
	origin map[*checkVantage]*checkVantage
	// ext, mtu and mtuWhy: what the READ and atomic rules need
	// (readatomic.go).
	ext       map[int]frameExt
	mtu       int
	mtuWhy    string
	mtuFloor  int
	readMax   map[readAt]int
	atomicMax map[readAt]int
}

type ghostKey struct {
	k   checkStreamKey
	psn uint32
}

type checkVantage struct {
	name    string
	frames  []int
	reqs    map[checkStreamKey]*checkReq
	resps   map[checkStreamKey]*checkResp
	unknown map[int]int // per interface: unreadable frames so far
	tree    bool        // carries multi-rack switch-to-switch frames: no stream rules
}

func newChecker(opt CheckOptions, fs *frameStore, rep *Report, clockWhy string) *checker {
	n := len(opt.Interfaces)
	for i := range fs.len() {
		n = max(n, fs.at(i).iface+1)
	}
	names := make([]string, n)
	for i := range names {
		if i < len(opt.Interfaces) && opt.Interfaces[i] != "" {
			names[i] = opt.Interfaces[i]
		} else {
			names[i] = fmt.Sprintf("if%d", i)
		}
	}
	w := opt.InFlight
	rep.InFlightWhy = "given"
	if w == 0 {
		w, rep.InFlightWhy = inFlightDefault(opt.Clock, clockWhy, rep)
	}
	rep.InFlightNS = int64(max(w, 0))
	c := &checker{opt: opt, fs: fs, rep: rep, ifaceNames: names, inFlight: int64(max(w, 0)),
		resolvedReq: map[checkStreamKey]bool{}, resolvedResp: map[checkStreamKey]bool{}}
	if fs.len() > 0 {
		c.t0 = fs.at(0).ts
	}
	return c
}

// inFlightDefault is the in-flight tolerance when none is given, and why:
// WallClockInFlight for a capture taken on the wall clock between
// software hosts (CheckOptions.Clock, settled by clockFromNames),
// DefaultInFlight otherwise.
func inFlightDefault(clock Clock, why string, rep *Report) (time.Duration, string) {
	switch {
	case clock == ClockWall && why == "":
		why = "CheckOptions.Clock says so"
	case clock != ClockWall:
		return DefaultInFlight, fmt.Sprintf("default %v (a data centre's links; the capture is not marked as taken on the wall clock)", DefaultInFlight)
	}
	rep.Clock = "wall"
	return WallClockInFlight, fmt.Sprintf("wall-clock capture (%s): in-flight tolerance %v instead of %v (--in-flight overrides)", why, WallClockInFlight, DefaultInFlight)
}

// clockFromNames settles ClockAuto from the capture's interface names,
// the one place they are evidence of the clock: faultwire's (hR-wR,
// wR-hR, wR-swR, swR-wR) and the TAP backend's whole bridge set
// (tapBridgeSet) say wall clock; names merely like bridges (a user's
// ovs-br1, a set with a gap) say a data centre's clock. Any other
// capture, or one with frames on an interface past names, keeps clock
// and why.
func clockFromNames(clock Clock, why string, names []string, fs *frameStore) (Clock, string) {
	if clock != ClockAuto {
		return clock, why
	}
	for i := range fs.len() {
		if fs.at(i).iface >= len(names) {
			return clock, why
		}
	}
	switch {
	case allNames(names, faultwireName):
		return ClockWall, "its interfaces are faultwire's (hR-wR, wR-hR, wR-swR, swR-wR: inaemu wire, run --dut)"
	case !allNames(names, func(n string) bool { return isLinkTap(n, false) }):
		return clock, why
	case tapBridgeSet(names):
		return ClockWall, "its interfaces are the TAP backend's bridges (PREFIX-br0 to PREFIX-br" + strconv.Itoa(len(names)-1) + ", every one of a topology)"
	}
	return ClockNIC, why
}

// allNames: there are names and every one satisfies ok.
func allNames(names []string, ok func(string) bool) bool {
	for _, n := range names {
		if !ok(n) {
			return false
		}
	}
	return len(names) > 0
}

// faultwireName: one of faultwire's capture interfaces (faultwire's
// CaptureNames): hR-wR, wR-hR, wR-swR or swR-wR, the same R on both sides.
func faultwireName(n string) bool {
	a, b, ok := strings.Cut(n, "-")
	num := func(s, prefix string) (string, bool) {
		r, ok := strings.CutPrefix(s, prefix)
		return r, ok && r != "" && strings.Trim(r, "0123456789") == ""
	}
	if !ok {
		return false
	}
	for _, pat := range [][2]string{{"h", "w"}, {"w", "h"}, {"w", "sw"}, {"sw", "w"}} {
		x, ok1 := num(a, pat[0])
		y, ok2 := num(b, pat[1])
		if ok1 && ok2 && x == y {
			return true
		}
	}
	return false
}

// reorderWindow is the reorder window in ns: the option's, or, by default,
// what the capture's own fault annotations show: twice the largest extra
// delay a fault gave a frame (a frame displaced on two links, say a
// response on the responder's link and again on the requester's), and
// at least DefaultInFlight when a fault held frames back or reordered
// them (netem reorder swaps a frame with the next one). A capture without
// such annotations allows none.
func reorderWindow(opt time.Duration, maxExtra int64, held bool, rep *Report) int64 {
	if opt != 0 {
		rep.ReorderWindowNS = max(int64(opt), 0)
		return rep.ReorderWindowNS
	}
	w := 2 * maxExtra
	if held {
		w = max(w, int64(DefaultInFlight))
	}
	rep.ReorderWindowNS = w
	return w
}

// buildVantages maps interfaces to vantage points, merging X-in with
// X-out and A-B with B-A.
func (c *checker) buildVantages() {
	n := len(c.ifaceNames)
	c.ifaceVP = make([]*checkVantage, n)
	c.ifaceSide = make([]uint8, n)
	c.ifaceHostLink = make([]bool, n)
	links := pairLinkNames(c.ifaceNames)
	used := make([]bool, n)
	for i := range c.fs.len() {
		used[c.fs.at(i).iface] = true
	}
	vpByName := map[string]*checkVantage{}
	get := func(name string) *checkVantage {
		vp := vpByName[name]
		if vp == nil {
			vp = &checkVantage{name: name, reqs: map[checkStreamKey]*checkReq{}, resps: map[checkStreamKey]*checkResp{}, unknown: map[int]int{}}
			vpByName[name] = vp
			c.vantages = append(c.vantages, vp)
		}
		return vp
	}
	for i, name := range c.ifaceNames {
		if !used[i] {
			continue
		}
		vpName, side := name, sideTap
		if l, ok := links[name]; ok {
			vpName, side = l.vp, l.side
		}
		c.ifaceVP[i] = get(vpName)
		c.ifaceSide[i] = side
	}
	c.orientHostLinks()
	c.markNotForHost(func(i int) (dst, src [6]byte, ok bool) {
		return c.fs.at(i).dstMAC, c.fs.at(i).srcMAC, c.fs.at(i).hasMAC
	})
	// Each interface in capture order, except that on an interface
	// watched from the sending end of its link (X-in, the A-B directions
	// of switch links, taps) a frame a fault delayed goes back where its
	// sender sent it: its timestamp less the extra delay. On X-out the
	// host receives frames in the order they arrived, and that is the
	// order that judges it. A merged vantage point interleaves its two
	// interfaces by those times (ties: capture order): both are then
	// times at host X (what it sent, what reached it).
	perIface := make([][]int, n)
	displaced := make([]bool, n)
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if c.ifaceSide[f.iface] == sideOut {
			f.eff = f.ts
		}
		perIface[f.iface] = append(perIface[f.iface], i)
		displaced[f.iface] = displaced[f.iface] || f.eff != f.ts
	}
	for k, q := range perIface {
		if displaced[k] {
			sort.SliceStable(q, func(a, b int) bool { return c.fs.at(q[a]).eff < c.fs.at(q[b]).eff })
		}
	}
	for _, vp := range c.vantages {
		var qs [][]int
		for i, q := range perIface {
			if c.ifaceVP[i] == vp && len(q) > 0 {
				qs = append(qs, q)
			}
		}
		for {
			best := -1
			for k, q := range qs {
				if len(q) == 0 {
					continue
				}
				if best < 0 {
					best = k
					continue
				}
				a, b := c.fs.at(q[0]), c.fs.at(qs[best][0])
				if a.eff < b.eff || (a.eff == b.eff && a.idx < b.idx) {
					best = k
				}
			}
			if best < 0 {
				break
			}
			vp.frames = append(vp.frames, qs[best][0])
			qs[best] = qs[best][1:]
		}
		c.rep.VantagePoints = append(c.rep.VantagePoints, vp.name)
	}
}

// markNotForHost learns host X's MAC address (the most common unicast
// source on X-in) and marks the frames on X-out sent to another unicast
// address: host X's NIC drops them, so they reach neither its requester
// nor its responder.
func (c *checker) markNotForHost(macs func(i int) (dst, src [6]byte, ok bool)) {
	count := map[*checkVantage]map[[6]byte]int{}
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if c.ifaceSide[f.iface] != sideIn {
			continue
		}
		if _, src, ok := macs(i); ok && hostAddr(src) {
			vp := c.ifaceVP[f.iface]
			if count[vp] == nil {
				count[vp] = map[[6]byte]int{}
			}
			count[vp][src]++
		}
	}
	host := map[*checkVantage][6]byte{}
	for vp, m := range count {
		host[vp] = mostCommonMAC(m)
	}
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if c.ifaceSide[f.iface] != sideOut {
			continue
		}
		mac, ok := host[c.ifaceVP[f.iface]]
		if dst, _, ok2 := macs(i); ok && ok2 && hostAddr(dst) && dst != mac {
			f.notForHost = true
		}
	}
}

func (f *checkFrame) key() checkStreamKey { return checkStreamKey{f.src, f.dst, f.qp} }

// discover finds every stream at every vantage point and its position.
func (c *checker) discover() {
	if c.readMax == nil {
		c.countReads()
	}
	c.spans = map[checkStreamKey]*psnSpan{}
	c.ghostPSN = map[ghostKey]bool{}
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if f.ghost && f.class == fcRequest {
			c.ghostPSN[ghostKey{f.key(), f.psn}] = true
		}
		if !f.icrcOK || f.notForHost || (f.class != fcRequest && f.class != fcAck) {
			continue
		}
		if sp := c.spans[f.key()]; sp == nil {
			c.spans[f.key()] = &psnSpan{base: f.psn}
		} else {
			sp.add(f.psn)
		}
		vp := c.ifaceVP[f.iface]
		if vp == nil || vp.tree { // nil: a fork's vantage point it does not judge
			continue
		}
		side := c.ifaceSide[f.iface]
		if f.class == fcRequest {
			s := vp.reqs[f.key()]
			if s == nil {
				s = newCheckReq(c, vp, f.key())
				vp.reqs[f.key()] = s
			}
			s.sides[side]++
		} else {
			r := vp.resps[f.key()]
			if r == nil {
				r = &checkResp{c: c, vp: vp, key: f.key()}
				vp.resps[f.key()] = r
			}
			r.sides[side]++
		}
	}
	for _, vp := range c.vantages {
		for _, s := range vp.reqs {
			s.side, s.pos = c.position(s.sides, false)
		}
		for _, r := range vp.resps {
			r.side, r.pos = c.position(r.sides, true)
		}
	}
}

func (c *checker) streamKeyLess(a, b checkStreamKey) bool {
	if a.src != b.src {
		return c.addrs[a.src].Less(c.addrs[b.src])
	}
	if a.dst != b.dst {
		return c.addrs[a.dst].Less(c.addrs[b.dst])
	}
	return a.qp < b.qp
}

// keyText is a stream as the report writes it: "SRC→DST qp 0x000012".
func (c *checker) keyText(k checkStreamKey) string {
	return fmt.Sprintf("%s→%s qp %#06x", c.addrs[k.src], c.addrs[k.dst], k.qp)
}

// position picks the side of a merged vantage point a stream is watched
// on, the one most of its frames are on: a frame can show up on the other
// side too when the switch floods it (a corrupted destination MAC), and
// that copy is not the stream's traffic on this link.
func (c *checker) position(sides [nSides]int, responses bool) (uint8, checkPosition) {
	if sides[sideFwd] > 0 || sides[sideRev] > 0 {
		side := sideFwd
		if sides[sideRev] > sides[sideFwd] {
			side = sideRev
		}
		return side, posMidPath
	}
	if sides[sideIn] == 0 && sides[sideOut] == 0 {
		switch c.opt.Vantage {
		case VantageReceiver:
			return sideTap, posDownstream
		case VantageTap:
			return sideTap, posTapMid
		}
		return sideTap, posTap // VantageAuto: until inferVantage decides
	}
	side := sideIn
	if sides[sideOut] > sides[sideIn] {
		side = sideOut
	}
	// Requests on X-in leave host X: it is their sender. Responses on X-out
	// reach host X: it is their requester.
	if (side == sideIn) != responses {
		return side, posSender
	}
	return side, posReceiver
}

// psnSpan is the PSNs a stream carried, as offsets from its first.
type psnSpan struct {
	base   uint32
	lo, hi int32
}

func (sp *psnSpan) add(p uint32) {
	d := int32(wire.PSNDiff(p, sp.base))
	sp.lo, sp.hi = min(sp.lo, d), max(sp.hi, d)
}

// distance is how far PSN span b lies from span a (0 when they overlap),
// in 24-bit PSN arithmetic.
func (a *psnSpan) distance(b *psnSpan) int64 {
	off := int64(wire.PSNDiff(b.base, a.base))
	blo, bhi := off+int64(b.lo), off+int64(b.hi)
	switch {
	case bhi < int64(a.lo):
		return int64(a.lo) - bhi
	case blo > int64(a.hi):
		return blo - int64(a.hi)
	}
	return 0
}

// Pairing by PSN space: several request streams between the same two
// hosts (perftest -q N, NCCL's channels) are told apart by their PSNs. A
// requester picks its QP's starting PSN at random from 2^24, so the PSN
// spaces of two QPs are far apart in practice, and a response carries a
// PSN of its own connection's space (ACK: the last PSN acknowledged, NAK:
// the one expected). A response stream goes with the request stream whose
// span is nearest its own when that one is much nearer than any other
// (pairFar times), every other at least pairApart away, and it is within
// pairNear; two response streams choosing one request stream leave all
// of them unpaired. pairApart keeps overlapping or nearby spaces (two QPs
// that started at the same PSN) out of it: there a wrong NAK, beyond its
// own QP's PSNs but within the other's, would choose the other QP and
// pass, so those are left to trying every consistent pairing
// (pairing.go).
const (
	pairFar   = 16
	pairNear  = 1 << 20
	pairApart = 1 << 16
)

// pairing works on key sets so that the vantage points and the connection
// count use the same rule.
func pairKeys(reqs, resps []checkStreamKey, pairs []QPPair, spans map[checkStreamKey]*psnSpan, addrIdx map[netip.Addr]uint32) map[checkStreamKey]checkStreamKey {
	out := map[checkStreamKey]checkStreamKey{}
	isReq := map[checkStreamKey]bool{}
	for _, k := range reqs {
		isReq[k] = true
	}
	claimedResp := map[checkStreamKey]bool{}
	claimedReq := map[checkStreamKey]bool{}
	for _, p := range pairs {
		src, ok1 := addrIdx[p.Src]
		dst, ok2 := addrIdx[p.Dst]
		if !ok1 || !ok2 {
			continue // names hosts the capture never shows
		}
		rk := checkStreamKey{src, dst, p.ReqQP}
		sk := checkStreamKey{dst, src, p.RespQP}
		claimedReq[rk], claimedResp[sk] = true, true
		if isReq[rk] {
			out[rk] = sk
		}
	}
	type dir struct{ a, b uint32 }
	nReq := map[dir]int{}
	for _, k := range reqs {
		if !claimedReq[k] {
			nReq[dir{k.src, k.dst}]++
		}
	}
	respBy := map[dir][]checkStreamKey{}
	for _, k := range resps {
		if !claimedResp[k] {
			respBy[dir{k.dst, k.src}] = append(respBy[dir{k.dst, k.src}], k)
		}
	}
	reqBy := map[dir][]checkStreamKey{}
	for _, k := range reqs {
		d := dir{k.src, k.dst}
		if claimedReq[k] {
			continue
		}
		if nReq[d] == 1 && len(respBy[d]) == 1 {
			out[k] = respBy[d][0]
			continue
		}
		reqBy[d] = append(reqBy[d], k)
	}
	for d, rs := range reqBy {
		chosen := map[checkStreamKey][]checkStreamKey{}
		for _, sk := range respBy[d] {
			ssp := spans[sk]
			if ssp == nil {
				continue
			}
			best, bestD, secondD := checkStreamKey{}, int64(math.MaxInt64), int64(math.MaxInt64)
			for _, rk := range rs {
				rsp := spans[rk]
				if rsp == nil {
					continue
				}
				switch dd := rsp.distance(ssp); {
				case dd < bestD:
					best, bestD, secondD = rk, dd, bestD
				case dd < secondD:
					secondD = dd
				}
			}
			if bestD < pairNear && (secondD == math.MaxInt64 || (bestD*pairFar < secondD && secondD >= pairApart)) {
				chosen[best] = append(chosen[best], sk)
			}
		}
		for rk, sks := range chosen {
			if len(sks) == 1 {
				out[rk] = sks[0]
			}
		}
	}
	return out
}

// autoPairs is vp's request and response streams and what automatic
// pairing and --pair make of them (pairKeys).
func (c *checker) autoPairs(vp *checkVantage) (reqs, resps []checkStreamKey, pairs map[checkStreamKey]checkStreamKey) {
	for k := range vp.reqs {
		reqs = append(reqs, k)
	}
	for k := range vp.resps {
		resps = append(resps, k)
	}
	return reqs, resps, pairKeys(reqs, resps, c.opt.Pairs, c.spans, c.addrIdx)
}

// pairAll pairs the streams at every vantage point: automatically, by
// --pair, and as alt says for what those left ambiguous.
func (c *checker) pairAll(alt pairingAlt) {
	for _, vp := range c.vantages {
		_, _, pairs := c.autoPairs(vp)
		for rk, sk := range alt[c.originOf(vp)] {
			pairs[rk] = sk
		}
		for rk, sk := range pairs {
			r := vp.resps[sk]
			if r == nil { // named by --pair, no response seen here
				r = &checkResp{c: c, vp: vp, key: sk, pos: vp.reqs[rk].pos}
				vp.resps[sk] = r
			}
			s := vp.reqs[rk]
			s.resp, r.req = r, s
		}
	}
}

func (c *checker) countConnections() {
	reqSet, respSet := map[checkStreamKey]bool{}, map[checkStreamKey]bool{}
	for _, vp := range c.vantages {
		for k := range vp.reqs {
			reqSet[k] = true
		}
		for k, r := range vp.resps {
			if r.acks+r.naks+r.others > 0 {
				respSet[k] = true
			}
		}
	}
	var reqs, resps []checkStreamKey
	for k := range reqSet {
		reqs = append(reqs, k)
	}
	for k := range respSet {
		resps = append(resps, k)
	}
	paired := map[checkStreamKey]bool{}
	pairs := pairKeys(reqs, resps, c.opt.Pairs, c.spans, c.addrIdx)
	for _, sk := range pairs {
		paired[sk] = true
	}
	// A request stream left unpaired while responses came back its way
	// is one whose responses could not be told from another's: nothing
	// that needs them is judged, and the report says so.
	back := map[[2]uint32]bool{}
	for _, k := range resps {
		back[[2]uint32{k.dst, k.src}] = true
	}
	sort.Slice(reqs, func(i, j int) bool { return c.streamKeyLess(reqs[i], reqs[j]) })
	for _, k := range reqs {
		if _, ok := pairs[k]; !ok && back[[2]uint32{k.src, k.dst}] && !c.resolvedReq[k] {
			c.rep.Unpaired = append(c.rep.Unpaired, c.keyText(k))
			c.rep.Unchecked = append(c.rep.Unchecked, c.keyText(k)+": its responses could not be told apart from another's: nak-psn and extra-nak not applied, psn-order only loosely (name them with --pair)")
		}
	}
	n := len(reqs)
	for _, k := range resps {
		if !paired[k] && !c.resolvedResp[k] {
			n++
		}
	}
	c.rep.Connections = n
}

// reordered reports whether frame f, which a frame captured at time at
// (the same time base, f.eff's) contradicts, may have been overtaken by
// it on the way: the capture shows reordering (CheckOptions.ReorderWindow)
// and the two are within the window. It counts it as reordering.
func (c *checker) reordered(at int64, f *checkFrame) bool {
	if c.reorderW <= 0 || f.eff-at > c.reorderW {
		return false
	}
	c.rep.Reordered++
	return true
}

func (c *checker) violation(rule string, f *checkFrame, format string, a ...any) {
	c.violationInf(rule, f, "", format, a...)
}

// violationInf reports a violation whose verdict rests on what inferred
// says (nothing when empty).
func (c *checker) violationInf(rule string, f *checkFrame, inferred, format string, a ...any) {
	c.rep.Violations = append(c.rep.Violations, c.newViolation(rule, f, inferred, fmt.Sprintf(format, a...)))
}

// newViolation describes a violation at frame f (it reads only what
// stays fixed while the rules run).
func (c *checker) newViolation(rule string, f *checkFrame, inferred, detail string) Violation {
	return Violation{Rule: rule, Frame: f.idx + 1, Index: f.idx, Interface: c.ifaceNames[f.iface], TimeNS: f.ts - c.t0,
		QP: f.qp, PSN: f.psn, Detail: detail, Inferred: inferred}
}

// violation reports a violation of the stream's sender or responder; at
// a capture whose position was inferred, the verdict says so.
func (s *checkReq) violation(rule string, f *checkFrame, format string, a ...any) {
	s.c.violationInf(rule, f, s.inferred, format, a...)
}

// inferVantages decides, for VantageAuto, where a single-interface
// capture was taken, per request stream, from the evidence its responses
// give:
//
//   - a NAK asking for a PSN that never passed the capture point while
//     later PSNs did proves a loss before it (upstream): the receiver's
//     side;
//   - a gap (a PSN that never passed while later ones did) followed by
//     any NAK-sequence-error, whatever PSN it names: the responder saw a
//     gap too, evidence of a loss before the capture as well (a responder
//     whose NAK names the wrong PSN must not turn its requester into the
//     culprit);
//   - a NAK asking for a PSN that did pass it proves a loss after it
//     (the data was seen before its loss), or a NAK naming the wrong PSN:
//     the sender's side;
//   - both: loss on both sides, a tap mid-path;
//   - neither (no loss, or no responses seen): the sender's side, as a
//     mirror port next to a requester sees it; a skipped PSN is then the
//     requester's (a loss before the capture would have drawn a NAK).
//
// Evidence of the receiver's side is shared: the streams between the
// same two hosts in the same direction at one vantage point cross the
// same path to it, so one proved to be on the receiver's side of a loss
// says the others may have lost packets before the capture too (each
// is then judged on the receiver's side, or as a tap with loss on both
// sides when its own evidence says loss after the capture as well).
//
// Where the readings conflict (loss on both sides, or receiver-side
// evidence that is shared or rests on a gap), the stream is judged where
// every rule applied holds under each reading (a tap with loss on both
// sides, or the receiver's side: psn-order is applied only to the
// retransmission after a NAK, nak-psn with the bound every position
// allows), and its inference line names the other reading: the skip the
// requester would be blamed for if the capture were its own, with
// --vantage sender to ask for that.
//
// Each stream whose position rests on loss evidence gets one line in
// Report.Inferences; every psn-order and nak-psn verdict on a stream
// whose position was inferred carries it.
func (c *checker) inferVantages() {
	if c.opt.Vantage != VantageAuto {
		return
	}
	type evidence struct {
		seen  map[uint32]bool
		runs  []psnRun // READs longer than maxGapHoles PSNs that passed
		hiSet bool
		hi    uint32
		// holes: PSNs a packet skipped that have not passed since, each
		// with the packet that skipped it.
		holes            map[uint32]int
		up, down         bool
		upFrame, dnFrame int
		upPSN, dnPSN     uint32
		// upGap: the receiver-side evidence is a gap (PSN upPSN, skipped
		// by the packet of frame gapBy) followed by the NAK of upFrame.
		upGap bool
		gapBy int
		// The first skip the capture shows (the alternative reading's).
		skipSet    bool
		skipPSN    uint32
		skipFrame  int
		shared     *checkReq // the receiver side shared from this stream
		sharedWhat string
	}
	const maxGapHoles = 1 << 10
	for _, vp := range c.vantages {
		ev := map[*checkReq]*evidence{}
		for _, i := range vp.frames {
			f := c.fs.at(i)
			// A ghost request counts as seen: the capture point recorded
			// its sender sending it (a fault dropped it there).
			if (f.ghost && f.class != fcRequest) || !f.icrcOK || f.notForHost {
				continue
			}
			switch f.class {
			case fcRequest:
				s := vp.reqs[f.key()]
				if s == nil || s.pos != posTap {
					continue
				}
				e := ev[s]
				if e == nil {
					e = &evidence{seen: map[uint32]bool{}, holes: map[uint32]int{}}
					ev[s] = e
				}
				if e.hiSet && wire.PSNDiff(f.psn, e.hi) > 1 {
					first := wire.PSNAdd(e.hi, 1)
					if !e.skipSet {
						e.skipSet, e.skipPSN, e.skipFrame = true, first, f.idx
					}
					for q, n := first, 0; q != f.psn && n < maxGapHoles && len(e.holes) < maxGapHoles; q, n = wire.PSNAdd(q, 1), n+1 {
						if !e.seen[q] && !inRuns(e.runs, q) {
							e.holes[q] = f.idx
						}
					}
				}
				// A READ passes once for all the PSNs it occupies: the
				// whole range counts (hi, seen), however long; beyond
				// maxGapHoles PSNs it is kept as a range, not PSN by PSN.
				n, _ := c.npkts(f)
				n = max(n, 1)
				for k := range min(n, maxGapHoles) {
					q := wire.PSNAdd(f.psn, int(k))
					e.seen[q] = true
					delete(e.holes, q)
				}
				if n > maxGapHoles {
					r := psnRun{start: f.psn, n: n}
					e.runs = addRun(e.runs, r)
					for q := range e.holes {
						if r.covers(q) {
							delete(e.holes, q)
						}
					}
				}
				if last := wire.PSNAdd(f.psn, int(n)-1); !e.hiSet || wire.PSNDiff(last, e.hi) > 0 {
					e.hi, e.hiSet = last, true
				}
			case fcAck:
				r := vp.resps[f.key()]
				if r == nil || r.req == nil || f.syn != wire.SyndromeNAKPSNSeqErr {
					continue
				}
				e := ev[r.req]
				if e == nil || !e.hiSet {
					continue
				}
				seen := e.seen[f.psn] || inRuns(e.runs, f.psn)
				switch {
				case seen && !e.down:
					e.down, e.dnFrame, e.dnPSN = true, f.idx, f.psn
				case !seen && wire.PSNDiff(f.psn, e.hi) < 0 && !e.up:
					e.up, e.upFrame, e.upPSN = true, f.idx, f.psn
				}
				if !e.up && len(e.holes) > 0 {
					// A gap, then a NAK naming another PSN: the lowest
					// PSN still missing is the gap the responder saw.
					var lo uint32
					first := true
					for q := range e.holes {
						if first || wire.PSNDiff(q, lo) < 0 {
							lo, first = q, false
						}
					}
					e.up, e.upGap, e.upFrame, e.upPSN, e.gapBy = true, true, f.idx, lo, e.holes[lo]
				}
			}
		}
		var reqs []*checkReq
		for _, s := range vp.reqs {
			if s.pos == posTap {
				reqs = append(reqs, s)
				if ev[s] == nil {
					ev[s] = &evidence{}
				}
			}
		}
		sort.Slice(reqs, func(i, j int) bool { return c.streamKeyLess(reqs[i].key, reqs[j].key) })
		upText := func(e *evidence) string {
			if e.upGap {
				return fmt.Sprintf("PSN %d never passed here while later PSNs did (frame %d), and the responder's NAK of frame %d followed the gap (lost before the capture)", e.upPSN, e.gapBy+1, e.upFrame+1)
			}
			return fmt.Sprintf("the NAK of frame %d asks for PSN %d, which never passed here while later PSNs did (lost before the capture)", e.upFrame+1, e.upPSN)
		}
		// Share the receiver side between the streams of one direction.
		for _, s := range reqs {
			e := ev[s]
			if e.up {
				continue
			}
			for _, o := range reqs {
				if oe := ev[o]; o != s && oe.up && oe.shared == nil && o.key.src == s.key.src && o.key.dst == s.key.dst {
					e.shared, e.sharedWhat = o, upText(oe)
					break
				}
			}
		}
		for _, s := range reqs {
			e := ev[s]
			dnText := fmt.Sprintf("PSN %d passed here before the NAK of frame %d asked for it (lost after the capture, or a NAK naming the wrong PSN)", e.dnPSN, e.dnFrame+1)
			up := ""
			switch {
			case e.up:
				up = upText(e)
			case e.shared != nil:
				up = fmt.Sprintf("shared with %s, which crosses the same path to this capture: %s", c.keyText(e.shared.key), e.sharedWhat)
			}
			var what string
			switch {
			case up != "" && e.down:
				s.pos, what = posTapMid, "a tap with loss on both sides: "+up+"; "+dnText
			case up != "":
				s.pos, what = posDownstream, "the receiver side: "+up
			case e.down:
				s.pos, what = posTap, "the sender side: "+dnText
			default:
				s.inferred = "capture taken as the sender's side (no loss evidence)"
				continue
			}
			if s.resp != nil {
				s.resp.pos = s.pos
			}
			s.inferred = "capture inferred as " + what
			line := fmt.Sprintf("%s: %s: %s (--vantage overrides)", vp.name, c.keyText(s.key), what)
			if s.pos != posTap && e.skipSet && (e.down || e.upGap || e.shared != nil) {
				line += fmt.Sprintf("; the other reading: were this the requester's own capture (--vantage sender), its skip of PSN %d at frame %d would be a psn-order violation", e.skipPSN, e.skipFrame+1)
			}
			c.rep.Inferences = append(c.rep.Inferences, line)
		}
	}
}

func (c *checker) runVantage(vp *checkVantage) {
	if vp.tree {
		return
	}
	for _, i := range vp.frames {
		f := c.fs.at(i)
		switch {
		case f.class == fcMalformed || f.class == fcUnreadable || (f.class != fcOther && !f.icrcOK):
			// Unreadable: it may have been any frame (data, ACK, ...).
			vp.unknown[f.iface]++
		case f.notForHost:
		case f.class == fcRequest:
			if s := vp.reqs[f.key()]; s.side == c.ifaceSide[f.iface] {
				s.onData(f)
			}
		case f.class == fcAck && !f.ghost:
			if r := vp.resps[f.key()]; r.side == c.ifaceSide[f.iface] {
				r.onAck(f)
			}
		}
	}
}

// streamRules applies the stream rules (psn-order, nak-psn, extra-nak,
// ack-regress) at every vantage point, the ambiguous groups paired as alt
// says.
func (c *checker) streamRules(alt pairingAlt) {
	c.pairAll(alt)
	c.inferVantages()
	for _, vp := range c.vantages {
		c.runVantage(vp)
	}
	for _, vp := range c.vantages {
		if n := len(vp.frames); n > 0 {
			end := c.fs.at(vp.frames[n-1]).eff
			for _, s := range vp.reqs {
				s.expireHoles(end)
			}
		}
	}
}

// fork is a checker for another reading of the same capture at the
// vantage points in only: the same frames and options, fresh streams and
// a report of its own (violations, inferences).
func (c *checker) fork(only map[*checkVantage]bool) *checker {
	n := *c
	n.rep = &Report{Violations: []Violation{}, Inferences: []string{}, Unpaired: []string{}, Streams: []StreamReport{}}
	n.retrans, n.nakGen, n.nakResp = nil, nil, nil
	n.vantages = nil
	remap := map[*checkVantage]*checkVantage{}
	for _, vp := range c.vantages {
		if !only[vp] {
			continue
		}
		nv := &checkVantage{name: vp.name, frames: vp.frames, reqs: map[checkStreamKey]*checkReq{}, resps: map[checkStreamKey]*checkResp{},
			unknown: map[int]int{}, tree: vp.tree}
		remap[vp] = nv
		n.vantages = append(n.vantages, nv)
	}
	n.origin = map[*checkVantage]*checkVantage{}
	for o, nv := range remap {
		n.origin[nv] = o
	}
	n.ifaceVP = make([]*checkVantage, len(c.ifaceVP))
	for i, vp := range c.ifaceVP {
		if vp != nil {
			n.ifaceVP[i] = remap[vp]
		}
	}
	n.discover()
	return &n
}

// streamRulesUnderAll applies the stream rules under every pairing in
// alts (the consistent readings of the responses automatic pairing could
// not attribute): the violations found under all of them are reported,
// those found under some only are undecidable (Report.Unchecked).
func (c *checker) streamRulesUnderAll(alts []pairingAlt) {
	type vkey struct {
		rule  string
		frame int
	}
	base := len(c.rep.Violations)
	c.streamRules(alts[0])
	mine := append([]Violation(nil), c.rep.Violations[base:]...)
	holds := map[vkey][]int{} // the readings each violation holds under
	example := map[vkey]Violation{}
	var order []vkey
	note := func(alt int, vs []Violation) {
		for _, v := range vs {
			k := vkey{v.Rule, v.Frame}
			if h := holds[k]; len(h) > 0 && h[len(h)-1] == alt {
				continue
			}
			if _, ok := example[k]; !ok {
				example[k] = v
				order = append(order, k)
			}
			holds[k] = append(holds[k], alt)
		}
	}
	// The other readings differ only at the vantage points of the
	// ambiguous groups: only those are judged again.
	ambiguous := map[*checkVantage]bool{}
	for _, alt := range alts {
		for vp := range alt {
			ambiguous[vp] = true
		}
	}
	vpOf := func(v Violation) *checkVantage { return c.ifaceVP[c.fs.at(v.Index).iface] }
	var others []Violation
	for _, v := range mine {
		if ambiguous[vpOf(v)] {
			others = append(others, v)
		}
	}
	note(0, others)
	for i, alt := range alts[1:] {
		f := c.fork(ambiguous)
		f.streamRules(alt)
		note(i+1, f.rep.Violations)
	}
	kept := c.rep.Violations[:base]
	for _, v := range mine {
		if !ambiguous[vpOf(v)] || len(holds[vkey{v.Rule, v.Frame}]) == len(alts) {
			kept = append(kept, v)
		}
	}
	c.rep.Violations = kept
	sort.Slice(order, func(i, j int) bool {
		if order[i].frame != order[j].frame {
			return order[i].frame < order[j].frame
		}
		return order[i].rule < order[j].rule
	})
	for _, k := range order {
		h := holds[k]
		if len(h) == len(alts) {
			continue
		}
		v := example[k]
		var under []string
		for _, a := range h {
			under = append(under, c.altText(alts[a]))
		}
		c.rep.Unchecked = append(c.rep.Unchecked, fmt.Sprintf("%s frame %d (qp %#06x psn %d): a violation under %d of the %d consistent pairings of the responses, undecidable (it holds pairing %s; name the pairing with --pair)",
			v.Rule, v.Frame, v.QP, v.PSN, len(h), len(alts), strings.Join(under, " or ")))
	}
	// One line per ambiguous group, and its streams count as paired.
	groups := map[*checkVantage]map[checkStreamKey]bool{}
	for _, alt := range alts {
		for vp, m := range alt {
			if groups[vp] == nil {
				groups[vp] = map[checkStreamKey]bool{}
			}
			for rk, sk := range m {
				groups[vp][rk] = true
				c.resolvedReq[rk], c.resolvedResp[sk] = true, true
			}
		}
	}
	for _, vp := range c.vantages {
		if len(groups[vp]) == 0 {
			continue
		}
		var texts []string
		seen := map[string]bool{}
		for _, alt := range alts {
			if t := c.pairingText(alt[vp]); !seen[t] {
				seen[t] = true
				texts = append(texts, t)
			}
		}
		if len(texts) == 1 {
			c.rep.Inferences = append(c.rep.Inferences, fmt.Sprintf("%s: responses not attributable by PSN space, paired by the only pairing consistent with the ACKs' timing and the UDP source ports: %s",
				vp.name, texts[0]))
			continue
		}
		c.rep.Inferences = append(c.rep.Inferences, fmt.Sprintf("%s: responses not attributable by PSN space: %d consistent pairings tried (%s); a violation is reported when it holds under every one",
			vp.name, len(texts), strings.Join(texts, " | ")))
	}
}

// originOf is the vantage point of the checker forked from that vp
// stands for (pairingAlt names those).
func (c *checker) originOf(vp *checkVantage) *checkVantage {
	if o, ok := c.origin[vp]; ok {
		return o
	}
	return vp
}

// altText is one reading of every ambiguous group.
func (c *checker) altText(alt pairingAlt) string {
	var parts []string
	for _, vp := range c.vantages {
		if m := alt[vp]; len(m) > 0 {
			parts = append(parts, c.pairingText(m))
		}
	}
	return strings.Join(parts, "; ")
}

// leftUnpaired says why the groups no pairing could be tried for stay
// unpaired (their streams are then listed in Report.Unpaired).
func (c *checker) leftUnpaired(left []*ambiguousGroup) {
	for _, g := range left {
		why := "no pairing is consistent with the ACKs' timing and PSNs"
		switch {
		case g.tooMany:
			why = fmt.Sprintf("more than %d assignments to try", maxGroupPerms)
		case len(g.assigns) > 0:
			why = fmt.Sprintf("%d consistent pairings, more than the %d tried with the other ambiguous groups", len(g.assigns), maxPairings)
		}
		c.rep.Inferences = append(c.rep.Inferences, fmt.Sprintf("%s: responses %s→%s not attributable: %s", g.vp.name, c.addrs[g.reqs[0].dst], c.addrs[g.reqs[0].src], why))
	}
}

func (c *checker) finish() {
	for _, vp := range c.vantages {
		var rows []StreamReport
		for _, s := range vp.reqs {
			rows = append(rows, s.report())
		}
		for _, r := range vp.resps {
			if r.req == nil && r.acks+r.naks+r.others > 0 {
				rows = append(rows, r.report())
			}
		}
		sort.Slice(rows, func(i, j int) bool {
			a, b := rows[i], rows[j]
			if a.Src != b.Src {
				return a.Src < b.Src
			}
			if a.Dst != b.Dst {
				return a.Dst < b.Dst
			}
			qa, qb := int64(-1), int64(-1)
			if a.QP != nil {
				qa = int64(*a.QP)
			}
			if b.QP != nil {
				qb = int64(*b.QP)
			}
			if qa != qb {
				return qa < qb
			}
			ra, rb := int64(-1), int64(-1)
			if a.RespQP != nil {
				ra = int64(*a.RespQP)
			}
			if b.RespQP != nil {
				rb = int64(*b.RespQP)
			}
			return ra < rb
		})
		c.rep.Streams = append(c.rep.Streams, rows...)
	}
	c.rep.RetransLatency = summarize(c.retrans)
	c.rep.NAKGenLatency = summarize(c.nakGen)
	c.rep.NAKRespLatency = summarize(c.nakResp)
}

// checkResp is a response stream (ACKs, NAKs, RNR NAKs) at a vantage point.
type checkResp struct {
	c     *checker
	vp    *checkVantage
	key   checkStreamKey
	req   *checkReq
	sides [nSides]int // frames per interface side
	side  uint8       // the side its frames are judged on
	pos   checkPosition

	acks, naks, others int
	ackSet             bool
	maxAck             uint32
	maxAckFrame        int
	maxAckAt           int64
}

func (r *checkResp) report() StreamReport {
	q := r.key.qp
	return StreamReport{Vantage: r.vp.name, Src: r.c.addrs[r.key.dst].String(), Dst: r.c.addrs[r.key.src].String(), RespQP: &q,
		Position: r.pos.String(), ACKs: r.acks, NAKs: r.naks}
}

func (r *checkResp) onAck(f *checkFrame) {
	switch {
	case isReadResponse(f.op):
		r.others++
		if r.req != nil {
			r.req.onReadResp(f)
		}
		return
	case f.op == wire.AtomicAcknowledge:
		r.others++
		if r.req != nil {
			r.req.onAtomicAck(f)
		}
		return
	}
	syn := f.syn
	switch {
	case syn.IsACK():
		r.acks++
		switch {
		case r.ackSet && wire.PSNDiff(f.psn, r.maxAck) < 0 && r.c.reordered(r.maxAckAt, f):
			// a later ACK overtook it on the way
		case r.ackSet && wire.PSNDiff(f.psn, r.maxAck) < 0:
			r.c.violation(RuleACKRegress, f, "ACK PSN %d is behind ACK PSN %d of frame %d on the same connection", f.psn, r.maxAck, r.maxAckFrame+1)
		default:
			r.ackSet, r.maxAck, r.maxAckFrame, r.maxAckAt = true, f.psn, f.idx, f.eff
		}
		if r.req != nil {
			r.req.onACK(f)
		}
	case syn == wire.SyndromeNAKPSNSeqErr:
		r.naks++
		if r.req != nil {
			r.req.onNAK(f)
		}
	case syn.IsRNRNAK():
		r.others++
		if r.req != nil {
			r.req.onRNR(f)
		}
	default:
		r.others++
	}
}

// checkReq is a request stream at a vantage point: a model of its sender
// (for psn-order) and of its responder (for nak-psn and extra-nak).
type checkReq struct {
	c     *checker
	vp    *checkVantage
	key   checkStreamKey
	resp  *checkResp
	sides [nSides]int // frames per interface side
	side  uint8       // the side its frames are judged on
	pos   checkPosition

	data, retx int
	// readUnknown: a READ whose PSN count the MTU does not say passed:
	// the PSN rules stop for this stream.
	readUnknown bool
	lastPSN     uint32 // the previous data packet's PSN

	// READ and atomic requests that passed, for the response rules
	// (readatomic.go).
	reqSet         bool
	reqFirst       uint32
	reads          []readReq
	readsForgot    bool
	rrCount        map[int]map[uint32]int // per READ (its frame), per PSN: responses seen
	coverBuf       []readReq
	rrSet, aaSet   bool
	rrHash, aaHash uint64
	atomics        map[uint32]int
	atomicAcks     map[uint32]int
	atomicOrig     map[uint32]atomicAnswer
	pend           []pendReq
	pendIdx        map[pendKey]int

	// Sender model: what the requester transmitted (ghosts included).
	txStarted bool
	next, hi  uint32
	first     uint32
	naks      []checkNAK
	unkIface  int
	unkMark   int
	firstTx   map[uint32]int64
	retxSeen  map[uint32]bool
	nakWait   map[uint32]int64

	// What the responses said.
	ackSet   bool
	acked    uint32 // highest PSN acknowledged (ACK q: q; NAK e: e-1)
	ackHist  []checkAck
	ackFrame int
	ackAt    int64

	// Responder model: an upper bound on its expected PSN.
	upSet bool
	up    uint32
	seen  map[uint32]bool
	// seenRuns: READ ranges seen ahead of up (out of order).
	seenRuns []psnRun
	hasGap   bool
	gapAt    int64
	gapFor   uint32

	nakSet       bool
	lastNAK      uint32
	lastNAKFrame int
	repaired     bool

	retrans, nakGen, nakResp []int64

	// inferred: how this stream's position was inferred ("" when given).
	inferred string
	// At a tap on the receiver's side (or mid-path): the retransmission
	// after a NAK must start at its PSN (resumeStep).
	rxSet, rxNAKSet bool
	rxHi, rxLast    uint32
	rxNAK           uint32
	rxNAKFrame      int

	// holes are PSNs a data packet skipped while the capture shows
	// reordering: the verdict waits the reorder window for them to turn
	// up late.
	holes []checkHole
	// early are data packets that started a retransmission at the wrong
	// PSN while the capture shows reordering: the verdict waits for a
	// packet that starts it right to turn up late.
	early  []checkHole
	lastTx map[uint32]int64
}

// checkHole is a PSN skipped by the data packet of frame fr at time at.
type checkHole struct {
	psn  uint32
	fr   *checkFrame
	at   int64
	text string
}

// maxHoles bounds the PSNs one skip may leave waiting: a longer skip is
// judged at once.
const maxHoles = 64

// checkNAK is a recent NAK. A data packet carrying the PSN of any recent
// NAK, served or not, is accepted as a NAK retransmission: between the
// vantage point and the sender frames are in flight both ways, so a packet
// sent for one NAK may be captured after the next NAK, and a packet sent
// before a NAK may be captured after it and look like its retransmission.
type checkNAK struct {
	psn    uint32
	frame  int
	served bool
}

// maxRecentNAKs is how many recent NAKs a stream remembers.
const maxRecentNAKs = 32

func newCheckReq(c *checker, vp *checkVantage, k checkStreamKey) *checkReq {
	return &checkReq{c: c, vp: vp, key: k, unkIface: -1, firstTx: map[uint32]int64{}, retxSeen: map[uint32]bool{}, lastTx: map[uint32]int64{}, nakWait: map[uint32]int64{}, seen: map[uint32]bool{}}
}

func (s *checkReq) report() StreamReport {
	q := s.key.qp
	row := StreamReport{Vantage: s.vp.name, Src: s.c.addrs[s.key.src].String(), Dst: s.c.addrs[s.key.dst].String(), QP: &q,
		Position: s.pos.String(), DataPackets: s.data, Retransmissions: s.retx,
		RetransLatency: summarize(s.retrans), NAKGenLatency: summarize(s.nakGen), NAKRespLatency: summarize(s.nakResp)}
	if s.resp != nil {
		rq := s.resp.key.qp
		row.RespQP = &rq
		row.ACKs, row.NAKs = s.resp.acks, s.resp.naks
	}
	return row
}

func (s *checkReq) sample(dst *[]int64, all *[]int64, d int64) {
	*dst = append(*dst, d)
	*all = append(*all, d)
}

// onData handles a request frame with a good ICRC (a ghost or not).
func (s *checkReq) onData(f *checkFrame) {
	n, known := s.c.npkts(f)
	if !known && !s.readUnknown {
		s.readUnknown = true
		s.c.uncheckedRead(s, f)
	}
	if known && (f.op == wire.ReadRequest || isAtomicReq(f.op)) {
		s.noteRequest(f, n)
	} else if known && !s.reqSet {
		s.reqFirst, s.reqSet = f.psn, true
	}
	if !f.ghost {
		s.data++
	}
	if s.pos.judgesSender() && !s.readUnknown {
		s.senderStep(f, n)
	} else if s.pos.isTap() && !s.readUnknown && !f.ghost && !f.dupCopy {
		s.resumeStep(f)
	}
	if f.ghost || s.readUnknown {
		return
	}
	// Responder model: an upper bound on its expected PSN.
	p := f.psn
	if !s.upSet {
		s.up, s.upSet = p, true
	}
	if s.seqSim() {
		// It receives what passed here, in this order: replay go-back-N
		// (a READ moves it past the READ's range).
		if p == s.up {
			s.up = wire.PSNAdd(s.up, int(n))
		}
	} else {
		// It may receive them in another order (a NetReduce switch emits
		// results as aggregators complete): the first PSN never seen. A
		// READ at the bound moves it past its whole range; one elsewhere
		// is kept as a range (however many PSNs it occupies).
		switch {
		case p == s.up:
			s.up = wire.PSNAdd(s.up, int(max(n, 1)))
		case n <= 1:
			s.seen[p] = true
		default:
			s.seenRuns = addRun(s.seenRuns, psnRun{start: p, n: n})
		}
		s.advanceUp()
	}
	if s.hasGap && wire.PSNDiff(s.up, s.gapFor) > 0 {
		s.hasGap = false // repaired
	}
	if !s.hasGap && wire.PSNDiff(p, s.up) > 0 {
		s.hasGap, s.gapAt, s.gapFor = true, f.eff, s.up // this packet reveals a gap
	}
	if s.nakSet && p == s.lastNAK {
		s.repaired = true
	}
}

// resumeStep applies, at a tap that may be downstream of loss, what can
// still be decided there about the requester: its retransmission after a
// NAK starts at the NAK's PSN. The first packet that goes back (a PSN at
// or below the highest seen, not a repeat of the previous one) after a
// NAK for e is the retransmission's first to reach the capture; if it is
// above e, the requester skipped e..p-1 unless all of them were lost
// again before the capture (none of the capture's ghosts shows that),
// which the verdict says it assumed. With reordering in the capture it
// stays silent: a reordered retransmission looks the same.
func (s *checkReq) resumeStep(f *checkFrame) {
	p := f.psn
	if s.rxNAKSet && p == s.rxNAK {
		s.rxNAKSet = false
	}
	if s.rxNAKSet && s.rxSet && wire.PSNDiff(p, s.rxHi) <= 0 && p != s.rxLast {
		e := s.rxNAK
		s.rxNAKSet = false
		if d := wire.PSNDiff(p, e); d > 0 && s.c.reorderW == 0 && !s.c.ghostBetween(s.key, e, p) {
			why := "assumes PSNs " + fmt.Sprint(e) + ".." + fmt.Sprint(wire.PSNAdd(p, -1)) + " were not lost again before the capture"
			if s.inferred != "" {
				why = s.inferred + "; " + why
			}
			s.c.violationInf(RulePSNOrder, f, why, "retransmission after the NAK of frame %d starts at PSN %d, but the NAK asks for PSN %d",
				s.rxNAKFrame+1, p, e)
		}
	}
	if !s.rxSet || wire.PSNDiff(p, s.rxHi) > 0 {
		s.rxHi, s.rxSet = p, true
	}
	s.rxLast = p
}

// ghostBetween: a fault dropped some PSN in [from, to) of stream k
// anywhere in the capture.
func (c *checker) ghostBetween(k checkStreamKey, from, to uint32) bool {
	for q := from; q != to && wire.PSNDiff(q, to) < 0; q = wire.PSNAdd(q, 1) {
		if c.ghostPSN[ghostKey{k, q}] {
			return true
		}
	}
	return false
}

// seqSim: the responder receives exactly what passes this vantage point,
// in order (the receiver's link, or a tap declared or inferred downstream).
func (s *checkReq) seqSim() bool { return s.pos == posReceiver || s.pos == posDownstream }

// judge says what is wrong with transmitting p next (psn-order), or "".
func (s *checkReq) judge(p uint32, t int64) string {
	d := wire.PSNDiff(p, s.next)
	switch {
	case d == 0, s.hasNAK(p):
		// in order, or a NAK retransmission
	case d < 0 && s.pendingCovers(p):
		// a READ re-issued from its first missing response PSN, or an
		// atomic resent, while it waits for its responses: a NAK for a
		// later PSN acknowledges neither (rxe_comp.c: a READ or atomic
		// still pending is retried)
	case s.resp == nil:
		// No responses at this vantage point: any NAK may ask for any PSN
		// sent so far; only a PSN beyond all of them is wrong.
		if wire.PSNDiff(p, wire.PSNAdd(s.hi, 1)) > 0 {
			return skipText(wire.PSNAdd(s.hi, 1), p)
		}
	case s.restartPoint(p, t):
		// the oldest unacknowledged PSN of an acknowledgement state the
		// sender may have had: a timeout retransmission, or resuming
		// after what an ACK acknowledged
	case d > 0:
		if n, ok := s.blocking(); ok {
			return fmt.Sprintf("skips ahead to PSN %d while the NAK of frame %d asks for PSN %d", p, n.frame+1, n.psn)
		}
		return skipText(s.next, p)
	default: // going back, not to a NAK's PSN
		if n, ok := s.blocking(); ok {
			return fmt.Sprintf("retransmission starts at PSN %d, but the NAK of frame %d asks for PSN %d", p, n.frame+1, n.psn)
		}
		if a, ok := s.ackedBefore(t - s.c.inFlight); ok && wire.PSNDiff(p, a.psn) <= 0 {
			return fmt.Sprintf("retransmits PSN %d, already acknowledged up to PSN %d (frame %d)", p, a.psn, a.frame+1)
		}
	}
	return ""
}

// blocking returns a NAK the sender must serve before going back
// elsewhere: within bounds, not yet served and not yet acknowledged.
func (s *checkReq) blocking() (checkNAK, bool) {
	for _, n := range s.naks {
		if !n.served && (!s.ackSet || wire.PSNDiff(n.psn, s.acked) > 0) {
			return n, true
		}
	}
	return checkNAK{}, false
}

// rememberNAK records a NAK (or RNR NAK) the sender may act on. Invalid
// ones (nak-psn) never block: a requester may ignore them.
func (s *checkReq) rememberNAK(psn uint32, frame int, valid bool) {
	for i := range s.naks {
		if s.naks[i].psn == psn {
			s.naks[i].frame = frame
			s.naks[i].served = s.naks[i].served && !valid
			return
		}
	}
	if len(s.naks) == maxRecentNAKs {
		s.naks = s.naks[1:]
	}
	s.naks = append(s.naks, checkNAK{psn: psn, frame: frame, served: !valid})
}

// serveNAK marks the NAKs for psn served.
func (s *checkReq) serveNAK(psn uint32) {
	for i := range s.naks {
		if s.naks[i].psn == psn {
			s.naks[i].served = true
		}
	}
}

// hasNAK: psn is the PSN of a recent NAK.
func (s *checkReq) hasNAK(psn uint32) bool {
	for _, n := range s.naks {
		if n.psn == psn {
			return true
		}
	}
	return false
}

// senderStep judges one transmission (psn-order) at a vantage point that
// watches the sender.
func (s *checkReq) senderStep(f *checkFrame, n uint32) {
	p, c, t := f.psn, s.c, f.eff
	unknown := s.vp.unknown[f.iface]
	if f.iface == s.unkIface {
		unknown -= s.unkMark
	}
	s.unkIface, s.unkMark = f.iface, s.vp.unknown[f.iface]
	s.expireHoles(t)
	if s.txStarted && p == s.lastPSN {
		return // a network duplicate of the previous packet
	}
	filled := false
	for k := range max(min(n, maxHoles), 1) { // a READ fills the holes of all its PSNs
		filled = s.fillHole(wire.PSNAdd(p, int(k)), t) || filled
	}
	if filled {
		return // a skipped PSN turned up late: it was overtaken
	}
	if s.data%pruneEvery == 0 {
		s.prune()
	}
	if t0, ok := s.firstTx[p]; ok {
		s.retx++
		if !s.retxSeen[p] {
			s.retxSeen[p] = true
			s.sample(&s.retrans, &c.retrans, t-t0)
		}
	} else {
		s.firstTx[p] = t
	}
	// The response to a NAK is a jump to its PSN; the next PSN in line may
	// have left the sender before the NAK reached it.
	if tn, ok := s.nakWait[p]; ok && (!s.txStarted || p != s.next) {
		delete(s.nakWait, p)
		s.sample(&s.nakResp, &c.nakResp, t-tn)
	}
	end := wire.PSNAdd(p, int(n)-1) // a READ occupies n PSNs
	if !s.txStarted {
		s.serveNAK(p)
		s.txStarted, s.next, s.hi, s.first, s.lastPSN = true, wire.PSNAdd(end, 1), end, p, p
		return
	}
	bad := s.judge(p, t)
	// The unreadable frames seen since the previous packet may have been
	// this stream's packets q..p-1, q an acceptable one.
	for j := 1; bad != "" && j <= min(unknown, 64); j++ {
		if s.judge(wire.PSNAdd(p, -j), t) == "" {
			bad = ""
		}
	}
	if bad != "" && unknown > 0 && len(c.readMax) > 0 && wire.PSNDiff(p, s.next) > 0 {
		bad = "" // one of them may have been a READ of any number of PSNs up to p
	}
	s.serveNAK(p)
	if bad == "" {
		s.clearEarly(p)
	}
	if bad != "" && !f.ghost && !s.deferSkip(f, bad) && !s.deferEarly(f, bad) {
		s.violation(RulePSNOrder, f, "%s", bad)
	}
	s.lastTx[p] = t
	s.next, s.lastPSN = wire.PSNAdd(end, 1), p
	if wire.PSNDiff(end, s.hi) > 0 {
		s.hi = end
	}
}

// deferSkip: when the capture shows reordering and p skipped PSNs not sent
// within the reorder window before it, the verdict waits for them
// (fillHole, expireHoles).
func (s *checkReq) deferSkip(f *checkFrame, bad string) bool {
	d := wire.PSNDiff(f.psn, s.next)
	if s.c.reorderW <= 0 || d <= 0 || d > maxHoles {
		return false
	}
	// A skipped PSN sent just before overtook this packet; any other may
	// yet turn up, overtaken by it.
	for q := s.next; q != f.psn; q = wire.PSNAdd(q, 1) {
		if at, ok := s.lastTx[q]; ok && f.eff-at <= s.c.reorderW {
			continue
		}
		s.holes = append(s.holes, checkHole{psn: q, fr: f, at: f.eff, text: bad})
	}
	return true
}

// deferEarly: when the capture shows reordering, a retransmission that
// seems to start at the wrong PSN may have overtaken the packet that
// starts it right; the verdict waits for that packet (clearEarly).
func (s *checkReq) deferEarly(f *checkFrame, bad string) bool {
	if s.c.reorderW <= 0 || wire.PSNDiff(f.psn, s.next) >= 0 {
		return false
	}
	s.early = append(s.early, checkHole{psn: f.psn, fr: f, at: f.eff, text: bad})
	return true
}

// clearEarly: an acceptable packet with PSN p below a waiting early one
// explains it.
func (s *checkReq) clearEarly(p uint32) {
	k := 0
	for _, h := range s.early {
		if d := wire.PSNDiff(h.psn, p); d > 0 && d <= maxHoles {
			s.c.rep.Reordered++
			continue
		}
		s.early[k] = h
		k++
	}
	s.early = s.early[:k]
}

// fillHole: p is a skipped PSN arriving within the reorder window.
func (s *checkReq) fillHole(p uint32, t int64) bool {
	for i, h := range s.holes {
		if h.psn == p {
			s.holes = append(s.holes[:i], s.holes[i+1:]...)
			// A hole may be a PSN sent before, longer ago than the
			// reorder window: then this late copy is a retransmission.
			if _, sent := s.firstTx[p]; sent {
				s.retx++
			} else {
				s.firstTx[p] = t
			}
			s.c.rep.Reordered++
			return true
		}
	}
	return false
}

// expireHoles reports the skips whose PSNs did not turn up within the
// reorder window before time t (one violation per skipping packet).
func (s *checkReq) expireHoles(t int64) {
	k := 0
	var last *checkFrame
	for _, h := range s.holes {
		if t-h.at <= s.c.reorderW {
			s.holes[k] = h
			k++
			continue
		}
		if h.fr != last {
			s.violation(RulePSNOrder, h.fr, "%s (not seen within the reorder window of %v either)", h.text, time.Duration(s.c.reorderW))
			last = h.fr
		}
	}
	s.holes = s.holes[:k]
	k = 0
	for _, h := range s.early {
		if t-h.at <= s.c.reorderW {
			s.early[k] = h
			k++
			continue
		}
		s.violation(RulePSNOrder, h.fr, "%s (and no packet starting it right turned up within the reorder window of %v)", h.text, time.Duration(s.c.reorderW))
	}
	s.early = s.early[:k]
}

// pruneEvery is how many data packets pass between prunings of a
// stream's per-PSN memory; pruneBehind is how far behind what was
// acknowledged (or the highest PSN sent) a PSN is forgotten: a
// retransmission from there is judged without its first transmission's
// time (no latency sample), as one of an acknowledged PSN.
const (
	pruneEvery  = 1 << 13
	pruneBehind = 1 << 12
)

// prune forgets the PSNs far behind: a stream's memory is bounded by its
// window, not by the length of the capture.
func (s *checkReq) prune() {
	ref := s.hi
	if s.ackSet {
		ref = s.acked
	}
	old := func(q uint32) bool { return wire.PSNDiff(q, ref) < -pruneBehind }
	prunePSNs(s.firstTx, old)
	prunePSNs(s.lastTx, old)
	prunePSNs(s.retxSeen, old)
	prunePSNs(s.nakWait, old)
}

// prunePSNs deletes the PSNs old says are.
func prunePSNs[V any](m map[uint32]V, old func(uint32) bool) {
	for q := range m {
		if old(q) {
			delete(m, q)
		}
	}
}

func skipText(next, p uint32) string {
	if wire.PSNAdd(next, 1) == p {
		return fmt.Sprintf("skips PSN %d (expected PSN %d next)", next, next)
	}
	return fmt.Sprintf("skips PSNs %d..%d (expected PSN %d next)", next, wire.PSNAdd(p, -1), next)
}

// checkAck is an acknowledgement state of a stream: everything up to psn
// acknowledged, from time since (capture time) until time until.
type checkAck struct {
	psn          uint32
	frame        int
	since, until int64
}

const maxAckHistory = 32

func (s *checkReq) acknowledge(psn uint32, frame int, t int64) {
	if s.ackSet && wire.PSNDiff(psn, s.acked) <= 0 {
		return
	}
	s.ackSet, s.acked, s.ackFrame, s.ackAt = true, psn, frame, t
	if n := len(s.ackHist); n > 0 {
		s.ackHist[n-1].until = t
	}
	if len(s.ackHist) == maxAckHistory {
		s.ackHist = s.ackHist[1:]
	}
	s.ackHist = append(s.ackHist, checkAck{psn: psn, frame: frame, since: t, until: math.MaxInt64})
}

// restartPoint: p is where a requester restarts (its oldest unacknowledged
// PSN) under an acknowledgement state it may have had when it sent p: one
// current at some time within the in-flight window before p was captured
// (a packet captured now may have left the sender before the latest
// responses reached it), or the stream's first PSN when nothing was
// acknowledged then.
func (s *checkReq) restartPoint(p uint32, t int64) bool {
	from := t - s.c.inFlight
	if len(s.ackHist) == 0 || s.ackHist[0].since > from {
		if p == s.first {
			return true
		}
	}
	for _, a := range s.ackHist {
		if a.until > from && wire.PSNAdd(a.psn, 1) == p {
			return true
		}
	}
	return false
}

// ackedBefore is the acknowledgement state current at time t.
func (s *checkReq) ackedBefore(t int64) (checkAck, bool) {
	for i := len(s.ackHist) - 1; i >= 0; i-- {
		if s.ackHist[i].since <= t {
			return s.ackHist[i], true
		}
	}
	return checkAck{}, false
}

func (s *checkReq) raiseUp(psn uint32) {
	if !s.upSet || wire.PSNDiff(psn, s.up) > 0 {
		s.up, s.upSet, s.hasGap = psn, true, false
		if !s.seqSim() {
			s.advanceUp()
		}
	}
}

// psnRun is a range of PSNs (start .. start+n-1) a READ occupies.
type psnRun struct{ start, n uint32 }

func (r psnRun) covers(q uint32) bool {
	d := wire.PSNDiff(q, r.start)
	return d >= 0 && int64(d) < int64(r.n)
}

// maxRuns bounds the PSN ranges kept per stream (the oldest go first;
// READs that follow one another merge into one range).
const maxRuns = 4096

func addRun(runs []psnRun, r psnRun) []psnRun {
	if k := len(runs) - 1; k >= 0 && wire.PSNAdd(runs[k].start, int(runs[k].n)) == r.start && uint64(runs[k].n)+uint64(r.n) < 1<<23 {
		runs[k].n += r.n // contiguous with the last: one range
		return runs
	}
	if len(runs) == maxRuns {
		runs = append(runs[:0], runs[1:]...)
	}
	return append(runs, r)
}

func inRuns(runs []psnRun, q uint32) bool {
	for _, r := range runs {
		if r.covers(q) {
			return true
		}
	}
	return false
}

// advanceUp moves the responder bound past every PSN seen at it, single
// ones and READ ranges; ranges wholly below it are dropped.
func (s *checkReq) advanceUp() {
	for {
		for s.seen[s.up] {
			delete(s.seen, s.up) // the bound never goes back
			s.up = wire.PSNAdd(s.up, 1)
		}
		moved, k := false, 0
		for _, r := range s.seenRuns {
			end := wire.PSNAdd(r.start, int(r.n))
			if r.covers(s.up) {
				s.up, moved = end, true
				continue
			}
			if wire.PSNDiff(end, s.up) <= 0 {
				continue // wholly below the bound
			}
			s.seenRuns[k] = r
			k++
		}
		s.seenRuns = s.seenRuns[:k]
		if !moved {
			return
		}
	}
}

func (s *checkReq) onACK(f *checkFrame) {
	s.acknowledge(f.psn, f.idx, f.eff)
	s.raiseUp(wire.PSNAdd(f.psn, 1))
}

func (s *checkReq) onRNR(f *checkFrame) {
	s.acknowledge(wire.PSNAdd(f.psn, -1), f.idx, f.eff)
	s.rememberNAK(f.psn, f.idx, true)
}

func (s *checkReq) onNAK(f *checkFrame) {
	e, c := f.psn, s.c
	switch {
	case s.upSet && !s.readUnknown && wire.PSNDiff(e, s.up) > 0:
		s.violation(RuleNAKPSN, f, "NAK asks for PSN %d, but PSN %d never passed this vantage point in sequence: the responder cannot have received it, so it is the first missing PSN", e, s.up)
		s.rememberNAK(e, f.idx, false)
		return
	case s.ackSet && wire.PSNDiff(e, s.acked) <= 0 && c.reordered(s.ackAt, f):
		// The acknowledgement overtook this older NAK on the way: it
		// acknowledges nothing new and asks for nothing.
		return
	case s.ackSet && wire.PSNDiff(e, s.acked) <= 0:
		s.violation(RuleNAKPSN, f, "NAK asks for PSN %d, but PSN %d was already acknowledged (frame %d)", e, s.acked, s.ackFrame+1)
		s.rememberNAK(e, f.idx, false)
		return
	}
	extra := s.nakSet && e == s.lastNAK && !s.repaired
	if extra && f.dupCopy {
		return // the network's copy of the NAK (an injected duplicate)
	}
	if extra {
		c.violation(RuleExtraNAK, f, "second NAK for PSN %d (first at frame %d) before any packet with PSN %d passed this vantage point", e, s.lastNAKFrame+1, e)
	} else {
		if s.hasGap && s.gapFor == e {
			if s.pos.seesGaps() {
				s.sample(&s.nakGen, &c.nakGen, f.eff-s.gapAt)
			}
			s.hasGap = false
		}
		s.nakSet, s.lastNAK, s.lastNAKFrame, s.repaired = true, e, f.idx, false
		if s.pos.isTap() && !s.pos.judgesSender() {
			s.rxNAK, s.rxNAKSet, s.rxNAKFrame = e, true, f.idx
		}
		if s.pos.judgesSender() {
			if _, ok := s.nakWait[e]; !ok {
				s.nakWait[e] = f.eff
			}
		}
	}
	s.acknowledge(wire.PSNAdd(e, -1), f.idx, f.eff)
	s.raiseUp(e)
	s.rememberNAK(e, f.idx, true)
}

// hostAddr reports whether mac can name a host: unicast, and not the
// all-zero address a cooked or raw-IP capture gives for one it did not
// record.
func hostAddr(mac [6]byte) bool { return mac[0]&1 == 0 && mac != [6]byte{} }

// mostCommonMAC is the address counted most often (ties: the lowest), the
// way the checker recognizes a host by the frames on its link.
func mostCommonMAC(count map[[6]byte]int) [6]byte {
	best, n := [6]byte{}, 0
	for mac, k := range count {
		if k > n || (k == n && string(mac[:]) < string(best[:])) {
			best, n = mac, k
		}
	}
	return best
}
