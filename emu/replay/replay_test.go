package replay_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/replay"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/stretchr/testify/require"
)

// Replaying a capture without interface names gives ports to stations by
// first appearance; the fabric then learns every MAC (no static host
// entries), so a capture whose first frame is rank 1's replays whole.
func TestReplayLearnsMACsByFirstAppearance(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Seed = 3, 32<<10, 4, 2
	var buf bytes.Buffer
	cfg.Capture = &buf
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	rd, err := pcapio.NewReader("run", &buf)
	require.NoError(t, err)
	var in []pcapio.Record
	for {
		r, err := rd.Next()
		if err != nil {
			break
		}
		if name := rd.Interfaces()[r.Info.InterfaceIndex]; strings.HasSuffix(name, "-in") && !pcapio.IsGhost(r.Comments) {
			r.Info.InterfaceIndex = 0
			in = append(in, r)
		}
	}
	// Rank 1's first frame first: ports by first appearance are not ranks.
	for i, r := range in {
		if r.Data[11] != in[0].Data[11] {
			in[0], in[i] = in[i], in[0]
			break
		}
	}
	rep, err := replay.ThroughSwitch(in, nil, replay.Options{Workers: 3, MsgLen: 4, MTU: cfg.MTU})
	require.NoError(t, err)
	require.Zero(t, rep.Switch.Filtered, "no frame is sent back out the port it came in by")
	require.Greater(t, rep.Switch.Aggregations, uint64(0))
	require.Equal(t, res.Switch.Aggregations, rep.Switch.Aggregations)
}
