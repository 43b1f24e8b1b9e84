package emu_test

import (
	"bytes"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/pcapio"
)

// TestCaptureExtraDelayGivesSendOrder: a frame a fault delayed carries its
// extra delay in its comment, so arrival time less extra delay is when it
// left the sender (plus the link's constant propagation). Checked by
// physics: put back in that order, each link direction's frames must be
// at least one serialization time apart, as a transmitter sends them;
// the jittered arrival times are not (so the check has teeth).
func TestCaptureExtraDelayGivesSendOrder(t *testing.T) {
	b, _ := scenarioCapture(t, `
workers: 4
tensor: 256KiB
seed: 7
netem: "delay 5us 3us"
faults: ["delay=40us port=2 dir=in class=data nth=5"]
`)
	rd, err := pcapio.NewReader("capture", bytes.NewReader(b))
	require.NoError(t, err)
	recs, _, err := rd.All()
	require.NoError(t, err)

	const bitsPerNs = 10.0 // the default 10G links
	type sent struct{ at, wire int64 }
	byIface := map[int][]sent{}
	arrivalsTooClose, delayed := 0, 0
	last := map[int]int64{}
	for _, r := range recs {
		f, _ := pcapio.FaultOf(r.Comments)
		if f.Ghost {
			continue
		}
		if f.ExtraDelay > 0 {
			delayed++
		}
		ts := r.Info.Timestamp.UnixNano()
		wire := int64(float64(len(r.Data)*8) / bitsPerNs)
		if p, seen := last[r.Info.InterfaceIndex]; seen && ts-p < wire {
			arrivalsTooClose++
		}
		last[r.Info.InterfaceIndex] = ts
		byIface[r.Info.InterfaceIndex] = append(byIface[r.Info.InterfaceIndex], sent{ts - f.ExtraDelay.Nanoseconds(), wire})
	}
	require.Greater(t, delayed, 1000)
	require.Greater(t, arrivalsTooClose, 10, "jitter must bring arrivals closer than a serialization time, or this test proves nothing")
	for iface, ss := range byIface {
		sort.SliceStable(ss, func(i, j int) bool { return ss[i].at < ss[j].at })
		for i := 1; i < len(ss); i++ {
			require.GreaterOrEqual(t, ss[i].at-ss[i-1].at, ss[i].wire-1,
				"interface %d: frames %d and %d would have overlapped on the wire (%v apart)", iface, i-1, i, time.Duration(ss[i].at-ss[i-1].at))
		}
	}
}
