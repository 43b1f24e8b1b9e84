package inaps_test

// The INA-PS switch program is driven through a real switching.Switch:
// hand-built frames go in by Ingress, every port's Egress is a fake that
// records what it was handed, and the clock is a fake that never moves.
// Expected headers, values and ports are worked out here from the
// documented rules (docs/esa.md, the program's comments): sums are
// computed in int64 and truncated to int32 (the registers wrap), never
// read back from the program.

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames/wire"
)

// ---- fakes ----

type fakeClock struct{ now time.Duration }

func (c *fakeClock) Now() time.Duration { return c.now }

type pushed struct {
	frame []byte
	ready time.Duration
}

// fakePort is an Egress that records a copy of every frame.
type fakePort struct{ got []pushed }

func (p *fakePort) Push(frame []byte, ready time.Duration) bool {
	p.got = append(p.got, pushed{bytes.Clone(frame), ready})
	return true
}

const (
	t0       = 10 * time.Microsecond
	latency  = 300 * time.Nanosecond // Config.Latency
	resubmit = 70 * time.Nanosecond  // Config.Resubmit: distinct, so a swap's ready time shows it
	nports   = 8
)

// host is host i's address; host i sits behind port i.
func host(i int) inaps.Addr {
	return inaps.Addr{MAC: [6]byte{0x02, 0, 0, 0, 0, byte(0x10 + i)}, IP: [4]byte{10, 0, 0, byte(0x10 + i)}}
}

// The test jobs: job 1 has workers on ports 0-2 and its PS on port 6;
// job 2 workers on ports 3-4 and its PS on port 7.
var (
	job1 = inaps.Job{ID: 1, Workers: []inaps.Addr{host(0), host(1), host(2)}, PS: host(6)}
	job2 = inaps.Job{ID: 2, Workers: []inaps.Addr{host(3), host(4)}, PS: host(7)}
)

type rig struct {
	t     *testing.T
	clk   *fakeClock
	sw    *switching.Switch
	prog  *inaps.Program
	ports []*fakePort
}

func newRig(t *testing.T, policy inaps.Policy, aggregators int, seed uint64, jobs ...inaps.Job) *rig {
	t.Helper()
	r := &rig{t: t, clk: &fakeClock{now: t0}}
	r.sw = switching.New(r.clk, "s0", switching.Timing{Forward: 1})
	for p := 0; p < nports; p++ {
		fp := &fakePort{}
		r.ports = append(r.ports, fp)
		r.sw.SetPort(p, fp, fmt.Sprintf("s0-port%d", p))
		r.sw.Route(host(p).MAC, []int{p})
	}
	p, err := r.sw.Program(inaps.ProgramName)
	require.NoError(t, err)
	r.prog = p.(*inaps.Program)
	require.NoError(t, r.prog.Setup(inaps.Config{Policy: policy, Aggregators: aggregators, Seed: seed, Latency: latency, Resubmit: resubmit}))
	for _, j := range jobs {
		require.NoError(t, r.prog.AddJob(j))
	}
	t.Cleanup(func() {
		assert.Zero(t, r.prog.Stats().LostContributions, "lost contributions")
	})
	return r
}

// out is one frame a port was handed.
type out struct {
	port  int
	frame []byte
	ready time.Duration
}

func (o out) h() wire.INAPS { return wire.INAPS(o.frame[inaps.HeaderOff:inaps.FrameLen]) }

// take is what every port was handed since the last call, in port order.
func (r *rig) take() []out {
	var all []out
	for p, fp := range r.ports {
		for _, g := range fp.got {
			all = append(all, out{p, g.frame, g.ready})
		}
		fp.got = nil
	}
	return all
}

// none checks that nothing left.
func (r *rig) none(what string) {
	r.t.Helper()
	assert.Empty(r.t, r.take(), "%s: no frame may leave", what)
}

// ---- frames ----

// values is worker w's contribution to fragment (job, iteration, seq):
// near the int32 bounds, so a sum of two or more wraps.
func values(job uint16, w int, it uint32, seq uint32) [inaps.Values]int32 {
	var v [inaps.Values]int32
	for i := range v {
		x := int64(2147483000) - int64(i)*7919 - int64(w)*104729 - int64(seq)*13 - int64(it)*31 - int64(job)*3
		if (i+w)%2 == 1 {
			x = -x - 1
		}
		v[i] = int32(x)
	}
	return v
}

// sum is the registers' sum of the given contributions: in int64, then
// truncated to 32 bits (two's complement wrapping).
func sum(vs ...[inaps.Values]int32) [inaps.Values]int32 {
	var s [inaps.Values]int32
	for i := range s {
		var t int64
		for _, v := range vs {
			t += int64(v[i])
		}
		s[i] = int32(uint32(uint64(t)))
	}
	return s
}

// task names a fragment and the aggregator its packets use.
type task struct {
	job  inaps.Job
	it   uint32 // iteration
	seq  uint32 // full sequence number (from 1)
	agg  uint16
	prio uint8
}

// gradient is worker w's contribution to t, from w to the job's PS
// (esa, fcfs) with the given flags.
func gradient(t task, w int, flags uint8) []byte {
	f := make([]byte, inaps.FrameLen)
	h := inaps.WriteHeaders(f, t.job.Workers[w], t.job.PS)
	h.SetBitmap(1 << w)
	h.SetFanIn(uint8(len(t.job.Workers)))
	h.SetFlags(flags)
	h.SetJob(t.job.ID)
	h.SetSeq(uint16(t.seq))
	h.SetAggregator(t.agg)
	h.SetPriority(t.prio)
	v := values(t.job.ID, w, t.it, t.seq)
	for i, x := range v {
		h.SetValue(i, x)
	}
	h.SetKey(inaps.TaskKey(t.it, t.seq))
	return f
}

// psFrame is a frame from t's PS to its job's group (a result, a
// reminder) with the given flags, bitmap and values.
func psFrame(t task, flags uint8, bitmap uint32, v [inaps.Values]int32) []byte {
	f := make([]byte, inaps.FrameLen)
	h := inaps.WriteHeaders(f, t.job.PS, inaps.GroupAddr(t.job.ID))
	h.SetBitmap(bitmap)
	h.SetFanIn(uint8(len(t.job.Workers)))
	h.SetFlags(flags)
	h.SetJob(t.job.ID)
	h.SetSeq(uint16(t.seq))
	h.SetAggregator(t.agg)
	for i, x := range v {
		h.SetValue(i, x)
	}
	h.SetKey(inaps.TaskKey(t.it, t.seq))
	return f
}

// send is worker w's gradient entering by its port.
func (r *rig) send(t task, w int, flags uint8) {
	r.sw.Ingress(portOf(t.job.Workers[w]), gradient(t, w, flags))
}

func portOf(a inaps.Addr) int { return int(a.MAC[5]) - 0x10 }

func all(n int) uint32 { return 1<<n - 1 }

// ---- checks ----

// checkIP checks the frame's addresses and that its IPv4 header checksum
// verifies (the one's-complement sum of the header is 0xffff).
func checkIP(t *testing.T, f []byte, src, dst inaps.Addr) {
	t.Helper()
	assert.Equal(t, dst.MAC[:], f[0:6], "destination MAC")
	assert.Equal(t, src.MAC[:], f[6:12], "source MAC")
	assert.Equal(t, src.IP[:], f[26:30], "source IP")
	assert.Equal(t, dst.IP[:], f[30:34], "destination IP")
	var s uint32
	for i := 14; i < 34; i += 2 {
		s += uint32(f[i])<<8 | uint32(f[i+1])
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	assert.Equal(t, uint32(0xffff), s, "IPv4 header checksum")
}

// want is what an output's INA-PS header must say.
type want struct {
	flags  uint8
	bitmap uint32
	values [inaps.Values]int32
	prio   uint8
}

func checkHeader(t *testing.T, o out, tk task, w want) {
	t.Helper()
	h := o.h()
	assert.Equal(t, w.flags, h.Flags(), "flags")
	assert.Equal(t, w.bitmap, h.Bitmap(), "bitmap")
	assert.Equal(t, uint8(len(tk.job.Workers)), h.FanIn(), "fan-in")
	assert.Equal(t, tk.job.ID, h.Job(), "job")
	assert.Equal(t, uint16(tk.seq), h.Seq(), "seq")
	assert.Equal(t, tk.agg, h.Aggregator(), "aggregator")
	assert.Equal(t, inaps.TaskKey(tk.it, tk.seq), h.Key(), "key")
	assert.Equal(t, w.prio, h.Priority(), "priority")
	var got [inaps.Values]int32
	for i := range got {
		got[i] = h.Value(i)
	}
	assert.Equal(t, w.values, got, "values")
}

// wantMulticast checks that the outputs are tk's result, one copy per
// worker (each to its own port and address), from the switch.
func wantMulticast(t *testing.T, outs []out, tk task, v [inaps.Values]int32, prio uint8) {
	t.Helper()
	require.Len(t, outs, len(tk.job.Workers), "one copy per worker")
	for w, o := range outs {
		assert.Equal(t, portOf(tk.job.Workers[w]), o.port, "copy %d: port", w)
		assert.Equal(t, t0+latency, o.ready, "copy %d: ready", w)
		checkIP(t, o.frame, inaps.SwitchAddr, tk.job.Workers[w])
		checkHeader(t, o, tk, want{flags: wire.INAPSFlagACK, bitmap: all(len(tk.job.Workers)), values: v, prio: prio})
	}
}

func (r *rig) agg(i uint16) inaps.Aggregator { return r.prog.Pool()[i] }

// ---- esa ----

func TestESAClaimJoinComplete(t *testing.T) {
	r := newRig(t, inaps.ESA, 16, 1, job1)
	tk := task{job: job1, it: 0, seq: 1, agg: 5, prio: 10}

	r.send(tk, 0, 0)
	r.none("claim")
	a := r.agg(5)
	assert.True(t, a.Used)
	assert.Equal(t, uint32(1), a.Bitmap)
	assert.Equal(t, inaps.Vec(sum(values(1, 0, 0, 1))), a.Values)

	r.send(tk, 2, 0)
	r.none("join")
	a = r.agg(5)
	assert.Equal(t, uint32(0b101), a.Bitmap)
	assert.Equal(t, inaps.Vec(sum(values(1, 0, 0, 1), values(1, 2, 0, 1))), a.Values)
	assert.Equal(t, 1, r.prog.Stats().InUse)

	r.send(tk, 1, 0)
	wantMulticast(t, r.take(), tk, sum(values(1, 0, 0, 1), values(1, 1, 0, 1), values(1, 2, 0, 1)), 10)
	assert.False(t, r.agg(5).Used, "completion frees the aggregator")
	s := r.prog.Stats()
	assert.Equal(t, uint64(3), s.Gradients)
	assert.Equal(t, uint64(3), s.Aggregated)
	assert.Equal(t, uint64(1), s.Completed)
	assert.Equal(t, uint64(1), s.Multicasts)
	assert.Equal(t, 0, s.InUse)
	assert.Equal(t, 1, s.MaxInUse)
}

// The sum wraps: every value of two contributions near +2^31 overflows.
func TestESASumWraps(t *testing.T) {
	r := newRig(t, inaps.ESA, 4, 1, job2)
	tk := task{job: job2, seq: 7, agg: 3, prio: 1}
	r.send(tk, 0, 0)
	r.send(tk, 1, 0)
	outs := r.take()
	require.Len(t, outs, 2)
	v0, v1 := values(2, 0, 0, 7), values(2, 1, 0, 7)
	for i := range v0 {
		want := int32(uint32(int64(v0[i]) + int64(v1[i]))) // the low 32 bits
		assert.Equal(t, want, outs[0].h().Value(i), "value %d", i)
	}
}

func TestESAEvictionByHigherPriority(t *testing.T) {
	r := newRig(t, inaps.ESA, 8, 1, job1, job2)
	old := task{job: job1, seq: 4, agg: 2, prio: 5}
	nw := task{job: job2, seq: 9, agg: 2, prio: 9}
	r.send(old, 0, 0)
	r.send(old, 1, 0)
	r.none("old task's partial")

	r.send(nw, 1, 0)
	outs := r.take()
	require.Len(t, outs, 1, "the old job's partial, swapped out")
	o := outs[0]
	assert.Equal(t, portOf(job1.PS), o.port, "to the old job's PS")
	assert.Equal(t, t0+latency+resubmit, o.ready, "one more pipeline pass")
	assert.Equal(t, job1.PS.MAC[:], o.frame[0:6])
	assert.Equal(t, job1.PS.IP[:], o.frame[30:34])
	checkHeader(t, o, old, want{flags: wire.INAPSFlagCollision, bitmap: 0b011, values: sum(values(1, 0, 0, 4), values(1, 1, 0, 4)), prio: 5})

	a := r.agg(2)
	assert.True(t, a.Used)
	assert.Equal(t, job2.ID, a.Job)
	assert.Equal(t, uint16(9), a.Seq)
	assert.Equal(t, uint8(9), a.Prio)
	assert.Equal(t, uint32(0b10), a.Bitmap)
	assert.Equal(t, inaps.Vec(values(2, 1, 0, 9)), a.Values)

	s := r.prog.Stats()
	assert.Equal(t, uint64(1), s.Collisions)
	assert.Equal(t, uint64(1), s.Preemptions)
	assert.Equal(t, uint64(1), s.Evicted)
	assert.Equal(t, uint64(1), s.Resubmits)

	r.send(nw, 0, 0)
	wantMulticast(t, r.take(), nw, sum(values(2, 0, 0, 9), values(2, 1, 0, 9)), 9)
}

// A failed preemption (equal, then lower priority) diverts the packet to
// its own PS with the collision flag and halves the holder's priority;
// once halved below the newcomer's, the next one evicts.
func TestESAFailedPreemptionHalves(t *testing.T) {
	r := newRig(t, inaps.ESA, 8, 1, job1, job2)
	held := task{job: job1, seq: 1, agg: 6, prio: 8}
	r.send(held, 2, 0)

	wantDiverted := func(tk task, w int, holderPrio uint8) {
		t.Helper()
		r.send(tk, w, 0)
		outs := r.take()
		require.Len(t, outs, 1)
		o := outs[0]
		assert.Equal(t, portOf(tk.job.PS), o.port, "to its own PS")
		assert.Equal(t, t0+latency, o.ready)
		checkIP(t, o.frame, tk.job.Workers[w], tk.job.PS)
		checkHeader(t, o, tk, want{flags: wire.INAPSFlagCollision, bitmap: 1 << w, values: values(tk.job.ID, w, tk.it, uint32(tk.seq)), prio: tk.prio})
		assert.Equal(t, holderPrio, r.agg(6).Prio, "holder's priority")
		assert.Equal(t, job1.ID, r.agg(6).Job, "the holder keeps it")
	}
	wantDiverted(task{job: job2, seq: 3, agg: 6, prio: 8}, 0, 4) // equal: 8 >> 1
	wantDiverted(task{job: job2, seq: 4, agg: 6, prio: 3}, 1, 2) // lower: 4 >> 1
	s := r.prog.Stats()
	assert.Equal(t, uint64(2), s.FailedPreempts)
	assert.Equal(t, uint64(2), s.Downgrades)
	assert.Equal(t, uint64(2), s.Diverted)
	assert.Equal(t, uint64(0), s.Preemptions)

	// 3 > 2 now: it evicts.
	r.send(task{job: job2, seq: 5, agg: 6, prio: 3}, 0, 0)
	outs := r.take()
	require.Len(t, outs, 1)
	assert.Equal(t, portOf(job1.PS), outs[0].port)
	checkHeader(t, outs[0], held, want{flags: wire.INAPSFlagCollision, bitmap: 0b100, values: values(1, 2, 0, 1), prio: 2})
}

// Renewal: a joining packet's priority replaces the aggregator's (lower
// here), so a packet that would have lost against the claim's evicts.
func TestESARenewal(t *testing.T) {
	r := newRig(t, inaps.ESA, 8, 1, job1, job2)
	tk := task{job: job1, seq: 2, agg: 1, prio: 5}
	r.send(tk, 0, 0)
	tk.prio = 2
	r.send(tk, 1, 0)
	r.none("join")
	assert.Equal(t, uint8(2), r.agg(1).Prio, "renewed to the latest packet's")

	r.send(task{job: job2, seq: 1, agg: 1, prio: 3}, 0, 0)
	outs := r.take()
	require.Len(t, outs, 1)
	assert.Equal(t, portOf(job1.PS), outs[0].port, "3 > 2: evicted")
	checkHeader(t, outs[0], tk, want{flags: wire.INAPSFlagCollision, bitmap: 0b011, values: sum(values(1, 0, 0, 2), values(1, 1, 0, 2)), prio: 2})
	assert.Equal(t, uint64(1), r.prog.Stats().Preemptions)
}

func TestESADuplicateDropped(t *testing.T) {
	r := newRig(t, inaps.ESA, 8, 1, job2)
	tk := task{job: job2, seq: 3, agg: 0, prio: 1}
	r.send(tk, 1, 0)
	r.send(tk, 1, 0)
	r.none("duplicate")
	s := r.prog.Stats()
	assert.Equal(t, uint64(1), s.Duplicates)
	assert.Equal(t, uint64(1), s.Aggregated)
	assert.Equal(t, uint32(0b10), r.agg(0).Bitmap)
	r.send(tk, 0, 0)
	wantMulticast(t, r.take(), tk, sum(values(2, 0, 0, 3), values(2, 1, 0, 3)), 1)
}

func TestESAReminder(t *testing.T) {
	r := newRig(t, inaps.ESA, 8, 1, job1)
	tk := task{job: job1, seq: 11, agg: 7, prio: 4}
	r.send(tk, 1, 0)

	var zero [inaps.Values]int32
	r.sw.Ingress(portOf(job1.PS), psFrame(tk, wire.INAPSFlagsReminder, 0, zero))
	outs := r.take()
	require.Len(t, outs, 1)
	o := outs[0]
	assert.Equal(t, portOf(job1.PS), o.port, "back to the PS")
	assert.Equal(t, t0+latency, o.ready)
	checkIP(t, o.frame, inaps.SwitchAddr, job1.PS)
	checkHeader(t, o, tk, want{flags: 0x06, bitmap: 0b010, values: values(1, 1, 0, 11), prio: 4})
	assert.False(t, r.agg(7).Used, "the reminder frees it")

	// Nothing held now: the reminder returns with bitmap 0.
	r.sw.Ingress(portOf(job1.PS), psFrame(tk, wire.INAPSFlagsReminder, 0, zero))
	outs = r.take()
	require.Len(t, outs, 1)
	assert.Equal(t, portOf(job1.PS), outs[0].port)
	assert.Equal(t, uint8(0x06), outs[0].h().Flags())
	assert.Equal(t, uint32(0), outs[0].h().Bitmap())
	checkIP(t, outs[0].frame, inaps.SwitchAddr, job1.PS)

	// Held, but another iteration's task: bitmap 0, and it stays held.
	r.send(tk, 0, 0)
	other := tk
	other.it = 1
	r.sw.Ingress(portOf(job1.PS), psFrame(other, wire.INAPSFlagsReminder, 0, zero))
	outs = r.take()
	require.Len(t, outs, 1)
	assert.Equal(t, uint32(0), outs[0].h().Bitmap())
	assert.True(t, r.agg(7).Used)
	assert.Equal(t, uint32(0b001), r.agg(7).Bitmap)

	s := r.prog.Stats()
	assert.Equal(t, uint64(3), s.Reminders)
	assert.Equal(t, uint64(1), s.RemindersValue)

	// Drain the task so the cleanup's loss check sees every contribution out.
	r.sw.Ingress(portOf(job1.PS), psFrame(tk, wire.INAPSFlagsReminder, 0, zero))
	assert.Equal(t, uint32(0b001), r.take()[0].h().Bitmap())
}

// Key matching: the same wire seq in another iteration, or in another
// wrap of the 16-bit seq (key bits 32-47), is another task: it collides,
// never joins.
func TestESAKeyMatching(t *testing.T) {
	for _, c := range []struct {
		name    string
		it, seq uint32
	}{
		{"other iteration", 1, 5},
		{"other wrap", 0, 5 + 1<<16},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, inaps.ESA, 8, 1, job1)
			held := task{job: job1, it: 0, seq: 5, agg: 3, prio: 6}
			r.send(held, 0, 0)
			other := task{job: job1, it: c.it, seq: c.seq, agg: 3, prio: 6}
			require.Equal(t, uint16(5), uint16(other.seq), "the same seq on the wire")
			r.send(other, 1, 0)
			outs := r.take()
			require.Len(t, outs, 1, "diverted, not joined")
			assert.Equal(t, portOf(job1.PS), outs[0].port)
			checkHeader(t, outs[0], other, want{flags: wire.INAPSFlagCollision, bitmap: 0b010, values: values(1, 1, c.it, c.seq), prio: 6})
			assert.Equal(t, uint32(0b001), r.agg(3).Bitmap, "the holder's bitmap is untouched")
			assert.Equal(t, uint64(1), r.prog.Stats().Collisions)
			assert.Equal(t, uint64(0), r.prog.Stats().Duplicates)
		})
	}
}

// Overflow under esa: the raw-float packet goes to the PS, and the
// partial of its task the switch holds is flushed before it.
func TestESAOverflow(t *testing.T) {
	r := newRig(t, inaps.ESA, 8, 1, job1)
	tk := task{job: job1, seq: 2, agg: 4, prio: 3}
	r.send(tk, 0, 0)
	r.send(tk, 2, 0)
	r.send(tk, 1, wire.INAPSFlagOverflow)
	outs := r.take()
	require.Len(t, outs, 2)
	for _, o := range outs {
		assert.Equal(t, portOf(job1.PS), o.port)
		assert.Equal(t, t0+latency, o.ready)
	}
	checkIP(t, outs[0].frame, inaps.SwitchAddr, job1.PS)
	checkHeader(t, outs[0], tk, want{flags: wire.INAPSFlagCollision, bitmap: 0b101, values: sum(values(1, 0, 0, 2), values(1, 2, 0, 2)), prio: 3})
	checkIP(t, outs[1].frame, job1.Workers[1], job1.PS)
	checkHeader(t, outs[1], tk, want{flags: wire.INAPSFlagOverflow | wire.INAPSFlagCollision, bitmap: 0b010, values: values(1, 1, 0, 2), prio: 3})
	assert.False(t, r.agg(4).Used)
	s := r.prog.Stats()
	assert.Equal(t, uint64(1), s.Overflows)
	assert.Equal(t, uint64(1), s.Flushed)
}

// ---- straw men ----

func TestStraw1AlwaysEvicts(t *testing.T) {
	r := newRig(t, inaps.Straw1, 8, 1, job1, job2)
	held := task{job: job1, seq: 1, agg: 0, prio: 200}
	r.send(held, 0, 0)
	r.send(task{job: job2, seq: 1, agg: 0, prio: 1}, 0, 0) // lower priority
	outs := r.take()
	require.Len(t, outs, 1)
	assert.Equal(t, portOf(job1.PS), outs[0].port)
	checkHeader(t, outs[0], held, want{flags: wire.INAPSFlagCollision, bitmap: 1, values: values(1, 0, 0, 1), prio: 200})
	assert.Equal(t, job2.ID, r.agg(0).Job)
	s := r.prog.Stats()
	assert.Equal(t, uint64(1), s.Preemptions)
	assert.Equal(t, uint64(0), s.Downgrades)
}

// straw2's coin: a fixed seed gives the same outcomes every time, both
// outcomes occur, and a failed preemption never halves a priority.
func TestStraw2CoinPerSeed(t *testing.T) {
	outcomes := func(seed uint64) []bool {
		r := newRig(t, inaps.Straw2, 4, seed, job1, job2)
		r.send(task{job: job1, seq: 1, agg: 0, prio: 50}, 0, 0)
		r.take()
		var got []bool
		for k := 2; k < 66; k++ {
			j := job1
			if k%2 == 1 {
				j = job2
			}
			tk := task{job: j, seq: uint32(k), agg: 0, prio: 50}
			r.send(tk, 0, 0) // one contribution of two or three: never completes
			a := r.agg(0)
			evicted := a.Job == j.ID && a.Seq == uint16(k)
			got = append(got, evicted)
			assert.Equal(t, uint8(50), a.Prio, "no halving")
			require.Len(t, r.take(), 1, "the partial or the packet to a PS")
		}
		s := r.prog.Stats()
		assert.Equal(t, uint64(0), s.Downgrades)
		assert.Equal(t, s.Collisions, s.Preemptions+s.FailedPreempts)
		// Leave nothing held (the cleanup checks for lost contributions).
		a := r.agg(0)
		var zero [inaps.Values]int32
		j := job1
		if a.Job == job2.ID {
			j = job2
		}
		r.sw.Ingress(portOf(j.PS), psFrame(task{job: j, seq: uint32(a.Seq), agg: 0}, wire.INAPSFlagsReminder, 0, zero))
		return got
	}
	a, b := outcomes(42), outcomes(42)
	assert.Equal(t, a, b, "the same seed, the same coin")
	n := 0
	for _, e := range a {
		if e {
			n++
		}
	}
	assert.Greater(t, n, 10, "evictions of 64 fair tosses")
	assert.Less(t, n, 54, "evictions of 64 fair tosses")
	assert.NotEqual(t, a, outcomes(43), "another seed, another sequence")
}

// ---- fcfs ----

func TestFCFSCompletionToPSAndACK(t *testing.T) {
	r := newRig(t, inaps.FCFS, 8, 1, job1)
	tk := task{job: job1, seq: 3, agg: 5}
	for w := 0; w < 3; w++ {
		if w > 0 {
			r.none("partial")
		}
		r.send(tk, w, 0)
	}
	res := sum(values(1, 0, 0, 3), values(1, 1, 0, 3), values(1, 2, 0, 3))
	outs := r.take()
	require.Len(t, outs, 1, "complete: to the PS only")
	assert.Equal(t, portOf(job1.PS), outs[0].port)
	assert.Equal(t, t0+latency, outs[0].ready)
	checkIP(t, outs[0].frame, inaps.SwitchAddr, job1.PS)
	checkHeader(t, outs[0], tk, want{flags: 0, bitmap: 0b111, values: res})
	assert.True(t, r.agg(5).Used, "held until the PS's ACK")
	assert.True(t, r.agg(5).Done)

	// A late copy of a contribution to a completed aggregator is dropped.
	r.send(tk, 1, 0)
	r.none("late copy")
	assert.Equal(t, uint64(1), r.prog.Stats().Duplicates)

	ack := psFrame(tk, wire.INAPSFlagACK, 0b111, res)
	r.sw.Ingress(portOf(job1.PS), ack)
	outs = r.take()
	require.Len(t, outs, 3, "the PS's result copied to each worker")
	for w, o := range outs {
		assert.Equal(t, portOf(job1.Workers[w]), o.port)
		assert.Equal(t, t0+latency, o.ready)
		checkIP(t, o.frame, job1.PS, job1.Workers[w])
		checkHeader(t, o, tk, want{flags: wire.INAPSFlagACK, bitmap: 0b111, values: res})
		assert.Equal(t, ack[12:24], o.frame[12:24], "IPv4 header before its checksum unchanged")
		assert.Equal(t, ack[inaps.HeaderOff:], o.frame[inaps.HeaderOff:], "INA-PS header unchanged")
	}
	assert.False(t, r.agg(5).Used, "the ACK frees it")
	s := r.prog.Stats()
	assert.Equal(t, uint64(1), s.ToPS)
	assert.Equal(t, uint64(1), s.Released)
	assert.Equal(t, uint64(1), s.PSMulticasts)
	assert.Equal(t, uint64(0), s.Multicasts)
}

func TestFCFSCollisionDiverted(t *testing.T) {
	r := newRig(t, inaps.FCFS, 8, 1, job1, job2)
	held := task{job: job1, seq: 1, agg: 2}
	r.send(held, 0, 0)
	other := task{job: job2, seq: 8, agg: 2, prio: 255} // priority means nothing here
	r.send(other, 1, 0)
	outs := r.take()
	require.Len(t, outs, 1)
	assert.Equal(t, portOf(job2.PS), outs[0].port)
	checkIP(t, outs[0].frame, job2.Workers[1], job2.PS)
	checkHeader(t, outs[0], other, want{flags: wire.INAPSFlagCollision, bitmap: 0b10, values: values(2, 1, 0, 8), prio: 255})
	assert.Equal(t, job1.ID, r.agg(2).Job)
	assert.Equal(t, uint32(1), r.agg(2).Bitmap)
	s := r.prog.Stats()
	assert.Equal(t, uint64(1), s.Collisions)
	assert.Equal(t, uint64(1), s.Diverted)
	assert.Equal(t, uint64(0), s.Preemptions)
	// Flush the holder (a resend from a worker already in).
	r.send(held, 0, wire.INAPSFlagResend)
	require.Len(t, r.take(), 1)
}

func TestFCFSResendFlushes(t *testing.T) {
	for _, c := range []struct {
		name   string
		resend int // the resending worker
		bitmap uint32
		vals   [inaps.Values]int32
	}{
		{"bit missing: its values join", 1, 0b011, sum(values(1, 0, 0, 6), values(1, 1, 0, 6))},
		{"bit in: not added twice", 0, 0b001, values(1, 0, 0, 6)},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, inaps.FCFS, 8, 1, job1)
			tk := task{job: job1, seq: 6, agg: 1}
			r.send(tk, 0, 0)
			r.send(tk, c.resend, wire.INAPSFlagResend)
			outs := r.take()
			require.Len(t, outs, 1)
			assert.Equal(t, portOf(job1.PS), outs[0].port)
			checkIP(t, outs[0].frame, inaps.SwitchAddr, job1.PS)
			checkHeader(t, outs[0], tk, want{flags: wire.INAPSFlagResend, bitmap: c.bitmap, values: c.vals})
			assert.False(t, outs[0].h().IsReminder())
			assert.False(t, r.agg(1).Used, "flushed: free")
			assert.Equal(t, uint64(1), r.prog.Stats().Flushed)
		})
	}
	t.Run("nothing held", func(t *testing.T) {
		r := newRig(t, inaps.FCFS, 8, 1, job1)
		tk := task{job: job1, seq: 6, agg: 1}
		r.send(tk, 2, wire.INAPSFlagResend)
		outs := r.take()
		require.Len(t, outs, 1)
		assert.Equal(t, portOf(job1.PS), outs[0].port)
		checkIP(t, outs[0].frame, job1.Workers[2], job1.PS)
		checkHeader(t, outs[0], tk, want{flags: wire.INAPSFlagResend, bitmap: 0b100, values: values(1, 2, 0, 6)})
		assert.False(t, r.agg(1).Used)
	})
	t.Run("resend colliding with another task", func(t *testing.T) {
		r := newRig(t, inaps.FCFS, 8, 1, job1, job2)
		r.send(task{job: job2, seq: 1, agg: 1}, 0, 0)
		tk := task{job: job1, seq: 6, agg: 1}
		r.send(tk, 2, wire.INAPSFlagResend)
		outs := r.take()
		require.Len(t, outs, 1)
		assert.Equal(t, portOf(job1.PS), outs[0].port)
		assert.Equal(t, uint8(wire.INAPSFlagResend), outs[0].h().Flags(), "isResend alone, never 0x06")
		r.send(task{job: job2, seq: 1, agg: 1}, 0, wire.INAPSFlagResend) // flush the holder
		require.Len(t, r.take(), 1)
	})
}

// ---- static ----

func TestStatic(t *testing.T) {
	sj := inaps.Job{ID: 3, Workers: []inaps.Addr{host(0), host(1)}, First: 4, Size: 4}
	r := newRig(t, inaps.Static, 12, 1, sj)
	// StaticIndex's rule for a region [4, 8): packet n uses 4 + (n-1)%2
	// in set 0, 6 + (n-1)%2 in set 1, alternating every 2 packets.
	round1 := task{job: sj, seq: 1, agg: 4}

	for _, bad := range []uint16{3, 8, 11, 12} {
		r.send(task{job: sj, seq: 1, agg: bad}, 0, 0)
		r.none(fmt.Sprintf("index %d", bad))
	}
	assert.Equal(t, uint64(4), r.prog.Stats().BadIndex)

	r.send(round1, 0, 0)
	r.none("partial")
	r.send(round1, 1, 0)
	res := sum(values(3, 0, 0, 1), values(3, 1, 0, 1))
	wantMulticast(t, r.take(), round1, res, 0)
	a := r.agg(4)
	assert.True(t, a.Used, "the result is kept")
	assert.True(t, a.Done)

	// Worker 1 lost its copy: its retransmission is answered to it alone.
	r.send(round1, 1, 0)
	outs := r.take()
	require.Len(t, outs, 1)
	assert.Equal(t, portOf(sj.Workers[1]), outs[0].port)
	assert.Equal(t, t0+latency, outs[0].ready)
	checkIP(t, outs[0].frame, inaps.SwitchAddr, sj.Workers[1])
	checkHeader(t, outs[0], round1, want{flags: wire.INAPSFlagACK, bitmap: 0b11, values: res})
	assert.Equal(t, uint64(1), r.prog.Stats().Retransmits)

	// Packet 5 reuses aggregator 4 (two sets of two later): a new round.
	round3 := task{job: sj, seq: 5, agg: inaps.StaticIndex(4, 4, 5)}
	require.Equal(t, uint16(4), round3.agg)
	r.send(round3, 0, 0)
	r.none("new round's first")
	assert.Equal(t, uint16(5), r.agg(4).Seq)
	assert.False(t, r.agg(4).Done)

	// A stale copy of round 1 now: dropped.
	r.send(round1, 1, 0)
	r.none("stale")
	assert.Equal(t, uint64(1), r.prog.Stats().Stale)
	assert.Equal(t, uint32(0b01), r.agg(4).Bitmap)

	r.send(round3, 1, 0)
	wantMulticast(t, r.take(), round3, sum(values(3, 0, 0, 5), values(3, 1, 0, 5)), 0)
	s := r.prog.Stats()
	assert.Equal(t, uint64(2), s.Completed)
	assert.Equal(t, uint64(2), s.Multicasts)
}

func TestStaticRegionRefused(t *testing.T) {
	r := newRig(t, inaps.Static, 8, 1)
	for _, j := range []inaps.Job{
		{ID: 1, Workers: []inaps.Addr{host(0)}, First: 0, Size: 1},
		{ID: 2, Workers: []inaps.Addr{host(0)}, First: 6, Size: 4},
		{ID: 3, Workers: []inaps.Addr{host(0)}, First: -1, Size: 4},
	} {
		assert.Error(t, r.prog.AddJob(j), "region [%d, %d)", j.First, j.First+j.Size)
	}
	assert.NoError(t, r.prog.AddJob(inaps.Job{ID: 4, Workers: []inaps.Addr{host(0)}, First: 6, Size: 2}))
}

// A frame of no installed job goes on as ordinary traffic.
func TestUnknownJobForwarded(t *testing.T) {
	r := newRig(t, inaps.ESA, 8, 1, job1)
	f := gradient(task{job: job2, seq: 1, agg: 0}, 0, 0)
	r.sw.Ingress(portOf(job2.Workers[0]), f)
	outs := r.take()
	require.Len(t, outs, 1)
	assert.Equal(t, portOf(job2.PS), outs[0].port)
	assert.Equal(t, f, outs[0].frame)
	assert.Equal(t, uint64(1), r.prog.Stats().UnknownJob)
	assert.False(t, r.agg(0).Used)
}
