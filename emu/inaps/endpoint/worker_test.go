package endpoint

// A worker driven by hand: its NIC's pull (NextFrame) drained into a
// list, results built here from the switch's address, and a PS-side
// channel end (newChannel) for the PS's requests. Expected frames follow
// the documented wire semantics (docs/esa.md): a gradient has flags 0,
// bitmap 1<<rank, fan-in the job's workers, the slot's aggregator, the
// partition's priority, key TaskKey(iteration, seq); a reminder flags
// 0x06 over the channel (kind 2); a resend over the channel is kind 1
// with isResend.

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/vclock"
)

var (
	wSelf = inaps.Addr{MAC: [6]byte{2, 0, 0, 0, 1, 1}, IP: [4]byte{10, 0, 1, 1}}
	wPS   = inaps.Addr{MAC: [6]byte{2, 0, 0, 0, 9, 9}, IP: [4]byte{10, 0, 9, 9}}
)

const wJob = 5

type workerRig struct {
	t     *testing.T
	clk   *vclock.Clock
	w     *Worker
	kicks int
	index []uint16
}

func newWorkerRig(t *testing.T, policy inaps.Policy) *workerRig {
	r := &workerRig{t: t, clk: vclock.New(), index: inaps.IndexTable(wJob, 1000)}
	r.w = NewWorker(WorkerConfig{Job: wJob, Rank: 1, Workers: 3, Self: wSelf, PS: wPS, Policy: policy,
		Index: r.index, Seed: 99, InitWindow: 4, MaxWindow: 4, RTOMin: time.Millisecond}, r.clk, func() { r.kicks++ })
	return r
}

// pull is every frame the worker has now.
func (r *workerRig) pull() [][]byte {
	var fs [][]byte
	for {
		buf := make([]byte, 2048)
		n := r.w.NextFrame(buf)
		if n == 0 {
			return fs
		}
		fs = append(fs, buf[:n])
	}
}

// seqsOf is the INA-PS frames' sequence numbers (channel frames: -kind).
func seqsOf(fs [][]byte) []int {
	var s []int
	for _, f := range fs {
		if IsChannel(f) {
			s = append(s, -int(f[chanOff]))
			continue
		}
		s = append(s, int(wire.INAPS(f[inaps.HeaderOff:]).Seq()))
	}
	return s
}

// result is fragment s's result from the switch.
func (r *workerRig) result(it, s uint32) {
	f := make([]byte, inaps.FrameLen)
	h := inaps.WriteHeaders(f, inaps.SwitchAddr, wSelf)
	h.SetBitmap(0b111)
	h.SetFanIn(3)
	h.SetFlags(wire.INAPSFlagACK)
	h.SetJob(wJob)
	h.SetSeq(uint16(s))
	h.SetKey(inaps.TaskKey(it, s))
	r.w.Receive(f)
}

// checkGradient checks a gradient header: fragment s of iteration it.
func (r *workerRig) checkGradient(h wire.INAPS, it, s uint32, flags, prio uint8, total uint32) {
	r.t.Helper()
	assert.Equal(r.t, uint32(0b010), h.Bitmap(), "bitmap: rank 1")
	assert.Equal(r.t, uint8(3), h.FanIn())
	assert.Equal(r.t, flags, h.Flags())
	assert.Equal(r.t, uint16(wJob), h.Job())
	assert.Equal(r.t, uint16(s), h.Seq())
	assert.Equal(r.t, r.index[(s-1)%inaps.Slots], h.Aggregator(), "the slot's aggregator")
	assert.Equal(r.t, prio, h.Priority())
	assert.Equal(r.t, inaps.TaskKey(it, s), h.Key())
	assert.Equal(r.t, total, h.TensorLength())
	want := make(wire.INAPS, wire.INAPSLen)
	Gradient(want, 99, wJob, 1, it, s)
	assert.Equal(r.t, want.Vector(), h.Vector(), "values: the fragment's place's")
}

func TestWorkerWindow(t *testing.T) {
	r := newWorkerRig(t, inaps.ESA)
	r.w.Begin(0, 10)
	assert.Empty(t, r.pull(), "nothing pushed yet")
	var done []int
	r.w.OnPartitionDone = func(it uint32, index int) { done = append(done, index) }
	r.w.Push(6, 7, 0)
	r.w.Push(4, 9, 1)
	assert.Equal(t, 2, r.kicks, "a push kicks the NIC")

	fs := r.pull()
	require.Equal(t, []int{1, 2, 3, 4}, seqsOf(fs), "the window: 4")
	for i, f := range fs {
		require.True(t, inaps.IsINAPS(f))
		assert.Equal(t, wPS.MAC[:], f[0:6], "to the PS's address (the switch aggregates on the way)")
		assert.Equal(t, wSelf.MAC[:], f[6:12])
		r.checkGradient(wire.INAPS(f[inaps.HeaderOff:]), 0, uint32(i+1), 0, 7, 10)
	}
	assert.Equal(t, uint64(4), r.w.Stats.Sent)

	r.result(0, 1)
	assert.Equal(t, 3, r.kicks, "the window moved")
	assert.Equal(t, []int{5}, seqsOf(r.pull()), "one result, one more")
	r.result(0, 3)
	assert.Empty(t, r.pull(), "a later result does not move the window")
	r.result(0, 2)
	assert.Equal(t, []int{6, 7}, seqsOf(r.pull()), "base 4: up to 7")
	for _, s := range []uint32{4, 5, 6} {
		r.result(0, s)
	}
	assert.Equal(t, []int{0}, done, "partition 0 (1-6) complete")
	fs = r.pull()
	require.Equal(t, []int{8, 9, 10}, seqsOf(fs))
	r.checkGradient(wire.INAPS(fs[0][inaps.HeaderOff:]), 0, 8, 0, 9, 10) // the second partition's priority
	assert.Empty(t, r.pull(), "all pushed are out")
	assert.False(t, r.w.Done())
	for _, s := range []uint32{7, 8, 9, 10} {
		r.result(0, s)
	}
	assert.True(t, r.w.Done())
	assert.Equal(t, []int{0, 1}, done)
	assert.Equal(t, uint64(10), r.w.Stats.Results)

	// Duplicates and another iteration's results are counted, not taken.
	r.result(0, 10)
	r.result(1, 3)
	assert.Equal(t, uint64(2), r.w.Stats.DupResults)
	assert.Equal(t, uint64(10), r.w.Stats.Results)
	assert.Zero(t, r.w.Stats.DupACKs)
	assert.Zero(t, r.w.Stats.Timeouts)
}

// The third result after a missing one declares it lost, once: under esa
// a reminder goes to the PS over the channel.
func TestWorkerDupACKReminder(t *testing.T) {
	r := newWorkerRig(t, inaps.ESA)
	r.w.Begin(2, 8)
	r.w.Push(8, 1, 0)
	require.Equal(t, []int{1, 2, 3, 4}, seqsOf(r.pull()))
	r.result(2, 2)
	r.result(2, 3)
	assert.Zero(t, r.w.Stats.DupACKs, "two later results: not yet")
	assert.Empty(t, r.pull())
	r.result(2, 4)
	assert.Equal(t, uint64(1), r.w.Stats.DupACKs)
	assert.Equal(t, uint64(1), r.w.Stats.Reminders)
	fs := r.pull()
	require.Len(t, fs, 1, "the reminder only (the window has not moved)")
	f := fs[0]
	require.True(t, IsChannel(f))
	assert.Equal(t, wPS.MAC[:], f[0:6])
	assert.Equal(t, uint16(ChannelPort), binary.BigEndian.Uint16(f[udpOff+2:]))
	assert.Equal(t, byte(KindReminder), f[chanOff])
	assert.Equal(t, uint32(0), binary.BigEndian.Uint32(f[chanOff+2:]), "the channel's first message")
	h := wire.INAPS(f[msgOff:])
	assert.Equal(t, uint8(0x06), h.Flags(), "a reminder's flags")
	assert.Equal(t, uint32(0b010), h.Bitmap())
	assert.Equal(t, uint16(wJob), h.Job())
	assert.Equal(t, uint16(1), h.Seq())
	assert.Equal(t, r.index[0], h.Aggregator())
	assert.Equal(t, inaps.TaskKey(2, 1), h.Key())
	assert.Equal(t, uint32(1), h.TensorLength(), "the full sequence number")

	r.result(2, 4) // a duplicate: no second trigger
	assert.Equal(t, uint64(1), r.w.Stats.DupACKs)
	assert.Empty(t, r.pull())
}

// Under fcfs the lost fragment goes to the switch again with isResend.
func TestWorkerDupACKResendFCFS(t *testing.T) {
	r := newWorkerRig(t, inaps.FCFS)
	r.w.Begin(0, 8)
	r.w.Push(8, 1, 0)
	require.Equal(t, []int{1, 2, 3, 4}, seqsOf(r.pull()))
	for _, s := range []uint32{2, 3, 4} {
		r.result(0, s)
	}
	assert.Equal(t, uint64(1), r.w.Stats.DupACKs)
	fs := r.pull()
	require.Equal(t, []int{1}, seqsOf(fs), "fragment 1 again; the window is still full")
	require.True(t, inaps.IsINAPS(fs[0]))
	r.checkGradient(wire.INAPS(fs[0][inaps.HeaderOff:]), 0, 1, wire.INAPSFlagResend, 0, 8)
	assert.Equal(t, uint64(1), r.w.Stats.Retransmits)
}

// psEnd is the PS's end of the worker's channel.
func psEnd(r *workerRig) (*channel, *outQueue) {
	q := &outQueue{}
	return newChannel(r.clk, wPS, wSelf, q, func() {}, time.Millisecond, func(Kind, wire.INAPS) {}), q
}

// requestResend sends the PS's resend request for (it, s) to the worker.
func requestResend(r *workerRig, ps *channel, q *outQueue, it, s uint32) {
	ps.Send(KindResend, func(h wire.INAPS) {
		h.SetJob(wJob)
		h.SetSeq(uint16(s))
		h.SetKey(inaps.TaskKey(it, s))
	})
	buf := make([]byte, 2048)
	n := q.pop(buf)
	require.NotZero(r.t, n)
	r.w.Receive(buf[:n])
}

// A resend request for a fragment not sent yet (the worker not even in
// the iteration) is kept: when the window reaches the fragment it goes
// to the PS over the channel, never to the switch, and only then.
func TestWorkerResendBeforeBegin(t *testing.T) {
	r := newWorkerRig(t, inaps.ESA)
	ps, q := psEnd(r)
	requestResend(r, ps, q, 0, 1)
	for _, f := range r.pull() {
		require.True(t, IsChannel(f))
		assert.Equal(t, byte(KindACK), f[chanOff], "only the channel's ACK before Begin")
	}
	r.w.Begin(0, 6)
	assert.Empty(t, r.pull(), "nothing before the push")
	r.w.Push(6, 3, 0)
	fs := r.pull()
	require.Equal(t, []int{-int(KindGradient), 2, 3, 4}, seqsOf(fs), "fragment 1 over the channel, 2-4 to the switch")
	f := fs[0]
	assert.Equal(t, wPS.MAC[:], f[0:6])
	r.checkGradient(wire.INAPS(f[msgOff:]), 0, 1, wire.INAPSFlagResend, 3, 6)
	for _, f := range fs[1:] {
		require.True(t, inaps.IsINAPS(f))
		assert.Zero(t, wire.INAPS(f[inaps.HeaderOff:]).Flags())
	}
	assert.Equal(t, uint64(4), r.w.Stats.Sent)
	assert.Equal(t, uint64(1), r.w.Stats.Retransmits)
}

// A resend request for a fragment already sent is answered at once over
// the channel (its values made again from its place).
func TestWorkerResendAfterSend(t *testing.T) {
	r := newWorkerRig(t, inaps.ESA)
	ps, q := psEnd(r)
	r.w.Begin(1, 6)
	r.w.Push(6, 3, 0)
	require.Equal(t, []int{1, 2, 3, 4}, seqsOf(r.pull()))
	requestResend(r, ps, q, 1, 2)
	fs := r.pull()
	require.NotEmpty(t, fs)
	require.True(t, IsChannel(fs[0]))
	for _, f := range fs[1:] {
		assert.Equal(t, byte(KindACK), f[chanOff], "then only the channel's ACK")
	}
	assert.Equal(t, byte(KindGradient), fs[0][chanOff])
	assert.Equal(t, uint32(1), binary.BigEndian.Uint32(fs[0][chanOff+6:]), "it acknowledges the request")
	r.checkGradient(wire.INAPS(fs[0][msgOff:]), 1, 2, wire.INAPSFlagResend, 3, 6)
	assert.Equal(t, uint64(1), r.w.Stats.Retransmits)
}

// Static: the window is half the region; packet n's aggregator is
// StaticIndex's, and the gradient goes to the job's group.
func TestWorkerStatic(t *testing.T) {
	clk := vclock.New()
	w := NewWorker(WorkerConfig{Job: wJob, Rank: 0, Workers: 2, Self: wSelf, Policy: inaps.Static, First: 20, Size: 6, Seed: 1, RTOMin: time.Millisecond}, clk, func() {})
	w.Begin(1, 5)
	w.Push(5, 0, 0)
	group := inaps.GroupAddr(wJob)
	var got []uint16
	for {
		buf := make([]byte, 2048)
		if w.NextFrame(buf) == 0 {
			break
		}
		assert.Equal(t, group.MAC[:], buf[0:6])
		got = append(got, wire.INAPS(buf[inaps.HeaderOff:]).Aggregator())
	}
	// Iteration 1 of 5 fragments: packets 6, 7, 8 of the job. Half 3:
	// packet 6 is slot 5 mod 3 = 2 of set 5/3 mod 2 = 1 (20 + 3 + 2);
	// 7 slot 0 of set 0 (20); 8 slot 1 of set 0 (21).
	assert.Equal(t, []uint16{25, 20, 21}, got, "window 3")
}

// The oldest fragment's result overdue by the RTO (no sample yet: the
// minimum, 1 ms) starts its recovery: under esa a reminder to the PS.
func TestWorkerTimeout(t *testing.T) {
	r := newWorkerRig(t, inaps.ESA)
	r.w.Begin(0, 4)
	r.w.Push(4, 1, 0)
	require.Equal(t, []int{1, 2, 3, 4}, seqsOf(r.pull()))
	r.clk.Advance(time.Millisecond - 1)
	assert.Zero(t, r.w.Stats.Timeouts, "not yet")
	r.clk.Advance(1)
	assert.Equal(t, uint64(1), r.w.Stats.Timeouts)
	fs := r.pull()
	require.Len(t, fs, 1)
	require.True(t, IsChannel(fs[0]))
	assert.Equal(t, byte(KindReminder), fs[0][chanOff])
	assert.Equal(t, uint16(1), wire.INAPS(fs[0][msgOff:]).Seq(), "the oldest")
}
