package ars

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

type port struct {
	frames [][]byte
	ready  []time.Duration
}

func (p *port) Push(f []byte, ready time.Duration) bool {
	p.frames, p.ready = append(p.frames, append([]byte(nil), f...)), append(p.ready, ready)
	return true
}

// Installed by name in a switch's pipeline, the program is a
// netreduce.RingHost with a 20-byte header: results leave by their
// receivers' ports after the aggregation latency, and frames that are not
// aggregation traffic are the pipeline's (learned, flooded).
func TestInstalledInTheSwitch(t *testing.T) {
	require.NoError(t, switching.CheckProgram(Name))
	c := newCluster(t, frames.V1, 4, 2, tensor.F32, []uint32{1, 2, 3, 4})
	sw := switching.New(c.clk, "s0", switching.Timing{})
	ports := make([]*port, 4)
	for i := range ports {
		ports[i] = &port{}
		sw.SetPort(i, ports[i], "p")
	}
	prog, err := sw.Program(Name)
	require.NoError(t, err)
	host, ok := prog.(netreduce.RingHost)
	require.True(t, ok)
	assert.Equal(t, HeaderLen, prog.(netreduce.INAHeader).INAHeaderLen())
	require.NoError(t, host.AddRing(c.cfg))
	assert.True(t, host.HasRing(c.cfg.ID))
	// An ACK from rank 1 to rank 0 before anyone is learned: flooded.
	ack := make([]byte, 128)
	b := c.b[1]
	n, err := b.Build(ack, &frames.Packet{Opcode: wire.Acknowledge, PSN: 1, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK}})
	require.NoError(t, err)
	sw.Ingress(1, ack[:n])
	assert.Equal(t, uint64(1), sw.Stats.Flooded)
	for _, p := range ports {
		p.frames, p.ready = nil, nil
	}
	for r := range 4 {
		sw.Ingress(r, c.frame(r, 0, 0))
	}
	for r := range 4 {
		next := (r + 1) % 4
		require.Len(t, ports[next].frames, 1, "rank %d's result goes to rank %d's port", r, next)
		c.checkResult(ports[next].frames[0], r, 0, 0, c.want(0, 0))
		assert.Equal(t, switching.DefaultTiming.AggregateFloat, ports[next].ready[0])
	}
	rep, ok := prog.Report().(Report)
	require.True(t, ok)
	assert.Equal(t, uint64(1), rep.Aggregations)
	assert.Equal(t, uint64(4), rep.ResultPackets)
	sum := rep.Sum(rep).(Report)
	assert.Equal(t, uint64(2), sum.Aggregations)
	assert.Equal(t, 2, sum.Rings)
}

func TestRingBeyondTheMemoryBudgetIsRefused(t *testing.T) {
	sw := switching.New(&clock{}, "s0", switching.Timing{})
	sw.MemoryBudget = 1 << 20
	prog, err := sw.Program(Name)
	require.NoError(t, err)
	err = prog.(netreduce.RingHost).AddRing(netreduce.RingConfig{Workers: 8, Window: 2, MsgLen: 128, MTU: 1024, DType: tensor.F32})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "--switch-memory")
}

// The report's text line names every drop kind and the arbiter's waits,
// and sums over switches (ReportSum) before it is printed.
func TestReportLine(t *testing.T) {
	a := Report{Stats: Stats{Aggregations: 7, ResultResends: 2, EarlyResends: 1, FirstResends: 3, StaleForwards: 4,
		FirstLostDrops: 5, GapDrops: 6, BusyDrops: 8, ICRCDrops: 9, BadDrops: 10, PortDrops: 11, ArbiterWaits: 12, ArbiterWaitNS: 1500}}
	b := Report{Stats: Stats{Aggregations: 1, ArbiterWaits: 1, ArbiterWaitNS: 500}}
	var l switching.ReportLine = a.Sum(b).(Report)
	assert.Equal(t, "8 aggregations, 2 result re-sends, 1 early re-sends, 3 first re-reads, 4 stale forwards; drops: 5 first-lost, 6 gap, 8 busy, 9 ICRC, 10 bad, 11 port; 13 arbiter waits (2µs in all)", l.Line())
}
