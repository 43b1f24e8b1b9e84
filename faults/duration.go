package faults

import (
	"time"

	"github.com/inaemu/inaemu/internal/units"
)

// Times are read where rates and sizes are, in internal/units, as tc reads
// netem's delay and jitter (see units.ParseDuration for tc's parser and
// its sources). These names stay here because a fault spec, a netem spec
// and the flags that carry them are where users meet durations.

// MaxDuration bounds every duration a spec, a flag or a scenario gives:
// units.MaxDuration.
const MaxDuration = units.MaxDuration

// ParseDuration is units.ParseDuration: a time as tc reads netem's delay
// (a bare number is nanoseconds), or a Go duration where tc has no reading.
func ParseDuration(s string) (time.Duration, error) { return units.ParseDuration(s) }

// DurationNote is units.DurationNote: a note for a bare time, which tc
// reads as nanoseconds.
func DurationNote(s string) string { return units.DurationNote(s) }

// ErrTooLong matches (errors.Is) ParseDuration's error for a duration
// beyond MaxDuration.
var ErrTooLong = units.ErrTooLong

// maxDurationText is MaxDuration as a user writes it: 1h, not 1h0m0s.
func maxDurationText() string { return units.MaxDurationText() }
