package congestion

import (
	"errors"
	"math"
	"time"

	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/nic/dcqcn"
	"github.com/inaemu/inaemu/emu/nic/dcqcn/fluid"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames/wire"
)

// The traffic job's data frames on the default RoCEv2/IPv4 transport with
// its 1024-byte MTU: Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + payload
// 1024 + ICRC 4 bytes as captured (a message's first packet carries a
// 16-byte RETH more: one in 170), and the 24 bytes of preamble, FCS and
// gap on the line. The switch's queue and its RED thresholds count the
// captured bytes; DCQCN's rates and the link count the line's.
const (
	dcqcnFrame     = 14 + 20 + 8 + 12 + 1024 + 4
	dcqcnWireFrame = dcqcnFrame + fabric.WireOverhead
	// A CNP: the same headers, 16 reserved bytes, the ICRC (IBA Annex A17).
	dcqcnCNPWire = 14 + 20 + 8 + 12 + wire.CNPLen + 4 + fabric.WireOverhead
)

// DCQCNFeedbackDelay is the fluid model's τ* for an N:1 incast on the
// emulated star (every link rate bit/s and latency one way, the switch
// forwarding in Timing.Forward) with queue bytes standing at the
// bottleneck: the time from the queue being q to the senders' rate
// change acting on it again, along the loop the frames take.
//
//	marked at enqueue → waits q·8/C behind the queue → its own line time
//	→ latency to the sink → the NP's CNP: its line time → latency to the
//	switch → Forward → the CNP's line time → latency to the sender → the
//	RP's cut: the next data frame's line time → latency → Forward → the
//	bottleneck queue.
//
// That is q·8/C + 3·latency + 2·Forward + 2 data frames' and 2 CNPs' line
// times. At 40 Gb/s and 1 µs it is 3.98 µs plus the queue's delay (the
// model keeps τ* fixed: DCQCNFluid solves for the queue it implies).
func DCQCNFeedbackDelay(rate float64, latency time.Duration, queueBytes float64) time.Duration {
	line := func(bytes float64) float64 { return bytes * 8 / rate }
	fwd := switching.DefaultTiming.Forward.Seconds()
	s := line(queueBytes) + 3*latency.Seconds() + 2*fwd + 2*line(dcqcnWireFrame) + 2*line(dcqcnCNPWire)
	return time.Duration(math.Round(s * 1e9))
}

// DCQCNFluidPoint is the fluid model's steady state for one incast.
type DCQCNFluidPoint struct {
	N          int     `json:"n"`
	DelayNS    int64   `json:"feedback_delay_ns"`
	QueueBytes float64 `json:"queue_bytes"` // mean, in captured bytes (the switch's count)
	QueueMin   float64 `json:"queue_min_bytes"`
	QueueMax   float64 `json:"queue_max_bytes"`
	RateBps    float64 `json:"rate_bps"` // per flow, on the line
}

// DCQCNFluid is the §5 fluid model (emu/nic/dcqcn/fluid) for n flows at
// the emulated incast's parameters: DCQCN's DefaultParams at the link
// rate, the RED profile, packets of the traffic job's line size, and τ*
// from DCQCNFeedbackDelay with the queue the model itself settles to
// (three fixed-point rounds from an empty queue; the queue's delay is
// part of the loop the emulator closes). The RED thresholds are in the
// switch's captured bytes, the model's queue in line bytes: both are
// converted.
func DCQCNFluid(n int, rate float64, latency time.Duration, red fabric.RED) (DCQCNFluidPoint, error) {
	if !red.On() {
		return DCQCNFluidPoint{}, errors.New("congestion: the fluid model needs RED marking")
	}
	toLine := float64(dcqcnWireFrame) / dcqcnFrame
	fr := fluid.RED{Kmin: float64(red.Kmin) * toLine, Kmax: float64(red.Kmax) * toLine, Pmax: red.Pmax}
	var res fluid.Result
	q := 0.0
	var delay time.Duration
	for range 3 {
		delay = DCQCNFeedbackDelay(rate, latency, q)
		var err error
		res, err = fluid.Run(fluid.Config{N: n, C: rate, Params: dcqcn.DefaultParams(rate), RED: fr, Delay: delay, PacketBytes: dcqcnWireFrame})
		if err != nil {
			return DCQCNFluidPoint{}, err
		}
		q = res.QueueMean
	}
	return DCQCNFluidPoint{N: n, DelayNS: int64(delay), QueueBytes: res.QueueMean / toLine,
		QueueMin: res.QueueMin / toLine, QueueMax: res.QueueMax / toLine, RateBps: res.RateMean}, nil
}

// DCQCNVsFluid is one N:1 incast in packet mode beside the fluid model.
type DCQCNVsFluid struct {
	N int `json:"n"`
	// The steady-state window: from SteadyFrom after the start to the
	// first flow's end.
	FromNS int64 `json:"from_ns"`
	ToNS   int64 `json:"to_ns"`
	// The emulator: the sink's egress queue (captured bytes, sampled every
	// µs) and the senders' DCQCN rate Rc, each averaged over the window
	// (Rc over the flows too), and the flows' goodput and Jain's index.
	QueueBytes  float64 `json:"queue_bytes"`
	RcBps       float64 `json:"rc_bps"`
	GoodputGbps float64 `json:"goodput_gbps"` // all flows together
	Jain        float64 `json:"jain"`
	CNPs        uint64  `json:"cnps"`
	// Fluid is the model's steady state; QueueErr and RateErr the
	// emulator's relative differences from it.
	Fluid    DCQCNFluidPoint `json:"fluid"`
	QueueErr float64         `json:"queue_err"`
	RateErr  float64         `json:"rate_err"`
}

// DCQCNCompare runs c (its Senders flows, DCQCN on) and the fluid model at
// its parameters, and compares them over [steadyFrom, the first flow's
// end).
func DCQCNCompare(c DCQCNIncast, steadyFrom time.Duration) (DCQCNVsFluid, error) {
	c.DCQCN = true
	fl, err := DCQCNFluid(c.Senders, c.Rate, c.Latency, c.RED)
	if err != nil {
		return DCQCNVsFluid{}, err
	}
	r, err := c.Run()
	if err != nil {
		return DCQCNVsFluid{}, err
	}
	j := r.Result.Jobs[0]
	start := time.Duration(j.StartNS)
	end := time.Duration(math.MaxInt64)
	for _, f := range j.Flows {
		end = min(end, time.Duration(f.StartNS+f.FCTNS))
	}
	from := start + steadyFrom
	if end <= from {
		return DCQCNVsFluid{}, errors.New("congestion: the flows ended before the steady-state window")
	}
	out := DCQCNVsFluid{N: c.Senders, FromNS: int64(from), ToNS: int64(end), Fluid: fl}
	qs := r.Queue.Window(from, end)
	for _, b := range qs {
		out.QueueBytes += float64(b)
	}
	out.QueueBytes /= float64(len(qs))
	// The rate samples are taken with the queue's, index for index.
	lo := int((from - r.Queue.Start + r.Queue.Every - 1) / r.Queue.Every)
	hi := lo + len(qs)
	k := 0
	for _, rc := range r.Rc {
		for _, x := range rc[lo:min(hi, len(rc))] {
			out.RcBps += x
			k++
		}
	}
	out.RcBps /= float64(k)
	rates := collective.WindowRates(j.Flows, start, from, end)
	for _, x := range rates {
		out.GoodputGbps += x / 1e9
	}
	out.Jain = collective.JainIndex(rates)
	if j.DCQCN != nil {
		out.CNPs = j.DCQCN.CNPSent
	}
	out.QueueErr = (out.QueueBytes - fl.QueueBytes) / fl.QueueBytes
	out.RateErr = (out.RcBps - fl.RateBps) / fl.RateBps
	return out, nil
}
