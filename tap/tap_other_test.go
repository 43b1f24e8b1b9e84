//go:build !linux

package tap

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestNeedLinux: off Linux every function that needs TAPs, netlink or a
// raw socket says so in one line, and the error matches ErrNeedLinux and
// errors.ErrUnsupported.
func TestNeedLinux(t *testing.T) {
	_, errOpen := Open("ina-h0")
	_, errUp := Up(Topology{Prefix: "ina", Workers: 2})
	_, errDown := Down("ina")
	_, errInj := NewInjector("ina-br0")
	for _, err := range []error{Usable(), errOpen, errUp, errDown, Remove([]string{"ina-h0"}), WaitUp(context.Background(), "ina-h0"), errInj} {
		require.ErrorIs(t, err, ErrNeedLinux)
		require.ErrorIs(t, err, errors.ErrUnsupported)
		require.EqualError(t, err, "tap: TAP devices need Linux (this is "+runtime.GOOS+")")
	}
	_, err := Up(Topology{Prefix: "ina", Workers: 0})
	require.NotErrorIs(t, err, ErrNeedLinux, "a bad topology is a usage error anywhere")
}
