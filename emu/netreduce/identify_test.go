package netreduce_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
)

// TestAncientFrameNeverMisplaced: a frame that arrives any number of
// messages late (here 130, 200, 300 and 1000: more than the 128 an 8-bit
// MsgID difference can tell apart, and more than 256, where the MsgID
// repeats) is recognized as the old message it is: under Safe it is
// forwarded unchanged as a released message's duplicate, the CLT stays
// where it is, and every later message still aggregates to its sum. (An
// 8-bit widening took such a frame for a future message, moved the CLT
// forward, and forwarded the next messages' honest packets raw.)
func TestAncientFrameNeverMisplaced(t *testing.T) {
	for _, late := range []int{130, 200, 256, 300, 1000} {
		for _, L := range []int{1, 3} {
			cfg := ringCfg(2, 1, L)
			c := newCluster(t, cfg)
			old := c.frame(0, 1, 0)      // message 1's first packet
			oldMid := c.frame(1, 1, L-1) // and a later one of rank 1
			c.lockstep(t, 0, late)
			require.Equal(t, netreduce.Stale, c.feed(old), "late %d, L %d: first packet", late, L)
			if L > 1 {
				require.Equal(t, netreduce.Stale, c.feed(oldMid), "late %d, L %d: later packet", late, L)
			}
			c.wantNothing(t, "a released message's duplicate is forwarded, not emitted")
			assert.Zero(t, c.acc.Stats().CLTUpdates-uint64(2*late), "the CLT did not move")
			c.lockstep(t, late, late+300) // MsgIDs wrap again; every message exact
		}
	}
}

// TestFirstPacketOffMessageStart: a first packet whose PSN is not a
// message start, or whose MsgID disagrees with the message its PSN names,
// is dropped as bad and moves nothing.
func TestFirstPacketOffMessageStart(t *testing.T) {
	c := newCluster(t, ringCfg(2, 2, 3))
	c.lockstep(t, 0, 2)
	p := c.packet(0, 2, 0, c.gradient(0, 2, 0))
	p.PSN = c.psn(0, 2, 1)
	require.Equal(t, netreduce.Dropped, c.feed(c.build(0, p, 9)))
	p = c.packet(0, 2, 0, c.gradient(0, 2, 0))
	p.INA.MsgID = 7
	require.Equal(t, netreduce.Dropped, c.feed(c.build(0, p, 9)))
	assert.Equal(t, uint64(2), c.acc.Stats().BadDrops)
	c.lockstep(t, 2, 6)
}

// TestStartPSNKnown: with each connection's first PSN given at setup, the
// message is known from the PSN alone: a first packet of message 1 that
// arrives before message 0's is placed as message 1 (not taken as the
// anchor), and message 0 then aggregates normally.
func TestStartPSNKnown(t *testing.T) {
	cfg := withConns(ringCfg(3, 2, 2))
	for r := range cfg.Conns {
		cfg.Conns[r].StartPSN, cfg.Conns[r].HasStart = c0PSN(r), true
	}
	c := newCluster(t, cfg)
	for r := 0; r < 3; r++ {
		require.Equal(t, netreduce.Aggregated, c.send(r, 1, 0))
	}
	c.wantResultSet(t, [2]int{1, 0})
	c.lockstep(t, 0, 1)
	for r := 0; r < 3; r++ {
		c.send(r, 1, 1)
	}
	c.wantResultSet(t, [2]int{1, 1})
	c.lockstep(t, 2, 40)
}

// c0PSN is the cluster's first PSN of rank r (see addBuilders).
func c0PSN(r int) uint32 { return (0xFFFFFF - 2 + uint32(r)*0x31337) & 0xFFFFFF }

// TestSpoofedMemberFromOtherPort: a frame with a ring member's addresses,
// QPN and a valid ICRC that enters by another port is dropped and counted,
// never aggregated: the member's genuine packet still makes the right sum.
// Bound at setup or learned from the first frame, alike; and a rank once
// claimed from a port cannot be claimed by a new connection from another.
func TestSpoofedMemberFromOtherPort(t *testing.T) {
	for _, learned := range []bool{false, true} {
		cfg := ringCfg(3, 2, 2)
		if !learned {
			cfg = withConns(cfg)
		}
		c := newCluster(t, cfg)
		c.lockstep(t, 0, 1)
		forged := c.packet(1, 1, 0, make([]byte, c.dataLen(0))) // rank 1's connection, zero gradient
		f := c.build(1, forged, 77)
		require.Equal(t, netreduce.Dropped, c.feedFrom(2, f), "learned %v: first packet from port 2", learned)
		fm := c.build(1, c.packet(1, 0, 1, make([]byte, c.dataLen(1))), 78)
		require.Equal(t, netreduce.Dropped, c.feedFrom(0, fm), "learned %v: later packet from port 0", learned)
		assert.Equal(t, uint64(2), c.acc.Stats().PortDrops)
		c.wantNothing(t, "")
		c.lockstep(t, 1, 4)
		assert.Zero(t, c.acc.Stats().BadDrops)
	}
	// Learned mode: a new connection may not take over a claimed rank.
	c := newCluster(t, ringCfg(3, 2, 2))
	c.lockstep(t, 0, 1)
	p := c.packet(0, 1, 0, c.gradient(0, 1, 0))
	p.INA.Rank = 2 // rank 0's traffic claiming rank 2, from port 0
	require.Equal(t, netreduce.Dropped, c.feed(c.build(0, p, 5)))
	assert.Equal(t, uint64(1), c.acc.Stats().PortDrops+c.acc.Stats().BadDrops)
	c.lockstep(t, 1, 3)
}
