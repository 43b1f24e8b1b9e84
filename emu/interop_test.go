package emu

// Interop: a NetReduce run's capture read by software nobody here wrote.
// tshark must read every frame with the interface names we gave and no
// malformed packet; scapy's RoCE ICRC must accept every frame except the
// ones our fault stage corrupted — in particular every result frame the
// switch rebuilt with a fresh ICRC.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/testtool"
)

func interopCapture(t *testing.T) (string, []pcapio.Record) {
	t.Helper()
	fn := filepath.Join(t.TempDir(), "run.pcapng")
	f, err := os.Create(fn)
	require.NoError(t, err)
	cfg := DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = 4, 64<<10, 8, 5
	ev, err := faults.Parse("corrupt port=2 dir=in class=data nth=4")
	require.NoError(t, err)
	drop, err := faults.Parse("drop port=1 dir=out class=data nth=2")
	require.NoError(t, err)
	cfg.Events = []faults.Event{ev, drop}
	cfg.Capture = f
	res, err := Run(cfg)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.True(t, res.Exact)
	require.Greater(t, netreduce.StatsOf(res.Switch).Aggregations, uint64(0))
	recs, err := pcapio.ReadAll(fn)
	require.NoError(t, err)
	return fn, recs
}

func TestInteropTsharkReadsCapture(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	fn, recs := interopCapture(t)
	out, errOut, err := testtool.Run(t, "tshark", "-r", fn, "-T", "fields", "-E", "separator=|",
		"-e", "frame.number", "-e", "frame.interface_name", "-e", "infiniband.bth.opcode", "-e", "_ws.malformed", "-e", "frame.comment")
	require.NoError(t, err, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, len(recs), "tshark must see every frame")
	names := map[string]bool{}
	comments := 0
	for i, l := range lines {
		c := strings.Split(l, "|")
		require.Len(t, c, 5, "line %q", l)
		names[c[1]] = true
		require.Empty(t, c[3], "frame %d is malformed for tshark", i+1)
		if strings.HasPrefix(c[4], "inaemu: fault=") {
			comments++
		}
	}
	for p := 0; p < 4; p++ {
		require.True(t, names[fmt.Sprintf("port%d-in", p)] && names[fmt.Sprintf("port%d-out", p)], "interfaces: %v", names)
	}
	require.GreaterOrEqual(t, comments, 2, "the corrupt and drop events must show as comments")
}

// scapyCaptureICRC prints "index OK|BAD" for every RoCEv2 frame of a
// pcapng, with scapy's own ICRC computation (contrib/roce).
const scapyCaptureICRC = `
import struct, sys
from scapy.utils import PcapNgReader
from scapy.layers.inet import IP, UDP
from scapy.contrib.roce import BTH
for i, p in enumerate(PcapNgReader(sys.argv[1])):
    if IP not in p or UDP not in p or BTH not in p:
        continue
    b = p[BTH]
    print(i, "OK" if struct.pack("!I", b.icrc) == b.compute_icrc(None) else "BAD")
`

func TestInteropScapyAcceptsRebuiltICRCs(t *testing.T) {
	testtool.Need(t, "scapy", testtool.HaveScapy)
	fn, recs := interopCapture(t)
	out, errOut, err := testtool.Run(t, testtool.SystemPython, "-c", scapyCaptureICRC, fn)
	require.NoError(t, err, errOut)
	bad := map[int]bool{}
	seen := 0
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(l)
		require.Len(t, f, 2, "scapy line %q", l)
		i, err := strconv.Atoi(f[0])
		require.NoError(t, err)
		seen++
		if f[1] == "BAD" {
			bad[i] = true
		}
	}
	require.Greater(t, seen, 100, "scapy must check the RoCE frames:\n%s", errOut)
	corrupted := 0
	for i, r := range recs {
		isCorrupt := len(r.Comments) > 0 && strings.Contains(r.Comments[0], "corrupt")
		if isCorrupt {
			corrupted++
			require.True(t, bad[i], "frame %d was corrupted (%q) but scapy accepts its ICRC", i, r.Comments)
		} else {
			require.False(t, bad[i], "frame %d (%v) has an ICRC scapy rejects", i, r.Comments)
		}
	}
	require.Equal(t, 1, corrupted)
}
