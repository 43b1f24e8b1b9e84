package live

import (
	"context"
	"errors"
	"fmt"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/tap"
)

// ServeSwitch runs the aggregating switch of cfg's job on ports (port r
// faces rank r) until ctx ends, then reports what it did. The job's
// collective installs what its switch holds (NetReduce: the job's ring;
// ring mode: nothing, the switch only forwards). ready, if set, runs once
// the ports are open and that is installed.
func ServeSwitch(ctx context.Context, cfg job.Config, ports []tap.Device, ready func()) (switching.Report, error) {
	if err := cfg.Validate(); err != nil {
		return switching.Report{}, err
	}
	if len(ports) != cfg.Workers {
		return switching.Report{}, &job.ConfigError{Err: fmt.Errorf("%d ports for %d workers", len(ports), cfg.Workers)}
	}
	fab, err := NewFabric(cfg.Workers, cfg.Transport, cfg.Timing, Devices{Switch: ports})
	if err != nil {
		return switching.Report{}, &job.ConfigError{Err: err}
	}
	defer fab.Close()
	if alg := job.Lookup(cfg.Mode); alg != nil && alg.ServeSwitch != nil {
		if err := alg.ServeSwitch(cfg, fab.Switch); err != nil {
			return switching.Report{}, &job.ConfigError{Err: err}
		}
	}
	if ready != nil {
		ready()
	}
	err = fab.Serve(ctx, func() bool { return false })
	rep := fab.Switch.Report()
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		err = nil
	}
	return rep, err
}
