package emu

import (
	"fmt"
	"time"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/units"
)

// validateJob is the part of Validate that looks at the job as a whole,
// after the range checks of each setting: durations within
// faults.MaxDuration (a Config built in code, not parsed, may hold
// anything), faults that can match something in this job, and the memory
// the job needs against the memory there is (see checkMemory).
func (c *Config) validateJob() error {
	bad := func(f string, a ...any) error { return &ConfigError{fmt.Errorf(f, a...)} }
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"--max-time", c.MaxVirtual}, {"--latency", c.Link.Latency}, {"netem delay", c.Netem.Delay}, {"netem jitter", c.Netem.Jitter}} {
		if d.v < 0 || d.v > faults.MaxDuration {
			return bad("%s %v: want 0..%v", d.name, d.v, faults.MaxDuration)
		}
	}
	if c.Mode == NetReduce {
		// The switch tells a packet's message by its signed 24-bit PSN
		// distance, exact while a connection spans fewer than 2^23 PSNs.
		if n := netReduceMessages(*c) * int64(c.MsgLen); n >= 1<<23 {
			return bad("--tensor %s at --mtu %d: each ring connection would carry %d packets; the 24-bit PSN space allows fewer than 2^23 (%d) for the switch to place every packet: use a larger --mtu or a smaller --tensor",
				units.FormatSize(c.TensorBytes), c.MTU, n, 1<<23)
		}
	}
	for i := range c.Events {
		if err := c.checkEvent(&c.Events[i]); err != nil {
			return &ConfigError{err}
		}
	}
	if err := c.checkMemory(); err != nil {
		return &ConfigError{err}
	}
	return nil
}

// checkEvent refuses a fault that names a port or a QP the job does not
// have: it would never fire, and the run would pass for a run with the
// fault.
func (c *Config) checkEvent(ev *faults.Event) error {
	spec := ev.Spec
	if spec == "" {
		spec = ev.Action.String()
	}
	switch {
	case ev.Port >= c.Workers:
		return fmt.Errorf("--fault %q: port=%d: the job's switch ports are 0..%d (port R faces rank R)", spec, ev.Port, c.Workers-1)
	case ev.Action == faults.ActSpoof && c.Mode != NetReduce:
		return fmt.Errorf("--fault %q: spoof forges aggregation frames for the switch to refuse; in ring mode no switch program checks them and a forged WRITE is simply written (use --mode netreduce)", spec)
	case ev.Action == faults.ActSpoof && ev.From >= c.Workers:
		return fmt.Errorf("--fault %q: spoof=%d: the job's switch ports are 0..%d (port R faces rank R)", spec, ev.From, c.Workers-1)
	case ev.QP >= 0 && ev.QP != sendQPN && ev.QP != recvQPN:
		return fmt.Errorf("--fault %q: qp=%#x: the job's QPs are %#x (every host's send QP: ACKs and NAKs arrive there) and %#x (its receive QP: requests arrive there)",
			spec, ev.QP, sendQPN, recvQPN)
	case ev.Action == faults.ActDelay && (ev.Delay <= 0 || ev.Delay > faults.MaxDuration):
		return fmt.Errorf("--fault %q: delay %v: want more than 0 and at most %v", spec, ev.Delay, faults.MaxDuration)
	}
	return nil
}
