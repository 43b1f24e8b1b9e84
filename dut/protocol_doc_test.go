package dut_test

import (
	"bytes"
	"encoding/binary"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/internal/f16ref"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/tensor"
)

// TestDocsWorkedF16Frame holds docs/dut.md's "Protocol notes for a device
// writer" to a fresh run of the command it shows: the last message's INA
// header names its own packet count (1, not --msg-len's 2), and element 2
// of frame 105 is the eight ranks' binary16 sum rounded after every
// addition in rank order (computed here with the independent f16ref), not
// the wide sum rounded once, which the page also quotes.
func TestDocsWorkedF16Frame(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.DType, cfg.TensorBytes, cfg.MsgLen, cfg.MTU, cfg.Seed = 8, tensor.F16, 3000, 2, 1024, 1
	var capture bytes.Buffer
	cfg.Capture = &capture
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	rd, err := pcapio.NewReader("capture", &capture)
	require.NoError(t, err)
	recs, _, err := rd.All()
	require.NoError(t, err)

	// RoCEv2 over IPv4: Ethernet 14, IPv4 20, UDP 8, BTH 12, RETH 16, ImmDt 4.
	const payload = 14 + 20 + 8 + 12 + 16 + 4
	pay := func(frame int) []byte { d := recs[frame-1].Data; return d[payload : len(d)-4] }
	ranks := make([][]byte, 8)
	for f := 81; f <= 88; f++ { // the docs' frames 81-88: every rank's packet of the last message
		p := pay(f)
		require.Equal(t, []byte{0x49, 0x4e, 0x41, 0x31, 0x00, 0x01, 0x01}, p[:7], "frame %d's INA header: ring 0, message 1, MsgLen 1", f)
		require.Len(t, p, 968, "frame %d", f)
		ranks[p[7]] = p
	}
	result := pay(105)
	require.Equal(t, byte(0), result[7], "frame 105 is rank 0's frame")

	elem := func(p []byte, k int) uint16 { return binary.LittleEndian.Uint16(p[8+2*k:]) }
	want := []uint16{0xacc0, 0x3b6e, 0x36d0, 0x37ac, 0x348c, 0xba62, 0xb684, 0x385c} // the page's table
	differ := 0
	for k := range 480 {
		step, wide := f16ref.Decode(elem(ranks[0], k)), f16ref.Decode(elem(ranks[0], k))
		for r := 1; r < 8; r++ {
			x := f16ref.Decode(elem(ranks[r], k))
			step = f16ref.Decode(f16ref.Round(step + x))
			wide += x
		}
		require.Equal(t, f16ref.Round(step), elem(result, k), "element %d", k)
		if f16ref.Round(wide) != f16ref.Round(step) {
			differ++
		}
		if k == 2 {
			for r := range 8 {
				require.Equal(t, want[r], elem(ranks[r], k), "rank %d's element 2", r)
			}
			require.Equal(t, 1.3828125, step)
			require.Equal(t, uint16(0x3d88), elem(result, k))
			require.Equal(t, 1.3837890625, f16ref.Decode(f16ref.Round(wide)))
		}
	}
	require.Equal(t, 46, differ, "elements where rounding once differs")

	doc, err := os.ReadFile("../docs/dut.md")
	require.NoError(t, err)
	for _, s := range []string{"`49 4e 41 31 00 01 01 00`", "`88 3d`", "`89 3d`", "46 of the 480", "--seed 1 --pcap w.pcapng"} {
		require.True(t, strings.Contains(string(doc), s), "docs/dut.md no longer says %s", s)
	}
}
