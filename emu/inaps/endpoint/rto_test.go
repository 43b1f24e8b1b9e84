package endpoint

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

const ms = time.Millisecond

// RFC 6298 §2: the first sample R sets SRTT = R, RTTVAR = R/2; each later
// R' sets RTTVAR = 3/4·RTTVAR + 1/4·|SRTT − R'| (with the old SRTT), then
// SRTT = 7/8·SRTT + 1/8·R'; RTO = SRTT + 4·RTTVAR, here floored at the
// minimum and capped at 100 times it. Values worked out by hand below.
func TestRTOSamples(t *testing.T) {
	r := rtoEstimator{min: 1 * ms}
	assert.Equal(t, 1*ms, r.rto(), "no sample: the minimum")

	steps := []struct {
		sample, srtt, rttvar, rto time.Duration
	}{
		// SRTT 10, RTTVAR 5, RTO 10 + 20.
		{10 * ms, 10 * ms, 5 * ms, 30 * ms},
		// |10 − 14| = 4: RTTVAR 5 + (4 − 5)/4 = 4.75; SRTT 10 + 4/8 = 10.5;
		// RTO 10.5 + 19 = 29.5.
		{14 * ms, 10500 * time.Microsecond, 4750 * time.Microsecond, 29500 * time.Microsecond},
		// |10.5 − 2| = 8.5: RTTVAR 4.75 + 3.75/4 = 5.6875; SRTT 10.5 − 8.5/8
		// = 9.4375; RTO 9.4375 + 22.75 = 32.1875.
		{2 * ms, 9437500 * time.Nanosecond, 5687500 * time.Nanosecond, 32187500 * time.Nanosecond},
		// |9.4375 − 9.4375| = 0: RTTVAR 5.6875·3/4 = 4.265625; SRTT unchanged;
		// RTO 9.4375 + 17.0625 = 26.5.
		{9437500 * time.Nanosecond, 9437500 * time.Nanosecond, 4265625 * time.Nanosecond, 26500 * time.Microsecond},
	}
	for i, s := range steps {
		r.sample(s.sample)
		assert.Equal(t, s.srtt, r.srtt, "step %d: SRTT", i)
		assert.Equal(t, s.rttvar, r.rttvar, "step %d: RTTVAR", i)
		assert.Equal(t, s.rto, r.rto(), "step %d: RTO", i)
	}
}

func TestRTOFloorAndCap(t *testing.T) {
	r := rtoEstimator{min: 1 * ms}
	for i := 0; i < 20; i++ {
		r.sample(100 * time.Microsecond) // SRTT 0.1 ms, RTO 0.3 ms at most
	}
	assert.Equal(t, 1*ms, r.rto(), "floored at the minimum")

	r = rtoEstimator{min: 1 * ms}
	r.sample(80 * ms) // 80 + 4·40 = 240 ms
	assert.Equal(t, 100*ms, r.rto(), "capped at 100 × the minimum")

	r = rtoEstimator{min: 2 * ms}
	r.sample(10 * ms) // 10 + 4·5 = 30 ms
	assert.Equal(t, 30*ms, r.rto())
	assert.Equal(t, 30*ms, r.backedOff(0))
	assert.Equal(t, 60*ms, r.backedOff(1))
	assert.Equal(t, 120*ms, r.backedOff(2))
	assert.Equal(t, 200*ms, r.backedOff(3), "240 ms capped at 100 × 2 ms")
	assert.Equal(t, 200*ms, r.backedOff(6))

	r = rtoEstimator{min: 1 * ms}
	assert.Equal(t, 8*ms, r.backedOff(3), "no sample: the minimum, doubled")
	assert.Equal(t, 64*ms, r.backedOff(6))
	assert.Equal(t, 100*ms, r.backedOff(7), "128 ms capped")
}
