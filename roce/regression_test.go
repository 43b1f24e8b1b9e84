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

// Receive WQEs may be posted in INIT (ibv_post_recv is legal from INIT on,
// and PostRecv accepts it); moving to RTR must not throw them away.
func TestRecvPostedInInitSurvivesRTR(t *testing.T) {
	rcq := roce.NewCQ(8)
	qp := roce.NewQP(qpnB, vclock.New(), roce.NewPD(), roce.NewCQ(8), rcq)
	require.NoError(t, qp.Init())
	buf := make([]byte, 64)
	require.NoError(t, qp.PostRecv(roce.RecvWR{ID: 42, Buf: buf}))
	require.NoError(t, qp.ReadyToReceive(frames.Path{Transport: frames.V2IPv4, SrcMAC: macB, DstMAC: macA, SrcIP: ipB, DstIP: ipA, DestQP: qpnA},
		roce.Config{MTU: 256, SQPSN: 500, RQPSN: 100, Timeout: 10, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 3}))
	require.NoError(t, qp.ReadyToSend())

	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, DestQP: qpnB})
	require.NoError(t, err)
	fb := make([]byte, 8192)
	msg := pattern(16, 1)
	n, err := b.Build(fb, &frames.Packet{Opcode: wire.SendOnly, PSN: 100, AckReq: true, Payload: msg})
	require.NoError(t, err)
	var v frames.View
	require.NoError(t, v.Parse(fb[:n]))
	qp.Receive(&v)

	out := make([]byte, 8192)
	n, ok := qp.NextFrame(out)
	require.True(t, ok)
	var a frames.View
	require.NoError(t, a.Parse(out[:n]))
	assert.Equal(t, wire.SyndromeACK, a.AETH().Syndrome(), "the receive posted in INIT should be used, not an RNR NAK")
	assert.Equal(t, msg, buf[:16])
	assert.Equal(t, []roce.Completion{{WRID: 42, Status: roce.StatusSuccess, Opcode: roce.WRSend, Recv: true, Len: 16, QPN: qpnB}}, poll(rcq))
}

// A NAK-seq whose PSN lies past a whole pending WQE implicitly ACKs and
// completes it: that is ACK progress, so the retry budget is reset (docs/roce.md
// §5: a valid ACK or response restores the retry budget; rxe check_psn calls
// reset_retry_counters, which also clears started_retry). With retry_cnt 1
// the NAK-driven retry of the first loss must not leave the QP one timeout
// away from RETRY_EXC_ERR after the first WQE has completed.
func TestNAKImplicitCompletionResetsRetryBudget(t *testing.T) {
	cfg := roce.Config{MTU: 256, SQPSN: 100, RQPSN: 100, Timeout: 10, RetryCnt: 1, RNRRetry: 7}
	r := newReqRig(t, cfg)
	for id := uint64(1); id <= 2; id++ {
		require.NoError(t, r.qp.PostSend(roce.SendWR{ID: id, Opcode: roce.WRWrite, Local: pattern(4*256, byte(id)), RemoteVA: memVA, RKey: memKey, Signaled: true}))
	}
	require.Equal(t, seqPSN(100, 8), r.drain(t))
	r.resp(t, wire.SyndromeNAKPSNSeqErr, 101) // retry 1 (budget now spent)
	require.Equal(t, seqPSN(101, 7), r.drain(t))
	r.resp(t, wire.SyndromeNAKPSNSeqErr, 105) // completes WQE 1 (100..103) implicitly
	c := poll(r.cq)
	require.Len(t, c, 1)
	require.Equal(t, roce.StatusSuccess, c[0].Status)
	got := r.drain(t)
	if len(got) == 0 { // NAK ignored: the timer must still have a retry to spend
		r.clock.Advance(roce.AckTimeout(cfg.Timeout))
		got = r.drain(t)
	}
	assert.Equal(t, seqPSN(105, 3), got, "go-back-N from the NAK'd PSN")
	assert.Equal(t, roce.StateRTS, r.qp.State())
	assert.Empty(t, poll(r.cq), "no RETRY_EXC_ERR after progress")
}

// PSNs are given to WQEs when they are posted, so a send queue spanning
// 2^24 PSNs would wrap nextPSN onto psn. PostSend refuses WRs once the
// queued span would reach 2^23 PSNs, and what was queued still goes out.
func TestSendQueueSpanLimited(t *testing.T) {
	cfg := roce.Config{MTU: 256, SQPSN: 100, RQPSN: 100, Timeout: 10, RetryCnt: 7, RNRRetry: 7, MaxSendWR: 4096, Profile: roce.RXE}
	r := newReqRig(t, cfg)
	data := make([]byte, 2<<20) // 8192 packets each
	accepted := 0
	var err error
	for id := uint64(1); id <= 2048 && err == nil; id++ {
		if err = r.qp.PostSend(roce.SendWR{ID: id, Opcode: roce.WRWrite, Local: data, RemoteVA: memVA, RKey: memKey}); err == nil {
			accepted++
		}
	}
	assert.ErrorContains(t, err, "2^23 PSNs")
	assert.Equal(t, 1023, accepted, "1023 × 8192 PSNs < 2^23 <= 1024 × 8192")
	assert.True(t, r.qp.HasFrame())
	assert.Equal(t, seqPSN(100, 128), r.drain(t), "the first window of the first WQE goes out")
}
