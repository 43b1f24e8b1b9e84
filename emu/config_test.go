package emu

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseMode(t *testing.T) {
	m, err := ParseMode("netreduce")
	require.NoError(t, err)
	assert.Equal(t, NetReduce, m)
	m, err = ParseMode("ring")
	require.NoError(t, err)
	assert.Equal(t, Ring, m)
	for _, bad := range []string{"", "Ring", "allreduce"} {
		_, err := ParseMode(bad)
		assert.Error(t, err, bad)
	}
	assert.Equal(t, "netreduce", NetReduce.String())
	assert.Equal(t, "ring", Ring.String())
}

// An egress queue of a negative length is a configuration error, like every
// other impossible setting: Validate (and so Run) must reject it instead of
// building a switch that drops every frame it forwards.
func TestValidateRejectsNegativeQueue(t *testing.T) {
	cfg := smallJob(NetReduce)
	cfg.Link.Queue = -1
	err := cfg.Validate()
	var ce *ConfigError
	assert.True(t, errors.As(err, &ce), "Validate: want *ConfigError, got %v", err)
	_, err = Run(cfg)
	assert.True(t, errors.As(err, &ce), "Run: want *ConfigError, got %T %v", err, err)
}

// NaN is not a link rate either: Validate must reject it rather than run
// with a line that takes int64(NaN) picoseconds per byte.
func TestValidateRejectsNaNRate(t *testing.T) {
	cfg := smallJob(NetReduce)
	cfg.Link.Rate = math.NaN()
	err := cfg.Validate()
	var ce *ConfigError
	assert.True(t, errors.As(err, &ce), "Validate: want *ConfigError, got %v", err)
}
