package conformance

import (
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/tensor"
)

// A response the device sends before the receiver's identical one reached
// it is forged, however right its key: the order of the wire's own
// capture says so.
func TestDeviceGBNForgedByOrder(t *testing.T) {
	faithful := []pcapio.Record{
		rec(into(0), ringFrame(t, 0, 1, data(12))),
		rec(outOf(1), ringFrame(t, 0, 1, data(12))),
		rec(into(1), ringFrame(t, 1, 0, ack(12, 2))),
		rec(outOf(0), ringFrame(t, 1, 0, ack(12, 2))),
	}
	require.Empty(t, deviceGBN(2, faithful))
	early := []pcapio.Record{faithful[0], faithful[1], faithful[3], faithful[2], faithful[3]}
	require.Equal(t, "response-forged: the device sent rank 0 ACK PSN 12 MSN 2 (QPN 0x11) (capture frame 3) before rank 1's identical response reached it (capture frame 4): sent on the receiver's behalf",
		deviceGBN(2, early))
}

// f32s is a payload of float32 values.
func f32s(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// aggFrame is rank src's one-packet NetReduce message 0 to rank src+1
// (of two), carrying payload.
func aggFrameOf(t *testing.T, src int, payload []byte) []byte {
	return ringFrame(t, src, 1-src, frames.Packet{Opcode: wire.WriteOnly, PSN: uint32(100 * (src + 1)),
		RETH: frames.RETHFields{VA: 0x1000, RKey: 1, DMALen: uint32(wire.INALen + len(payload))}, HasINA: true,
		INA: frames.INAFields{RingID: 0, MsgID: 0, MsgLen: 1, Rank: uint8(src)}, Payload: payload})
}

// judgeDevice judges the device where it stands, on the wire's capture:
// every result the device sent against the contributions that reached it,
// whether or not a host kept the result; a copy the wire forged (spoof)
// is no contribution.
func TestJudgeDeviceOnItsSide(t *testing.T) {
	host := func(p int, sent bool) int { // hR-wR, wR-hR
		if sent {
			return 4 * p
		}
		return 4*p + 1
	}
	c := aggCase{Workers: 2, DType: tensor.F32}
	a, b := f32s(1, 2, 3, 4), f32s(10, 20, 30, 40)
	sum, wrong := f32s(11, 22, 33, 44), f32s(11, 22, 33, 45) // wrong: the last element
	capture := func(result []byte, extra ...pcapio.Record) []pcapio.Record {
		recs := []pcapio.Record{
			rec(host(0, true), aggFrameOf(t, 0, a)), rec(into(0), aggFrameOf(t, 0, a)),
			rec(host(1, true), aggFrameOf(t, 1, b)), rec(into(1), aggFrameOf(t, 1, b)),
		}
		recs = append(recs, extra...)
		return append(recs,
			rec(outOf(1), aggFrameOf(t, 0, result)), rec(host(1, false), aggFrameOf(t, 0, result), pcapio.FaultCommentPrefix+"drop "+pcapio.GhostComment),
			rec(outOf(0), aggFrameOf(t, 1, sum)), rec(host(0, false), aggFrameOf(t, 1, sum)))
	}
	rule, detail := judgeDevice(capture(sum), c)
	require.Empty(t, rule, detail)

	// The wrong sum never reached a host (the wire dropped it): still the
	// device's.
	rule, detail = judgeDevice(capture(wrong), c)
	require.Equal(t, "agg-sum", rule)
	require.Contains(t, detail, "the device sent (capture frame 5, interface sw1-w1)")
	require.Contains(t, detail, "element 3 is 45, want 44")

	// A forged copy of rank 0's frame (one payload bit flipped), sent in
	// from port 1 before the results: the device refused it, its sum is
	// right.
	forged := aggFrameOf(t, 0, f32s(1, 2, 3, 4.5))
	rule, detail = judgeDevice(capture(sum, rec(into(1), forged, pcapio.FaultCommentPrefix+"spoof")), c)
	require.Empty(t, rule, detail)
	// A device that took it in sums it: wrong.
	rule, _ = judgeDevice(capture(f32s(11, 22, 33, 44.5), rec(into(1), forged, pcapio.FaultCommentPrefix+"spoof")), c)
	require.Equal(t, "agg-sum", rule)

	// No result the device sent could be checked (a contribution never
	// seen entering it): not a pass.
	recs := capture(sum)
	recs = append(recs[:1], recs[2:]...) // rank 0's frame into the device is gone
	rule, detail = judgeDevice(recs, c)
	require.Equal(t, "unchecked", rule, detail)
}

// A gradient frame delayed past a MsgID wrap reaches the device while a
// message with a nearby id runs: its PSN, behind the newest message's,
// says it is old. Judged as the new message's contribution it made the
// device's right sum of that message look wrong (found by the toy
// switch with no bug, under a long delay of one-packet messages).
func TestJudgeDeviceLateFramePastMsgIDWrap(t *testing.T) {
	frame := func(src, m int, payload []byte) []byte {
		return ringFrame(t, src, 1-src, frames.Packet{Opcode: wire.WriteOnly, PSN: uint32(1000*(src+1) + m),
			RETH: frames.RETHFields{VA: 0x1000, RKey: 1, DMALen: uint32(wire.INALen + len(payload))}, HasINA: true,
			INA: frames.INAFields{RingID: 0, MsgID: uint8(m), MsgLen: 1, Rank: uint8(src)}, Payload: payload})
	}
	grad := func(src, m int) []byte { return f32s(float32(m), float32(src+1)) }
	var recs []pcapio.Record
	for m := 0; m < 320; m++ {
		if m == 200 { // rank 0's message 50, late: its id reads as 306
			recs = append(recs, rec(into(0), frame(0, 50, grad(0, 50))), rec(outOf(1), frame(0, 50, grad(0, 50))))
		}
		recs = append(recs, rec(into(0), frame(0, m, grad(0, m))), rec(into(1), frame(1, m, grad(1, m))))
		sum := f32s(float32(m)+float32(m), 3)
		recs = append(recs, rec(outOf(1), frame(0, m, sum)), rec(outOf(0), frame(1, m, sum)))
	}
	rule, detail := judgeDevice(recs, aggCase{Workers: 2, DType: tensor.F32})
	require.Empty(t, rule, detail)
}
