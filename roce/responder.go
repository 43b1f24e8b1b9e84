package roce

import (
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// ackDesc is a queued ACK or NAK.
type ackDesc struct {
	syndrome wire.Syndrome
	psn      uint32
	msn      uint32
}

// responder is the receive side (rxe_resp.c).
type responder struct {
	mtu     int
	epsn    uint32 // expected PSN (resp.psn)
	msn     uint32
	nakSent bool // rxe sent_psn_nak: one NAK per gap
	rnrCode uint8
	rq      ring[RecvWR]
	acks    ring[ackDesc]

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
		rq: newRing[RecvWR](cfg.MaxRecvWR), acks: newRing[ackDesc](64)}
	for rq.len() > 0 {
		s.rq.push(rq.pop())
	}
}

func (s *responder) queue(syn wire.Syndrome, psn uint32) {
	s.acks.push(ackDesc{syndrome: syn, psn: psn, msn: s.msn})
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
		// Duplicate: never executed twice; re-ACK the last processed PSN.
		q.Counters.DuplicateRequest++
		s.queue(wire.SyndromeACK, wire.PSNAdd(s.epsn, -1))
		return
	}
	s.nakSent = false
	op := v.Opcode()
	if syn, st := s.execute(q, v, op); syn != 0 {
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
		return
	}
	s.epsn = wire.PSNAdd(s.epsn, 1)
	if v.AckReq() {
		s.queue(wire.SyndromeACK, psn)
	}
}

// execute checks and performs one in-sequence request. It returns a
// non-zero syndrome (RNR NAK or NAK) when the packet is refused, and for a
// NAK the status a held receive WQE completes with.
func (s *responder) execute(q *QP, v *frames.View, op wire.Opcode) (wire.Syndrome, Status) {
	const invalid, access = wire.SyndromeNAKInvalidReq, wire.SyndromeNAKRemAccess
	write := op.IsWrite()
	if !write && !op.IsSend() {
		return invalid, StatusRemInvReqErr // READ and atomics are not offered
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
