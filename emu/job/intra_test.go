package job

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// A GPU link answers a transfer that finds no receive posted with an
// immediate RNR_RETRY_EXC_ERR, although the job's QPs are set up with
// RNRRetry 7 (retry forever): "completions as a QP gives them" would have
// it wait and land once the receive is posted.
func TestIntraLinkWaitsForTheReceiveOnRNR(t *testing.T) {
	clock := vclock.New()
	h := nic.New(clock, "h0", 0, 0, frames.V2IPv4)
	buf := make([]byte, 64)
	src := &Worker{NIC: h, Host: "h0", GPU: 0}
	dst := &Worker{NIC: h, Host: "h0", GPU: 1, RecvMR: &roce.MR{Addr: 0x1000, Buf: buf, RKey: 7, Access: roce.AccessRemoteWrite | roce.AccessLocalWrite}}
	l := newIntraLink(clock, topo.Intra{Rate: 100e9, Alpha: time.Microsecond}, new(time.Duration), src, dst)
	send, recv := intraSend{l}, intraRecv{l}
	require.NoError(t, send.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWriteImm, Local: []byte{1, 2, 3, 4}, RemoteVA: 0x1000, RKey: 7, Imm: 9, Signaled: true}))
	clock.AfterFunc(20*time.Microsecond, func() { require.NoError(t, recv.PostRecv(roce.RecvWR{ID: 5})) })
	for i := 0; clock.Step(); i++ {
		require.Less(t, i, 100000)
	}
	var out [4]roce.Completion
	n := send.SendCQ().Poll(out[:])
	require.Equal(t, 1, n)
	assert.Equal(t, roce.StatusSuccess, out[0].Status, "the sender's completion")
	assert.Equal(t, 1, recv.RecvCQ().Poll(out[:]), "the receiver's completion")
	assert.Equal(t, []byte{1, 2, 3, 4}, buf[:4])
}
