package main

import (
	"bytes"
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

// undecidableCapture: two QPs from 10.0.0.1 to 10.0.0.2 starting at PSN
// 1000, with UDP source ports that are not rxe's (49152+QPN), so neither
// PSNs nor ports tell their responses apart. 0x21's NAK for 1004 (frame
// 11) is wrong if it answers 0x22 (which had sent up to 1002) and right
// if it answers 0x12: undecidable.
func undecidableCapture(t *testing.T) string {
	ma, mb := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ia, ib := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	mk := func(fwd bool, qp uint32) *frames.Builder {
		p := frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib, DestQP: qp, SrcPort: uint16(49152 + qp)}
		if !fwd {
			p.SrcMAC, p.DstMAC, p.SrcIP, p.DstIP = mb, ma, ib, ia
		}
		b, err := frames.NewBuilder(p)
		require.NoError(t, err)
		return b
	}
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, "tap0")
	require.NoError(t, err)
	frame := make([]byte, 256)
	ns := int64(1000)
	put := func(b *frames.Builder, p frames.Packet) {
		n, err := b.Build(frame, &p)
		require.NoError(t, err)
		ns += 1000
		require.NoError(t, w.Write("tap0", ns, frame[:n]))
	}
	reqA, respA, reqB, respB := mk(true, 0x12), mk(false, 0x11), mk(true, 0x22), mk(false, 0x21)
	data := func(b *frames.Builder, psns ...uint32) {
		for _, p := range psns {
			put(b, frames.Packet{Opcode: wire.WriteMiddle, PSN: p, Payload: []byte{1, 2, 3, 4}})
		}
	}
	ack := func(b *frames.Builder, psn uint32, syn wire.Syndrome) {
		put(b, frames.Packet{Opcode: wire.Acknowledge, PSN: psn, AETH: frames.AETHFields{Syndrome: syn}})
	}
	data(reqA, 1000, 1001, 1002, 1003, 1004, 1005)
	data(reqB, 1000, 1001, 1002)
	ack(respA, 1001, wire.SyndromeACK)
	ack(respB, 1004, wire.SyndromeNAKPSNSeqErr) // frame 11
	data(reqB, 1003, 1004, 1005)
	ack(respA, 1005, wire.SyndromeACK)
	ack(respB, 1005, wire.SyndromeACK)
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "undecidable.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	return path
}

// TestCheckUndecidableExit: what stays undecidable exits 5, not 0, by
// default and with --vantage receiver (a CI gate never passes it);
// --allow-unchecked accepts it (exit 0) and the report still says what
// went unchecked, in text and JSON; naming the pairing decides it (exit
// 1). The help documents the status.
func TestCheckUndecidableExit(t *testing.T) {
	path := undecidableCapture(t)
	for _, extra := range [][]string{nil, {"--vantage", "receiver"}} {
		code, out, errOut := runCLI(append([]string{"check", path}, extra...)...)
		assert.Equal(t, 5, code, "%v: %s%s", extra, out, errOut)
		assert.Contains(t, out, "\n  unchecked    nak-psn frame 11 ")
		assert.Contains(t, out, "\n  result       undecidable: ")
		assert.Contains(t, errOut, "--allow-unchecked")
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "one line")
	}
	code, out, errOut := runCLI("check", path, "--allow-unchecked")
	assert.Equal(t, 0, code, out+errOut)
	assert.Contains(t, out, "\n  unchecked    nak-psn frame 11 ")
	assert.Empty(t, errOut)

	code, out, _ = runCLI("check", path, "--json")
	assert.Equal(t, 5, code)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	assert.Equal(t, "undecidable", m["verdict"])
	assert.Equal(t, false, m["conforms"], "a gate reading conforms must not pass what went unchecked")
	assert.Empty(t, m["violations"], "no violation holds")
	un := m["unchecked"].([]any)
	require.Len(t, un, 1)
	assert.Contains(t, un[0], "nak-psn frame 11 ")

	code, out, _ = runCLI("check", path, "--pair", "10.0.0.1,10.0.0.2,0x22=0x21")
	assert.Equal(t, 1, code, out)
	assert.Contains(t, out, "nak-psn frame 11 ")

	code, out, _ = runCLI("check", "--help")
	assert.Equal(t, 0, code)
	assert.Contains(t, out, "5 undecidable")
	assert.Contains(t, out, "--allow-unchecked")
}

// TestCheckUncoveredOpcodeExit: frames of an opcode the rules do not
// cover (UC SEND ONLY) make the verdict undecidable, exit 5 (0 with
// --allow-unchecked); --mtu accepts only the MTUs IBTA allows.
func TestCheckUncoveredOpcodeExit(t *testing.T) {
	ma, mb := net.HardwareAddr{2, 0, 0, 0, 0, 1}, net.HardwareAddr{2, 0, 0, 0, 0, 2}
	ia, ib := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib, DestQP: 0x12})
	require.NoError(t, err)
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, "tap0")
	require.NoError(t, err)
	frame := make([]byte, 256)
	for i, op := range []wire.Opcode{wire.ClassUC | wire.SendOnly, wire.ClassUC | wire.SendOnly} {
		n, err := b.Build(frame, &frames.Packet{Opcode: op, PSN: uint32(7 + i), Payload: []byte{1, 2, 3, 4}})
		require.NoError(t, err)
		require.NoError(t, w.Write("tap0", int64(1000*(i+1)), frame[:n]))
	}
	require.NoError(t, w.Flush())
	path := filepath.Join(t.TempDir(), "uc.pcapng")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))

	code, out, _ := runCLI("check", path)
	assert.Equal(t, 5, code, out)
	assert.Contains(t, out, "\n  unchecked    opcode UC_SEND_ONLY (0x24): 2 frames outside the rules\n")
	code, _, _ = runCLI("check", path, "--allow-unchecked")
	assert.Equal(t, 0, code)
	code, out, _ = runCLI("check", path, "--json")
	assert.Equal(t, 5, code)
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &m))
	assert.Equal(t, map[string]any{"UC_SEND_ONLY": 2.0}, m["unchecked_opcodes"])

	code, _, errOut := runGuarded("check", path, "--mtu", "300")
	oneLine(t, code, errOut, "inaemu check: ", "--mtu 300")
}

// TestCheckTruncatedVerdict: a capture cut short is not a capture that
// conforms, to a gate reading the JSON or the JUnit report either: with
// no violation before the cut its verdict is undecidable, conforms false,
// and the JUnit report's testcase unread fails naming the cut (exit 2);
// with one, the verdict is violations (exit 1) and unread fails too.
func TestCheckTruncatedVerdict(t *testing.T) {
	pcap, pcapng := truncatedCopies(t)
	xmlOut := filepath.Join(t.TempDir(), "check.xml")
	for _, c := range []struct {
		args    []string
		code    int
		verdict string
	}{
		{[]string{"check", pcap}, 2, "undecidable"},
		{[]string{"check", pcapng, "--vantage", "sender"}, 1, "violations"},
	} {
		code, out, errOut := runGuarded(append(c.args, "--json")...)
		require.Equal(t, c.code, code, errOut)
		var j map[string]any
		require.NoError(t, json.Unmarshal([]byte(out), &j))
		assert.Equal(t, false, j["conforms"], c.args)
		assert.Equal(t, c.verdict, j["verdict"], c.args)
		require.NotEmpty(t, j["truncated"])

		code, _, errOut = runGuarded(append(c.args, "--junit", xmlOut)...)
		require.Equal(t, c.code, code, errOut)
		var unread []string
		for _, tc := range readJUnit(t, xmlOut).Suites[0].Cases {
			if tc.Name == "unread" {
				for _, f := range tc.Failures {
					unread = append(unread, f.Type+": "+f.Message)
				}
			}
		}
		require.Len(t, unread, 1, c.args)
		assert.Contains(t, unread[0], "truncated: "+j["truncated"].(string)+": the file after frame ")
	}
}
