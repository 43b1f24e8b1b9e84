package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// checkPFCCapture: host 1 (port1) sends priority-3 SENDs; the switch
// pauses its priority 3 for 1000 quanta (51.2 µs at 10 Gb/s) and host 1
// sends again 10 µs later.
func checkPFCCapture(t *testing.T) string {
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: net.HardwareAddr{2, 0, 0, 0, 0, 1}, DstMAC: net.HardwareAddr{2, 0, 0, 0, 0, 2},
		SrcIP: netip.MustParseAddr("10.0.0.1"), DstIP: netip.MustParseAddr("10.0.0.2"), DestQP: 0x12, TClass: 3 << 5})
	require.NoError(t, err)
	send := func(psn uint32) []byte {
		buf := make([]byte, 256)
		n, err := b.Build(buf, &frames.Packet{Opcode: wire.SendOnly, PSN: psn, Payload: make([]byte, 32)})
		require.NoError(t, err)
		return buf[:n]
	}
	pfc := make([]byte, 60) // IEEE 802.1Qbb: priority 3, 1000 quanta
	copy(pfc, []byte{0x01, 0x80, 0xC2, 0, 0, 1, 2, 0x1a, 0xe1, 0, 0, 1, 0x88, 0x08, 0x01, 0x01, 0, 1 << 3})
	binary.BigEndian.PutUint16(pfc[18+2*3:], 1000)
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, "port1-in", "port1-out")
	require.NoError(t, err)
	require.NoError(t, w.Write("port1-in", 1_000_000, send(1)))
	require.NoError(t, w.Write("port1-out", 1_005_000, pfc))
	require.NoError(t, w.Write("port1-in", 1_015_000, send(2))) // frame 3
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "pfc.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

func TestCheckPFCFlags(t *testing.T) {
	path := checkPFCCapture(t)
	code, out, _ := runCLI("check", path, "--json", "--link-rate", "10G", "--link-delay", "1us")
	require.Equal(t, 1, code, out)
	var rep struct {
		PFCPauses  int `json:"pfc_pauses"`
		Violations []struct {
			Rule  string `json:"rule"`
			Frame int    `json:"frame"`
		} `json:"violations"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &rep))
	assert.Equal(t, 1, rep.PFCPauses)
	require.Len(t, rep.Violations, 1)
	assert.Equal(t, "pfc-paused-send", rep.Violations[0].Rule)
	assert.Equal(t, 3, rep.Violations[0].Frame)
	// Per link: the same.
	code, _, _ = runCLI("check", path, "--link-rate", "port1=10G", "--link-delay", "1us")
	assert.Equal(t, 1, code)
	// At 100 Gb/s the pause lasts 5.12 µs: over before the frame.
	code, out, _ = runCLI("check", path, "--link-rate", "100G", "--link-delay", "1us")
	assert.Equal(t, 0, code, out)
	// Without the rate: undecidable.
	code, out, _ = runCLI("check", path)
	assert.Equal(t, exitUndecidable, code)
	assert.Contains(t, out, "--link-rate")

	for _, tc := range []struct{ args []string }{
		{[]string{"--link-rate", "fast"}},
		{[]string{"--link-rate", "=10G"}},
		{[]string{"--cnp", "maybe"}},
		{[]string{"--cnp-interval", "0s"}},
		{[]string{"--cnp-interval", "4us"}},
		{[]string{"--link-delay", "-1us"}},
	} {
		code, out, errOut := runCLI(append([]string{"check", path}, tc.args...)...)
		assert.Equal(t, 2, code, "%v", tc.args)
		assert.Empty(t, out)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line: %q", errOut)
	}
}
