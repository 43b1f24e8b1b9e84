package roce_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// A single requester QP (A) whose responses are hand-built, one decision of
// docs/roce.md §5 per row.

type reqRig struct {
	qp    *roce.QP
	cq    *roce.CQ
	clock *vclock.Clock
	bld   *frames.Builder
	buf   []byte
}

func newReqRig(t *testing.T, cfg roce.Config) *reqRig {
	r := &reqRig{cq: roce.NewCQ(8), clock: vclock.New(), buf: make([]byte, 8192)}
	r.qp = roce.NewQP(qpnA, r.clock, roce.NewPD(), r.cq, roce.NewCQ(8))
	require.NoError(t, r.qp.Connect(frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, DestQP: qpnB}, cfg))
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: macB, DstMAC: macA, SrcIP: ipB, DstIP: ipA, DestQP: qpnA})
	require.NoError(t, err)
	r.bld = b
	return r
}

// drain pulls every frame the QP sends now and returns their PSNs.
func (r *reqRig) drain(t *testing.T) []uint32 {
	var out []uint32
	for {
		n, ok := r.qp.NextFrame(r.buf)
		if !ok {
			return out
		}
		var v frames.View
		require.NoError(t, v.Parse(r.buf[:n]))
		out = append(out, v.PSN())
	}
}

func (r *reqRig) resp(t *testing.T, syn wire.Syndrome, psn uint32) {
	n, err := r.bld.Build(r.buf, &frames.Packet{Opcode: wire.Acknowledge, PSN: psn, AETH: frames.AETHFields{Syndrome: syn}})
	require.NoError(t, err)
	f := append([]byte(nil), r.buf[:n]...)
	var v frames.View
	require.NoError(t, v.Parse(f))
	r.qp.Receive(&v)
}

func TestRequesterDecisions(t *testing.T) {
	cfg := roce.Config{MTU: 256, SQPSN: 100, RQPSN: 100, Timeout: 10, RetryCnt: 2, RNRRetry: 7}
	const ack, seq = wire.SyndromeACK, wire.SyndromeNAKPSNSeqErr
	startWith := func(t *testing.T, cfg roce.Config) *reqRig {
		r := newReqRig(t, cfg)
		require.NoError(t, r.qp.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: pattern(8*256, 1), RemoteVA: memVA, RKey: memKey, Signaled: true}))
		require.Equal(t, seqPSN(100, 8), r.drain(t))
		return r
	}
	start := func(t *testing.T) *reqRig { return startWith(t, cfg) }
	startRXE := func(t *testing.T) *reqRig {
		c := cfg
		c.Profile = roce.RXE
		return startWith(t, c)
	}
	t.Run("NAK mid-message restarts exactly at the NAK'd PSN", func(t *testing.T) {
		r := start(t)
		r.resp(t, seq, 103)
		assert.Equal(t, seqPSN(103, 5), r.drain(t))
		assert.Equal(t, uint32(103), r.qp.CompPSN(), "the NAK acknowledges everything before it")
		assert.Equal(t, uint64(5), r.qp.Counters.RetransmittedPkts)
	})
	t.Run("commodity: a NAK that advances comp.psn during a retry starts a new go-back-N there", func(t *testing.T) {
		r := start(t)
		r.resp(t, seq, 103)
		r.drain(t)
		r.resp(t, seq, 105)
		assert.Equal(t, seqPSN(105, 3), r.drain(t))
		assert.Equal(t, uint32(105), r.qp.CompPSN())
		assert.Equal(t, uint64(5+3), r.qp.Counters.RetransmittedPkts)
	})
	t.Run("commodity: a duplicate NAK for the retry in progress is ignored", func(t *testing.T) {
		r := start(t)
		r.resp(t, seq, 103)
		r.drain(t)
		r.resp(t, seq, 103)
		assert.Empty(t, r.drain(t))
	})
	t.Run("commodity: a NAK's implicit ACK resets the retry budget", func(t *testing.T) {
		r := start(t)
		r.clock.Advance(roce.AckTimeout(10)) // retry 1
		r.drain(t)
		r.clock.Advance(roce.AckTimeout(10)) // retry 2: budget spent
		r.drain(t)
		r.resp(t, seq, 102) // completes no WQE, but comp.psn advanced: progress
		assert.Equal(t, seqPSN(102, 6), r.drain(t))
		r.clock.Advance(roce.AckTimeout(10)) // would fail without the reset
		assert.Equal(t, seqPSN(102, 6), r.drain(t))
		assert.Equal(t, roce.StateRTS, r.qp.State())
	})
	// A NAK's implied ACK holds whether or not the NAK starts a retry: no
	// later retransmission, by timeout or another NAK, starts below it
	// (the capture checker's psn-order rule counts on it).
	for _, profile := range []roce.Profile{roce.Commodity, roce.RXE} {
		t.Run(profile.String()+": no retransmission starts below a NAK's implied ACK", func(t *testing.T) {
			c := cfg
			c.Profile, c.RetryCnt = profile, 7
			r := startWith(t, c)
			r.resp(t, seq, 102) // a retry from 102 starts
			assert.Equal(t, seqPSN(102, 6), r.drain(t))
			r.resp(t, seq, 105) // while it runs: acknowledges 102..104
			r.drain(t)
			for range 3 {
				r.clock.Advance(roce.AckTimeout(10))
				got := r.drain(t)
				require.NotEmpty(t, got)
				assert.Equal(t, uint32(105), got[0], "a timeout retransmits from the NAK's PSN")
			}
			r.resp(t, seq, 103) // stale: behind comp.psn
			assert.Empty(t, r.drain(t))
			assert.Equal(t, uint32(105), r.qp.CompPSN())
		})
	}
	t.Run("rxe: a second NAK while the NAK retry runs is ignored", func(t *testing.T) {
		r := startRXE(t)
		r.resp(t, seq, 103)
		r.drain(t)
		r.resp(t, seq, 105)
		assert.Empty(t, r.drain(t))
		assert.Equal(t, uint32(105), r.qp.CompPSN())
		r.clock.Advance(roce.AckTimeout(10)) // only a timeout starts the next retry
		assert.Equal(t, seqPSN(105, 3), r.drain(t))
	})
	t.Run("rxe: a NAK's implicit ACK that completes no WQE leaves the budget spent", func(t *testing.T) {
		r := startRXE(t)
		r.clock.Advance(roce.AckTimeout(10))
		r.drain(t)
		r.clock.Advance(roce.AckTimeout(10))
		r.drain(t)
		r.resp(t, seq, 102)
		r.clock.Advance(roce.AckTimeout(10))
		assert.Equal(t, roce.StateError, r.qp.State())
		assert.Equal(t, roce.StatusRetryExcErr, poll(r.cq)[0].Status)
	})
	t.Run("a NAK behind comp.psn is stale and ignored", func(t *testing.T) {
		r := start(t)
		r.resp(t, ack, 104)
		r.resp(t, seq, 102)
		assert.Empty(t, r.drain(t))
		assert.Equal(t, uint32(105), r.qp.CompPSN())
	})
	t.Run("an ACK for a PSN never sent is ignored", func(t *testing.T) {
		r := start(t)
		r.resp(t, ack, 200)
		assert.Equal(t, uint32(100), r.qp.CompPSN())
		assert.Equal(t, 1, r.qp.Outstanding())
	})
	t.Run("an old ACK is ignored; ACKs complete the WQE at its last PSN", func(t *testing.T) {
		r := start(t)
		r.resp(t, ack, 103)
		r.resp(t, ack, 101)
		assert.Equal(t, uint32(104), r.qp.CompPSN())
		assert.Zero(t, r.cq.Len())
		r.resp(t, ack, 107)
		c := poll(r.cq)
		require.Len(t, c, 1)
		assert.Equal(t, roce.StatusSuccess, c[0].Status)
		assert.Zero(t, r.clock.Pending(), "nothing outstanding: the timer is stopped")
	})
	t.Run("the timer resends from comp.psn after 4.096 µs × 2^timeout", func(t *testing.T) {
		r := start(t)
		r.resp(t, ack, 102)
		r.clock.Advance(roce.AckTimeout(10) - time.Nanosecond)
		assert.Empty(t, r.drain(t))
		r.clock.Advance(time.Nanosecond)
		assert.Equal(t, seqPSN(103, 5), r.drain(t))
		assert.Equal(t, uint64(1), r.qp.Counters.LocalAckTimeoutErr)
	})
	t.Run("ACK progress pushes the timer forward", func(t *testing.T) {
		r := start(t)
		r.clock.Advance(roce.AckTimeout(10) / 2)
		r.resp(t, ack, 102)
		r.clock.Advance(roce.AckTimeout(10)/2 + time.Microsecond)
		assert.Empty(t, r.drain(t), "the timer restarted at the ACK")
		r.clock.Advance(roce.AckTimeout(10) / 2)
		assert.Equal(t, seqPSN(103, 5), r.drain(t))
	})
	t.Run("retry_cnt 2: two retries, then RETRY_EXC_ERR; an ACK would reset the budget", func(t *testing.T) {
		r := start(t)
		r.resp(t, seq, 101) // retry 1
		r.drain(t)
		r.clock.Advance(roce.AckTimeout(10)) // retry 2
		assert.Equal(t, seqPSN(101, 7), r.drain(t))
		r.clock.Advance(roce.AckTimeout(10)) // budget spent
		assert.Empty(t, r.drain(t))
		assert.Equal(t, roce.StateError, r.qp.State())
		c := poll(r.cq)
		require.Len(t, c, 1)
		assert.Equal(t, roce.StatusRetryExcErr, c[0].Status)
	})
	t.Run("NAK invalid request completes REM_INV_REQ_ERR and errors the QP", func(t *testing.T) {
		r := start(t)
		r.resp(t, wire.SyndromeNAKInvalidReq, 100)
		c := poll(r.cq)
		require.Len(t, c, 1)
		assert.Equal(t, roce.StatusRemInvReqErr, c[0].Status)
		assert.Equal(t, roce.StateError, r.qp.State())
	})
	t.Run("NAK remote operational error completes REM_OP_ERR", func(t *testing.T) {
		r := start(t)
		r.resp(t, wire.SyndromeNAKRemOpErr, 100)
		assert.Equal(t, roce.StatusRemOpErr, poll(r.cq)[0].Status)
	})
	t.Run("window: stops at MaxUnacked PSNs in flight", func(t *testing.T) {
		c := cfg
		c.MaxUnacked = 3
		r := newReqRig(t, c)
		require.NoError(t, r.qp.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: pattern(8*256, 1), RemoteVA: memVA, RKey: memKey}))
		assert.Equal(t, seqPSN(100, 3), r.drain(t))
		r.resp(t, ack, 101)
		assert.Equal(t, seqPSN(103, 2), r.drain(t))
	})
}

func TestLifecycle(t *testing.T) {
	clock := vclock.New()
	scq, rcq := roce.NewCQ(4), roce.NewCQ(4)
	qp := roce.NewQP(5, clock, roce.NewPD(), scq, rcq)
	path := frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, DestQP: 6}
	cfg := roce.Config{MTU: 1024, Timeout: 14, RetryCnt: 7, RNRRetry: 7}
	assert.Equal(t, roce.StateReset, qp.State())
	assert.ErrorIs(t, qp.PostSend(roce.SendWR{}), roce.ErrState)
	assert.ErrorIs(t, qp.ReadyToReceive(path, cfg), roce.ErrState, "RESET → RTR is not allowed")
	require.NoError(t, qp.Init())
	bad := cfg
	bad.MTU = 1500
	assert.ErrorContains(t, qp.ReadyToReceive(path, bad), "MTU 1500")
	bad = cfg
	bad.RetryCnt = 8
	assert.ErrorContains(t, qp.ReadyToReceive(path, bad), "retry_cnt 8")
	require.NoError(t, qp.ReadyToReceive(path, cfg))
	assert.Equal(t, roce.StateRTR, qp.State())
	assert.ErrorIs(t, qp.PostSend(roce.SendWR{}), roce.ErrState, "RTR cannot send")
	assert.Equal(t, frames.UDPSourcePort(5), qp.Path().SrcPort, "rxe's per-QP UDP source port")
	require.NoError(t, qp.ReadyToSend())
	require.NoError(t, qp.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: pattern(10, 1)}))
	require.NoError(t, qp.PostRecv(roce.RecvWR{ID: 2, Buf: make([]byte, 8)}))
	qp.SetError()
	assert.Equal(t, roce.StateError, qp.State())
	assert.ErrorIs(t, qp.PostSend(roce.SendWR{}), roce.ErrState)
	assert.Equal(t, []roce.Completion{{WRID: 1, Status: roce.StatusWRFlushErr, Opcode: roce.WRWrite, QPN: 5}}, poll(scq),
		"ERROR flushes unsignaled WRs too")
	assert.Equal(t, []roce.Completion{{WRID: 2, Status: roce.StatusWRFlushErr, Recv: true, QPN: 5}}, poll(rcq))
	assert.Zero(t, clock.Pending())
}
