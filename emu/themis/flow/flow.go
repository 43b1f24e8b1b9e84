// Package flow is Themis's flow-level (fluid) mode: it runs the per-chunk
// stage orders a scheduler produced (themis.Schedule) on a multi-dimensional
// topology and measures what the paper measures (Rashidi et al., "Themis: A
// Network Bandwidth-Aware Collective Scheduling Policy for Distributed
// Training of DL Models", ISCA '22, §6.1): the collective's time, each
// dimension's bytes, busy time and bandwidth utilisation, the weighted
// average utilisation, and each dimension's activity per 100 µs (Fig. 9).
//
// # The model
//
// All NPUs of a Table 2 platform are symmetric: every NPU holds the same
// share of every chunk, runs the same stage on the same dimension at the
// same time, and sends the same bytes over its own links (the
// per-dimension algorithms are contention-free, Table 1). So one
// representative NPU stands for all of them, and intra-dimension schedule
// consistency (§4.6.2) holds by construction: every NPU sees the same
// events in the same order, so every NPU's queue picks the same chunk.
//
// Each dimension d of that NPU is a server with bandwidth BW_d (the NPU's
// aggregate bandwidth in d, Table 2) that serves at most ActivePerDim
// chunks at once (ASTRA-sim's active-chunks-per-dimension, default 1).
// A chunk walks its stages in order. When a stage ends, the chunk joins
// the queue of its next stage's dimension; whenever that dimension serves
// fewer than ActivePerDim chunks, the policy (FIFO or smallest chunk
// first) picks which queued chunk it serves next. A served stage has two
// phases:
//
//  1. its fixed delay A = steps × step latency (the load model's A_K
//     for one stage: ring P−1 steps, direct 1, halving-doubling log2 P;
//     an ina dimension's AR one step plus the switch's aggregation),
//     during which it holds a service slot and sends nothing;
//  2. its bytes n = (P−1)/P · s (RS), (P−1) · s (AG) or s (an ina AR)
//     for a stage that starts with s bytes per NPU, sent at an equal
//     share of BW_d: with m chunks of d in this phase, each gets BW_d/m
//     (fluid, work-conserving: a chunk in its fixed delay takes no
//     bandwidth).
//
// With ActivePerDim 1 every stage thus takes exactly A + n/BW_d, the load
// model's time for it; with more, the fixed delays of concurrent stages
// overlap and their bytes share the links. Rates are constant between
// events (a stage's phase starting or ending), so the integration is
// exact: the next event is the earliest of the fixed delays' ends and, per
// dimension, the time its smallest remaining transfer needs at the current
// share.
package flow

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/inaemu/inaemu/emu/themis"
)

// Config is how a schedule is executed.
type Config struct {
	// ActivePerDim is how many chunks a dimension serves at once
	// (ASTRA-sim's active-chunks-per-dimension; 0 means its default, 1).
	ActivePerDim int
	// Policy picks the next queued chunk of a dimension (themis.Next):
	// themis.FIFO (the baseline's and Themis+FIFO's) or themis.SCF
	// (smallest chunk first). Empty means FIFO.
	Policy themis.Policy
	// TimelineBin is the activity timeline's window (0: 100 µs, Fig. 9).
	TimelineBin time.Duration
	// NoFixedDelay drops every stage's fixed delay A: the bandwidth-only
	// model (a large collective with no latency).
	NoFixedDelay bool
}

// DefaultActivePerDim is ASTRA-sim's default for
// active-chunks-per-dimension (Sys.cc, ASTRA-sim 1.0).
const DefaultActivePerDim = 1

// DefaultTimelineBin is the window of Fig. 9's frontend activity rate.
const DefaultTimelineBin = 100 * time.Microsecond

// Result is one execution.
type Result struct {
	// Time is the collective's time: from its first stage's start (0) to
	// its last stage's end.
	Time time.Duration
	// Seconds is Time unrounded.
	Seconds float64
	// Dims are the per-dimension measures, dim 0 first.
	Dims []DimResult
	// Utilisation is the paper's average bandwidth utilisation (§6.1,
	// Fig. 10/11): the per-dimension utilisations weighted by bandwidth,
	// Σ_d u_d·BW_d / Σ_d BW_d = Σ_d Bytes_d / (Seconds · Σ_d BW_d).
	Utilisation float64
	// Bin is the activity timeline's window.
	Bin time.Duration
	// Stages is every chunk's stages as they ran, in chunk order then
	// stage order.
	Stages []StageRecord
}

// DimResult is one dimension's measures.
type DimResult struct {
	// Bytes is what each NPU sent on the dimension: the paper's N_K, the
	// sum over chunks of n_K (payload, §4.4; no headers).
	Bytes float64
	// Busy is the time the dimension served at least one chunk (in its
	// fixed delay or sending).
	Busy time.Duration
	// Utilisation is Bytes / (BW · Result.Seconds).
	Utilisation float64
	// Activity is Fig. 9's frontend activity rate per window: the share of
	// each window during which at least one chunk was at the dimension,
	// queued or served. The last window may be partial; its share is of
	// the full window.
	Activity []float64
	// Serving is the share of each window during which the dimension
	// served at least one chunk.
	Serving []float64
}

// StageRecord is one stage as it ran: when it became ready (its chunk
// joined the dimension's queue), when the dimension started serving it and
// when its last byte was sent.
type StageRecord struct {
	Chunk, Stage, Dim    int
	Op                   themis.Op
	Bytes                float64 // sent by each NPU
	Ready, Start, End    time.Duration
	ReadyS, StartS, EndS float64 // the same, in seconds unrounded
}

// stage is a stage's execution parameters.
type stage struct {
	dim   int
	op    themis.Op
	bytes float64 // n: sent by each NPU
	fixed float64 // A, seconds
	size  float64 // max(in, out) per NPU: SCF's chunk size (ASTRA-sim)
}

// chunk is a chunk's progress.
type chunk struct {
	id     int // the schedule's chunk number
	stages []stage
	next   int     // the stage queued or running
	phase  int8    // queued, inFixed, sending, done
	rem    float64 // bytes of the running stage still to send
	latEnd float64 // when the running stage's fixed delay ends
	ready  float64 // when it joined its dimension's queue
	base   int     // its first stage's index in sim.rec
}

const (
	queued int8 = iota
	inFixed
	sending
	done
)

type dimState struct {
	bw      float64
	queue   []themis.ReadyChunk // chunks waiting (Chunk is the index in sim.chunks)
	served  []int               // chunks in their fixed delay or sending
	sending int                 // how many of served are sending
	bytes   float64
	busy    float64 // seconds with at least one chunk served
	// the timeline: per window, seconds with a chunk present, served
	present, serving []float64
}

type sim struct {
	dims      []dimState
	chunks    []chunk
	rec       []StageRecord
	active    int
	policy    themis.Policy
	seq       []int // per dimension, arrivals so far
	ended     []int // chunks whose stage ended at the current event
	now       float64
	remaining int // chunks not done
	bin       float64
}

// Run executes scheds on t. Every chunk joins its first stage's queue at
// time 0, in the order of scheds.
func Run(t themis.Topology, scheds []themis.ChunkSchedule, cfg Config) (Result, error) {
	if err := t.Validate(); err != nil {
		return Result{}, err
	}
	if cfg.ActivePerDim < 0 {
		return Result{}, fmt.Errorf("flow: active chunks per dimension %d < 0", cfg.ActivePerDim)
	}
	active := cfg.ActivePerDim
	if active == 0 {
		active = DefaultActivePerDim
	}
	pol := cfg.Policy
	if pol == "" {
		pol = themis.FIFO
	}
	if err := pol.Validate(); err != nil {
		return Result{}, err
	}
	bin := cfg.TimelineBin
	if bin == 0 {
		bin = DefaultTimelineBin
	}
	if bin < 0 {
		return Result{}, fmt.Errorf("flow: timeline window %v < 0", bin)
	}
	if len(scheds) == 0 {
		return Result{}, errors.New("flow: no chunks to run")
	}

	s := &sim{active: active, policy: pol, bin: bin.Seconds(), chunks: make([]chunk, len(scheds))}
	n := 0
	for _, cs := range scheds {
		n += len(cs.Stages)
	}
	all := make([]stage, 0, n)
	for i, cs := range scheds {
		start := len(all)
		for j, st := range cs.Stages {
			if st.Dim < 0 || st.Dim >= len(t) {
				return Result{}, fmt.Errorf("flow: chunk %d stage %d: dimension %d outside the topology's %d", cs.Chunk, j, st.Dim, len(t))
			}
			x, err := stageOf(t[st.Dim], st)
			if err != nil {
				return Result{}, fmt.Errorf("flow: chunk %d stage %d: %w", cs.Chunk, j, err)
			}
			if cfg.NoFixedDelay {
				x.fixed = 0
			}
			x.dim = st.Dim
			all = append(all, x)
		}
		s.chunks[i] = chunk{id: cs.Chunk, stages: all[start:len(all):len(all)], base: start}
	}
	s.rec = make([]StageRecord, n)
	s.dims = make([]dimState, len(t))
	for d := range s.dims {
		s.dims[d] = dimState{bw: t[d].BW, queue: make([]themis.ReadyChunk, 0, len(scheds)), served: make([]int, 0, active)}
	}
	s.seq = make([]int, len(t))
	s.ended = make([]int, 0, len(scheds))
	s.remaining = len(s.chunks)
	for i := range s.chunks {
		s.enqueue(i)
	}
	if err := s.loop(); err != nil {
		return Result{}, err
	}
	return s.result(t, bin), nil
}

// stageOf is a stage's bytes and fixed delay, the two terms of
// themis.StageSeconds: the bytes follow from the sizes before and after
// it (an RS leaves in/P, an AG P·in; what the NPU sends is the
// difference), the fixed delay is themis.Steps × the step latency.
func stageOf(d themis.Dim, st themis.Stage) (stage, error) {
	p := float64(d.Size)
	in, out := st.InBytes, st.OutBytes
	if !(in >= 0) || math.IsInf(in, 0) || !(out >= 0) || math.IsInf(out, 0) {
		return stage{}, fmt.Errorf("sizes %g -> %g bytes", in, out)
	}
	var want, sent float64
	switch st.Op {
	case themis.RS:
		want, sent = in/p, in-out
	case themis.AG:
		want, sent = in*p, out-in
	case themis.AR:
		// The switch's sum: each NPU sends what it holds, once, and
		// receives as much on the other direction of its link.
		if d.Kind != themis.INA {
			return stage{}, fmt.Errorf("AR on a %s dimension: only ina aggregates", d.Kind)
		}
		want, sent = in, in
	default:
		return stage{}, fmt.Errorf("unknown operation %q", st.Op)
	}
	if math.Abs(out-want) > 1e-9*math.Max(want, 1) {
		return stage{}, fmt.Errorf("%s on a dimension of %d leaves %g bytes of %g, not %g", st.Op, d.Size, out, in, want)
	}
	a := themis.FixedSeconds(d, st.Op)
	return stage{op: st.Op, bytes: sent, fixed: a, size: math.Max(in, out)}, nil
}

// enqueue puts chunk i in the queue of its next stage's dimension, or
// marks it done.
func (s *sim) enqueue(i int) {
	c := &s.chunks[i]
	if c.next == len(c.stages) {
		c.phase = done
		s.remaining--
		return
	}
	c.phase, c.ready = queued, s.now
	st := c.stages[c.next]
	d := &s.dims[st.dim]
	d.queue = append(d.queue, themis.ReadyChunk{Chunk: i, Stage: c.next, Bytes: st.size, Last: c.next == len(c.stages)-1, Seq: s.seq[st.dim]})
	s.seq[st.dim]++
}

// admit fills every dimension's free service slots from its queue, by
// the policy, until nothing changes (a stage with neither bytes nor fixed
// delay ends as it starts and may queue its chunk's next stage at once).
func (s *sim) admit() {
	for changed := true; changed; {
		changed = false
		for d := range s.dims {
			ds := &s.dims[d]
			for len(ds.served) < s.active && len(ds.queue) > 0 {
				k := themis.Next(s.policy, ds.queue)
				i := ds.queue[k].Chunk
				ds.queue = append(ds.queue[:k], ds.queue[k+1:]...)
				s.start(d, i)
				changed = true
			}
		}
	}
}

// start serves chunk i's stage on dimension d from now.
func (s *sim) start(d, i int) {
	c := &s.chunks[i]
	st := c.stages[c.next]
	s.rec[c.base+c.next] = (StageRecord{Chunk: c.id, Stage: c.next, Dim: d, Op: st.op, Bytes: st.bytes, ReadyS: c.ready, StartS: s.now})
	ds := &s.dims[d]
	switch {
	case st.fixed > 0:
		c.phase, c.latEnd = inFixed, s.now+st.fixed
		ds.served = append(ds.served, i)
	case st.bytes > 0:
		c.phase, c.rem = sending, st.bytes
		ds.served = append(ds.served, i)
		ds.sending++
	default:
		s.end(i)
	}
}

// end closes chunk i's running stage at now and queues its next one.
func (s *sim) end(i int) {
	s.close(i)
	s.enqueue(i)
}

// close records the end of chunk i's running stage at now.
func (s *sim) close(i int) {
	c := &s.chunks[i]
	st := c.stages[c.next]
	s.rec[c.base+c.next].EndS = s.now
	s.dims[st.dim].bytes += st.bytes
	c.next++
}

// loop runs events until every chunk is done.
func (s *sim) loop() error {
	var next [8]float64
	nextAt := next[:0]
	if len(s.dims) > len(next) {
		nextAt = make([]float64, 0, len(s.dims))
	}
	for {
		s.admit()
		if s.remaining == 0 {
			return nil
		}
		// The next event: a fixed delay's end, or per dimension the
		// smallest remaining transfer at the current share.
		t := math.Inf(1)
		nextAt = nextAt[:0]
		for d := range s.dims {
			ds := &s.dims[d]
			dn := math.Inf(1)
			minRem := math.Inf(1)
			for _, i := range ds.served {
				c := &s.chunks[i]
				if c.phase == inFixed {
					t = math.Min(t, c.latEnd)
				} else {
					minRem = math.Min(minRem, c.rem)
				}
			}
			if ds.sending > 0 {
				dn = s.now + minRem*float64(ds.sending)/ds.bw
				t = math.Min(t, dn)
			}
			nextAt = append(nextAt, dn)
		}
		if math.IsInf(t, 1) {
			return fmt.Errorf("flow: %d chunks wait and no dimension serves any (internal error)", s.remaining)
		}
		if t < s.now {
			t = s.now
		}
		s.account(t)
		dt := t - s.now
		s.now = t
		for d := range s.dims {
			ds := &s.dims[d]
			var share, minRem float64
			if ds.sending > 0 {
				share = dt * ds.bw / float64(ds.sending)
				minRem = math.Inf(1)
				for _, i := range ds.served {
					if c := &s.chunks[i]; c.phase == sending {
						minRem = math.Min(minRem, c.rem)
					}
				}
			}
			// Stages ending now leave served in slot order.
			k := 0
			for _, i := range ds.served {
				c := &s.chunks[i]
				switch c.phase {
				case inFixed:
					if c.latEnd <= t {
						st := c.stages[c.next]
						if st.bytes > 0 {
							c.phase, c.rem = sending, st.bytes
							ds.sending++
						} else {
							s.close(i)
							s.ended = append(s.ended, i)
							continue
						}
					}
				case sending:
					// The transfer that set this event ends
					// exactly; others end when rounding left
					// less than a billionth of their bytes.
					ends := nextAt[d] == t && c.rem <= minRem
					c.rem -= share
					if ends || c.rem <= 1e-9*c.stages[c.next].bytes {
						ds.sending--
						s.close(i)
						s.ended = append(s.ended, i)
						continue
					}
				}
				ds.served[k] = i
				k++
			}
			ds.served = ds.served[:k]
		}
		// Chunks whose stages ended together queue their next stages
		// in chunk order (as themis.ServiceOrder replays them), so that
		// FIFO's arrival order does not depend on dimension numbering.
		slices.Sort(s.ended)
		for _, i := range s.ended {
			s.enqueue(i)
		}
		s.ended = s.ended[:0]
	}
}

// account adds [s.now, t) to every dimension's busy time and timeline.
func (s *sim) account(t float64) {
	if t <= s.now {
		return
	}
	for d := range s.dims {
		ds := &s.dims[d]
		if len(ds.served) > 0 {
			ds.busy += t - s.now
			ds.serving = addSpan(ds.serving, s.now, t, s.bin)
		}
		if len(ds.served)+len(ds.queue) > 0 {
			ds.present = addSpan(ds.present, s.now, t, s.bin)
		}
	}
}

// addSpan adds the seconds of [a, b) to the windows of w (each bin
// seconds long), growing it as needed.
func addSpan(w []float64, a, b, bin float64) []float64 {
	for a < b {
		k := int(a / bin)
		for len(w) <= k {
			w = append(w, 0)
		}
		end := math.Min(b, float64(k+1)*bin)
		if end <= a { // a sits on a window's end by rounding
			k++
			for len(w) <= k {
				w = append(w, 0)
			}
			end = math.Min(b, float64(k+1)*bin)
		}
		w[k] += end - a
		a = end
	}
	return w
}

func dur(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

func (s *sim) result(t themis.Topology, bin time.Duration) Result {
	r := Result{Seconds: s.now, Time: dur(s.now), Bin: bin, Dims: make([]DimResult, len(s.dims))}
	windows := int(math.Ceil(s.now / s.bin))
	var bytes, bw float64
	for d := range s.dims {
		ds := &s.dims[d]
		dr := DimResult{Bytes: ds.bytes, Busy: dur(ds.busy), Activity: make([]float64, windows), Serving: make([]float64, windows)}
		if s.now > 0 {
			dr.Utilisation = ds.bytes / (t[d].BW * s.now)
		}
		for k := 0; k < windows; k++ {
			if k < len(ds.present) {
				dr.Activity[k] = math.Min(1, ds.present[k]/s.bin)
			}
			if k < len(ds.serving) {
				dr.Serving[k] = math.Min(1, ds.serving[k]/s.bin)
			}
		}
		r.Dims[d] = dr
		bytes += ds.bytes
		bw += t[d].BW
	}
	if s.now > 0 {
		r.Utilisation = bytes / (s.now * bw)
	}
	r.Stages = s.rec // in chunk order, then stage order
	for k := range r.Stages {
		x := &r.Stages[k]
		x.Ready, x.Start, x.End = dur(x.ReadyS), dur(x.StartS), dur(x.EndS)
	}
	return r
}
