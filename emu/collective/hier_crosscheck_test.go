package collective

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/themis"
	"github.com/inaemu/inaemu/emu/themis/flow"
	"github.com/inaemu/inaemu/tensor"
)

// The cross-check of packet mode (the hier job) against the flow-level
// executor (emu/themis/flow) on scaled-down platforms (docs/themis.md,
// "Packet mode against the flow model, and the suite"): the same dims
// fabric read into a themis.Topology the way the hier job reads it
// (hierDims, themisTopology), the same schedules (themis.Schedule) and
// policy, one run of each; compared: the job's time and every
// dimension's payload.

// RoCEv2 framing the fluid model does not see, per frame on the wire:
// preamble+SFD 8, Ethernet 14, IPv4 20, UDP 8, BTH 12, ICRC 4, FCS 4,
// inter-packet gap 12 (IEEE 802.3 clause 4.4.2; InfiniBand Architecture
// Specification Vol. 1 Annex A17, RoCEv2); per WRITE-with-immediate
// message: RETH 16 and ImmDt 4 (IBTA Vol. 1 §9.3).
const (
	xFrameOverhead = 8 + 14 + 20 + 8 + 12 + 4 + 4 + 12
	xMsgOverhead   = 16 + 4
)

// xCase is one configuration run both ways.
type xCase struct {
	flag          string
	tensor        int64
	chunks        int
	sched, policy string
	mtu, msgLen   int
}

func (c xCase) String() string {
	return fmt.Sprintf("%s %dKiB %d chunks %s/%s mtu=%d msg=%d", c.flag, c.tensor>>10, c.chunks, c.sched, c.policy, c.mtu, c.msgLen)
}

// xRun is what both sides measured, and the case's a-priori figures.
type xRun struct {
	packetS, flowS float64
	// packetB and flowB are each dimension's payload, every rank's.
	packetB, flowB []float64
	// beta is the wire's bytes per payload byte of full frames and
	// messages: what headers cost a bandwidth-bound transfer.
	beta float64
	// stepShare is the per-step costs over the bytes' time, summed over
	// every stage of the schedule: the model's fixed delays (steps × step
	// latency) plus, on a switch dimension, one frame stored and forwarded
	// by the switch per step, which a fluid does not pay. Small, the run
	// is bandwidth-bound.
	stepShare float64
	tp        themis.Topology
	scheds    []themis.ChunkSchedule
	fr        flow.Result
	hj        *hierJob
	cfg       job.Config
}

// frameSeconds is the time a frame carrying up to block payload bytes of
// a message takes on a link of rate b/s (headers included).
func frameSeconds(mtu int, block float64, rate float64) float64 {
	return (math.Min(float64(mtu), block) + xFrameOverhead + xMsgOverhead) * 8 / rate
}

func crossRun(t *testing.T, c xCase) xRun {
	t.Helper()
	cfg := job.DefaultConfig()
	cfg.Topology = flagTopo(t, c.flag)
	cfg.Mode, cfg.DType, cfg.Seed = Hier, tensor.F32, 5
	cfg.Workers = len(cfg.Topology.Hosts())
	cfg.TensorBytes = c.tensor
	cfg.MTU, cfg.MsgLen = c.mtu, c.msgLen
	cfg.Hier = &job.Hier{Chunks: c.chunks, Scheduler: c.sched, Policy: c.policy}
	require.NoError(t, cfg.Validate())
	u := startJob(t, cfg)
	res := u.Loop()
	require.NoError(t, u.Err())
	hj := u.Jobs[0].Alg.(*hierJob)
	require.Nil(t, hj.Check(), "%v: every rank exact", c)
	jr := res.Jobs[0]

	dims, err := hierDims(cfg.Topology, cfg.Link.Rate, cfg.Link.Latency)
	require.NoError(t, err)
	tp, idx := themisTopology(dims)
	scheds, _, err := themis.Schedule(tp, themis.AllReduce, float64(c.tensor), themis.Config{Scheduler: themis.Scheduler(c.sched), Chunks: c.chunks})
	require.NoError(t, err)
	fr, err := flow.Run(tp, scheds, flow.Config{Policy: themis.Policy(c.policy)})
	require.NoError(t, err)

	x := xRun{packetS: float64(jr.VirtualNS) / 1e9, flowS: fr.Seconds, tp: tp, scheds: scheds, fr: fr, hj: hj, cfg: cfg}
	x.beta = float64(c.mtu+xFrameOverhead)/float64(c.mtu) + xMsgOverhead/float64(c.mtu*c.msgLen)
	n := float64(tp.NPUs())
	for k, d := range idx {
		x.packetB = append(x.packetB, float64(jr.Hier.Dims[d].PayloadBytes))
		x.flowB = append(x.flowB, fr.Dims[k].Bytes*n)
	}
	var step, bytes float64
	for _, cs := range scheds {
		for _, st := range cs.Stages {
			d := tp[st.Dim]
			bytes += st.SentBytes / d.BW
			step += themis.FixedSeconds(d, st.Op)
			if d.Kind == themis.Switch {
				steps := float64(themis.Steps(d.Kind, d.Size))
				step += steps * frameSeconds(c.mtu, st.SentBytes/steps, d.BW*8)
			}
		}
	}
	x.stepShare = step / bytes
	return x
}

// TestHierAgreesWithTheFlowModel: where the fluid model's assumptions
// hold — frames of 4096 bytes (headers 2 % of the wire) and the run
// bandwidth-bound (the per-step costs at most 0.5 % of the bytes' time)
// — packet mode's time is within 3 % of the flow executor's, on 2-D and
// 3-D fabrics of 8 to 64 hosts with ring, full-mesh and switch
// dimensions, 1 to 16 chunks, the baseline and Themis, FIFO and SCF;
// and every dimension's payload is the flow model's exactly, everywhere.
// Outside that domain (MTU 1024: headers 8 %; small chunks: the steps'
// costs) the deviation is logged with the share that explains it, and
// with the headers taken out it is again within 3 % wherever the run is
// bandwidth-bound.
func TestHierAgreesWithTheFlowModel(t *testing.T) {
	if testing.Short() {
		t.Skip("21 packet-mode runs")
	}
	type m struct{ sched, policy string }
	methods := []m{{"baseline", "fifo"}, {"themis", "fifo"}, {"themis", "scf"}}
	var cases []xCase
	add := func(flag string, tensor int64, chunks []int, mtu, msgLen int) {
		for _, ch := range chunks {
			for _, mm := range methods {
				cases = append(cases, xCase{flag, tensor, ch, mm.sched, mm.policy, mtu, msgLen})
			}
		}
	}
	one := func(flag string, tensor int64, chunks int, sched, policy string, mtu, msgLen int) {
		cases = append(cases, xCase{flag, tensor, chunks, sched, policy, mtu, msgLen})
	}
	// Inside the domain (one chunk: every scheduler gives the baseline's
	// order, so the baseline alone).
	one("dims:4x2,kinds=ring/switch", 8<<20, 1, "baseline", "fifo", 4096, 64)
	add("dims:4x2,kinds=ring/switch", 8<<20, []int{4}, 4096, 64)
	one("dims:4x4,kinds=fc/ring", 8<<20, 1, "baseline", "fifo", 4096, 64)
	add("dims:4x4,kinds=fc/ring", 8<<20, []int{4}, 4096, 64)
	one("dims:4x4,kinds=ring/switch,links=10G/40G", 16<<20, 4, "baseline", "fifo", 4096, 64)
	add("dims:2x2x2,kinds=ring/fc/switch", 16<<20, []int{4}, 4096, 64)
	one("dims:4x2x4,kinds=fc/ring/switch,links=40G/10G/20G", 16<<20, 1, "baseline", "fifo", 4096, 64)
	one("dims:8x8,kinds=switch/ring,links=40G/10G", 16<<20, 1, "baseline", "fifo", 4096, 64)
	one("dims:4x4x4,kinds=ring/switch/fc", 16<<20, 1, "baseline", "fifo", 4096, 64)
	// Outside it: 1024-byte frames (headers 8 %); small chunks, where the
	// switch's store-and-forward per step adds up on Themis's critical
	// path, which runs through the switch dimension.
	one("dims:4x4,kinds=ring/switch,links=10G/40G", 4<<20, 8, "baseline", "fifo", 1024, 170)
	one("dims:4x4,kinds=ring/switch,links=10G/40G", 4<<20, 8, "themis", "scf", 1024, 170)
	one("dims:4x4,kinds=ring/switch,links=10G/40G", 16<<20, 4, "themis", "scf", 4096, 64)
	one("dims:4x2x4,kinds=fc/ring/switch,links=40G/10G/20G", 4<<20, 16, "baseline", "fifo", 4096, 64)
	one("dims:4x2x4,kinds=fc/ring/switch,links=40G/10G/20G", 4<<20, 16, "themis", "fifo", 4096, 64)
	one("dims:4x4x4,kinds=ring/switch/fc", 256<<10, 16, "themis", "scf", 4096, 64)

	inside := 0
	for _, c := range cases {
		x := crossRun(t, c)
		for k := range x.packetB {
			assert.InDelta(t, x.flowB[k], x.packetB[k], 1e-9*x.flowB[k], "%v: dim%d payload", c, k+1)
		}
		r := x.packetS / x.flowS
		holds := c.mtu >= 4096 && x.stepShare <= 0.005
		t.Logf("%-72v packet/flow %.4f  without headers %.4f  step costs %.2f %%  %s", c, r, r/x.beta, 100*x.stepShare,
			map[bool]string{true: "assumptions hold", false: "outside"}[holds])
		if holds {
			inside++
			assert.InDelta(t, 1, r, 0.03, "%v: packet %.6fs flow %.6fs", c, x.packetS, x.flowS)
		} else if x.stepShare <= 0.005 {
			assert.InDelta(t, 1, r/x.beta, 0.03, "%v: headers account for packet/flow %.4f (β %.4f)", c, r, x.beta)
		}
	}
	assert.Equal(t, 11, inside, "cases inside the domain")
}

// TestHierStagesCostWhatTheWireAdds explains the deviation outside the
// domain stage by stage, on a platform where Themis keeps a switch
// dimension on the critical path (2x2x2, 16 chunks of 256 KiB, MTU
// 4096): every stage of packet mode (first rank's start to last rank's
// end) takes the flow model's bytes/BW times the headers' β, plus the
// model's fixed delay, plus — on the switch dimension only — one frame's
// store-and-forward per step: within 1.5 %, while the whole job is more
// than 3 % behind the flow model's.
func TestHierStagesCostWhatTheWireAdds(t *testing.T) {
	c := xCase{"dims:2x2x2,kinds=ring/fc/switch", 4 << 20, 16, "themis", "fifo", 4096, 64}
	x := crossRun(t, c)
	assert.Greater(t, x.packetS/x.flowS, 1.03, "outside the domain: %v", c)
	var sw int
	for _, rec := range x.fr.Stages {
		st := x.scheds[rec.Chunk].Stages[rec.Stage]
		d := x.tp[st.Dim]
		a := x.hj.active[rec.Chunk][rec.Stage]
		got := (a[1] - a[0]).Seconds()
		want := x.beta*st.SentBytes/d.BW + themis.FixedSeconds(d, st.Op)
		if d.Kind == themis.Switch {
			steps := float64(themis.Steps(d.Kind, d.Size))
			want += steps * frameSeconds(c.mtu, st.SentBytes/steps, d.BW*8)
			sw++
		}
		assert.InEpsilon(t, want, got, 0.015, "C%d.%d on dim%d (%s): packet %v, fluid %v", rec.Chunk+1, rec.Stage+1, st.Dim+1, d.Kind,
			time.Duration(got*1e9), time.Duration((rec.EndS-rec.StartS)*1e9))
	}
	assert.Equal(t, 16*2, sw, "each chunk's RS and AG on the switch")
}
