package capcheck_test

import (
	"encoding/json"
	"math/rand"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// robustConn is chkNewConn's connection from host 1 to host 2 with
// source ports 49152+QPN on both sides.
func robustConn(t *testing.T, reqQP, respQP uint32) *chkConn {
	c := chkNewConn(t, 1, 2, reqQP, respQP)
	ma, ia := chkHost(1)
	mb, ib := chkHost(2)
	var err error
	c.req, err = frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib, SrcPort: uint16(49152 + respQP), DestQP: reqQP})
	require.NoError(t, err)
	c.resp, err = frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mb, DstMAC: ma, SrcIP: ib, DstIP: ia, SrcPort: uint16(49152 + reqQP), DestQP: respQP})
	require.NoError(t, err)
	return c
}

// TestCheckRandomReadAtomicTraffic: random mixes of every opcode the new
// rules read (READ requests of random lengths, READ responses, atomics
// and their acknowledgements, ACKs and NAKs) on two QPs between the same
// hosts with overlapping PSNs, and an opcode outside the rules: the
// checker never panics, and its report is the same on a second run (the
// pairings it tries, the inferences and the unchecked lines come in a
// fixed order). Fixed seed: deterministic.
func TestCheckRandomReadAtomicTraffic(t *testing.T) {
	rng := rand.New(rand.NewSource(33))
	ops := []wire.Opcode{wire.WriteOnly, wire.WriteFirst, wire.WriteMiddle, wire.ReadRequest, wire.CompareSwap, wire.FetchAdd,
		wire.ReadResponseFirst, wire.ReadResponseMiddle, wire.ReadResponseLast, wire.ReadResponseOnly,
		wire.AtomicAcknowledge, wire.Acknowledge, wire.Acknowledge, wire.ClassUC | wire.SendOnly}
	for iter := range 200 {
		c := chkNewCapture("tap0")
		conns := []*chkConn{chkNewConn(t, 1, 2, 0x12, 0x11), chkNewConn(t, 1, 2, 0x22, 0x21)}
		if iter%2 == 1 {
			// Source ports that are not rxe's: the ports decide nothing
			// and the pairings are tried.
			conns = []*chkConn{robustConn(t, 0x12, 0x11), robustConn(t, 0x22, 0x21)}
		}
		n := 1 + rng.Intn(40)
		for range n {
			cn := conns[rng.Intn(2)]
			op := ops[rng.Intn(len(ops))]
			p := &frames.Packet{Opcode: op, PSN: uint32(100 + rng.Intn(12))}
			b := cn.req
			switch {
			case op == wire.ReadRequest:
				p.RETH = frames.RETHFields{VA: 0x1000, RKey: 7, DMALen: uint32(rng.Intn(1200))}
			case op == wire.WriteOnly || op == wire.WriteFirst:
				p.RETH = frames.RETHFields{VA: 0x1000, RKey: 7, DMALen: 256}
				p.Payload = make([]byte, 256)
			case op == wire.WriteMiddle, op == wire.ClassUC|wire.SendOnly:
				p.Payload = make([]byte, 256)
			case op >= wire.ReadResponseFirst && op <= wire.ReadResponseOnly:
				b, p.Payload = cn.resp, make([]byte, 256)
			case op == wire.AtomicAcknowledge:
				b, p.AtomicAck = cn.resp, uint64(rng.Intn(3))
			case op == wire.Acknowledge:
				b = cn.resp
				p.AETH = frames.AETHFields{Syndrome: []wire.Syndrome{wire.SyndromeACK, wire.SyndromeNAKPSNSeqErr, wire.SyndromeRNRNAK}[rng.Intn(3)]}
			}
			c.add("tap0", us*time.Duration(1+rng.Int63n(30)), cn.build(b, p))
		}
		recs, names := chkRecords(t, c)
		for _, v := range []capcheck.Vantage{capcheck.VantageAuto, capcheck.VantageReceiver} {
			a, err := json.Marshal(capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, Vantage: v}))
			require.NoError(t, err)
			b, err := json.Marshal(capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, Vantage: v}))
			require.NoError(t, err)
			require.JSONEq(t, string(a), string(b), "iteration %d vantage %v", iter, v)
		}
	}
}
