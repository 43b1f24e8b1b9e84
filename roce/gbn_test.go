package roce_test

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/roce"
)

func psns(es []wireEvent) []uint32 {
	out := make([]uint32, len(es))
	for i, e := range es {
		out[i] = e.psn
	}
	return out
}

func seqPSN(start uint32, n int) []uint32 {
	out := make([]uint32, n)
	for i := range out {
		out[i] = wire.PSNAdd(start, i)
	}
	return out
}

// postWrite posts one signaled WRITE of data from A into B's memory at off.
func postWrite(t *testing.T, h *harness, id uint64, data []byte, off uint64) {
	t.Helper()
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: id, Opcode: roce.WRWrite, Local: data,
		RemoteVA: memVA + off, RKey: memKey, Signaled: true}))
}

// assertACKsMonotonic checks ACK PSNs of direction B→A never go backwards.
func assertACKsMonotonic(t *testing.T, h *harness) {
	t.Helper()
	acks := h.frames(1, isAck)
	for i := 1; i < len(acks); i++ {
		assert.GreaterOrEqual(t, wire.PSNDiff(acks[i].psn, acks[i-1].psn), int32(0), "ACK %d went backwards: %d after %d", i, acks[i].psn, acks[i-1].psn)
	}
}

func TestCleanWrite(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	data := pattern(10*256+17, 1)
	postWrite(t, h, 7, data, 0)
	h.run(time.Second)
	assert.Equal(t, data, h.hosts[1].mem[:len(data)])
	assert.Equal(t, []roce.Completion{{WRID: 7, Status: roce.StatusSuccess, Opcode: roce.WRWrite, QPN: qpnA}}, poll(h.hosts[0].cq))
	d := h.frames(0, isData)
	assert.Equal(t, seqPSN(100, 11), psns(d))
	ops := []wire.Opcode{wire.WriteFirst}
	for i := 0; i < 9; i++ {
		ops = append(ops, wire.WriteMiddle)
	}
	ops = append(ops, wire.WriteLast)
	for i, e := range d {
		assert.Equal(t, ops[i], e.op, "packet %d", i)
		var ackreq bool
		ackreq = e.frame[14+20+8+8]&0x80 != 0
		assert.Equal(t, i == 10, ackreq, "AckReq only on the last packet of a short message (packet %d)", i)
	}
	acks := h.frames(1, isAck)
	require.Len(t, acks, 1)
	assert.Equal(t, uint32(110), acks[0].psn, "the ACK carries the PSN of the last packet received")
	assert.Zero(t, h.hosts[0].qp.Counters.RetransmittedPkts)
	assert.Equal(t, uint32(111), h.hosts[1].qp.ExpectedPSN())
}

// TestAckReqEvery66th: inside a long message rxe sets AckReq on roughly
// every 66th packet (post-incremented counter > 64).
func TestAckReqEvery66th(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	postWrite(t, h, 1, pattern(200*256, 2), 0)
	h.run(time.Second)
	var withAck []int
	for i, e := range h.frames(0, isData) {
		if e.frame[14+20+8+8]&0x80 != 0 {
			withAck = append(withAck, i)
		}
	}
	assert.Equal(t, []int{65, 131, 197, 199}, withAck)
}

// TestGoBackNDropMidMessage drops one data packet in the middle of a
// message: the responder sends exactly one NAK naming that PSN, drops the
// rest silently, and the requester restarts exactly there.
func TestGoBackNDropMidMessage(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	const lost = 104
	h.fault = once(0, lost, drop)
	data := pattern(12*256, 3)
	postWrite(t, h, 1, data, 0)
	h.run(time.Second)
	assert.Equal(t, data, h.hosts[1].mem[:len(data)])
	naks := h.frames(1, isNAK)
	require.Len(t, naks, 1, "exactly one NAK per gap")
	assert.Equal(t, uint32(lost), naks[0].psn, "the NAK names the first lost PSN")
	// After the NAK reached A, retransmission starts at the lost PSN.
	var after []uint32
	for _, e := range h.log {
		if e.dir == 0 && e.at > naks[0].at && !e.op.IsAck() {
			after = append(after, e.psn)
		}
	}
	require.NotEmpty(t, after)
	assert.Equal(t, uint32(lost), after[0])
	assert.Equal(t, uint64(1), h.hosts[1].qp.Counters.OutOfSequence)
	assert.Equal(t, uint64(1), h.hosts[0].qp.Counters.PacketSeqErr)
	assert.Zero(t, h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	assertACKsMonotonic(t, h)
	assert.Equal(t, roce.StatusSuccess, poll(h.hosts[0].cq)[0].Status)
}

// TestLostNAKRecoveredByTimeout: the NAK itself is lost; the retransmit
// timer (4.096 µs × 2^timeout) resends from the oldest unacknowledged PSN.
func TestLostNAKRecoveredByTimeout(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	h.fault = func(e *wireEvent) verdict {
		if (e.dir == 0 && e.psn == 102 && len(h.frames(0, func(x wireEvent) bool { return x.psn == 102 })) == 0) || (e.dir == 1 && isNAK(*e)) {
			return drop
		}
		return pass
	}
	data := pattern(6*256, 4)
	postWrite(t, h, 1, data, 0)
	h.run(time.Second)
	assert.Equal(t, data, h.hosts[1].mem[:len(data)])
	assert.Equal(t, uint64(1), h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	assert.Equal(t, uint64(1), h.hosts[1].qp.Counters.OutOfSequence, "one NAK for the gap, even though it was lost")
	// Nothing was ACKed (AckReq is only on the last packet), so the timeout
	// retransmission starts at the oldest unacknowledged PSN, 100, and the
	// responder re-ACKs 100 and 101 as duplicates.
	var retx []wireEvent
	seen := map[uint32]bool{}
	for _, e := range h.frames(0, isData) {
		if seen[e.psn] {
			retx = append(retx, e)
		}
		seen[e.psn] = true
	}
	require.NotEmpty(t, retx)
	assert.Equal(t, uint32(100), retx[0].psn)
	assert.Equal(t, uint64(2), h.hosts[1].qp.Counters.DuplicateRequest)
	first := h.frames(0, isData)[0].at
	assert.GreaterOrEqual(t, retx[0].at-first, roce.AckTimeout(10), "no retransmission before the timer")
}

// TestLostTailRecoveredByTimeout: the last packet (the only one with
// AckReq) is lost; nothing else would ever trigger a NAK.
func TestLostTailRecoveredByTimeout(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	n := 0
	h.fault = func(e *wireEvent) verdict {
		if e.dir == 0 && e.psn == 103 {
			n++
			if n == 1 {
				return drop
			}
		}
		return pass
	}
	data := pattern(4*256, 5)
	postWrite(t, h, 1, data, 0)
	h.run(time.Second)
	assert.Equal(t, data, h.hosts[1].mem[:len(data)])
	assert.Equal(t, uint64(1), h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	assert.Empty(t, h.frames(1, isNAK))
	// The timer resent from comp.psn = 100: 100..102 arrive as duplicates.
	assert.Equal(t, uint64(3), h.hosts[1].qp.Counters.DuplicateRequest)
	assert.Equal(t, uint64(4), h.hosts[0].qp.Counters.RetransmittedPkts)
}

// TestDuplicateNeverExecutedTwice: a duplicated packet is re-ACKed with the
// last processed PSN and its data is not written again.
func TestDuplicateNeverExecutedTwice(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	h.fault = func(e *wireEvent) verdict {
		if e.dir == 0 && e.psn == 101 {
			return dup
		}
		return pass
	}
	data := pattern(3*256, 6)
	postWrite(t, h, 1, data, 0)
	h.run(time.Second)
	assert.Equal(t, data, h.hosts[1].mem[:len(data)])
	assert.Equal(t, uint64(1), h.hosts[1].qp.Counters.DuplicateRequest)
	acks := h.frames(1, isAck)
	require.Len(t, acks, 2)
	assert.Equal(t, uint32(101), acks[0].psn, "duplicate re-ACKed with the last processed PSN")
	assert.Equal(t, uint32(102), acks[1].psn)
}

// TestCorruptSilentlyDropped: a bad ICRC is counted and dropped, never
// NAKed; the next packet reveals the gap and the NAK repairs it.
func TestCorruptSilentlyDropped(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	h.fault = once(0, 101, corrupt)
	data := pattern(4*256, 7)
	postWrite(t, h, 1, data, 0)
	h.run(time.Second)
	assert.Equal(t, data, h.hosts[1].mem[:len(data)])
	assert.Equal(t, uint64(1), h.hosts[1].qp.Counters.RxICRCErrors)
	naks := h.frames(1, isNAK)
	require.Len(t, naks, 1)
	assert.Equal(t, uint32(101), naks[0].psn)
}

// dropRequests black-holes the requester: every frame host 0 sends is lost.
func dropRequests(e *wireEvent) verdict {
	if e.dir == 0 {
		return drop
	}
	return pass
}

// TestRetryExhaustion: every data packet is lost; with retry_cnt 3 the
// requester retries three times, then completes RETRY_EXC_ERR, the QP goes
// to ERROR and later WRs are flushed.
func TestRetryExhaustion(t *testing.T) {
	cfg := defaultCfg()
	cfg.RetryCnt = 3
	h := newHarness(t, cfg, defaultCfg(), 1<<16)
	h.fault = dropRequests
	postWrite(t, h, 1, pattern(512, 8), 0)
	postWrite(t, h, 2, pattern(256, 9), 1024)
	h.run(10 * time.Second)
	assert.Equal(t, roce.StateError, h.hosts[0].qp.State())
	c := poll(h.hosts[0].cq)
	require.Len(t, c, 2)
	assert.Equal(t, roce.StatusRetryExcErr, c[0].Status)
	assert.Equal(t, uint64(1), c[0].WRID)
	assert.Equal(t, roce.StatusWRFlushErr, c[1].Status)
	assert.Equal(t, uint64(4), h.hosts[0].qp.Counters.LocalAckTimeoutErr, "3 retries, the 4th expiry fails")
	// 3 packets originally, each retry resends all 3.
	assert.Len(t, h.frames(0, isData), 3*4)
	assert.Zero(t, h.clock.Pending(), "no timer left running")
}

// TestRetryCnt7: a QP whose every data packet is lost. The IB spec makes
// only rnr_retry 7 infinite, so by default retry_cnt 7 is seven retries
// (eight timeouts, then RETRY_EXC_ERR); the rxe profile keeps rxe's
// documented departure (rxe_comp.c never decrements 7) and keeps retrying.
func TestRetryCnt7(t *testing.T) {
	for _, p := range roce.Profiles {
		t.Run(p.String(), func(t *testing.T) {
			cfg := defaultCfg()
			cfg.RetryCnt, cfg.Profile = 7, p
			h := newHarness(t, cfg, defaultCfg(), 1<<16)
			h.fault = dropRequests
			postWrite(t, h, 1, pattern(256, 8), 0)
			h.run(100 * roce.AckTimeout(cfg.Timeout))
			if p == roce.RXE {
				assert.Equal(t, roce.StateRTS, h.hosts[0].qp.State())
				assert.GreaterOrEqual(t, h.hosts[0].qp.Counters.LocalAckTimeoutErr, uint64(90))
				return
			}
			assert.Equal(t, roce.StateError, h.hosts[0].qp.State())
			assert.Equal(t, uint64(8), h.hosts[0].qp.Counters.LocalAckTimeoutErr)
		})
	}
}

// TestProfileWindow: rxe keeps at most 128 PSNs unacknowledged; the
// commodity profile is bounded by the PSN space only, so a NetReduce
// window of 32 × 255 packets goes out at once.
func TestProfileWindow(t *testing.T) {
	for _, c := range []struct {
		p    roce.Profile
		want int
	}{{roce.RXE, 128}, {roce.Commodity, 32 * 255}} {
		cfg := roce.Config{MTU: 256, SQPSN: 1, RQPSN: 1, Timeout: 10, RetryCnt: 7, RNRRetry: 7, Profile: c.p}
		r := newReqRig(t, cfg)
		require.NoError(t, r.qp.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: make([]byte, 32*255*256), RemoteVA: memVA, RKey: memKey}))
		assert.Len(t, r.drain(t), c.want, "%v", c.p)
	}
	_, err := roce.ParseProfile("cx9")
	assert.ErrorContains(t, err, "want commodity or rxe")
	p, err := roce.ParseProfile("rxe")
	assert.NoError(t, err)
	assert.Equal(t, roce.RXE, p)
}

// TestRemoteAccessError: a WRITE outside the region gets NAK 0x62 carrying
// the failing PSN; the target memory is untouched; both QPs end in ERROR
// (the responder at once, the requester on the NAK).
func TestRemoteAccessError(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1024)
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: 5, Opcode: roce.WRWrite, Local: pattern(300, 1),
		RemoteVA: memVA + 900, RKey: memKey, Signaled: true}))
	h.run(time.Second)
	assert.Equal(t, make([]byte, 1024), h.hosts[1].mem)
	naks := h.frames(1, func(e wireEvent) bool { return e.op == wire.Acknowledge && e.syn.IsNAK() })
	require.Len(t, naks, 1)
	assert.Equal(t, wire.SyndromeNAKRemAccess, naks[0].syn)
	assert.Equal(t, uint32(100), naks[0].psn)
	assert.Equal(t, roce.StateError, h.hosts[1].qp.State())
	assert.Equal(t, roce.StateError, h.hosts[0].qp.State())
	c := poll(h.hosts[0].cq)
	require.Len(t, c, 1)
	assert.Equal(t, roce.StatusRemAccessErr, c[0].Status)
}

// TestSendRNR: a SEND finds no receive WQE: RNR NAK with the request's PSN,
// the QP stays up, the requester waits the RNR time and succeeds once a
// receive is posted.
func TestSendRNR(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1024)
	msg := pattern(600, 3)
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: 9, Opcode: roce.WRSendImm, Local: msg, Imm: 0xabcd, Signaled: true}))
	h.run(5 * time.Microsecond)
	rnr := h.frames(1, func(e wireEvent) bool { return e.op == wire.Acknowledge && e.syn.IsRNRNAK() })
	require.Len(t, rnr, 1)
	assert.Equal(t, uint32(100), rnr[0].psn)
	assert.Equal(t, roce.StateRTS, h.hosts[1].qp.State())
	buf := make([]byte, 1000)
	require.NoError(t, h.hosts[1].qp.PostRecv(roce.RecvWR{ID: 77, Buf: buf}))
	h.run(time.Second)
	assert.Equal(t, msg, buf[:600])
	rc := poll(h.hosts[1].rcq)
	require.Len(t, rc, 1)
	assert.Equal(t, roce.Completion{WRID: 77, Status: roce.StatusSuccess, Opcode: roce.WRSendImm, Recv: true, Len: 600, Imm: 0xabcd, HasImm: true, QPN: qpnB}, rc[0])
	assert.Equal(t, roce.StatusSuccess, poll(h.hosts[0].cq)[0].Status)
	// The retry waited at least the RNR time of code 1 (10 µs).
	var firstRetry time.Duration
	for _, e := range h.frames(0, isData) {
		if e.at > rnr[0].at {
			firstRetry = e.at
			break
		}
	}
	assert.GreaterOrEqual(t, firstRetry-rnr[0].at, roce.RNRDelay(1))
}

func TestRNRRetryExhaustion(t *testing.T) {
	cfg := defaultCfg()
	cfg.RNRRetry = 2
	h := newHarness(t, cfg, defaultCfg(), 1024)
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: 9, Opcode: roce.WRSend, Local: pattern(10, 3), Signaled: true}))
	h.run(time.Second)
	c := poll(h.hosts[0].cq)
	require.Len(t, c, 1)
	assert.Equal(t, roce.StatusRNRRetryExcErr, c[0].Status)
	assert.Equal(t, roce.StateError, h.hosts[0].qp.State())
	assert.Equal(t, uint64(3), h.hosts[1].qp.Counters.SendRNRErr, "2 retries after the first RNR NAK")
}

// TestPSNWrap: a transfer whose PSNs wrap from 0xFFFFFF to 0, with a loss
// across the wrap.
func TestPSNWrap(t *testing.T) {
	cfg := defaultCfg()
	cfg.SQPSN, cfg.RQPSN = 0xFFFFFD, 0xFFFFFD
	h := newHarness(t, cfg, cfg, 1<<16)
	h.fault = once(0, 0, drop)
	data := pattern(8*256, 11)
	postWrite(t, h, 1, data, 0)
	h.run(time.Second)
	assert.Equal(t, data, h.hosts[1].mem[:len(data)])
	naks := h.frames(1, isNAK)
	require.Len(t, naks, 1)
	assert.Equal(t, uint32(0), naks[0].psn)
	assert.Equal(t, uint32(5), h.hosts[1].qp.ExpectedPSN())
	assertACKsMonotonic(t, h)
}

// TestReorder: 102 arrives after 103. 103 is out of order: NAK 102, and
// 103 is dropped. The late 102 fills the gap, so 104 reveals a new gap at
// 103: a second NAK, for a different gap. The requester is already
// retrying from 102 and ignores it; data ends exact.
func TestReorder(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	h.fault = once(0, 102, hold)
	data := pattern(6*256, 12)
	postWrite(t, h, 1, data, 0)
	h.run(time.Second)
	assert.Equal(t, data, h.hosts[1].mem[:len(data)])
	assert.Equal(t, []uint32{102, 103}, psns(h.frames(1, isNAK)))
	assert.Equal(t, uint64(2), h.hosts[0].qp.Counters.PacketSeqErr)
	assert.Zero(t, h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	assertACKsMonotonic(t, h)
}

// TestWindow: no more than MaxUnacked PSNs are ever in flight.
func TestWindow(t *testing.T) {
	cfg := defaultCfg()
	cfg.MaxUnacked = 8
	h := newHarness(t, cfg, defaultCfg(), 1<<16)
	postWrite(t, h, 1, pattern(100*256, 13), 0)
	h.run(time.Second)
	acked := uint32(99)
	for _, e := range h.log {
		if e.dir == 1 && isAck(e) {
			acked = e.psn
		}
		if e.dir == 0 && isData(e) {
			assert.Less(t, wire.PSNDiff(e.psn, acked), int32(9), "PSN %d sent with %d acknowledged", e.psn, acked)
		}
	}
}

func TestWriteImmAndSendTogether(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	rbuf := make([]byte, 2048)
	require.NoError(t, h.hosts[1].qp.PostRecv(roce.RecvWR{ID: 1, Buf: make([]byte, 0)}))
	require.NoError(t, h.hosts[1].qp.PostRecv(roce.RecvWR{ID: 2, Buf: rbuf}))
	w := pattern(700, 1)
	s := pattern(1000, 2)
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: 10, Opcode: roce.WRWriteImm, Local: w, RemoteVA: memVA, RKey: memKey, Imm: 42, Signaled: true}))
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: 11, Opcode: roce.WRSend, Local: s, Signaled: false}))
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: 12, Opcode: roce.WRWrite, Local: nil, RemoteVA: 0, RKey: 0, Signaled: true}))
	h.run(time.Second)
	assert.Equal(t, w, h.hosts[1].mem[:700])
	assert.Equal(t, s, rbuf[:1000])
	rc := poll(h.hosts[1].rcq)
	require.Len(t, rc, 2)
	assert.Equal(t, roce.Completion{WRID: 1, Status: roce.StatusSuccess, Opcode: roce.WRWriteImm, Recv: true, Imm: 42, HasImm: true, QPN: qpnB}, rc[0])
	assert.Equal(t, 1000, rc[1].Len)
	sc := poll(h.hosts[0].cq)
	require.Len(t, sc, 2, "the unsignaled SEND completes silently")
	assert.Equal(t, []uint64{10, 12}, []uint64{sc[0].WRID, sc[1].WRID})
}

// TestTransports: the same lossy transfer over RoCEv2/IPv6 and RoCEv1
// (GIDs in the GRH).
func TestTransports(t *testing.T) {
	for _, c := range []struct {
		tr   frames.Transport
		a, b string
	}{{frames.V2IPv6, "fd00::a", "fd00::b"}, {frames.V1, "fe80::a", "fe80::b"}, {frames.V1, "10.0.0.1", "10.0.0.2"}} {
		t.Run(c.tr.String()+"/"+c.a, func(t *testing.T) {
			h := newHarnessOn(t, c.tr, netip.MustParseAddr(c.a), netip.MustParseAddr(c.b), defaultCfg(), defaultCfg(), 1<<16)
			h.fault = once(0, 102, drop)
			data := pattern(5*256+3, 21)
			postWrite(t, h, 1, data, 0)
			h.run(time.Second)
			assert.Equal(t, data, h.hosts[1].mem[:len(data)])
			assert.Equal(t, []uint32{102}, psns(h.frames(1, isNAK)))
			var v frames.View
			require.NoError(t, v.Parse(h.log[0].frame))
			assert.Equal(t, c.tr, v.Transport())
			assert.Equal(t, c.a, v.SrcAddr().Unmap().String())
		})
	}
}
