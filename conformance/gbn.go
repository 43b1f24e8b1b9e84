package conformance

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/leanovate/gopter"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/scenario"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/roce"
)

// gbnCase is one RC connection (host 0's QP 0x11 writing into host 1's
// QP 0x12 through the switch) with a generated message and fault schedule.
type gbnCase struct {
	Size      int
	MTU       int
	PSN       uint32
	Transport string
	Seed      uint64
	Events    []string
}

func (c gbnCase) String() string {
	return fmt.Sprintf("size=%d mtu=%d psn=%d transport=%s seed=%d faults=%q", c.Size, c.MTU, c.PSN, c.Transport, c.Seed, c.Events)
}

// The go-back-N connection's link: 10G, 1 µs; ACK timeout exponent 8.
const (
	gbnRate    = 10e9
	gbnLatency = time.Microsecond
	gbnTimeout = 8
)

// gbnFaultKinds: every fault kind but spoofing (one connection has no
// switch program to defend; a forged in-sequence frame would be accepted
// by the responder as it would be on any network).
var gbnFaultKinds = []string{"drop", "dup", "corrupt", "delay", "long-delay", "hold", "long-hold"}

func gbnCaseGen(seed uint64) gopter.Gen {
	return func(p *gopter.GenParameters) *gopter.GenResult {
		r := p.Rng
		c := gbnCase{Size: 1 + r.Intn(256<<10), MTU: mtus[r.Intn(len(mtus))], PSN: uint32(r.Intn(1 << 24)),
			Transport: transports[r.Intn(len(transports))], Seed: seed}
		if r.Intn(4) == 0 {
			c.PSN = wire.PSNMask - uint32(r.Intn(64)) // across the wrap
		}
		for i, n := 0, r.Intn(7); i < n; i++ {
			c.Events = append(c.Events, genFaultEvent(r, 2, c.Size/c.MTU+1, gbnTimeout, gbnFaultKinds))
		}
		return gopter.NewGenResult(c, gopter.NoShrinker)
	}
}

type gbnRun struct {
	done      time.Duration // when the WRITE completed (0: it did not)
	status    roce.Status
	delivered bool // the responder's memory holds the message
	recs      []pcapio.Record
	sent      []traceEvent // what each host sent, in order, before any fault
	err       string
}

// runGBN runs the connection; with events nil it is the clean reference.
func runGBN(c gbnCase, events []string) gbnRun {
	var out gbnRun
	tr, err := scenario.ParseTransport(c.Transport)
	if err != nil {
		out.err = err.Error()
		return out
	}
	var evs []faults.Event
	for _, s := range events {
		e, err := faults.Parse(s)
		if err != nil {
			out.err = err.Error()
			return out
		}
		evs = append(evs, e)
	}
	var buf bytes.Buffer
	var v frames.View
	onSend := func(port int, dir faults.Dir, at time.Duration, frame []byte) {
		if dir == faults.DirIn && v.Parse(frame) == nil { // host port → switch: what the host sent
			// at is when the last bit left; the NIC built the frame when
			// its first bit went out.
			at -= time.Duration(float64(len(frame)+fabric.WireOverhead) * 8 / gbnRate * 1e9)
			e := traceEvent{at: at, side: port, sent: true, psn: v.PSN(), data: !v.Opcode().IsAck(), capture: -1}
			if a := v.AETH(); a != nil {
				e.syn = a.Syndrome()
			}
			out.sent = append(out.sent, e)
		}
	}
	fab, err := fabric.New(fabric.Config{Hosts: 2, Transport: tr, Link: fabric.LinkConfig{Rate: gbnRate, Latency: gbnLatency},
		Events: evs, Seed: c.Seed, Capture: &buf, OnSend: onSend})
	if err != nil {
		out.err = err.Error()
		return out
	}
	h0, h1 := fab.Hosts[0], fab.Hosts[1]
	q0, q1 := h0.NewQP(0x11), h1.NewQP(0x12)
	src := make([]byte, c.Size)
	rng := rand.New(rand.NewPCG(c.Seed, 5))
	for i := range src {
		src[i] = byte(rng.Uint32())
	}
	dst := make([]byte, c.Size)
	mr := &roce.MR{Addr: 0x10000, Buf: dst, RKey: 0x77, Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
	if err := h1.PD.Register(mr); err != nil {
		out.err = err.Error()
		return out
	}
	cfg := roce.Config{MTU: c.MTU, SQPSN: c.PSN, RQPSN: 1, Timeout: gbnTimeout, RetryCnt: 7, RNRRetry: 7}
	if err := q0.Connect(h0.PathTo(h1, 0x12), cfg); err != nil {
		out.err = err.Error()
		return out
	}
	cfg.SQPSN, cfg.RQPSN = 1, c.PSN
	if err := q1.Connect(h1.PathTo(h0, 0x11), cfg); err != nil {
		out.err = err.Error()
		return out
	}
	var cqe [4]roce.Completion
	finished := false
	h0.OnCompletion = func() {
		if n := q0.SendCQ().Poll(cqe[:]); n > 0 {
			out.done, out.status, finished = fab.Clock.Now(), cqe[0].Status, true
		}
	}
	h0.SendControl(h0.GratuitousARP())
	h1.SendControl(h1.GratuitousARP())
	if err := q0.PostSend(roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: src, RemoteVA: 0x10000, RKey: 0x77, Signaled: true}); err != nil {
		out.err = err.Error()
		return out
	}
	for !finished && fab.Clock.Now() < 10*time.Second && fab.Clock.Step() {
	}
	// Let frames in flight land (late duplicates, held frames) for the trace.
	fab.Clock.Run(5 * time.Millisecond)
	if err := fab.CloseCapture(); err != nil {
		out.err = err.Error()
		return out
	}
	out.delivered = bytes.Equal(src, dst)
	r, err := pcapio.NewReader("capture", &buf)
	if err != nil {
		out.err = err.Error()
		return out
	}
	for {
		rec, err := r.Next()
		if err != nil {
			break
		}
		out.recs = append(out.recs, rec)
	}
	return out
}

// traceEvent is one frame sent or received by the requester or the
// responder, at the time that endpoint sent or received it.
type traceEvent struct {
	at      time.Duration
	side    int  // 0 requester, 1 responder
	sent    bool // sent by that side (else received)
	psn     uint32
	data    bool
	syn     wire.Syndrome
	capture int // record index in the capture (-1 for sends)
	// hostEvent, in a trace of the hosts' own view (against a device), is
	// the event's number in it, from 1.
	hostEvent int
}

// ref names the event in a violation.
func (e traceEvent) ref() string {
	switch {
	case e.hostEvent > 0:
		return fmt.Sprintf("the hosts' event %d", e.hostEvent)
	case e.capture >= 0:
		return fmt.Sprintf("capture frame %d", e.capture)
	}
	return fmt.Sprintf("the frame sent at %v", e.at)
}

// gbnTrace merges what the hosts sent (the sender-side tap, before any
// fault) with what they received: the capture's frames on port0-out and
// port1-out (interfaces 1 and 3), less ghosts of dropped frames and
// frames whose ICRC fails (the NIC drops those).
func gbnTrace(sent []traceEvent, recs []pcapio.Record) []traceEvent {
	// At equal times a reception goes first: a host reacts to a frame at the
	// instant it arrives, and a frame it started sending then was built
	// from a state the arrival may already have changed (both orders
	// satisfy the rules' windows).
	var ev []traceEvent
	var v frames.View
	for i, r := range recs {
		iface := r.Info.InterfaceIndex
		if iface != 1 && iface != 3 || v.Parse(r.Data) != nil || !v.ICRCOK() {
			continue
		}
		if ghost, _ := ghostOrFaulted(r); ghost {
			continue
		}
		e := traceEvent{at: time.Duration(r.Info.Timestamp.UnixNano()), side: iface / 2, psn: v.PSN(), data: !v.Opcode().IsAck(), capture: i}
		if a := v.AETH(); a != nil {
			e.syn = a.Syndrome()
		}
		ev = append(ev, e)
	}
	ev = append(ev, sent...)
	slices.SortStableFunc(ev, func(a, b traceEvent) int { return int(a.at - b.at) })
	return ev
}

// checkGBN checks the go-back-N rules on a trace, with first the
// connection's initial PSN:
//   - the responder ACKs only what it received in order, never goes
//     backwards, NAKs exactly its expected PSN (the first missing one), and
//     NAKs a gap at most once;
//   - the requester sends PSNs in order and, when it leaves the sequence,
//     goes to exactly the oldest PSN not yet acknowledged (back to the
//     NAK'd PSN after a NAK or to comp.psn after a timeout; forward when a
//     late ACK overtook a retransmission).
func checkGBN(ev []traceEvent, first uint32) string {
	epsn := first // responder's expected PSN
	type change struct {
		at   time.Duration
		epsn uint32
	}
	hist := []change{{0, first}}
	naked, nakedPSN := false, uint32(0) // a NAK was sent for the gap at nakedPSN
	lastAck := wire.PSNAdd(first, -1&wire.PSNMask)
	haveAck := false
	var prevResp time.Duration // when the responder sent its previous response
	comp := first              // requester: oldest unacknowledged PSN
	next := first              // requester: PSN it would send next in sequence
	started := false           // requester sent anything
	for _, e := range ev {
		switch {
		case e.side == 1 && !e.sent && e.data: // responder receives data
			if e.psn == epsn {
				epsn = wire.PSNAdd(epsn, 1)
				naked = false
				hist = append(hist, change{e.at, epsn})
			}
		case e.side == 1 && e.sent && !e.data: // responder sends a response
			// A response may have waited for the line behind the previous
			// one: it reflects the expected PSN at some moment between the
			// two going out.
			held := func(p uint32) bool {
				for i := len(hist) - 1; i >= 0; i-- {
					if hist[i].epsn == p && (i+1 == len(hist) || hist[i+1].at >= prevResp) && hist[i].at <= e.at {
						return true
					}
				}
				return false
			}
			ack := e.psn
			if e.syn == wire.SyndromeNAKPSNSeqErr {
				if !held(e.psn) {
					return fmt.Sprintf("nak-psn: %s NAKs PSN %d, but the responder expected %d", e.ref(), e.psn, epsn)
				}
				if naked && e.psn == nakedPSN && nakedPSN == epsn {
					return fmt.Sprintf("extra-nak: %s NAKs PSN %d a second time before the gap was repaired", e.ref(), e.psn)
				}
				naked, nakedPSN = true, e.psn
				ack = wire.PSNAdd(e.psn, -1&wire.PSNMask)
			} else if e.syn.IsACK() && !held(wire.PSNAdd(e.psn, 1)) && wire.PSNDiff(wire.PSNAdd(e.psn, 1), epsn) > 0 {
				return fmt.Sprintf("ack-ahead: %s ACKs PSN %d, but the responder had only received up to %d in order", e.ref(), e.psn, wire.PSNAdd(epsn, -1&wire.PSNMask))
			}
			if haveAck && wire.PSNDiff(ack, lastAck) < 0 {
				return fmt.Sprintf("ack-regress: %s acknowledges up to PSN %d after %d", e.ref(), ack, lastAck)
			}
			lastAck, haveAck, prevResp = ack, true, e.at
		case e.side == 0 && !e.sent && !e.data: // requester receives a response
			p := wire.PSNAdd(e.psn, 1)
			if e.syn == wire.SyndromeNAKPSNSeqErr {
				p = e.psn
			}
			if e.syn.IsACK() || e.syn == wire.SyndromeNAKPSNSeqErr {
				if wire.PSNDiff(p, comp) > 0 {
					comp = p
				}
			}
		case e.side == 0 && e.sent && e.data: // requester sends data
			switch {
			case !started && e.psn == first, started && e.psn == next:
			case started && e.psn == comp:
				// going back to the oldest unacknowledged PSN (or, when a
				// late ACK overtook a retransmission, skipping ahead to it)
			default:
				return fmt.Sprintf("psn-order: %s sends PSN %d; expected %d next or a go-back to %d", e.ref(), e.psn, next, comp)
			}
			started, next = true, wire.PSNAdd(e.psn, 1)
		}
	}
	return ""
}

// lastFault is when the last fault acted (the capture time of the last
// annotated frame), or 0.
func lastFault(recs []pcapio.Record) time.Duration {
	var t time.Duration
	for _, r := range recs {
		for _, c := range r.Comments {
			if strings.HasPrefix(c, pcapio.FaultCommentPrefix) {
				t = max(t, time.Duration(r.Info.Timestamp.UnixNano()))
			}
		}
	}
	return t
}

// GBNSuite: for generated message sizes (1 B - 256 KiB), MTUs, initial
// PSNs (a quarter across the 24-bit wrap), transports and up to six
// one-shot faults on any link direction of one RC connection, delivery is
// byte-exact and in order, the trace obeys go-back-N (checkGBN), and once
// the faults stop the WRITE completes within 2 ACK timeouts plus twice the
// clean transfer time. Against a device under test it runs the ring's
// connections through the device instead (gbn_dut.go).
func GBNSuite(o SuiteOptions) []PropertyResult {
	if o.DUT != nil {
		return gbnOnDevice(o)
	}
	name := "gbn"
	res := PropertyResult{Name: name, Passed: true}
	res.Notes = o.programNote()
	eachCase(o, name, &res, func(i int, seed uint64) bool {
		c := sample(gbnCaseGen(seed), seed).(gbnCase)
		fail := gbnFails(c)
		if fail == "" {
			return true
		}
		small, sfail := shrinkGBN(c, fail)
		res.Failure = fmt.Sprintf("case %d (%s): %s; shrunk to %s: %s", i, c, fail, small, sfail)
		res.Replay = o.rerun("--suite gbn", i)
		if o.OutDir != "" {
			p, err := writeGBNCounterexample(o.OutDir, small)
			if err == nil {
				res.Counterexample = &p
			}
			o.writeFailed(err)
		}
		return false
	})
	return []PropertyResult{res}
}

func gbnFails(c gbnCase) string {
	clean := runGBN(c, nil)
	if clean.err != "" || clean.done == 0 {
		return "the clean reference run did not finish: " + clean.err
	}
	r := runGBN(c, c.Events)
	switch {
	case r.err != "":
		return r.err
	case r.done == 0:
		return "the WRITE never completed"
	case r.status != roce.StatusSuccess:
		return fmt.Sprintf("the WRITE completed with %s under %d one-shot faults", r.status, len(c.Events))
	case !r.delivered:
		return "the responder's memory differs from the message"
	}
	if v := checkGBN(gbnTrace(r.sent, r.recs), c.PSN); v != "" {
		return v
	}
	bound := lastFault(r.recs) + 2*roce.AckTimeout(gbnTimeout) + 2*clean.done
	if r.done > bound {
		return fmt.Sprintf("completed at %v, after the bound %v (last fault %v, clean run %v)", r.done, bound, lastFault(r.recs), clean.done)
	}
	return ""
}

func shrinkGBN(c gbnCase, fail string) (gbnCase, string) {
	same := func(d gbnCase) bool {
		f := gbnFails(d)
		if f == "" || strings.SplitN(f, ":", 2)[0] != strings.SplitN(fail, ":", 2)[0] {
			return false
		}
		fail = f
		return true
	}
	shrinkCase(&c, 200, same, func(try func(gbnCase) bool) bool {
		changed := false
		changed = dropEachEvent(c.Events, func(fewer []string) bool {
			d := c
			d.Events = fewer
			return try(d)
		}) || changed
		if c.Size > 1 {
			d := c
			d.Size = c.Size / 2
			changed = try(d) || changed
		}
		if c.MTU > 256 {
			d := c
			d.MTU = 256
			changed = try(d) || changed
		}
		return changed
	})
	return c, fail
}

// writeGBNCounterexample writes the case as a scenario (gbn cases are one
// connection, not an `inaemu run` job: the file records the case for
// `inaemu conformance --suite gbn` and a reader) plus its capture.
func writeGBNCounterexample(dir string, c gbnCase) (string, error) {
	r := runGBN(c, c.Events)
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "# go-back-N counterexample: one RC connection, host 0 QP 0x11 WRITEs into host 1 QP 0x12\n")
	fmt.Fprintf(&buf, "size: %d\nmtu: %d\npsn: %d\ntransport: %s\nseed: %d\nfaults:\n", c.Size, c.MTU, c.PSN, c.Transport, c.Seed)
	for _, e := range c.Events {
		fmt.Fprintf(&buf, "  - %s\n", e)
	}
	path := fmt.Sprintf("%s/gbn-%d", dir, c.Seed)
	if err := writeFiles(dir, path+".yaml", buf.Bytes()); err != nil {
		return "", err
	}
	w, err := os.Create(path + ".pcapng")
	if err != nil {
		return path + ".yaml", err
	}
	defer w.Close()
	pw, err := pcapio.NewWriter(w, "port0-in", "port0-out", "port1-in", "port1-out")
	if err != nil {
		return path + ".yaml", err
	}
	for _, rec := range r.recs {
		if err := pw.WriteIndex(rec.Info.InterfaceIndex, rec.Info.Timestamp.UnixNano(), rec.Data, rec.Comments...); err != nil {
			return path + ".yaml", err
		}
	}
	if err := pw.Flush(); err != nil {
		return path + ".yaml", err
	}
	return path + ".yaml", w.Close()
}
