package conformance

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Go-back-N against a device under test. The emulator's gbn property
// follows one RC connection through its own links; against a device the
// connections are the ring's, through the device, and the evidence is of
// two kinds, neither depending on when the wire saw a frame:
//
//   - what the device did, from the wire's capture (each port's frames
//     into the device and out of it): for every ring connection r → r+1,
//     the device forwards every response (ACK or NAK) the responder sent
//     into it to the requester unchanged and invents none, and every data
//     frame it sends the responder carries the headers (opcode, PSN,
//     destination QP) of a frame the requester sent into it. A switch
//     that swallows NAKs, acknowledges on the receiver's behalf or
//     renumbers packets breaks go-back-N even when every result comes out
//     right in the end;
//   - what the hosts did, from their own view (dut.Device.Observe: every
//     frame each host sent and was handed, in the order the hosts acted):
//     each connection's trace obeys go-back-N (checkGBN), recovering
//     through the device from every fault.
//
// Every case must also end bit-exact, as in the aggregation property.

// gbnDeviceCase is a generated job fitted to the device (forDevice) with
// at least one fault: recovery is what the property is about.
func gbnDeviceCase(o SuiteOptions, seed uint64) aggCase {
	c := o.fitCase(sample(aggCaseGen(seed), seed).(aggCase))
	if len(c.Events) == 0 {
		r := intn{rand.New(rand.NewPCG(seed, 0x6b6e))}
		frames := c.Elems*c.DType.Size()/c.MTU + 1
		kinds := faultKinds
		if c.Ring {
			kinds = ringFaultKinds // see forRing
		}
		c.Events = []string{genFaultEvent(r, c.Workers, frames, c.Timeout, kinds)}
	}
	return c
}

// intn gives a math/rand/v2 generator the Intn genFaultEvent draws with.
type intn struct{ *rand.Rand }

func (r intn) Intn(n int) int { return r.IntN(n) }

// gbnOnDevice is GBNSuite against o.DUT.
func gbnOnDevice(o SuiteOptions) []PropertyResult {
	name := "gbn"
	res := PropertyResult{Name: name, Passed: true}
	eachCase(o, name, &res, func(i int, seed uint64) bool {
		c := gbnDeviceCase(o, seed)
		c, out := res.settled(i, c, func(d aggCase) aggOutcome { return runGBNOnDevice(o, d) })
		if out.fail == "" {
			return true
		}
		o.reportAgg(&res, i, c, out, func(d aggCase) aggOutcome { return runGBNOnDevice(o, d) },
			fmt.Sprintf("gbn-%s-%d", strings.TrimPrefix(out.fail, "gbn:"), seed),
			o.rerun("--suite gbn", i))
		return false
	})
	res.noteInconclusive()
	return []PropertyResult{res}
}

// runGBNOnDevice runs c against the device and judges it: the
// aggregation property's verdict first, then the device's handling of
// each connection (deviceGBN), then the hosts' traces (checkGBN). A
// failure's kind is "gbn:RULE", so shrinking keeps to the same rule.
func runGBNOnDevice(o SuiteOptions, c aggCase) aggOutcome {
	var tr hostTrace
	dev := *o.DUT
	dev.Observe = tr.observe
	od := o
	od.DUT = &dev
	out, recs := runAggCaseOn(od, c, o.Release)
	fail := func(v string) aggOutcome {
		rule, _, _ := strings.Cut(v, ":")
		return aggOutcome{fail: "gbn:" + rule, detail: v}
	}
	if out.fail != "" || out.transport || out.inconclusive {
		return out
	}
	if v := deviceGBN(c.Workers, recs); v != "" {
		return fail(v)
	}
	for r := 0; r < c.Workers; r++ {
		ev, first, ok := tr.connection(r, c.Workers)
		if !ok {
			return fail(fmt.Sprintf("no-data: rank %d sent nothing to rank %d", r, (r+1)%c.Workers))
		}
		if v := checkGBN(ev, first); v != "" {
			return fail(fmt.Sprintf("%s (connection rank %d → rank %d)", v, r, (r+1)%c.Workers))
		}
	}
	return aggOutcome{}
}

// hostEvent is one frame a host sent or was handed, as much of it as the
// go-back-N rules look at.
type hostEvent struct {
	rank     int
	sent     bool
	src, dst [6]byte
	destQP   uint32
	psn      uint32
	data     bool
	syn      wire.Syndrome
	icrcOK   bool // received frames only
}

// hostTrace records the hosts' own view of a run (RoCE frames only).
type hostTrace struct {
	ev []hostEvent
	v  frames.View
}

func (t *hostTrace) observe(rank int, sent bool, frame []byte) {
	if t.v.Parse(frame) != nil {
		return
	}
	e := hostEvent{rank: rank, sent: sent, src: [6]byte(t.v.SrcMAC()), dst: [6]byte(t.v.DstMAC()),
		destQP: t.v.DestQP(), psn: t.v.PSN(), data: !t.v.Opcode().IsAck()}
	if !sent { // only what a host is handed can fail its NIC's ICRC check
		e.icrcOK = t.v.ICRCOK()
	}
	if a := t.v.AETH(); a != nil {
		e.syn = a.Syndrome()
	}
	t.ev = append(t.ev, e)
}

// connection is ring connection r → r+1 as checkGBN reads it: the
// requester (side 0) is rank r, the responder (side 1) rank r+1; frames
// are told by their MACs and destination QPs (each learned from the first
// frame its sender sent), frames a NIC drops for their ICRC are left out.
// It returns the trace, the connection's first PSN and whether rank r sent
// any data on it.
func (t *hostTrace) connection(r, workers int) ([]traceEvent, uint32, bool) {
	req, resp := [6]byte(emu.HostMAC(r)), [6]byte(emu.HostMAC((r+1)%workers))
	var ev []traceEvent
	var dataQP, ackQP uint32
	haveData, haveAck := false, false
	var first uint32
	for i, e := range t.ev {
		te := traceEvent{at: time.Duration(i), psn: e.psn, data: e.data, syn: e.syn, capture: -1, hostEvent: i + 1}
		switch {
		case e.data && e.src == req && e.dst == resp && e.sent && e.rank == r: // requester sends data
			if !haveData {
				dataQP, first, haveData = e.destQP, e.psn, true
			}
			if e.destQP != dataQP {
				continue
			}
			te.side, te.sent = 0, true
		case e.data && e.src == req && e.dst == resp && !e.sent && e.rank == (r+1)%workers: // responder is handed data
			if !haveData || e.destQP != dataQP || !e.icrcOK {
				continue
			}
			te.side = 1
		case !e.data && e.src == resp && e.dst == req && e.sent && e.rank == (r+1)%workers: // responder responds
			if !haveAck {
				ackQP, haveAck = e.destQP, true
			}
			if e.destQP != ackQP {
				continue
			}
			te.side, te.sent = 1, true
		case !e.data && e.src == resp && e.dst == req && !e.sent && e.rank == r: // requester is handed a response
			if !haveAck || e.destQP != ackQP || !e.icrcOK {
				continue
			}
			te.side = 0
		default:
			continue
		}
		ev = append(ev, te)
	}
	return ev, first, haveData
}

// arrival is when a response first reached the device: its place among
// the responses that did, and its capture frame number.
type arrival struct{ order, frame int }

// respKey tells a response apart: its headers.
type respKey struct {
	op     wire.Opcode
	psn    uint32
	destQP uint32
	syn    wire.Syndrome
	msn    uint32
}

func (k respKey) String() string {
	return fmt.Sprintf("%s PSN %d MSN %d (QPN %#x)", k.syn, k.psn, k.msn, k.destQP)
}

// deviceGBN checks what the device did to each ring connection's frames,
// from the wire's capture (interfaces 4p+2: what reached the device by
// port p, 4p+3: what it sent out of port p; see faultwire.CaptureNames):
//
//   - response-forged: every response with a valid ICRC the device sends
//     rank r for connection r → r+1 is one rank r+1 sent into it (same
//     opcode, PSN, destination QP, syndrome and MSN) before: a response
//     that leaves the device before the receiver's matching one reached
//     it is forged, however right its key (a proxy acknowledging on the
//     receiver's behalf what the receiver acknowledges later). The
//     capture's order is sound evidence here: one process (the wire's
//     event loop) records a frame into the device before writing it and
//     a frame out of the device after reading it, so a forwarded
//     response is always recorded after its original;
//   - response-lost: every response with a valid ICRC that reached the
//     device from rank r+1 is owed to rank r and goes out to it, unless
//     the run ended first (it counts as lost only when a response that
//     reached the device after it was sent out: the device had moved on);
//   - data-forged: every data frame with a valid ICRC the device sends
//     rank r+1 for connection r carries the opcode, PSN and destination
//     QP of a frame rank r sent into it.
//
// Frames the wire dropped (its "not delivered" records) never reached the
// device; corrupted ones fail their ICRC and are not judged.
func deviceGBN(workers int, recs []pcapio.Record) string {
	type dataKey struct {
		op     wire.Opcode
		psn    uint32
		destQP uint32
	}
	type conn struct {
		reqData map[dataKey]bool    // data that reached the device from the requester
		respIn  map[respKey]arrival // responses that reached it from the responder
		respOut map[respKey]bool    // responses it sent the requester
	}
	conns := make([]conn, workers)
	for r := range conns {
		conns[r] = conn{reqData: map[dataKey]bool{}, respIn: map[respKey]arrival{}, respOut: map[respKey]bool{}}
	}
	rankOf := map[[6]byte]int{}
	for r := 0; r < workers; r++ {
		rankOf[[6]byte(emu.HostMAC(r))] = r
	}
	var v frames.View
	arrivals := 0
	// Responses sent out, judged once every arrival is known.
	type sentResp struct {
		c   int
		k   respKey
		idx int
	}
	var sent []sentResp
	for i, rec := range recs {
		iface := int(rec.Info.InterfaceIndex)
		port, side := iface/4, iface%4
		if side < 2 || port >= workers || pcapio.IsGhost(rec.Comments) || v.Parse(rec.Data) != nil {
			continue
		}
		src, okS := rankOf[[6]byte(v.SrcMAC())]
		dst, okD := rankOf[[6]byte(v.DstMAC())]
		if !okS || !okD {
			continue
		}
		dk := dataKey{v.Opcode(), v.PSN(), v.DestQP()}
		isResp := v.Opcode().IsAck()
		var rk respKey
		if isResp {
			a := v.AETH()
			if a == nil {
				continue
			}
			rk = respKey{dk.op, dk.psn, dk.destQP, a.Syndrome(), a.MSN()}
		}
		into := side == 2
		switch {
		case !isResp && into && dst == (src+1)%workers && port == src: // data from the requester
			conns[src].reqData[dk] = true
		case !isResp && !into && dst == (src+1)%workers && port == dst && v.ICRCOK(): // data the device sends the responder
			if !conns[src].reqData[dk] {
				return fmt.Sprintf("data-forged: the device sent rank %d a %s with PSN %d for rank %d's connection (capture frame %d, interface %d) that rank %d never sent it",
					dst, dk.op, dk.psn, src, i+1, iface, src)
			}
		case isResp && into && src == (dst+1)%workers && port == src && v.ICRCOK(): // a response from the responder
			c := &conns[dst]
			if _, seen := c.respIn[rk]; !seen {
				c.respIn[rk] = arrival{arrivals, i + 1}
				arrivals++
			}
		case isResp && !into && src == (dst+1)%workers && port == dst && v.ICRCOK(): // a response the device sends the requester
			sent = append(sent, sentResp{dst, rk, i})
		}
	}
	for _, s := range sent {
		c := &conns[s.c]
		in, ok := c.respIn[s.k]
		if !ok {
			return fmt.Sprintf("response-forged: the device sent rank %d %s (capture frame %d) that rank %d never sent it",
				s.c, s.k, s.idx+1, (s.c+1)%workers)
		}
		if in.frame > s.idx+1 {
			return fmt.Sprintf("response-forged: the device sent rank %d %s (capture frame %d) before rank %d's identical response reached it (capture frame %d): sent on the receiver's behalf",
				s.c, s.k, s.idx+1, (s.c+1)%workers, in.frame)
		}
		c.respOut[s.k] = true
	}
	for r := range conns {
		c := &conns[r]
		latest := -1 // the arrival order of the latest response forwarded
		for k := range c.respOut {
			latest = max(latest, c.respIn[k].order)
		}
		var lost *respKey
		for k, at := range c.respIn {
			if !c.respOut[k] && at.order < latest && (lost == nil || at.order < c.respIn[*lost].order) {
				k := k
				lost = &k
			}
		}
		if lost != nil {
			k := *lost
			return fmt.Sprintf("response-lost: rank %d's %s to rank %d reached the device (capture frame %d) and never left it, though later responses did: the device owed it to rank %d and did not send it",
				(r+1)%workers, k, r, c.respIn[k].frame, r)
		}
	}
	return ""
}
