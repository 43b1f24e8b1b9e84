package roce_test

import (
	"bytes"
	"flag"
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

var update = flag.Bool("update", false, "rewrite golden captures in testdata/")

const gbnCapture = "../testdata/roce_gbn_drop_psn104.pcapng"

// verdictNames are the emulator's fault comments (pcapio.FaultComment), so
// that Wireshark and inaemu check read the harness's capture as they read
// a run's: a dropped frame is written where it was sent, not delivered.
var verdictNames = [...]string{
	pass:    "",
	drop:    pcapio.FaultComment("drop", "", 0, true),
	dup:     pcapio.FaultComment("duplicate", "", 0, false),
	corrupt: pcapio.FaultComment("corrupt", "", 0, false),
	hold:    pcapio.FaultComment("hold", "", 0, false),
}

// writeCapture writes every frame the harness sent, on interface "hostA"
// or "hostB" (the sender), at its virtual send time, with the fault as a
// packet comment.
func writeCapture(t *testing.T, h *harness) []byte {
	var buf bytes.Buffer
	w, err := pcapio.NewWriter(&buf, "hostA", "hostB")
	require.NoError(t, err)
	for _, e := range h.log {
		var c []string
		if e.verdict != pass {
			c = append(c, verdictNames[e.verdict])
		}
		require.NoError(t, w.Write([]string{"hostA", "hostB"}[e.dir], int64(e.at/time.Nanosecond), e.frame, c...))
	}
	require.NoError(t, w.Flush())
	return buf.Bytes()
}

// gbnScenario: a 12-packet WRITE at MTU 256 whose PSN 104 is lost once.
func gbnScenario(t *testing.T) *harness {
	h := newHarness(t, defaultCfg(), defaultCfg(), 1<<16)
	h.fault = once(0, 104, drop)
	postWrite(t, h, 1, pattern(12*256, 3), 0)
	h.run(time.Second)
	return h
}

// TestGoBackNCapture keeps the go-back-N capture of the harness in
// testdata (open it in Wireshark) and checks it: the run is reproducible
// bit for bit, and the file itself shows the go-back-N rules — read back
// with the pcap reader and the frame view, not from the harness's memory.
func TestGoBackNCapture(t *testing.T) {
	got := writeCapture(t, gbnScenario(t))
	if *update {
		require.NoError(t, os.WriteFile(gbnCapture, got, 0o644))
	}
	want, err := os.ReadFile(gbnCapture)
	require.NoError(t, err, "run go test ./roce -run TestGoBackNCapture -update to create it")
	assert.True(t, bytes.Equal(want, got), "the same scenario must give the same capture bytes")
	assert.True(t, bytes.Equal(got, writeCapture(t, gbnScenario(t))), "two runs differ")

	recs, err := pcapio.ReadAll(filepath.Clean(gbnCapture))
	require.NoError(t, err)
	var dataPSNs []uint32
	var naks []uint32
	nakAt := -1
	dropComments := 0
	for i, r := range recs {
		var v frames.View
		require.NoError(t, v.Parse(r.Data))
		require.True(t, v.ICRCOK(), "frame %d", i)
		if len(r.Comments) > 0 {
			assert.Equal(t, []string{"inaemu: fault=drop (not delivered)"}, r.Comments)
			assert.Equal(t, uint32(104), v.PSN())
			dropComments++
		}
		if v.Opcode() == wire.Acknowledge {
			if v.AETH().Syndrome() == wire.SyndromeNAKPSNSeqErr {
				naks = append(naks, v.PSN())
				nakAt = len(dataPSNs)
			}
			continue
		}
		dataPSNs = append(dataPSNs, v.PSN())
	}
	assert.Equal(t, 1, dropComments)
	assert.Equal(t, []uint32{104}, naks, "one NAK, naming the lost PSN")
	require.Positive(t, nakAt)
	// Retransmission after the NAK restarts at 104 and runs to the end.
	var after []uint32
	for _, p := range dataPSNs[nakAt:] {
		if len(after) > 0 || p == 104 {
			after = append(after, p)
		}
	}
	assert.Equal(t, seqPSN(104, 8), after)
}
