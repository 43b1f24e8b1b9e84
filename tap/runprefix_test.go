package tap

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A run prefix names its process, fits Linux's 15 characters with 100
// ranks at the largest PID Linux gives, and is read back only from names
// that are a run prefix's.
func TestRunPrefixNamesItsProcess(t *testing.T) {
	p, err := runPrefix("itdt", 1<<22) // pid_max's ceiling
	require.NoError(t, err)
	require.Equal(t, "itdt_2hwcg", p)
	require.NoError(t, Topology{Prefix: p, Workers: 100}.Validate())
	for _, name := range []string{p + "-sw0", p + "-h99", p + "-br7"} {
		prefix, pid, ok := RunOwner(name)
		require.True(t, ok, name)
		require.Equal(t, p, prefix)
		require.Equal(t, 1<<22, pid)
	}
	for _, name := range []string{"ina-sw0", "itdt-sw0", "itdt_-sw0", "_1z-sw0", "toolong_1z-sw0", "it_0-sw0", "it_01-sw0", "it_1Z-sw0", "it_zzzzzzz-sw0", "it_1z"} {
		_, _, ok := RunOwner(name)
		require.False(t, ok, name)
	}
	for _, tag := range []string{"", "toolong", "a-b", "A", "a_b"} {
		_, err := runPrefix(tag, 1)
		require.Error(t, err, tag)
	}
	mine, err := RunPrefix("x")
	require.NoError(t, err)
	_, pid, ok := RunOwner(mine + "-sw0")
	require.Equal(t, os.Getpid(), pid)
	require.True(t, ok)

	// RunPrefix marks its prefix: Up gives a run's interfaces RunAlias,
	// which the sweep reads the PID from; anything else gets Alias.
	require.Equal(t, RunAlias(os.Getpid()), aliasFor(mine))
	require.Equal(t, Alias, aliasFor("lab_x1"), "a user's prefix, shaped as a run's")
	require.Equal(t, Alias, aliasFor("ina"))
	got, ok := runAliasPID(RunAlias(4711))
	require.True(t, ok)
	require.Equal(t, 4711, got)
	require.True(t, ours(RunAlias(4711)))
	require.True(t, ours(Alias))
	for _, a := range []string{Alias, "", "inaemu test run", "inaemu test run 0", "inaemu test run 012", "inaemu test run x1", "other test run 12"} {
		_, ok := runAliasPID(a)
		require.False(t, ok, a)
	}
	require.False(t, ours("other"))
}
