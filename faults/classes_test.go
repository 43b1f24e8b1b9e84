package faults_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// TestPauseAndCNPClasses: class=pause matches the 802.1Qbb PFC frames (a
// MAC Control frame, EtherType 0x8808) and nothing else, class=cnp the
// RoCEv2 CNPs (BTH opcode 0x81) and nothing else; data, ack and nak
// match neither, and any matches both, as before the classes existed.
func TestPauseAndCNPClasses(t *testing.T) {
	tr := newTraffic(t)
	pause := frames.AppendPFC(nil, [6]byte{2, 0x1a, 0xe1, 0, 0, 1}, 1<<3, [8]uint16{3: 0xFFFF})
	resume := frames.AppendPFC(nil, [6]byte{2, 0x1a, 0xe1, 0, 0, 1}, 1<<3, [8]uint16{})
	n, err := tr.rsp.Build(tr.buf, &frames.Packet{Opcode: wire.CNP, BECN: true, Payload: make([]byte, 16)})
	require.NoError(t, err)
	cnp := append([]byte(nil), tr.buf[:n]...)
	// The frames in order, named: what each spec lets through.
	names := []string{"data", "pause", "ack", "cnp", "resume", "nak"}
	mixed := [][]byte{tr.data(1), pause, tr.ack(1, wire.SyndromeACK), cnp, resume, tr.ack(2, wire.SyndromeNAKPSNSeqErr)}
	for _, c := range []struct {
		spec string
		want []string // the frames that pass
	}{
		{"drop class=pause", []string{"data", "ack", "cnp", "nak"}},
		{"drop class=pause nth=2", []string{"data", "pause", "ack", "cnp", "nak"}}, // the resume
		{"drop class=cnp", []string{"data", "pause", "ack", "resume", "nak"}},
		{"drop class=data", []string{"pause", "ack", "cnp", "resume", "nak"}},
		{"drop class=ack", []string{"data", "pause", "cnp", "resume", "nak"}},
		{"drop class=nak", []string{"data", "pause", "ack", "cnp", "resume"}},
		{"drop class=any nth=2", []string{"data", "ack", "cnp", "resume", "nak"}},
		{"drop class=any every=2", []string{"data", "ack", "resume"}},
	} {
		t.Run(c.spec, func(t *testing.T) {
			st := faults.NewStage(0, faults.DirIn, faults.Netem{}, mustEvents(t, c.spec), 1)
			var got []string
			for i, f := range mixed {
				st.Process(append([]byte(nil), f...), func(out []byte, _ time.Duration, _ faults.Note, _ *faults.Event) {
					got = append(got, names[i])
				})
			}
			assert.Equal(t, c.want, got)
		})
	}
	// A corrupted pause fails its FCS at the receiving MAC: the stage
	// flips a bit somewhere in it (it has no ICRC to keep valid).
	st := faults.NewStage(0, faults.DirOut, faults.Netem{}, mustEvents(t, "corrupt class=pause nth=1"), 7)
	var out []byte
	st.Process(append([]byte(nil), pause...), func(f []byte, _ time.Duration, n faults.Note, _ *faults.Event) {
		out = append([]byte(nil), f...)
		assert.NotZero(t, n&faults.NoteCorrupt)
	})
	require.Len(t, out, len(pause))
	assert.NotEqual(t, pause, out)

	ev, err := faults.Parse("delay=2ms link=leaf0-spine0 class=pause nth=3")
	require.NoError(t, err)
	assert.Equal(t, faults.ClassPause, ev.Class)
	assert.Equal(t, "pause", ev.Class.String())
	ev, err = faults.Parse("dup port=1 dir=in class=cnp")
	require.NoError(t, err)
	assert.Equal(t, faults.ClassCNP, ev.Class)
	assert.Equal(t, "cnp", ev.Class.String())
	_, err = faults.Parse("drop class=pfc")
	require.ErrorContains(t, err, "class must be data, ack, nak, cnp, pause or any")
}
