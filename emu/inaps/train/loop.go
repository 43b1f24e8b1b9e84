package train

import (
	"fmt"
	"time"

	"github.com/inaemu/inaemu/internal/clock"
)

// Clock drives the loop: virtual time in the emulator (internal/vclock).
type Clock = clock.Clock

// Timer is a pending Clock call.
type Timer = clock.Timer

// Host is the transport of one worker.
type Host interface {
	// Push hands over a partition of iteration iter (0-based) with its
	// encoded priority. The transport sends its fragments after those of
	// every earlier push, and calls Loop.PartitionDone(iter, p.Pos) when
	// every result of the partition is in.
	Push(iter int, p Partition, prio uint8)
}

// Estimator is how the loop estimates T_j, the job's remaining time.
type Estimator int

const (
	// RemainingCommComp is ESA's simulation's: the iteration's bytes not
	// yet pushed, the partition being pushed included, over the link rate,
	// plus the iteration's compute not yet done (backward and forward).
	RemainingCommComp Estimator = iota
	// AttainedService is ESA's fallback when the remaining time is
	// unknown: the time the worker has run since the job's start.
	AttainedService
)

// DefaultLinkRate is ESA's simulated links' 100 Gb/s.
const DefaultLinkRate = 100e9

// LoopConfig configures one worker's loop.
type LoopConfig struct {
	Model      *Model
	Order      SendOrder
	Iterations int           // 0 is 1
	Start      time.Duration // the job's start (clock time), its offset already drawn
	// Draw gives a partition's send jitter: called once a partition an
	// iteration, in send order, when the iteration starts. The caller owns
	// the random source. Nil or a negative draw is no jitter.
	Draw      func() time.Duration
	LinkRate  float64 // bits/s, for RemainingCommComp; 0 is DefaultLinkRate
	Scale     float64 // the priority's fixed-point scale; 0 is DefaultScale
	Estimator Estimator
}

// IterationTimes are one iteration's instants on the clock.
type IterationTimes struct {
	Start     time.Duration // iteration start (the job's Start for iteration 0)
	FirstPush time.Duration
	LastDone  time.Duration // the last PartitionDone
	End       time.Duration // the last layer's forward compute ends
}

// Loop is one worker's training loop. Iteration i starts at the job's
// Start (i = 0) or when iteration i−1's last forward compute ends. From
// its start the layers' backward computes run last to first, one after
// the other; a partition is ready when its layer's backward compute has
// ended plus its jitter draw, and is pushed at max(its ready time, the
// previous push), so pushes keep the send order. Its priority is computed
// then. The forward compute of layer k (increasing) starts when every
// partition of layer k is done and layer k−1's forward compute has ended;
// the iteration ends with layer L's. It is not safe for concurrent use:
// everything runs on the clock's event loop.
type Loop struct {
	cfg    LoopConfig
	clk    Clock
	host   Host
	parts  []Partition     // send order
	suffix []int64         // suffix[p]: bytes of parts[p:]
	comp   time.Duration   // an iteration's compute
	bwdEnd []time.Duration // per layer, this iteration
	ready  []time.Duration // per partition, this iteration

	iter     int
	done     bool
	cur      IterationTimes
	commComp float64
	next     int // partitions pushed
	lastPush time.Duration
	finished []bool
	left     []int // per layer: partitions not done
	fwdNext  int   // 1-based layer whose forward compute is next
	fwdBusy  bool
	fwdEnd   time.Duration
	hist     []IterationTimes
}

// NewLoop schedules the first iteration at cfg.Start (at once if that has
// passed).
func NewLoop(cfg LoopConfig, clk Clock, host Host) *Loop {
	if cfg.Iterations <= 0 {
		cfg.Iterations = 1
	}
	if cfg.LinkRate <= 0 {
		cfg.LinkRate = DefaultLinkRate
	}
	m := cfg.Model
	l := &Loop{cfg: cfg, clk: clk, host: host, parts: m.Partitions(cfg.Order), comp: m.Compute()}
	l.suffix = make([]int64, len(l.parts)+1)
	for p := len(l.parts) - 1; p >= 0; p-- {
		l.suffix[p] = l.suffix[p+1] + l.parts[p].Bytes
	}
	l.bwdEnd = make([]time.Duration, len(m.Layers))
	l.ready = make([]time.Duration, len(l.parts))
	l.finished = make([]bool, len(l.parts))
	l.left = make([]int, len(m.Layers))
	clk.AfterFunc(max(cfg.Start-clk.Now(), 0), l.startIteration)
	return l
}

// Partitions is an iteration's partitions in send order.
func (l *Loop) Partitions() []Partition { return l.parts }

// Done reports whether every iteration has ended.
func (l *Loop) Done() bool { return l.done }

// Iterations is the times of the iterations that have ended.
func (l *Loop) Iterations() []IterationTimes { return append([]IterationTimes(nil), l.hist...) }

func (l *Loop) startIteration() {
	now := l.clk.Now()
	m := l.cfg.Model
	l.cur = IterationTimes{Start: now}
	l.commComp = l.iterationCommComp()
	t := now
	for k := len(m.Layers) - 1; k >= 0; k-- {
		t += m.Layers[k].Backward
		l.bwdEnd[k] = t
	}
	for p, part := range l.parts {
		var j time.Duration
		if l.cfg.Draw != nil {
			j = max(l.cfg.Draw(), 0)
		}
		l.ready[p] = l.bwdEnd[part.Layer-1] + j
		l.finished[p] = false
	}
	for k, layer := range m.Layers {
		l.left[k] = layer.Partitions
	}
	l.next, l.lastPush, l.fwdNext, l.fwdBusy = 0, now, 1, false
	l.schedulePush()
}

// iterationCommComp is Eq. (1)'s Comm/Comp for the iteration starting:
// the model's if set, else measured from the previous iteration (comm
// from its first push to its last result, comp its compute), else 1.
func (l *Loop) iterationCommComp() float64 {
	if cc := l.cfg.Model.CommComp; cc > 0 {
		return cc
	}
	if len(l.hist) == 0 || l.comp <= 0 {
		return 1
	}
	prev := l.hist[len(l.hist)-1]
	return float64(prev.LastDone-prev.FirstPush) / float64(l.comp)
}

func (l *Loop) schedulePush() {
	if l.next == len(l.parts) {
		return
	}
	at := max(l.lastPush, l.ready[l.next])
	l.clk.AfterFunc(at-l.clk.Now(), l.push)
}

func (l *Loop) push() {
	now := l.clk.Now()
	p := l.next
	prio := Encode(Priority(l.estimate(p, now), len(l.cfg.Model.Layers), l.parts[p].Layer, l.commComp), l.cfg.Scale)
	if p == 0 {
		l.cur.FirstPush = now
	}
	l.next++
	l.lastPush = now
	l.host.Push(l.iter, l.parts[p], prio)
	l.schedulePush()
}

// estimate is T_j at the push of partition p.
func (l *Loop) estimate(p int, now time.Duration) time.Duration {
	if l.cfg.Estimator == AttainedService {
		return now - l.cfg.Start
	}
	comm := time.Duration(float64(l.suffix[p]) * 8 / l.cfg.LinkRate * float64(time.Second))
	var comp time.Duration
	for k, layer := range l.cfg.Model.Layers {
		// backward: layer k's runs until bwdEnd[k]
		comp += min(max(l.bwdEnd[k]-now, 0), layer.Backward)
		switch {
		case k+1 < l.fwdNext:
		case k+1 == l.fwdNext && l.fwdBusy:
			comp += l.fwdEnd - now
		default:
			comp += layer.Forward
		}
	}
	return comm + comp
}

// PartitionDone tells the loop that every result of partition part (its
// position in the send order) of iteration iter is in. A repeated or
// stale call (an iteration that has ended) is ignored; a call for a
// partition not yet pushed is a transport bug and panics.
func (l *Loop) PartitionDone(iter, part int) {
	if iter < l.iter || l.done {
		return
	}
	if iter > l.iter || part < 0 || part >= l.next {
		panic(fmt.Sprintf("train: PartitionDone(%d, %d) of a partition not pushed (iteration %d, %d pushed)", iter, part, l.iter, l.next))
	}
	if l.finished[part] {
		return
	}
	l.finished[part] = true
	l.cur.LastDone = l.clk.Now()
	l.left[l.parts[part].Layer-1]--
	l.tryCompute()
}

func (l *Loop) tryCompute() {
	if l.fwdBusy || l.fwdNext > len(l.left) || l.left[l.fwdNext-1] > 0 {
		return
	}
	d := l.cfg.Model.Layers[l.fwdNext-1].Forward
	l.fwdBusy, l.fwdEnd = true, l.clk.Now()+d
	l.clk.AfterFunc(d, l.computeDone)
}

func (l *Loop) computeDone() {
	l.fwdBusy = false
	l.fwdNext++
	if l.fwdNext <= len(l.left) {
		l.tryCompute()
		return
	}
	l.cur.End = l.clk.Now()
	l.hist = append(l.hist, l.cur)
	l.iter++
	if l.iter == l.cfg.Iterations {
		l.done = true
		return
	}
	l.startIteration()
}
