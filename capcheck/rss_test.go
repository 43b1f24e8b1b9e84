package capcheck_test

import (
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
)

// TestCheckFileMemory measures the peak RSS of checking a large capture
// (INAEMU_RSS_CAPTURE names it; skipped without): CheckFile streams the
// file, keeping a small record per frame and the connections' state, not
// the frames. Make one with, e.g.,
//
//	inaemu run --workers 8 --tensor 56MiB --loss 0.01% --seed 3 --pcap big.pcapng
//
// (1.35 GB) and run INAEMU_RSS_CAPTURE=big.pcapng go test ./capcheck -run
// TestCheckFileMemory -v.
func TestCheckFileMemory(t *testing.T) {
	path := os.Getenv("INAEMU_RSS_CAPTURE")
	if path == "" {
		t.Skip("SKIP opt-in measurement: set INAEMU_RSS_CAPTURE to a large capture")
	}
	st, err := os.Stat(path)
	require.NoError(t, err)
	defer debug.SetGCPercent(debug.SetGCPercent(capcheck.GCPercent)) // as inaemu check runs
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	runtime.KeepAlive(rep)
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 3 && f[0] == "VmHWM:" {
			kb, _ := strconv.Atoi(f[1])
			t.Logf("%s: %d MB, %d frames, %d violations: peak RSS %d MB (%.2f × the file)",
				path, st.Size()>>20, rep.Frames, len(rep.Violations), kb>>10, float64(kb<<10)/float64(st.Size()))
			require.Less(t, int64(kb)<<10, int64(512)<<20, "a capture is checked in under 512 MB")
		}
	}
}
