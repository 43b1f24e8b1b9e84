package graphs

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sweepJSON = `{"workers":8,"rows":[
 {"mode":"netreduce","link":"10G","netem":"","algbw_gbps":9.2,"busbw_gbps":16.1},
 {"mode":"netreduce","link":"10G","netem":"loss 0.1%","algbw_gbps":0.44,"busbw_gbps":0.77},
 {"mode":"ring","link":"100G","netem":"loss 1% reorder 5% gap 3","algbw_gbps":0.04,"busbw_gbps":0.07}]}
{"mode":"ring","workers":4,"bytes":1048576,"algbw_gbps":5.1,"busbw_gbps":7.65,"exact":true}`

// Sweep rows give a sample each (mode and link as the series, loss from
// the netem setting, the link rate in Gbit/s); a run object gives one with
// its numeric fields.
func TestReadResults(t *testing.T) {
	s, err := ReadResults("r.json", strings.NewReader(sweepJSON))
	require.NoError(t, err)
	require.Len(t, s, 4)
	assert.Equal(t, "netreduce 10G", s[0].Series)
	assert.Equal(t, map[string]float64{"loss": 0, "link": 10}, s[0].Params)
	assert.Equal(t, 0.1, s[1].Params["loss"])
	assert.Equal(t, map[string]float64{"loss": 1, "link": 100}, s[2].Params)
	assert.Equal(t, 0.04, s[2].AlgBWGbps)
	assert.Equal(t, "ring", s[3].Series)
	assert.Equal(t, 4.0, s[3].Params["workers"])
	assert.Equal(t, 7.65, s[3].BusBWGbps)
	for _, bad := range []string{"", "not json", `{"x":1}`, `{"rows":[{"link":"10G"}]}`} {
		_, err := ReadResults("bad.json", strings.NewReader(bad))
		assert.ErrorContains(t, err, "bad.json", bad)
	}
}

// Results that carry only the GB/s keys (algbw_gbytes_per_s, as
// nccl-tests prints) give the same samples in Gbit/s.
func TestReadResultsInGBps(t *testing.T) {
	s, err := ReadResults("r.json", strings.NewReader(`{"rows":[{"mode":"ring","link":"10G","netem":"","algbw_gbytes_per_s":1.15,"busbw_gbytes_per_s":2}]}
{"mode":"ring","workers":4,"algbw_gbytes_per_s":0.5,"busbw_gbytes_per_s":0.75}`))
	require.NoError(t, err)
	require.Len(t, s, 2)
	assert.InDelta(t, 9.2, s[0].AlgBWGbps, 1e-12)
	assert.InDelta(t, 16, s[0].BusBWGbps, 1e-12)
	assert.InDelta(t, 4, s[1].AlgBWGbps, 1e-12)
	assert.InDelta(t, 6, s[1].BusBWGbps, 1e-12)
}

func TestWriteSweep(t *testing.T) {
	s, err := ReadResults("r.json", strings.NewReader(sweepJSON))
	require.NoError(t, err)
	var b bytes.Buffer
	require.NoError(t, WriteSweep(&b, s[:3], SweepOptions{X: "loss", Title: "goodput"}))
	assert.Contains(t, b.String(), "<svg")
	assert.Contains(t, b.String(), "netreduce 10G")
	b.Reset()
	require.NoError(t, WriteSweep(&b, s[:3], SweepOptions{X: "link", BusBW: true, LogX: true}))
	assert.Contains(t, b.String(), "busbw")
	assert.ErrorContains(t, WriteSweep(&b, s, SweepOptions{X: "workers"}), "no such parameter")
	assert.ErrorContains(t, WriteSweep(&b, s[1:2], SweepOptions{X: "loss", LogX: false, Format: "gif"}), "gif")
}
