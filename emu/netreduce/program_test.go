package netreduce_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
)

// legacyReport is the switch report as it was before switch programs
// were plug-ins: NetReduce's counters embedded beside the pipeline's.
type legacyReport struct {
	netreduce.Stats
	switching.Counters
}

// other is a program with a report of its own.
type other struct{ n uint64 }

func (o *other) Name() string                                          { return "other" }
func (o *other) Process(*frames.View, int, switching.ProgramEmit) bool { return false }
func (o *other) MemoryBytes() int64                                    { return 0 }
func (o *other) Report() any                                           { return struct{ N uint64 }{o.n} }

// TestSwitchReportKeepsNetReduceFlat: the switch report's JSON is the same
// bytes as when it embedded netreduce.Stats, with the accelerator and
// without one (a ring-only run's switch shows NetReduce's zeros), so the
// pinned reports and their readers keep working; another program's
// report is under its name, and the JSON reads back.
func TestSwitchReportKeepsNetReduceFlat(t *testing.T) {
	st := netreduce.Stats{Packets: 3, Aggregations: 1, ICRCDrops: 2, TreeStats: netreduce.TreeStats{Translated: 4}}
	c := switching.Counters{Frames: 9, Forwarded: 5, PortSecurity: 1}
	for _, tc := range []struct {
		name string
		rep  switching.Report
		want legacyReport
	}{
		{"netreduce", switching.Report{Counters: c, Programs: map[string]any{"netreduce": st}}, legacyReport{st, c}},
		{"no program", switching.Report{Counters: c}, legacyReport{Counters: c}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(tc.rep)
			require.NoError(t, err)
			want, err := json.Marshal(tc.want)
			require.NoError(t, err)
			assert.Equal(t, string(want), string(got))
			var back switching.Report
			require.NoError(t, json.Unmarshal(got, &back))
			assert.Equal(t, tc.want.Stats, netreduce.StatsOf(back))
			assert.Equal(t, c, back.Counters)
		})
	}

	r := switching.Report{Counters: c, Programs: map[string]any{"netreduce": st, "zz": map[string]int{"n": 7}}}
	got, err := json.Marshal(r)
	require.NoError(t, err)
	want, _ := json.Marshal(legacyReport{st, c})
	assert.Equal(t, string(want[:len(want)-1])+`,"zz":{"n":7}}`, string(got), "another program's report follows, under its name")
}

// TestSwitchReportSums: a run's switches add up, NetReduce's counters by
// Stats.Add; a program whose report does not sum is kept per switch.
func TestSwitchReportSums(t *testing.T) {
	var total switching.Report
	total.Add(switching.Report{Counters: switching.Counters{Frames: 1}, Programs: map[string]any{"netreduce": netreduce.Stats{Packets: 2}, "other": 1}})
	total.Add(switching.Report{Counters: switching.Counters{Frames: 3}, Programs: map[string]any{"netreduce": netreduce.Stats{Packets: 5}, "other": 2}})
	assert.Equal(t, uint64(4), total.Frames)
	assert.Equal(t, uint64(7), netreduce.StatsOf(total).Packets)
	assert.Equal(t, switching.PerSwitch{1, 2}, total.Programs["other"])
}

// TestProgramByName: a switch installs the program a job names on the
// first ask and returns the same one after; an unknown name is refused
// with the registered names and the nearest.
func TestProgramByName(t *testing.T) {
	sw := switching.New(nil, "tor0", switching.Timing{})
	assert.Nil(t, sw.Installed("netreduce"))
	p, err := sw.Program("netreduce")
	require.NoError(t, err)
	assert.IsType(t, &netreduce.Program{}, p)
	again, err := sw.Program("netreduce")
	require.NoError(t, err)
	assert.Same(t, p, again)
	assert.Len(t, sw.Programs(), 1)
	var _ netreduce.RingHost = p.(*netreduce.Program)
	var _ netreduce.RingCounter = p.(*netreduce.Program)
	var _ netreduce.CTTHolder = p.(*netreduce.Program)

	_, err = sw.Program("netredcue")
	require.Error(t, err)
	assert.Contains(t, err.Error(), `switch program "netredcue": want `)
	assert.Contains(t, err.Error(), "(did you mean netreduce?)")
	assert.Contains(t, switching.ProgramNames(), "netreduce")

	sw.Install(&other{n: 3})
	rep := sw.Report()
	assert.Equal(t, struct{ N uint64 }{3}, rep.Programs["other"])
	assert.Equal(t, netreduce.Stats{}, rep.Programs["netreduce"])
}
