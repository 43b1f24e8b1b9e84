package roce

import (
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// Kinds of queued response.
const (
	respAck    uint8 = iota // ACK or NAK
	respAtomic              // ATOMIC ACKNOWLEDGE
	respRead                // the READ responses of one READ, sent one by one
)

// respDesc is a queued response: an ACK or NAK, an atomic ACK, or the
// READ responses still to send for one (re-)executed READ.
type respDesc struct {
	kind     uint8
	syndrome wire.Syndrome
	psn      uint32 // the next response's PSN
	msn      uint32
	orig     uint64 // atomic: the original value
	mr       *MR    // read: the region, va its next byte, remaining bytes left
	va       uint64
	remain   uint64
	started  bool // read: FIRST (or ONLY) has been sent
}

// rdRes is a responder resource (rxe resp_res): a READ or atomic executed,
// remembered so that a duplicate is re-executed (a READ) or answered from
// the saved result (an atomic) instead of being executed twice.
type rdRes struct {
	valid       bool
	atomic      bool
	first, last uint32
	va, length  uint64 // READ: the range first asked for; atomic: its VA
	rkey        uint32
	orig        uint64 // atomic: the value returned
	// An atomic's request as it was executed: a duplicate must be the
	// same in all respects to be answered from the resource.
	op               wire.Opcode
	swapAdd, compare uint64
}

// responder is the receive side (rxe_resp.c).
type responder struct {
	mtu     int
	epsn    uint32 // expected PSN (resp.psn)
	msn     uint32
	nakSent bool // rxe sent_psn_nak: one NAK per gap
	rnrCode uint8
	rq      ring[RecvWR]
	out     ring[respDesc]
	res     []rdRes // MaxDestRdAtomic resources, recycled oldest first
	resNext int
	scratch []byte // one READ response's payload

	// The message in progress.
	inMsg     bool
	isWrite   bool
	mr        *MR
	va        uint64
	remaining uint64
	hasRecv   bool
	recv      RecvWR
	recvOff   int
}

func (s *responder) init(cfg Config) {
	rq := s.rq // receives may be posted from INIT on: keep them
	*s = responder{mtu: cfg.MTU, epsn: cfg.RQPSN, rnrCode: cfg.MinRNRTimer,
		rq: newRing[RecvWR](cfg.MaxRecvWR), out: newRing[respDesc](64),
		res: make([]rdRes, cfg.MaxDestRdAtomic), scratch: make([]byte, cfg.MTU)}
	for rq.len() > 0 {
		s.rq.push(rq.pop())
	}
}

func (s *responder) queue(syn wire.Syndrome, psn uint32) {
	s.out.push(respDesc{kind: respAck, syndrome: syn, psn: psn, msn: s.msn})
}

// onRequest runs the PSN check, then the opcode-sequence, length, key and
// bounds checks, executes the packet and queues the ACK (docs/roce.md §4).
func (s *responder) onRequest(q *QP, v *frames.View) {
	psn := v.PSN()
	switch d := wire.PSNDiff(psn, s.epsn); {
	case d > 0:
		// Ahead: the first time, NAK with the expected PSN; then drop
		// silently until the gap is repaired.
		if !s.nakSent {
			s.nakSent = true
			q.Counters.OutOfSequence++
			s.queue(wire.SyndromeNAKPSNSeqErr, s.epsn)
		} else {
			q.Counters.OutOfSeqDropped++
		}
		return
	case d < 0:
		// Duplicate: a SEND or WRITE is never executed twice (re-ACK the
		// last processed PSN); a READ is executed again, an atomic answered
		// from its saved result (docs/roce.md §8).
		q.Counters.DuplicateRequest++
		switch op := v.Opcode(); op {
		case wire.ReadRequest:
			s.replayRead(q, v)
		case wire.CompareSwap, wire.FetchAdd:
			s.replayAtomic(q, v, op)
		default:
			s.queue(wire.SyndromeACK, wire.PSNAdd(s.epsn, -1))
		}
		return
	}
	s.nakSent = false
	op := v.Opcode()
	if op == wire.ReadRequest || op == wire.CompareSwap || op == wire.FetchAdd {
		if syn, st := s.readAtomic(q, v, op); syn != 0 {
			s.refuse(q, syn, st, psn)
		}
		return
	}
	if syn, st := s.execute(q, v, op); syn != 0 {
		s.refuse(q, syn, st, psn)
		return
	}
	s.epsn = wire.PSNAdd(s.epsn, 1)
	if v.AckReq() {
		s.queue(wire.SyndromeACK, psn)
	}
}

// refuse answers a request that failed its checks: an RNR NAK leaves the
// QP up; any other NAK completes a held receive WQE with st and moves the
// QP to ERROR.
func (s *responder) refuse(q *QP, syn wire.Syndrome, st Status, psn uint32) {
	if syn.IsRNRNAK() {
		q.Counters.SendRNRErr++
		s.queue(syn, psn)
		return
	}
	q.Counters.RemoteErrors++
	s.queue(syn, psn)
	if s.hasRecv {
		q.recvCQ.push(Completion{WRID: s.recv.ID, Status: st, Recv: true, QPN: q.qpn})
		s.hasRecv = false
	}
	q.toError()
}

// readAtomic executes an in-sequence READ request or atomic (rxe
// check_rkey, read_reply, atomic_reply): key, bounds and alignment
// checks, then the READ's responses are queued or the atomic is applied
// and its ATOMIC ACKNOWLEDGE queued. Either is remembered as a resource.
func (s *responder) readAtomic(q *QP, v *frames.View, op wire.Opcode) (wire.Syndrome, Status) {
	const invalid, access = wire.SyndromeNAKInvalidReq, wire.SyndromeNAKRemAccess
	if s.inMsg {
		return invalid, StatusRemInvReqErr // a SEND or WRITE was not finished
	}
	psn := v.PSN()
	if op == wire.ReadRequest {
		r := v.RETH()
		dlen := uint64(r.DMALen())
		if dlen > 1<<31 {
			return invalid, StatusRemInvReqErr
		}
		var mr *MR
		if dlen > 0 { // a zero-length READ skips the key check
			if mr = q.pd.lookup(r.RKey(), r.VA(), dlen, AccessRemoteRead); mr == nil {
				return access, StatusRemAccessErr
			}
		}
		n := packets(int(dlen), s.mtu)
		s.msn = (s.msn + 1) & wire.PSNMask // C9-148: at execution, not at the last response
		s.remember(rdRes{first: psn, last: wire.PSNAdd(psn, n-1), va: r.VA(), length: dlen, rkey: r.RKey()})
		s.out.push(respDesc{kind: respRead, psn: psn, msn: s.msn, mr: mr, va: r.VA(), remain: dlen})
		s.epsn = wire.PSNAdd(psn, n)
		return 0, 0
	}
	a := v.AtomicETH()
	mr := q.pd.lookup(a.RKey(), a.VA(), 8, AccessRemoteAtomic)
	if mr == nil {
		return access, StatusRemAccessErr
	}
	if a.VA()&7 != 0 {
		return invalid, StatusRemInvReqErr // rxe RESPST_ERR_MISALIGNED_ATOMIC
	}
	var cur [8]byte
	mr.Read(a.VA()-mr.Addr, cur[:])
	orig := Uint64At(cur[:], 0)
	val := orig + a.SwapAdd()
	if op == wire.CompareSwap {
		val = orig
		if orig == a.Compare() {
			val = a.SwapAdd()
		}
	}
	PutUint64At(cur[:], 0, val)
	mr.Write(a.VA()-mr.Addr, cur[:])
	q.Counters.AtomicsExecuted++
	s.msn = (s.msn + 1) & wire.PSNMask
	s.remember(rdRes{atomic: true, first: psn, last: psn, orig: orig, va: a.VA(), rkey: a.RKey(), op: op,
		swapAdd: a.SwapAdd(), compare: a.Compare()})
	s.out.push(respDesc{kind: respAtomic, psn: psn, msn: s.msn, orig: orig})
	s.epsn = wire.PSNAdd(psn, 1)
	return 0, 0
}

// remember records a resource in place of the oldest one (rxe recycles
// its responder resources the same way: keeping within them is the
// requester's job, by its max_rd_atomic).
func (s *responder) remember(r rdRes) {
	r.valid = true
	s.res[s.resNext] = r
	s.resNext = (s.resNext + 1) % len(s.res)
}

// find returns the resource whose PSN range holds psn, or nil.
func (s *responder) find(psn uint32) *rdRes {
	for i := range s.res {
		r := &s.res[i]
		if r.valid && wire.PSNDiff(psn, r.first) >= 0 && wire.PSNDiff(psn, r.last) <= 0 {
			return r
		}
	}
	return nil
}

// replayRead executes a duplicate READ again from its own PSN, VA and
// length, which must lie inside the READ first executed there with the
// same R_Key; without such a resource it is dropped (rxe
// duplicate_request).
func (s *responder) replayRead(q *QP, v *frames.View) {
	psn, r := v.PSN(), v.RETH()
	res := s.find(psn)
	va, dlen := r.VA(), uint64(r.DMALen())
	if res == nil || res.atomic || r.RKey() != res.rkey || va < res.va || dlen > res.length ||
		va+dlen > res.va+res.length || wire.PSNAdd(psn, packets(int(dlen), s.mtu)-1) != res.last {
		q.Counters.RxDropped++
		return
	}
	var mr *MR
	if dlen > 0 {
		if mr = q.pd.lookup(r.RKey(), va, dlen, AccessRemoteRead); mr == nil {
			s.refuse(q, wire.SyndromeNAKRemAccess, StatusRemAccessErr, psn)
			return
		}
	}
	s.out.push(respDesc{kind: respRead, psn: psn, msn: s.msn, mr: mr, va: va, remain: dlen})
}

// replayAtomic answers a duplicate atomic with the original value saved
// when it was executed; the memory is not touched again. The duplicate
// must be the atomic executed at its PSN in all respects (opcode, VA,
// R_Key, swap/add and compare data); one that is not, or has no resource,
// is dropped without a reply.
func (s *responder) replayAtomic(q *QP, v *frames.View, op wire.Opcode) {
	psn, a := v.PSN(), v.AtomicETH()
	res := s.find(psn)
	if res == nil || !res.atomic || res.op != op || res.va != a.VA() || res.rkey != a.RKey() ||
		res.swapAdd != a.SwapAdd() || res.compare != a.Compare() {
		q.Counters.RxDropped++
		return
	}
	q.Counters.AtomicReplays++
	s.out.push(respDesc{kind: respAtomic, psn: psn, msn: s.msn, orig: res.orig})
}

// next builds the oldest queued response into buf. A READ's responses go
// one per call: FIRST, MIDDLE..., LAST, or ONLY, each with the next PSN;
// FIRST, LAST and ONLY carry an AETH (ACK, the MSN of the READ's
// execution), MIDDLE none (IBA 9.7.5.1.3 [section number unverified]; rxe
// read_reply).
func (s *responder) next(q *QP, buf []byte) (int, error) {
	d := s.out.at(0)
	pkt := frames.Packet{PSN: d.psn, AETH: frames.AETHFields{Syndrome: d.syndrome, MSN: d.msn}}
	switch d.kind {
	case respAck:
		pkt.Opcode = wire.Acknowledge
	case respAtomic:
		pkt.Opcode, pkt.AETH.Syndrome, pkt.AtomicAck = wire.AtomicAcknowledge, wire.SyndromeACK, d.orig
	default:
		n := min(d.remain, uint64(s.mtu))
		last := d.remain <= uint64(s.mtu)
		switch {
		case !d.started && last:
			pkt.Opcode = wire.ReadResponseOnly
		case !d.started:
			pkt.Opcode = wire.ReadResponseFirst
		case last:
			pkt.Opcode = wire.ReadResponseLast
		default:
			pkt.Opcode = wire.ReadResponseMiddle
		}
		pkt.AETH.Syndrome = wire.SyndromeACK
		if n > 0 {
			d.mr.Read(d.va-d.mr.Addr, s.scratch[:n])
			pkt.Payload = s.scratch[:n]
		}
		k, err := q.bld.Build(buf, &pkt)
		if err != nil {
			s.drop(q) // the READ's remaining responses: the requester asks again
			return 0, err
		}
		q.Counters.ReadResponses++
		d.va, d.remain, d.psn, d.started = d.va+n, d.remain-n, wire.PSNAdd(d.psn, 1), true
		if last {
			s.out.pop()
		}
		return k, nil
	}
	k, err := q.bld.Build(buf, &pkt)
	if err != nil {
		s.drop(q)
		return 0, err
	}
	s.out.pop()
	return k, nil
}

// drop removes the response at the head of the queue, whose frame could
// not be built: kept, it would be first in line for ever (HasFrame true,
// no request sent). Lost, it is what a response lost on the wire is; the
// requester's timer or implied NAK recovers it.
func (s *responder) drop(q *QP) {
	s.out.pop()
	q.Counters.ResponsesDropped++
}

// execute checks and performs one in-sequence request. It returns a
// non-zero syndrome (RNR NAK or NAK) when the packet is refused, and for a
// NAK the status a held receive WQE completes with.
func (s *responder) execute(q *QP, v *frames.View, op wire.Opcode) (wire.Syndrome, Status) {
	const invalid, access = wire.SyndromeNAKInvalidReq, wire.SyndromeNAKRemAccess
	write := op.IsWrite()
	if !write && !op.IsSend() {
		return invalid, StatusRemInvReqErr // an opcode this responder does not take
	}
	first, last := op.IsFirst(), op.IsLast()
	if s.inMsg == first || (s.inMsg && s.isWrite != write) {
		return invalid, StatusRemInvReqErr // opcode sequence: missing FIRST or LAST
	}
	payload := v.Payload()
	n := len(payload)
	switch {
	case first && !last, !first && !last: // FIRST, MIDDLE
		if n != s.mtu {
			return invalid, StatusRemInvReqErr
		}
	case !first && last: // LAST
		if n < 1 || n > s.mtu {
			return invalid, StatusRemInvReqErr
		}
	default: // ONLY
		if n > s.mtu {
			return invalid, StatusRemInvReqErr
		}
	}
	_, hasImm := v.Imm()
	needRecv := !write || (last && hasImm)
	if needRecv && !s.hasRecv {
		if s.rq.len() == 0 {
			// No receive WQE: RNR NAK; the packet is dropped, the QP stays up.
			return wire.SyndromeRNRNAK | wire.Syndrome(s.rnrCode&0x1F), 0
		}
		s.recv, s.hasRecv, s.recvOff = s.rq.pop(), true, 0
	}
	if write {
		if first {
			r := v.RETH()
			dlen := uint64(r.DMALen())
			if dlen > 1<<31 {
				return invalid, StatusRemInvReqErr
			}
			s.mr, s.va, s.remaining = nil, r.VA(), dlen
			if dlen > 0 {
				s.mr = q.pd.lookup(r.RKey(), r.VA(), dlen, AccessRemoteWrite)
				if s.mr == nil {
					return access, StatusRemAccessErr
				}
			}
		}
		// Packet size against what remains of the RETH length.
		if s.remaining > uint64(s.mtu) {
			if n != s.mtu || v.BTH().PadCnt() != 0 || last {
				return invalid, StatusRemInvReqErr
			}
		} else if uint64(n) != s.remaining || v.BTH().PadCnt() != wire.PadCount(n) || !last {
			return invalid, StatusRemInvReqErr
		}
		if n > 0 {
			s.mr.Write(s.va-s.mr.Addr, payload)
		}
		s.va += uint64(n)
		s.remaining -= uint64(n)
	} else {
		if s.recvOff+n > len(s.recv.Buf) {
			return invalid, StatusLocLenErr
		}
		copy(s.recv.Buf[s.recvOff:], payload)
		s.recvOff += n
	}
	s.isWrite = write
	s.inMsg = !last
	if last {
		s.msn = (s.msn + 1) & wire.PSNMask
		if s.hasRecv {
			imm, _ := v.Imm()
			c := Completion{WRID: s.recv.ID, Status: StatusSuccess, Recv: true, Imm: imm, HasImm: hasImm, QPN: q.qpn}
			switch {
			case write:
				c.Opcode = WRWriteImm
			case hasImm:
				c.Opcode, c.Len = WRSendImm, s.recvOff
			default:
				c.Opcode, c.Len = WRSend, s.recvOff
			}
			q.recvCQ.push(c)
			s.hasRecv = false
		}
	}
	return 0, 0
}
