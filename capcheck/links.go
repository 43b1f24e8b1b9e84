package capcheck

import (
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Interfaces that are the two directions of one link, found by name, and
// which of them leaves a host. See Check ("Vantage points") for the rules.

// linkName is where an interface sits on its link: the vantage point the
// two directions merge into and this direction's side.
type linkName struct {
	vp   string
	side uint8 // sideIn or sideOut (X-in/X-out); sideFwd or sideRev (A-B/B-A)
}

// The checker's side numbers are pcapio's (a compile error otherwise).
var _ = [1]int{}[int(sideIn)-int(pcapio.SideIn)+int(sideOut)-int(pcapio.SideOut)+int(sideFwd)-int(pcapio.SideFwd)+int(sideRev)-int(pcapio.SideRev)]

// pairLinkNames is pcapio.LinkNames in the checker's terms: X-in/X-out
// give sideIn/sideOut, A-B/B-A sideFwd/sideRev (the Side values are the
// checker's side numbers).
func pairLinkNames(names []string) map[string]linkName {
	out := map[string]linkName{}
	for n, l := range pcapio.LinkNames(names) {
		out[n] = linkName{l.Link, uint8(l.Side)}
	}
	return out
}

// hostLinkShare is the share of a direction's frames (with a unicast
// address in the field looked at) that must come from, or go to, one MAC
// for that MAC to be taken as the host of the link: frames on a host's
// link are all from or to it, but for the odd frame a switch floods (a
// bit error in the destination MAC) or a station it has not learned yet;
// on a link between switches the traffic of several hosts mixes.
const hostLinkShare = 0.9

// hostCandidate is a way to read a link as a host's: dir (0: sideFwd, 1:
// sideRev) leaves host mac.
type hostCandidate struct {
	mac [6]byte
	dir int
}

// orientHostLinks decides, for every vantage point merged from A-B and
// B-A, whether it is a host's link and which direction leaves the host.
//
// By MACs, direction D may leave host M when M is the source of at least
// hostLinkShare of D's frames with a unicast source and the destination
// of at least hostLinkShare of the reverse direction's frames with a
// unicast destination (both directions carrying such frames). That holds
// on M's own link, but also on every link further on that carries only
// M's traffic (a leaf switch's uplink when M is the leaf's one host), and
// on a host's link in a two-host network it holds both ways. Where frames
// were seen first tells them apart: a frame crosses its sender's link
// before any other, so D is ruled out when more of M's frames on D (that
// were captured on other interfaces too) were captured elsewhere first
// than on D first. A capture of one link alone gives no such evidence and
// the MAC reading stands.
//
// When exactly one reading remains, that direction becomes sideIn and the
// reverse sideOut, as X-in and X-out. Otherwise the pair stays sideFwd
// and sideRev: a link between switches, or one the capture cannot orient.
func (c *checker) orientHostLinks() {
	type dirCount struct {
		src, dst   map[[6]byte]int
		nSrc, nDst int
	}
	count := map[*checkVantage]*[2]dirCount{}
	for i := range c.fs.len() {
		side := c.ifaceSide[c.fs.at(i).iface]
		if side != sideFwd && side != sideRev {
			continue
		}
		if !c.fs.at(i).hasMAC {
			continue
		}
		dst, src := c.fs.at(i).dstMAC, c.fs.at(i).srcMAC
		vp := c.ifaceVP[c.fs.at(i).iface]
		cs := count[vp]
		if cs == nil {
			cs = &[2]dirCount{}
			for k := range cs {
				cs[k] = dirCount{src: map[[6]byte]int{}, dst: map[[6]byte]int{}}
			}
			count[vp] = cs
		}
		dc := &cs[side-sideFwd]
		if src[0]&1 == 0 {
			dc.src[src]++
			dc.nSrc++
		}
		if dst[0]&1 == 0 {
			dc.dst[dst]++
			dc.nDst++
		}
	}
	cands := map[*checkVantage][]hostCandidate{}
	for vp, cs := range count {
		for dir := range 2 {
			up, down := &cs[dir], &cs[1-dir]
			if up.nSrc == 0 || down.nDst == 0 {
				continue
			}
			host := mostCommonMAC(up.src)
			if float64(up.src[host]) >= hostLinkShare*float64(up.nSrc) && float64(down.dst[host]) >= hostLinkShare*float64(down.nDst) {
				cands[vp] = append(cands[vp], hostCandidate{host, dir})
			}
		}
	}
	if len(cands) == 0 {
		return
	}
	// One pass over the frames: votes of each reading, here (first
	// captured on this direction) and elsewhere.
	type candKey struct {
		vp  *checkVantage
		dir int
		mac [6]byte
	}
	votes := map[candKey]*[2]int{}
	for vp, cc := range cands {
		for _, h := range cc {
			votes[candKey{vp, h.dir, h.mac}] = &[2]int{}
		}
	}
	first := c.firstSightings()
	for i := range c.fs.len() {
		f := c.fs.at(i)
		side := c.ifaceSide[f.iface]
		if (side != sideFwd && side != sideRev) || !f.hasMAC {
			continue
		}
		v := votes[candKey{c.ifaceVP[f.iface], int(side - sideFwd), f.srcMAC}]
		if v == nil {
			continue
		}
		switch s := first[f.hash]; {
		case !s.shared:
		case c.ifaceVP[s.iface] == c.ifaceVP[f.iface] && c.ifaceSide[s.iface] == side:
			v[0]++
		default:
			v[1]++
		}
	}
	for vp, cc := range cands {
		var keep []hostCandidate
		for _, h := range cc {
			if v := votes[candKey{vp, h.dir, h.mac}]; v[1] <= v[0] {
				keep = append(keep, h)
			}
		}
		if len(keep) != 1 {
			continue // between switches, or not to be told apart
		}
		for i, v := range c.ifaceVP {
			if v != vp {
				continue
			}
			if c.ifaceSide[i] == sideFwd+uint8(keep[0].dir) {
				c.ifaceSide[i] = sideIn
			} else {
				c.ifaceSide[i] = sideOut
			}
			c.ifaceHostLink[i] = true
		}
	}
}

// sighting is where a frame's bytes were captured first (earliest
// timestamp, ties in capture order) and whether they were captured on
// more than one interface.
type sighting struct {
	iface  int
	ts     int64
	idx    int
	shared bool
}

// firstSightings indexes every frame of the capture by its bytes.
func (c *checker) firstSightings() map[uint64]sighting {
	m := make(map[uint64]sighting, c.fs.len())
	for i := range c.fs.len() {
		f := c.fs.at(i)
		h := f.hash
		s, ok := m[h]
		if !ok {
			m[h] = sighting{iface: f.iface, ts: f.ts, idx: i}
			continue
		}
		if f.iface != s.iface {
			s.shared = true
		}
		if f.ts < s.ts || (f.ts == s.ts && i < s.idx) {
			s.iface, s.ts, s.idx = f.iface, f.ts, i
		}
		m[h] = s
	}
	return m
}
