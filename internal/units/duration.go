package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

// Times are read as tc reads netem's delay and jitter, which is not what
// its manuals say:
//
//   - iproute2 parses netem's "delay TIME [JITTER]" with get_time64
//     (tc/q_netem.c, netem_parse_opt; since commit 9a6b231e "netem: use 64
//     bit value for latency and jitter", iproute2 v6.9.0, 2024). get_time64
//     (lib/utils.c) reads a floating-point number with strtod and an
//     optional unit, compared case-insensitively: s, sec, secs; ms, msec,
//     msecs; us, usec, usecs; ns, nsec, nsecs. A bare number is
//     NANOSECONDS ("64 bit times are represented internally in
//     nanoseconds"); a negative number or any other unit is an error.
//     https://git.kernel.org/pub/scm/network/iproute2/iproute2.git/tree/tc/q_netem.c
//     https://git.kernel.org/pub/scm/network/iproute2/iproute2.git/tree/lib/utils.c
//     (mirrored at https://github.com/iproute2/iproute2)
//   - Before v6.9, netem went through get_ticks → get_time (lib/utils.c),
//     which has no ns unit and reads a bare number as MICROSECONDS, tc's
//     own time unit; tc(8)'s TIMES section still documents that reading
//     ("us, usec, usecs or a bare number: Microseconds"), and the other
//     qdiscs that use get_time keep it.
//     https://git.kernel.org/pub/scm/network/iproute2/iproute2.git/tree/man/man8/tc.8
//   - tc-netem(8) says "Delay and jitter values are expressed in
//     milliseconds" — true of no version's parser.
//     https://git.kernel.org/pub/scm/network/iproute2/iproute2.git/tree/man/man8/tc-netem.8
//
// inaemu follows the parser of current iproute2 everywhere it reads a
// time (netem delay and jitter, --latency, --max-time, fault delay=,
// a job's start): every spelling get_time64 accepts means what it means
// there, so a bare number is nanoseconds, and DurationNote says so to a
// user who may expect otherwise. Spellings tc refuses are read as Go
// durations ("1h", "90m", "1m30s", "5µs") where Go reads them; they mean
// the same in both where both accept them.

// MaxDuration bounds every duration a spec, a flag or a scenario gives
// (delays, jitter, latency, the job's time limit). They are virtual time,
// nanoseconds in an int64; an hour is far beyond any delay a network adds
// and any allreduce the emulator runs (a 4 GiB tensor takes seconds at
// 10 Gbit/s), and it keeps every sum of delays far from overflowing.
const MaxDuration = time.Hour

// tcTimeUnits are get_time64's units (lib/utils.c), longest first so that
// "msecs" is not read as "ms" + "ecs"; matched case-insensitively.
var tcTimeUnits = []struct {
	suffix string
	scale  float64 // nanoseconds
}{
	{"nsecs", 1}, {"nsec", 1}, {"usecs", 1e3}, {"usec", 1e3}, {"msecs", 1e6}, {"msec", 1e6}, {"secs", 1e9}, {"sec", 1e9},
	{"ns", 1}, {"us", 1e3}, {"ms", 1e6}, {"s", 1e9},
}

// splitTCTime splits a time as tc writes it into its number and its unit's
// scale in nanoseconds (1 for a bare number); ok is false when the text
// after the number is no unit of tc's.
func splitTCTime(s string) (num string, scale float64, bare, ok bool) {
	low := strings.ToLower(s)
	for _, u := range tcTimeUnits {
		if strings.HasSuffix(low, u.suffix) {
			return s[:len(s)-len(u.suffix)], u.scale, false, true
		}
	}
	return s, 1, true, true
}

// ParseDuration reads a time as tc reads netem's delay ("10us", "1.5ms",
// "2MSEC", "1e3us"; a bare number is nanoseconds), or a Go duration where
// tc has no reading ("1h", "90m"). Negative durations, NaN, infinities and
// anything beyond MaxDuration are errors.
func ParseDuration(s string) (time.Duration, error) {
	if num, scale, bare, _ := splitTCTime(s); num != "" {
		if v, err := strconv.ParseFloat(num, 64); err == nil || errors.Is(err, strconv.ErrRange) {
			ns := v * scale
			switch {
			case math.IsNaN(ns) || v < 0:
				return 0, fmt.Errorf("%q is not a duration from 0 to %s (e.g. 10us, 2ms; a bare number is nanoseconds, as netem reads it)", s, MaxDurationText())
			case ns > float64(MaxDuration): // also +Inf and overflowing numbers
				return 0, &tooLongError{s, bare}
			}
			return time.Duration(ns), nil // truncated, as C converts get_time64's double
		}
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil && durationOverflows(s):
		return 0, &tooLongError{s, false}
	case err != nil || d < 0:
		return 0, fmt.Errorf("%q is not a duration from 0 to %s (e.g. 10us, 2ms)", s, MaxDurationText())
	case d > MaxDuration:
		return 0, &tooLongError{s, false}
	}
	return d, nil
}

// DurationNote is a one-line note for a time whose reading may surprise:
// a bare number other than 0, which current tc reads as nanoseconds where
// tc(8) and older tc say microseconds and tc-netem(8) milliseconds. ""
// when the spelling says its unit (or is not a time ParseDuration takes).
func DurationNote(s string) string {
	num, _, bare, _ := splitTCTime(s)
	v, err := strconv.ParseFloat(num, 64)
	if !bare || err != nil || v == 0 {
		return ""
	}
	d, err := ParseDuration(s)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s is %v: tc reads a bare time as nanoseconds (netem delay, iproute2 6.9 and later; tc(8) and older tc say microseconds); write %sus or %sms", s, d, s, s)
}

// ErrTooLong matches (errors.Is) ParseDuration's error for a duration
// beyond MaxDuration.
var ErrTooLong = errors.New("duration beyond the limit")

type tooLongError struct {
	s    string
	bare bool // a bare number: nanoseconds
}

// MaxDurationText is MaxDuration as a user writes it: 1h, not 1h0m0s.
func MaxDurationText() string {
	return strings.TrimSuffix(strings.TrimSuffix(MaxDuration.String(), "0s"), "0m")
}

func (e *tooLongError) Error() string {
	limit := MaxDurationText()
	if e.bare {
		return fmt.Sprintf("%q is beyond the %s limit for durations (a bare number is nanoseconds, as netem reads it)", e.s, limit)
	}
	return fmt.Sprintf("%q is beyond the %s limit for durations", e.s, limit)
}

func (e *tooLongError) Is(target error) bool { return target == ErrTooLong }

// durationOverflows reports whether s is a well-formed Go duration that
// time.ParseDuration refused only because it does not fit in an int64
// ("9999999999h"): its digits and units, read as floats, give a huge value.
func durationOverflows(s string) bool {
	units := []struct {
		suf string
		d   float64
	}{{"ns", 1}, {"us", 1e3}, {"µs", 1e3}, {"μs", 1e3}, {"ms", 1e6}, {"s", 1e9}, {"m", 60e9}, {"h", 3600e9}}
	t := strings.TrimPrefix(s, "+")
	total := 0.0
	for t != "" {
		i := 0
		for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
			i++
		}
		v, err := strconv.ParseFloat(t[:i], 64)
		if err != nil {
			return false
		}
		t = t[i:]
		found := false
		for _, u := range units {
			if strings.HasPrefix(t, u.suf) { // ms is tried before m
				total += v * u.d
				t, found = t[len(u.suf):], true
				break
			}
		}
		if !found {
			return false
		}
	}
	return total > math.MaxInt64
}
