package collective_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/conformance"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/themis"
)

// The hier conformance property's power: with Themis's AG order not
// reversed (themis.Mutations.AGNotReversed: every all-reduce chunk
// gathers on its dimensions in the order it scattered, so what a rank
// gathers is not the block it holds) re-introduced into what the hier job
// runs, the property fails on the first generated case of more than one
// dimension, and the report names the broken order.
func TestHierSuiteCatchesAGNotReversed(t *testing.T) {
	o := conformance.SuiteOptions{Count: 10, Seed: 1, OutDir: t.TempDir()}
	require.True(t, conformance.HierSuite(o)[0].Passed, "without the mutation")
	defer collective.SetHierMutations(themis.Mutations{AGNotReversed: true})()
	res := conformance.HierSuite(o)[0]
	require.False(t, res.Passed, "the mutation passed %d cases", res.Cases)
	assert.Equal(t, 1, res.Cases, "caught on the first case")
	assert.Contains(t, res.Failure, "the AG stages must undo the RS stages in reverse order")
	require.NotNil(t, res.Counterexample)
	assert.Contains(t, res.Failure, "shrunk to")
}

// ForgetAK (the tracker starting at zero although A_K is charged) cannot
// reach packet mode: the hier job schedules without ChargeAK, as
// ASTRA-sim's public code does (docs/themis.md), so its loads start at
// zero with or without the bug, and the property holds either way. Its
// power is shown where A_K is charged: emu/themis's tests.
func TestHierSuiteForgetAKUnreachable(t *testing.T) {
	defer collective.SetHierMutations(themis.Mutations{ForgetAK: true})()
	res := conformance.HierSuite(conformance.SuiteOptions{Count: 4, Seed: 1})[0]
	assert.True(t, res.Passed, res.Failure)
}
