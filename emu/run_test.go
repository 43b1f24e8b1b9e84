package emu

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSmoke(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring} {
		cfg := DefaultConfig()
		cfg.Mode = mode
		cfg.TensorBytes = 1 << 20
		res, err := Run(cfg)
		require.NoError(t, err)
		t.Logf("%+v wall %v", *res, res.Wall)
		require.True(t, res.Exact)
	}
}
