package emu

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/tensor"
)

// smallJob is a quick job: 8 workers × 128 KiB in 8 KiB messages (16 per
// worker in netreduce mode), window 2, 10G links.
func smallJob(mode Mode, specs ...string) Config {
	cfg := DefaultConfig()
	cfg.Workers, cfg.Mode, cfg.TensorBytes, cfg.MsgLen, cfg.MTU, cfg.Window, cfg.Seed = 8, mode, 128<<10, 8, 1024, 2, 1
	for _, s := range specs {
		ev, err := faults.Parse(s)
		if err != nil {
			panic(err)
		}
		cfg.Events = append(cfg.Events, ev)
	}
	return cfg
}

// inaPackets is how many packets (= aggregators completed) a netreduce job
// of cfg sends per worker: messages of MsgLen×MTU bytes, each starting with
// the 8-byte INA header, the last one shorter.
func inaPackets(cfg Config) uint64 {
	const inaHdr = 8
	chunk := int64(cfg.MsgLen*cfg.MTU - inaHdr)
	var pkts uint64
	for left := cfg.TensorBytes; left > 0; left -= chunk {
		n := min(left, chunk) + inaHdr
		pkts += uint64((n + int64(cfg.MTU) - 1) / int64(cfg.MTU))
	}
	return pkts
}

func runExact(t *testing.T, cfg Config) *Result {
	t.Helper()
	res, err := Run(cfg)
	require.NoError(t, err)
	require.NotNil(t, res)
	require.True(t, res.Exact, "mismatch %+v", res.Mismatch)
	require.Nil(t, res.Mismatch)
	require.Empty(t, res.Error)
	return res
}

func bothModes(t *testing.T, f func(t *testing.T, mode Mode)) {
	for _, m := range []Mode{NetReduce, Ring} {
		t.Run(m.String(), func(t *testing.T) { f(t, m) })
	}
}

func TestRunNoFaultsBaseline(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		res := runExact(t, smallJob(mode))
		assert.Zero(t, res.Retransmissions)
		assert.Zero(t, res.NAKs)
		assert.Zero(t, res.Timeouts)
		assert.Zero(t, res.ICRCDrops)
		assert.Zero(t, res.FaultDrops)
		assert.Zero(t, res.QueueDrops)
		assert.Equal(t, faults.Stats{}, res.Faults)
		assert.Equal(t, mode.String(), res.Mode)
		assert.Equal(t, 8, res.Workers)
		assert.Equal(t, int64(128<<10), res.Bytes)
		assert.Greater(t, res.VirtualNS, int64(0))
		assert.InDelta(t, float64(res.Bytes)*8/float64(res.VirtualNS), res.AlgBWGbps, 1e-9)
		assert.InDelta(t, res.AlgBWGbps*2*7/8, res.BusBWGbps, 1e-9)
		if mode == NetReduce {
			assert.Equal(t, "safe", res.Release)
			// 128 KiB in messages of 8×1024-8 bytes: 16 full messages of 8
			// packets and a 17th of 128 bytes in one packet.
			assert.Equal(t, uint64(16*8+1), inaPackets(smallJob(mode)))
			assert.Equal(t, uint64(16*8+1), netreduce.StatsOf(res.Switch).Aggregations)
			assert.Zero(t, netreduce.StatsOf(res.Switch).ResultResends)
			assert.Zero(t, netreduce.StatsOf(res.Switch).CLTMisses)
		} else {
			assert.Empty(t, res.Release)
			assert.Zero(t, netreduce.StatsOf(res.Switch).Aggregations, "the switch only forwards in ring mode")
		}
	})
}

func TestRunDropFirstResult(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		res := runExact(t, smallJob(mode, "drop port=0 dir=out class=data nth=1"))
		assert.Equal(t, uint64(1), res.Faults.Dropped)
		assert.Equal(t, uint64(1), res.FaultDrops)
		assert.True(t, res.Retransmissions > 0 || res.NAKs > 0, "recovery: %+v", res)
		assert.Greater(t, res.Retransmissions, uint64(0), "the lost packet must be sent again")
	})
}

func TestRunDropFirstPacketOfFirstMessage(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		res := runExact(t, smallJob(mode, "drop port=3 dir=in class=data nth=1"))
		assert.Equal(t, uint64(1), res.Faults.Dropped)
		assert.Greater(t, res.Retransmissions, uint64(0))
		if mode == NetReduce {
			assert.True(t, netreduce.StatsOf(res.Switch).FirstLostDrops > 0 || netreduce.StatsOf(res.Switch).CLTMisses > 0,
				"the switch must notice the message without its first packet: %+v", res.Switch)
		}
	})
}

func TestRunCorruptNeverAggregated(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		res := runExact(t, smallJob(mode, "corrupt port=2 dir=in class=data nth=5"))
		assert.Equal(t, uint64(1), res.Faults.Corrupted)
		assert.GreaterOrEqual(t, res.ICRCDrops, uint64(1))
		assert.Greater(t, res.Retransmissions, uint64(0))
		if mode == NetReduce {
			// The switch checks the ICRC before aggregating; had it
			// aggregated the corrupted packet, it would have recomputed a
			// good ICRC over a wrong sum and the result would differ.
			assert.Equal(t, uint64(1), netreduce.StatsOf(res.Switch).ICRCDrops)
		}
	})
}

// Corrupting a random 10% of one rank's data frames (retransmissions
// included) still ends exact, and every corrupted frame is caught.
//
// (A periodic schedule such as every=3 is not used: a go-back-N round whose
// length is a multiple of the period corrupts the same PSN on every retry,
// and retry exhaustion is then the right outcome.)
func TestRunCorruptMany(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		cfg := smallJob(mode, "corrupt port=5 dir=in class=data prob=10%")
		var capBuf bytes.Buffer
		cfg.Capture = &capBuf
		res := runExact(t, cfg)
		assert.Greater(t, res.Faults.Corrupted, uint64(5))
		// A corrupted retransmission may still be on the wire when the job
		// ends: count the ones that arrived, from the capture.
		rd, err := pcapio.NewReader("capture", &capBuf)
		require.NoError(t, err)
		arrived := uint64(0)
		for {
			rec, err := rd.Next()
			if err != nil {
				break
			}
			if len(rec.Comments) > 0 && strings.Contains(rec.Comments[0], "fault=corrupt") {
				require.Equal(t, 10, rec.Info.InterfaceIndex, "port5-in")
				arrived++
			}
		}
		assert.LessOrEqual(t, arrived, res.Faults.Corrupted)
		assert.GreaterOrEqual(t, arrived+1, res.Faults.Corrupted)
		assert.Equal(t, arrived, res.ICRCDrops, "every corrupted frame that arrived is caught by exactly one ICRC check")
		if mode == NetReduce {
			assert.Equal(t, arrived, netreduce.StatsOf(res.Switch).ICRCDrops, "the switch drops each corrupted gradient packet")
		}
	})
}

// Duplicated gradient packets change nothing. A duplicate that reaches the
// switch after its aggregator completed gets the result re-sent: rank 7's
// packets arrive last (ties go to the lower port), so its duplicates come
// after completion; rank 1's arrive before the others and only overwrite
// rank 1's own slot.
func TestRunDuplicates(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		res := runExact(t, smallJob(mode, "dup port=1 dir=in class=data every=7"))
		assert.Greater(t, res.Faults.Duplicated, uint64(0))
		assert.Zero(t, res.Retransmissions, "a duplicate needs no recovery")
		if mode == NetReduce {
			assert.Equal(t, inaPackets(smallJob(mode)), netreduce.StatsOf(res.Switch).Aggregations, "no aggregator counted twice")
		}
		res = runExact(t, smallJob(mode, "dup port=7 dir=in class=data every=7"))
		assert.Greater(t, res.Faults.Duplicated, uint64(0))
		if mode == NetReduce {
			assert.Greater(t, netreduce.StatsOf(res.Switch).ResultResends, uint64(0), "a duplicate for a complete aggregator gets the result again")
			assert.Equal(t, inaPackets(smallJob(mode)), netreduce.StatsOf(res.Switch).Aggregations)
		}
	})
}

func TestRunDropAckAndNAK(t *testing.T) {
	for _, spec := range []string{"drop port=4 dir=out class=ack nth=1", "drop class=nak nth=1"} {
		t.Run(spec, func(t *testing.T) {
			bothModes(t, func(t *testing.T, mode Mode) {
				cfg := smallJob(mode, spec)
				if strings.Contains(spec, "nak") {
					// Something must be NAKed first: lose a data frame.
					cfg = smallJob(mode, spec, "drop port=6 dir=in class=data nth=4")
				}
				res := runExact(t, cfg)
				assert.GreaterOrEqual(t, res.Faults.Dropped, uint64(1))
				if strings.Contains(spec, "nak") {
					// nth counts per link direction: the first NAK on each
					// direction that carries one is dropped.
					if mode == Ring {
						// Rank 7's NAK is dropped on port7-in and never
						// reaches port6-out.
						assert.Equal(t, uint64(2), res.Faults.Dropped, "the data frame and rank 7's first NAK")
					} else {
						// Every receiver NAKs the gap the lost packet
						// leaves in its results.
						assert.GreaterOrEqual(t, res.Faults.Dropped, uint64(3), "the data frame and a NAK each way")
					}
					assert.Greater(t, res.NAKs, uint64(0))
					assert.Greater(t, res.Retransmissions, uint64(0))
				}
			})
		})
	}
}

func TestRunHoldAndDelay(t *testing.T) {
	for _, spec := range []string{"hold=3 port=5 dir=in class=data nth=10", "delay=20us port=6 dir=out nth=3"} {
		t.Run(spec, func(t *testing.T) {
			bothModes(t, func(t *testing.T, mode Mode) {
				res := runExact(t, smallJob(mode, spec))
				if strings.HasPrefix(spec, "hold") {
					assert.Equal(t, uint64(1), res.Faults.Held)
				} else {
					assert.Equal(t, uint64(1), res.Faults.Delayed)
				}
			})
		})
	}
}

// A delay longer than the ACK timeout makes the sender time out and go
// back; the late original then arrives as a duplicate.
func TestRunDelayBeyondTimeout(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		cfg := smallJob(mode, "delay=3ms port=2 dir=in class=data nth=2")
		cfg.Timeout = 8 // 1.05 ms
		res := runExact(t, cfg)
		assert.Greater(t, res.Timeouts+res.NAKs, uint64(0))
		assert.Greater(t, res.Retransmissions, uint64(0))
	})
}

// Every data frame of rank 2 is lost: its send QP retries RetryCnt times
// and fails. In ring mode no other QP is stuck, so the error names rank 2's
// send QP. In netreduce mode no aggregation can complete, so no rank gets
// a result (= an ACK) and every send QP times out alike: the job fails with
// the first QP to run out of retries.
func TestRunRetryExhaustion(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		cfg := smallJob(mode, "drop port=2 dir=in class=data")
		cfg.RetryCnt, cfg.Timeout = 2, 6
		res, err := Run(cfg)
		require.Error(t, err)
		var je *JobError
		require.True(t, errors.As(err, &je), "want *JobError, got %T: %v", err, err)
		var ce *ConfigError
		assert.False(t, errors.As(err, &ce))
		assert.Contains(t, err.Error(), "RETRY_EXC_ERR")
		assert.Contains(t, err.Error(), "QPN 0x11")
		require.NotNil(t, res, "a failed job still reports what happened")
		assert.False(t, res.Exact)
		assert.Equal(t, err.Error(), res.Error)
		assert.Greater(t, res.Faults.Dropped, uint64(0))
		if mode == Ring {
			assert.Contains(t, err.Error(), "rank 2 send QP to rank 3")
			// local_ack_timeout_err counts every timeout (docs/roce.md §6): two
			// that retried and the third that exhausted the retries.
			assert.Equal(t, uint64(3), res.Timeouts)
		} else {
			assert.Regexp(t, `^rank \d send QP to rank \d`, err.Error())
			assert.GreaterOrEqual(t, res.Timeouts, uint64(3))
			assert.Zero(t, netreduce.StatsOf(res.Switch).Aggregations)
		}
	})
}

// RetryCnt 0: the first timeout or NAK fails the WR.
func TestRunRetryCntZero(t *testing.T) {
	bothModes(t, func(t *testing.T, mode Mode) {
		cfg := smallJob(mode, "drop port=7 dir=in class=data nth=1")
		cfg.RetryCnt, cfg.Timeout = 0, 6
		_, err := Run(cfg)
		var je *JobError
		require.True(t, errors.As(err, &je), "%v", err)
		assert.Contains(t, err.Error(), "RETRY_EXC_ERR")
		if mode == Ring {
			assert.Contains(t, err.Error(), "rank 7 send QP to rank 0")
		}
	})
}

// A job that cannot finish in MaxVirtual fails with a JobError, not a hang
// or a wrong result.
func TestRunMaxVirtual(t *testing.T) {
	cfg := smallJob(Ring)
	cfg.MaxVirtual = 10 * 1000 // 10 µs: far too short
	res, err := Run(cfg)
	var je *JobError
	require.True(t, errors.As(err, &je), "%v", err)
	assert.Contains(t, err.Error(), "did not finish")
	require.NotNil(t, res)
	assert.False(t, res.Exact)
}

// Light random netem on every link: every run either ends bit-exact or
// fails with a transport error; never "finished, result differs".
func TestRunRandomNetemProperty(t *testing.T) {
	seeds := 10
	if testing.Short() {
		seeds = 2
	}
	netem, err := faults.ParseNetem("loss 0.05% duplicate 0.5% corrupt 0.05%")
	require.NoError(t, err)
	for _, mode := range []Mode{NetReduce, Ring} {
		for _, dt := range []tensor.DType{tensor.F32, tensor.I32, tensor.F16} {
			var faulted faults.Stats
			exact := 0
			for seed := uint64(1); seed <= uint64(seeds); seed++ {
				cfg := smallJob(mode)
				cfg.Workers, cfg.TensorBytes, cfg.DType, cfg.Seed, cfg.Netem = 4, 256<<10, dt, seed, netem
				res, err := Run(cfg)
				name := fmt.Sprintf("%s %s seed %d", mode, dt, seed)
				if err != nil {
					var je *JobError
					require.True(t, errors.As(err, &je), "%s: %T %v", name, err, err)
					require.NotNil(t, res, name)
					require.False(t, res.Exact, name)
					continue
				}
				require.True(t, res.Exact, "%s: finished with a wrong result: %+v", name, res.Mismatch)
				exact++
				faulted.Lost += res.Faults.Lost
				faulted.Duplicated += res.Faults.Duplicated
				faulted.Corrupted += res.Faults.Corrupted
			}
			assert.Greater(t, exact, 0, "%s %s: no run finished", mode, dt)
			assert.Greater(t, faulted.Duplicated, uint64(0), "%s %s: the netem actually did something", mode, dt)
		}
	}
}

func TestRunTransports(t *testing.T) {
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		t.Run(tr.String(), func(t *testing.T) {
			bothModes(t, func(t *testing.T, mode Mode) {
				cfg := smallJob(mode, "drop port=1 dir=in class=data nth=3", "corrupt port=4 dir=out class=data nth=2")
				cfg.Transport = tr
				res := runExact(t, cfg)
				assert.Equal(t, tr.String(), res.Transport)
				assert.Greater(t, res.Retransmissions, uint64(0))
				assert.GreaterOrEqual(t, res.ICRCDrops, uint64(1))
				if mode == NetReduce {
					assert.Equal(t, inaPackets(cfg), netreduce.StatsOf(res.Switch).Aggregations, "the switch aggregates %s traffic", tr)
				}
			})
		})
	}
}

func TestRunPaperRelease(t *testing.T) {
	for _, w := range []int{1, 2, 4} {
		cfg := smallJob(NetReduce)
		cfg.Release, cfg.Window = netreduce.Paper, w
		res := runExact(t, cfg)
		assert.Equal(t, "paper", res.Release)
		assert.Equal(t, inaPackets(cfg), netreduce.StatsOf(res.Switch).Aggregations)
	}
}

// Odd shapes: a tensor that does not fill its last message or packet, one
// packet per message, MTU 256 and 4096, the smallest ring.
func TestRunShapes(t *testing.T) {
	for _, c := range []struct {
		workers, msgLen, mtu, window int
		bytes                        int64
		dt                           tensor.DType
	}{
		{2, 1, 256, 1, 4 << 10, tensor.F32},
		{3, 3, 512, 3, 100_000, tensor.I32},
		{5, 7, 4096, 2, 64<<10 + 6, tensor.F16},
		{4, 255, 256, 1, 70 << 10, tensor.F32},
		{2, 4, 1024, 32, 40 << 10, tensor.F32},
	} {
		for _, mode := range []Mode{NetReduce, Ring} {
			t.Run(fmt.Sprintf("%s_w%d_m%d_mtu%d_%dB_%s", mode, c.workers, c.msgLen, c.mtu, c.bytes, c.dt), func(t *testing.T) {
				cfg := smallJob(mode, "drop port=1 dir=in class=data nth=2")
				cfg.Workers, cfg.MsgLen, cfg.MTU, cfg.Window, cfg.TensorBytes, cfg.DType = c.workers, c.msgLen, c.mtu, c.window, c.bytes, c.dt
				res := runExact(t, cfg)
				if mode == NetReduce {
					assert.Equal(t, inaPackets(cfg), netreduce.StatsOf(res.Switch).Aggregations)
				}
			})
		}
	}
}

func TestRunConfigErrors(t *testing.T) {
	for name, mut := range map[string]func(*Config){
		"workers 1":      func(c *Config) { c.Workers = 1 },
		"mtu 1000":       func(c *Config) { c.MTU = 1000 },
		"msglen 0":       func(c *Config) { c.MsgLen = 0 },
		"msglen 256":     func(c *Config) { c.MsgLen = 256 },
		"window 0":       func(c *Config) { c.Window = 0 },
		"tensor 3 f32":   func(c *Config) { c.TensorBytes = 3 },
		"tensor 0":       func(c *Config) { c.TensorBytes = 0 },
		"rate 0":         func(c *Config) { c.Link.Rate = 0 },
		"latency < 0":    func(c *Config) { c.Link.Latency = -1 },
		"retry 8":        func(c *Config) { c.RetryCnt = 8 },
		"timeout 32":     func(c *Config) { c.Timeout = 32 },
		"dtype 9":        func(c *Config) { c.DType = 9 },
		"ring too small": func(c *Config) { c.Mode, c.Workers, c.TensorBytes = Ring, 8, 16 },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := smallJob(NetReduce)
			mut(&cfg)
			res, err := Run(cfg)
			var ce *ConfigError
			require.True(t, errors.As(err, &ce), "want *ConfigError, got %T %v", err, err)
			assert.Nil(t, res)
		})
	}
}

// Found by the aggregation suite (seed 2026, case 530): rank 2's first
// packet is held back on its way into the switch, so its second packet
// arrives first; and the frame after that is held on the way to rank 0.
// Had the switch forwarded the early packet as ordinary traffic (a CLT
// miss), the held raw gradient would reach rank 0 just when it expected
// that PSN and be written as the result. The switch knows the ring's
// connections from the job's setup, so it drops the packet instead.
func TestEarlyPacketOfUnseenMessageNeverPoisons(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.Window, cfg.MsgLen, cfg.MTU, cfg.TensorBytes, cfg.Seed = 3, 2, 3, 256, 1944, 177027123831567
	for _, s := range []string{"hold=7 port=0 dir=out class=any nth=3", "hold=4 port=2 dir=in class=any nth=2"} {
		ev, err := faults.Parse(s)
		require.NoError(t, err)
		cfg.Events = append(cfg.Events, ev)
	}
	res, err := Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact, "%+v", res.Mismatch)
	require.Greater(t, netreduce.StatsOf(res.Switch).FirstLostDrops, uint64(0), "the early packet must be dropped")
	require.Zero(t, netreduce.StatsOf(res.Switch).CLTMisses, "ring connections are never CLT misses")
}

// TestRunSpoofFromOtherPort: a forged copy of rank 1's aggregation frame
// (altered gradient, valid ICRC) entering the switch by port 2 is dropped
// by the switch's port security (port 2 is bound to host 2, the frame is
// host 1's) before the accelerator sees it, and the job ends exact; the
// capture shows it on port2-in with its fault comment. (Without port
// security the accelerator's own binding of each connection to its port
// drops it: the netreduce package's tests.)
func TestRunSpoofFromOtherPort(t *testing.T) {
	var buf bytes.Buffer
	cfg := smallJob(NetReduce, "spoof=2 port=1 class=data nth=5")
	cfg.Capture = &buf
	res := runExact(t, cfg)
	assert.Equal(t, uint64(1), res.Faults.Spoofed)
	assert.Equal(t, uint64(1), res.Switch.PortSecurity)
	assert.Zero(t, netreduce.StatsOf(res.Switch).PortDrops, "the accelerator never saw it")
	// With port security off the forgery reaches the accelerator, which
	// drops it by the connection's port binding.
	open := smallJob(NetReduce, "spoof=2 port=1 class=data nth=5")
	open.OpenPorts = true
	res2 := runExact(t, open)
	assert.Equal(t, uint64(1), netreduce.StatsOf(res2.Switch).PortDrops)
	assert.Zero(t, res2.Switch.PortSecurity)
	rd, err := pcapio.NewReader("capture", bytes.NewReader(buf.Bytes()))
	require.NoError(t, err)
	found := 0
	for {
		r, err := rd.Next()
		if err != nil {
			break
		}
		for _, c := range r.Comments {
			if strings.Contains(c, "fault=spoof") {
				found++
				assert.Equal(t, "port2-in", rd.Interfaces()[r.Info.InterfaceIndex])
			}
		}
	}
	assert.Equal(t, 1, found)
}

// TestLateFrameBeyondMsgIDWrap: issue 11's measurements. With a 1 ms ACK
// timeout one gradient frame delayed 1.8 ms arrives about 150 one-packet
// messages late, after its 8-bit MsgID wrapped: the safe rule forwards it
// as a released message's duplicate and the job is exact (an int8 widening
// took it for a future message and delivered raw gradients as the sum).
// Under the paper's rule, aggregators addressed by index alone, a frame
// delayed 1.2 ms lands in the message that holds its aggregator then: a
// wrong result, the rule's own flaw, kept as a mode.
func TestLateFrameBeyondMsgIDWrap(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Workers, cfg.Window, cfg.MsgLen, cfg.TensorBytes, cfg.MTU, cfg.Seed, cfg.Timeout = 2, 1, 1, 64<<10, 256, 1, 8
	late := cfg
	ev, err := faults.Parse("delay=1803us port=0 dir=in class=data nth=1")
	require.NoError(t, err)
	late.Events = []faults.Event{ev}
	res := runExact(t, late)
	assert.Equal(t, uint64(1), netreduce.StatsOf(res.Switch).StaleForwards, "the late frame is a released message's duplicate")
	assert.Zero(t, netreduce.StatsOf(res.Switch).BadDrops)

	paper := cfg
	paper.Release = netreduce.Paper
	ev, err = faults.Parse("delay=1211us port=0 dir=in class=data nth=5")
	require.NoError(t, err)
	paper.Events = []faults.Event{ev}
	res, err = Run(paper)
	require.NoError(t, err)
	assert.False(t, res.Exact, "the paper's index-only rule sums the late frame into a later message")
	paper.Release = netreduce.Safe
	runExact(t, paper)
}
