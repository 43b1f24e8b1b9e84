// Package experiment runs INA-PS jobs on an emulated fabric: one switch
// running the ina-ps program under a policy, each job's workers and PS
// on hosts of their own, each worker's training loop (package train)
// pushing its model's partitions through its transport (package
// endpoint), and the results checked against an oracle. It is ESA's
// simulation (its §7.2.1) set up as inaemu runs it: real frames on every
// link, faults on any hop, a capture of every link direction.
package experiment

import (
	"fmt"
	"io"
	"time"

	"github.com/inaemu/inaemu/emu/inaps"
	"github.com/inaemu/inaemu/emu/inaps/train"
	"github.com/inaemu/inaemu/faults"
)

// JobSpec is one job: its model and its workers.
type JobSpec struct {
	Name    string
	Model   *train.Model
	Workers int
}

// Config is an experiment. Zero fields take ESA's simulation's settings
// (Defaults).
type Config struct {
	Policy inaps.Policy
	Jobs   []JobSpec
	// Aggregators is the switch's pool (inaps.DefaultAggregators: ATP's
	// 20,000, ESA's 5 MB).
	Aggregators int
	Iterations  int
	Order       train.SendOrder
	// LinkRate (bits/s) and Latency (one way per link) of every link: ESA's
	// 100 Gb/s with a 10 µs base RTT, four links of 2.5 µs.
	LinkRate float64
	Latency  time.Duration
	Queue    int // egress queue per link direction, frames (1000)
	// ECNBytes is the egress queue depth that marks CE: ATP's AIMD halves
	// on it (default 125,000 B, one bandwidth-delay product).
	ECNBytes int
	// Window: InitWindowBytes (ATP's 60 KB, rounded down to whole
	// frames) up to MaxWindow frames (inaps.Slots); AIMD off keeps it.
	InitWindowBytes int
	MaxWindow       int
	NoAIMD          bool
	RTOMin          time.Duration // 1 ms (ESA §6)
	DupThresh       int           // 3
	// StartSpread and Jitter: job start offsets U(0, StartSpread) and a
	// send jitter U(0, Jitter) per worker per partition (ESA: 1 ms, 300 µs).
	StartSpread, Jitter time.Duration
	// PSDelay is the PS's time per fragment it completes; SwitchDelay the
	// switch's per packet (a preemption's resubmission another).
	PSDelay, SwitchDelay time.Duration
	PriorityScale        float64
	// FloatScale, if positive, makes the gradients float32 carried as
	// fixed point (value × FloatScale), with ATP's overflow path to the
	// PS; 0 keeps them int32.
	FloatScale float64
	Estimator  train.Estimator
	Seed       uint64
	Netem      faults.Netem
	Events     []faults.Event
	Capture    io.Writer
	MaxTime    time.Duration // virtual time before giving up (10 s)
	// StallTime: a run in which no worker gets a result for this long is
	// stalled (default 1,000 RTO floors: ten of the longest a timer waits,
	// back-off included; a recovery may chain several: a worker's timer,
	// its reminder's entry's at the PS, the channel's retries).
	StallTime time.Duration
	// Mutations re-introduce bugs in the switch (the suites' power tests).
	Mutations inaps.Mutations
}

// Defaults fills the zero fields with ESA's simulation's settings.
func (c *Config) Defaults() {
	if c.Aggregators == 0 {
		c.Aggregators = inaps.DefaultAggregators
	}
	if c.Iterations == 0 {
		c.Iterations = 1
	}
	if c.LinkRate == 0 {
		c.LinkRate = 100e9
	}
	if c.Latency == 0 {
		c.Latency = 2500 * time.Nanosecond
	}
	if c.Queue == 0 {
		c.Queue = 1000
	}
	if c.ECNBytes == 0 {
		c.ECNBytes = 125000
	}
	if c.InitWindowBytes == 0 {
		c.InitWindowBytes = 60000
	}
	if c.MaxWindow == 0 {
		c.MaxWindow = inaps.Slots
	}
	if c.RTOMin == 0 {
		c.RTOMin = time.Millisecond
	}
	if c.DupThresh == 0 {
		c.DupThresh = 3
	}
	if c.MaxTime == 0 {
		c.MaxTime = 10 * time.Second
	}
	if c.StallTime == 0 {
		// Nor may a job's own pauses (its start, its compute) look like
		// one.
		c.StallTime = max(1000*c.RTOMin, 50*time.Millisecond)
		for _, j := range c.Jobs {
			if j.Model != nil {
				c.StallTime = max(c.StallTime, 2*j.Model.Compute()+c.StartSpread+c.Jitter)
			}
		}
	}
}

// Validate refuses a configuration the run could not honour, in one
// line.
func (c *Config) Validate() error {
	if len(c.Jobs) == 0 {
		return fmt.Errorf("no jobs")
	}
	if len(c.Jobs) > 64 {
		return fmt.Errorf("%d jobs: want 1..64", len(c.Jobs))
	}
	hosts := 0
	for i, j := range c.Jobs {
		if j.Model == nil {
			return fmt.Errorf("job %d has no model", i)
		}
		if j.Workers < 1 || j.Workers > 32 {
			return fmt.Errorf("job %d: %d workers: the bitmap holds 1..32", i, j.Workers)
		}
		hosts += j.Workers
		if c.Policy.HasPS() {
			hosts++
		}
	}
	if hosts > 250 {
		return fmt.Errorf("%d hosts (workers and PSes): the emulated switch has at most 250 ports", hosts)
	}
	if c.Aggregators < 1 || c.Aggregators > inaps.MaxAggregators {
		return fmt.Errorf("%d aggregators: want 1..%d (a 16-bit index)", c.Aggregators, inaps.MaxAggregators)
	}
	if c.Policy == inaps.Static && c.Aggregators/len(c.Jobs) < 2 {
		return fmt.Errorf("%d aggregators for %d jobs: the static policy gives each job a region of at least 2 (a slot and its shadow)", c.Aggregators, len(c.Jobs))
	}
	if c.FloatScale < 0 || c.FloatScale > 1<<40 {
		return fmt.Errorf("float scale %v: want 0 (int32 gradients) or a positive scale up to 2^40", c.FloatScale)
	}
	if c.FloatScale > 0 && c.Policy == inaps.Static {
		return fmt.Errorf("float gradients need a PS for their overflow path, and the static (SwitchML-style) policy has none (SwitchML's own float path, a per-packet exponent, is not modelled)")
	}
	if c.MaxWindow < 1 || c.MaxWindow > inaps.Slots {
		return fmt.Errorf("window %d frames: want 1..%d (the slots of a job's index table)", c.MaxWindow, inaps.Slots)
	}
	if c.InitWindowBytes < inaps.FrameLen {
		return fmt.Errorf("initial window %d bytes: want at least one frame (%d)", c.InitWindowBytes, inaps.FrameLen)
	}
	if c.Iterations < 1 || c.Iterations > 1000 {
		return fmt.Errorf("%d iterations: want 1..1000", c.Iterations)
	}
	if c.LinkRate <= 0 || c.Latency < 0 || c.RTOMin <= 0 || c.StartSpread < 0 || c.Jitter < 0 || c.PSDelay < 0 || c.SwitchDelay < 0 {
		return fmt.Errorf("rates and times must be positive (delays may be 0)")
	}
	if c.RTOMin < time.Microsecond {
		return fmt.Errorf("RTO floor %v: want at least 1µs (below it the channels' timers outrun the links)", c.RTOMin)
	}
	if c.DupThresh < 1 || c.DupThresh > 64 {
		return fmt.Errorf("dupACK threshold %d: want 1..64", c.DupThresh)
	}
	return nil
}
