package collective

import "github.com/inaemu/inaemu/emu/themis"

// SetHierMutations makes every hier job schedule with m until restore is
// called: the external tests' way to re-introduce a scheduler bug.
func SetHierMutations(m themis.Mutations) (restore func()) {
	old := hierMutations
	hierMutations = m
	return func() { hierMutations = old }
}
