package graphs

import (
	"bytes"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// capture writes frames (interface, frame, comments) as pcapng, one µs
// apart, and reads them back as records.
type capture struct {
	t     *testing.T
	buf   bytes.Buffer
	w     *pcapio.Writer
	us    int64
	req   *frames.Builder // A → B requests
	resp  *frames.Builder // B → A responses
	frame []byte
}

func newCapture(t *testing.T, ifaces ...string) *capture {
	c := &capture{t: t, frame: make([]byte, 2048)}
	var err error
	c.w, err = pcapio.NewWriter(&c.buf, ifaces...)
	require.NoError(t, err)
	a, b := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ipA, ipB := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	c.req, err = frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: a, DstMAC: b, SrcIP: ipA, DstIP: ipB, DestQP: 0x12})
	require.NoError(t, err)
	c.resp, err = frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: b, DstMAC: a, SrcIP: ipB, DstIP: ipA, DestQP: 0x11})
	require.NoError(t, err)
	return c
}

func (c *capture) add(iface string, b *frames.Builder, p frames.Packet, comments ...string) {
	n, err := b.Build(c.frame, &p)
	require.NoError(c.t, err)
	c.us++
	require.NoError(c.t, c.w.Write(iface, c.us*1000, c.frame[:n], comments...))
}

func (c *capture) data(iface string, psn uint32, comments ...string) {
	c.add(iface, c.req, frames.Packet{Opcode: wire.WriteMiddle, PSN: psn, Payload: make([]byte, 256)}, comments...)
}

func (c *capture) ack(iface string, psn uint32, s wire.Syndrome) {
	c.add(iface, c.resp, frames.Packet{Opcode: wire.Acknowledge, PSN: psn, AETH: frames.AETHFields{Syndrome: s}})
}

func (c *capture) records() ([]pcapio.Record, []string) {
	require.NoError(c.t, c.w.Flush())
	r, err := pcapio.NewReader("test", bytes.NewReader(c.buf.Bytes()))
	require.NoError(c.t, err)
	recs, names, err := r.All()
	require.NoError(c.t, err)
	return recs, names
}

// A go-back-N exchange seen at the sender's link (port0-in: its
// requests, port0-out: the responses), and the same requests seen again
// on the receiver's link (port1-out), near the top of the 24-bit space:
// the trace is drawn from the sender's link only, PSNs unwrap past 2^24,
// the resent PSNs are retransmissions, responses are ACKs and NAKs, and a
// frame with a fault comment is a fault.
func TestTraces(t *testing.T) {
	c := newCapture(t, "port0-in", "port0-out", "port1-in", "port1-out")
	const top = 0xFFFFFE
	c.data("port0-in", top)   // frame 1: PSN +0
	c.data("port1-out", top)  // seen again downstream: not drawn
	c.data("port0-in", top+1) // +1
	c.data("port0-in", 0)     // +2 (wrapped)
	c.ack("port0-out", top+1, wire.SyndromeNAKPSNSeqErr)
	c.data("port0-in", top+1) // resent
	c.data("port0-in", 0, pcapio.FaultCommentPrefix+"drop (not delivered)")
	c.data("port0-in", 1) // +3
	c.ack("port0-out", 1, wire.SyndromeACK)
	recs, names := c.records()
	conns := Traces(recs, names)
	require.Len(t, conns, 1)
	got := conns[0]
	assert.Equal(t, "10.0.0.1→10.0.0.2 QP 0x12 on port0", got.String())
	var kinds []Kind
	var psns []int64
	var frameNos []int
	for _, p := range got.Points {
		kinds, psns, frameNos = append(kinds, p.Kind), append(psns, p.PSN), append(frameNos, p.Frame)
	}
	assert.Equal(t, []Kind{Data, Data, Data, NAK, Retransmit, Fault, Data, ACK}, kinds)
	assert.Equal(t, []int64{0, 1, 2, 1, 1, 2, 3, 3}, psns)
	assert.Equal(t, []int{1, 3, 4, 5, 6, 7, 8, 9}, frameNos, "Wireshark's 1-based frame numbers")
}

// Link names pair the two directions of one link.
func TestLinkNames(t *testing.T) {
	assert.Equal(t, []string{"port3", "port3", "h0~leaf0", "h0~leaf0", "leaf0~spine1#1", "leaf0~spine1#1", "eth0"},
		linkNames([]string{"port3-in", "port3-out", "h0-leaf0", "leaf0-h0", "leaf0-spine1#1", "spine1-leaf0#1", "eth0"}))
}

// The picture is an SVG with the connection in its legend; a PNG is a
// PNG; no connection is an error.
func TestWritePSN(t *testing.T) {
	c := newCapture(t, "port0-in", "port0-out")
	for psn := uint32(100); psn < 120; psn++ {
		c.data("port0-in", psn)
	}
	c.ack("port0-out", 119, wire.SyndromeACK)
	recs, names := c.records()
	var svg, png bytes.Buffer
	require.NoError(t, WritePSN(&svg, Traces(recs, names), PSNOptions{Title: "t"}))
	assert.True(t, strings.HasPrefix(svg.String(), "<?xml"), svg.String()[:40])
	assert.Contains(t, svg.String(), "<svg")
	assert.Contains(t, svg.String(), "QP 0x12 on port0")
	require.NoError(t, WritePSN(&png, Traces(recs, names), PSNOptions{Format: "png"}))
	assert.Equal(t, "\x89PNG", png.String()[:4])
	assert.Error(t, WritePSN(&svg, nil, PSNOptions{}))
}
