package dcqcn_test

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/nic/dcqcn"
	"github.com/inaemu/inaemu/emu/nic/nictest"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

const line = 40e9

// host is one NIC with DCQCN and one QP (local 0x11, peer 0x22 on h1),
// its transmitter a kick counter: the test pulls its frames.
type host struct {
	clk  *vclock.Clock
	n    *nic.NIC
	o    *dcqcn.Offload
	q    *roce.QP
	peer frames.Path // the peer's path to q
}

func newHost(t *testing.T, tr frames.Transport, p dcqcn.Params) *host {
	t.Helper()
	clk := vclock.New()
	n := nic.New(clk, "h0", 0, 0, tr)
	n.Attach(&nictest.Kicks{})
	o, err := dcqcn.Enable(n, p)
	require.NoError(t, err)
	q := n.NewQP(0x11)
	peerNIC := nic.New(clk, "h1", 1, 0, tr)
	path := n.PathTo(peerNIC, 0x22)
	path.SrcPort = frames.UDPSourcePort(0x11)
	require.NoError(t, q.Connect(path, nictest.RCConfig(100, 500)))
	peer := peerNIC.PathTo(n, 0x11)
	peer.SrcPort = frames.UDPSourcePort(0x22)
	return &host{clk: clk, n: n, o: o, q: q, peer: peer}
}

// cnpAt delivers a CNP for the QP at time at.
func (h *host) cnpAt(t *testing.T, at time.Duration) {
	t.Helper()
	h.clk.AdvanceTo(at)
	h.n.Receive(nictest.Frame(t, h.peer, &frames.Packet{Opcode: wire.CNP, BECN: true, Payload: make([]byte, 16)}))
}

func (h *host) rateAt(at time.Duration) float64 {
	h.clk.AdvanceTo(at)
	return h.o.Rate(0x11)
}

// ref is the paper's reaction point written out plainly: every event in
// one time-ordered list, applied one by one (the offload advances lazily
// instead).
type ref struct {
	p                 dcqcn.Params
	rc, rt, alpha     float64
	tc, bc            int
	active            bool
	cnpAt, lastAlphaT time.Duration
}

func newRef(p dcqcn.Params) *ref {
	return &ref{p: p, rc: p.LineRate, rt: p.LineRate, alpha: p.AlphaInit}
}

// run applies the timer and α events strictly before until, then (cnp)
// a CNP at until.
func (r *ref) run(until time.Duration, cnp bool) {
	if r.active {
		type ev struct {
			at    time.Duration
			timer bool
		}
		var evs []ev
		for k := time.Duration(1); r.cnpAt+k*r.p.K <= until; k++ {
			if r.cnpAt+k*r.p.K > r.lastAlphaT {
				evs = append(evs, ev{r.cnpAt + k*r.p.K, false})
			}
		}
		for k := time.Duration(1); r.cnpAt+k*r.p.T <= until; k++ {
			if r.cnpAt+k*r.p.T > r.lastAlphaT {
				evs = append(evs, ev{r.cnpAt + k*r.p.T, true})
			}
		}
		for _, e := range evs {
			if !e.timer {
				r.alpha = r.alpha * (1 - r.p.G)
				continue
			}
			r.tc++
			r.event()
		}
		r.lastAlphaT = until
	}
	if cnp {
		r.active = true
		r.rt = r.rc
		r.rc = math.Max(r.rc*(1-r.alpha/2), r.p.MinRate)
		r.alpha = (1-r.p.G)*r.alpha + r.p.G
		r.tc, r.bc = 0, 0
		r.cnpAt, r.lastAlphaT = until, until
	}
}

// event is one rate-increase event: the paper's three phases.
func (r *ref) event() {
	F := r.p.F
	if r.tc > F && r.bc > F {
		i := r.tc
		if r.bc < i {
			i = r.bc
		}
		r.rt += float64(i-F) * r.p.RHAI
	} else if r.tc > F || r.bc > F {
		r.rt += r.p.RAI
	}
	if r.rt > r.p.LineRate {
		r.rt = r.p.LineRate
	}
	r.rc = math.Min((r.rt+r.rc)/2, r.p.LineRate)
}

// TestOneCNPHalvesTheRate: at α = 1 a CNP halves the rate (Rc(1 − α/2)),
// and α stays 1 ((1−g)·1 + g).
func TestOneCNPHalvesTheRate(t *testing.T) {
	h := newHost(t, frames.V2IPv4, dcqcn.DefaultParams(line))
	assert.Equal(t, line, h.rateAt(0))
	h.cnpAt(t, 10*time.Microsecond)
	assert.Equal(t, line/2, h.o.Rate(0x11))
	st := h.o.Stats()
	require.Len(t, st.QPs, 1)
	assert.Equal(t, 1.0, st.QPs[0].Alpha)
	assert.Equal(t, line, st.QPs[0].TargetBps)
	assert.Equal(t, uint64(1), st.CNPReceived)
	assert.Equal(t, uint64(1), st.RateDecreases)
	assert.Equal(t, uint64(0), h.q.Counters.RxDropped, "the CNP was consumed, not handed to the QP")
}

// TestAlphaDecays: with no increase events, a second CNP n α periods after
// the first cuts by (1−g)^n / 2.
func TestAlphaDecays(t *testing.T) {
	for _, n := range []int{1, 2, 7, 40} {
		p := dcqcn.DefaultParams(line)
		p.T, p.B = time.Hour, 1<<50
		h := newHost(t, frames.V2IPv6, p)
		h.cnpAt(t, 0)
		h.cnpAt(t, time.Duration(n)*p.K+time.Microsecond)
		alpha := math.Pow(1-p.G, float64(n))
		assert.InEpsilon(t, line/2*(1-alpha/2), h.o.Rate(0x11), 1e-12, "n=%d", n)
	}
}

// TestFastRecovery: after one CNP the rate climbs back to the target
// halving the gap at each of the F timer events (Rc_k = Rt − (Rt−Rc0)/2^k),
// then additive increase raises the target by R_AI per event.
func TestFastRecovery(t *testing.T) {
	p := dcqcn.DefaultParams(line)
	p.B = 1 << 50
	h := newHost(t, frames.V2IPv4, p)
	h.cnpAt(t, 0)
	for k := 1; k <= p.F; k++ {
		got := h.rateAt(time.Duration(k)*p.T + time.Nanosecond)
		assert.Equal(t, line-line/2/math.Pow(2, float64(k)), got, "fast recovery event %d", k)
	}
	// Additive increase from event F+1 on: Rt = line capped, so Rc keeps
	// halving its gap to the line rate.
	got := h.rateAt(time.Duration(p.F+1)*p.T + time.Nanosecond)
	assert.Equal(t, line-line/2/math.Pow(2, float64(p.F+1)), got)
}

// TestAgainstReference: CNPs at irregular times, with a lower line rate
// so that additive and hyper increase lift the target: the rates agree
// with the plain event-list reference at many instants.
func TestAgainstReference(t *testing.T) {
	for _, tc := range []struct {
		name string
		p    func() dcqcn.Params
	}{
		{"paper", func() dcqcn.Params { return dcqcn.DefaultParams(line) }},
		{"nvidia", func() dcqcn.Params { return dcqcn.NVIDIAParams(line) }},
		{"fast", func() dcqcn.Params {
			p := dcqcn.DefaultParams(line)
			p.T, p.F, p.RAI = 3*time.Microsecond, 2, 1e9
			return p
		}},
	} {
		p := tc.p()
		h := newHost(t, frames.V2IPv4, p)
		r := newRef(p)
		cnps := []time.Duration{7 * time.Microsecond, 9 * time.Microsecond, 120 * time.Microsecond, 121 * time.Microsecond, 403 * time.Microsecond, 2100 * time.Microsecond}
		probes := []time.Duration{8 * time.Microsecond, 60 * time.Microsecond, 119 * time.Microsecond, 300 * time.Microsecond, 402 * time.Microsecond, 1000 * time.Microsecond, 2099 * time.Microsecond, 5000 * time.Microsecond}
		var evs []time.Duration
		evs = append(evs, cnps...)
		evs = append(evs, probes...)
		for i := 1; i < len(evs); i++ { // insertion sort: the two lists merged in time order
			for j := i; j > 0 && evs[j] < evs[j-1]; j-- {
				evs[j], evs[j-1] = evs[j-1], evs[j]
			}
		}
		isCNP := func(at time.Duration) bool {
			for _, c := range cnps {
				if c == at {
					return true
				}
			}
			return false
		}
		for _, at := range evs {
			if isCNP(at) {
				h.cnpAt(t, at)
				r.run(at, true)
				continue
			}
			got := h.rateAt(at)
			r.run(at, false)
			assert.InEpsilon(t, r.rc, got, 1e-12, "%s: rate at %v", tc.name, at)
		}
	}
}

// bytes is n bytes sent now: a byte-counter event per B.
func (r *ref) bytes(n int64, acc *int64) {
	*acc += n
	for *acc >= r.p.B {
		*acc -= r.p.B
		r.bc++
		r.event()
	}
}

// TestHyperIncrease: once both the timer's and the byte counter's events
// passed F, the target grows by i·R_HAI, i counting from F.
func TestHyperIncrease(t *testing.T) {
	p := dcqcn.DefaultParams(10e9)
	p.T, p.B, p.F, p.RAI, p.RHAI = 3*time.Microsecond, 1000, 2, 10e6, 300e6
	h := newHost(t, frames.V2IPv4, p)
	r := newRef(p)
	h.cnpAt(t, 0)
	r.run(0, true)
	// Two more CNPs bring the rates well below the line, then frames and
	// timer events alternate.
	h.cnpAt(t, time.Microsecond)
	r.run(time.Microsecond, true)
	var acc int64
	buf := make([]byte, 500)
	hyper := false
	for i := 1; i <= 40; i++ {
		at := time.Microsecond + time.Duration(i)*1700*time.Nanosecond
		h.clk.AdvanceTo(at)
		r.run(at, false)
		before := r.rt
		h.o.Transmit(h.q, buf, len(buf))
		r.bytes(500, &acc)
		if r.rt-before > p.RAI {
			hyper = true
		}
		assert.InEpsilon(t, r.rc, h.o.Rate(0x11), 1e-12, "after frame %d", i)
	}
	assert.True(t, hyper, "the schedule reaches hyper increase")
}

// TestByteCounter: with the timer out of the way, every B bytes the QP
// sends is one increase event: F of them fast recovery, then additive
// increase.
func TestByteCounter(t *testing.T) {
	p := dcqcn.DefaultParams(10e9)
	p.T, p.B, p.RAI = time.Hour, 10000, 100e6
	h := newHost(t, frames.V2IPv4, p)
	h.cnpAt(t, 0)
	buf := make([]byte, 1000)
	rc, rt := 5e9, 10e9
	for k := 1; k <= 12; k++ {
		for i := 0; i < 10; i++ { // 10 frames of 1000 bytes: one event
			assert.Equal(t, rc, h.o.Rate(0x11), "before event %d, frame %d", k, i)
			n, ps := h.o.Transmit(h.q, buf, len(buf))
			require.Equal(t, 1000, n)
			require.Zero(t, ps)
		}
		if k > p.F {
			rt = math.Min(rt+p.RAI, 10e9)
		}
		rc = (rt + rc) / 2
		assert.Equal(t, rc, h.o.Rate(0x11), "after byte-counter event %d", k)
	}
}

// TestMinimumRate: back-to-back CNPs never cut below the minimum rate,
// and the report keeps the lowest rate.
func TestMinimumRate(t *testing.T) {
	p := dcqcn.DefaultParams(line)
	p.MinRate = 1e9
	h := newHost(t, frames.V2IPv4, p)
	for i := 0; i < 20; i++ {
		h.cnpAt(t, time.Duration(i)*time.Microsecond)
	}
	assert.Equal(t, 1e9, h.o.Rate(0x11))
	st := h.o.Stats()
	assert.Equal(t, 1e9, st.QPs[0].MinRateBps)
	assert.Equal(t, uint64(20), st.RateDecreases)
}

// TestPacing: after a CNP at α = 1 the QP sends at half the line rate: a
// frame of n bytes holds the next back (n+24)·8 bits / (line/2).
func TestPacing(t *testing.T) {
	h := newHost(t, frames.V2IPv4, dcqcn.DefaultParams(line))
	assert.Zero(t, h.o.Pace(h.q, 0), "no CNP yet: never held")
	h.cnpAt(t, 5*time.Microsecond)
	now := h.clk.Now()
	assert.Equal(t, time.Duration(0), h.o.Pace(h.q, now)-now, "the first frame may go at once")
	h.o.Transmit(h.q, make([]byte, 1100), 1100)
	ps := float64((1100+24)*8) / (line / 2) * 1e12
	assert.Equal(t, now+time.Duration(math.Ceil(ps/1000)), h.o.Pace(h.q, now))
	h.o.Transmit(h.q, make([]byte, 1100), 1100) // sent early: the next waits for both
	assert.Equal(t, now+time.Duration(math.Ceil(2*ps/1000)), h.o.Pace(h.q, now))
}

// TestSteadyStateAllocatesNothing: Pace and Transmit of a rate-limited QP,
// with timers falling due, allocate nothing.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	h := newHost(t, frames.V2IPv4, dcqcn.DefaultParams(line))
	h.cnpAt(t, 0)
	buf := make([]byte, 1100)
	at := time.Duration(0)
	allocs := testing.AllocsPerRun(1000, func() {
		at += 700 * time.Nanosecond
		h.clk.AdvanceTo(at)
		h.o.Pace(h.q, at)
		h.o.Transmit(h.q, buf, len(buf))
	})
	assert.Zero(t, allocs)
}

// ce is a WRITE packet from the peer to the QP marked CE.
func (h *host) ce(t *testing.T, psn uint32) []byte {
	p := h.peer
	p.TClass = 26<<2 | 3
	return nictest.Frame(t, p, &frames.Packet{Opcode: wire.WriteOnly, PSN: psn, RETH: frames.RETHFields{VA: 0x1000, RKey: 1, DMALen: 8}, Payload: make([]byte, 8)})
}

// TestNotificationPoint: CE-marked data every 10 µs for 200 µs make a CNP
// at 0, 50, 100 and 150 µs (one per 50 µs), the rest suppressed; each CNP
// is the annex's format, addressed back to the sender's QP; every data
// frame still reaches the QP.
func TestNotificationPoint(t *testing.T) {
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6} {
		h := newHost(t, tr, dcqcn.DefaultParams(line))
		buf := make([]byte, nic.MaxFrame)
		var sentAt []time.Duration
		var data []byte
		for i := 0; i < 20; i++ {
			at := time.Duration(i) * 10 * time.Microsecond
			h.clk.AdvanceTo(at)
			data = h.ce(t, 500+uint32(i))
			h.n.Receive(data)
			for {
				n := h.n.NextFrame(buf)
				if n == 0 {
					break
				}
				var v frames.View
				require.NoError(t, v.Parse(buf[:n]))
				if v.Opcode() != wire.CNP {
					continue // the QP's ACKs
				}
				sentAt = append(sentAt, at)
				checkCNP(t, &v, data, h.q)
			}
		}
		us := time.Microsecond
		assert.Equal(t, []time.Duration{0, 50 * us, 100 * us, 150 * us}, sentAt, "%s", tr)
		st := h.o.Stats()
		assert.Equal(t, uint64(4), st.CNPSent)
		assert.Equal(t, uint64(16), st.CNPSuppressed)
		assert.Equal(t, uint64(20), st.ECNMarkedReceived)
		c := h.q.Counters
		assert.Equal(t, uint64(20), c.RcvdPkts+c.RxDropped+c.RxICRCErrors, "%s: every data frame went on to the QP", tr)
	}
}

// checkCNP checks a CNP against the data frame it answers, field by field
// from the frame's bytes.
func checkCNP(t *testing.T, v *frames.View, data []byte, q *roce.QP) {
	t.Helper()
	var d frames.View
	require.NoError(t, d.Parse(data))
	assert.Equal(t, d.SrcMAC(), v.DstMAC())
	assert.Equal(t, d.DstMAC(), v.SrcMAC())
	assert.Equal(t, d.SrcAddr(), v.DstAddr())
	assert.Equal(t, d.DstAddr(), v.SrcAddr())
	assert.Equal(t, uint8(48<<2), v.TClass(), "DSCP 48, ECN 00")
	u := v.UDP()
	assert.Equal(t, uint16(4791), uint16(u[2])<<8|uint16(u[3]))
	assert.Equal(t, q.Path().SrcPort, v.UDPSrcPort())
	b := v.BTH()
	assert.Equal(t, byte(0x81), b[0])
	assert.Equal(t, uint32(0x22), v.DestQP(), "the peer's QPN")
	assert.True(t, b[4]&0x40 != 0, "BECN")
	assert.Equal(t, make([]byte, 16), v.Payload())
	assert.True(t, v.ICRCOK())
	ok, err := frames.VerifyICRC(v.Frame())
	require.NoError(t, err)
	assert.True(t, ok)
}

// TestUnmarkedAndAcksMakeNoCNP: ECT(0) data, CE-marked ACKs and CE data
// for a QP the host does not have make none.
func TestUnmarkedAndAcksMakeNoCNP(t *testing.T) {
	h := newHost(t, frames.V2IPv4, dcqcn.DefaultParams(line))
	p := h.peer
	p.TClass = 26<<2 | 2
	h.n.Receive(nictest.Frame(t, p, &frames.Packet{Opcode: wire.SendOnly, PSN: 500, Payload: make([]byte, 8)}))
	p.TClass |= 3
	h.n.Receive(nictest.Frame(t, p, &frames.Packet{Opcode: wire.Acknowledge, PSN: 100}))
	p.DestQP = 0x99
	h.n.Receive(nictest.Frame(t, p, &frames.Packet{Opcode: wire.SendOnly, PSN: 500, Payload: make([]byte, 8)}))
	st := h.o.Stats()
	assert.Zero(t, st.CNPSent)
	assert.Zero(t, st.ECNMarkedReceived)
	assert.Equal(t, uint64(1), h.n.Stats.NoQP)
}

func TestValidate(t *testing.T) {
	require.NoError(t, dcqcn.DefaultParams(line).Validate())
	require.NoError(t, dcqcn.NVIDIAParams(line).Validate())
	bad := []func(*dcqcn.Params){
		func(p *dcqcn.Params) { p.LineRate = 0 },
		func(p *dcqcn.Params) { p.LineRate = math.Inf(1) },
		func(p *dcqcn.Params) { p.MinRate = 0 },
		func(p *dcqcn.Params) { p.MinRate = 2 * line },
		func(p *dcqcn.Params) { p.G = 0 },
		func(p *dcqcn.Params) { p.G = 1.5 },
		func(p *dcqcn.Params) { p.AlphaInit = math.NaN() },
		func(p *dcqcn.Params) { p.K = 0 },
		func(p *dcqcn.Params) { p.T = -1 },
		func(p *dcqcn.Params) { p.B = 0 },
		func(p *dcqcn.Params) { p.F = -1 },
		func(p *dcqcn.Params) { p.RAI = -1 },
		func(p *dcqcn.Params) { p.RHAI = math.NaN() },
		func(p *dcqcn.Params) { p.CNPInterval = -1 },
		func(p *dcqcn.Params) { p.CNPDSCP = 64 },
	}
	for i, f := range bad {
		p := dcqcn.DefaultParams(line)
		f(&p)
		err := p.Validate()
		require.Error(t, err, "case %d", i)
		assert.NotContains(t, err.Error(), "\n")
		assert.True(t, strings.HasPrefix(err.Error(), "dcqcn: "), err.Error())
		_, err = dcqcn.Enable(nic.New(vclock.New(), "h0", 0, 0, frames.V2IPv4), p)
		assert.Error(t, err)
	}
}
