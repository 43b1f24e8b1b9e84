package capcheck

import (
	"fmt"
	"sort"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// Pairing that cannot hide a bug. Where the PSN spaces do not tell the
// response streams between two hosts apart (two QPs that started at the
// same PSN), every consistent pairing of what is left is tried, and the
// stream rules are applied under each: a violation found under all of
// them is reported, one found under some only is undecidable
// (Report.Unchecked), and so is a request stream no pairing, or too many,
// accounts for. A pairing of request stream R with response stream S is
// consistent when
//
//   - every positive ACK of S, for PSN q, was captured after R's packet
//     with PSN q passed the same vantage point, or q is before the first
//     PSN of R the capture shows (a responder acknowledges only what it
//     received, and what it received passed every vantage point on its
//     path; timing and PSN ranges at once); NAKs are not used, so that a
//     wrong NAK never rules out its own connection;
//   - when some assignment of the whole group agrees with rxe's UDP
//     source ports (frames.UDPSourcePort: a QP's packets leave from a
//     port hashed from its own QPN, so R's source port names S's QPN or
//     S's names R's), only such assignments.
//
// maxPairings bounds the pairings tried (the product over the ambiguous
// groups of each group's consistent assignments), maxGroupPerms the
// assignments enumerated in one group: beyond them the group's streams
// stay unpaired, and unchecked.
const (
	maxPairings   = 64
	maxGroupPerms = 720
)

// pairingAlt is one reading of the ambiguous groups: per vantage point,
// request stream → response stream.
type pairingAlt map[*checkVantage]map[checkStreamKey]checkStreamKey

// ambiguousGroup is what automatic pairing left at one vantage point
// between two hosts in one direction, and its consistent assignments.
type ambiguousGroup struct {
	vp      *checkVantage
	reqs    []checkStreamKey
	resps   []checkStreamKey
	assigns []map[checkStreamKey]checkStreamKey
	// tooMany: more assignments than maxGroupPerms to enumerate.
	tooMany bool
}

// pairingAlternatives finds the groups automatic pairing left ambiguous
// and returns every combination of their consistent assignments (nil when
// none is ambiguous), and the groups left unpaired (no consistent
// assignment, or too many combinations).
func (c *checker) pairingAlternatives() ([]pairingAlt, []*ambiguousGroup) {
	var groups []*ambiguousGroup
	for _, vp := range c.vantages {
		groups = append(groups, c.ambiguousGroups(vp)...)
	}
	var left []*ambiguousGroup
	alts := []pairingAlt{{}}
	for _, g := range groups {
		if g.tooMany || len(g.assigns) == 0 || len(alts)*len(g.assigns) > maxPairings {
			left = append(left, g)
			continue
		}
		var next []pairingAlt
		for _, a := range alts {
			for _, as := range g.assigns {
				n := pairingAlt{}
				for vp, m := range a {
					n[vp] = m
				}
				m := map[checkStreamKey]checkStreamKey{}
				for k, v := range n[g.vp] {
					m[k] = v
				}
				for k, v := range as {
					m[k] = v
				}
				n[g.vp] = m
				next = append(next, n)
			}
		}
		alts = next
	}
	if len(groups) == len(left) {
		return nil, left
	}
	return alts, left
}

// ambiguousGroups are vp's groups of request and response streams that
// automatic pairing (and --pair) left unpaired between the same two hosts.
func (c *checker) ambiguousGroups(vp *checkVantage) []*ambiguousGroup {
	reqs, resps, paired := c.autoPairs(vp)
	claimed := map[checkStreamKey]bool{}
	for _, sk := range paired {
		claimed[sk] = true
	}
	for _, p := range c.opt.Pairs {
		src, ok1 := c.addrIdx[p.Src]
		dst, ok2 := c.addrIdx[p.Dst]
		if ok1 && ok2 {
			claimed[checkStreamKey{dst, src, p.RespQP}] = true
			paired[checkStreamKey{src, dst, p.ReqQP}] = checkStreamKey{dst, src, p.RespQP}
		}
	}
	type dir struct{ a, b uint32 }
	byDir := map[dir]*ambiguousGroup{}
	var order []dir
	get := func(d dir) *ambiguousGroup {
		g := byDir[d]
		if g == nil {
			g = &ambiguousGroup{vp: vp}
			byDir[d] = g
			order = append(order, d)
		}
		return g
	}
	for _, k := range resps {
		if !claimed[k] {
			g := get(dir{k.dst, k.src})
			g.resps = append(g.resps, k)
		}
	}
	for _, k := range reqs {
		if _, ok := paired[k]; ok {
			continue
		}
		if g := byDir[dir{k.src, k.dst}]; g != nil {
			g.reqs = append(g.reqs, k)
		}
	}
	var out []*ambiguousGroup
	for _, d := range order {
		g := byDir[d]
		if len(g.reqs) == 0 || len(g.resps) == 0 {
			continue
		}
		sort.Slice(g.reqs, func(i, j int) bool { return c.streamKeyLess(g.reqs[i], g.reqs[j]) })
		sort.Slice(g.resps, func(i, j int) bool { return c.streamKeyLess(g.resps[i], g.resps[j]) })
		c.assignments(g)
		out = append(out, g)
	}
	sort.SliceStable(out, func(i, j int) bool { return c.streamKeyLess(out[i].reqs[0], out[j].reqs[0]) })
	return out
}

// assignments enumerates g's consistent assignments: each response stream
// to a distinct request stream (or, with more response streams than
// request streams, each request stream to a distinct response stream).
func (c *checker) assignments(g *ambiguousGroup) {
	n, k := len(g.reqs), len(g.resps)
	lo, hi := min(n, k), max(n, k)
	perms := 1
	for i := 0; i < lo; i++ {
		perms *= hi - i
		if perms > maxGroupPerms {
			g.tooMany = true
			return
		}
	}
	// What consistency needs: per request stream, when each PSN first
	// passed (order at the vantage point) and its source ports; per
	// response stream, its positive ACKs and source ports.
	type ackAt struct {
		psn uint32
		at  int
	}
	firstAt := map[checkStreamKey]map[uint32]int{}
	type runSeen struct {
		psnRun
		at int
	}
	runAt := map[checkStreamKey][]runSeen{}
	const maxPSNMarks = 1 << 12 // PSNs of one READ marked one by one
	firstPSN := map[checkStreamKey]uint32{}
	ports := map[checkStreamKey]map[uint16]bool{}
	acks := map[checkStreamKey][]ackAt{}
	want := map[checkStreamKey]bool{}
	for _, r := range g.reqs {
		want[r], firstAt[r], ports[r] = true, map[uint32]int{}, map[uint16]bool{}
	}
	for _, s := range g.resps {
		want[s], ports[s] = true, map[uint16]bool{}
	}
	for at, i := range g.vp.frames {
		f := c.fs.at(i)
		if !f.icrcOK || f.notForHost || !want[f.key()] {
			continue
		}
		switch f.class {
		case fcRequest:
			if _, ok := firstPSN[f.key()]; !ok {
				firstPSN[f.key()] = f.psn
			}
			n, _ := c.npkts(f) // a READ passes once for all its PSNs
			n = max(n, 1)
			for k := range min(n, maxPSNMarks) {
				if q := wire.PSNAdd(f.psn, int(k)); !hasKey(firstAt[f.key()], q) {
					firstAt[f.key()][q] = at
				}
			}
			if n > maxPSNMarks {
				// the rest of a long READ is kept as a range
				runAt[f.key()] = append(runAt[f.key()], runSeen{psnRun{f.psn, n}, at})
			}
			if !f.ghost {
				ports[f.key()][f.sport] = true
			}
		case fcAck:
			if f.ghost {
				continue
			}
			ports[f.key()][f.sport] = true
			if f.op == wire.Acknowledge && f.syn.IsACK() {
				acks[f.key()] = append(acks[f.key()], ackAt{f.psn, at})
			}
		}
	}
	consistent := func(r, s checkStreamKey) bool {
		for _, a := range acks[s] {
			first, seen := firstPSN[r]
			if !seen {
				return false
			}
			if wire.PSNDiff(a.psn, first) < 0 {
				continue
			}
			at, ok := firstAt[r][a.psn]
			for _, x := range runAt[r] { // the rest of long READs, when the PSN is not marked or marked late
				if ok && at <= a.at {
					break
				}
				if x.covers(a.psn) && (!ok || x.at < at) {
					at, ok = x.at, true
				}
			}
			if !ok || at > a.at {
				return false
			}
		}
		return true
	}
	portMatch := func(r, s checkStreamKey) bool {
		one := func(p map[uint16]bool, qpn uint32) bool {
			return len(p) == 1 && p[frames.UDPSourcePort(qpn)]
		}
		return one(ports[r], s.qp) || one(ports[s], r.qp)
	}
	var all, byPort []map[checkStreamKey]checkStreamKey
	used := make([]bool, hi)
	cur := make([]int, lo)
	var rec func(i int)
	rec = func(i int) {
		if i == lo {
			m := map[checkStreamKey]checkStreamKey{}
			ok, port := true, true
			for j, x := range cur {
				r, s := g.reqs[j], checkStreamKey{}
				if n <= k {
					s = g.resps[x]
				} else {
					r, s = g.reqs[x], g.resps[j]
				}
				ok = ok && consistent(r, s)
				port = port && portMatch(r, s)
				m[r] = s
			}
			if ok {
				all = append(all, m)
				if port {
					byPort = append(byPort, m)
				}
			}
			return
		}
		for x := 0; x < hi; x++ {
			if !used[x] {
				used[x], cur[i] = true, x
				rec(i + 1)
				used[x] = false
			}
		}
	}
	rec(0)
	if len(byPort) > 0 {
		all = byPort
	}
	g.assigns = all
}

// pairingText is one assignment, as the report writes it.
func (c *checker) pairingText(m map[checkStreamKey]checkStreamKey) string {
	keys := make([]checkStreamKey, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return c.streamKeyLess(keys[i], keys[j]) })
	s := ""
	for i, k := range keys {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("qp %#06x=%#06x", k.qp, m[k].qp)
	}
	return s
}

func hasKey[K comparable, V any](m map[K]V, k K) bool {
	_, ok := m[k]
	return ok
}
