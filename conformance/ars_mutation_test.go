package conformance_test

import "testing"

// arsMutations are bugs an AllReduce-Switch program (emu/ars) could have,
// put in; the suites, run against it (--switch-program ars), must catch
// each.
var arsMutations = []mutation{
	{
		// Slots mixed between ports: each member's frame lands rank
		// slots further on in its flow's column, so an index sums one
		// port's frame k with another's frame k-1. (A shift the same for
		// every port is harmless end to end: the ports still meet.)
		name: "ars-slots-mixed-between-ports",
		file: "emu/ars/ars.go",
		old:  "\ti := index(col, off)\n",
		new:  "\ti := index(col, (off+m.rank)%FlowFrames)\n",
		args: []string{"--switch-program", "ars"},
	},
	{
		// A re-sent frame whose index is complete is dropped instead of
		// answered from the result buffer: a connection whose result was
		// lost never gets it.
		name: "ars-no-retransmission-answer",
		file: "emu/ars/ars.go",
		old:  "\t\tp.st.ResultResends++\n\t\temit(out, p.timing.Resend+wait)\n",
		new:  "\t\tp.st.ResultResends++\n\t\t_ = wait\n",
		args: []string{"--switch-program", "ars"},
	},
}

// TestSuitesCatchARSMutations proves the suites' power against the
// AllReduce-Switch program: with each of arsMutations put back, the
// default aggregation run against it (100 cases) fails at seed 1 with a
// shrunk counterexample that replays (requireCaught).
func TestSuitesCatchARSMutations(t *testing.T) { requireAllCaught(t, arsMutations, []string{"1"}) }
