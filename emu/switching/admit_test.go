package switching_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/switching"
)

// TestEmptyIngressAdmitsAJumboFrame: a tight pool's dynamic XOFF can be
// below one frame. Two ports, headroom 3072 B each for lossless priority
// 3, a pool of 2 × 3072 + 32768 B: XOFF = 32768 / 8 = 4096 B, and a
// 4252-byte frame (a 4096-byte MTU's payload with its headers) is longer
// than XOFF and than the headroom. The empty ingress still takes it (a
// dynamic threshold admits to a queue below it); a second frame, with
// the first still queued, goes over XOFF and finds no headroom for it
// (a headroom drop); once the first has left, the third is taken again.
// Before, every such frame was dropped, and a sender retrying it gave up
// (RETRY_EXC_ERR, found by the congestion suite on a 4096-byte MTU).
func TestEmptyIngressAdmitsAJumboFrame(t *testing.T) {
	const jumbo, hr = 4252, 3072
	r := newBufferRig(t, 2, 10e9, 0)
	r.ports[1].stalled = true
	require.NoError(t, r.sw.SetBuffer(switching.BufferConfig{Bytes: 2*hr + 32768, Headroom: hr, Lossless: 1 << 3, Alpha: 1.0 / 8}))
	xoff, _, h, free := r.sw.BufferThresholds(0)
	require.Equal(t, int64(32768), free)
	require.Equal(t, int64(4096), xoff)
	require.Equal(t, int64(hr), h)

	f := frameOf(t, 26, jumbo)
	r.sw.Ingress(0, f)
	u := r.use(0, 3)
	assert.Equal(t, int64(jumbo), u.Bytes, "the empty ingress took the frame")
	assert.Zero(t, u.DropsHeadroom+u.DropsFull+u.DropsEgress)

	r.sw.Ingress(0, f)
	u = r.use(0, 3)
	assert.Equal(t, int64(jumbo), u.Bytes)
	assert.Equal(t, uint64(1), u.DropsHeadroom, "over XOFF, and the headroom is shorter than the frame")

	r.ports[1].drain()
	for r.clk.Step() {
	}
	require.Zero(t, r.use(0, 3).Bytes)
	r.sw.Ingress(0, f)
	u = r.use(0, 3)
	assert.Equal(t, int64(jumbo), u.Bytes, "empty again: taken")
	assert.Equal(t, uint64(1), u.DropsHeadroom)
	require.NoError(t, r.sw.BufferBalance())
}
