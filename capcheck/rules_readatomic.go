package capcheck

import (
	"fmt"
	"sort"
	"strings"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// RDMA READ and atomics (IBTA Vol. 1 §9.4.3-9.4.5, §9.5, §9.7.4-9.7.5;
// docs/check.md lists the sources).
//
// A READ request of N bytes occupies ceil(N/PMTU) PSNs (one for N = 0):
// the next request carries the PSN after its range, and the responder's
// expected PSN moves past the range when it executes it. Its responses
// carry the PSNs of that range in order: READ RESPONSE ONLY for a
// one-packet READ, else FIRST at its first PSN, MIDDLE, LAST at its last.
// A duplicate READ (a PSN inside a range already executed) is executed
// again, its responses starting at the duplicate's own PSN; a requester
// that lost responses re-issues the READ from the first missing response
// PSN, its RETH VA and length moved on by the PSNs already received times
// the MTU (Linux rxe: rxe_req.c req_retry, rxe_resp.c
// duplicate_request). A READ response acknowledges every PSN up to its
// own. A compare-and-swap or fetch-and-add occupies one PSN and is
// answered by an Atomic Acknowledge with its PSN, carrying the value the
// target held before (AtomicAckETH); a duplicate atomic is not executed
// again but answered from the responder's replay cache, with the same
// original value.
//
// Rules, sound on any vantage point on the path (a response is generated
// after its request reached the responder, so the request passed every
// vantage point on the way first; a loss only removes frames):
//
//   - read-psn: a READ response whose PSN lies in no range of a READ
//     request that passed the vantage point; a response whose opcode does
//     not fit its place in every READ covering it (FIRST or ONLY not at a
//     READ's first PSN, ONLY for a READ of several packets, LAST not at
//     the last PSN, MIDDLE at the first or last); more responses for a PSN
//     than READ requests covering it passed (a response nobody asked for:
//     re-execution follows a duplicate READ; a READ counts as often as
//     any one interface of the capture saw it, since a network that
//     duplicates it after this vantage point has it executed twice). An
//     exact copy of the previous response frame is taken as the network's
//     duplicate. And
//     against the requester: a READ request inside an earlier READ's
//     range whose RETH is not the rest of that READ (a duplicate at the
//     same PSN carries the same VA and length; one re-issued k PSNs in,
//     VA + k×MTU and length - k×MTU).
//   - atomic-psn: an Atomic Acknowledge with a PSN no compare-and-swap or
//     fetch-and-add carried, or more of them for a PSN than atomic
//     requests with it passed (counted as READs are).
//   - atomic-replay: an Atomic Acknowledge for a PSN already answered,
//     with another original value: a duplicate atomic was executed again
//     instead of answered from the replay cache.
//
// psn-order and nak-psn count a READ's PSNs. For psn-order a READ
// response acknowledges its PSN when it arrives in sequence (after a gap
// the requester retries instead: rxe_comp.c check_psn), an Atomic
// Acknowledge its PSN; and a READ or atomic whose responses have not all
// arrived may be asked for again, whole or from its first missing
// response, whatever a NAK for a later PSN says (pendReq). A READ whose
// PSN count the MTU does not say (CheckOptions.MTU; a READ no longer than
// the largest payload in the capture takes one PSN whatever the MTU)
// stops its stream's PSN rules from there on, and the report lists it as
// unchecked.
const (
	RuleReadPSN      = "read-psn"
	RuleAtomicPSN    = "atomic-psn"
	RuleAtomicReplay = "atomic-replay"
)

// frameExt is what the READ and atomic rules keep of a frame: a READ
// request's RETH, an Atomic Acknowledge's original value.
type frameExt struct {
	va     uint64
	length uint32
	orig   uint64
}

func isReadResponse(op wire.Opcode) bool {
	return op >= wire.ReadResponseFirst && op <= wire.ReadResponseOnly
}

func isAtomicReq(op wire.Opcode) bool { return op == wire.CompareSwap || op == wire.FetchAdd }

// noteReadAtomic keeps a READ request's RETH and an Atomic Acknowledge's
// value, and the payload length of a FIRST or MIDDLE packet (one MTU).
func (p *frameParser) noteReadAtomic(i int, f *checkFrame, v *frames.View) {
	if f.icrcOK && !f.ghost {
		switch {
		case f.op == wire.ReadRequest:
			p.rep.ReadRequests++
		case isAtomicReq(f.op):
			p.rep.AtomicRequests++
		}
	}
	switch {
	case f.op == wire.ReadRequest:
		if r := v.RETH(); r != nil {
			p.ext[i] = frameExt{va: r.VA(), length: r.DMALen()}
		}
	case f.op == wire.AtomicAcknowledge:
		if a := v.AtomicAckETH(); len(a) >= 8 {
			p.ext[i] = frameExt{orig: uint64(a[0])<<56 | uint64(a[1])<<48 | uint64(a[2])<<40 | uint64(a[3])<<32 |
				uint64(a[4])<<24 | uint64(a[5])<<16 | uint64(a[6])<<8 | uint64(a[7])}
		}
	}
	if op := f.op; f.icrcOK && !f.ghost && op.Class() == wire.ClassRC && op.Known() && (op.IsSend() || op.IsWrite() || isReadResponse(op)) {
		if !op.IsLast() {
			p.mtuLens[f.payLen]++ // FIRST and MIDDLE packets carry exactly one MTU
		}
		p.maxPay = max(p.maxPay, f.payLen) // no packet carries more than one
	}
}

// mtuFloor is what the MTU is at least: the smallest IBTA allows, or the
// largest payload any packet carried.
func (p *frameParser) mtuFloor() int { return max(256, int(p.maxPay)) }

// ibMTUs are the path MTUs IBTA allows (§9.7.7 ... PMTU 256 to 4096).
var ibMTUs = map[int32]bool{256: true, 512: true, 1024: true, 2048: true, 4096: true}

// pathMTU is the MTU the READ rules count with, and where it came from.
// A given MTU that is no IBTA path MTU (CheckOptions.MTU is not checked
// by Check, which returns no error) is ignored, as if none were given,
// and the why says so: counting PSNs with it would judge READs by an MTU
// no link has.
func (p *frameParser) pathMTU(given int) (int, string) {
	if given > 0 && given <= 4096 && ibMTUs[int32(given)] {
		return given, fmt.Sprintf("%d bytes, given (--mtu)", given)
	}
	mtu, why := p.inferMTU()
	if given != 0 {
		why = fmt.Sprintf("the %d bytes given are no IBTA path MTU (256, 512, 1024, 2048 or 4096) and were ignored; %s", given, why)
	}
	return mtu, why
}

// inferMTU is the MTU the capture's FIRST and MIDDLE payloads say.
func (p *frameParser) inferMTU() (int, string) {
	var lens []int32
	for l := range p.mtuLens {
		lens = append(lens, l)
	}
	sort.Slice(lens, func(i, j int) bool { return lens[i] < lens[j] })
	if len(lens) == 1 && ibMTUs[lens[0]] {
		return int(lens[0]), fmt.Sprintf("%d bytes, inferred: the payload of every FIRST and MIDDLE packet, %s", lens[0], plural(p.mtuLens[lens[0]], "packet"))
	}
	floor := max(256, int(p.maxPay))
	if len(lens) == 0 {
		return 0, fmt.Sprintf("unknown: no FIRST or MIDDLE packet; at least %d bytes, the largest payload, so READs up to that length take one PSN (give --mtu for longer ones)", floor)
	}
	return 0, fmt.Sprintf("unknown: FIRST and MIDDLE payloads of %v bytes do not name one MTU; at least %d bytes, so READs up to that length take one PSN (give --mtu)", lens, floor)
}

// covered says whether the rules judge frames of opcode op; note says
// why not, for the report.
func covered(op wire.Opcode) bool {
	switch {
	case op.Class() == wire.ClassRC && (op.IsSend() || op.IsWrite()) && op.Known():
		return true
	case op == wire.ReadRequest, isReadResponse(op), op == wire.Acknowledge, op == wire.AtomicAcknowledge, isAtomicReq(op):
		return true
	case op == wire.CNP, op.Class() == wire.ClassUD:
		// No PSN rules apply by design: a CNP is a congestion
		// notification, UD is unreliable (counted, not unchecked).
		return true
	case op == wire.OpINAPartial || op == wire.OpINATotal || op == wire.OpINANotify:
		return true // agg-sum's
	}
	return false
}

// noteOpcode counts a good-ICRC frame whose opcode the rules do not cover.
func (p *frameParser) noteOpcode(op wire.Opcode) {
	if !covered(op) {
		p.uncovered[op]++
	}
}

// reportUncovered lists the uncovered opcodes as unchecked.
func (p *frameParser) reportUncovered(rep *Report) {
	if len(p.uncovered) == 0 {
		return
	}
	ops := make([]wire.Opcode, 0, len(p.uncovered))
	for op := range p.uncovered {
		ops = append(ops, op)
	}
	sort.Slice(ops, func(i, j int) bool { return ops[i] < ops[j] })
	rep.UncheckedOpcodes = map[string]int{}
	for _, op := range ops {
		name := op.String()
		rep.UncheckedOpcodes[name] = p.uncovered[op]
		rep.Unchecked = append(rep.Unchecked, fmt.Sprintf("opcode %s (%#02x): %s outside the rules", name, uint8(op), plural(p.uncovered[op], "frame")))
	}
}

// maxReadLen is the longest message IBTA allows (2^31 bytes, Vol. 1
// §9.4.x DMA Length); a READ claiming more is not counted.
const maxReadLen = 1 << 31

// npkts is how many PSNs request f occupies; ok is false for a READ whose
// count the MTU does not say.
func (c *checker) npkts(f *checkFrame) (uint32, bool) {
	if f.op != wire.ReadRequest {
		return 1, true
	}
	e, ok := c.ext[f.idx]
	switch {
	case !ok:
		return 0, false
	case e.length == 0:
		return 1, true
	case e.length > maxReadLen:
		return 0, false // longer than any message: unchecked (uncheckedRead)
	case c.mtu > 0:
		return uint32((uint64(e.length) + uint64(c.mtu) - 1) / uint64(c.mtu)), true
	case int(e.length) <= c.mtuFloor:
		return 1, true // within one MTU whatever it is
	}
	return 0, false
}

// readReq is a READ request that passed a vantage point: PSNs start ..
// start+n-1.
type readReq struct {
	start, n uint32
	frame    int
	va       uint64
	length   uint32
}

func (r readReq) covers(q uint32) bool {
	d := wire.PSNDiff(q, r.start)
	return d >= 0 && d < int32(r.n)
}

func (r readReq) last() uint32 { return wire.PSNAdd(r.start, int(r.n)-1) }

// maxReads bounds the READ requests a stream remembers.
const maxReads = 256

// noteRequest records a READ or atomic request for the response rules
// (ghosts too: more requests only make the rules more lenient).
func (s *checkReq) noteRequest(f *checkFrame, n uint32) {
	if !s.reqSet || wire.PSNDiff(f.psn, s.reqFirst) < 0 {
		s.reqFirst, s.reqSet = f.psn, true
	}
	s.addPending(f.psn, n, isAtomicReq(f.op))
	switch {
	case f.op == wire.ReadRequest:
		e := s.c.ext[f.idx]
		s.checkReissue(f, e)
		if len(s.reads) == maxReads {
			delete(s.rrCount, s.reads[0].frame) // its responses' counts go with it
			s.reads, s.readsForgot = s.reads[1:], true
		}
		s.reads = append(s.reads, readReq{start: f.psn, n: n, frame: f.idx, va: e.va, length: e.length})
	case isAtomicReq(f.op):
		if s.atomics == nil {
			s.atomics, s.atomicAcks, s.atomicOrig = map[uint32]int{}, map[uint32]int{}, map[uint32]atomicAnswer{}
		}
		s.atomics[f.psn]++
	}
}

// checkReissue judges a READ request whose PSN lies in the range of an
// earlier READ of the stream: a duplicate (the same PSN) carries the same
// RETH; one re-issued from the first missing response PSN, k PSNs into
// the range, reads what is left: VA moved on by k×MTU, length less by as
// much (read-psn, against the requester; IBTA Vol. 1 §9.4.4; rxe_req.c
// req_retry).
func (s *checkReq) checkReissue(f *checkFrame, e frameExt) {
	if f.ghost || f.dupCopy {
		return
	}
	for i := len(s.reads) - 1; i >= 0; i-- {
		r := s.reads[i]
		if !r.covers(f.psn) {
			continue
		}
		k := uint64(wire.PSNDiff(f.psn, r.start))
		if k > 0 && s.c.mtu == 0 {
			return // a READ of several PSNs without a known MTU is not counted at all
		}
		step := k * uint64(s.c.mtu)
		if step >= uint64(r.length) && k > 0 {
			return
		}
		wantVA, wantLen := r.va+step, r.length-uint32(step)
		if e.va != wantVA || e.length != wantLen {
			what := fmt.Sprintf("a duplicate of the READ of frame %d (PSNs %d..%d) carries VA %#x length %d, not the original's VA %#x length %d",
				r.frame+1, r.start, r.last(), e.va, e.length, wantVA, wantLen)
			if k > 0 {
				what = fmt.Sprintf("re-issued %d PSNs into the READ of frame %d (PSNs %d..%d), it carries VA %#x length %d, not the rest of that READ: VA %#x length %d",
					k, r.frame+1, r.start, r.last(), e.va, e.length, wantVA, wantLen)
			}
			s.c.violation(RuleReadPSN, f, "READ request at PSN %d: %s", f.psn, what)
		}
		return
	}
}

// pendReq is a READ or atomic request waiting for its responses (PSNs
// start..last; next is the first response PSN not yet seen in sequence).
// Until they all arrive the requester may ask for it again, whole or from
// its first missing response, whatever a NAK for a later PSN says (IBTA
// Vol. 1 §9.7.5; rxe_comp.c check_psn: a pending READ or atomic is
// retried): psn-order accepts going back into its range.
type pendReq struct {
	start, last, next uint32
	atomic            bool
}

// maxPending bounds a stream's pending READs and atomics (an initiator
// depth is a handful; a capture that lost the responses drops the oldest).
const maxPending = 4096

// pendKey names a pending request by its range; pendIdx counts the
// entries of pend with each, so that a request asked again is found
// without scanning pend.
type pendKey struct{ start, last uint32 }

func (s *checkReq) addPending(p, n uint32, atomic bool) {
	last := wire.PSNAdd(p, int(n)-1)
	k := pendKey{p, last}
	if s.pendIdx[k] > 0 {
		return // asked again: still the one
	}
	if s.pendIdx == nil {
		s.pendIdx = map[pendKey]int{}
	}
	if len(s.pend) == maxPending {
		s.unindexPending(s.pend[0])
		s.pend = s.pend[1:]
	}
	s.pend = append(s.pend, pendReq{start: p, last: last, next: p, atomic: atomic})
	s.pendIdx[k]++
}

func (s *checkReq) unindexPending(r pendReq) {
	k := pendKey{r.start, r.last}
	if s.pendIdx[k]--; s.pendIdx[k] <= 0 {
		delete(s.pendIdx, k)
	}
}

// pendingCovers: p is the PSN of a pending READ's missing responses or of
// a pending atomic.
func (s *checkReq) pendingCovers(p uint32) bool {
	for _, q := range s.pend {
		if wire.PSNDiff(p, q.start) >= 0 && wire.PSNDiff(p, q.last) <= 0 {
			return true
		}
	}
	return false
}

// responded: a response with PSN q arrived; READs whose next response it
// is move on, and those it completes (and an atomic it answers) stop
// pending.
func (s *checkReq) responded(q uint32, atomic bool) {
	k := 0
	for _, r := range s.pend {
		if r.atomic == atomic && r.next == q && wire.PSNDiff(q, r.last) <= 0 {
			r.next = wire.PSNAdd(q, 1)
			if wire.PSNDiff(r.next, r.last) > 0 {
				s.unindexPending(r)
				continue // complete
			}
		}
		s.pend[k] = r
		k++
	}
	s.pend = s.pend[:k]
}

type atomicAnswer struct {
	orig  uint64
	frame int
}

// responseBeforeCapture: a response for PSN q may answer a request sent
// before the capture began (or forgotten): it is not judged.
func (s *checkReq) responseBeforeCapture(q uint32) bool {
	return !s.reqSet || wire.PSNDiff(q, s.reqFirst) < 0
}

// onReadResp judges a READ response (read-psn) and takes it as an
// acknowledgement.
func (s *checkReq) onReadResp(f *checkFrame) {
	q := f.psn
	// In sequence (at most one past what is acknowledged: responses
	// arrive in PSN order) it acknowledges its PSN. After a gap (an
	// earlier READ's responses lost, or this READ's) the requester takes
	// it as a sequence error and asks again from the first missing PSN
	// (rxe_comp.c check_psn): nothing more is acknowledged, not even what
	// precedes this READ, since an earlier READ may still miss responses.
	s.responded(q, false)
	if s.ackSet || s.reqSet {
		exp := s.reqFirst
		if s.ackSet {
			exp = wire.PSNAdd(s.acked, 1)
		}
		if wire.PSNDiff(q, exp) <= 0 {
			s.acknowledge(q, f.idx, f.eff)
		}
	}
	s.raiseUp(wire.PSNAdd(q, 1))
	copyOfPrev := s.rrSet && s.rrHash == f.hash
	s.rrSet, s.rrHash = true, f.hash
	if s.readUnknown || f.dupCopy || copyOfPrev || s.responseBeforeCapture(q) {
		return
	}
	cover := s.coverBuf[:0] // reused: one slice per stream, not per response
	for _, r := range s.reads {
		if r.covers(q) {
			cover = append(cover, r)
		}
	}
	s.coverBuf = cover
	name := f.op.String()
	if len(cover) == 0 {
		if s.readsForgot && len(s.reads) > 0 && wire.PSNDiff(q, s.reads[0].start) < 0 {
			return
		}
		s.c.violation(RuleReadPSN, f, "%s carries PSN %d, in the range of no READ request that passed here%s", name, q, s.lastReadText())
		return
	}
	fits := false
	for _, r := range cover {
		first, last := q == r.start, q == r.last()
		switch f.op {
		case wire.ReadResponseOnly:
			fits = fits || (first && r.n == 1)
		case wire.ReadResponseFirst:
			fits = fits || (first && r.n > 1)
		case wire.ReadResponseMiddle:
			fits = fits || (!first && !last)
		case wire.ReadResponseLast:
			fits = fits || (!first && last)
		}
	}
	if !fits {
		r := cover[len(cover)-1]
		s.c.violation(RuleReadPSN, f, "%s at PSN %d does not fit the READ of frame %d (%d bytes, PSNs %d..%d): %s", name, q, r.frame+1, r.length, r.start, r.last(), placeText(f.op, r.n))
		return
	}
	// Responses are counted per READ: the oldest remembered READ covering
	// q (a duplicate's responses add to its count). A READ covering the
	// same PSN value later (after the 24-bit PSN wraps) counts afresh, and
	// the counts of a READ go when it is forgotten (noteRequest).
	if s.rrCount == nil {
		s.rrCount = map[int]map[uint32]int{}
	}
	per := s.rrCount[cover[0].frame]
	if per == nil {
		per = map[uint32]int{}
		s.rrCount[cover[0].frame] = per
	}
	per[q]++
	if k := per[q]; k > len(cover) && k > s.c.readsReaching(s.key, cover) {
		s.c.violation(RuleReadPSN, f, "%s for PSN %d is response %d to it, but only %d READ request(s) covering it passed here (a READ is executed again only for a duplicate READ, from the duplicate's PSN)", name, q, k, len(cover))
	}
}

// readsReaching bounds how many of the READs in cover (those covering a
// PSN that passed one vantage point) reached the responder: each as often
// as it was seen on any one interface of the capture. A network that
// duplicates a READ after this vantage point (the emulator's duplicate
// fault on the responder's link) makes the responder execute it twice.
func (c *checker) readsReaching(k checkStreamKey, cover []readReq) int {
	n := 0
	seen := map[uint32]int{}
	for _, r := range cover {
		seen[r.start]++
	}
	for start, here := range seen {
		n += max(here, c.readMax[readAt{k, start}])
	}
	return n
}

// readAt names a READ request: its stream and PSN.
type readAt struct {
	k   checkStreamKey
	psn uint32
}

// countReads finds, per READ request and per atomic (stream and PSN), the
// most times one interface saw it (readsReaching; an atomic duplicated
// after the vantage point is answered twice, from the replay cache).
func (c *checker) countReads() {
	type at struct {
		r     readAt
		iface int
	}
	per := map[at]int{}
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if f.op == wire.ReadRequest && f.class == fcRequest && f.icrcOK && !f.ghost && !f.notForHost {
			per[at{readAt{f.key(), f.psn}, f.iface}]++
		}
	}
	c.readMax, c.atomicMax = map[readAt]int{}, map[readAt]int{}
	for a, n := range per {
		c.readMax[a.r] = max(c.readMax[a.r], n)
	}
	clear(per)
	for i := range c.fs.len() {
		f := c.fs.at(i)
		if isAtomicReq(f.op) && f.class == fcRequest && f.icrcOK && !f.ghost && !f.notForHost {
			per[at{readAt{f.key(), f.psn}, f.iface}]++
		}
	}
	for a, n := range per {
		c.atomicMax[a.r] = max(c.atomicMax[a.r], n)
	}
}

func placeText(op wire.Opcode, n uint32) string {
	switch op {
	case wire.ReadResponseOnly:
		return fmt.Sprintf("ONLY answers a one-packet READ at its PSN; this READ takes %d", n)
	case wire.ReadResponseFirst:
		return "FIRST belongs at a READ's first PSN, of a READ of several packets"
	case wire.ReadResponseLast:
		return "LAST belongs at a READ's last PSN"
	}
	return "MIDDLE belongs strictly between a READ's first and last PSNs"
}

func (s *checkReq) lastReadText() string {
	if len(s.reads) == 0 {
		return " (none did)"
	}
	r := s.reads[len(s.reads)-1]
	return fmt.Sprintf(" (the last, frame %d, covers PSNs %d..%d)", r.frame+1, r.start, r.last())
}

// onAtomicAck judges an Atomic Acknowledge (atomic-psn, atomic-replay)
// and takes it as the acknowledgement of its PSN.
func (s *checkReq) onAtomicAck(f *checkFrame) {
	q := f.psn
	s.responded(q, true)
	s.acknowledge(q, f.idx, f.eff)
	s.raiseUp(wire.PSNAdd(q, 1))
	copyOfPrev := s.aaSet && s.aaHash == f.hash
	s.aaSet, s.aaHash = true, f.hash
	if f.dupCopy || copyOfPrev || s.responseBeforeCapture(q) {
		return
	}
	reqs := s.atomics[q]
	if reqs == 0 {
		s.c.violation(RuleAtomicPSN, f, "Atomic Acknowledge for PSN %d, but no compare-and-swap or fetch-and-add with PSN %d passed here", q, q)
		return
	}
	s.atomicAcks[q]++
	if k := s.atomicAcks[q]; k > reqs && k > s.c.atomicMax[readAt{s.key, q}] {
		s.c.violation(RuleAtomicPSN, f, "Atomic Acknowledge %d for PSN %d, but only %d atomic request(s) with it passed here", k, q, reqs)
	}
	orig := s.c.ext[f.idx].orig
	if a, ok := s.atomicOrig[q]; ok && a.orig != orig {
		s.c.violation(RuleAtomicReplay, f, "Atomic Acknowledge for PSN %d carries original value %#x, but frame %d answered the same request with %#x: a duplicate atomic is answered from the replay cache, not executed again", q, orig, a.frame+1, a.orig)
	} else if !ok {
		s.atomicOrig[q] = atomicAnswer{orig: orig, frame: f.idx}
	}
}

// uncheckedRead lists a READ whose PSN count the MTU does not say.
func (c *checker) uncheckedRead(s *checkReq, f *checkFrame) {
	key := c.keyText(s.key)
	for _, u := range c.rep.Unchecked {
		if strings.HasPrefix(u, key+": ") {
			return
		}
	}
	if e, ok := c.ext[f.idx]; ok && e.length > maxReadLen {
		c.rep.Unchecked = append(c.rep.Unchecked, fmt.Sprintf("%s: the READ of frame %d claims %d bytes, more than the 2^31 a message may carry, so the PSNs it occupies are unknown: psn-order, nak-psn and read-psn stop for this stream there",
			key, f.idx+1, e.length))
		return
	}
	c.rep.Unchecked = append(c.rep.Unchecked, fmt.Sprintf("%s: the READ of frame %d (%d bytes) takes a number of PSNs the path MTU says, and the MTU is %s: psn-order, nak-psn and read-psn stop for this stream there",
		key, f.idx+1, c.ext[f.idx].length, c.mtuWhy))
}

func readAtomicSummary(r *Report) string {
	if r.ReadRequests+r.AtomicRequests == 0 {
		return ""
	}
	return fmt.Sprintf("%s (path MTU %s), %s", plural(r.ReadRequests, "READ request"), r.PathMTUWhy, plural(r.AtomicRequests, "atomic request"))
}
