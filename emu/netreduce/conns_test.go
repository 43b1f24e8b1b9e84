package netreduce_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
)

func withConns(cfg netreduce.RingConfig) netreduce.RingConfig {
	for r := 0; r < cfg.Workers; r++ {
		cfg.Conns = append(cfg.Conns, netreduce.Conn{Src: ip(r), Dst: ip((r + 1) % cfg.Workers), DestQP: destQP, Rank: r, Port: r})
	}
	return cfg
}

// With the ring's connections known from setup, a packet that overtakes
// its message's first packet is dropped (the receiver would otherwise get
// raw gradient bytes), and counts as a first-lost drop, not a CLT miss.
func TestKnownConnectionPacketBeforeFirst(t *testing.T) {
	c := newCluster(t, withConns(ringCfg(3, 2, 4)))
	require.Equal(t, netreduce.Dropped, c.send(1, 0, 1))
	require.Equal(t, uint64(1), c.acc.Stats().FirstLostDrops)
	require.Zero(t, c.acc.Stats().CLTMisses)
	// Once the first packets are in, the same packet aggregates.
	for r := 0; r < 3; r++ {
		c.send(r, 0, 0)
	}
	c.wantResults(t, 0, 0)
	for r := 0; r < 3; r++ {
		require.Equal(t, netreduce.Aggregated, c.send(r, 0, 1))
	}
	c.wantResults(t, 0, 1)

	// Without Conns the CLT cannot tell: the early packet is forwarded.
	u := newCluster(t, ringCfg(3, 2, 4))
	require.Equal(t, netreduce.NotINA, u.send(1, 0, 1))
	require.Equal(t, uint64(1), u.acc.Stats().CLTMisses)
}

// A corrupted first packet of a known connection (e.g. its InetTag hit)
// is an ICRC drop, not a protocol error.
func TestKnownConnectionCorruptHeader(t *testing.T) {
	c := newCluster(t, withConns(ringCfg(3, 2, 4)))
	f := c.frame(0, 0, 0)
	i := len(f) - 4 - c.dataLen(0) - 8 // the first byte of the INA header's tag
	require.Equal(t, netreduce.Dropped, c.feed(corrupt(f, i)))
	require.Equal(t, uint64(1), c.acc.Stats().ICRCDrops)
	require.Zero(t, c.acc.Stats().BadDrops)
}

func TestConnsValidation(t *testing.T) {
	cfg := withConns(ringCfg(3, 2, 4))
	cfg.Conns[1].Rank = 0 // two connections claim rank 0
	require.Error(t, netreduce.New().AddRing(cfg))
	cfg = withConns(ringCfg(3, 2, 4))
	cfg.Conns[2].Rank = 7
	require.Error(t, netreduce.New().AddRing(cfg))
	cfg = withConns(ringCfg(3, 2, 4))
	for i := range cfg.Conns {
		cfg.Conns[i].Port = 0 // every member on one port: a Conn built without Port
	}
	require.ErrorContains(t, netreduce.New().AddRing(cfg), "another member's")
	cfg = withConns(ringCfg(3, 2, 4))
	for i := range cfg.Conns {
		cfg.Conns[i].Port = netreduce.AnyPort // learned from each member's first frame
	}
	require.NoError(t, netreduce.New().AddRing(cfg))
}
