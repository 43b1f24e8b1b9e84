package roce

import (
	"errors"
	"fmt"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// QP is one Reliable-Connection queue pair.
type QP struct {
	qpn    uint32
	state  State
	clock  Clock
	cfg    Config
	path   frames.Path
	bld    *frames.Builder
	pd     *PD
	sendCQ *CQ
	recvCQ *CQ

	// Counters are updated as the QP works; read them at any time.
	Counters Counters
	// OnTxReady, if set, is called when the QP gets a frame to send, so the
	// NIC can schedule a NextFrame call. It must not call back into the QP.
	OnTxReady func()

	req  requester
	resp responder
}

// ErrState is returned for a verb the QP's state does not allow.
var ErrState = errors.New("roce: operation not allowed in this QP state")

// NewQP makes a QP in RESET with number qpn (24 bits). Frames it sends are
// stamped with clock's time by whoever sends them; its timers run on clock.
func NewQP(qpn uint32, clock Clock, pd *PD, sendCQ, recvCQ *CQ) *QP {
	return &QP{qpn: qpn & wire.PSNMask, clock: clock, pd: pd, sendCQ: sendCQ, recvCQ: recvCQ}
}

// QPN is the QP number.
func (q *QP) QPN() uint32 { return q.qpn }

// State is the current state.
func (q *QP) State() State { return q.state }

// SendCQ and RecvCQ are the QP's completion queues.
func (q *QP) SendCQ() *CQ { return q.sendCQ }
func (q *QP) RecvCQ() *CQ { return q.recvCQ }

// Path is the addressing the QP sends with (valid from RTR).
func (q *QP) Path() frames.Path { return q.path }

// Init moves RESET → INIT.
func (q *QP) Init() error {
	if q.state != StateReset {
		return ErrState
	}
	q.state = StateInit
	return nil
}

// ReadyToReceive moves INIT → RTR: the QP learns its path to the peer (with
// the peer's QPN in path.DestQP) and the connection parameters. A zero
// path.SrcPort gets rxe's per-QP UDP source port.
func (q *QP) ReadyToReceive(path frames.Path, cfg Config) error {
	if q.state != StateInit {
		return ErrState
	}
	switch cfg.MTU {
	case 256, 512, 1024, 2048, 4096:
	default:
		return fmt.Errorf("roce: path MTU %d is not one of 256, 512, 1024, 2048, 4096", cfg.MTU)
	}
	if cfg.RetryCnt > 7 || cfg.RNRRetry > 7 || cfg.MinRNRTimer > 31 || cfg.Timeout > 31 {
		return fmt.Errorf("roce: retry_cnt %d, rnr_retry %d (0-7), min_rnr_timer %d, timeout %d (0-31) out of range",
			cfg.RetryCnt, cfg.RNRRetry, cfg.MinRNRTimer, cfg.Timeout)
	}
	if cfg.Profile > RXE {
		return fmt.Errorf("roce: unknown NIC profile %d", cfg.Profile)
	}
	if cfg.MaxUnacked == 0 {
		cfg.MaxUnacked = cfg.Profile.maxUnacked()
	}
	if cfg.MaxUnacked < 1 || cfg.MaxUnacked >= 1<<23 {
		return fmt.Errorf("roce: MaxUnacked %d must be in 1..2^23-1", cfg.MaxUnacked)
	}
	if cfg.MaxSendWR == 0 {
		cfg.MaxSendWR = 1024
	}
	if cfg.MaxRecvWR == 0 {
		cfg.MaxRecvWR = 1024
	}
	if cfg.MaxRdAtomic == 0 {
		cfg.MaxRdAtomic = DefaultRdAtomic
	}
	if cfg.MaxDestRdAtomic == 0 {
		cfg.MaxDestRdAtomic = DefaultRdAtomic
	}
	if cfg.MaxRdAtomic < 1 || cfg.MaxRdAtomic > 255 || cfg.MaxDestRdAtomic < 1 || cfg.MaxDestRdAtomic > 255 {
		return fmt.Errorf("roce: max_rd_atomic %d, max_dest_rd_atomic %d: want 1..255", cfg.MaxRdAtomic, cfg.MaxDestRdAtomic)
	}
	if path.SrcPort == 0 {
		path.SrcPort = frames.UDPSourcePort(q.qpn)
	}
	b, err := frames.NewBuilder(path)
	if err != nil {
		return err
	}
	cfg.SQPSN &= wire.PSNMask
	cfg.RQPSN &= wire.PSNMask
	q.cfg, q.path, q.bld = cfg, path, b
	q.req.init(cfg)
	q.resp.init(cfg)
	q.state = StateRTR
	return nil
}

// ReadyToSend moves RTR → RTS.
func (q *QP) ReadyToSend() error {
	if q.state != StateRTR {
		return ErrState
	}
	q.state = StateRTS
	q.kick()
	return nil
}

// Connect runs Init, ReadyToReceive and ReadyToSend.
func (q *QP) Connect(path frames.Path, cfg Config) error {
	if err := q.Init(); err != nil {
		return err
	}
	if err := q.ReadyToReceive(path, cfg); err != nil {
		return err
	}
	return q.ReadyToSend()
}

// Config is the connection configuration (valid from RTR).
func (q *QP) Config() Config { return q.cfg }

// toError moves the QP to ERROR: timers stop, every outstanding send and
// receive WQE completes with WR_FLUSH_ERR (an error completion is posted
// even for unsignaled WRs). Responses already queued still go out.
func (q *QP) toError() {
	if q.state == StateError {
		return
	}
	q.state = StateError
	q.req.stopTimers()
	for q.req.sq.len() > 0 {
		w := q.req.sq.pop()
		q.sendCQ.push(Completion{WRID: w.wr.ID, Status: StatusWRFlushErr, Opcode: w.wr.Opcode, QPN: q.qpn})
	}
	if q.resp.hasRecv {
		q.recvCQ.push(Completion{WRID: q.resp.recv.ID, Status: StatusWRFlushErr, Recv: true, QPN: q.qpn})
		q.resp.hasRecv = false
	}
	for q.resp.rq.len() > 0 {
		w := q.resp.rq.pop()
		q.recvCQ.push(Completion{WRID: w.ID, Status: StatusWRFlushErr, Recv: true, QPN: q.qpn})
	}
}

// SetError moves the QP to ERROR (ibv_modify_qp to ERR), flushing its work.
func (q *QP) SetError() { q.toError() }

func (q *QP) kick() {
	if q.OnTxReady != nil && q.HasFrame() {
		q.OnTxReady()
	}
}

// HasFrame reports whether NextFrame would produce a frame now.
func (q *QP) HasFrame() bool {
	return q.resp.out.len() > 0 || (q.state == StateRTS && q.req.canSend())
}

// NextFrame writes the next frame the QP wants to send into buf and
// returns its length, or false when there is nothing to send. Responses
// (ACKs, NAKs, READ responses, atomic ACKs) go before requests. buf must
// hold MTU plus headers (MTU+128): a response that does not fit is
// dropped (Counters.ResponsesDropped), as if lost on the wire, so that it
// never holds the queue; a request that does not fit stays to be sent.
func (q *QP) NextFrame(buf []byte) (int, bool) {
	if q.resp.out.len() > 0 {
		n, err := q.resp.next(q, buf)
		if err != nil {
			return 0, false
		}
		q.Counters.SentPkts++
		return n, true
	}
	if q.state != StateRTS || !q.req.canSend() {
		return 0, false
	}
	n, err := q.req.build(q, buf)
	if err != nil {
		return 0, false
	}
	q.Counters.SentPkts++
	return n, true
}

// Receive hands the QP one received frame, already parsed and addressed to
// it (v.DestQP() == QPN). Frames that fail the receive checks of docs/roce.md §4
// — addressing, TVer, P_Key, ICRC, transport class, state — are dropped
// silently with a counter; a bad ICRC is never NAKed.
func (q *QP) Receive(v *frames.View) {
	if q.state == StateReset || q.state == StateInit || q.state == StateError || v.DestQP() != q.qpn {
		q.Counters.RxDropped++
		return
	}
	bth := v.BTH()
	// RoCEv1 GIDs built from IPv4 addresses are IPv4-mapped: compare unmapped.
	if bth.TVer() != 0 || !pkeyMatch(bth.PKey(), q.bld.PKey()) || v.Transport() != q.path.Transport ||
		v.SrcAddr().Unmap() != q.path.DstIP.Unmap() || v.DstAddr().Unmap() != q.path.SrcIP.Unmap() {
		q.Counters.RxDropped++
		return
	}
	if !v.ICRCOK() {
		q.Counters.RxICRCErrors++
		return
	}
	op := v.Opcode()
	if op.Class() != wire.ClassRC || !op.Known() {
		q.Counters.RxDropped++
		return
	}
	q.Counters.RcvdPkts++
	if op.IsAck() {
		if q.state == StateRTS {
			q.req.onResponse(q, v)
		}
	} else {
		q.resp.onRequest(q, v)
	}
	q.kick()
}

// pkeyMatch: equal low 15 bits and at least one full member (bit 15).
func pkeyMatch(k, own uint16) bool {
	return k&0x7FFF == own&0x7FFF && (k|own)&0x8000 != 0
}

// PostSend queues a send work request.
func (q *QP) PostSend(wr SendWR) error {
	if q.state != StateRTS {
		return ErrState
	}
	if q.req.sq.len() >= q.cfg.MaxSendWR {
		return fmt.Errorf("roce: send queue full (%d WRs)", q.cfg.MaxSendWR)
	}
	if len(wr.Local) > 1<<31 {
		return fmt.Errorf("roce: message of %d bytes exceeds 2^31", len(wr.Local))
	}
	if wr.Opcode > WRFetchAdd {
		return fmt.Errorf("roce: unknown work request opcode %d", wr.Opcode)
	}
	if wr.Opcode.Atomic() && len(wr.Local) != 8 {
		return fmt.Errorf("roce: %s needs an 8-byte local buffer for the original value, have %d bytes", wr.Opcode, len(wr.Local))
	}
	// PSNs are given at post time; keep every queued PSN within half the
	// 24-bit space of the oldest unacknowledged one so comparisons stay
	// unambiguous (rxe keeps far fewer in flight).
	n := wrPackets(wr, q.cfg.MTU)
	if int(wire.PSNDiff(q.req.nextPSN, q.req.compPSN))+n >= 1<<23 {
		return fmt.Errorf("roce: send queue would span more than 2^23 PSNs; wait for completions")
	}
	q.req.post(q.cfg.MTU, wr)
	q.kick()
	return nil
}

// PostRecv queues a receive work request.
func (q *QP) PostRecv(wr RecvWR) error {
	if q.state == StateReset || q.state == StateError {
		return ErrState
	}
	if q.resp.rq.len() >= q.cfg.MaxRecvWR && q.cfg.MaxRecvWR > 0 {
		return fmt.Errorf("roce: receive queue full (%d WRs)", q.cfg.MaxRecvWR)
	}
	q.resp.rq.push(wr)
	return nil
}

// Outstanding is the number of send WRs not yet completed.
func (q *QP) Outstanding() int { return q.req.sq.len() }

// SendPSN is the next PSN the requester will transmit; CompPSN the oldest
// unacknowledged one; ExpectedPSN the responder's ePSN.
func (q *QP) SendPSN() uint32     { return q.req.psn }
func (q *QP) CompPSN() uint32     { return q.req.compPSN }
func (q *QP) ExpectedPSN() uint32 { return q.resp.epsn }
