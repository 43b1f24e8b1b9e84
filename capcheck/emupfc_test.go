package capcheck_test

import (
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// The emulator's own captures state every link's rate and propagation
// delay when the run has congestion settings (pcapio.InterfaceLinks), so
// the checker judges their PAUSE/PFC frames with no flag: here a 4:1
// incast at 100 Gb/s with PFC on and a static 20 kB XOFF, so that a small
// run pauses every sender again and again.
const (
	emuRate    = 100e9
	emuLatency = time.Microsecond
)

// pfcRunCapture runs the incast with a capture and returns its path.
func pfcRunCapture(t *testing.T) string {
	t.Helper()
	cfg := emu.DefaultConfig()
	cfg.Mode = collective.Traffic
	cfg.Workers = 5
	cfg.Link.Rate, cfg.Link.Latency = emuRate, emuLatency
	cfg.TensorBytes = 256 << 10
	cfg.Seed = 1
	cfg.Traffic = &emu.Traffic{Pattern: "incast"}
	cfg.PFC = "on"
	cfg.Buffer.XOFF = 20000
	path := filepath.Join(t.TempDir(), "incast.pcapng")
	f, err := os.Create(path)
	require.NoError(t, err)
	cfg.Capture = f
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	require.True(t, res.Exact)
	return path
}

// readCapture reads every record and what the interfaces state.
func readCapture(t *testing.T, path string) ([]pcapio.Record, []pcapio.Interface) {
	t.Helper()
	r, err := pcapio.Open(path)
	require.NoError(t, err)
	defer r.Close()
	recs, _, err := r.All()
	require.NoError(t, err)
	return recs, r.InterfaceLinks()
}

// writeCapture writes recs again, with the same interfaces.
func writeCapture(t *testing.T, path string, recs []pcapio.Record, ifaces []pcapio.Interface) {
	t.Helper()
	f, err := os.Create(path)
	require.NoError(t, err)
	w, err := pcapio.NewInterfaceWriter(f, "", ifaces...)
	require.NoError(t, err)
	for _, r := range recs {
		require.NoError(t, w.WriteIndex(r.Info.InterfaceIndex, r.Info.Timestamp.UnixNano(), r.Data, r.Comments...))
	}
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())
}

// pfcFrames are the indices of the capture's PFC frames (EtherType 0x8808,
// opcode 0x0101) and the quanta each gives priority 0.
func pfcFrames(recs []pcapio.Record) (idx []int, q0 []uint16) {
	for i, r := range recs {
		b := r.Data
		if len(b) >= 20 && binary.BigEndian.Uint16(b[12:]) == 0x8808 && binary.BigEndian.Uint16(b[14:]) == 0x0101 {
			idx = append(idx, i)
			q0 = append(q0, binary.BigEndian.Uint16(b[18:]))
		}
	}
	return idx, q0
}

func TestEmulatorPFCCaptureJudgedAlone(t *testing.T) {
	path := pfcRunCapture(t)
	recs, ifaces := readCapture(t, path)
	for _, in := range ifaces {
		assert.Equal(t, uint64(emuRate), in.Speed, in.Name)
		assert.True(t, in.HasDelay, in.Name)
		assert.Equal(t, emuLatency, in.Delay, in.Name)
	}
	idx, _ := pfcFrames(recs)
	require.NotEmpty(t, idx, "the run paused nobody")

	rep, err := capcheck.CheckFile(path, capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Violations)
	assert.Empty(t, rep.Unchecked)
	assert.True(t, rep.Conforms)
	assert.Equal(t, len(idx), rep.PFCFrames)
	assert.Equal(t, len(idx), rep.PFCPauses, "every pause judged: the capture gives the rate")

	// Without the capture's statements (a flag-less check of a capture
	// that has none) nothing is judged; a rate given by flag still is,
	// and the in-flight tolerance then stands in for the delay.
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names(ifaces)})
	assert.Zero(t, rep.PFCPauses)
	assert.NotEmpty(t, rep.Unchecked)
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names(ifaces), LinkRate: emuRate})
	assert.Equal(t, len(idx), rep.PFCPauses)
	assert.True(t, rep.Conforms)

	// The stated delay is what makes the judgement exact: a flag that
	// says the link has (almost) none sees the frames that were on the
	// way when each pause arrived as sent inside it.
	rep, err = capcheck.CheckFile(path, capcheck.CheckOptions{LinkDelay: time.Nanosecond})
	require.NoError(t, err)
	assert.False(t, rep.Conforms)
	for _, v := range rep.Violations {
		assert.Equal(t, capcheck.RulePFCPausedSend, v.Rule, "%v", v)
	}
}

func names(ifaces []pcapio.Interface) []string {
	out := make([]string, len(ifaces))
	for i, in := range ifaces {
		out[i] = in.Name
	}
	return out
}

// lineNs is how long n captured bytes and the 24 bytes of preamble, FCS
// and inter-frame gap take at rate, rounded up.
func lineNs(n int, rate float64) int64 { return int64(math.Ceil(float64(n+24) * 8e9 / rate)) }

// firstSentAfter is the index of the first IPv4 frame on interface iface
// after record from that must have started after t: its capture time less
// its line time less the link's propagation delay (the test's own
// configuration, not the capture's statement) is after t.
func firstSentAfter(recs []pcapio.Record, from, iface int, t int64) int {
	for i := from + 1; i < len(recs); i++ {
		r := recs[i]
		if r.Info.InterfaceIndex != iface || binary.BigEndian.Uint16(r.Data[12:]) != 0x0800 {
			continue
		}
		if r.Info.Timestamp.UnixNano()-lineNs(len(r.Data), emuRate)-emuLatency.Nanoseconds() > t {
			return i
		}
	}
	return -1
}

// A pause whose quanta were enlarged (an XON, quanta 0, made the longest
// pause, 65535 quanta = 335.5 µs at 100 Gb/s) no longer ends the XOFF
// before it: the pause runs on from the XOFF's arrival (a pause arriving
// while paused reloads the timer, IEEE 802.1Qbb), and the frames the
// sender sent once the real XON let it go are sent inside it.
// pfc-paused-send flags the first of them by its frame number, naming
// the XOFF that began the pause.
func TestEmulatorPFCCaptureEnlargedPause(t *testing.T) {
	path := pfcRunCapture(t)
	recs, ifaces := readCapture(t, path)
	idx, q0 := pfcFrames(recs)
	k, xoff := -1, -1
	for j := range idx {
		if q0[j] == 0 && j > 0 {
			k = idx[j] // the first XON
			for i := j - 1; i >= 0; i-- {
				if recs[idx[i]].Info.InterfaceIndex == recs[k].Info.InterfaceIndex {
					require.Positive(t, q0[i], "an XON follows an XOFF")
					xoff = idx[i]
					break
				}
			}
			break
		}
	}
	require.GreaterOrEqual(t, xoff, 0, "no XOFF and XON")
	binary.BigEndian.PutUint16(recs[k].Data[18:], 0xFFFF)
	// The paused direction is the other one of the pauses' link: X-out's
	// X-in.
	paused := -1
	for i, in := range ifaces {
		if in.Name == trimOut(ifaces[recs[k].Info.InterfaceIndex].Name)+"-in" {
			paused = i
		}
	}
	require.GreaterOrEqual(t, paused, 0)
	want := firstSentAfter(recs, xoff, paused, recs[xoff].Info.Timestamp.UnixNano())
	require.Greater(t, want, k, "the sender sent nothing between the XOFF and the XON")
	require.Less(t, recs[want].Info.Timestamp.UnixNano(), recs[k].Info.Timestamp.UnixNano()+65535*512*1e9/int64(emuRate))

	bad := filepath.Join(t.TempDir(), "enlarged.pcapng")
	writeCapture(t, bad, recs, ifaces)
	rep, err := capcheck.CheckFile(bad, capcheck.CheckOptions{})
	require.NoError(t, err)
	require.False(t, rep.Conforms)
	var got []capcheck.Violation
	for _, v := range rep.Violations {
		if v.Rule == capcheck.RulePFCPausedSend {
			got = append(got, v)
		}
	}
	require.NotEmpty(t, got, "%v", rep.Violations)
	assert.Equal(t, want+1, got[0].Frame, "Wireshark's number of the first frame sent inside the enlarged pause: %v", got[0])
	assert.Equal(t, ifaces[paused].Name, got[0].Interface)
	assert.Contains(t, got[0].Detail, "(PAUSE/PFC frame "+strconv.Itoa(xoff+1)+" on ")
}

// A frame of the paused priority moved into a pause (its capture time set
// to the middle of the first pause of its direction, far beyond what was
// on the way when it arrived) is flagged by its frame number.
func TestEmulatorPFCCaptureFrameMovedIntoPause(t *testing.T) {
	path := pfcRunCapture(t)
	recs, ifaces := readCapture(t, path)
	idx, q0 := pfcFrames(recs)
	require.Positive(t, q0[0], "the first PFC frame is an XOFF")
	xoff := recs[idx[0]]
	var xon *pcapio.Record
	for j := 1; j < len(idx); j++ {
		if r := &recs[idx[j]]; r.Info.InterfaceIndex == xoff.Info.InterfaceIndex {
			require.Zero(t, q0[j], "the XOFF's next frame on its link is an XON")
			xon = r
			break
		}
	}
	require.NotNil(t, xon)
	on, off := xoff.Info.Timestamp.UnixNano(), xon.Info.Timestamp.UnixNano()
	// The window must hold a line time of the frame, the propagation
	// delay and some margin.
	require.Greater(t, off-on, 4*lineNs(1100, emuRate)+emuLatency.Nanoseconds(), "pause too short to move a frame into")
	paused := -1
	for i, in := range ifaces {
		if in.Name == trimOut(ifaces[xoff.Info.InterfaceIndex].Name)+"-in" {
			paused = i
		}
	}
	require.GreaterOrEqual(t, paused, 0)
	// The first data frame the sender sent after the XON, moved back to
	// the middle of the pause.
	m := firstSentAfter(recs, idx[0], paused, off)
	require.Positive(t, m)
	mid := on + emuLatency.Nanoseconds() + lineNs(len(recs[m].Data), emuRate) + (off-on-emuLatency.Nanoseconds())/2
	recs[m].Info.Timestamp = time.Unix(0, mid).UTC()

	bad := filepath.Join(t.TempDir(), "moved.pcapng")
	writeCapture(t, bad, recs, ifaces)
	rep, err := capcheck.CheckFile(bad, capcheck.CheckOptions{})
	require.NoError(t, err)
	require.False(t, rep.Conforms)
	var got []capcheck.Violation
	for _, v := range rep.Violations {
		if v.Rule == capcheck.RulePFCPausedSend {
			got = append(got, v)
		}
	}
	require.Len(t, got, 1, "%v", rep.Violations)
	assert.Equal(t, m+1, got[0].Frame, "%v", got[0])
	assert.Equal(t, ifaces[paused].Name, got[0].Interface)
	assert.Contains(t, got[0].Detail, "(PAUSE/PFC frame "+strconv.Itoa(idx[0]+1)+" on ")
}

func trimOut(name string) string { return strings.TrimSuffix(name, "-out") }
