package inaps_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps"
)

// IndexTable: a job never collides with itself (no index twice among its
// Slots slots, while the pool has at least Slots aggregators), every
// index is inside the pool, and every caller (each worker, the PS) gets
// the same table.
func TestIndexTable(t *testing.T) {
	for _, n := range []int{inaps.Slots, inaps.Slots + 1, 300, 1000, inaps.DefaultAggregators, inaps.MaxAggregators} {
		for _, id := range []uint16{1, 2, 3, 77, 0x1234, 0xffff} {
			tab := inaps.IndexTable(id, n)
			require.Len(t, tab, inaps.Slots, "job %d pool %d", id, n)
			seen := map[uint16]int{}
			for slot, k := range tab {
				assert.Less(t, int(k), n, "job %d pool %d slot %d", id, n, slot)
				if prev, dup := seen[k]; dup {
					t.Errorf("job %d pool %d: index %d at slots %d and %d", id, n, k, prev, slot)
				}
				seen[k] = slot
			}
			assert.Equal(t, tab, inaps.IndexTable(id, n), "job %d pool %d: the same on every call", id, n)
		}
	}
}

// Two jobs' tables differ (the job is hashed in).
func TestIndexTableJobsDiffer(t *testing.T) {
	assert.NotEqual(t, inaps.IndexTable(1, inaps.DefaultAggregators), inaps.IndexTable(2, inaps.DefaultAggregators))
}

// StaticIndex: packet n of a region [first, first+size) uses slot
// (n-1) mod half of set ((n-1) div half) mod 2, half = size/2.
func TestStaticIndex(t *testing.T) {
	const first, size = 10, 8 // half 4: set 0 is 10-13, set 1 is 14-17
	want := map[uint64]uint16{1: 10, 2: 11, 4: 13, 5: 14, 8: 17, 9: 10, 12: 13, 13: 14, 17: 10}
	for n, k := range want {
		assert.Equal(t, k, inaps.StaticIndex(first, size, n), "packet %d", n)
	}
	const half = size / 2
	for n := uint64(1); n < 200; n++ {
		k := inaps.StaticIndex(first, size, n)
		assert.GreaterOrEqual(t, int(k), first, "packet %d", n)
		assert.Less(t, int(k), first+size, "packet %d", n)
		assert.NotEqual(t, k, inaps.StaticIndex(first, size, n+half), "packets %d and %d: the other shadow set", n, n+half)
		assert.Equal(t, k, inaps.StaticIndex(first, size, n+2*half), "packets %d and %d: the same slot", n, n+2*half)
	}
	// An odd size leaves its last aggregator unused.
	for n := uint64(1); n < 50; n++ {
		assert.Less(t, int(inaps.StaticIndex(0, 5, n)), 4, "packet %d", n)
	}
}
