package capcheck_test

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/internal/testtool"
)

// scapyRelink rewrites an Ethernet capture with another link type, as
// `tcpdump -i any` (Linux cooked SLL, SLL2) or a raw-IP capture would
// have recorded the same frames: scapy drops the Ethernet header and puts
// its own in front, with the frame's source MAC as the link-layer address.
const scapyRelink = `
import sys
from scapy.all import rdpcap, Ether
from scapy.layers.l2 import CookedLinux, CookedLinuxV2
from scapy.utils import PcapWriter
kind, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
lt = {"sll": 113, "sll2": 276, "raw": 101}[kind]
w = PcapWriter(dst, linktype=lt, sync=True)
w.write_header(None)
for p in rdpcap(src):
    raw = bytes(p)
    mac, proto, body = raw[6:12], int.from_bytes(raw[12:14], "big"), raw[14:]
    if kind == "sll":
        hdr = bytes(CookedLinux(pkttype=0, lladdrtype=1, lladdrlen=6, src=mac + b"\0\0", proto=proto))
    elif kind == "sll2":
        hdr = bytes(CookedLinuxV2(proto=proto, ifindex=3, lladdrtype=1, pkttype=0, lladdrlen=6, src=mac + b"\0\0"))
    else:
        hdr = b""
    w.write_packet(hdr + body, sec=int(p.time), usec=int(round((p.time - int(p.time)) * 1e6)))
w.close()
`

// TestCheckLinuxCookedAndRawIP: the same capture recorded as Linux
// cooked (SLL, SLL2) and raw IP gives the same verdicts as Ethernet (on
// main, such captures were refused).
func TestCheckLinuxCookedAndRawIP(t *testing.T) {
	testtool.Need(t, "scapy", testtool.HaveScapy)
	src := chkGoldenPath("psn_order.pcapng")
	opt := capcheck.CheckOptions{Vantage: capcheck.VantageSender}
	want, err := capcheck.CheckFile(src, opt)
	require.NoError(t, err)
	require.NotEmpty(t, want.Violations)
	for _, kind := range []string{"sll", "sll2", "raw"} {
		t.Run(kind, func(t *testing.T) {
			dst := filepath.Join(t.TempDir(), kind+".pcap")
			_, errOut, err := testtool.Run(t, testtool.SystemPython, "-c", scapyRelink, kind, src, dst)
			require.NoError(t, err, errOut)
			got, err := capcheck.CheckFile(dst, opt)
			require.NoError(t, err)
			assert.Equal(t, chkViolations(want), chkViolations(got))
			assert.Equal(t, want.Frames, got.Frames)
			assert.Equal(t, want.RoCEFrames, got.RoCEFrames)
			assert.Equal(t, want.Connections, got.Connections)
			assert.Zero(t, got.Snapped)
		})
	}
}
