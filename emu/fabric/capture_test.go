package fabric

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// captureLinks builds a fabric with a capture and reads back what its
// interfaces state of their links (the capture has no frame: its blocks
// are written when the fabric is made).
func captureLinks(t *testing.T, cfg Config) []pcapio.Interface {
	t.Helper()
	var buf bytes.Buffer
	cfg.Capture = &buf
	f, err := New(cfg)
	require.NoError(t, err)
	require.NoError(t, f.CloseCapture())
	r, err := pcapio.NewReader("capture", &buf)
	require.NoError(t, err)
	_, err = r.Next()
	require.Error(t, err) // no frame: io.EOF
	return r.InterfaceLinks()
}

// A fabric with congestion settings states every interface's link in its
// capture: the rate the topology gives the link, exactly (25.78125 Gb/s
// is 25GBASE-R's signalling rate, not a whole number of picoseconds per
// byte), and its propagation delay, per link of a topology whose links
// differ (hosts' links 100 Gb/s and 1 µs, leaf-spine uplinks 25.78125 Gb/s
// and 1.5 µs). A fabric without them states nothing.
func TestCaptureStatesLinks(t *testing.T) {
	host := topo.LinkParams{Rate: 100e9, Latency: time.Microsecond}
	up := topo.LinkParams{Rate: 25.78125e9, Latency: 1500 * time.Nanosecond}
	tp, err := topo.SpineLeaf(2, 1, 1, host, up)
	require.NoError(t, err)
	cong := Config{Topology: tp, Buffer: switching.BufferConfig{Lossless: 1 << 3}}
	links := captureLinks(t, cong)
	require.Len(t, links, 2*len(tp.Links))
	ups := 0
	for _, in := range links {
		want := pcapio.Interface{Name: in.Name, Speed: 100_000_000_000, Delay: time.Microsecond, HasDelay: true}
		if strings.Contains(in.Name, "spine") {
			want.Speed, want.Delay = 25_781_250_000, 1500*time.Nanosecond
			ups++
		}
		assert.Equal(t, want, in)
	}
	assert.Equal(t, 4, ups, "two uplinks, both directions")
	assert.Equal(t, tp.DirectionNames(), names(links))

	plain := cong
	plain.Buffer = switching.BufferConfig{}
	for _, in := range captureLinks(t, plain) {
		assert.Equal(t, pcapio.Interface{Name: in.Name}, in)
	}
}

func names(ifaces []pcapio.Interface) []string {
	out := make([]string, len(ifaces))
	for i, in := range ifaces {
		out[i] = in.Name
	}
	return out
}
