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

// Weighted round robin: an aggregation that arrives behind a burst of
// retransmissions waits for one of them, not the burst; the engine time
// it took is owed by the next retransmission; retransmissions alone run
// at the engine's full rate.
func TestArbiterRetransmissionsLeaveHalfToAggregation(t *testing.T) {
	var a arbiter
	dur := txOut(1100)
	us := time.Microsecond
	for k := range 6 { // six branches resend at once: back to back
		assert.Equal(t, time.Duration(k)*dur, a.book(0, us, dur, true))
	}
	// An aggregation arriving during the first re-send waits for it only.
	assert.Equal(t, us+dur-(us+100*time.Nanosecond), a.book(0, us+100*time.Nanosecond, dur, false))
	// A second one, arriving at once, waits for the first and one more
	// re-send grant.
	assert.Equal(t, 3*dur-200*time.Nanosecond, a.book(0, us+200*time.Nanosecond, dur, false))
	// The next re-send pays the two grants the aggregations took.
	assert.Equal(t, 8*dur, a.book(0, us, dur, true))
	// Deterministic: the same requests book the same grants.
	var b arbiter
	for range 6 {
		b.book(0, us, dur, true)
	}
	b.book(0, us+100*time.Nanosecond, dur, false)
	b.book(0, us+200*time.Nanosecond, dur, false)
	b.book(0, us, dur, true)
	assert.Equal(t, a.grants, b.grants)
}
