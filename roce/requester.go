package roce

import (
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// maxPktPerAck is rxe's RXE_MAX_PKT_PER_ACK: inside a long message the
// requester sets AckReq on roughly every 66th packet (docs/roce.md §1).
const maxPktPerAck = 64

type swqe struct {
	wr       SendWR
	firstPSN uint32
	lastPSN  uint32
	npkts    int
}

// requester is the send side and the completer (rxe_req.c, rxe_comp.c).
type requester struct {
	mtu        int
	sq         ring[swqe]
	nextPSN    uint32 // PSN the next posted WQE starts at
	psn        uint32 // next PSN to transmit (req.psn)
	idx        int    // sq offset of the WQE holding psn
	compPSN    uint32 // oldest unacknowledged PSN (comp.psn)
	sentHigh   uint32 // one past the highest PSN ever transmitted
	noackPkts  int
	retryLeft  uint8
	rnrLeft    uint8
	retryCnt   uint8
	rnrRetry   uint8
	started    bool // a NAK-triggered retry is running (rxe started_retry)
	timeout    uint8
	profile    Profile
	window     int
	timer      Timer
	timerOn    bool
	rnrTimer   Timer
	rnrWaiting bool
	maxRd      int // MaxRdAtomic
	rdOut      int // READs and atomics among sq[0:idx]: sent, not completed
	// resendPSN is where the latest rewind resent from (resendOn: one has
	// happened): while it is still comp.psn, responses missing there are
	// already being asked for again.
	resendPSN uint32
	resendOn  bool
	rto       rto // the wall clock's adaptive timer (rto.go)
}

func (r *requester) init(cfg Config) {
	*r = requester{mtu: cfg.MTU, sq: newRing[swqe](cfg.MaxSendWR), nextPSN: cfg.SQPSN, psn: cfg.SQPSN,
		compPSN: cfg.SQPSN, sentHigh: cfg.SQPSN, retryLeft: cfg.RetryCnt, rnrLeft: cfg.RNRRetry,
		retryCnt: cfg.RetryCnt, rnrRetry: cfg.RNRRetry, timeout: cfg.Timeout, profile: cfg.Profile, window: cfg.MaxUnacked,
		maxRd: cfg.MaxRdAtomic, rto: rto{on: cfg.AdaptiveTimeout}}
}

// packets is how many packets a message of n bytes takes; a zero-length
// message is one ONLY packet.
func packets(n, mtu int) int { return max(1, (n+mtu-1)/mtu) }

// wrPackets is how many PSNs a work request occupies: a message's packets,
// a READ's response packets (its one request packet takes the first of
// them), one for an atomic.
func wrPackets(wr SendWR, mtu int) int {
	if wr.Opcode.Atomic() {
		return 1
	}
	return packets(len(wr.Local), mtu)
}

func (r *requester) post(mtu int, wr SendWR) {
	n := wrPackets(wr, mtu)
	r.sq.push(swqe{wr: wr, firstPSN: r.nextPSN, lastPSN: wire.PSNAdd(r.nextPSN, n-1), npkts: n})
	r.nextPSN = wire.PSNAdd(r.nextPSN, n)
}

// canSend: a posted packet remains, the window has room, no RNR wait, and
// a READ or atomic finds fewer than MaxRdAtomic of them outstanding.
func (r *requester) canSend() bool {
	if r.rnrWaiting || r.psn == r.nextPSN || int(wire.PSNDiff(r.psn, r.compPSN)) >= r.window {
		return false
	}
	return !r.sq.at(r.idx).wr.Opcode.ReadOrAtomic() || r.rdOut < r.maxRd
}

var wrOps = [4][4]wire.Opcode{ // [WROpcode][first, middle, last, only]
	WRWrite:    {wire.WriteFirst, wire.WriteMiddle, wire.WriteLast, wire.WriteOnly},
	WRWriteImm: {wire.WriteFirst, wire.WriteMiddle, wire.WriteLastWithImm, wire.WriteOnlyWithImm},
	WRSend:     {wire.SendFirst, wire.SendMiddle, wire.SendLast, wire.SendOnly},
	WRSendImm:  {wire.SendFirst, wire.SendMiddle, wire.SendLastWithImm, wire.SendOnlyWithImm},
}

// build writes the request packet for r.psn and advances it.
func (r *requester) build(q *QP, buf []byte) (int, error) {
	w := r.sq.at(r.idx)
	if w.wr.Opcode.ReadOrAtomic() {
		return r.buildReadAtomic(q, buf, w)
	}
	i := int(wire.PSNDiff(r.psn, w.firstPSN))
	off := i * r.mtu
	end := min(off+r.mtu, len(w.wr.Local))
	pos := 1 // middle
	switch {
	case w.npkts == 1:
		pos = 3
	case i == 0:
		pos = 0
	case i == w.npkts-1:
		pos = 2
	}
	op := wrOps[w.wr.Opcode][pos]
	pkt := frames.Packet{Opcode: op, PSN: r.psn, Payload: w.wr.Local[off:end]}
	last := pos >= 2
	if r.noackPkts > maxPktPerAck || last {
		pkt.AckReq = true
		r.noackPkts = 0
	} else {
		r.noackPkts++
	}
	if op.Ext()&wire.ExtRETH != 0 {
		pkt.RETH = frames.RETHFields{VA: w.wr.RemoteVA, RKey: w.wr.RKey, DMALen: uint32(len(w.wr.Local))}
	}
	pkt.Imm = w.wr.Imm
	n, err := q.bld.Build(buf, &pkt)
	if err != nil {
		return 0, err
	}
	r.sent(q, 1, last)
	return n, nil
}

// buildReadAtomic writes a READ request or an atomic for r.psn. A READ
// sent from inside its PSN range (a retry after some responses arrived)
// asks only for the rest: its VA advanced and its length shortened by
// the packets already received (docs/roce.md §8, rxe req_retry).
func (r *requester) buildReadAtomic(q *QP, buf []byte, w *swqe) (int, error) {
	pkt := frames.Packet{PSN: r.psn, AckReq: true}
	if w.wr.Opcode == WRRead {
		off := uint64(wire.PSNDiff(r.psn, w.firstPSN)) * uint64(r.mtu)
		pkt.Opcode = wire.ReadRequest
		pkt.RETH = frames.RETHFields{VA: w.wr.RemoteVA + off, RKey: w.wr.RKey, DMALen: uint32(uint64(len(w.wr.Local)) - off)}
	} else {
		pkt.Opcode = wire.FetchAdd
		pkt.AtomicETH = frames.AtomicETHFields{VA: w.wr.RemoteVA, RKey: w.wr.RKey, SwapAdd: w.wr.SwapAdd}
		if w.wr.Opcode == WRCompSwap { // a fetch-and-add's compare field is 0, as rxe leaves it
			pkt.Opcode, pkt.AtomicETH.Compare = wire.CompareSwap, w.wr.Compare
		}
	}
	n, err := q.bld.Build(buf, &pkt)
	if err != nil {
		return 0, err
	}
	r.noackPkts = 0
	r.sent(q, int(wire.PSNDiff(w.lastPSN, r.psn))+1, true)
	r.rdOut++
	return n, nil
}

// sent advances req.psn past the n PSNs a packet took (a READ request
// takes its responses'), counting retransmissions, and moves to the next
// WQE after a message's last packet.
func (r *requester) sent(q *QP, n int, last bool) {
	if wire.PSNDiff(r.psn, r.sentHigh) < 0 {
		q.Counters.RetransmittedPkts++
	} else if r.rto.on {
		r.rto.sent(q.clock.Now(), r.psn, true)
	}
	r.psn = wire.PSNAdd(r.psn, n)
	if wire.PSNDiff(r.psn, r.sentHigh) > 0 {
		r.sentHigh = r.psn
	}
	if last {
		r.idx++
	}
	if !r.timerOn {
		r.armTimer(q)
	}
}

func (r *requester) outstanding() bool { return r.sentHigh != r.compPSN }

func (r *requester) armTimer(q *QP) {
	if r.timeout == 0 {
		return
	}
	d := r.rto.period(AckTimeout(r.timeout))
	if r.timer == nil {
		r.timer = q.clock.AfterFunc(d, func() { r.onTimeout(q) })
	} else {
		r.timer.Reset(d)
	}
	r.timerOn = true
}

func (r *requester) stopTimers() {
	if r.timer != nil {
		r.timer.Stop()
	}
	r.timerOn = false
	if r.rnrTimer != nil {
		r.rnrTimer.Stop()
	}
	r.rnrWaiting = false
}

// onTimeout: the local ACK timeout expired with packets unacknowledged:
// resend everything from comp.psn.
func (r *requester) onTimeout(q *QP) {
	r.timerOn = false
	if q.state != StateRTS || !r.outstanding() || r.rnrWaiting {
		return
	}
	q.Counters.LocalAckTimeoutErr++
	r.rto.expired()
	if !r.retry(q) {
		return
	}
	r.armTimer(q)
	q.kick()
}

// retry rewinds to comp.psn, spending one retry; when none is left the
// head WQE fails with RETRY_EXC_ERR and the QP goes to ERROR.
func (r *requester) retry(q *QP) bool {
	if r.retryLeft == 0 {
		q.Counters.RetryExceededErr++
		r.failHead(q, StatusRetryExcErr)
		return false
	}
	if r.retryCnt != 7 || r.profile != RXE { // rxe: retry_cnt 7 never runs out
		r.retryLeft--
	}
	r.rewind()
	r.rto.retried()
	r.started = true
	return true
}

// rewind sets req.psn back to comp.psn and finds its WQE.
func (r *requester) rewind() {
	r.psn = r.compPSN
	r.resendPSN, r.resendOn = r.psn, true
	r.idx, r.rdOut = 0, 0
	for r.idx < r.sq.len() && wire.PSNDiff(r.sq.at(r.idx).lastPSN, r.psn) < 0 {
		if r.sq.at(r.idx).wr.Opcode.ReadOrAtomic() {
			r.rdOut++
		}
		r.idx++
	}
	r.noackPkts = 0
}

// popHead removes the oldest WQE, keeping idx and rdOut in step.
func (r *requester) popHead() swqe {
	w := r.sq.pop()
	if r.idx > 0 {
		r.idx--
		if w.wr.Opcode.ReadOrAtomic() {
			r.rdOut--
		}
	}
	return w
}

// complete pops the oldest WQE and posts its completion if signaled.
func (r *requester) complete(q *QP) {
	w := r.popHead()
	if w.wr.Signaled {
		c := Completion{WRID: w.wr.ID, Status: StatusSuccess, Opcode: w.wr.Opcode, QPN: q.qpn}
		if w.wr.Opcode.ReadOrAtomic() {
			c.Len = len(w.wr.Local) // the bytes that landed in Local
		}
		q.sendCQ.push(c)
	}
}

// failHead completes the oldest WQE with st and moves the QP to ERROR.
func (r *requester) failHead(q *QP, st Status) {
	if r.sq.len() > 0 {
		w := r.popHead()
		q.sendCQ.push(Completion{WRID: w.wr.ID, Status: st, Opcode: w.wr.Opcode, QPN: q.qpn})
	}
	q.toError()
}

// ackUpTo completes every WQE whose last PSN is before psn and makes psn
// the oldest unacknowledged PSN. It reports whether comp.psn advanced and
// how many WQEs completed. A READ or atomic is never completed by an
// acknowledgement, only by its response data: one that psn covers stops
// the walk with comp.psn at its first missing response, and blocked says
// those responses are missing (an implied NAK, docs/roce.md §8).
func (r *requester) ackUpTo(q *QP, psn uint32) (advanced bool, done int, blocked bool) {
	if wire.PSNDiff(psn, r.compPSN) <= 0 {
		return false, 0, false
	}
	for r.sq.len() > 0 && wire.PSNDiff(r.sq.at(0).lastPSN, psn) < 0 && !r.sq.at(0).wr.Opcode.ReadOrAtomic() {
		done++
		r.complete(q)
	}
	to := psn
	if r.sq.len() > 0 {
		if h := r.sq.at(0); h.wr.Opcode.ReadOrAtomic() && wire.PSNDiff(psn, h.firstPSN) > 0 {
			// Only response data moves comp.psn into a READ or atomic.
			blocked = wire.PSNDiff(h.lastPSN, psn) < 0
			to = h.firstPSN
			if wire.PSNDiff(r.compPSN, to) > 0 {
				to = r.compPSN
			}
		}
	}
	if to == r.compPSN {
		return false, done, blocked
	}
	if r.rto.on {
		r.rto.acked(q.clock.Now(), to)
	}
	r.advanceComp(to)
	return true, done, blocked
}

// advanceComp makes psn the oldest unacknowledged PSN.
func (r *requester) advanceComp(psn uint32) {
	r.compPSN = psn
	if wire.PSNDiff(r.psn, psn) < 0 { // acknowledged beyond a rewind point
		r.rewind()
	}
}

// nakAck applies the implicit acknowledgement a NAK carries: everything
// before its PSN. Whether that is forward progress (the retry budgets
// reset and a new NAK-driven retry may start) is the profile's question:
// for Commodity any advance of the oldest unacknowledged PSN is; for RXE
// only a NAK that completes a WQE is, as in rxe's check_psn.
func (r *requester) nakAck(q *QP, psn uint32) {
	advanced, done, _ := r.ackUpTo(q, psn)
	if done > 0 || (advanced && r.profile == Commodity) {
		r.progress(q)
	}
}

// impliedNAK: the responses of the oldest READ or atomic from comp.psn on
// are missing (a later response, or an ACK past it, arrived): retry from
// comp.psn, as for a sequence-error NAK — once: a retry already running
// covers it, and so does a resend from comp.psn itself, even when
// responses to the requests before it ended that retry (a READ asked for
// again from its first missing response is not asked for again because
// late responses of the first asking arrive). The counter counts the
// retries it starts.
func (r *requester) impliedNAK(q *QP) {
	if r.started || r.resendOn && r.resendPSN == r.compPSN {
		return
	}
	q.Counters.ImpliedNAKSeqErr++
	if r.retry(q) {
		r.armTimer(q)
	}
}

// onResponse is the completer: ACKs, NAKs, RNR NAKs, READ responses and
// atomic ACKs (rxe_comp.c).
func (r *requester) onResponse(q *QP, v *frames.View) {
	a := v.AETH()
	psn := v.PSN()
	// A response for a PSN never sent is bogus.
	if wire.PSNDiff(psn, r.sentHigh) >= 0 {
		q.Counters.RxDropped++
		return
	}
	if op := v.Opcode(); op != wire.Acknowledge {
		r.onData(q, v, op, psn)
		return
	}
	syn := a.Syndrome()
	switch {
	case syn.IsACK():
		// ACK n acknowledges n and everything before it.
		advanced, _, blocked := r.ackUpTo(q, wire.PSNAdd(psn, 1))
		if advanced {
			r.progress(q)
		}
		if blocked {
			r.impliedNAK(q)
		}
	case syn == wire.SyndromeNAKPSNSeqErr:
		q.Counters.PacketSeqErr++
		if wire.PSNDiff(psn, r.compPSN) < 0 {
			return // stale: names a PSN already acknowledged
		}
		r.nakAck(q, psn)
		if r.started {
			// A retry from this PSN is already running (Commodity: the NAK
			// did not advance comp.psn; RXE: one retry at a time, a timeout
			// starts the next).
			return
		}
		if r.retry(q) {
			r.armTimer(q)
		}
	case syn.IsRNRNAK():
		q.Counters.RNRNakRetryErr++
		if wire.PSNDiff(psn, r.compPSN) < 0 {
			return
		}
		r.nakAck(q, psn)
		if r.rnrLeft == 0 {
			q.Counters.RNRRetryExceededErr++
			r.failHead(q, StatusRNRRetryExcErr)
			return
		}
		if r.rnrRetry != 7 {
			r.rnrLeft--
		}
		r.rewind()
		r.rnrWaiting = true
		if r.timer != nil {
			r.timer.Stop()
			r.timerOn = false
		}
		d := RNRDelay(syn.Value())
		if r.rnrTimer == nil {
			r.rnrTimer = q.clock.AfterFunc(d, func() { r.onRNRTimer(q) })
		} else {
			r.rnrTimer.Reset(d)
		}
	case syn.IsNAK():
		if wire.PSNDiff(psn, r.compPSN) < 0 {
			return
		}
		r.nakAck(q, psn)
		st := StatusRemOpErr
		switch syn {
		case wire.SyndromeNAKInvalidReq:
			st = StatusRemInvReqErr
		case wire.SyndromeNAKRemAccess:
			st = StatusRemAccessErr
		}
		r.failHead(q, st)
	default:
		q.Counters.RxDropped++
	}
}

// progress: a valid ACK moved comp.psn: reset the retry budgets and push
// the retransmit timer forward (or stop it when nothing is outstanding).
func (r *requester) progress(q *QP) {
	r.retryLeft, r.rnrLeft = r.retryCnt, r.rnrRetry
	r.started = false
	if r.outstanding() {
		r.armTimer(q)
	} else if r.timer != nil {
		r.timer.Stop()
		r.timerOn = false
	}
}

func (r *requester) onRNRTimer(q *QP) {
	if !r.rnrWaiting || q.state != StateRTS {
		return
	}
	r.rnrWaiting = false
	q.kick()
}

// onData takes a READ response or an atomic ACK. It acknowledges every
// SEND and WRITE before its PSN; in sequence (at comp.psn) it lands its
// data in the oldest WQE, which must be the READ or atomic it answers;
// ahead of comp.psn it is an implied NAK: the responses before it are
// missing and the READ is asked for again from the first of them
// (docs/roce.md §8). A response behind comp.psn is a duplicate, dropped.
func (r *requester) onData(q *QP, v *frames.View, op wire.Opcode, psn uint32) {
	// Any response data that arrives, in sequence or not, shows the
	// responder working through the requests: the retransmit timer runs
	// from it, as rxe's completer pushes the timer on every response it
	// takes (docs/roce.md §8). Without this a READ asked for again waits
	// behind the responses of the first asking and the timer asks again.
	if r.timerOn {
		r.armTimer(q)
	}
	if wire.PSNDiff(psn, r.compPSN) < 0 {
		q.Counters.RxDropped++
		return
	}
	advanced, _, blocked := r.ackUpTo(q, psn)
	if advanced {
		r.progress(q)
	}
	if blocked || psn != r.compPSN {
		if !blocked && r.profile == RXE && r.sq.len() > 0 && r.sq.at(0).wr.Opcode == WRRead {
			// rxe drops a response inside the READ's range that is not
			// the one expected and waits for the timer (check_psn).
			q.Counters.RxDropped++
			return
		}
		r.impliedNAK(q)
		return
	}
	if r.sq.len() == 0 {
		q.Counters.RxDropped++
		return
	}
	w := r.sq.at(0)
	ackSyn := true
	if a := v.AETH(); a != nil {
		ackSyn = a.Syndrome().IsACK()
	}
	if op == wire.AtomicAcknowledge {
		if !w.wr.Opcode.Atomic() || !ackSyn {
			r.failHead(q, StatusBadRespErr)
			return
		}
		orig := uint64(0)
		for _, b := range v.AtomicAckETH() {
			orig = orig<<8 | uint64(b)
		}
		PutUint64At(w.wr.Local, 0, orig)
		r.complete(q)
		r.advanceComp(wire.PSNAdd(psn, 1))
		r.progress(q)
		return
	}
	// A READ response: its place in the READ fixes its opcode and length.
	// FIRST or ONLY may start any retry's responses; MIDDLE and LAST
	// continue (rxe continues a replay from inside the range with them).
	if w.wr.Opcode != WRRead || !ackSyn {
		r.failHead(q, StatusBadRespErr)
		return
	}
	i := uint64(wire.PSNDiff(psn, w.firstPSN))
	off := i * uint64(r.mtu)
	last := psn == w.lastPSN
	want := uint64(r.mtu)
	if last {
		want = uint64(len(w.wr.Local)) - off
	}
	pay := v.Payload()
	okOp := false
	switch op {
	case wire.ReadResponseOnly:
		okOp = last
	case wire.ReadResponseFirst:
		okOp = !last
	case wire.ReadResponseMiddle:
		okOp = !last && i > 0
	case wire.ReadResponseLast:
		okOp = last && i > 0
	}
	if !okOp || uint64(len(pay)) != want {
		r.failHead(q, StatusBadRespErr)
		return
	}
	copy(w.wr.Local[off:], pay)
	if last {
		r.complete(q)
	}
	r.advanceComp(wire.PSNAdd(psn, 1))
	r.progress(q)
}
