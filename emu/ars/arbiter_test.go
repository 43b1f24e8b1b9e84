package ars

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The aggregation flow alone: one broadcast per completed index, at the
// rate 8 ports of 10 Gb/s complete them, never waits (TX_OUT of a
// 1.1 kB frame is 0.7 µs, a frame on the wire 0.88 µs).
func TestArbiterAggregationAloneNeverWaits(t *testing.T) {
	var a arbiter
	dur := txOut(1100)
	require.Equal(t, 690*time.Nanosecond, dur)
	for k := range 1000 {
		now := time.Duration(k) * frameTime
		assert.Zero(t, a.book(now, now+2*time.Microsecond, dur, false))
	}
	assert.Zero(t, a.waits)
}

// Weighted round robin: a burst of retransmissions never takes two grants
// in a row, so aggregations that arrive meanwhile get every other grant;
// the retransmissions alone take every other grant too.
func TestArbiterRetransmissionsLeaveHalfToAggregation(t *testing.T) {
	var a arbiter
	dur := txOut(1100)
	for range 6 { // six branches resend at once
		a.book(0, time.Microsecond, dur, true)
	}
	for k := range 6 {
		a.book(0, time.Microsecond+time.Duration(k)*time.Nanosecond, dur, false)
	}
	require.Len(t, a.grants, 12)
	for i, g := range a.grants {
		if i > 0 {
			assert.False(t, g.resend && a.grants[i-1].resend && a.grants[i-1].end == g.start, "two retransmission grants in a row at %d", i)
			assert.LessOrEqual(t, a.grants[i-1].end, g.start, "grants overlap")
		}
	}
	// Every aggregation waited at most one retransmission grant per grant
	// of its own: the k-th is done within 2k+2 grants.
	n := 0
	for i, g := range a.grants {
		if !g.resend {
			assert.LessOrEqual(t, g.end, time.Microsecond+time.Duration(2*n+2)*dur, "aggregation %d (grant %d)", n, i)
			n++
		}
	}
	// Deterministic: the same requests book the same grants.
	var b arbiter
	for range 6 {
		b.book(0, time.Microsecond, dur, true)
	}
	for k := range 6 {
		b.book(0, time.Microsecond+time.Duration(k)*time.Nanosecond, dur, false)
	}
	assert.Equal(t, a.grants, b.grants)
}
