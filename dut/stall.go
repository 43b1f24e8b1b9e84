package dut

import (
	"fmt"
	"sync"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tap"
)

// StallTimeouts is how many ACK timeouts (the floor, AckTimeout of the
// job's Timeout) a run may go without progress before the stall detector
// ends it. Progress is a host handed a RoCE frame with a PSN it was never
// handed on that queue pair (a new result, data or acknowledgement);
// nothing else is: not an ARP, LLDP or any other frame the device sends
// now and then, nor a RoCE frame a host already had (a device that
// broadcasts or re-sends while its data plane hangs is stalled all the
// same). The clock starts when the job starts sending (its hosts' first
// frame, the start barrier's announcement), not while the hosts build
// their tensors and session, which a loaded machine can take seconds
// over. A device that stops forwarding ends its case in 8 timeouts (0.5 s
// at 67 ms) instead of the run's max_time (120 s in the suites' cases,
// the start barrier included). Why 8: a good
// device is silent that long only when the hosts are too (their
// retransmission timer doubles at each expiry, 1, 2, 4 floors: the
// fourth retransmission of one exchange comes 7 floors after the first
// expiry), which takes four attempts in a row destroyed by faults; that
// case is reported a stall without device evidence (see Stall), which
// the suites count as inconclusive and rerun, never as a device failure.
const StallTimeouts = 8

// StallError is a run the stall detector ended. It wraps the job's
// failure (*emu.JobError), so it is a job failure to every caller.
type StallError struct {
	*emu.JobError
	// For is how long nothing progressed.
	For time.Duration
	// Silent: the device sent no RoCE frame in that time (what else it
	// sent does not count) though every rank sent frames into it. That is the device's doing: a forwarding
	// device owes a frame for each, and an aggregating one, whose cells
	// complete when every rank's packet arrived, owes at least the
	// result of the oldest cell every rank resent.
	Silent bool
	// In is how many frames entered the device in that time, by port.
	In []int
}

func (e *StallError) Unwrap() error { return e.JobError }

// Evidence is the device's part in the stall, in words, or "".
func (e *StallError) Evidence() string {
	if !e.Silent {
		return ""
	}
	return fmt.Sprintf("the device sent no RoCE frame for %v though every rank sent frames into it (%v by port)", e.For.Round(time.Millisecond), e.In)
}

// watch is the stall detector of one run: it sees what the hosts are
// handed (through Observe) and what crosses the device's ports (through
// watchedPort), and closes the hosts' pipes when nothing progressed for
// its limit, which ends the job's event loop.
type watch struct {
	limit time.Duration
	mu    sync.Mutex
	armed bool      // the job started sending: the clock runs
	last  time.Time // the last progress (at first, the job's first frame)
	in    []int     // frames into the device since the last progress, by port
	out   int       // RoCE frames out of the device since the last progress
	seen  map[psnKey]bool
	v     frames.View
	stall *StallError
}

type psnKey struct {
	rank   int
	qp     uint32
	psn    uint32
	answer bool
}

func newWatch(cfg emu.Config) *watch {
	return &watch{limit: StallTimeouts * roce.AckTimeout(cfg.Timeout), in: make([]int, cfg.Workers), seen: map[psnKey]bool{}}
}

// observe is Device.Observe's companion: it runs on the hosts' loop.
func (w *watch) observe(rank int, sent bool, frame []byte) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if sent {
		if !w.armed { // the job's first frame: the clock starts
			w.armed = true
			w.progressed()
		}
		return
	}
	if w.v.Parse(frame) != nil {
		return // not RoCE: no progress
	}
	k := psnKey{rank, w.v.DestQP(), w.v.PSN(), w.v.Opcode().IsAck()}
	if !w.seen[k] {
		w.seen[k] = true
		w.progressed()
	}
}

// progressed restarts the count (w.mu held).
func (w *watch) progressed() {
	w.last = time.Now()
	clear(w.in)
	w.out = 0
}

// port counts the frames crossing the device's port r.
func (w *watch) port(r int, d tap.Device) tap.Device { return watchedPort{d, w, r} }

type watchedPort struct {
	tap.Device
	w *watch
	r int
}

func (p watchedPort) ReadFrame(buf []byte) (int, error) { // a frame the device sent
	n, err := p.Device.ReadFrame(buf)
	if err == nil && isRoCE(buf[:n]) { // breaks silence, but is no progress
		p.w.mu.Lock()
		p.w.out++
		p.w.mu.Unlock()
	}
	return n, err
}

func (p watchedPort) WriteFrame(frame []byte) error { // a frame into the device
	p.w.mu.Lock()
	p.w.in[p.r]++
	p.w.mu.Unlock()
	return p.Device.WriteFrame(frame)
}

// run checks every limit/8 until done is closed; on a stall it records
// it and calls stop (which must end the run).
func (w *watch) run(done <-chan struct{}, stop func()) {
	t := time.NewTicker(max(w.limit/8, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		w.mu.Lock()
		if !w.armed {
			w.mu.Unlock()
			continue
		}
		idle := time.Since(w.last)
		if idle >= w.limit {
			silent := w.out == 0
			for _, n := range w.in {
				silent = silent && n > 0
			}
			w.stall = &StallError{For: idle, Silent: silent, In: append([]int(nil), w.in...)}
			w.stall.JobError = &emu.JobError{Msg: fmt.Sprintf("stalled: no progress for %v (%d ACK timeouts of %v): no host was handed a RoCE frame with a new PSN (a new result, data or acknowledgement)",
				idle.Round(time.Millisecond), StallTimeouts, w.limit/StallTimeouts)}
			w.mu.Unlock()
			stop()
			return
		}
		w.mu.Unlock()
	}
}

// stalled is the stall recorded, or nil.
func (w *watch) stalled() *StallError {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.stall
}

// isRoCE reports whether frame is a RoCE frame (what the ports' readers
// hand the watch, possibly from several goroutines: a View each).
func isRoCE(frame []byte) bool {
	var v frames.View
	return v.Parse(frame) == nil
}
