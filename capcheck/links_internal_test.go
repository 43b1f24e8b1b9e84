package capcheck

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPairLinkNames: X-in pairs with X-out, A-B with B-A (the same #k
// suffix), one to one, whatever order the names come in; anything else is
// a vantage point of its own.
func TestPairLinkNames(t *testing.T) {
	names := []string{
		"port0-in", "port0-out", // the star
		"leaf0-h3", "h3-leaf0", // a host's link, the switch's direction first
		"leaf0-spine0", "spine0-leaf0",
		"h0-s0#1", "s0-h0#1", "h0-s0", "s0-h0", // a parallel link, then the first
		"h1-s0#1", "s0-h1#2", // different suffixes: no pair
		"lab-br0", "port1-in", "tap0", "a-a", "-x", "x-", // no counterpart
		"a-b-c", "b-c-a", "c-a-b", // several hyphens: first come, first paired
		"port2-in", "in-port2", // an unpaired X-in pairs as A-B
		"port0-in", // a duplicate name joins its vantage point
	}
	want := map[string]linkName{
		"port0-in":     {"port0", sideIn},
		"port0-out":    {"port0", sideOut},
		"h3-leaf0":     {"h3~leaf0", sideFwd},
		"leaf0-h3":     {"h3~leaf0", sideRev},
		"leaf0-spine0": {"leaf0~spine0", sideFwd},
		"spine0-leaf0": {"leaf0~spine0", sideRev},
		"h0-s0#1":      {"h0~s0#1", sideFwd},
		"s0-h0#1":      {"h0~s0#1", sideRev},
		"h0-s0":        {"h0~s0", sideFwd},
		"s0-h0":        {"h0~s0", sideRev},
		"a-b-c":        {"a~b-c", sideFwd},
		"b-c-a":        {"a~b-c", sideRev},
		"in-port2":     {"in~port2", sideFwd},
		"port2-in":     {"in~port2", sideRev},
	}
	assert.Equal(t, want, pairLinkNames(names))
	// Order does not matter.
	rev := make([]string, len(names))
	for i, n := range names {
		rev[len(names)-1-i] = n
	}
	got := pairLinkNames(rev)
	for _, n := range []string{"port0-in", "port0-out", "h3-leaf0", "leaf0-h3", "leaf0-spine0", "spine0-leaf0", "h0-s0#1", "s0-h0#1", "h0-s0", "s0-h0", "in-port2", "port2-in"} {
		assert.Equal(t, want[n], got[n], n)
	}
}
