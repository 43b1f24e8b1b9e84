package capcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestDupCopyLookupAllocatesNothing: once a duplicate fault has been seen,
// every frame's packet is looked up among the duplicated ones; the lookup
// (an unannotated frame, or another annotated copy of a packet already
// known) allocates nothing, and only a new duplicated packet is stored.
func TestDupCopyLookupAllocatesNothing(t *testing.T) {
	p := newFrameParser()
	dup := make([]byte, 60)
	dup[12], dup[13] = 0x08, 0x00 // IPv4
	dup[14] = 0x45
	other := append([]byte(nil), dup...)
	other[50] = 1 // in the packet past the UDP header
	assert.True(t, p.dupCopy(dup, true))
	assert.False(t, p.dupCopy(other, false))
	assert.True(t, p.dupCopy(dup, false), "a copy of the duplicated packet")
	assert.Zero(t, testing.AllocsPerRun(100, func() { p.dupCopy(other, false) }), "looking up a frame that is no copy")
	assert.Zero(t, testing.AllocsPerRun(100, func() { p.dupCopy(dup, true) }), "another annotated copy of a known packet")
	assert.Len(t, p.duplicated, 1)
}
