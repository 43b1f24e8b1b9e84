package job

import (
	"context"
	"errors"
	"fmt"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/roce"
)

// Devices is a live backend: it puts a job's hosts and switch ports on
// real interfaces instead of emulated links (emu/live's Devices, on TAPs
// and sockets). The runner knows a backend only through this interface,
// so it imports no device package.
type Devices interface {
	// Fabric builds the live fabric of a star of hosts hosts, rank r on
	// host hr: the hosts with a device run in this process, the others
	// only lend their addresses; the switch runs here when it has ports.
	// The fabric's Backend serves it in wall-clock time.
	Fabric(hosts int, t frames.Transport, timing switching.Timing) (*fabric.Fabric, error)
	// StartBarrier holds the job until every process of it (a host each,
	// the switch) runs, so no rank sends to a device nobody has opened
	// yet; then it calls start, once. hosts[r] is rank r's NIC if the
	// rank runs here, nil if it runs elsewhere. waiting reports whether
	// the job still waits (false once it started or failed): a barrier
	// stops announcing its hosts then. The barrier's frames are the
	// hosts' non-RoCE ones (nic.NIC.OnControl, SendControl) on clock.
	StartBarrier(clock roce.Clock, hosts []*nic.NIC, start func(), waiting func() bool) StartBarrier
}

// StartBarrier is a live job's start barrier (Devices.StartBarrier).
type StartBarrier interface {
	// Missing says why the job has not started: which local ranks have
	// not heard from which.
	Missing() string
}

// serve runs a live job: the start barrier, then the job, until it is done,
// fails, or MaxVirtual of wall time has passed.
func (r *Job) serve() *Result {
	defer r.Fab.Close()
	ctx, cancel := context.WithTimeout(context.Background(), r.Cfg.MaxVirtual)
	defer cancel()
	hosts := make([]*nic.NIC, len(r.Workers))
	for _, w := range r.Local() {
		hosts[w.Rank] = w.NIC
	}
	b := r.run.cfg.Devices.StartBarrier(r.Fab.Clock, hosts, r.startLive, func() bool { return !r.Started && r.Err == nil })
	err := r.Fab.Serve(ctx, func() bool { return r.Err != nil || r.finished() })
	switch {
	case r.Err != nil:
	case errors.Is(err, context.DeadlineExceeded) && !r.Started:
		r.Err = &JobError{Msg: fmt.Sprintf("job did not start within %v: %s", r.Cfg.MaxVirtual, b.Missing())}
	case errors.Is(err, context.DeadlineExceeded):
		r.Err = &JobError{Msg: fmt.Sprintf("job did not finish within %v: %s", r.Cfg.MaxVirtual, r.progress())}
	case err != nil:
		r.Err = &JobError{Msg: err.Error()}
	}
	return r.run.result(0)
}

// startLive starts a live job once its start barrier has passed.
func (r *Job) startLive() {
	if r.Started {
		return
	}
	r.Started = true
	r.startAt = r.Fab.Clock.Now()
	if err := r.Alg.Start(); err != nil {
		r.Err = &JobError{Msg: fmt.Sprintf("start: %v", err)}
	}
}
