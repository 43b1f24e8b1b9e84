package main

import (
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// wallClockCapture: a clean run as a software requester behind a
// wall-clock wire makes it, written the way faultwire writes (marked as
// taken on the wall clock): PSNs 100..105, an ACK for 103, and a timeout
// retransmission of 102 captured 2 ms after that ACK (frame 8).
func wallClockCapture(t *testing.T) string {
	ma, mb := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ia, ib := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	req, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib, DestQP: 0x12})
	require.NoError(t, err)
	resp, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mb, DstMAC: ma, SrcIP: ib, DstIP: ia, DestQP: 0x11})
	require.NoError(t, err)
	var buf bytes.Buffer
	w, err := pcapio.NewWallClockWriter(&buf, "tap0")
	require.NoError(t, err)
	frame := make([]byte, 256)
	ns := int64(time.Second)
	put := func(dt time.Duration, b *frames.Builder, p frames.Packet) {
		n, err := b.Build(frame, &p)
		require.NoError(t, err)
		ns += int64(dt)
		require.NoError(t, w.Write("tap0", ns, frame[:n]))
	}
	data := func(dt time.Duration, psn uint32) {
		put(dt, req, frames.Packet{Opcode: wire.SendOnly, PSN: psn, AckReq: psn == 103 || psn == 105, Payload: []byte{1, 2, 3, 4}})
	}
	for p := uint32(100); p <= 105; p++ {
		data(time.Microsecond, p)
	}
	put(time.Microsecond, resp, frames.Packet{Opcode: wire.Acknowledge, PSN: 103, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK}})
	data(2*time.Millisecond, 102)
	for p := uint32(103); p <= 105; p++ {
		data(time.Microsecond, p)
	}
	put(time.Microsecond, resp, frames.Packet{Opcode: wire.Acknowledge, PSN: 105, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK}})
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "wall.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestCheckWallClockWithoutFlag: a capture marked as taken on the wall
// clock is judged with the wall-clock in-flight tolerance without a flag,
// and says so in one line (text and JSON); an explicit --in-flight wins.
func TestCheckWallClockWithoutFlag(t *testing.T) {
	path := wallClockCapture(t)
	code, out, errOut := runCLI("check", path)
	assert.Equal(t, 0, code, out+errOut)
	assert.Contains(t, out, "\n  clock        wall-clock capture (the capture's section comment says \"inaemu: clock=wall\"): in-flight tolerance 1s instead of 50µs (--in-flight overrides)\n")
	assert.Contains(t, out, "result       conforms\n")

	code, out, _ = runCLI("check", path, "--json")
	assert.Equal(t, 0, code)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	assert.Equal(t, "wall", m["clock"])
	assert.EqualValues(t, 1e9, m["in_flight_ns"])
	assert.Contains(t, m["in_flight_why"], "wall-clock capture")

	code, out, _ = runCLI("check", path, "--in-flight", "50us")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "psn-order frame 8 ")
	assert.NotContains(t, out, "clock ")
}
