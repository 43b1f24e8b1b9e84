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
}

func (r *requester) init(cfg Config) {
	*r = requester{mtu: cfg.MTU, sq: newRing[swqe](cfg.MaxSendWR), nextPSN: cfg.SQPSN, psn: cfg.SQPSN,
		compPSN: cfg.SQPSN, sentHigh: cfg.SQPSN, retryLeft: cfg.RetryCnt, rnrLeft: cfg.RNRRetry,
		retryCnt: cfg.RetryCnt, rnrRetry: cfg.RNRRetry, timeout: cfg.Timeout, profile: cfg.Profile, window: cfg.MaxUnacked}
}

// packets is how many packets a message of n bytes takes; a zero-length
// message is one ONLY packet.
func packets(n, mtu int) int { return max(1, (n+mtu-1)/mtu) }

func (r *requester) post(mtu int, wr SendWR) {
	n := packets(len(wr.Local), mtu)
	r.sq.push(swqe{wr: wr, firstPSN: r.nextPSN, lastPSN: wire.PSNAdd(r.nextPSN, n-1), npkts: n})
	r.nextPSN = wire.PSNAdd(r.nextPSN, n)
}

// canSend: a posted packet remains, the window has room and no RNR wait.
func (r *requester) canSend() bool {
	return !r.rnrWaiting && r.psn != r.nextPSN && int(wire.PSNDiff(r.psn, r.compPSN)) < r.window
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
	if wire.PSNDiff(r.psn, r.sentHigh) < 0 {
		q.Counters.RetransmittedPkts++
	} else {
		r.sentHigh = wire.PSNAdd(r.psn, 1)
	}
	r.psn = wire.PSNAdd(r.psn, 1)
	if last {
		r.idx++
	}
	if !r.timerOn {
		r.armTimer(q)
	}
	return n, nil
}

func (r *requester) outstanding() bool { return r.sentHigh != r.compPSN }

func (r *requester) armTimer(q *QP) {
	if r.timeout == 0 {
		return
	}
	d := AckTimeout(r.timeout)
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
	r.started = true
	return true
}

// rewind sets req.psn back to comp.psn and finds its WQE.
func (r *requester) rewind() {
	r.psn = r.compPSN
	r.idx = 0
	for r.idx < r.sq.len() && wire.PSNDiff(r.sq.at(r.idx).lastPSN, r.psn) < 0 {
		r.idx++
	}
	r.noackPkts = 0
}

// failHead completes the oldest WQE with st and moves the QP to ERROR.
func (r *requester) failHead(q *QP, st Status) {
	if r.sq.len() > 0 {
		w := r.sq.pop()
		q.sendCQ.push(Completion{WRID: w.wr.ID, Status: st, Opcode: w.wr.Opcode, QPN: q.qpn})
	}
	q.toError()
}

// ackUpTo completes every WQE whose last PSN is before psn and makes psn
// the oldest unacknowledged PSN. It reports whether comp.psn advanced and
// how many WQEs completed.
func (r *requester) ackUpTo(q *QP, psn uint32) (bool, int) {
	if wire.PSNDiff(psn, r.compPSN) <= 0 {
		return false, 0
	}
	done := 0
	for r.sq.len() > 0 && wire.PSNDiff(r.sq.at(0).lastPSN, psn) < 0 {
		done++
		w := r.sq.pop()
		r.idx--
		if w.wr.Signaled {
			q.sendCQ.push(Completion{WRID: w.wr.ID, Status: StatusSuccess, Opcode: w.wr.Opcode, QPN: q.qpn})
		}
	}
	if r.idx < 0 {
		r.idx = 0
	}
	r.compPSN = psn
	if wire.PSNDiff(r.psn, psn) < 0 { // acknowledged beyond a rewind point
		r.rewind()
	}
	return true, done
}

// nakAck applies the implicit acknowledgement a NAK carries: everything
// before its PSN. Whether that is forward progress (the retry budgets
// reset and a new NAK-driven retry may start) is the profile's question:
// for Commodity any advance of the oldest unacknowledged PSN is; for RXE
// only a NAK that completes a WQE is, as in rxe's check_psn.
func (r *requester) nakAck(q *QP, psn uint32) {
	advanced, done := r.ackUpTo(q, psn)
	if done > 0 || (advanced && r.profile == Commodity) {
		r.progress(q)
	}
}

// onResponse is the completer: ACKs, NAKs and RNR NAKs (rxe_comp.c).
func (r *requester) onResponse(q *QP, v *frames.View) {
	a := v.AETH()
	if a == nil || v.Opcode() != wire.Acknowledge {
		q.Counters.RxDropped++ // READ/atomic responses: no READ/atomic is ever sent
		return
	}
	psn := v.PSN()
	// A response for a PSN never sent is bogus.
	if wire.PSNDiff(psn, r.sentHigh) >= 0 {
		q.Counters.RxDropped++
		return
	}
	syn := a.Syndrome()
	switch {
	case syn.IsACK():
		// ACK n acknowledges n and everything before it.
		if advanced, _ := r.ackUpTo(q, wire.PSNAdd(psn, 1)); advanced {
			r.progress(q)
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
