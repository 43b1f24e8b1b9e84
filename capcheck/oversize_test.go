package capcheck_test

import (
	"encoding/binary"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
)

// checkAllocs checks the capture at path and returns the report, its
// text and the bytes allocated.
func checkAllocs(t *testing.T, path string) (*capcheck.Report, string, uint64) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	var text strings.Builder
	require.NoError(t, rep.WriteText(&text))
	return rep, text.String(), after.TotalAlloc - before.TotalAlloc
}

// A capture whose last packet block claims a 1.5 GB frame is checked up
// to it at the cost of the frames before it, not of the claim (check had
// taken 4.2 GB of RSS), and the verdict says the rest went unchecked: it
// had read "conforms" of a file it had not read to the end.
func TestOversizeRecordNotConforms(t *testing.T) {
	clean := chkGoldenPath("netreduce_clean.pcapng")
	rep, text, base := checkAllocs(t, clean)
	require.True(t, rep.Conforms)
	require.Contains(t, text, "  result       conforms\n")

	// The clean capture, then an Enhanced Packet Block on its first
	// interface claiming 1.5 GB, its bytes a hole of a sparse file.
	const claim = 1536 << 20
	data, err := os.ReadFile(clean)
	require.NoError(t, err)
	le := binary.LittleEndian
	require.EqualValues(t, 0x0A0D0D0A, le.Uint32(data), "a little-endian pcapng")
	epb := le.AppendUint32(le.AppendUint32(nil, 6), 32+claim)
	epb = le.AppendUint32(le.AppendUint32(append(epb, make([]byte, 12)...), claim), claim)
	path := filepath.Join(t.TempDir(), "claim.pcapng")
	f, err := os.Create(path)
	require.NoError(t, err)
	_, err = f.Write(append(data, epb...))
	require.NoError(t, err)
	_, err = f.Seek(claim, io.SeekCurrent)
	require.NoError(t, err)
	_, err = f.Write(le.AppendUint32(nil, 32+claim))
	require.NoError(t, err)
	require.NoError(t, f.Close())

	bad, text, allocated := checkAllocs(t, path)
	t.Logf("%d bytes allocated checking the clean capture, %d with the claim", base, allocated)
	require.Less(t, allocated, base+32<<20, "the claim costs no memory")
	require.Equal(t, rep.Frames, bad.Frames, "every frame before the claim is checked")
	require.Equal(t, path+": frame "+strconv.Itoa(rep.Frames+1)+": damaged at or after byte "+strconv.Itoa(len(data))+
		": Enhanced Packet Block claims a 1610612736-byte frame, more than the 262144 bytes a frame may hold", bad.Truncated)
	require.Empty(t, bad.Violations, "no violation among the frames checked")
	require.False(t, bad.Conforms, "the file after the claim is unread")
	require.Equal(t, "undecidable", bad.Verdict)
	require.Contains(t, text, "  result       conforms as far as checked (the file after frame "+strconv.Itoa(rep.Frames)+" unchecked: cut short or damaged there)\n")
	require.NotContains(t, text, "  result       conforms\n")
}
