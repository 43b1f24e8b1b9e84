package capcheck

import (
	"fmt"
	"sort"
	"time"

	"github.com/inaemu/inaemu/frames/wire"
)

// The cnp family: DCQCN's notification point (NP) at a RoCEv2 receiver
// (Zhu et al., "Congestion Control for Large-Scale RDMA Deployments",
// SIGCOMM 2015, §3.2, the NP algorithm): a data packet that arrives with
// IP ECN = CE (11) for a QP makes the receiver send a congestion notification packet (CNP:
// BTH opcode 0x81, BECN set, destination QP the sender's QP of the
// connection) back to the sender, at most one per QP per interval N (the
// paper's NP "generates at most one CNP packet every 50 microseconds for
// the flow"). Both rules are judged on a host's link only (never on one
// that carries multi-rack NetReduce's switch-to-switch frames), where the
// receiver's traffic is seen as it leaves it (X-in, or an A-B direction
// read as leaving a host) and what it receives as it arrives (X-out):
// elsewhere queues between the receiver and the capture bunch CNPs up or
// hold them back.
//
//   - cnp-missing: a CE-marked data packet (SEND, WRITE or READ response
//     with a good ICRC, delivered) on X-out for which no CNP from the
//     receiver to its sender for the connection passed X-in within the
//     interval plus the in-flight tolerance either side of it: an NP that
//     sends at once sends one at most N after the previous one, which may
//     have covered this packet; one that gathers marks sends within N
//     after it. Judged when the receiver sent any CNP in the capture
//     (its NP is on) or CheckOptions.CNP says CNPOn; a packet whose
//     window reaches past the capture's end is not judged.
//   - cnp-rate: two CNPs from one receiver for one QP closer than the
//     interval less CheckOptions.CNPTolerance (the second may have
//     waited less behind a frame on the line than the first).

// Rule names of the cnp family.
const (
	RuleCNPMissing = "cnp-missing"
	RuleCNPRate    = "cnp-rate"
)

// DefaultCNPInterval is CheckOptions.CNPInterval's default: DCQCN's N,
// the least time between two CNPs for one QP (Zhu et al. 2015, §3.2:
// 50 µs).
const DefaultCNPInterval = 50 * time.Microsecond

// DefaultCNPTolerance is CheckOptions.CNPTolerance's default: how much
// closer than the interval two CNPs may be captured (a CNP waits at most
// for the frame on the line before it: a 4 KiB frame takes 3.3 µs at
// 10 Gb/s).
const DefaultCNPTolerance = 5 * time.Microsecond

// CNPMode says when cnp-missing judges (CheckOptions.CNP).
type CNPMode uint8

const (
	// CNPAuto: for a receiver that sent at least one CNP in the capture.
	CNPAuto CNPMode = iota
	// CNPOn: for every receiver (the NP is known to be on).
	CNPOn
	// CNPOff: never.
	CNPOff
)

var cnpModeNames = [...]string{"auto", "on", "off"}

func (m CNPMode) String() string {
	if int(m) < len(cnpModeNames) {
		return cnpModeNames[m]
	}
	return fmt.Sprintf("cnp(%d)", m)
}

// ParseCNPMode reads auto, on or off.
func ParseCNPMode(s string) (CNPMode, error) {
	for i, n := range cnpModeNames {
		if s == n {
			return CNPMode(i), nil
		}
	}
	return 0, fmt.Errorf("cnp %q: want auto, on or off", s)
}

// cnpKey is one receiver's CNPs for one QP: from, to (address indexes)
// and the destination QP.
type cnpKey struct {
	src, dst, qp uint32
}

// cnpRules applies the cnp family.
func (c *checker) cnpRules() {
	interval := c.opt.CNPInterval
	if interval <= 0 {
		interval = DefaultCNPInterval
	}
	tol := c.opt.CNPTolerance
	switch {
	case tol == 0:
		tol = DefaultCNPTolerance
	case tol < 0:
		tol = 0
	}
	iv := interval.Nanoseconds()
	var end int64
	cnpFrom := map[uint32]bool{} // receivers that sent a CNP, anywhere
	byKey := map[cnpKey][]*checkFrame{}
	for i := range c.fs.len() {
		f := c.fs.at(i)
		end = max(end, f.ts)
		if f.op != wire.CNP || f.class != fcRoCE {
			continue
		}
		if !f.ghost {
			c.rep.CNPFrames++
		}
		cnpFrom[f.src] = true
		// A CNP the receiver sent, as it leaves it: ghosts too (a fault
		// dropped it further on), not the network's copies.
		if c.ifaceSide[f.iface] != sideIn || f.dupCopy || !f.icrcOK || c.onTree(f) {
			continue
		}
		k := cnpKey{f.src, f.dst, f.qp}
		byKey[k] = append(byKey[k], f)
	}
	keys := make([]cnpKey, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return byKey[keys[i]][0].idx < byKey[keys[j]][0].idx })
	for _, k := range keys {
		fs := byKey[k]
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].ts < fs[j].ts })
		for j, f := range fs {
			c.rep.CNPsJudged++
			if j > 0 && f.ts-fs[j-1].ts < iv-tol.Nanoseconds() {
				c.violation(RuleCNPRate, f, "CNP for QP %#06x %v after frame %d's for the same QP from the same receiver: at most one per QP per %v (tolerance %v)",
					f.qp, time.Duration(f.ts-fs[j-1].ts), fs[j-1].idx+1, interval, tol)
			}
		}
	}
	c.cnpMissing(byKey, cnpFrom, iv, end)
}

// cnpMissing is cnp-missing (see the family's comment).
func (c *checker) cnpMissing(byKey map[cnpKey][]*checkFrame, cnpFrom map[uint32]bool, iv, end int64) {
	if c.opt.CNP == CNPOff {
		return
	}
	// The sender's QP of a connection: its request stream's responses'
	// destination QP, paired as the connection count pairs them.
	backQP := c.connectionPeers()
	// CNPs by receiver and sender, any QP (for connections not paired).
	byHosts := map[[2]uint32][]*checkFrame{}
	for k, fs := range byKey {
		h := [2]uint32{k.src, k.dst}
		byHosts[h] = append(byHosts[h], fs...)
	}
	for _, fs := range byHosts {
		sort.SliceStable(fs, func(i, j int) bool { return fs[i].ts < fs[j].ts })
	}
	win := iv + c.inFlight
	type miss struct {
		first *checkFrame
		n     int
	}
	misses := map[checkStreamKey]*miss{}
	var order []checkStreamKey
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if !f.ce || f.ghost || !f.icrcOK || f.notForHost || c.ifaceSide[f.iface] != sideOut || !carriesData(f) || c.onTree(f) {
			continue
		}
		if (c.opt.CNP == CNPAuto && !cnpFrom[f.dst]) || f.ts+win > end {
			c.rep.CEUnjudged++
			continue
		}
		c.rep.CEJudged++
		var cands []*checkFrame
		if q, ok := backQP[f.key()]; ok {
			cands = byKey[cnpKey{f.dst, f.src, q}]
		} else {
			cands = byHosts[[2]uint32{f.dst, f.src}]
		}
		// the first CNP at or after f.ts - win
		j := sort.Search(len(cands), func(j int) bool { return cands[j].ts >= f.ts-win })
		if j < len(cands) && cands[j].ts <= f.ts+win {
			continue
		}
		m := misses[f.key()]
		if m == nil {
			m = &miss{first: f}
			misses[f.key()] = m
			order = append(order, f.key())
		}
		m.n++
	}
	for _, k := range order {
		m := misses[k]
		more := ""
		if m.n > 1 {
			more = fmt.Sprintf("; %d CE-marked packets of this QP in all went without one", m.n)
		}
		c.violation(RuleCNPMissing, m.first, "CE-marked packet delivered to %s, and no CNP from it to %s for this connection within %v either side (interval %v + in-flight %v)%s",
			c.addrs[m.first.dst], c.addrs[m.first.src], time.Duration(win), time.Duration(iv), time.Duration(c.inFlight), more)
	}
}

// onTree: f was captured on a link that carries multi-rack NetReduce's
// switch-to-switch frames, a link between switches whatever its MACs
// say (a leaf's uplink whose partials all come from one address reads
// as a host's link), where the cnp rules do not judge.
func (c *checker) onTree(f *checkFrame) bool {
	vp := c.ifaceVP[f.iface]
	return vp != nil && vp.tree
}

// carriesData: a SEND, WRITE or READ response packet (what an NP reacts
// to; ACKs and CNPs carry no data).
func carriesData(f *checkFrame) bool {
	return (f.class == fcRequest && (f.op.IsSend() || f.op.IsWrite())) || (f.class == fcAck && isReadResponse(f.op))
}

// connectionPeers maps the key of a connection's data packets to the QP
// of the other end (the destination QP of the packets going back): a
// request stream to its response stream's, a response stream (READ
// responses) to its request stream's, as pairKeys pairs them over the
// whole capture.
func (c *checker) connectionPeers() map[checkStreamKey]uint32 {
	reqSet, respSet := map[checkStreamKey]bool{}, map[checkStreamKey]bool{}
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if !f.icrcOK || f.ghost {
			continue
		}
		switch f.class {
		case fcRequest:
			reqSet[f.key()] = true
		case fcAck:
			respSet[f.key()] = true
		}
	}
	if len(reqSet) == 0 {
		return nil
	}
	sorted := func(m map[checkStreamKey]bool) []checkStreamKey {
		out := make([]checkStreamKey, 0, len(m))
		for k := range m {
			out = append(out, k)
		}
		sort.Slice(out, func(i, j int) bool { return c.streamKeyLess(out[i], out[j]) })
		return out
	}
	out := map[checkStreamKey]uint32{}
	for req, resp := range pairKeys(sorted(reqSet), sorted(respSet), c.opt.Pairs, c.spans, c.addrIdx) {
		out[req] = resp.qp
		out[resp] = req.qp
	}
	return out
}

func cnpSummary(r *Report) string {
	if r.CNPFrames == 0 && r.CEJudged+r.CEUnjudged == 0 {
		return ""
	}
	s := fmt.Sprintf("%s (%d judged for their rate at their receiver's link), %d CE-marked data packets judged for one", plural(r.CNPFrames, "CNP"), r.CNPsJudged, r.CEJudged)
	if r.CEUnjudged > 0 {
		s += fmt.Sprintf(", %d not (their receiver sent no CNP in the capture: give --cnp on to judge them, or the capture ends within the interval)", r.CEUnjudged)
	}
	return s
}
