package faults_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
)

// Durations are bounded by MaxDuration (1h of virtual time) wherever they
// are parsed; NaN, infinities, negative and overflowing values are errors,
// never a wrapped or negative time.Duration.
func TestParseDurationBounds(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"0": 0, "10": 10 * time.Millisecond, "1.5ms": 1500 * time.Microsecond, "20us": 20 * time.Microsecond,
		"60m": time.Hour, "1h": time.Hour, "3600000": time.Hour,
	} {
		d, err := faults.ParseDuration(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, d, s)
	}
	for s, msg := range map[string]string{
		"1e13":        `"1e13" is beyond the 1h limit for durations (a bare number is milliseconds)`,
		"3600001":     `"3600001" is beyond the 1h limit`,
		"1e300":       `"1e300" is beyond the 1h limit`,
		"1e400":       `"1e400" is beyond the 1h limit`,
		"Inf":         `"Inf" is beyond the 1h limit`,
		"+Inf":        `"+Inf" is beyond the 1h limit`,
		"2h":          `"2h" is beyond the 1h limit for durations`,
		"1h0m1s":      `"1h0m1s" is beyond the 1h limit`,
		"9999999999h": `"9999999999h" is beyond the 1h limit`,
		"1e6h":        `"1e6h" is not a duration`, // not Go syntax: no exponent with a unit
	} {
		_, err := faults.ParseDuration(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), msg, s)
		if s != "1e6h" {
			assert.True(t, errors.Is(err, faults.ErrTooLong), s)
		}
	}
	for _, s := range []string{"NaN", "-1", "-Inf", "-5us", "soon", "", "5 ms"} {
		_, err := faults.ParseDuration(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), "is not a duration", s)
		assert.False(t, errors.Is(err, faults.ErrTooLong), s)
	}
}

// The fault and netem parsers name the bad token and pass the bound on.
func TestDurationBoundInSpecs(t *testing.T) {
	_, err := faults.Parse("delay=1e300 port=0 dir=in class=data nth=1")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `bad token "delay=1e300": "1e300" is beyond the 1h limit`)
	_, err = faults.Parse("delay=0 port=0")
	assert.ErrorContains(t, err, "delay needs a positive duration")
	ev, err := faults.Parse("delay=1h port=0")
	require.NoError(t, err)
	assert.Equal(t, time.Hour, ev.Delay)

	for spec, tok := range map[string]string{
		"delay 1e13":          `bad token "1e13": "1e13" is beyond the 1h limit`,
		"delay 5us 1e13":      `bad token "1e13": "1e13" is beyond the 1h limit`,
		"delay 5us 2h loss 1": `bad token "2h"`,
		"delay 5us soon":      `bad token "soon": "soon" is not a duration`,
		"delay NaN":           `bad token "NaN"`,
	} {
		_, err := faults.ParseNetem(spec)
		require.Error(t, err, spec)
		assert.Contains(t, err.Error(), tok, spec)
	}
	n, err := faults.ParseNetem("delay 5us 1us loss 1%")
	require.NoError(t, err)
	assert.Equal(t, time.Microsecond, n.Jitter)
	assert.InDelta(t, 0.01, n.Loss, 1e-12)
}
