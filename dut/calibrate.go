package dut

import (
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// Calibration is what a short clean job through the device measured of
// the path's speed: inaemu's hosts, the wire, the kernel's queues and the
// device, on this machine at this load. Case shapes and ACK timeouts are
// fitted to it (Timeout, MaxInFlight), so that a good device is never
// failed for the path's speed.
type Calibration struct {
	Mode    string `json:"mode"`
	Workers int    `json:"workers"`
	// Frames is how many RoCE frames the hosts sent and were handed, in
	// WallNS from the first frame sent to the last handed.
	Frames int   `json:"frames"`
	WallNS int64 `json:"wall_ns"`
	// Rate is Frames per second: the path's host frames/s.
	Rate float64 `json:"frames_per_s"`
	// RTTNS is the first round trip: from the first frame a host sent to
	// the first frame a host was handed.
	RTTNS int64 `json:"rtt_ns"`
	// Error says why the measurement failed (the defaults are used then).
	Error string `json:"error,omitempty"`
}

// Measured reports whether the calibration measured a rate.
func (c Calibration) Measured() bool { return c.Rate > 0 }

// The fitting rule. A window of F packets per rank from each of W ranks
// puts W·F gradient frames into the device and W·F results back out to
// the hosts before the last rank's first ACK can come (a cell completes
// only when the last rank's packet arrived), so a round takes
//
//	D(W, F) = 2·W·F / Rate + RTT
//
// and the ACK timeout (the adaptive timer's floor, the whole timer
// before the first round trip is sampled) must be at least
// CalibrationMargin × D: the margin absorbs the load's swings between the
// calibration and the case. The exponent is the smallest from
// MinTimeout up that does, at most MaxTimeout; where even MaxTimeout is
// too short, F is cut (MaxInFlight) instead.
const (
	CalibrationMargin = 4
	MinTimeout        = 14 // ≈ 67 ms, the emulator's default and perftest's
	MaxTimeout        = 18 // ≈ 1.07 s
	// FallbackTimeout and FallbackInFlight are the conservative shape a
	// failed calibration leaves the cases: a calibration fails most often
	// because the path is slow (a slow device, a starved process, a stall
	// at the floor timeout), so nothing measured must not mean the
	// floor's 67 ms and the deepest window, but the fixed ACK timeout
	// inaemu ran devices with before calibrating (2^16, ≈ 268 ms) and a
	// window the calibration's own burst uses.
	FallbackTimeout  = 16
	FallbackInFlight = 64
)

// round is D(W, F).
func (c Calibration) round(workers, inFlight int) time.Duration {
	return time.Duration(2*float64(workers*inFlight)/c.Rate*float64(time.Second)) + time.Duration(c.RTTNS)
}

// Timeout is the smallest ACK timeout exponent from MinTimeout to
// MaxTimeout whose period covers CalibrationMargin rounds of workers
// ranks with inFlight packets each in flight (FallbackTimeout when nothing was
// measured).
func (c Calibration) Timeout(workers, inFlight int) int {
	if !c.Measured() {
		return FallbackTimeout
	}
	need := CalibrationMargin * c.round(workers, inFlight)
	for e := MinTimeout; e < MaxTimeout; e++ {
		if roce.AckTimeout(uint8(e)) >= need {
			return e
		}
	}
	return MaxTimeout
}

// MaxInFlight is the most packets per rank in flight whose rounds fit
// MaxTimeout with the margin (FallbackInFlight when nothing was measured,
// and never more than limit).
func (c Calibration) MaxInFlight(workers, limit int) int {
	if !c.Measured() {
		return min(limit, FallbackInFlight)
	}
	budget := roce.AckTimeout(MaxTimeout)/CalibrationMargin - time.Duration(c.RTTNS)
	f := int(math.Floor(budget.Seconds() * c.Rate / float64(2*workers)))
	return max(1, min(limit, f))
}

// String is the calibration in one line.
func (c Calibration) String() string {
	if !c.Measured() {
		return fmt.Sprintf("calibration failed (%s): cases fall back to conservative settings (ACK timeout exponent %d, at most %d packets in flight per rank)", c.Error, FallbackTimeout, FallbackInFlight)
	}
	return fmt.Sprintf("calibration: %.0f host frames/s, first round trip %v (%d frames of a clean %s job of %d ranks in %v)",
		c.Rate, time.Duration(c.RTTNS).Round(10*time.Microsecond), c.Frames, c.Mode, c.Workers, time.Duration(c.WallNS).Round(time.Millisecond))
}

// calibrationJob is the clean burst: one message of 64 packets in flight
// per rank (a window the default 67 ms timeout covers even at 8 k host
// frames/s with 4 ranks, so the burst measures the path, not
// retransmissions; a deeper window would move more frames per second,
// so the measured rate errs on the slow side), 2 MiB per rank (some
// 16 k frames: 0.2 s on a quiet 2-core machine, long enough to average
// over a loaded one's swings). A mute
// device ends it in 8 timeouts (0.5 s, the stall detector), one that
// answers wrongly when the retries run out (5.3 s).
func calibrationJob(mode emu.Mode, workers int) emu.Config {
	cfg := emu.DefaultConfig()
	cfg.Mode, cfg.Workers = mode, workers
	cfg.Window, cfg.MsgLen, cfg.MTU, cfg.DType = 1, 64, 1024, tensor.F32
	cfg.TensorBytes = 2 << 20
	cfg.Timeout = MinTimeout
	cfg.MaxVirtual = 30 * time.Second
	cfg.Seed = 1
	return cfg
}

// Calibrate runs the clean burst through the device (starting it with
// its command, if any) and measures it. A failure is returned and
// recorded in the calibration's Error.
func Calibrate(d Device, mode emu.Mode, workers int) (Calibration, error) {
	cfg := calibrationJob(mode, workers)
	c := Calibration{Mode: mode.String(), Workers: workers}
	var mu sync.Mutex
	var first, firstIn, last time.Time
	frameCount := 0
	var v frames.View
	prev := d.Observe
	d.Observe = func(rank int, sent bool, frame []byte) {
		if prev != nil {
			prev(rank, sent, frame)
		}
		if v.Parse(frame) != nil {
			return
		}
		now := time.Now()
		mu.Lock()
		defer mu.Unlock()
		frameCount++
		switch {
		case sent && first.IsZero():
			first = now
		case !sent:
			if firstIn.IsZero() {
				firstIn = now
			}
			last = now
		}
	}
	if d.Label == "" {
		d.Label = "the calibration"
	}
	_, err := Run(cfg, d)
	if err == nil && (first.IsZero() || !last.After(first)) {
		err = fmt.Errorf("the job moved no frames")
	}
	if err != nil {
		c.Error = err.Error()
		return c, fmt.Errorf("calibration: %w", err)
	}
	c.Frames, c.WallNS, c.RTTNS = frameCount, int64(last.Sub(first)), int64(firstIn.Sub(first))
	c.Rate = float64(c.Frames) / last.Sub(first).Seconds()
	return c, nil
}
