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
	// (rules_rules_readatomic.go).
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
