package roce_test

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// READ and atomics (docs/roce.md §8), one decision per test. Expected
// frames are written out here from the rules, not derived from the code.

// postRead posts a signaled READ of n bytes at B's offset off into a new
// buffer, which it returns.
func postRead(t *testing.T, h *harness, id uint64, off uint64, n int) []byte {
	t.Helper()
	buf := make([]byte, n)
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: id, Opcode: roce.WRRead, Local: buf,
		RemoteVA: memVA + off, RKey: memKey, Signaled: true}))
	return buf
}

// postAtomic posts a signaled atomic on B's 8 bytes at off and returns the
// buffer that receives the original value.
func postAtomic(t *testing.T, h *harness, id uint64, op roce.WROpcode, off uint64, swapAdd, compare uint64) []byte {
	t.Helper()
	buf := make([]byte, 8)
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: id, Opcode: op, Local: buf,
		RemoteVA: memVA + off, RKey: memKey, SwapAdd: swapAdd, Compare: compare, Signaled: true}))
	return buf
}

func le64(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }

func isReadResp(e wireEvent) bool { return e.op.IsReadResponse() }

func opsOf(es []wireEvent) []wire.Opcode {
	out := make([]wire.Opcode, len(es))
	for i, e := range es {
		out[i] = e.op
	}
	return out
}

// reth reads the RETH of a READ request frame as the test sees it: VA,
// R_Key, length at the byte offsets of docs/roce.md §1 (Ethernet, IPv4,
// UDP, BTH, then RETH).
func reth(f []byte) (uint64, uint32, uint32) {
	r := f[14+20+8+12:]
	return binary.BigEndian.Uint64(r), binary.BigEndian.Uint32(r[8:]), binary.BigEndian.Uint32(r[12:])
}

// TestReadClean: one READ of 10 MTUs and 17 bytes takes PSNs 100..110: one
// request at 100 with the whole RETH, eleven responses FIRST, MIDDLE x9,
// LAST at 100..110, the data bit for bit; the next WRITE starts at 111.
func TestReadClean(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	src := pattern(10*256+17, 9)
	copy(h.hosts[1].mem[512:], src)
	got := postRead(t, h, 3, 512, len(src))
	postWrite(t, h, 4, pattern(10, 1), 8192)
	h.run(time.Second)
	assert.Equal(t, src, got)
	assert.Equal(t, []roce.Completion{{WRID: 3, Status: roce.StatusSuccess, Opcode: roce.WRRead, QPN: qpnA, Len: len(src)},
		{WRID: 4, Status: roce.StatusSuccess, Opcode: roce.WRWrite, QPN: qpnA}}, poll(h.hosts[0].cq))
	reqs := h.frames(0, isData)
	require.Len(t, reqs, 2)
	assert.Equal(t, wire.ReadRequest, reqs[0].op)
	assert.Equal(t, uint32(100), reqs[0].psn)
	va, key, n := reth(reqs[0].frame)
	assert.Equal(t, []uint64{memVA + 512, memKey, uint64(len(src))}, []uint64{va, uint64(key), uint64(n)})
	assert.Equal(t, uint32(111), reqs[1].psn, "the READ took 11 PSNs")
	resps := h.frames(1, isReadResp)
	assert.Equal(t, seqPSN(100, 11), psns(resps))
	want := []wire.Opcode{wire.ReadResponseFirst}
	for i := 0; i < 9; i++ {
		want = append(want, wire.ReadResponseMiddle)
	}
	assert.Equal(t, append(want, wire.ReadResponseLast), opsOf(resps))
	for _, e := range resps {
		hasAETH := e.op != wire.ReadResponseMiddle
		assert.Equal(t, hasAETH, e.syn == wire.SyndromeACK, "AETH only on FIRST and LAST (psn %d)", e.psn)
	}
	assert.Equal(t, uint32(112), h.hosts[1].qp.ExpectedPSN())
	assert.Zero(t, h.hosts[0].qp.Counters.RetransmittedPkts)
}

// TestReadZeroAndOnly: a READ of 0 bytes and one of 5 bytes: one PSN each,
// each answered by one ONLY.
func TestReadZeroAndOnly(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<12)
	copy(h.hosts[1].mem, "hello")
	postRead(t, h, 1, 0, 0)
	got := postRead(t, h, 2, 0, 5)
	h.run(time.Second)
	assert.Equal(t, "hello", string(got))
	resps := h.frames(1, isReadResp)
	assert.Equal(t, []uint32{100, 101}, psns(resps))
	assert.Equal(t, []wire.Opcode{wire.ReadResponseOnly, wire.ReadResponseOnly}, opsOf(resps))
	assert.Len(t, poll(h.hosts[0].cq), 2)
}

// TestReadResponseLostReissuedFromGap: response 104 of 100..111 is lost;
// response 105 reveals the gap (an implied NAK) and the requester sends a
// new READ request at PSN 104 for the rest: VA advanced by 4 MTUs, length
// shortened by 4 MTUs. The responder re-executes it from 104 (FIRST at 104).
func TestReadResponseLostReissuedFromGap(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	src := pattern(12*256-3, 7)
	copy(h.hosts[1].mem, src)
	h.fault = once(1, 104, drop)
	got := postRead(t, h, 1, 0, len(src))
	h.run(time.Second)
	assert.Equal(t, src, got)
	reqs := h.frames(0, isData)
	require.Len(t, reqs, 2)
	assert.Equal(t, uint32(104), reqs[1].psn)
	va, _, n := reth(reqs[1].frame)
	assert.Equal(t, uint64(memVA+4*256), va)
	assert.Equal(t, uint32(len(src)-4*256), n)
	assert.Equal(t, uint64(1), h.hosts[0].qp.Counters.ImpliedNAKSeqErr, "one implied NAK for the gap; later out-of-sequence responses are ignored")
	assert.Zero(t, h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	assert.Equal(t, uint64(1), h.hosts[1].qp.Counters.DuplicateRequest)
	var after []wireEvent
	for _, e := range h.frames(1, isReadResp) {
		if e.at > reqs[1].at {
			after = append(after, e)
		}
	}
	require.NotEmpty(t, after)
	assert.Equal(t, uint32(104), after[0].psn)
	assert.Equal(t, wire.ReadResponseFirst, after[0].op, "a re-executed READ starts with FIRST")
	assert.Equal(t, roce.StatusSuccess, poll(h.hosts[0].cq)[0].Status)
}

// TestReadLastResponseLostTimeout: the LAST response is lost: nothing
// follows it, so the retransmit timer re-issues the READ at the last PSN
// for the last bytes, answered by an ONLY.
func TestReadLastResponseLostTimeout(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	src := pattern(3*256+40, 8)
	copy(h.hosts[1].mem, src)
	h.fault = once(1, 103, drop)
	got := postRead(t, h, 1, 0, len(src))
	h.run(time.Second)
	assert.Equal(t, src, got)
	reqs := h.frames(0, isData)
	require.Len(t, reqs, 2)
	assert.Equal(t, uint32(103), reqs[1].psn)
	va, _, n := reth(reqs[1].frame)
	assert.Equal(t, []uint64{memVA + 3*256, 40}, []uint64{va, uint64(n)})
	assert.GreaterOrEqual(t, reqs[1].at-reqs[0].at, roce.AckTimeout(10))
	assert.Equal(t, uint64(1), h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	last := h.frames(1, isReadResp)
	assert.Equal(t, wire.ReadResponseOnly, last[len(last)-1].op)
}

// TestReadRequestLostNAKedByNextRequest: the READ request itself is lost;
// the WRITE after it is out of sequence, NAKed with the READ's PSN, and the
// READ is sent again whole.
func TestReadRequestLostNAKedByNextRequest(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	src := pattern(600, 5)
	copy(h.hosts[1].mem, src)
	h.fault = once(0, 100, drop)
	got := postRead(t, h, 1, 0, len(src))
	data := pattern(100, 6)
	postWrite(t, h, 2, data, 4096)
	h.run(time.Second)
	assert.Equal(t, src, got)
	assert.Equal(t, data, h.hosts[1].mem[4096:4196])
	naks := h.frames(1, isNAK)
	require.Len(t, naks, 1)
	assert.Equal(t, uint32(100), naks[0].psn)
	reqs := h.frames(0, isData)
	assert.Equal(t, []uint32{100, 103, 100, 103}, psns(reqs), "the READ took 100..102, the WRITE 103")
	va, _, n := reth(reqs[2].frame)
	assert.Equal(t, []uint64{memVA, 600}, []uint64{va, uint64(n)})
}

// TestReadResponseAcksEarlierWrite: the ACK of a WRITE is lost; the READ
// responses after it acknowledge the WRITE implicitly, which completes
// without a retransmission or timeout.
func TestReadResponseAcksEarlierWrite(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	h.fault = func(e *wireEvent) verdict {
		if e.dir == 1 && isAck(*e) {
			return drop
		}
		return pass
	}
	data := pattern(300, 1)
	postWrite(t, h, 1, data, 4096)
	copy(h.hosts[1].mem, pattern(20, 2))
	got := postRead(t, h, 2, 0, 20)
	h.run(time.Second)
	assert.Equal(t, pattern(20, 2), got)
	cs := poll(h.hosts[0].cq)
	require.Len(t, cs, 2)
	assert.Equal(t, []uint64{1, 2}, []uint64{cs[0].WRID, cs[1].WRID})
	assert.Equal(t, roce.StatusSuccess, cs[0].Status)
	assert.Zero(t, h.hosts[0].qp.Counters.RetransmittedPkts)
	assert.Zero(t, h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	assert.NotEmpty(t, h.frames(1, func(e wireEvent) bool { return e.verdict == drop }), "the WRITE's ACK was sent and lost")
}

// TestAckPastReadIsImpliedNAK: every response of a READ is lost but the ACK
// of the WRITE after it arrives: the ACK completes nothing past the READ
// (only data completes a READ) and makes the requester ask again at once.
func TestAckPastReadIsImpliedNAK(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	n := 0
	h.fault = func(e *wireEvent) verdict {
		if e.dir == 1 && e.op.IsReadResponse() && n < 2 {
			n++
			return drop
		}
		return pass
	}
	copy(h.hosts[1].mem, pattern(300, 4))
	got := postRead(t, h, 1, 0, 300)
	postWrite(t, h, 2, pattern(8, 1), 4096)
	h.run(time.Second)
	assert.Equal(t, pattern(300, 4), got)
	assert.Equal(t, uint64(1), h.hosts[0].qp.Counters.ImpliedNAKSeqErr)
	assert.Zero(t, h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	cs := poll(h.hosts[0].cq)
	require.Len(t, cs, 2)
	assert.Equal(t, []uint64{1, 2}, []uint64{cs[0].WRID, cs[1].WRID}, "completions in order")
}

// TestFetchAddAndCompareSwap: the atomics act on B's little-endian uint64,
// return the original value, and each takes one PSN.
func TestFetchAddAndCompareSwap(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<12)
	binary.LittleEndian.PutUint64(h.hosts[1].mem[64:], 1000)
	binary.LittleEndian.PutUint64(h.hosts[1].mem[72:], 7)
	o1 := postAtomic(t, h, 1, roce.WRFetchAdd, 64, 5, 0)
	o2 := postAtomic(t, h, 2, roce.WRFetchAdd, 64, 1<<63, 0)
	o3 := postAtomic(t, h, 3, roce.WRCompSwap, 72, 99, 8) // compare fails
	o4 := postAtomic(t, h, 4, roce.WRCompSwap, 72, 42, 7) // compare holds
	h.run(time.Second)
	assert.Equal(t, []uint64{1000, 1005, 7, 7}, []uint64{le64(o1), le64(o2), le64(o3), le64(o4)})
	assert.Equal(t, uint64(1005+1<<63), le64(h.hosts[1].mem[64:]))
	assert.Equal(t, uint64(42), le64(h.hosts[1].mem[72:]))
	reqs := h.frames(0, isData)
	assert.Equal(t, seqPSN(100, 4), psns(reqs))
	assert.Equal(t, []wire.Opcode{wire.FetchAdd, wire.FetchAdd, wire.CompareSwap, wire.CompareSwap}, opsOf(reqs))
	acks := h.frames(1, func(e wireEvent) bool { return e.op == wire.AtomicAcknowledge })
	assert.Equal(t, seqPSN(100, 4), psns(acks))
	for i, c := range poll(h.hosts[0].cq) {
		assert.Equal(t, roce.StatusSuccess, c.Status, "WR %d", i)
	}
	assert.Equal(t, uint64(4), h.hosts[1].qp.Counters.AtomicsExecuted)
}

// TestAtomicAckLostReplayedFromCache: the ATOMIC ACKNOWLEDGE is lost; the
// timer resends the fetch-and-add; the responder answers the duplicate
// from its replay cache with the original value and adds nothing again.
func TestAtomicAckLostReplayedFromCache(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<12)
	binary.LittleEndian.PutUint64(h.hosts[1].mem, 40)
	h.fault = once(1, 100, drop)
	o := postAtomic(t, h, 1, roce.WRFetchAdd, 0, 2, 0)
	h.run(time.Second)
	assert.Equal(t, uint64(40), le64(o), "the original value, not the value after the first execution")
	assert.Equal(t, uint64(42), le64(h.hosts[1].mem), "added once")
	assert.Equal(t, uint64(1), h.hosts[1].qp.Counters.AtomicsExecuted)
	assert.Equal(t, uint64(1), h.hosts[1].qp.Counters.AtomicReplays)
	assert.Equal(t, uint64(1), h.hosts[0].qp.Counters.LocalAckTimeoutErr)
	assert.Equal(t, roce.StatusSuccess, poll(h.hosts[0].cq)[0].Status)
}

// TestAtomicMisalignedNAK: an atomic at an address that is not 8-byte
// aligned is refused with NAK invalid request (rxe
// RESPST_ERR_MISALIGNED_ATOMIC); memory is untouched; both QPs end in
// ERROR, the requester's WR with REM_INV_REQ_ERR.
func TestAtomicMisalignedNAK(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<12)
	postAtomic(t, h, 1, roce.WRFetchAdd, 4, 1, 0)
	h.run(time.Second)
	assert.Equal(t, make([]byte, 1<<12), h.hosts[1].mem)
	naks := h.frames(1, func(e wireEvent) bool { return e.op == wire.Acknowledge && e.syn.IsNAK() })
	require.Len(t, naks, 1)
	assert.Equal(t, wire.SyndromeNAKInvalidReq, naks[0].syn)
	assert.Equal(t, uint32(100), naks[0].psn)
	assert.Equal(t, roce.StateError, h.hosts[1].qp.State())
	c := poll(h.hosts[0].cq)
	require.Len(t, c, 1)
	assert.Equal(t, roce.StatusRemInvReqErr, c[0].Status)
}

// TestReadAtomicAccessErrors: a READ past the region and an atomic on a
// region without remote-atomic access are NAKed remote access error.
func TestReadAtomicAccessErrors(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<12)
	postRead(t, h, 1, 4000, 200)
	h.run(time.Second)
	c := poll(h.hosts[0].cq)
	require.Len(t, c, 1)
	assert.Equal(t, roce.StatusRemAccessErr, c[0].Status)
	assert.Empty(t, h.frames(1, isReadResp))

	h = newHarness(t, defaultCfg(), defaultCfg(), 1<<12)
	require.NoError(t, h.hosts[1].pd.Register(&roce.MR{Addr: 0x80000, Buf: make([]byte, 64), RKey: 0x77, Access: roce.AccessRemoteWrite | roce.AccessRemoteRead}))
	require.NoError(t, h.hosts[0].qp.PostSend(roce.SendWR{ID: 2, Opcode: roce.WRCompSwap, Local: make([]byte, 8), RemoteVA: 0x80000, RKey: 0x77, Signaled: true}))
	h.run(time.Second)
	c = poll(h.hosts[0].cq)
	require.Len(t, c, 1)
	assert.Equal(t, roce.StatusRemAccessErr, c[0].Status)
}

// TestMaxRdAtomic: with max_rd_atomic 2, no more than two READs or atomics
// are outstanding: the third is sent only after the first completes, while
// a WRITE behind them is not held back by the limit itself.
func TestMaxRdAtomic(t *testing.T) {
	cfg := defaultCfg()
	cfg.MaxRdAtomic = 2
	h := newHarness(t, cfg, defaultCfg(), 1<<12)
	for i := 0; i < 5; i++ {
		postRead(t, h, uint64(i), uint64(i*8), 8)
	}
	h.run(time.Second)
	assert.Len(t, poll(h.hosts[0].cq), 5)
	// Replay the wire: requests sent minus responses delivered to A.
	out, most := 0, 0
	var reqAt, respAt []time.Duration
	for _, e := range h.frames(0, isData) {
		reqAt = append(reqAt, e.at)
	}
	for _, d := range h.delivered {
		if d.dir == 1 {
			respAt = append(respAt, d.at)
		}
	}
	i, j := 0, 0
	for i < len(reqAt) {
		if j < len(respAt) && respAt[j] <= reqAt[i] {
			out--
			j++
			continue
		}
		out++
		most = max(most, out)
		i++
	}
	assert.Equal(t, 2, most)
}

// TestRequesterBadReadResponse: a READ response whose opcode does not fit
// its place (a MIDDLE where the READ's first response is due) or whose
// length is wrong completes the READ with BAD_RESP_ERR.
func TestRequesterBadReadResponse(t *testing.T) {
	for _, c := range []struct {
		name string
		op   wire.Opcode
		n    int
	}{
		{"MIDDLE first", wire.ReadResponseMiddle, 256},
		{"ONLY for a two-packet READ", wire.ReadResponseOnly, 256},
		{"FIRST of the wrong length", wire.ReadResponseFirst, 200},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReqRig(t, defaultCfg())
			require.NoError(t, r.qp.PostSend(roce.SendWR{ID: 9, Opcode: roce.WRRead, Local: make([]byte, 300), RemoteVA: memVA, RKey: memKey, Signaled: true}))
			assert.Equal(t, []uint32{100}, r.drain(t))
			n, err := r.bld.Build(r.buf, &frames.Packet{Opcode: c.op, PSN: 100, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK}, Payload: pattern(c.n, 1)})
			require.NoError(t, err)
			var v frames.View
			require.NoError(t, v.Parse(append([]byte(nil), r.buf[:n]...)))
			r.qp.Receive(&v)
			cs := poll(r.cq)
			require.Len(t, cs, 1)
			assert.Equal(t, roce.StatusBadRespErr, cs[0].Status)
			assert.Equal(t, roce.StateError, r.qp.State())
		})
	}
}

// TestDuplicateReadReexecuted: the responder re-executes a duplicate READ
// from the duplicate's own PSN, VA and length (reading memory as it is
// now), answering FIRST/LAST from that PSN; a duplicate whose range or
// R_Key lies outside the READ first executed is dropped without a reply;
// neither moves the expected PSN.
func TestDuplicateReadReexecuted(t *testing.T) {
	r := newRespRig(t)
	copy(r.mem, pattern(3*256, 1))
	read := func(psn uint32, va uint64, key uint32, n uint32) {
		r.in(t, frames.Packet{Opcode: wire.ReadRequest, PSN: psn, AckReq: true, RETH: frames.RETHFields{VA: va, RKey: key, DMALen: n}}, nil, false)
	}
	readRig(t, r)
	read(100, memVA, memKey, 3*256)
	got := r.readOut(t)
	assert.Equal(t, []wire.Opcode{wire.ReadResponseFirst, wire.ReadResponseMiddle, wire.ReadResponseLast}, got.ops)
	assert.Equal(t, []uint32{100, 101, 102}, got.psns)
	assert.Equal(t, pattern(3*256, 1), got.data)
	assert.Equal(t, uint32(103), r.qp.ExpectedPSN())

	copy(r.mem, pattern(3*256, 2)) // memory changes; a re-execution reads it anew
	read(101, memVA+256, memKey, 2*256)
	got = r.readOut(t)
	assert.Equal(t, []wire.Opcode{wire.ReadResponseFirst, wire.ReadResponseLast}, got.ops)
	assert.Equal(t, []uint32{101, 102}, got.psns)
	assert.Equal(t, pattern(3*256, 2)[256:], got.data)
	assert.Equal(t, []uint32{1, 1}, got.msns, "the MSN counted the READ once")

	read(101, memVA+256, memKey+1, 2*256) // another R_Key
	read(101, memVA, memKey, 3*256)       // a range the READ at 101 never had
	assert.Empty(t, r.readOut(t).ops)
	assert.Equal(t, uint32(103), r.qp.ExpectedPSN())
	assert.Equal(t, roce.StateRTS, r.qp.State())
}

type readOut struct {
	ops  []wire.Opcode
	psns []uint32
	msns []uint32
	data []byte
}

// readRig gives the responder rig's region remote read access too.
func readRig(t *testing.T, r *respRig) {
	t.Helper()
	pd := roce.NewPD()
	require.NoError(t, pd.Register(&roce.MR{Addr: memVA, Buf: r.mem, RKey: memKey, Access: roce.AccessRemoteWrite | roce.AccessRemoteRead | roce.AccessRemoteAtomic}))
	r.qp = roce.NewQP(qpnB, vclock.New(), pd, roce.NewCQ(8), r.rcq)
	require.NoError(t, r.qp.Connect(frames.Path{Transport: frames.V2IPv4, SrcMAC: macB, DstMAC: macA, SrcIP: ipB, DstIP: ipA, DestQP: qpnA},
		roce.Config{MTU: 256, SQPSN: 500, RQPSN: 100, Timeout: 10, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 3}))
}

func (r *respRig) readOut(t *testing.T) readOut {
	var o readOut
	for {
		n, ok := r.qp.NextFrame(r.buf)
		if !ok {
			return o
		}
		var v frames.View
		require.NoError(t, v.Parse(r.buf[:n]))
		o.ops = append(o.ops, v.Opcode())
		o.psns = append(o.psns, v.PSN())
		if a := v.AETH(); a != nil {
			o.msns = append(o.msns, a.MSN())
		}
		o.data = append(o.data, v.Payload()...)
	}
}

// TestQPReadAtomicAllocatesNothing pins the zero-allocation steady state of
// READ (request, responses built from the region, data landing, completion)
// and of fetch-and-add (execution, replay record, ATOMIC ACKNOWLEDGE).
func TestQPReadAtomicAllocatesNothing(t *testing.T) {
	mem := pattern(64*1024, 4)
	p, cq := newPipe(t, 1024, mem)
	dst := make([]byte, 60*1024+5)
	orig := make([]byte, 8)
	rd := roce.SendWR{ID: 1, Opcode: roce.WRRead, Local: dst, RemoteVA: memVA, RKey: memKey, Signaled: true}
	fa := roce.SendWR{ID: 2, Opcode: roce.WRFetchAdd, Local: orig, RemoteVA: memVA + 61*1024, RKey: memKey, SwapAdd: 3, Signaled: true}
	var comp [2]roce.Completion
	run := func() {
		require.NoError(t, p.a.PostSend(rd))
		require.NoError(t, p.a.PostSend(fa))
		p.pump()
		require.Equal(t, 2, cq.Poll(comp[:]))
	}
	run()
	before := le64(mem[61*1024:])
	require.Zero(t, testing.AllocsPerRun(20, run))
	require.Equal(t, mem[:len(dst)], dst)
	require.Equal(t, before+3*21, le64(mem[61*1024:]), "one add per run (AllocsPerRun runs once more to warm up)")
}

// TestReadRetryExhaustion: every READ response and atomic ACK is lost;
// with retry_cnt 3 the requester asks three times more, then completes
// the READ with RETRY_EXC_ERR, flushes the atomic behind it, and ends in
// ERROR, as for a WRITE (TestRetryExhaustion).
func TestReadRetryExhaustion(t *testing.T) {
	cfg := defaultCfg()
	cfg.RetryCnt = 3
	h := newHarness(t, cfg, defaultCfg(), 1<<12)
	h.fault = func(e *wireEvent) verdict {
		if e.dir == 1 {
			return drop
		}
		return pass
	}
	postRead(t, h, 1, 0, 700)
	postAtomic(t, h, 2, roce.WRFetchAdd, 1024, 1, 0)
	h.run(10 * time.Second)
	assert.Equal(t, roce.StateError, h.hosts[0].qp.State())
	c := poll(h.hosts[0].cq)
	require.Len(t, c, 2)
	assert.Equal(t, []uint64{1, 2}, []uint64{c[0].WRID, c[1].WRID})
	assert.Equal(t, roce.StatusRetryExcErr, c[0].Status)
	assert.Equal(t, roce.StatusWRFlushErr, c[1].Status)
	assert.Equal(t, uint64(4), h.hosts[0].qp.Counters.LocalAckTimeoutErr, "3 retries, the 4th expiry fails")
	// Each round: the READ (PSNs 100..102) and the fetch-and-add (103).
	assert.Equal(t, []uint32{100, 103, 100, 103, 100, 103, 100, 103}, psns(h.frames(0, isData)))
	assert.Equal(t, uint64(1), h.hosts[1].qp.Counters.AtomicsExecuted, "the retried atomic was answered from the cache")
	assert.Equal(t, uint64(3), h.hosts[1].qp.Counters.AtomicReplays)
	assert.Equal(t, uint64(1), le64(h.hosts[1].mem[1024:]))
	assert.Zero(t, h.clock.Pending(), "no timer left running")
}

// TestReadGapPerProfile: a READ response lost in the middle. The
// commodity requester re-asks at once when the next response shows the gap;
// the rxe one drops the out-of-sequence responses and its timer re-asks
// (rxe check_psn). Both end bit-exact.
func TestReadGapPerProfile(t *testing.T) {
	for _, p := range roce.Profiles {
		t.Run(p.String(), func(t *testing.T) {
			cfg := defaultCfg()
			cfg.Profile = p
			h := newHarness(t, cfg, defaultCfg(), 1<<16)
			src := pattern(8*256, 2)
			copy(h.hosts[1].mem, src)
			h.fault = once(1, 103, drop)
			got := postRead(t, h, 1, 0, len(src))
			h.run(time.Second)
			assert.Equal(t, src, got)
			reqs := h.frames(0, isData)
			require.Len(t, reqs, 2)
			assert.Equal(t, uint32(103), reqs[1].psn)
			qc := h.hosts[0].qp.Counters
			if p == roce.RXE {
				assert.Equal(t, []uint64{0, 1}, []uint64{qc.ImpliedNAKSeqErr, qc.LocalAckTimeoutErr})
				assert.GreaterOrEqual(t, reqs[1].at-reqs[0].at, roce.AckTimeout(cfg.Timeout))
			} else {
				assert.Equal(t, []uint64{1, 0}, []uint64{qc.ImpliedNAKSeqErr, qc.LocalAckTimeoutErr})
				assert.Less(t, reqs[1].at-reqs[0].at, roce.AckTimeout(cfg.Timeout)/10)
			}
		})
	}
}

// TestReadReorderedResponsesOneReissue: READ responses 101 and 102 of
// 100..107 swap places. 102 first is a gap: the READ is asked for again
// from 101; 101 then lands, and the re-asking moves on to 102, the first
// response still missing (102 itself was dropped as out of sequence). The
// later responses 103.. of the first asking are out of sequence too, but
// the READ is being asked for again from 102 already: exactly one new READ
// request goes out, at 102.
func TestReadReorderedResponsesOneReissue(t *testing.T) {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	src := pattern(8*256, 6)
	copy(h.hosts[1].mem, src)
	h.fault = once(1, 101, hold)
	got := postRead(t, h, 1, 0, len(src))
	h.run(time.Second)
	assert.Equal(t, src, got)
	reqs := h.frames(0, isData)
	assert.Equal(t, []uint32{100, 102}, psns(reqs), "the READ, then once more from 102")
	va, _, n := reth(reqs[1].frame)
	assert.Equal(t, []uint64{memVA + 2*256, 6 * 256}, []uint64{va, uint64(n)})
	assert.Equal(t, uint64(1), h.hosts[0].qp.Counters.ImpliedNAKSeqErr)
	assert.Zero(t, h.hosts[0].qp.Counters.LocalAckTimeoutErr)
}

// TestDuplicateAtomicMustBeIdentical: a duplicate atomic is answered from
// the replay cache only if it is the atomic executed at its PSN in all
// respects; one with another operand, address, key or opcode gets no
// reply and changes nothing.
func TestDuplicateAtomicMustBeIdentical(t *testing.T) {
	r := newRespRig(t)
	readRig(t, r)
	binary.LittleEndian.PutUint64(r.mem[8:], 10)
	atomic := func(op wire.Opcode, va uint64, key uint32, add, cmp uint64) {
		r.in(t, frames.Packet{Opcode: op, PSN: 100, AckReq: true,
			AtomicETH: frames.AtomicETHFields{VA: va, RKey: key, SwapAdd: add, Compare: cmp}}, nil, false)
	}
	atomic(wire.FetchAdd, memVA+8, memKey, 5, 0)
	got := r.readOut(t)
	require.Equal(t, []wire.Opcode{wire.AtomicAcknowledge}, got.ops)
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"another operand", func() { atomic(wire.FetchAdd, memVA+8, memKey, 6, 0) }},
		{"another address", func() { atomic(wire.FetchAdd, memVA+16, memKey, 5, 0) }},
		{"another key", func() { atomic(wire.FetchAdd, memVA+8, memKey+1, 5, 0) }},
		{"another opcode", func() { atomic(wire.CompareSwap, memVA+8, memKey, 5, 0) }},
		{"another compare", func() { atomic(wire.FetchAdd, memVA+8, memKey, 5, 1) }},
	} {
		c.f()
		assert.Empty(t, r.readOut(t).ops, c.name)
	}
	atomic(wire.FetchAdd, memVA+8, memKey, 5, 0) // the same again: answered from the cache
	n, ok := r.qp.NextFrame(r.buf)
	require.True(t, ok)
	var v frames.View
	require.NoError(t, v.Parse(r.buf[:n]))
	assert.Equal(t, wire.AtomicAcknowledge, v.Opcode())
	assert.Equal(t, uint64(10), binary.BigEndian.Uint64(v.AtomicAckETH()), "the original value")
	assert.Equal(t, uint64(15), le64(r.mem[8:]), "added once")
	assert.Equal(t, uint64(1), r.qp.Counters.AtomicsExecuted)
	assert.Equal(t, uint64(1), r.qp.Counters.AtomicReplays)
	assert.Equal(t, roce.StateRTS, r.qp.State())
}

// TestReadResponsesKeepTheTimer: four READs of 64 packets are in flight
// (256 KiB, about 21 µs of responses at 100 Gb/s) when response 101 is
// lost. The requester asks again from 101 at once (and for the three READs
// after it), but the answers wait behind the first asking's responses,
// longer than the ACK timeout (8.192 µs). Those responses, out of sequence
// as they are, show the responder at work and keep the retransmit timer
// from firing: no timeout, one implied NAK, each READ asked for twice.
func TestReadResponsesKeepTheTimer(t *testing.T) {
	cfg := defaultCfg()
	cfg.MTU, cfg.Timeout = 1024, 1
	h := newHarness(t, cfg, cfg, 1<<19)
	src := pattern(4*64*1024, 3)
	copy(h.hosts[1].mem, src)
	h.fault = once(1, 101, drop)
	var got [][]byte
	for i := 0; i < 4; i++ {
		got = append(got, postRead(t, h, uint64(i), uint64(i*64*1024), 64*1024))
	}
	h.run(time.Second)
	for i := range got {
		assert.Equal(t, src[i*64*1024:(i+1)*64*1024], got[i], "READ %d", i)
	}
	qc := h.hosts[0].qp.Counters
	assert.Zero(t, qc.LocalAckTimeoutErr)
	assert.Equal(t, uint64(1), qc.ImpliedNAKSeqErr)
	assert.Equal(t, []uint32{100, 164, 228, 292, 101, 164, 228, 292}, psns(h.frames(0, isData)))
}
