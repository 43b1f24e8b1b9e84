package capcheck

import "strings"

// Interfaces that are the two directions of one link, found by name, and
// which of them leaves a host. See Check ("Vantage points") for the rules.

// linkName is where an interface sits on its link: the vantage point the
// two directions merge into and this direction's side.
type linkName struct {
	vp   string
	side uint8 // sideIn or sideOut (X-in/X-out); sideFwd or sideRev (A-B/B-A)
}

// pairLinkNames finds the names that are one direction of a link whose
// other direction is named too: X-in with X-out (vantage point X), then
// A-B with B-A, a parallel link's A-B#k with B-A#k (vantage point A~B or
// A~B#k, the two node names in byte order; the direction from the first
// one is sideFwd). Names are taken in order, each pairing at most once,
// and a name with several hyphens tries its splits left to right: the
// pairing is one to one, and only names that could pair several ways
// (a-b-c, b-c-a, c-a-b) depend on the order.
func pairLinkNames(names []string) map[string]linkName {
	has := map[string]bool{}
	var order []string
	for _, n := range names {
		if !has[n] {
			has[n] = true
			order = append(order, n)
		}
	}
	out := map[string]linkName{}
	for _, n := range order {
		if base, ok := strings.CutSuffix(n, "-in"); ok && base != "" && has[base+"-out"] {
			out[n] = linkName{base, sideIn}
		} else if base, ok := strings.CutSuffix(n, "-out"); ok && base != "" && has[base+"-in"] {
			out[n] = linkName{base, sideOut}
		}
	}
	for _, n := range order {
		if _, done := out[n]; done {
			continue
		}
		base, suffix := n, ""
		if k := strings.LastIndexByte(n, '#'); k >= 0 {
			base, suffix = n[:k], n[k:]
		}
		for i := 0; i < len(base); i++ {
			if base[i] != '-' {
				continue
			}
			a, b := base[:i], base[i+1:]
			m := b + "-" + a + suffix
			if a == "" || b == "" || m == n || !has[m] {
				continue
			}
			if _, done := out[m]; done {
				continue
			}
			lo, hi := min(a, b), max(a, b)
			vp := lo + "~" + hi + suffix
			if a == lo {
				out[n], out[m] = linkName{vp, sideFwd}, linkName{vp, sideRev}
			} else {
				out[n], out[m] = linkName{vp, sideRev}, linkName{vp, sideFwd}
			}
			break
		}
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

// orientHostLinks decides, for every vantage point merged from A-B and
// B-A, whether it is a host's link and which direction leaves the host:
// direction D goes host → switch when one unicast MAC is the source of at
// least hostLinkShare of D's frames and the destination of at least
// hostLinkShare of the reverse direction's (both directions carrying
// such frames). When exactly one direction qualifies its interfaces
// become sideIn and the reverse's sideOut, as X-in and X-out; otherwise
// (a link between switches, or one whose two ends each talk only to the
// other, such as a host's link in a two-host network, which MACs cannot
// orient) they stay sideFwd and sideRev: a link between switches.
func (c *checker) orientHostLinks(macs func(i int) (dst, src [6]byte, ok bool)) {
	type dirCount struct {
		src, dst   map[[6]byte]int
		nSrc, nDst int
	}
	count := map[*checkVantage]*[2]dirCount{}
	for i := range c.fs {
		side := c.ifaceSide[c.fs[i].iface]
		if side != sideFwd && side != sideRev {
			continue
		}
		dst, src, ok := macs(i)
		if !ok {
			continue
		}
		vp := c.ifaceVP[c.fs[i].iface]
		cs := count[vp]
		if cs == nil {
			cs = &[2]dirCount{}
			for k := range cs {
				cs[k] = dirCount{src: map[[6]byte]int{}, dst: map[[6]byte]int{}}
			}
			count[vp] = cs
		}
		d := &cs[side-sideFwd]
		if src[0]&1 == 0 {
			d.src[src]++
			d.nSrc++
		}
		if dst[0]&1 == 0 {
			d.dst[dst]++
			d.nDst++
		}
	}
	// fromHost: direction up leaves a host for the switch, direction down
	// the reverse.
	fromHost := func(up, down *dirCount) bool {
		if up.nSrc == 0 || down.nDst == 0 {
			return false
		}
		host := mostCommonMAC(up.src)
		return float64(up.src[host]) >= hostLinkShare*float64(up.nSrc) &&
			float64(down.dst[host]) >= hostLinkShare*float64(down.nDst)
	}
	for vp, cs := range count {
		fwdUp, revUp := fromHost(&cs[0], &cs[1]), fromHost(&cs[1], &cs[0])
		if fwdUp == revUp {
			continue // between switches, or not to be told apart
		}
		for i, v := range c.ifaceVP {
			if v != vp {
				continue
			}
			if (c.ifaceSide[i] == sideFwd) == fwdUp {
				c.ifaceSide[i] = sideIn
			} else {
				c.ifaceSide[i] = sideOut
			}
			c.ifaceHostLink[i] = true
		}
	}
}
