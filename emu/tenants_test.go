package emu

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/faults"
)

// Tenants of one switch (NetReduce §6: disjoint ring IDs and memory):
// job b's faults — loss, corruption, duplicates, reordering, lost ACKs,
// and forgeries of b's frames entering by a port of job a's — change
// nothing of job a when the two share no link: a's result is exact, its
// counters are the same and its virtual time within 0.5 % of a run in
// which b has no faults.
func TestTenantIsolation(t *testing.T) {
	base := DefaultConfig()
	base.Workers, base.TensorBytes, base.Seed, base.Window = 8, 1<<20, 21, 4
	base.Jobs = []JobSpec{
		{Name: "a", Mode: NetReduce, Ranks: []string{"h0", "h1", "h2", "h3"}},
		{Name: "b", Mode: NetReduce, Ranks: []string{"h4", "h5", "h6", "h7"}},
	}
	clean := runOK(t, base)
	faulted := base
	for _, e := range []string{
		"drop port=4 dir=in class=data prob=2%",
		"corrupt port=5 dir=out class=any prob=1%",
		"corrupt port=7 dir=in class=data prob=1%",
		"dup port=6 dir=in class=data every=7",
		"hold=3 port=7 dir=out class=data every=11",
		"drop port=5 dir=in class=ack prob=5%",
		"spoof=0 port=4 dir=in class=data every=13",
		"spoof=3 port=6 dir=in class=data nth=2",
	} {
		ev, err := faults.Parse(e)
		require.NoError(t, err, e)
		faulted.Events = append(faulted.Events, ev)
	}
	res := runOK(t, faulted)
	a, a0, b := res.Jobs[0], clean.Jobs[0], res.Jobs[1]
	require.Positive(t, b.Retransmissions, "b's faults hit b")
	assert.Positive(t, res.Switch.PortSecurity, "the forgeries reached the switch and were dropped at its ports")
	assert.Equal(t, a0.FramesSent, a.FramesSent)
	assert.Equal(t, a0.Retransmissions, a.Retransmissions)
	assert.Equal(t, a0.NAKs, a.NAKs)
	assert.Equal(t, a0.Timeouts, a.Timeouts)
	assert.InDelta(t, 1, float64(a.VirtualNS)/float64(a0.VirtualNS), 0.005, "a: %v with b faulted, %v without", time.Duration(a.VirtualNS), time.Duration(a0.VirtualNS))
	// Each ring holds its own RingID and memory on s0.
	require.NotNil(t, a.Ring)
	require.NotNil(t, b.Ring)
	assert.Equal(t, JobRing{Switch: "s0", ID: 0, MemoryBytes: a.Ring.MemoryBytes, Counters: a.Ring.Counters}, *a.Ring)
	assert.Equal(t, JobRing{Switch: "s0", ID: 1, MemoryBytes: a.Ring.MemoryBytes, Counters: b.Ring.Counters}, *b.Ring, "the same ring shape reserves the same memory")
	assert.Positive(t, a.Ring.MemoryBytes)
	// The switch's counters of a's ring are those of the clean run; b's
	// ring has the corruption drops (the forgeries never reach the
	// accelerator: port security drops them at a's ports), and the rings'
	// counters add up to the switch's but for frames of no ring.
	assert.Equal(t, a0.Ring.Counters, a.Ring.Counters)
	assert.Positive(t, b.Ring.Counters.ICRCDrops)
	assert.Zero(t, a.Ring.Counters.PortDrops+a.Ring.Counters.ICRCDrops)
	sum := a.Ring.Counters
	sum.Add(b.Ring.Counters)
	assert.Equal(t, netreduce.StatsOf(res.Switch).Packets, sum.Packets)
	assert.Equal(t, netreduce.StatsOf(res.Switch).PortDrops, sum.PortDrops)
	assert.Equal(t, netreduce.StatsOf(res.Switch).Aggregations, sum.Aggregations)
	assert.Equal(t, netreduce.StatsOf(res.Switch).ResultPackets, sum.ResultPackets)
	t.Logf("a: %v with b faulted (%d retransmissions, %d port drops), %v without", time.Duration(a.VirtualNS), b.Retransmissions, netreduce.StatsOf(res.Switch).PortDrops, time.Duration(a0.VirtualNS))
}

// Two NetReduce jobs on the same four hosts share each host's NIC: each
// takes twice as long as alone (within 5 %), and neither more than 5 %
// longer than the other.
func TestTenantsShareNICs(t *testing.T) {
	base := DefaultConfig()
	base.Workers, base.TensorBytes, base.Seed = 4, 2<<20, 5
	hosts := []string{"h0", "h1", "h2", "h3"}
	solo := base
	solo.Jobs = []JobSpec{{Name: "a", Mode: NetReduce, Ranks: hosts}}
	alone := runOK(t, solo).Jobs[0].VirtualNS
	both := base
	both.Jobs = []JobSpec{{Name: "a", Mode: NetReduce, Ranks: hosts}, {Name: "b", Mode: NetReduce, Ranks: hosts}}
	res := runOK(t, both)
	for _, j := range res.Jobs {
		assert.InDelta(t, 2, float64(j.VirtualNS)/float64(alone), 0.1, "job %s: %v shared, %v alone", j.Name, time.Duration(j.VirtualNS), time.Duration(alone))
	}
	ta, tb := float64(res.Jobs[0].VirtualNS), float64(res.Jobs[1].VirtualNS)
	t.Logf("alone %v; shared a %v (%.3f×), b %v (%.3f×)", time.Duration(alone), time.Duration(ta), ta/float64(alone), time.Duration(tb), tb/float64(alone))
	assert.InDelta(t, 1, ta/tb, 0.05)
}

// A forgery of a Ring-AllReduce job's WRITE is dropped at the switch port
// it enters by, whatever the run's other jobs are: no switch program
// judges a ring job's frames, so port security (each host port bound to
// its NIC's MAC and address) is what protects it. Before it, a run with a
// NetReduce job beside accepted the spoof and the forged WRITE was
// written: "job c rank 0 element 767 is 1.5354624e+38".
func TestSpoofDroppedForEveryJob(t *testing.T) {
	for _, jobs := range [][]JobSpec{
		{{Name: "a", Mode: NetReduce, Ranks: []string{"h0", "h1"}}, {Name: "c", Mode: Ring, Ranks: []string{"h2", "h3", "h4"}}},
		{{Name: "c", Mode: Ring, Ranks: []string{"h2", "h3", "h4"}}},
	} {
		cfg := DefaultConfig()
		cfg.Workers, cfg.TensorBytes, cfg.Seed = 5, 64<<10, 3
		cfg.Jobs = jobs
		for _, e := range []string{"spoof=0 port=2 dir=in class=data every=5", "spoof=3 port=4 dir=in class=data nth=2"} {
			ev, err := faults.Parse(e)
			require.NoError(t, err, e)
			cfg.Events = append(cfg.Events, ev)
		}
		res := runOK(t, cfg)
		require.Positive(t, res.Faults.Spoofed)
		assert.Equal(t, res.Faults.Spoofed, res.Switch.PortSecurity, "every forgery dropped at its port")
	}
}
