package frames_test

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// A multi-rack switch-to-switch frame decodes with its INA and INATree
// headers: a partial's rank set, a notification's header block length.
func TestDescribeTreeFrames(t *testing.T) {
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: net.HardwareAddr{2, 0x1a, 0xe5, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0x1a, 0xe5, 0, 0, 3},
		SrcIP: netip.MustParseAddr("10.255.0.1"), DstIP: netip.MustParseAddr("10.255.0.3"), DestQP: 0xFFFF00})
	require.NoError(t, err)
	pay := make([]byte, wire.INATreeLen+64)
	th := wire.INATree(pay)
	th.SetMsg(300)
	th.SetOffset(169)
	th.SetFlags(wire.INATreeLast)
	th.SetRanks(0b1011)
	buf := make([]byte, 256)
	n, err := b.Build(buf, &frames.Packet{Opcode: wire.OpINAPartial, PSN: 7, HasINA: true, INA: frames.INAFields{RingID: 2, MsgID: 44, MsgLen: 170, Rank: 1}, Payload: pay})
	require.NoError(t, err)
	s := frames.Describe(1, buf[:n])
	require.NotNil(t, s.INATree)
	assert.Equal(t, frames.TreeSummary{Msg: 300, Offset: 169, Flags: 1, Ranks: 0xb}, *s.INATree)
	assert.Contains(t, s.Line(), "OPCODE_0xe0_INA_PARTIAL qp=0xffff00 psn=7 ina(ring=2 msg=44 msglen=170 rank=1) tree(msg=300 off=169 flags=0x1 ranks=0xb) len=88")

	th.SetFlags(wire.INATreeNotifyLast)
	th.SetBlock(58, 1100)
	n, err = b.Build(buf, &frames.Packet{Opcode: wire.OpINANotify, HasINA: true, INA: frames.INAFields{MsgLen: 170}, Payload: pay[:wire.INATreeLen+58]})
	require.NoError(t, err)
	s = frames.Describe(2, buf[:n])
	assert.Contains(t, s.Line(), "tree(msg=300 off=169 flags=0x2 block=58)")
}
