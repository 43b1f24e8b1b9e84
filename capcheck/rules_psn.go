package capcheck

import (
	"fmt"
	"math"
	"time"

	"github.com/inaemu/inaemu/frames/wire"
)

// The go-back-N family: psn-order, nak-psn, extra-nak and ack-regress,
// judged per connection on the requester's stream (checkReq) and the
// responder's (checkResp) at each vantage point. Which vantage points and
// connections they run on, and under which pairings, is stream.go's.

// Rule names of the go-back-N family.
const (
	RulePSNOrder   = "psn-order"
	RuleNAKPSN     = "nak-psn"
	RuleExtraNAK   = "extra-nak"
	RuleACKRegress = "ack-regress"
)

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
	// (rules_rules_readatomic.go).
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
