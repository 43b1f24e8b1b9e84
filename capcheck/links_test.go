package capcheck_test

import (
	"encoding/json"
	"fmt"
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
	b, err := json.Marshal(&c)
	require.NoError(t, err)
	return string(b)
}

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

// TestCheckTwoHostLinkUnoriented: on a host's link in a two-host network
// both ends only talk to each other, so MACs cannot tell which one is the
// host: the pair is watched mid-path (no psn-order), where an X-in/X-out
// pair would judge the sender.
func TestCheckTwoHostLinkUnoriented(t *testing.T) {
	for _, tc := range []struct {
		up, down, vp, pos string
		want              []chkWant
	}{
		{"h1-s0", "s0-h1", "h1~s0", "mid-path", []chkWant{}},
		{"h1-in", "h1-out", "h1", "sender", []chkWant{{"psn-order", 1, 102}}},
	} {
		t.Run(tc.vp, func(t *testing.T) {
			c := chkNewCapture(tc.up, tc.down)
			a := chkNewConn(t, 1, 2, 0x12, 0x11)
			c.add(tc.up, us, a.data(100, false)) // 0
			c.add(tc.up, us, a.data(102, false)) // 1: skips 101
			c.add(tc.down, us, a.nak(101))       // 2
			c.add(tc.up, us, a.data(101, false)) // 3
			c.add(tc.up, us, a.data(102, true))  // 4
			c.add(tc.down, us, a.ack(102))       // 5
			recs, names := chkRecords(t, c)
			rep := capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
			assert.Equal(t, tc.want, chkViolations(rep))
			require.Len(t, rep.Streams, 1)
			assert.Equal(t, tc.pos, rep.Streams[0].Position)
		})
	}
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

	// The same frames on one tap: the hole reads as the sender's skip.
	c := build("tap0", "tap0")
	c.names = []string{"tap0"}
	recs, names = chkRecords(t, c)
	rep = capcheck.Check(recs, capcheck.CheckOptions{Interfaces: names})
	assert.Equal(t, []chkWant{{"psn-order", 4, 103}, {"nak-psn", 9, 205}}, chkViolations(rep))
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
