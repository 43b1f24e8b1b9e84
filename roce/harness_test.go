package roce_test

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// The two-host harness: hosts A (requester side, QPN 0x11) and B (QPN
// 0x22) joined by a programmable link in virtual time. Each direction
// serializes frames at the link rate, delays them, and asks the test's
// fault function what to do with each one.

type verdict uint8

const (
	pass verdict = iota
	drop
	dup     // deliver twice
	corrupt // flip a payload bit (ICRC then fails)
	hold    // deliver after the next frame of the same direction
)

// wireEvent is one frame the link carried, as the sender emitted it.
type wireEvent struct {
	at      time.Duration
	dir     int // 0: A→B, 1: B→A
	frame   []byte
	verdict verdict
	op      wire.Opcode
	psn     uint32
	syn     wire.Syndrome // for ACKs
	bad     bool          // delivered with a bad ICRC
}

type host struct {
	qp   *roce.QP
	cq   *roce.CQ
	rcq  *roce.CQ
	pd   *roce.PD
	mem  []byte
	busy bool
}

type harness struct {
	t     testing.TB
	clock *vclock.Clock
	hosts [2]*host
	rate  float64 // bits per ns
	delay time.Duration
	fault func(e *wireEvent) verdict
	log   []wireEvent
	held  [2][]byte
	// delivered lists frames as they reached the other host, in order.
	delivered []wireEvent
	txBuf     []byte
	record    bool
}

var (
	macA = net.HardwareAddr{2, 0, 0, 0, 0, 0xa}
	macB = net.HardwareAddr{2, 0, 0, 0, 0, 0xb}
	ipA  = netip.MustParseAddr("10.0.0.1")
	ipB  = netip.MustParseAddr("10.0.0.2")
)

const (
	qpnA, qpnB = 0x11, 0x22
	memVA      = 0x10000
	memKey     = 0x1234
)

func defaultCfg() roce.Config {
	return roce.Config{MTU: 256, SQPSN: 100, RQPSN: 100, Timeout: 10, RetryCnt: 7, RNRRetry: 7, MinRNRTimer: 1}
}

// newHarness connects A and B with cfgA/cfgB (cfgB's RQPSN must equal
// cfgA's SQPSN and vice versa) over a 100 Gb/s link with 1 µs delay.
func newHarness(t testing.TB, cfgA, cfgB roce.Config, memSize int) *harness {
	return newHarnessOn(t, frames.V2IPv4, ipA, ipB, cfgA, cfgB, memSize)
}

// newHarnessOn is newHarness over a given transport and addresses (IP
// addresses, or GIDs for RoCEv1).
func newHarnessOn(t testing.TB, tr frames.Transport, addrA, addrB netip.Addr, cfgA, cfgB roce.Config, memSize int) *harness {
	h := &harness{t: t, clock: vclock.New(), rate: 100, delay: time.Microsecond, txBuf: make([]byte, 4096+256), record: true}
	paths := [2]frames.Path{
		{Transport: tr, SrcMAC: macA, DstMAC: macB, SrcIP: addrA, DstIP: addrB, DestQP: qpnB},
		{Transport: tr, SrcMAC: macB, DstMAC: macA, SrcIP: addrB, DstIP: addrA, DestQP: qpnA},
	}
	cfgs := [2]roce.Config{cfgA, cfgB}
	for i, qpn := range []uint32{qpnA, qpnB} {
		hs := &host{cq: roce.NewCQ(64), rcq: roce.NewCQ(64), pd: roce.NewPD(), mem: make([]byte, memSize)}
		require.NoError(t, hs.pd.Register(&roce.MR{Addr: memVA, Buf: hs.mem, RKey: memKey, Access: roce.AccessRemoteWrite | roce.AccessLocalWrite | roce.AccessRemoteRead | roce.AccessRemoteAtomic}))
		hs.qp = roce.NewQP(qpn, h.clock, hs.pd, hs.cq, hs.rcq)
		require.NoError(t, hs.qp.Connect(paths[i], cfgs[i]))
		dir := i
		hs.qp.OnTxReady = func() { h.wake(dir) }
		h.hosts[i] = hs
	}
	return h
}

// wake starts the transmitter of direction dir if it is idle.
func (h *harness) wake(dir int) {
	hs := h.hosts[dir]
	if hs.busy {
		return
	}
	hs.busy = true
	h.clock.AfterFunc(0, func() { h.transmit(dir) })
}

// transmit pulls one frame, puts it on the wire, and reschedules itself
// after the frame's serialization time.
func (h *harness) transmit(dir int) {
	hs := h.hosts[dir]
	n, ok := hs.qp.NextFrame(h.txBuf)
	if !ok {
		hs.busy = false
		return
	}
	frame := append([]byte(nil), h.txBuf[:n]...)
	var v frames.View
	require.NoError(h.t, v.Parse(frame))
	e := wireEvent{at: h.clock.Now(), dir: dir, frame: frame, op: v.Opcode(), psn: v.PSN()}
	if a := v.AETH(); a != nil {
		e.syn = a.Syndrome()
	}
	if h.fault != nil {
		e.verdict = h.fault(&e)
	}
	if h.record {
		h.log = append(h.log, e)
	}
	ser := time.Duration(float64((n+24)*8) / h.rate) // preamble, IFG, FCS
	arrive := ser + h.delay
	switch e.verdict {
	case drop:
	case dup:
		h.deliverAt(arrive, dir, frame)
		h.deliverAt(arrive, dir, frame)
	case corrupt:
		bad := append([]byte(nil), frame...)
		bad[len(bad)-5] ^= 0x01 // last payload/header byte before the ICRC
		h.deliverAt(arrive, dir, bad)
	case hold:
		h.held[dir] = frame
	default:
		h.deliverAt(arrive, dir, frame)
		if held := h.held[dir]; held != nil {
			h.held[dir] = nil
			h.deliverAt(arrive, dir, held)
		}
	}
	h.clock.AfterFunc(ser, func() { h.transmit(dir) })
}

func (h *harness) deliverAt(d time.Duration, dir int, frame []byte) {
	h.clock.AfterFunc(d, func() {
		var v frames.View
		if err := v.Parse(frame); err != nil {
			h.t.Fatalf("harness delivered an unparseable frame: %v", err)
		}
		if h.record {
			e := wireEvent{at: h.clock.Now(), dir: dir, op: v.Opcode(), psn: v.PSN(), bad: !v.ICRCOK()}
			if a := v.AETH(); a != nil {
				e.syn = a.Syndrome()
			}
			h.delivered = append(h.delivered, e)
		}
		h.hosts[1-dir].qp.Receive(&v)
	})
}

// run drives the clock until nothing is pending or limit of virtual time
// passes; it fails the test if events are still pending at the limit.
func (h *harness) run(limit time.Duration) {
	h.clock.Run(limit)
}

// data returns the frames of direction dir with a given opcode predicate.
func (h *harness) frames(dir int, keep func(e wireEvent) bool) []wireEvent {
	var out []wireEvent
	for _, e := range h.log {
		if e.dir == dir && keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// once applies v to the first frame of direction dir carrying psn.
func once(dir int, psn uint32, v verdict) func(e *wireEvent) verdict {
	done := false
	return func(e *wireEvent) verdict {
		if e.dir == dir && e.psn == psn && !done {
			done = true
			return v
		}
		return pass
	}
}

func isData(e wireEvent) bool { return !e.op.IsAck() }
func isAck(e wireEvent) bool  { return e.op == wire.Acknowledge && e.syn.IsACK() }
func isNAK(e wireEvent) bool  { return e.op == wire.Acknowledge && e.syn == wire.SyndromeNAKPSNSeqErr }

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = byte(x >> 24)
	}
	return b
}

func poll(cq *roce.CQ) []roce.Completion {
	out := make([]roce.Completion, cq.Len())
	cq.Poll(out)
	return out
}
