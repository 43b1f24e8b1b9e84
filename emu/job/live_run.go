package job

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/inaemu/inaemu/emu/live"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/tap"
)

// announceEvery is how often a live host repeats its gratuitous ARP while
// it has not yet heard every peer.
const announceEvery = 10 * time.Millisecond

// serve runs a live job: the start barrier, then the job, until it is done,
// fails, or MaxVirtual of wall time has passed.
func (r *Job) serve() *Result {
	defer r.Fab.Close()
	ctx, cancel := context.WithTimeout(context.Background(), r.Cfg.MaxVirtual)
	defer cancel()
	b := newStartBarrier(r)
	err := r.Fab.Serve(ctx, func() bool { return r.Err != nil || r.finished() })
	switch {
	case r.Err != nil:
	case errors.Is(err, context.DeadlineExceeded) && !r.Started:
		r.Err = &JobError{Msg: fmt.Sprintf("job did not start within %v: %s", r.Cfg.MaxVirtual, b.missing())}
	case errors.Is(err, context.DeadlineExceeded):
		r.Err = &JobError{Msg: fmt.Sprintf("job did not finish within %v: %s", r.Cfg.MaxVirtual, r.progress())}
	case err != nil:
		r.Err = &JobError{Msg: err.Error()}
	}
	return r.run.result(0)
}

// startBarrier makes the processes of a job (a host each, the switch) wait
// for one another, so no rank sends to a device nobody has opened yet.
// Each local host broadcasts a gratuitous ARP request every announceEvery
// until it has heard one from every other rank (the switch floods them, so
// hearing a peer also means the switch runs), and answers every request it
// hears with a gratuitous ARP reply, which is never answered: a host that
// started late hears those who were waiting. When every local host has
// heard every peer, the job starts.
type startBarrier struct {
	r     *Job
	heard map[int][]bool // local rank → which ranks it has heard
	left  map[int]int    // local rank → how many it has not
	tick  func()
}

func newStartBarrier(r *Job) *startBarrier {
	b := &startBarrier{r: r, heard: map[int][]bool{}, left: map[int]int{}}
	n := len(r.Workers)
	for _, w := range r.Local() {
		w := w
		b.heard[w.Rank] = make([]bool, n)
		b.heard[w.Rank][w.Rank] = true
		b.left[w.Rank] = n - 1
		w.NIC.OnControl = func(frame []byte) { b.control(w, frame) }
	}
	clock := r.Fab.Clock
	b.tick = func() {
		if r.Started || r.Err != nil {
			return
		}
		for _, w := range r.Local() {
			if b.left[w.Rank] > 0 {
				w.NIC.SendControl(w.NIC.GratuitousARP())
			}
		}
		clock.AfterFunc(announceEvery, b.tick)
	}
	b.tick()
	b.maybeStart()
	return b
}

// control handles a non-RoCE frame at local worker w.
func (b *startBarrier) control(w *Worker, frame []byte) {
	peer, op, ok := hostARP(frame)
	if !ok || peer == w.Rank || peer >= len(b.r.Workers) {
		return
	}
	if !b.heard[w.Rank][peer] {
		b.heard[w.Rank][peer] = true
		b.left[w.Rank]--
		b.maybeStart()
	}
	// A host still waiting announces itself every announceEvery anyway;
	// one that has heard everybody answers the requester alone, so a
	// late rank hears it without a storm of broadcasts.
	if op == arpOpRequest && b.left[w.Rank] == 0 {
		w.NIC.SendControl(arpReply(w.NIC.GratuitousARP(), frame[6:12]))
	}
}

func (b *startBarrier) maybeStart() {
	r := b.r
	if r.Started {
		return
	}
	for _, k := range b.left {
		if k > 0 {
			return
		}
	}
	r.Started = true
	r.startAt = r.Fab.Clock.Now()
	if err := r.Alg.Start(); err != nil {
		r.Err = &JobError{Msg: fmt.Sprintf("start: %v", err)}
	}
}

// missing says which local ranks have not heard which peers.
func (b *startBarrier) missing() string {
	s := ""
	for _, w := range b.r.Local() {
		var not []int
		for p, ok := range b.heard[w.Rank] {
			if !ok {
				not = append(not, p)
			}
		}
		if len(not) > 0 {
			s += fmt.Sprintf(" rank %d has not heard ranks %v;", w.Rank, not)
		}
	}
	return "no gratuitous ARP arrived through the switch (is `inaemu switch` running, and every `inaemu host`?):" + s
}

const (
	arpOpRequest = 1
	arpOpReply   = 2
)

// hostARP reads an ARP frame from one of inaemu's hosts: the sender's rank
// (from its MAC, see HostMAC) and the ARP operation.
func hostARP(f []byte) (rank int, op int, ok bool) {
	if len(f) < 42 || f[12] != 0x08 || f[13] != 0x06 {
		return 0, 0, false
	}
	src := f[6:12]
	if src[0] != 0x02 || src[1] != 0x1A || src[2] != 0xE0 || src[3] != 0 {
		return 0, 0, false
	}
	rank = (int(src[4])<<8 | int(src[5])) - 1
	return rank, int(f[20])<<8 | int(f[21]), rank >= 0
}

// arpReply turns a gratuitous ARP request into a reply to the host with
// MAC to.
func arpReply(f []byte, to []byte) []byte {
	copy(f[0:6], to)
	f[20], f[21] = 0, arpOpReply
	copy(f[32:38], to)
	return f
}

// ServeSwitch runs the aggregating switch of cfg's job on ports (port r
// faces rank r) until ctx ends, then reports what it did. In NetReduce
// mode the switch holds the job's ring; in ring mode it only forwards.
// ready, if set, runs once the ports are open and the ring is set up.
func ServeSwitch(ctx context.Context, cfg Config, ports []tap.Device, ready func()) (switching.Report, error) {
	if err := cfg.Validate(); err != nil {
		return switching.Report{}, err
	}
	if len(ports) != cfg.Workers {
		return switching.Report{}, &ConfigError{fmt.Errorf("%d ports for %d workers", len(ports), cfg.Workers)}
	}
	fab, err := live.NewFabric(cfg.Workers, cfg.Transport, cfg.Timing, live.Devices{Switch: ports})
	if err != nil {
		return switching.Report{}, &ConfigError{err}
	}
	defer fab.Close()
	if alg := Lookup(cfg.Mode); alg != nil && alg.ServeSwitch != nil {
		if err := alg.ServeSwitch(cfg, fab.Switch); err != nil {
			return switching.Report{}, &ConfigError{err}
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
