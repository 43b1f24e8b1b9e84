package units_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/units"
)

// Durations are bounded by MaxDuration (1h of virtual time) wherever they
// are parsed; NaN, infinities, negative and overflowing values are errors,
// never a wrapped or negative time.Duration.
func TestParseDurationBounds(t *testing.T) {
	for s, want := range map[string]time.Duration{
		"0": 0, "10": 10 * time.Nanosecond, "1.5ms": 1500 * time.Microsecond, "20us": 20 * time.Microsecond,
		"60m": time.Hour, "1h": time.Hour, "3600000000000": time.Hour, "3600s": time.Hour,
	} {
		d, err := units.ParseDuration(s)
		require.NoError(t, err, s)
		assert.Equal(t, want, d, s)
	}
	for s, msg := range map[string]string{
		"1e13":          `"1e13" is beyond the 1h limit for durations (a bare number is nanoseconds, as netem reads it)`,
		"3600000000001": `"3600000000001" is beyond the 1h limit`,
		"3600.001s":     `"3600.001s" is beyond the 1h limit for durations`,
		"1e300":         `"1e300" is beyond the 1h limit`,
		"1e400":         `"1e400" is beyond the 1h limit`,
		"Inf":           `"Inf" is beyond the 1h limit`,
		"+Inf":          `"+Inf" is beyond the 1h limit`,
		"2h":            `"2h" is beyond the 1h limit for durations`,
		"1h0m1s":        `"1h0m1s" is beyond the 1h limit`,
		"9999999999h":   `"9999999999h" is beyond the 1h limit`,
		"1e6h":          `"1e6h" is not a duration`, // not Go syntax: no exponent with a unit
	} {
		_, err := units.ParseDuration(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), msg, s)
		if s != "1e6h" {
			assert.True(t, errors.Is(err, units.ErrTooLong), s)
		}
	}
	for _, s := range []string{"NaN", "-1", "-Inf", "-5us", "soon", "", "5 ms"} {
		_, err := units.ParseDuration(s)
		require.Error(t, err, s)
		assert.Contains(t, err.Error(), "is not a duration", s)
		assert.False(t, errors.Is(err, units.ErrTooLong), s)
	}
}

// Every spelling of a time that tc's get_time64 (iproute2 lib/utils.c,
// which reads netem's delay and jitter since v6.9) accepts means here what
// it means there: a float (strtod) and a unit from its table, compared
// case-insensitively, a bare number being nanoseconds. Spellings it
// refuses are refused, or read as Go durations where Go reads them.
func TestDurationsAsTCReadsThem(t *testing.T) {
	for s, want := range map[string]time.Duration{
		// get_time64's units, each spelling, any case.
		"2s": 2 * time.Second, "2sec": 2 * time.Second, "2secs": 2 * time.Second, "2SEC": 2 * time.Second,
		"3ms": 3 * time.Millisecond, "3msec": 3 * time.Millisecond, "3msecs": 3 * time.Millisecond, "3MS": 3 * time.Millisecond,
		"4us": 4 * time.Microsecond, "4usec": 4 * time.Microsecond, "4usecs": 4 * time.Microsecond, "4Us": 4 * time.Microsecond,
		"5ns": 5, "5nsec": 5, "5nsecs": 5, "5NSECS": 5,
		// A bare number: nanoseconds ("64 bit times are represented
		// internally in nanoseconds"), as a float.
		"7": 7, "1000": time.Microsecond, "2.9": 2 /* truncated, as C does */, "1e3": time.Microsecond, "1.5e6": 1500 * time.Microsecond,
		// strtod's forms with a unit.
		"0.5ms": 500 * time.Microsecond, "1e3us": time.Millisecond, "+5us": 5 * time.Microsecond, ".5s": 500 * time.Millisecond,
		// Not tc's, read as Go durations (tc refuses them).
		"1h": time.Hour, "2m": 2 * time.Minute, "1m30s": 90 * time.Second, "5µs": 5 * time.Microsecond,
	} {
		d, err := units.ParseDuration(s)
		if assert.NoError(t, err, s) {
			assert.Equal(t, want, d, s)
		}
	}
	// tc refuses these (negative, unknown unit, a space) and so does inaemu.
	for _, s := range []string{"-1us", "5 ms", "5mss", "5usecss", "ms", "5sec5", "5 "} {
		_, err := units.ParseDuration(s)
		assert.Error(t, err, s)
	}
}

// A bare time gets a note saying how it reads; a time with its unit, and
// 0, do not.
func TestDurationNote(t *testing.T) {
	assert.Equal(t, "5 is 5ns: tc reads a bare time as nanoseconds (netem delay, iproute2 6.9 and later; tc(8) and older tc say microseconds); write 5us or 5ms", units.DurationNote("5"))
	assert.Contains(t, units.DurationNote("1e3"), "1e3 is 1µs")
	for _, s := range []string{"0", "5us", "5ms", "1h", "soon", "-5", ""} {
		assert.Empty(t, units.DurationNote(s), s)
	}
}
