package dut_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/dut"
	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/roce"
)

// TestStallDetectorEndsAMuteDevice: a device that holds its ports and
// forwards nothing (dut/testdata/mute) ends a run in about StallTimeouts
// ACK timeouts, not the run's max_time (2 minutes here): a *StallError
// that is a job failure, saying so in words, with the device's silence
// as evidence (every rank sent into it: the start barrier's ARPs).
func TestStallDetectorEndsAMuteDevice(t *testing.T) {
	prefix := ports(t, "ds", 2)
	bin := testtool.Build(t, "../dut/testdata/mute", "mute")
	var log bytes.Buffer
	d := dut.Device{Prefix: prefix, Command: "exec " + bin + " --prefix $INAEMU_DUT_PREFIX --workers $INAEMU_DUT_WORKERS", Log: &log,
		StartTimeout: testtool.Budget(30 * time.Second), Label: "the stall test"}
	cfg := job(t, 2)
	cfg.Timeout = 12 // 16.8 ms: the stall is declared after 134 ms
	cfg.MaxVirtual = 2 * time.Minute
	start := time.Now()
	_, err := dut.Run(cfg, d)
	took := time.Since(start)
	var se *dut.StallError
	require.True(t, errors.As(err, &se), "%v", err)
	var je *emu.JobError
	require.True(t, errors.As(err, &je), "a stall is a job failure")
	limit := dut.StallTimeouts * roce.AckTimeout(12)
	require.GreaterOrEqual(t, se.For, limit)
	require.Less(t, took, testtool.Budget(10*time.Second), "ended by the detector, not max_time")
	require.Contains(t, err.Error(), "stalled: no progress for ")
	require.Contains(t, err.Error(), "(8 ACK timeouts of 16.777216ms)")
	require.True(t, se.Silent)
	require.Len(t, se.In, 2)
	require.Contains(t, se.Evidence(), "the device sent no RoCE frame for ")
	require.Contains(t, log.String(), "--- inaemu: starting the device for the stall test: INAEMU_DUT_PREFIX="+prefix)
	t.Logf("stalled after %v (run took %v): %v", se.For, took, err)
}

// TestStallDetectorIgnoresOtherFrames: a device whose RoCE path hangs
// while the rest of it runs (it floods the start barrier's ARPs, so the
// job starts, and sends an LLDP broadcast out of every port every 10 ms,
// well within the limit) is stalled all the same, and silent: frames
// that are not RoCE neither make progress nor break its silence. Were
// they progress, the run would go on to its max_time (2 minutes).
func TestStallDetectorIgnoresOtherFrames(t *testing.T) {
	prefix := ports(t, "db", 2)
	bin := testtool.Build(t, "../dut/testdata/mute", "mute")
	var log bytes.Buffer
	d := dut.Device{Prefix: prefix, Command: "exec " + bin + " --forward-other --beacon 10ms --prefix $INAEMU_DUT_PREFIX --workers $INAEMU_DUT_WORKERS", Log: &log,
		StartTimeout: testtool.Budget(30 * time.Second)}
	var mu sync.Mutex
	lldp := 0
	d.Observe = func(_ int, sent bool, frame []byte) {
		if !sent && len(frame) >= 14 && binary.BigEndian.Uint16(frame[12:]) == 0x88cc {
			mu.Lock()
			lldp++
			mu.Unlock()
		}
	}
	cfg := job(t, 2)
	cfg.Timeout = 12 // the stall is declared after 134 ms of the job
	cfg.MaxVirtual = 2 * time.Minute
	start := time.Now()
	_, err := dut.Run(cfg, d)
	took := time.Since(start)
	var se *dut.StallError
	require.True(t, errors.As(err, &se), "%v\ndevice output:\n%s", err, log.String())
	require.Less(t, took, testtool.Budget(10*time.Second), "ended by the detector, not max_time")
	require.True(t, se.Silent, "beacons are not RoCE: the device is silent")
	require.Contains(t, se.Evidence(), "the device sent no RoCE frame for ")
	mu.Lock()
	defer mu.Unlock()
	require.Positive(t, lldp, "the hosts were handed the device's beacons")
	t.Logf("stalled after %v (run took %v), %d beacons handed: %v", se.For, took, lldp, err)
}

// TestCalibrationFit: the fitting rule's numbers, worked by hand from
// the formula in calibrate.go (D = 2·W·F/rate + RTT, timeout ≥ 4·D).
func TestCalibrationFit(t *testing.T) {
	var none dut.Calibration
	require.Equal(t, 16, none.Timeout(4, 170), "nothing measured: the conservative 2^16 (268 ms), not the floor")
	require.Equal(t, 16, none.Timeout(2, 1))
	require.Equal(t, 64, none.MaxInFlight(4, 170), "nothing measured: at most 64 in flight per rank")
	require.Equal(t, 10, none.MaxInFlight(4, 10), "never more than the limit")
	require.Contains(t, dut.Calibration{Error: "stalled"}.String(), "calibration failed (stalled): cases fall back to conservative settings (ACK timeout exponent 16, at most 64 packets in flight per rank)")

	// The machine: 18 k host frames/s, 1 ms first round trip. A
	// default-shape case (4 ranks × 170 packets): D = 8·170/18000 s + 1 ms
	// = 76.6 ms, 4·D = 306 ms > 268 ms (2^16 × 4.096 µs), ≤ 537 ms (2^17).
	slow := dut.Calibration{Rate: 18000, RTTNS: int64(time.Millisecond)}
	require.Equal(t, 17, slow.Timeout(4, 170))
	// 2 ranks × 10 packets: D = 40/18000 s + 1 ms = 3.2 ms: the floor.
	require.Equal(t, 14, slow.Timeout(2, 10))
	// 2 ranks × 170: D = 680/18000 + 1 ms = 38.8 ms, 4·D = 155 ms: 2^15 (134 ms) is short, 2^16.
	require.Equal(t, 16, slow.Timeout(2, 170))
	require.Equal(t, 170, slow.MaxInFlight(4, 170), "fits 2^18")

	// 2 k host frames/s: 2^18 × 4.096 µs = 1073.7 ms, /4 = 268.4 ms, minus
	// 1 ms: 267.4 ms × 2000 / (2·4) = 66.8 packets per rank.
	crawl := dut.Calibration{Rate: 2000, RTTNS: int64(time.Millisecond)}
	require.Equal(t, 66, crawl.MaxInFlight(4, 170))
	require.Equal(t, 18, crawl.Timeout(4, 66))
	require.Equal(t, 18, crawl.Timeout(4, 170), "never above 2^18: the window is cut instead")
	require.Equal(t, 1, dut.Calibration{Rate: 10, RTTNS: int64(time.Millisecond)}.MaxInFlight(4, 170), "at least one packet")
}

// TestCalibrateInaemuSwitch: the calibration's clean burst through
// `inaemu switch` in its own process measures a rate and a first round
// trip. The rate is checked against counts taken apart from the
// calibration's: the test's own observer counts the RoCE frames the hosts
// sent and were handed and times the first sent and the last handed, and
// the job's size bounds it from below over the test's own wall clock
// around the call: 4 ranks each move 2 MiB in packets of at most 1024
// bytes, sent and handed back (2 × 4 × 2048 frames at least).
func TestCalibrateInaemuSwitch(t *testing.T) {
	prefix := ports(t, "dc", 4)
	bin := testtool.Build(t, "github.com/inaemu/inaemu/cmd/inaemu", "inaemu")
	var log bytes.Buffer
	d := dut.Device{Prefix: prefix, Command: "exec " + bin + " switch --tap $INAEMU_DUT_PREFIX $INAEMU_DUT_FLAGS", Log: &log, StartTimeout: testtool.Budget(30 * time.Second)}
	var mu sync.Mutex
	var first, last time.Time
	count := 0
	d.Observe = func(_ int, sent bool, frame []byte) {
		// RoCE v2: IPv4 (0x0800), UDP (17), destination port 4791.
		if len(frame) < 38 || binary.BigEndian.Uint16(frame[12:]) != 0x0800 || frame[23] != 17 || binary.BigEndian.Uint16(frame[36:]) != 4791 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		count++
		now := time.Now()
		if sent && first.IsZero() {
			first = now
		}
		if !sent {
			last = now
		}
	}
	start := time.Now()
	c, err := dut.Calibrate(d, emu.NetReduce, 4)
	outer := time.Since(start)
	require.NoError(t, err, "device output:\n%s", log.String())
	require.True(t, c.Measured())
	mu.Lock()
	defer mu.Unlock()
	const least = 2 * 4 * 2048
	require.GreaterOrEqual(t, count, least)
	require.Equal(t, count, c.Frames, "the frames the test counted")
	own := float64(count) / last.Sub(first).Seconds()
	require.InDelta(t, own, c.Rate, 0.02*own, "the rate over the test's own first-sent to last-handed span")
	require.Greater(t, c.Rate, float64(least)/outer.Seconds(), "at least the job's frames over the whole call")
	require.Positive(t, c.RTTNS)
	require.Less(t, c.RTTNS, c.WallNS)
	require.Contains(t, c.String(), "calibration: ")
	require.Contains(t, log.String(), "--- inaemu: starting the device for the calibration: ")
	t.Log(c)
}
