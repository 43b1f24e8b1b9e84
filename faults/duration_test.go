package faults_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
)

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
