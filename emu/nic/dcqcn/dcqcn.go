// Package dcqcn is DCQCN (Zhu et al., "Congestion Control for
// Large-Scale RDMA Deployments", SIGCOMM '15) as a NIC offload
// (nic.Offload named "dcqcn"): the notification point answers a data
// packet a switch marked CE with a congestion notification packet (CNP)
// to its sender, at most one per QP per interval, and the reaction point
// limits each QP's rate, cutting it on a CNP and raising it again by the
// paper's timer and byte counter.
//
// Nothing runs on timers of its own: a QP's state machine is advanced to
// the current time whenever the NIC asks about the QP (Pace, Transmit, a
// CNP), processing every timer expiry that fell due since at its exact
// time, in order. The result depends on the virtual clock only.
package dcqcn

import (
	"math"
	"time"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/roce"
)

// wireOverhead is what a frame costs on the line beyond the bytes a
// capture shows (preamble and start delimiter 8, FCS 4, gap 12), as the
// fabric counts it: a rate limiter paces the line's bits.
const wireOverhead = 24

// Offload is one NIC's DCQCN: its NP and its QPs' RPs.
type Offload struct {
	nic   *nic.NIC
	clock roce.Clock
	p     Params
	stats Stats

	qps   map[uint32]*qpState // by local QPN
	order []*qpState          // in the order first seen (the report's)

	// CNPs wait here for the line, each in a buffer of its own.
	out  [][]byte
	head int
	pool [][]byte
	cnp  [wire.CNPLen]byte // the CNP's reserved bytes: zero
}

// qpState is one local QP's NP and RP state.
type qpState struct {
	q *roce.QP

	// NP: when this QP's last CNP went (cnpSent: one did).
	lastCNP time.Duration
	cnpSent bool
	bld     *frames.Builder // the CNP's headers (made on the QP's first CNP)

	// RP: before the QP's first CNP it sends at line rate and nothing is
	// evaluated (active false).
	active    bool
	rc, rt    float64 // current and target rate, bit/s
	alpha     float64
	minRc     float64
	alphaNext time.Duration // next α decay, if no CNP comes first
	timerNext time.Duration // next rate-increase timer expiry
	tc, bc    int           // timer and byte-counter events since the last CNP
	bytes     int64         // bytes sent since the last byte-counter event
	nextTxPs  int64         // when the QP may send its next frame at rc, ps
	cnps      uint64        // CNPs received
}

// Enable gives NIC h DCQCN with settings p (before traffic) and returns
// it (its counters: Stats).
func Enable(h *nic.NIC, p Params) (*Offload, error) {
	if err := p.Validate(); err != nil {
		return nil, err
	}
	o := &Offload{nic: h, clock: h.Clock(), p: p, qps: make(map[uint32]*qpState)}
	h.AddOffload(o)
	h.AddTxSource(o)
	return o, nil
}

// Name is the offload's.
func (o *Offload) Name() string { return "dcqcn" }

// Params are the offload's settings.
func (o *Offload) Params() Params { return o.p }

// state is local QP qpn's state (nil: the NIC has no such QP).
func (o *Offload) state(qpn uint32) *qpState {
	if s, ok := o.qps[qpn]; ok {
		return s
	}
	for _, q := range o.nic.QPs() {
		if q.QPN() == qpn {
			s := &qpState{q: q, rc: o.p.LineRate, rt: o.p.LineRate, alpha: o.p.AlphaInit, minRc: o.p.LineRate}
			o.qps[qpn] = s
			o.order = append(o.order, s)
			return s
		}
	}
	return nil
}

// Pace is when q may send its next frame at its current rate: at once
// while it has had no CNP or is back at line rate.
func (o *Offload) Pace(q *roce.QP, now time.Duration) time.Duration {
	s := o.qps[q.QPN()]
	if s == nil || !s.active {
		return 0
	}
	o.advance(s, now)
	if s.rc >= o.p.LineRate {
		return 0
	}
	return time.Duration((s.nextTxPs + 999) / 1000)
}

// Transmit counts the frame q sends: its line time at the current rate
// sets when the next may go, and its bytes feed the byte counter. The
// frame passes unchanged.
func (o *Offload) Transmit(q *roce.QP, _ []byte, n int) (int, int64) {
	s := o.qps[q.QPN()]
	if s == nil || !s.active {
		return n, 0
	}
	now := o.clock.Now()
	o.advance(s, now)
	if s.rc < o.p.LineRate {
		start := max(s.nextTxPs, int64(now)*1000)
		s.nextTxPs = start + int64(math.Ceil(float64((n+wireOverhead)*8)*1e12/s.rc))
	}
	s.bytes += int64(n)
	for s.bytes >= o.p.B {
		s.bytes -= o.p.B
		s.bc++
		o.increase(s)
	}
	return n, 0
}

// Receive is the NP and the RP's feedback: a CNP for a local QP is
// consumed (the rate decrease); a data packet marked CE for a local QP
// makes a CNP to its sender unless one went within the interval; every
// other frame, and every data packet, goes on unchanged.
func (o *Offload) Receive(v *frames.View, next func(*frames.View)) {
	op := v.Opcode()
	if op == wire.CNP {
		if s := o.state(v.DestQP()); s != nil && v.ICRCOK() {
			o.stats.CNPReceived++
			o.decrease(s, o.clock.Now())
			return
		}
		next(v)
		return
	}
	if v.TClass()&3 == 3 && op.Class() == wire.ClassRC && op.Known() && op != wire.Acknowledge && op != wire.AtomicAcknowledge {
		if s := o.state(v.DestQP()); s != nil && v.ICRCOK() {
			o.stats.ECNMarkedReceived++
			o.notify(s, o.clock.Now())
		}
	}
	next(v)
}

// notify sends QP s's peer a CNP, unless one went less than the interval
// ago.
func (o *Offload) notify(s *qpState, now time.Duration) {
	if s.cnpSent && now-s.lastCNP < o.p.CNPInterval {
		o.stats.CNPSuppressed++
		return
	}
	if s.bld == nil {
		p := s.q.Path()
		p.TClass = o.p.CNPDSCP << 2 // ECN 00: a CNP is never marked
		if p.VLAN {
			p.VLANPCP = o.p.CNPDSCP >> 3
		}
		b, err := frames.NewBuilder(p)
		if err != nil {
			return // a connected QP's path always builds
		}
		s.bld = b
	}
	buf := o.buffer()
	n, err := s.bld.Build(buf, &frames.Packet{Opcode: wire.CNP, BECN: true, Payload: o.cnp[:]})
	if err != nil {
		o.pool = append(o.pool, buf)
		return
	}
	s.cnpSent, s.lastCNP = true, now
	o.stats.CNPSent++
	if o.head > 0 && o.head == len(o.out) {
		o.out, o.head = o.out[:0], 0
	}
	o.out = append(o.out, buf[:n])
	o.nic.Kick()
}

// NextFrame hands the NIC the oldest waiting CNP (nic.RawSource).
func (o *Offload) NextFrame(buf []byte) int {
	if o.head == len(o.out) {
		return 0
	}
	f := o.out[o.head]
	o.out[o.head] = nil
	o.head++
	n := copy(buf, f)
	o.pool = append(o.pool, f[:cap(f)])
	return n
}

// buffer is a frame buffer from the pool.
func (o *Offload) buffer() []byte {
	if k := len(o.pool); k > 0 {
		b := o.pool[k-1]
		o.pool = o.pool[:k-1]
		return b
	}
	return make([]byte, 128)
}

// decrease is the RP's reaction to a CNP (the paper's Algorithm, §3.3):
// the target remembers the rate, the rate drops by α/2, α grows, and the
// increase counters and timers start again.
func (o *Offload) decrease(s *qpState, now time.Duration) {
	if s.active {
		o.advance(s, now)
	} else {
		s.active = true
		s.nextTxPs = int64(now) * 1000
	}
	s.cnps++
	o.stats.RateDecreases++
	s.rt = s.rc
	s.rc = max(s.rc*(1-s.alpha/2), o.p.MinRate)
	s.minRc = min(s.minRc, s.rc)
	s.alpha = (1-o.p.G)*s.alpha + o.p.G
	s.alphaNext = now + o.p.K
	s.timerNext = now + o.p.T
	s.tc, s.bc, s.bytes = 0, 0, 0
}

// advance processes every α decay and rate-increase timer expiry due by
// now, each at its time. The two never interact (α matters at the next
// CNP only), so each runs through its own expiries in order.
func (o *Offload) advance(s *qpState, now time.Duration) {
	for s.alphaNext <= now {
		s.alpha *= 1 - o.p.G
		s.alphaNext += o.p.K
	}
	for s.timerNext <= now {
		if s.rc >= o.p.LineRate && s.rt >= o.p.LineRate {
			// Back at line rate: more increases change nothing until the
			// next CNP restarts the counters, so the timer skips ahead.
			k := (now-s.timerNext)/o.p.T + 1
			s.tc = int(min(int64(s.tc)+int64(k), math.MaxInt32))
			s.timerNext += k * o.p.T
			return
		}
		s.tc = min(s.tc+1, math.MaxInt32)
		s.timerNext += o.p.T
		o.increase(s)
	}
}

// increase is one rate-increase event (timer or byte counter, after its
// count went up): fast recovery while neither count passed F, hyper
// increase once both did, additive increase between.
func (o *Offload) increase(s *qpState) {
	line := o.p.LineRate
	switch f := o.p.F; {
	case max(s.tc, s.bc) <= f:
	case min(s.tc, s.bc) > f:
		s.rt = min(s.rt+float64(min(s.tc, s.bc)-f)*o.p.RHAI, line)
	default:
		s.rt = min(s.rt+o.p.RAI, line)
	}
	s.rc = min((s.rt+s.rc)/2, line)
}
