package roce_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// A single responder QP (B) fed hand-built request frames, one decision of
// docs/roce.md §4 per row.

type respRig struct {
	qp   *roce.QP
	mem  []byte
	bld  *frames.Builder
	rcq  *roce.CQ
	buf  []byte
	recv []byte
}

func newRespRig(t *testing.T) *respRig {
	r := &respRig{mem: make([]byte, 4096), rcq: roce.NewCQ(8), buf: make([]byte, 8192), recv: make([]byte, 600)}
	pd := roce.NewPD()
	require.NoError(t, pd.Register(&roce.MR{Addr: memVA, Buf: r.mem, RKey: memKey, Access: roce.AccessRemoteWrite}))
	require.NoError(t, pd.Register(&roce.MR{Addr: 0x90000, Buf: make([]byte, 64), RKey: 0x99, Access: roce.AccessRemoteRead}))
	r.qp = roce.NewQP(qpnB, vclock.New(), pd, roce.NewCQ(8), r.rcq)
	require.NoError(t, r.qp.Connect(frames.Path{Transport: frames.V2IPv4, SrcMAC: macB, DstMAC: macA, SrcIP: ipB, DstIP: ipA, DestQP: qpnA},
		roce.Config{MTU: 256, SQPSN: 500, RQPSN: 100, Timeout: 10, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 3}))
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, DestQP: qpnB, SrcPort: 0xc011})
	require.NoError(t, err)
	r.bld = b
	return r
}

// in delivers one request; mutate may edit the built frame (fixICRC then
// recomputes the ICRC unless it is false).
func (r *respRig) in(t *testing.T, p frames.Packet, mutate func(f []byte), fixICRC bool) {
	n, err := r.bld.Build(r.buf, &p)
	require.NoError(t, err)
	f := append([]byte(nil), r.buf[:n]...)
	if mutate != nil {
		mutate(f)
		if fixICRC {
			require.NoError(t, frames.FixICRC(f))
		}
	}
	var v frames.View
	require.NoError(t, v.Parse(f))
	r.qp.Receive(&v)
}

type resp struct {
	syn wire.Syndrome
	psn uint32
	msn uint32
}

func (r *respRig) out(t *testing.T) []resp {
	var out []resp
	for {
		n, ok := r.qp.NextFrame(r.buf)
		if !ok {
			return out
		}
		var v frames.View
		require.NoError(t, v.Parse(r.buf[:n]))
		require.Equal(t, wire.Acknowledge, v.Opcode())
		a := v.AETH()
		out = append(out, resp{a.Syndrome(), v.PSN(), a.MSN()})
	}
}

func wr(op wire.Opcode, psn uint32, n int, ack bool) frames.Packet {
	return frames.Packet{Opcode: op, PSN: psn, AckReq: ack, Payload: pattern(n, byte(psn)),
		RETH: frames.RETHFields{VA: memVA, RKey: memKey, DMALen: uint32(n)}}
}

func TestResponderDecisions(t *testing.T) {
	const ack, seq, inv, acc = wire.SyndromeACK, wire.SyndromeNAKPSNSeqErr, wire.SyndromeNAKInvalidReq, wire.SyndromeNAKRemAccess
	for _, c := range []struct {
		name  string
		pkts  func(r *respRig, t *testing.T)
		want  []resp
		state roce.State
		epsn  uint32
	}{
		{"in-order ONLY with AckReq is ACKed with its PSN and MSN", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 40, true), nil, false)
		}, []resp{{ack, 100, 1}}, roce.StateRTS, 101},
		{"no AckReq, no ACK", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 40, false), nil, false)
		}, nil, roce.StateRTS, 101},
		{"ahead: one NAK with ePSN, later out-of-order dropped silently", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 102, 4, true), nil, false)
			r.in(t, wr(wire.WriteOnly, 103, 4, true), nil, false)
			r.in(t, wr(wire.WriteOnly, 104, 4, true), nil, false)
		}, []resp{{seq, 100, 0}}, roce.StateRTS, 100},
		{"gap repaired clears the NAK flag; a new gap gets a new NAK", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 101, 4, true), nil, false)
			r.in(t, wr(wire.WriteOnly, 100, 4, true), nil, false)
			r.in(t, wr(wire.WriteOnly, 102, 4, true), nil, false)
		}, []resp{{seq, 100, 0}, {ack, 100, 1}, {seq, 101, 1}}, roce.StateRTS, 101},
		{"duplicate re-ACKed with last processed PSN even without AckReq", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 4, false), nil, false)
			r.in(t, wr(wire.WriteOnly, 101, 4, false), nil, false)
			r.in(t, wr(wire.WriteOnly, 100, 4, false), nil, false)
		}, []resp{{ack, 101, 2}}, roce.StateRTS, 102},
		{"bad ICRC: silent drop, no NAK", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 4, true), func(f []byte) { f[len(f)-6] ^= 1 }, false)
		}, nil, roce.StateRTS, 100},
		{"wrong P_Key: silent drop", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 4, true), func(f []byte) { f[14+20+8+2] = 0x00; f[14+20+8+3] = 0x07 }, true)
		}, nil, roce.StateRTS, 100},
		{"limited-member P_Key with same low bits matches a full member", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 4, true), func(f []byte) { f[14+20+8+2] = 0x7F }, true)
		}, []resp{{ack, 100, 1}}, roce.StateRTS, 101},
		{"TVer != 0: silent drop", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 4, true), func(f []byte) { f[14+20+8+1] |= 1 }, true)
		}, nil, roce.StateRTS, 100},
		{"source address not the QP's peer: silent drop", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 4, true), func(f []byte) { f[14+15] = 9 }, true)
		}, nil, roce.StateRTS, 100},
		{"MIDDLE without FIRST: NAK invalid request, QP error", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteMiddle, 100, 256, true), nil, false)
		}, []resp{{inv, 100, 0}}, roce.StateError, 100},
		{"FIRST while a message is open: NAK invalid request", func(r *respRig, t *testing.T) {
			p := wr(wire.WriteFirst, 100, 256, false)
			p.RETH.DMALen = 1024
			r.in(t, p, nil, false)
			r.in(t, withPSN(p, 101), nil, false)
		}, []resp{{inv, 101, 0}}, roce.StateError, 101},
		{"FIRST shorter than the MTU: NAK invalid request", func(r *respRig, t *testing.T) {
			p := wr(wire.WriteFirst, 100, 200, true)
			p.RETH.DMALen = 1000
			r.in(t, p, nil, false)
		}, []resp{{inv, 100, 0}}, roce.StateError, 100},
		{"ONLY longer than the MTU: NAK invalid request", func(r *respRig, t *testing.T) {
			r.in(t, wr(wire.WriteOnly, 100, 300, true), nil, false)
		}, []resp{{inv, 100, 0}}, roce.StateError, 100},
		{"payload disagrees with RETH length: NAK invalid request", func(r *respRig, t *testing.T) {
			p := wr(wire.WriteOnly, 100, 40, true)
			p.RETH.DMALen = 44
			r.in(t, p, nil, false)
		}, []resp{{inv, 100, 0}}, roce.StateError, 100},
		{"unknown rkey: NAK remote access error, memory untouched", func(r *respRig, t *testing.T) {
			p := wr(wire.WriteOnly, 100, 40, true)
			p.RETH.RKey = 0x4321
			r.in(t, p, nil, false)
		}, []resp{{acc, 100, 0}}, roce.StateError, 100},
		{"region without remote write: NAK remote access error", func(r *respRig, t *testing.T) {
			p := wr(wire.WriteOnly, 100, 40, true)
			p.RETH.RKey, p.RETH.VA = 0x99, 0x90000
			r.in(t, p, nil, false)
		}, []resp{{acc, 100, 0}}, roce.StateError, 100},
		{"zero-length WRITE skips the rkey check", func(r *respRig, t *testing.T) {
			p := wr(wire.WriteOnly, 100, 0, true)
			p.RETH.RKey, p.RETH.VA = 0xdead, 0
			r.in(t, p, nil, false)
		}, []resp{{ack, 100, 1}}, roce.StateRTS, 101},
		{"SEND with no receive WQE: RNR NAK with its PSN and the QP's timer", func(r *respRig, t *testing.T) {
			r.in(t, frames.Packet{Opcode: wire.SendOnly, PSN: 100, AckReq: true, Payload: pattern(8, 1)}, nil, false)
		}, []resp{{wire.SyndromeRNRNAK | 3, 100, 0}}, roce.StateRTS, 100},
		{"SEND larger than the receive buffer: NAK invalid request", func(r *respRig, t *testing.T) {
			require.NoError(t, r.qp.PostRecv(roce.RecvWR{ID: 1, Buf: make([]byte, 4)}))
			r.in(t, frames.Packet{Opcode: wire.SendOnly, PSN: 100, AckReq: true, Payload: pattern(8, 1)}, nil, false)
		}, []resp{{inv, 100, 0}}, roce.StateError, 100},
		{"READ of a region without remote read: NAK remote access error", func(r *respRig, t *testing.T) {
			r.in(t, frames.Packet{Opcode: wire.ReadRequest, PSN: 100, AckReq: true, RETH: frames.RETHFields{VA: memVA, RKey: memKey, DMALen: 8}}, nil, false)
		}, []resp{{wire.SyndromeNAKRemAccess, 100, 0}}, roce.StateError, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRespRig(t)
			c.pkts(r, t)
			assert.Equal(t, c.want, r.out(t))
			assert.Equal(t, c.state, r.qp.State())
			assert.Equal(t, c.epsn, r.qp.ExpectedPSN())
		})
	}
}

func TestResponderWriteTouchesMemoryOnlyWhenValid(t *testing.T) {
	r := newRespRig(t)
	p := wr(wire.WriteOnly, 100, 40, true)
	p.RETH.VA = memVA + 4096 - 20 // runs past the region
	r.in(t, p, nil, false)
	assert.Equal(t, make([]byte, 4096), r.mem)
	r2 := newRespRig(t)
	p2 := wr(wire.WriteOnly, 100, 40, true)
	r2.in(t, p2, nil, false)
	assert.Equal(t, p2.Payload, r2.mem[:40])
}

func withPSN(p frames.Packet, psn uint32) frames.Packet { p.PSN = psn; return p }

// A response whose frame cannot be built is dropped, not left queued: the
// only way Build fails from a QP's state is a buffer below NextFrame's
// MTU-plus-headers contract, and a response kept at the head of the queue
// would keep HasFrame true and hold every request behind it (the QP
// wedged). A dropped ACK is what a lost one is: the requester's timer
// asks again.
func TestResponseThatCannotBeBuiltIsDropped(t *testing.T) {
	dst := make([]byte, 256)
	p, _ := newPipe(t, 1024, dst)
	require.NoError(t, p.a.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: pattern(100, 1), RemoteVA: memVA, RKey: memKey, Signaled: true}))
	n, ok := p.a.NextFrame(p.buf)
	require.True(t, ok)
	var v frames.View
	require.NoError(t, v.Parse(p.buf[:n]))
	p.b.Receive(&v)
	require.True(t, p.b.HasFrame(), "B owes A an ACK")

	tiny := make([]byte, 16)
	_, ok = p.b.NextFrame(tiny)
	require.False(t, ok, "no ACK fits 16 bytes")
	require.False(t, p.b.HasFrame(), "the ACK that could not be built is dropped")
	require.Equal(t, uint64(1), p.b.Counters.ResponsesDropped)

	// B's own request is sent next, not held behind the ACK.
	require.NoError(t, p.b.PostSend(roce.SendWR{ID: 2, Opcode: roce.WRWrite, Local: pattern(8, 2), RemoteVA: memVA, RKey: memKey}))
	require.True(t, p.b.HasFrame())
	_, ok = p.b.NextFrame(tiny)
	require.False(t, ok)
	n, ok = p.b.NextFrame(p.buf)
	require.True(t, ok)
	require.NoError(t, v.Parse(p.buf[:n]))
	require.False(t, v.Opcode().IsAck(), "B sends its WRITE: %v", v.Opcode())

	// A READ's responses that cannot be built go all at once.
	require.NoError(t, p.a.PostSend(roce.SendWR{ID: 3, Opcode: roce.WRRead, Local: make([]byte, 200), RemoteVA: memVA, RKey: memKey, Signaled: true}))
	for p.b.HasFrame() { // B's WRITE's other packets, if any
		_, ok = p.b.NextFrame(p.buf)
		require.True(t, ok)
	}
	n, ok = p.a.NextFrame(p.buf)
	require.True(t, ok)
	require.NoError(t, v.Parse(p.buf[:n]))
	require.Equal(t, wire.ReadRequest, v.Opcode())
	p.b.Receive(&v)
	require.True(t, p.b.HasFrame(), "B owes A the READ's response")
	_, ok = p.b.NextFrame(tiny)
	require.False(t, ok)
	require.False(t, p.b.HasFrame())
	require.Equal(t, uint64(2), p.b.Counters.ResponsesDropped)
}
