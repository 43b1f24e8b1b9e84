package capcheck_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
)

// Issue 33's blame captures, built by scapy as a NIC's traffic seen at the
// responder's port. The wrong side must be blamed: a requester whose
// packet was lost before the capture is never reported for the gap, and a
// responder whose NAK names the wrong PSN is (nak-psn).

// blameWrongNAK: QP 0x12 (answered on 0x11) sends 100..105; PSN 102 is
// lost before the capture; the responder's NAK names PSN 104 (a PSN it
// received; the first it misses is 102). The requester obeys the NAK
// (104, 105), then times out and resends 102..105, which are ACKed.
// Frames from t0: 100 101 103 104 105 (1-5), NAK 104 (6), 104 105 (7-8),
// 102..105 (9-12), ACK 105 (13).
func blameWrongNAK(t0 int) []sf {
	fs := write(t0, 0x12, 100, 101, 103, 104, 105)
	fs[0].Op, fs[0].Pkts = "first", 6
	fs = append(fs, ack(t0+6, 0x11, 104, synNAK))
	fs = append(fs, write(t0+7, 0x12, 104, 105)...)
	fs = append(fs, write(t0+100, 0x12, seq(102, 105)...)...)
	return append(fs, ack(t0+110, 0x11, 105, synACK))
}

// blameProof: QP 0x22 (answered on 0x21) between the same hosts, PSNs
// 5000..5003, PSN 5002 lost before the capture and NAKed right: proof that
// the capture is on the responder's side of a loss. 7 frames.
func blameProof(t0 int) []sf {
	fs := write(t0, 0x22, 5000, 5001, 5003)
	fs[0].Op, fs[0].Pkts = "first", 4
	fs = append(fs, ack(t0+3, 0x21, 5002, synNAK))
	fs = append(fs, write(t0+4, 0x22, 5002, 5003)...)
	return append(fs, ack(t0+8, 0x21, 5003, synACK))
}

// TestScapyBlameWrongNAK: the scenario, a gap at PSN 102 upstream
// and a responder whose NAK names the wrong PSN, with a second QP on the
// same interface proving the receiver's side: one nak-psn against the
// responder (the NAK, frame 13), no psn-order against the requester, by
// default and with --vantage receiver. Without the second QP the gap and
// the NAK after it are evidence enough; the inference names the
// alternative reading and --vantage.
func TestScapyBlameWrongNAK(t *testing.T) {
	both := scapyCapture(t, "blame_both", cat(blameProof(0), blameWrongNAK(20)))
	for _, v := range []capcheck.Vantage{capcheck.VantageAuto, capcheck.VantageReceiver, capcheck.VantageTap} {
		rep, err := capcheck.CheckFile(both, capcheck.CheckOptions{Vantage: v})
		require.NoError(t, err)
		require.Len(t, rep.Violations, 1, "vantage %v: %v", v, rep.Violations)
		got := rep.Violations[0]
		assert.Equal(t, capcheck.RuleNAKPSN, got.Rule, "vantage %v", v)
		assert.Equal(t, 7+6, got.Frame, "the wrong NAK")
		assert.EqualValues(t, 0x11, got.QP, "the responder's NAK")
		assert.EqualValues(t, 104, got.PSN)
		assert.Contains(t, got.Detail, "PSN 102")
	}

	alone := scapyCapture(t, "blame_alone", blameWrongNAK(0))
	rep, err := capcheck.CheckFile(alone, capcheck.CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1, "%v", rep.Violations)
	assert.Equal(t, capcheck.RuleNAKPSN, rep.Violations[0].Rule)
	assert.Equal(t, 6, rep.Violations[0].Frame)
	require.Len(t, rep.Inferences, 1, "%v", rep.Inferences)
	in := rep.Inferences[0]
	assert.Contains(t, in, "PSN 102")
	assert.Contains(t, in, "--vantage sender", "the alternative reading, and how to ask for it")
	assert.Contains(t, in, "psn-order")

	// Declared the requester's own capture, the requester is judged: it
	// skipped 102, and the NAK is still wrong.
	rep, err = capcheck.CheckFile(alone, capcheck.CheckOptions{Vantage: capcheck.VantageSender})
	require.NoError(t, err)
	rules := map[string]int{}
	for _, v := range rep.Violations {
		rules[v.Rule]++
	}
	assert.Equal(t, 1, rules[capcheck.RuleNAKPSN], "%v", rep.Violations)
	assert.Positive(t, rules[capcheck.RulePSNOrder], "%v", rep.Violations)
}

// blameSilentGap: QP 0x12 sends 100, 101, 103, 104 (102 lost before the
// capture); no NAK is seen (the responder's NAK was lost on the way back),
// and the requester times out and resends 102..104, which are ACKed.
// 9 frames.
func blameSilentGap(t0 int) []sf {
	fs := write(t0, 0x12, 100, 101, 103, 104)
	fs[0].Op, fs[0].Pkts = "first", 5
	fs = append(fs, write(t0+100, 0x12, seq(102, 104)...)...)
	return append(fs, ack(t0+110, 0x11, 104, synACK), ack(t0+111, 0x11, 104, synACK))
}

// TestScapyBlameSharedVantage: a QP whose own frames prove nothing (a gap,
// then a timeout retransmission) is taken as seen at the receiver when
// another QP between the same hosts on the same interface proved that
// side: its gap is a loss before the capture, not a skip. Alone, the
// same frames read as the requester's own capture (a skip).
func TestScapyBlameSharedVantage(t *testing.T) {
	rep, err := capcheck.CheckFile(scapyCapture(t, "shared", cat(blameProof(0), blameSilentGap(20))), capcheck.CheckOptions{})
	require.NoError(t, err)
	assert.Empty(t, rep.Violations)
	text := strings.Join(rep.Inferences, "\n")
	assert.Contains(t, text, "qp 0x000012")
	assert.Contains(t, text, "qp 0x000022", "the proof is named")

	rep, err = capcheck.CheckFile(scapyCapture(t, "shared_alone", blameSilentGap(0)), capcheck.CheckOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Violations, 1, "%v", rep.Violations)
	assert.Equal(t, capcheck.RulePSNOrder, rep.Violations[0].Rule)
}

// TestCheckBlameWrongNAKFrames: the same scenario built with the frames
// package (SEND ONLY packets, a pcapng interface named like a mirror
// port), QP 0x22's clean proof first: the wrong NAK of QP 0x12's
// responder is the one violation, the requester's gap at PSN 102 none.
func TestCheckBlameWrongNAKFrames(t *testing.T) {
	c := chkNewCapture("mirror0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	b := chkNewConn(t, 1, 2, 0x22, 0x21)
	for _, p := range []uint32{5000, 5001, 5003} {
		c.add("mirror0", us, b.data(p, false)) // 0-2: 5002 lost upstream
	}
	c.add("mirror0", us, b.nak(5002))         // 3: right
	c.add("mirror0", us, b.data(5002, false)) // 4
	c.add("mirror0", us, b.data(5003, true))  // 5
	c.add("mirror0", us, b.ack(5003))         // 6
	for _, p := range []uint32{100, 101, 103, 104, 105} {
		c.add("mirror0", us, a.data(p, false)) // 7-11: 102 lost upstream
	}
	c.add("mirror0", us, a.nak(104)) // 12: wrong, 102 is missing
	for p := uint32(102); p <= 105; p++ {
		c.add("mirror0", 100*us, a.data(p, p == 105)) // 13-16: timeout resend
	}
	c.add("mirror0", us, a.ack(105)) // 17
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []chkWant{{"nak-psn", 12, 104}}, chkViolations(rep))
	assert.Equal(t, "violations", rep.Verdict)
}
