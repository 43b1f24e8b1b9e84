package conformance_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// TestCheckVerbsWrongReadPSN: one READ response of a clean verbs READ
// run, its PSN moved out of every READ's range where the requester
// receives it (its ICRC made right again), is caught as read-psn at that
// frame, and nothing else is reported. (verbs_check_test.go holds the
// same runs, faulted, to no false violation.)
func TestCheckVerbsWrongReadPSN(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Mode, cfg.Verb, cfg.Workers, cfg.TensorBytes, cfg.MTU, cfg.MsgLen, cfg.Seed = emu.Verbs, emu.VerbRead, 3, 64<<10, 1024, 4, 1
	capture := ckCapture(t, cfg, "")
	r, err := pcapio.NewReader("run", bytes.NewReader(capture))
	require.NoError(t, err)
	recs, _, err := r.All()
	require.NoError(t, err)
	var v frames.View
	at := -1
	for i, rec := range recs {
		if v.Parse(rec.Data) == nil && v.Opcode() == wire.ReadResponseLast && len(rec.Comments) == 0 {
			at = i
			break
		}
	}
	require.GreaterOrEqual(t, at, 0, "a READ RESPONSE LAST")
	orig := append([]byte(nil), recs[at].Data...)
	// The same bytes cross the responder's link and then the requester's:
	// change them where the requester receives them, the last time.
	for i := at + 1; i < len(recs); i++ {
		if bytes.Equal(recs[i].Data, orig) {
			at = i
		}
	}
	bad := append([]byte(nil), orig...)
	require.NoError(t, v.Parse(bad))
	v.BTH().SetPSN(wire.PSNAdd(v.PSN(), 5000))
	v.SetICRC()
	off := bytes.LastIndex(capture, orig)
	capture = append(append(append([]byte(nil), capture[:off]...), bad...), capture[off+len(orig):]...)
	rep := ckReport(t, capture)
	require.Len(t, rep.Violations, 1, "%v", rep.Violations)
	assert.Equal(t, "read-psn", rep.Violations[0].Rule)
	assert.Equal(t, at+1, rep.Violations[0].Frame)
}
