package capcheck_test

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/capcheck"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// Link directions named A-B and B-A, as the emulator names them in any
// topology, merge into one vantage point A~B like X-in and X-out; a host's
// link is oriented by the host's MAC, a link between switches is watched
// mid-path.

// abRename maps the star's portR-in to hR-s0 and portR-out to s0-hR.
func abRename(n string) string {
	var r int
	if _, err := fmt.Sscanf(n, "port%d-", &r); err != nil {
		return n
	}
	switch {
	case strings.HasSuffix(n, "-in"):
		return fmt.Sprintf("h%d-s0", r)
	case strings.HasSuffix(n, "-out"):
		return fmt.Sprintf("s0-h%d", r)
	}
	return n
}

func abNames(names []string, f func(string) string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = f(n)
	}
	return out
}

// abJSON is a report as JSON with the vantage point names mapped back.
func abJSON(t *testing.T, r *capcheck.Report, vp map[string]string) string {
	t.Helper()
	c := *r
	c.VantagePoints = append([]string(nil), r.VantagePoints...)
	for i, v := range c.VantagePoints {
		if w, ok := vp[v]; ok {
			c.VantagePoints[i] = w
		}
	}
	c.Streams = append([]capcheck.StreamReport(nil), r.Streams...)
	for i, s := range c.Streams {
		if w, ok := vp[s.Vantage]; ok {
			c.Streams[i].Vantage = w
		}
	}
	// Violations name interfaces: hR-s0 is portR-in, s0-hR portR-out.
	c.Violations = append([]capcheck.Violation(nil), r.Violations...)
	for i, v := range c.Violations {
		c.Violations[i].Interface = abIface.ReplaceAllString(abOut.ReplaceAllString(v.Interface, "port${1}-out"), "port${1}-in")
	}
	b, err := json.Marshal(&c)
	require.NoError(t, err)
	return string(b)
}

var (
	abIface = regexp.MustCompile(`^h(\d+)-s0$`)
	abOut   = regexp.MustCompile(`^s0-h(\d+)$`)
)

// TestCheckHostLinkNamesMatchInOut: the emulator's star captures with
// hR-s0 and s0-hR for portR-in and portR-out give the same report, item
// for item (vantage point hR~s0 for portR): the same violations, streams,
// positions, latencies and agg-sum counts.
func TestCheckHostLinkNamesMatchInOut(t *testing.T) {
	for _, file := range []string{"netreduce_clean.pcapng", "netreduce_faults.pcapng", "ring_fault.pcapng", "agg_sum.pcapng"} {
		t.Run(file, func(t *testing.T) {
			recs, names, err := pcapio.ReadAllNamed(chkGoldenPath(file))
			require.NoError(t, err)
			ref := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
			ab := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: abNames(names, abRename)})
			back := map[string]string{}
			for r := 0; r < 4; r++ {
				back[fmt.Sprintf("h%d~s0", r)] = fmt.Sprintf("port%d", r)
			}
			assert.Equal(t, []string{"h0~s0", "h1~s0", "h2~s0", "h3~s0"}, ab.VantagePoints)
			assert.Equal(t, abJSON(t, ref, nil), abJSON(t, ab, back))
			if strings.HasPrefix(file, "netreduce") || file == "agg_sum.pcapng" {
				assert.Positive(t, ab.AggChecked)
			}
		})
	}
}

// TestCheckHostLinkOrientation: host 1's link h1-s0/s0-h1 (and its
// parallel link #1) in a hand-built capture. Host 1 sends data to host 2
// and answers host 3's data, so its MAC is the source of every frame on
// h1-s0 and the destination of every frame on s0-h1: h1-s0 is X-in. A
// skip in host 1's own stream is psn-order at the sender's link; a hole in
// host 3's stream (lost before this link) is not judged at the receiver's.
// The same capture named h1-in/h1-out gives the same violations.
func TestCheckHostLinkOrientation(t *testing.T) {
	for _, tc := range []struct{ up, down, vp string }{
		{"h1-s0", "s0-h1", "h1~s0"},
		{"s0-h1#1", "h1-s0#1", "h1~s0#1"}, // listed switch side first
		{"h1-in", "h1-out", "h1"},
	} {
		t.Run(tc.vp, func(t *testing.T) {
			c := chkNewCapture(tc.up, tc.down)
			a := chkNewConn(t, 1, 2, 0x12, 0x11)
			b := chkNewConn(t, 3, 1, 0x32, 0x31)
			c.add(tc.up, us, a.data(100, false))   // 0
			c.add(tc.down, us, b.data(300, false)) // 1
			c.add(tc.up, us, a.data(102, false))   // 2: skips 101
			c.add(tc.down, us, b.data(302, false)) // 3: 301 lost upstream
			c.add(tc.up, us, b.nak(301))           // 4
			c.add(tc.down, us, a.nak(101))         // 5
			c.add(tc.up, us, a.data(101, false))   // 6
			c.add(tc.down, us, b.data(301, false)) // 7
			c.add(tc.up, us, a.data(102, true))    // 8
			c.add(tc.down, us, b.data(302, true))  // 9
			c.add(tc.down, us, a.ack(102))         // 10
			c.add(tc.up, us, b.ack(302))           // 11
			recs, names := chkRecords(t, c)
			rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
			assert.Equal(t, []string{tc.vp}, rep.VantagePoints)
			assert.Equal(t, []chkWant{{"psn-order", 2, 102}}, chkViolations(rep))
			pos := map[string]string{}
			for _, s := range rep.Streams {
				pos[s.Src] = s.Position
			}
			assert.Equal(t, map[string]string{"10.0.0.1": "sender", "10.0.0.3": "receiver"}, pos)
		})
	}
}

// TestCheckTwoHostNetwork: in a two-host network both ends of a host's
// link only talk to each other, so MACs read it both ways. With both host
// links captured, where frames were seen first decides: host 1's frames
// cross h1-s0 before s0-h2, host 2's h2-s0 before s0-h1. Host 1 skips PSN
// 101: psn-order at its link, as on h1-in/h1-out. One link captured alone
// cannot be oriented and is watched mid-path (no psn-order).
func TestCheckTwoHostNetwork(t *testing.T) {
	for _, tc := range []struct {
		label    string
		names    []string // h1 → switch, switch → h1, h2 → switch, switch → h2
		vps, pos []string
		want     []chkWant
	}{
		{"both links", []string{"h1-s0", "s0-h1", "h2-s0", "s0-h2"}, []string{"h1~s0", "h2~s0"}, []string{"sender", "receiver"}, []chkWant{{"psn-order", 2, 102}}},
		{"in-out", []string{"h1-in", "h1-out", "h2-in", "h2-out"}, []string{"h1", "h2"}, []string{"sender", "receiver"}, []chkWant{{"psn-order", 2, 102}}},
		{"one link alone", []string{"h1-s0", "s0-h1", "", ""}, []string{"h1~s0"}, []string{"mid-path"}, []chkWant{}},
	} {
		t.Run(tc.label, func(t *testing.T) {
			var names []string
			for _, n := range tc.names {
				if n != "" {
					names = append(names, n)
				}
			}
			c := chkNewCapture(names...)
			add := func(i int, frame []byte) {
				if tc.names[i] != "" {
					c.add(tc.names[i], us, frame)
				}
			}
			a := chkNewConn(t, 1, 2, 0x12, 0x11)
			for _, p := range []uint32{100, 102} { // 101 never sent
				f := a.data(p, false)
				add(0, f)
				add(3, f)
			}
			nak := a.nak(101)
			add(2, nak)
			add(1, nak)
			for _, p := range []uint32{101, 102} {
				f := a.data(p, p == 102)
				add(0, f)
				add(3, f)
			}
			ack := a.ack(102)
			add(2, ack)
			add(1, ack)
			recs, names := chkRecords(t, c)
			rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
			assert.Equal(t, tc.vps, rep.VantagePoints)
			assert.Equal(t, tc.want, chkViolations(rep))
			var pos []string
			for _, s := range rep.Streams {
				pos = append(pos, s.Position)
			}
			assert.Equal(t, tc.pos, pos)
		})
	}
}

// TestCheckOneHostLeafUplink: host 1 is leaf1's only host, so every frame
// on leaf1-spine0 is from or to it, as on its own link h1-leaf1. Its
// frames were captured on h1-leaf1 first: that is its link (it loses PSN
// 101 there, a ghost), and the uplink is watched mid-path, where the hole
// is no psn-order violation. Captured alone, the uplink reads as host 1's
// link and the hole as a skip: a capture of one link cannot tell.
func TestCheckOneHostLeafUplink(t *testing.T) {
	build := func(withHostLink bool) *chkCapture {
		c := chkNewCapture("leaf1-spine0", "spine0-leaf1")
		if withHostLink {
			c = chkNewCapture("h1-leaf1", "leaf1-h1", "leaf1-spine0", "spine0-leaf1")
		}
		a := chkNewConn(t, 1, 3, 0x12, 0x11)       // host 1 sends to host 3
		b := chkNewConn(t, 5, 1, 0x52, 0x51)       // and answers host 5
		up := func(f []byte, comments ...string) { // host 1 → leaf1 → spine0
			if withHostLink {
				c.add("h1-leaf1", us, f, comments...)
			}
			if len(comments) == 0 {
				c.add("leaf1-spine0", us, f)
			}
		}
		down := func(f []byte) { // spine0 → leaf1 → host 1
			c.add("spine0-leaf1", us, f)
			if withHostLink {
				c.add("leaf1-h1", us, f)
			}
		}
		up(a.data(100, false))
		up(a.data(101, false), chkGhost) // lost on host 1's link
		up(a.data(102, false))
		down(b.data(500, false))
		down(a.nak(101))
		up(b.ack(500))
		up(a.data(101, false))
		up(a.data(102, true))
		down(a.ack(102))
		return c
	}
	recs, names := chkRecords(t, build(true))
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []string{"h1~leaf1", "leaf1~spine0"}, rep.VantagePoints)
	assert.Empty(t, rep.Violations)
	pos := map[string]string{}
	for _, s := range rep.Streams {
		pos[s.Vantage+" "+s.Src] = s.Position
	}
	assert.Equal(t, map[string]string{
		"h1~leaf1 10.0.0.1": "sender", "h1~leaf1 10.0.0.5": "receiver",
		"leaf1~spine0 10.0.0.1": "mid-path", "leaf1~spine0 10.0.0.5": "mid-path",
	}, pos)

	recs, names = chkRecords(t, build(false))
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	require.Len(t, rep.Violations, 1)
	assert.Equal(t, capcheck.RulePSNOrder, rep.Violations[0].Rule)
	assert.Equal(t, uint32(102), rep.Violations[0].PSN)
}

// TestCheckSwitchLink: leaf0-spine0 and spine0-leaf0 carry two hosts'
// connections (hosts 1 and 2 behind leaf0, 3, 4 and 5 beyond spine0):
// one vantage point leaf0~spine0, mid-path. Host 1 is in most frames
// (about two in three each way), not in nine in ten. A PSN lost before this link is no
// psn-order violation here (it is at a tap, assumed next to the sender);
// a NAK past every PSN that crossed the link is nak-psn wherever it is
// seen.
func TestCheckSwitchLink(t *testing.T) {
	build := func(up, down string) *chkCapture {
		c := chkNewCapture(up, down)
		a := chkNewConn(t, 1, 3, 0x12, 0x11)
		b := chkNewConn(t, 2, 4, 0x22, 0x21)
		d := chkNewConn(t, 1, 5, 0x52, 0x51)
		c.add(up, us, a.data(100, false)) // 0
		c.add(up, us, b.data(200, false)) // 1
		c.add(up, us, a.data(101, false)) // 2
		c.add(up, us, b.data(201, false)) // 3
		c.add(up, us, a.data(103, false)) // 4: 102 lost before this link
		c.add(down, us, a.nak(102))       // 5
		c.add(up, us, b.data(202, true))  // 6
		c.add(up, us, a.data(102, false)) // 7
		c.add(up, us, a.data(103, true))  // 8
		c.add(down, us, b.nak(205))       // 9: 203..205 never sent
		c.add(down, us, a.ack(103))       // 10
		c.add(down, us, b.ack(202))       // 11
		c.add(up, us, d.data(500, false)) // 12
		c.add(up, us, d.data(501, true))  // 13
		c.add(down, us, d.ack(501))       // 14
		c.add(up, us, d.data(502, true))  // 15
		c.add(down, us, d.ack(502))       // 16
		return c
	}
	recs, names := chkRecords(t, build("leaf0-spine0", "spine0-leaf0"))
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []string{"leaf0~spine0"}, rep.VantagePoints)
	assert.Equal(t, []chkWant{{"nak-psn", 9, 205}}, chkViolations(rep))
	assert.Equal(t, 3, rep.Connections)
	require.Len(t, rep.Streams, 3)
	for _, s := range rep.Streams {
		assert.Equal(t, "mid-path", s.Position, "%+v", s)
		require.NotNil(t, s.RespQP, "paired: %+v", s)
	}
	assert.Equal(t, 1, rep.NAKGenLatency.Count, "the gap at 102 is seen here")
	assert.Zero(t, rep.RetransLatency.Count, "a sender-side latency")

	// The same frames on one tap declared a sender's: the hole reads as
	// the sender's skip. Left to infer, the NAK for the hole says the
	// loss was before the tap.
	c := build("tap0", "tap0")
	c.names = []string{"tap0"}
	recs, names = chkRecords(t, c)
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names, Vantage: capcheck.VantageSender})
	assert.Equal(t, []chkWant{{"psn-order", 4, 103}, {"nak-psn", 9, 205}}, chkViolations(rep))
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []chkWant{{"nak-psn", 9, 205}}, chkViolations(rep))
}

// TestCheckSwitchLinkSkipsAggregation: the clean NetReduce capture with
// every host's link direction put on one switch link (every host behind
// leaf0, the aggregating switch beyond spine0): no MAC dominates, so
// agg-sum checks nothing there and nothing is reported.
func TestCheckSwitchLinkSkipsAggregation(t *testing.T) {
	recs, names, err := pcapio.ReadAllNamed(chkGoldenPath("netreduce_clean.pcapng"))
	require.NoError(t, err)
	up := func(n string) string {
		if strings.HasSuffix(n, "-in") {
			return "leaf0-spine0"
		}
		return "spine0-leaf0"
	}
	rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: abNames(names, up)})
	assert.Equal(t, []string{"leaf0~spine0"}, rep.VantagePoints)
	assert.Empty(t, rep.Violations)
	assert.Zero(t, rep.AggChecked+rep.AggUnchecked+rep.AggForwarded)
	for _, s := range rep.Streams {
		assert.Equal(t, "mid-path", s.Position, "%+v", s)
	}
	// Named as host links, the same frames are checked.
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: abNames(names, abRename)})
	assert.Positive(t, rep.AggChecked)
}
