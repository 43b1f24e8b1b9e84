package replay_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/replay"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/pcapio"
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
	require.Greater(t, netreduce.StatsOf(rep.Switch).Aggregations, uint64(0))
	require.Equal(t, netreduce.StatsOf(res.Switch).Aggregations, netreduce.StatsOf(rep.Switch).Aggregations)
}

// Replaying a run's switch ingress (the portR-in frames) reproduces the
// switch's output byte for byte, frame for frame, even when faults
// dropped frames on their way in: those are marked "not delivered" in the
// capture and are not fed to the switch.
func TestReplayReproducesTheSwitchUnderFaults(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.TensorBytes, cfg.MsgLen, cfg.Seed, cfg.Timeout = 4, 96<<10, 8, 3, 8
	for _, s := range []string{"drop port=1 dir=in class=data nth=40", "drop port=2 dir=in class=ack nth=3", "drop port=0 dir=in class=data nth=77"} {
		ev, err := faults.Parse(s)
		require.NoError(t, err)
		cfg.Events = append(cfg.Events, ev)
	}
	var buf bytes.Buffer
	cfg.Capture = &buf
	res, err := emu.Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	require.Equal(t, uint64(3), res.Faults.Dropped)
	rd, err := pcapio.NewReader("run", bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	recs, names, err := rd.All()
	require.NoError(t, err)
	out := func(recs []pcapio.Record, names []string) map[string][][]byte {
		m := map[string][][]byte{}
		for _, r := range recs {
			if n := names[r.Info.InterfaceIndex]; strings.HasSuffix(n, "-out") && !pcapio.IsGhost(r.Comments) {
				m[n] = append(m[n], r.Data)
			}
		}
		return m
	}
	var replayed bytes.Buffer
	rep, err := replay.ThroughSwitch(recs, names, replay.Options{Out: &replayed})
	require.NoError(t, err)
	assert.Equal(t, 3, rep.NotDelivered)
	rd2, err := pcapio.NewReader("replay", bytes.NewReader(replayed.Bytes()))
	require.NoError(t, err)
	recs2, names2, err := rd2.All()
	require.NoError(t, err)
	want, got := out(recs, names), out(recs2, names2)
	require.Len(t, got, 4)
	for port, frames := range want {
		require.Equal(t, len(frames), len(got[port]), port)
		for i := range frames {
			require.True(t, bytes.Equal(frames[i], got[port][i]), "%s frame %d differs", port, i)
		}
	}
}
