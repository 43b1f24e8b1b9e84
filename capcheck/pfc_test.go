package capcheck_test

import (
	"encoding/binary"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

// The captures here are built byte by byte from IEEE 802.1Qbb's frame
// layout (destination 01:80:C2:00:00:01, EtherType 0x8808, opcode 0x0101,
// class-enable vector, eight 2-byte pause quanta, zero padding to 60
// bytes), independently of frames/pfc.go and of the emulator.

var pfcDst = net.HardwareAddr{0x01, 0x80, 0xC2, 0x00, 0x00, 0x01}

// pfcFrame is a PFC frame from src pausing the priorities in enable for
// quanta[p] quanta each.
func pfcFrame(src net.HardwareAddr, enable uint16, quanta [8]uint16) []byte {
	b := make([]byte, 60)
	copy(b[0:6], pfcDst)
	copy(b[6:12], src)
	binary.BigEndian.PutUint16(b[12:], 0x8808)
	binary.BigEndian.PutUint16(b[14:], 0x0101)
	binary.BigEndian.PutUint16(b[16:], enable)
	for i, q := range quanta {
		binary.BigEndian.PutUint16(b[18+2*i:], q)
	}
	return b
}

// pfcOne pauses priority p for q quanta.
func pfcOne(src net.HardwareAddr, p int, q uint16) []byte {
	var qs [8]uint16
	qs[p] = q
	return pfcFrame(src, 1<<p, qs)
}

// pfcConn is a connection from host a to host b whose frames carry
// traffic class tclass (priority tclass >> 5, ECN its low two bits).
func pfcConn(t *testing.T, a, b int, reqQP, respQP uint32, tclass uint8) *chkConn {
	ma, ia := chkHost(a)
	mb, ib := chkHost(b)
	req, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: ma, DstMAC: mb, SrcIP: ia, DstIP: ib,
		SrcPort: frames.UDPSourcePort(respQP), DestQP: reqQP, TClass: tclass})
	require.NoError(t, err)
	resp, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mb, DstMAC: ma, SrcIP: ib, DstIP: ia,
		SrcPort: frames.UDPSourcePort(reqQP), DestQP: respQP, TClass: 48 << 2}) // CNPs and ACKs: DSCP 48
	require.NoError(t, err)
	return &chkConn{req: req, resp: resp, buf: make([]byte, 2048)}
}

// cnp is the receiver's CNP back to the sender's QP.
func (c *chkConn) cnp() []byte {
	return c.build(c.resp, &frames.Packet{Opcode: wire.CNP, BECN: true, Payload: make([]byte, wire.CNPLen)})
}

func pfcCheck(t *testing.T, c *chkCapture, opt capcheck.CheckOptions) *capcheck.Report {
	recs, names := chkRecords(t, c)
	opt.Interfaces = names
	return capcheck.Check(recs, opt)
}

// ruleFrames are the frame numbers of the violations of rule.
func ruleFrames(r *capcheck.Report, rule string) []int {
	var out []int
	for _, v := range r.Violations {
		if v.Rule == rule {
			out = append(out, v.Frame)
		}
	}
	return out
}

func TestPFCFormat(t *testing.T) {
	sw := net.HardwareAddr{0x02, 0x1a, 0xe1, 0, 0, 1}
	good := pfcOne(sw, 3, 100)
	highByte := pfcFrame(sw, 0x0108, [8]uint16{3: 100})
	wrongDst := pfcOne(sw, 3, 100)
	copy(wrongDst[0:6], net.HardwareAddr{0x02, 0, 0, 0, 0, 9})
	short := pfcOne(sw, 3, 100)[:58]
	withFCS := append(pfcOne(sw, 3, 100), 0, 0, 0, 0) // 64: captured with its FCS
	tagged := append(append(append([]byte(nil), good[:12]...), 0x81, 0x00, 0x00, 0x05), good[12:]...)
	mpcp := pfcOne(sw, 3, 100)
	binary.BigEndian.PutUint16(mpcp[14:], 0x0002)
	// Quanta on a priority whose enable bit is clear: the receiver ignores
	// them; not judged.
	ignored := pfcFrame(sw, 1<<3, [8]uint16{3: 100, 5: 7})
	pause := make([]byte, 60) // 802.3x PAUSE to the partner's unicast address
	copy(pause[0:6], net.HardwareAddr{0x02, 0, 0, 0, 0, 1})
	copy(pause[6:12], sw)
	binary.BigEndian.PutUint16(pause[12:], 0x8808)
	binary.BigEndian.PutUint16(pause[14:], 0x0001)
	binary.BigEndian.PutUint16(pause[16:], 10)

	c := chkNewCapture("port1-in", "port1-out")
	for _, f := range [][]byte{good, highByte, wrongDst, short, withFCS, tagged, mpcp, ignored, pause} {
		c.add("port1-out", us, f)
	}
	rep := pfcCheck(t, c, capcheck.CheckOptions{LinkRate: 10e9})
	assert.Equal(t, []int{2, 3, 4, 6, 7}, ruleFrames(rep, capcheck.RulePFCFormat), "%v", rep.Violations)
	assert.Equal(t, 9, rep.PFCFrames)
	for _, v := range rep.Violations {
		assert.NotContains(t, v.String(), "psn", "a MAC Control frame has no PSN: %s", v)
	}
	assert.Contains(t, rep.Violations[0].Detail, "reserved")
}

// pfcPausedCapture: host 1's link (port1-in: host 1 → switch; port1-out:
// switch → host 1) at 10 Gb/s. The switch pauses host 1's priority 3 for
// 1000 quanta (1000 × 512 bit / 10 Gb/s = 51.2 µs) at T; host 1 sends
// priority-3 frames at T+0.3 µs (it was on the line), T+10 µs and T+20 µs
// (both inside the pause), a priority-0 frame at T+15 µs (not paused), a
// priority-3 frame at T+60 µs (after expiry); then a second pause at T2,
// resumed (quanta 0) at T2+5 µs, and a priority-3 frame at T2+8 µs.
func pfcPausedCapture(t *testing.T, violate bool) *chkCapture {
	sw := net.HardwareAddr{0x02, 0x1a, 0xe1, 0, 0, 1}
	p3 := pfcConn(t, 1, 2, 0x12, 0x11, 3<<5)
	p0 := pfcConn(t, 1, 3, 0x22, 0x21, 0)
	c := chkNewCapture("port1-in", "port1-out")
	c.add("port1-in", us, p3.data(1, false))      // 1
	c.add("port1-out", 5*us, pfcOne(sw, 3, 1000)) // 2: T
	c.add("port1-in", 300*time.Nanosecond, p3.data(2, false))
	if violate {
		c.add("port1-in", 9700*time.Nanosecond, p3.data(3, false)) // 4: T+10µs
		c.add("port1-in", 5*us, p0.data(1, false))                 // 5: T+15µs, priority 0
		c.add("port1-in", 5*us, p3.data(4, false))                 // 6: T+20µs
		c.add("port1-in", 40*us, p3.data(5, false))                // 7: T+60µs
	} else {
		c.add("port1-in", 14700*time.Nanosecond, p0.data(1, false)) // T+15µs
		c.add("port1-in", 45*us, p3.data(3, false))                 // T+60µs
	}
	c.add("port1-out", 100*us, pfcOne(sw, 3, 0xFFFF)) // T2
	c.add("port1-out", 5*us, pfcOne(sw, 3, 0))        // resume
	last := uint32(4)
	if violate {
		last = 6
	}
	c.add("port1-in", 3*us, p3.data(last, false))
	return c
}

func TestPFCPausedSend(t *testing.T) {
	opt := capcheck.CheckOptions{LinkRate: 10e9, LinkDelay: time.Microsecond}
	rep := pfcCheck(t, pfcPausedCapture(t, true), opt)
	require.Equal(t, []int{4}, ruleFrames(rep, capcheck.RulePFCPausedSend), "%v", rep.Violations)
	v := rep.Violations[0]
	assert.Equal(t, "port1-in", v.Interface)
	assert.Contains(t, v.Detail, "frame 2 on port1-out")
	assert.Contains(t, v.Detail, "2 frames of priority 3")
	// 1000 quanta at 10 Gb/s: the pause ends 51.2 µs after frame 2.
	t2 := rep.Violations[0].TimeNS - 10_000
	assert.Contains(t, v.Detail, "until "+secs(t2+51_200))
	assert.Equal(t, 3, rep.PFCPauses)

	rep = pfcCheck(t, pfcPausedCapture(t, false), opt)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, "conforms", rep.Verdict, "%v", rep.Unchecked)

	// A slower link makes the same quanta longer: at 1 Gb/s the pause lasts
	// 512 µs and the frame at T+60 µs is inside it too.
	opt.LinkRate = 1e9
	rep = pfcCheck(t, pfcPausedCapture(t, true), opt)
	require.Len(t, rep.Violations, 1)
	assert.Contains(t, rep.Violations[0].Detail, "3 frames of priority 3")
	// Per interface: port1-in's rate given, port1-out's not, is enough
	// (the paused direction's rate counts).
	rep = pfcCheck(t, pfcPausedCapture(t, true), capcheck.CheckOptions{LinkRates: map[string]float64{"port1": 10e9}, LinkDelay: time.Microsecond})
	assert.Equal(t, []int{4}, ruleFrames(rep, capcheck.RulePFCPausedSend))
}

// secs is a time since the first frame as violations write it.
func secs(ns int64) string { return fmt.Sprintf("%.9fs", float64(ns)/1e9) }

// Without the link's rate the pauses' lengths are unknown: nothing is
// judged, and the verdict says so.
func TestPFCNoRate(t *testing.T) {
	rep := pfcCheck(t, pfcPausedCapture(t, true), capcheck.CheckOptions{})
	assert.Empty(t, rep.Violations)
	assert.Equal(t, "undecidable", rep.Verdict)
	require.Len(t, rep.Unchecked, 1)
	assert.Contains(t, rep.Unchecked[0], "--link-rate")
	assert.Zero(t, rep.PFCPauses)
}

// A pause frame a fault corrupted may have been a resume: the pause is
// taken to end there.
func TestPFCCorruptedPause(t *testing.T) {
	sw := net.HardwareAddr{0x02, 0x1a, 0xe1, 0, 0, 1}
	p3 := pfcConn(t, 1, 2, 0x12, 0x11, 3<<5)
	c := chkNewCapture("port1-in", "port1-out")
	c.add("port1-out", us, pfcOne(sw, 3, 1000))
	bad := pfcOne(sw, 3, 0)
	bad[20] ^= 0x40
	c.add("port1-out", 2*us, bad, "inaemu: fault=corrupt")
	c.add("port1-in", 8*us, p3.data(1, false))
	rep := pfcCheck(t, c, capcheck.CheckOptions{LinkRate: 10e9, LinkDelay: time.Microsecond})
	assert.Empty(t, rep.Violations)
}

// pfcDeadlockCapture: three switches s0, s1, s2 in a ring (s0-s1, s1-s2,
// s2-s0 and back), host h0 on s0. Each switch pauses its upstream
// neighbour for priority 3 (s1 pauses s0's egress to s1: the PFC frame
// travels s1-s0), refreshed every 20 µs with 65535 quanta (3.36 ms at
// 10 Gb/s) from 100 µs to the end, 2 ms later; s0's pause on s2-s0 starts
// last (at start+off). With cycle false s2 never pauses s1.
func pfcDeadlockCapture(t *testing.T, cycle bool, off time.Duration) *chkCapture {
	names := []string{"s0-s1", "s1-s0", "s1-s2", "s2-s1", "s2-s0", "s0-s2", "h0-s0", "s0-h0"}
	c := chkNewCapture(names...)
	mac := func(i int) net.HardwareAddr { return net.HardwareAddr{0x02, 0x1a, 0xe1, 0, byte(i), 1} }
	conn := pfcConn(t, 1, 2, 0x12, 0x11, 3<<5)
	c.add("h0-s0", us, conn.data(1, false))
	c.add("s0-s1", us, conn.data(1, false))
	start := c.now
	// pause frames: on s1-s0 (pausing s0→s1), s2-s1 (s1→s2), s0-s2 (s2→s0)
	type src struct {
		iface string
		mac   net.HardwareAddr
		from  time.Duration
	}
	srcs := []src{{"s1-s0", mac(1), 100 * us}, {"s0-s2", mac(0), 100*us + off}}
	if cycle {
		srcs = append(srcs, src{"s2-s1", mac(2), 100 * us})
	}
	for at := time.Duration(0); at <= 2100*us; at += 20 * us {
		for _, s := range srcs {
			if at >= s.from {
				c.recs = append(c.recs, chkRec{s.iface, start + int64(at), pfcOne(s.mac, 3, 0xFFFF), nil})
			}
		}
	}
	return c
}

func TestPFCDeadlock(t *testing.T) {
	opt := capcheck.CheckOptions{LinkRate: 10e9}
	c := pfcDeadlockCapture(t, true, 40*us)
	rep := pfcCheck(t, c, opt)
	// The cycle closed with the first pause on s0-s2, at start+140 µs.
	want := 0
	for i, r := range c.recs {
		if r.iface == "s0-s2" {
			want = i + 1
			break
		}
	}
	require.Equal(t, []int{want}, ruleFrames(rep, capcheck.RulePFCDeadlock), "%v %v %v", rep.Violations, rep.Unchecked, rep.Inferences)
	d := rep.Violations[0].Detail
	assert.Contains(t, d, "priority 3")
	assert.Contains(t, d, "s0→s1")
	assert.Contains(t, d, "s1→s2")
	assert.Contains(t, d, "s2→s0")
	assert.Equal(t, "violations", rep.Verdict)

	// No cycle without s2's pause of s1.
	rep = pfcCheck(t, pfcDeadlockCapture(t, false, 40*us), opt)
	assert.Empty(t, ruleFrames(rep, capcheck.RulePFCDeadlock))
	// The cycle held together for less than the threshold.
	opt.DeadlockAfter = 5 * time.Millisecond
	rep = pfcCheck(t, pfcDeadlockCapture(t, true, 40*us), opt)
	assert.Empty(t, ruleFrames(rep, capcheck.RulePFCDeadlock))
}

// cnpCapture: host 1 sends priority-3, ECT(0) data to host 2 (QP 0x12;
// host 1's QP 0x11); ce lists the PSNs the switch marked CE. Host 2 ACKs
// every packet and sends CNPs at the times cnpAt (µs after the first
// data packet), to QP 0x11.
func cnpCapture(t *testing.T, n int, ce map[uint32]bool, cnpAt []int) *chkCapture {
	plain := pfcConn(t, 1, 2, 0x12, 0x11, 3<<5|2)
	marked := pfcConn(t, 1, 2, 0x12, 0x11, 3<<5|3)
	c := chkNewCapture("port1-in", "port1-out", "port2-in", "port2-out")
	start := c.now + int64(us)
	type ev struct {
		at    int64
		iface string
		b     []byte
	}
	var evs []ev
	for i := range n {
		psn := uint32(i + 1)
		at := start + int64(i)*int64(10*us)
		cc := plain
		if ce[psn] {
			cc = marked
		}
		evs = append(evs, ev{at, "port1-in", plain.data(psn, true)}, ev{at + 2000, "port2-out", cc.data(psn, true)},
			ev{at + 3000, "port2-in", plain.ack(psn)}, ev{at + 5000, "port1-out", plain.ack(psn)})
	}
	for _, a := range cnpAt {
		at := start + int64(a)*int64(us)
		evs = append(evs, ev{at, "port2-in", plain.cnp()}, ev{at + 2000, "port1-out", plain.cnp()})
	}
	// in time order (stable: equal times keep the order above)
	for i := 1; i < len(evs); i++ {
		for j := i; j > 0 && evs[j].at < evs[j-1].at; j-- {
			evs[j], evs[j-1] = evs[j-1], evs[j]
		}
	}
	for _, e := range evs {
		c.recs = append(c.recs, chkRec{e.iface, e.at, e.b, nil})
		c.now = e.at
	}
	return c
}

// pfcFrameOf is the frame number of the first RoCE record on iface with
// opcode op and PSN psn.
func pfcFrameOf(c *chkCapture, iface string, op wire.Opcode, psn uint32) int {
	var v frames.View
	for i, r := range c.recs {
		if r.iface == iface && v.Parse(r.data) == nil && v.Opcode() == op && v.PSN() == psn {
			return i + 1
		}
	}
	return -1
}

func TestCNPMissing(t *testing.T) {
	opt := capcheck.CheckOptions{InFlight: 5 * time.Microsecond}
	// 40 packets, 10 µs apart; PSN 3 marked at 20 µs with a CNP at 21 µs;
	// PSNs 20 and 22 marked (190, 210 µs) with no CNP near: the window is
	// 50 + 5 µs either side.
	ce := map[uint32]bool{3: true, 20: true, 22: true}
	c := cnpCapture(t, 40, ce, []int{21})
	rep := pfcCheck(t, c, opt)
	want := pfcFrameOf(c, "port2-out", wire.SendOnly, 20)
	require.Equal(t, []int{want}, ruleFrames(rep, capcheck.RuleCNPMissing), "%v", rep.Violations)
	assert.Contains(t, rep.Violations[0].Detail, "2 CE-marked packets")
	assert.Equal(t, 3, rep.CEJudged)
	assert.Equal(t, 2, rep.CNPFrames)
	assert.Equal(t, 1, rep.CNPsJudged)

	// A CNP sent 40 µs before the mark covers it (the NP sends at most one
	// per 50 µs): PSN 22 at 210 µs, CNP at 170 µs covers both.
	c = cnpCapture(t, 40, ce, []int{21, 170})
	rep = pfcCheck(t, c, opt)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, "conforms", rep.Verdict)

	// No CNP from host 2 at all: its NP may be off; judged only with --cnp on.
	c = cnpCapture(t, 40, ce, nil)
	rep = pfcCheck(t, c, opt)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, 3, rep.CEUnjudged)
	assert.Equal(t, "conforms", rep.Verdict)
	opt.CNP = capcheck.CNPOn
	rep = pfcCheck(t, c, opt)
	assert.Len(t, ruleFrames(rep, capcheck.RuleCNPMissing), 1)
	assert.Contains(t, rep.Violations[0].Detail, "3 CE-marked packets")

	// A mark too near the capture's end is not judged.
	opt.CNP = capcheck.CNPAuto
	c = cnpCapture(t, 40, map[uint32]bool{3: true, 39: true}, []int{21})
	rep = pfcCheck(t, c, opt)
	assert.Empty(t, rep.Violations)
	assert.Equal(t, 1, rep.CEJudged)
	assert.Equal(t, 1, rep.CEUnjudged)
}

func TestCNPRate(t *testing.T) {
	// CNPs at 5, 60, 100 and 200 µs: 40 µs apart is under 50 − 5 µs.
	c := cnpCapture(t, 30, nil, []int{5, 60, 100, 200})
	rep := pfcCheck(t, c, capcheck.CheckOptions{})
	var want int
	seen := 0
	var v frames.View
	for i, r := range c.recs {
		if r.iface == "port2-in" && v.Parse(r.data) == nil && v.Opcode() == wire.CNP {
			seen++
			if seen == 3 {
				want = i + 1
			}
		}
	}
	assert.Equal(t, []int{want}, ruleFrames(rep, capcheck.RuleCNPRate), "%v", rep.Violations)
	assert.Equal(t, 4, rep.CNPsJudged)
	assert.Equal(t, 8, rep.CNPFrames) // each seen on both links
	// 46 µs apart is within the tolerance.
	rep = pfcCheck(t, cnpCapture(t, 30, nil, []int{5, 60, 106, 200}), capcheck.CheckOptions{})
	assert.Empty(t, rep.Violations)
	// A longer interval makes 55 µs too close.
	rep = pfcCheck(t, cnpCapture(t, 30, nil, []int{5, 60, 106, 200}), capcheck.CheckOptions{CNPInterval: 100 * time.Microsecond})
	assert.Len(t, ruleFrames(rep, capcheck.RuleCNPRate), 3)
}
