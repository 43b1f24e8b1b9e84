package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hier property holds on 10 suite seeds (80 generated jobs), and its
// cases cover what the suite promises: 2 and 3 dimensions, every kind,
// both schedulers and policies, several chunks, every dtype, and faults
// that happened.
func TestHierSuiteHoldsOnTenSeeds(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		res := HierSuite(SuiteOptions{Count: 8, Seed: seed, OutDir: t.TempDir()})
		require.Len(t, res, 1)
		require.True(t, res[0].Passed, "seed %d: %s", seed, res[0].Failure)
		require.Equal(t, 8, res[0].Cases)
	}
	seen := map[string]bool{}
	injected := 0
	for i := range 80 {
		seed := caseSeed(3, "hier/exact", i)
		c := sample(hierCaseGen(seed), seed).(hierSuiteCase)
		seen[c.Scheduler] = true
		seen[c.Policy] = true
		seen[c.DType.String()] = true
		seen[map[int]string{2: "2-D", 3: "3-D"}[len(c.Dims)]] = true
		for _, d := range c.Dims {
			seen[d.Kind] = true
		}
		if c.Chunks > 1 {
			seen["chunks"] = true
		}
		if i < 20 {
			res, out := runExact(c.scenario())
			require.Empty(t, out.fail, "%v: %s", c, out.detail)
			if res.Faults.Injected() > 0 {
				injected++
			}
		}
	}
	for _, k := range []string{"baseline", "themis", "fifo", "scf", "f32", "i32", "f16", "2-D", "3-D", "ring", "fc", "switch", "chunks"} {
		assert.True(t, seen[k], "no case with %s", k)
	}
	assert.GreaterOrEqual(t, injected, 8, "faults happened in most cases")
}
