package capcheck_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Long READs, PSN wrap and many requests without responses: captures
// built frame by frame with frames.Builder (host 1 the requester, its
// requests to QPN 0x12; host 2 the responder, answering on 0x11). The
// expectations follow IBTA's PSN rules (a READ of N bytes occupies
// ceil(N/PMTU) PSNs), not the checker.

// lrRead is a READ request at psn occupying n PSNs at MTU 256.
func lrRead(c *chkConn, psn, n uint32) []byte {
	return c.build(c.req, &frames.Packet{Opcode: wire.ReadRequest, PSN: psn & 0xffffff, AckReq: true, RETH: frames.RETHFields{VA: 0x100000, RKey: 1, DMALen: 256 * n}})
}

// lrResponses are the n responses of a READ at psn (MTU 256).
func lrResponses(c *chkConn, psn, n uint32) [][]byte {
	var out [][]byte
	for k := range n {
		op := wire.ReadResponseMiddle
		switch {
		case n == 1:
			op = wire.ReadResponseOnly
		case k == 0:
			op = wire.ReadResponseFirst
		case k == n-1:
			op = wire.ReadResponseLast
		}
		out = append(out, c.build(c.resp, &frames.Packet{Opcode: op, PSN: (psn + k) & 0xffffff, Payload: make([]byte, 256)}))
	}
	return out
}

// lrNAKAfterRead: a READ of n PSNs at PSN 100 (MTU 256), then SEND
// n+100 lost after the capture point (a ghost if ghost: the emulator
// recorded it sent and dropped it) and SEND n+101 passes; the responder
// rightly NAKs n+100. With all, the READ's responses all pass before
// the SENDs; without, only its FIRST does (the rest are lost on the way
// back before the capture point), and after the NAK the requester
// re-issues the READ from its first missing response (PSN 101, VA and
// length moved on by one MTU; rxe_req.c req_retry), answered in full.
// Then it resends n+100, n+101, and they are ACKed. Nothing is wrong.
func lrNAKAfterRead(t *testing.T, n uint32, ghost, all bool) ([]pcapio.Record, []string) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, lrRead(a, 100, n))
	resps := lrResponses(a, 100, n)
	if !all {
		resps = resps[:1]
	}
	for _, r := range resps {
		c.add("tap0", us, r)
	}
	next := 100 + n
	if ghost {
		c.add("tap0", us, a.data(next, false), chkGhost)
	} else {
		c.add("tap0", us, a.data(next, false)) // lost after the capture
	}
	c.add("tap0", us, a.data(next+1, true))
	c.add("tap0", 10*us, a.nak(next))
	if !all {
		c.add("tap0", 10*us, a.build(a.req, &frames.Packet{Opcode: wire.ReadRequest, PSN: 101, AckReq: true, RETH: frames.RETHFields{VA: 0x100000 + 256, RKey: 1, DMALen: 256 * (n - 1)}}))
		for _, r := range lrResponses(a, 101, n-1) {
			c.add("tap0", us, r)
		}
	}
	c.add("tap0", 10*us, a.data(next, false))
	c.add("tap0", us, a.data(next+1, true))
	c.add("tap0", 10*us, a.ack(next+1))
	return chkRecords(t, c)
}

// TestCheckLongReadNAK (the responder's bound at the sender and at a
// tap): after an 8192-PSN READ (2 MiB at MTU 256), a correct NAK for the
// PSN after it is no nak-psn, at every vantage point, whether the READ's
// responses passed the capture point or were lost before it.
func TestCheckLongReadNAK(t *testing.T) {
	for _, all := range []bool{true, false} {
		recs, names := lrNAKAfterRead(t, 8192, true, all)
		for _, v := range []capcheck.Vantage{capcheck.VantageAuto, capcheck.VantageSender, capcheck.VantageTap, capcheck.VantageReceiver} {
			rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, MTU: 256, Vantage: v})
			assert.Equal(t, []chkWant{}, chkViolations(rep), "vantage %v, responses all seen %v: %v", v, all, rep.Violations)
			assert.Equal(t, 256, rep.PathMTU)
			assert.Empty(t, rep.Unchecked, "vantage %v", v)
		}
	}
}

// TestCheckLongReadNoFalseGap (the vantage inference): a 4000-PSN READ
// at PSN 100 occupies 100..4099, so SEND 4100 after it skips nothing; a
// NAK for 4100, which passed the capture point, says the loss was after
// it. No inference may claim a PSN inside the READ never passed.
func TestCheckLongReadNoFalseGap(t *testing.T) {
	recs, names := lrNAKAfterRead(t, 4000, false, true)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, MTU: 256})
	assert.Equal(t, []chkWant{}, chkViolations(rep))
	for _, in := range rep.Inferences {
		assert.NotContains(t, in, "never passed", "no PSN of the READ was skipped")
		assert.NotContains(t, in, "skip of PSN", "no PSN of the READ was skipped")
	}
	assert.Empty(t, rep.Unchecked)
}

// TestCheckLongReadPairing: two QPs between the same hosts whose source
// ports decide nothing (49152+QPN) and whose PSN spaces overlap. QP 0x12
// sends SEND 99, a READ of 8192 PSNs (100..8291), and SEND 99 again (its
// ACK was lost): the responder answers the duplicate with an ACK of the
// last PSN it executed, 8291 (rxe_resp.c duplicate_request, resp.psn-1),
// on 0x11. QP 0x22 sends 99..101, ACKed 101 on 0x21. Only 0x12 had sent
// PSN 8291, so 0x11 answers 0x12 and 0x21 answers 0x22.
func TestCheckLongReadPairing(t *testing.T) {
	conn := func(reqQP, respQP uint32) *chkConn {
		ma, ia := chkHost(1)
		mb, ib := chkHost(2)
		req, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib, SrcPort: uint16(49152 + reqQP), DestQP: reqQP})
		require.NoError(t, err)
		resp, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mb, DstMAC: ma, SrcIP: ib, DstIP: ia, SrcPort: uint16(49152 + respQP), DestQP: respQP})
		require.NoError(t, err)
		return &chkConn{req: req, resp: resp, buf: make([]byte, 2048)}
	}
	a, b := conn(0x12, 0x11), conn(0x22, 0x21)
	c := chkNewCapture("tap0")
	c.add("tap0", us, a.data(99, true))
	c.add("tap0", us, lrRead(a, 100, 8192))
	for _, r := range lrResponses(a, 100, 8192) {
		c.add("tap0", us, r)
	}
	for p := uint32(99); p <= 101; p++ {
		c.add("tap0", us, b.data(p, p == 101))
	}
	c.add("tap0", 10*us, b.ack(101))
	c.add("tap0", 100*us, a.data(99, true)) // its ACK was lost: resent
	c.add("tap0", 10*us, a.ack(8291))       // the duplicate's ACK: the last PSN executed
	recs, names := chkRecords(t, c)
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, MTU: 256})
	assert.Equal(t, []chkWant{}, chkViolations(rep))
	assert.Empty(t, rep.Unpaired)
	assert.Empty(t, rep.Unchecked)
	assert.Equal(t, 2, rep.Connections)
	require.Len(t, rep.Streams, 2)
	for _, s := range rep.Streams {
		require.NotNil(t, s.QP)
		require.NotNil(t, s.RespQP)
		assert.Equal(t, *s.QP-1, *s.RespQP, "0x11 answers 0x12, 0x21 answers 0x22")
	}
}

// TestCheckReadAfterWrapCountsAfresh: a READ at PSN 100 answered once;
// 300 one-PSN READs later (so the first is long forgotten) and two READs
// of 2^23 and 2^23-301 PSNs that carry the PSN space round its 24 bits,
// a READ of 2 PSNs at 99 covers PSN 100 again and is answered once: one
// response to one READ, no read-psn.
func TestCheckReadAfterWrapCountsAfresh(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, lrRead(a, 100, 1))
	c.add("tap0", us, lrResponses(a, 100, 1)[0])
	p := uint32(101)
	for range 300 {
		c.add("tap0", us, lrRead(a, p, 1))
		c.add("tap0", us, lrResponses(a, p, 1)[0])
		p++
	}
	c.add("tap0", us, lrRead(a, p, 1<<23))
	p += 1 << 23
	rest := (1<<24 + 99) - p // up to PSN 99 after the wrap
	c.add("tap0", us, lrRead(a, p, rest))
	require.Equal(t, uint32(99), (p+rest)&0xffffff)
	c.add("tap0", us, lrRead(a, 99, 2))
	for _, r := range lrResponses(a, 99, 2) {
		c.add("tap0", us, r)
	}
	recs, names := chkRecords(t, c)
	for _, v := range []capcheck.Vantage{capcheck.VantageAuto, capcheck.VantageSender, capcheck.VantageTap} {
		rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, MTU: 256, Vantage: v})
		assert.Equal(t, []chkWant{}, chkViolations(rep), "vantage %v: %v", v, rep.Violations)
	}
}

// TestCheckReadLengthOverflow: a READ claiming 0xffffff80 bytes (more
// than the 2^31 a message may carry; (length+MTU-1) overflows 32 bits) is
// not counted as 0 PSNs: the next request is no skip, and the report
// lists the READ as unchecked.
func TestCheckReadLengthOverflow(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, a.build(a.req, &frames.Packet{Opcode: wire.ReadRequest, PSN: 100, AckReq: true, RETH: frames.RETHFields{VA: 0x1000, RKey: 1, DMALen: 0xffffff80}}))
	c.add("tap0", us, a.data(100, true))
	recs, names := chkRecords(t, c)
	for _, v := range []capcheck.Vantage{capcheck.VantageAuto, capcheck.VantageSender} {
		rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, MTU: 256, Vantage: v})
		assert.Equal(t, []chkWant{}, chkViolations(rep), "vantage %v", v)
		require.Len(t, rep.Unchecked, 1, "vantage %v", v)
		assert.Contains(t, rep.Unchecked[0], "the READ of frame 1 claims 4294967168 bytes")
		assert.Contains(t, rep.Unchecked[0], "2^31")
	}
}

// TestCheckMTUNotIBTA: an MTU that is no IBTA path MTU (1, 1000) is not
// counted with: it is ignored (the capture's own FIRST/MIDDLE payloads
// say 256 here) and the report says so; no panic, no false read-psn.
func TestCheckMTUNotIBTA(t *testing.T) {
	c := chkNewCapture("tap0")
	a := chkNewConn(t, 1, 2, 0x12, 0x11)
	c.add("tap0", us, lrRead(a, 100, 4))
	for _, r := range lrResponses(a, 100, 4) {
		c.add("tap0", us, r)
	}
	c.add("tap0", us, a.data(104, true))
	c.add("tap0", 10*us, a.ack(104))
	recs, names := chkRecords(t, c)
	for _, mtu := range []int{1, 255, 1000, 8192, -5} {
		rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, MTU: mtu})
		assert.Equal(t, []chkWant{}, chkViolations(rep), "mtu %d", mtu)
		assert.Equal(t, 256, rep.PathMTU, "mtu %d", mtu)
		assert.Contains(t, rep.PathMTUWhy, "no IBTA path MTU", "mtu %d", mtu)
	}
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, MTU: 1024})
	assert.Equal(t, 1024, rep.PathMTU, "a valid MTU is taken as given")
}

// BenchmarkCheckAtomicsNoResponses/{atomics,sends}: 60,000 fetch-and-adds
// whose responses never reach the vantage point cost about what as many
// SENDs cost (each atomic is found among the pending ones by its PSN, not
// by a scan of up to 4096 of them: 429 ms against 72 ms before, 147 ms
// against 69 ms after, here). A benchmark, not a test, so that a busy
// machine cannot fail it: compare the two lines of one run.
func BenchmarkCheckAtomicsNoResponses(b *testing.B) {
	const n = 60000
	build := func(atomic bool) ([]pcapio.Record, []string) {
		c := chkNewCapture("tap0")
		a := chkNewConn(b, 1, 2, 0x12, 0x11)
		for p := range uint32(n) {
			if atomic {
				c.add("tap0", us, a.build(a.req, &frames.Packet{Opcode: wire.FetchAdd, PSN: 100 + p, AckReq: true, AtomicETH: frames.AtomicETHFields{VA: 0x2000, RKey: 1, SwapAdd: 1}}))
			} else {
				c.add("tap0", us, a.data(100+p, true))
			}
		}
		return chkRecords(b, c)
	}
	for _, kind := range []string{"atomics", "sends"} {
		recs, names := build(kind == "atomics")
		b.Run(kind, func(b *testing.B) {
			for b.Loop() {
				if rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names}); len(rep.Violations) > 0 {
					b.Fatal(rep.Violations)
				}
			}
		})
	}
}

// TestCheckReadResponseAllocs: a READ response costs no allocation of
// its own for the READs covering it (a scratch slice per stream): an
// extra response costs about what an extra SEND costs. Two READs cover
// each response here (the READ and its duplicate), more than the small
// buffer the compiler may place on the stack for one.
func TestCheckReadResponseAllocs(t *testing.T) {
	capture := func(k uint32, reads bool) ([]pcapio.Record, []string) {
		c := chkNewCapture("tap0")
		a := chkNewConn(t, 1, 2, 0x12, 0x11)
		if reads {
			c.add("tap0", us, lrRead(a, 100, 4096))
			c.add("tap0", us, lrRead(a, 100, 4096)) // a duplicate: two READs cover each response
			for _, r := range lrResponses(a, 100, 4096)[:k] {
				c.add("tap0", us, r)
			}
		} else {
			for p := range k {
				c.add("tap0", us, a.data(100+p, false))
			}
		}
		return chkRecords(t, c)
	}
	per := func(reads bool) float64 {
		allocs := func(k uint32) float64 {
			recs, names := capture(k, reads)
			return testing.AllocsPerRun(2, func() { capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, MTU: 256}) })
		}
		return (allocs(3000) - allocs(1000)) / 2000
	}
	resp, send := per(true), per(false)
	t.Logf("allocations per READ response %.2f, per SEND %.2f", resp, send)
	assert.Less(t, resp, send+0.5)
}
