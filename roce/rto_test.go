package roce_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/roce"
)

// oneWRAtATime posts n 8-packet WRITEs one after another, each when the
// last has completed (or failed), and returns their completions.
func oneWRAtATime(t *testing.T, h *harness, n int) []roce.Completion {
	t.Helper()
	var done []roce.Completion
	for i := range n {
		postWrite(t, h, uint64(i), pattern(8*256, byte(i)), uint64(i)*8*256)
		h.run(time.Minute)
		c := poll(h.hosts[0].cq)
		require.Len(t, c, 1, "WR %d", i)
		done = append(done, c[0])
		if c[0].Status != roce.StatusSuccess {
			break
		}
	}
	return done
}

// A round trip longer than the configured timeout's retries (here 60 ms
// against 8 × 4.2 ms, as a busy machine's queues make it): the fixed timer
// resends until RETRY_EXC_ERR with nothing lost; the adaptive one backs
// off until a round trip is measured, and the rest go without a timeout.
func TestAdaptiveTimeoutRidesOutLongRoundTrips(t *testing.T) {
	const n = 10
	for _, adaptive := range []bool{false, true} {
		cfg := defaultCfg() // Timeout 10: 4.19 ms
		cfg.AdaptiveTimeout = adaptive
		h := newHarness(t, cfg, defaultCfg(), n*8*256)
		h.delay = 30 * time.Millisecond
		done := oneWRAtATime(t, h, n)
		qp := h.hosts[0].qp
		if !adaptive {
			require.Len(t, done, 1)
			require.Equal(t, roce.StatusRetryExcErr, done[0].Status, "the fixed 4.2 ms timer gives up on a 60 ms round trip")
			require.Equal(t, uint64(8), qp.Counters.LocalAckTimeoutErr, "seven retries, and the expiry that fails the WR")
			continue
		}
		require.Len(t, done, n)
		for i, c := range done {
			require.Equal(t, roce.StatusSuccess, c.Status, "WR %d", i)
			require.Equal(t, pattern(8*256, byte(i)), h.hosts[1].mem[i*8*256:(i+1)*8*256], "WR %d's data", i)
		}
		// The first WRITE's timer expires at 4.2, 12.6 and 29.4 ms (its
		// ACK at 60 ms is no sample: Karn); the second's once more, at
		// 33.6 ms; the third's period, 67 ms, outlasts the round trip and
		// gives the first sample; none expires after.
		require.Equal(t, uint64(4), qp.Counters.LocalAckTimeoutErr)
		period, srtt := qp.RTO()
		require.InDelta(t, float64(60*time.Millisecond), float64(srtt), float64(time.Millisecond), "smoothed round trip")
		require.GreaterOrEqual(t, period, srtt)
		require.LessOrEqual(t, period, 64*roce.AckTimeout(cfg.Timeout))
	}
}

// On a quiet link the adaptive timer is the configured one: the measured
// round trips (microseconds) sit far below the floor, so a loss recovered
// by timeout takes exactly as long, frame for frame and nanosecond for
// nanosecond, as with the fixed timer.
func TestAdaptiveTimeoutFloorIsTheConfiguredTimeout(t *testing.T) {
	var logs [2][]wireEvent
	for i, adaptive := range []bool{false, true} {
		cfg := defaultCfg()
		cfg.AdaptiveTimeout = adaptive
		h := newHarness(t, cfg, defaultCfg(), 1<<16)
		h.fault = once(0, 107, drop) // the message's last packet: no NAK, only the timer recovers it
		postWrite(t, h, 1, pattern(8*256, 1), 0)
		h.run(time.Second)
		require.Equal(t, []roce.Completion{{WRID: 1, Status: roce.StatusSuccess, Opcode: roce.WRWrite, QPN: qpnA}}, poll(h.hosts[0].cq))
		require.Equal(t, uint64(1), h.hosts[0].qp.Counters.LocalAckTimeoutErr)
		logs[i] = h.log
		floor := roce.AckTimeout(cfg.Timeout)
		period, _ := h.hosts[0].qp.RTO()
		if adaptive {
			// Karn: the retransmitted PSN's ACK is no sample, so the
			// backoff stays until a PSN sent once is acknowledged.
			require.Equal(t, 2*floor, period)
			postWrite(t, h, 2, pattern(256, 2), 8*256)
			h.run(time.Second)
			require.Len(t, poll(h.hosts[0].cq), 1)
			period, _ = h.hosts[0].qp.RTO()
		}
		require.Equal(t, floor, period, "no backoff left, no estimate above the floor")
	}
	require.Equal(t, len(logs[0]), len(logs[1]))
	for k := range logs[0] {
		require.Equal(t, logs[0][k].at, logs[1][k].at, "frame %d", k)
		require.Equal(t, logs[0][k].frame, logs[1][k].frame, "frame %d", k)
	}
}

// A responder that never answers still fails the WR, after a bounded
// time: the backoff doubles the period four times at most, so retry_cnt 7
// gives up after 1+2+4+8+16·4 = 79 floors (the fixed timer: 8).
func TestAdaptiveTimeoutGivesUpOnAMuteResponder(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		cfg := defaultCfg()
		cfg.AdaptiveTimeout = adaptive
		h := newHarness(t, cfg, defaultCfg(), 1<<16)
		h.fault = func(e *wireEvent) verdict {
			if e.dir == 1 {
				return drop
			}
			return pass
		}
		postWrite(t, h, 1, pattern(8*256, 1), 0)
		h.run(time.Minute)
		require.Equal(t, []roce.Completion{{WRID: 1, Status: roce.StatusRetryExcErr, Opcode: roce.WRWrite, QPN: qpnA}}, poll(h.hosts[0].cq))
		floors := time.Duration(8)
		if adaptive {
			floors = 79
		}
		floor := roce.AckTimeout(cfg.Timeout)
		require.GreaterOrEqual(t, h.clock.Now(), floors*floor)
		require.Less(t, h.clock.Now(), floors*floor+time.Millisecond, "gave up after %v", h.clock.Now())
	}
}
