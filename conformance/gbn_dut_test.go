package conformance

import (
	"fmt"
	"testing"
	"time"

	"github.com/gopacket/gopacket"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/roce"
)

// ringFrame builds a frame of the 2-rank ring: from rank src to rank dst
// (data on rank src's connection, or a response on rank dst's).
func ringFrame(t *testing.T, src, dst int, p frames.Packet) []byte {
	t.Helper()
	qp := uint32(0x12)
	if p.Opcode.IsAck() {
		qp = 0x11
	}
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: emu.HostMAC(src), DstMAC: emu.HostMAC(dst),
		SrcIP: nic.Addr(frames.V2IPv4, src, 0), DstIP: nic.Addr(frames.V2IPv4, dst, 0), DestQP: qp})
	require.NoError(t, err)
	buf := make([]byte, 2048)
	n, err := b.Build(buf, &p)
	require.NoError(t, err)
	return buf[:n]
}

func data(psn uint32) frames.Packet {
	return frames.Packet{Opcode: wire.WriteMiddle, PSN: psn, Payload: make([]byte, 256)}
}

func ack(psn, msn uint32) frames.Packet {
	return frames.Packet{Opcode: wire.Acknowledge, PSN: psn, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK, MSN: msn}}
}

func nak(psn, msn uint32) frames.Packet {
	return frames.Packet{Opcode: wire.Acknowledge, PSN: psn, AETH: frames.AETHFields{Syndrome: wire.SyndromeNAKPSNSeqErr, MSN: msn}}
}

// into and outOf are the wire's capture interfaces of device port p: what
// reached the device, what it sent.
func into(p int) int  { return 4*p + 2 }
func outOf(p int) int { return 4*p + 3 }

func rec(iface int, frame []byte, comments ...string) pcapio.Record {
	return pcapio.Record{Data: frame, Info: gopacket.CaptureInfo{InterfaceIndex: iface, CaptureLength: len(frame), Length: len(frame)}, Comments: comments}
}

// deviceGBN on hand-made captures of rank 0's connection to rank 1 (data
// 0 → 1 through device port 0 then 1, responses back): each rule fires on
// the device behaviour it names, and only there.
func TestDeviceGBNRules(t *testing.T) {
	faithful := func() []pcapio.Record {
		return []pcapio.Record{
			rec(into(0), ringFrame(t, 0, 1, data(10))),
			rec(outOf(1), ringFrame(t, 0, 1, data(10))),
			rec(into(0), ringFrame(t, 0, 1, data(12))),
			rec(outOf(1), ringFrame(t, 0, 1, data(12))),
			rec(into(1), ringFrame(t, 1, 0, nak(11, 1))),
			rec(outOf(0), ringFrame(t, 1, 0, nak(11, 1))),
			rec(into(1), ringFrame(t, 1, 0, ack(12, 2))),
			rec(outOf(0), ringFrame(t, 1, 0, ack(12, 2))),
		}
	}
	require.Empty(t, deviceGBN(2, faithful()), "a device that forwards everything")

	lost := faithful()
	lost = append(lost[:5], lost[6:]...) // the NAK never leaves; the later ACK does
	require.Contains(t, deviceGBN(2, lost), "response-lost: rank 1's NAK_PSN_SEQ_ERR PSN 11 MSN 1 (QPN 0x11) to rank 0 reached the device (capture frame 5)")

	atEnd := faithful()[:7] // the last ACK reached the device as the run ended
	require.Empty(t, deviceGBN(2, atEnd), "a response still in the device at the end is not lost")

	ghost := faithful()
	ghost[4] = rec(into(1), ringFrame(t, 1, 0, nak(11, 1)), pcapio.FaultComment("drop", "drop port=1 dir=in", 0, true))
	ghost = append(ghost[:5], ghost[6:]...)
	require.Empty(t, deviceGBN(2, ghost), "a NAK the wire dropped never reached the device")

	forged := append(faithful(), rec(outOf(0), ringFrame(t, 1, 0, ack(14, 3))))
	require.Contains(t, deviceGBN(2, forged), "response-forged: the device sent rank 0 ACK PSN 14 MSN 3 (QPN 0x11) (capture frame 9) that rank 1 never sent it")

	corrupt := ringFrame(t, 1, 0, ack(14, 3))
	corrupt[len(corrupt)-1] ^= 1 // a bad ICRC: the requester's NIC drops it, nothing to judge
	require.Empty(t, deviceGBN(2, append(faithful(), rec(outOf(0), corrupt))))

	renumbered := append(faithful(), rec(outOf(1), ringFrame(t, 0, 1, data(13))))
	require.Contains(t, deviceGBN(2, renumbered), "data-forged: the device sent rank 1 a")

	spoofed := append(faithful(), rec(into(1), ringFrame(t, 0, 1, data(13))), rec(outOf(1), ringFrame(t, 0, 1, data(13))))
	require.Contains(t, deviceGBN(2, spoofed), "data-forged", "rank 0's frame forged on port 1 is not rank 0's")
}

// The hosts' own view, cut into one ring connection, is what checkGBN
// judges: a requester that goes back past the NAK'd PSN (to one already
// acknowledged) is caught, the same trace with the go-back to it is not.
func TestHostTraceConnection(t *testing.T) {
	trace := func(resend uint32) *hostTrace {
		var tr hostTrace
		for _, e := range []struct {
			rank     int
			sent     bool
			src, dst int
			p        frames.Packet
		}{
			{0, true, 0, 1, data(100)},
			{0, true, 0, 1, data(101)},
			{0, true, 0, 1, data(102)},
			{1, false, 0, 1, data(100)},
			{1, false, 0, 1, data(102)}, // 101 was lost
			{1, true, 1, 0, nak(101, 1)},
			{0, false, 1, 0, nak(101, 1)},
			{0, true, 0, 1, data(resend)},
			{1, true, 0, 1, ack(5, 1)}, // rank 1's own connection: not this one's
		} {
			tr.observe(e.rank, e.sent, ringFrame(t, e.src, e.dst, e.p))
		}
		return &tr
	}
	ev, first, ok := trace(101).connection(0, 2)
	require.True(t, ok)
	require.Equal(t, uint32(100), first)
	require.Len(t, ev, 8, "the other connection's frame is left out")
	require.Empty(t, checkGBN(ev, first))

	ev, first, _ = trace(100).connection(0, 2)
	require.Contains(t, checkGBN(ev, first), "psn-order: the hosts' event 8 sends PSN 100; expected 103 next or a go-back to 101")

	_, _, ok = trace(101).connection(1, 2)
	require.False(t, ok, "rank 1 sent no data")
}

// forDevice fits every generated case to the live path's limits and
// keeps what its delays meant: one beyond the ACK timeout stays beyond it,
// one within stays within.
func TestForDeviceFitsCases(t *testing.T) {
	delays := func(c aggCase) []int {
		var us []int
		for _, e := range c.Events {
			var d int
			if _, err := fmt.Sscanf(e, "delay=%dus", &d); err == nil {
				us = append(us, d)
			}
		}
		return us
	}
	scaled := 0
	for i := range 300 {
		seed := caseSeed(1, "fit", i)
		c := sample(aggCaseGen(seed), seed).(aggCase)
		before := delays(c)
		d := c.forDevice(4, dut.Calibration{})
		require.LessOrEqual(t, d.Workers, 4)
		require.GreaterOrEqual(t, d.Timeout, dutMinTimeout)
		require.LessOrEqual(t, d.MsgLen, dutMaxInFlight)
		require.LessOrEqual(t, d.Window*d.MsgLen, max(dutMaxInFlight, d.MsgLen))
		require.Empty(t, d.Netem)
		require.True(t, portsFit(d.Events, d.Workers))
		if d.Workers == c.Workers && c.Netem == "" {
			after := delays(d)
			require.Len(t, after, len(before))
			for k := range before {
				was := time.Duration(before[k])*time.Microsecond > roce.AckTimeout(uint8(c.Timeout))
				is := time.Duration(after[k])*time.Microsecond > roce.AckTimeout(uint8(d.Timeout))
				require.Equal(t, was, is, "%s → %s", c, d)
				if after[k] != before[k] {
					scaled++
				}
			}
		}
	}
	require.Positive(t, scaled, "some delays were scaled")
}

// TestForDeviceFitsRingCases: a ring case through a device that only
// forwards (aggCase.Ring) keeps what forDevice keeps of a NetReduce case
// and, since a ring rank keeps 4·window+8 messages unacknowledged
// (emu/collective's ringWindow), at most 170 packets of them in flight
// (one-packet messages with window 1, 12 packets, at the least), an
// element per rank, no forged copies, and a scenario of mode ring with no
// switch program; the same case not Ring is unchanged by it.
func TestForDeviceFitsRingCases(t *testing.T) {
	cut := 0
	for i := range 300 {
		seed := caseSeed(1, "ring-fit", i)
		c := sample(aggCaseGen(seed), seed).(aggCase)
		nr := c.forDevice(4, dut.Calibration{})
		c.Ring = true
		d := c.forDevice(4, dut.Calibration{})
		require.True(t, d.Ring)
		require.Equal(t, nr.Workers, d.Workers)
		require.LessOrEqual(t, (4*d.Window+8)*d.MsgLen, max(dutMaxInFlight, 12), d.String())
		require.GreaterOrEqual(t, d.Elems, d.Workers)
		require.GreaterOrEqual(t, d.Timeout, dutMinTimeout)
		for _, e := range d.Events {
			require.NotContains(t, e, "spoof")
		}
		if d.MsgLen < nr.MsgLen || d.Window < nr.Window {
			cut++
		}
		sc := d.scenario(0)
		require.Equal(t, "ring", sc.Mode)
		require.Empty(t, sc.SwitchProgram)
		require.Contains(t, d.String(), " mode=ring")
		require.NotContains(t, nr.String(), "mode=ring")
		require.Equal(t, "netreduce", nr.scenario(0).Mode)
	}
	require.Positive(t, cut, "some ring cases were cut")
}
