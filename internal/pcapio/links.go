package pcapio

import "strings"

// Side is which direction of a link an interface captured.
type Side uint8

const (
	SideIn  Side = iota + 1 // X-in of X-in/X-out (inaemu's star: host X → switch)
	SideOut                 // X-out
	SideFwd                 // A-B of A-B/B-A, A the first of the two names in byte order
	SideRev                 // B-A
)

// LinkDir places an interface on its link: the link's name (X for X-in and
// X-out, A~B or A~B#k for A-B and B-A or a parallel link's A-B#k and
// B-A#k) and the direction it captured.
type LinkDir struct {
	Link string
	Side Side
}

// LinkNames finds, among a capture's interface names, those that are one
// direction of a link whose other direction is named too: X-in with X-out
// first, then A-B with B-A (and A-B#k with B-A#k). This is how inaemu
// names link directions; the capture checker, replay and the graphs read
// them the same way. Names are taken in order, each pairing at most once,
// and a name with several hyphens tries its splits left to right: the
// pairing is one to one, and only names that could pair several ways
// (a-b-c, b-c-a, c-a-b) depend on the order. Names that pair with nothing
// are not in the map.
func LinkNames(names []string) map[string]LinkDir {
	has := map[string]bool{}
	var order []string
	for _, n := range names {
		if !has[n] {
			has[n] = true
			order = append(order, n)
		}
	}
	out := map[string]LinkDir{}
	for _, n := range order {
		if base, ok := strings.CutSuffix(n, "-in"); ok && base != "" && has[base+"-out"] {
			out[n] = LinkDir{base, SideIn}
		} else if base, ok := strings.CutSuffix(n, "-out"); ok && base != "" && has[base+"-in"] {
			out[n] = LinkDir{base, SideOut}
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
			link := lo + "~" + hi + suffix
			if a == lo {
				out[n], out[m] = LinkDir{link, SideFwd}, LinkDir{link, SideRev}
			} else {
				out[n], out[m] = LinkDir{link, SideRev}, LinkDir{link, SideFwd}
			}
			break
		}
	}
	return out
}
