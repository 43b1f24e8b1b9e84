package congestion

import (
	"errors"
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/collective"
	"github.com/inaemu/inaemu/emu/switching"
)

// IncastConfig is an N:1 incast through one switch: Senders hosts each
// write FlowBytes to one sink over links of Rate bit/s, with PFC on the
// priority the flows use (0) or without it. The switch has the default
// shared buffer (switching.DefaultBufferBytes, Trident II's 12 MB).
//
// It is `inaemu run --mode traffic --workers N+1 --link 100G --tensor
// 4MiB --seed 1 [--pfc on]` (docs/congestion.md, "PFC: incast,
// head-of-line blocking and deadlock").
type IncastConfig struct {
	Senders   int
	FlowBytes int64
	Rate      float64 // bit/s (0: 100 Gb/s)
	PFC       bool
	Seed      uint64
}

// IncastResult is what the incast did: whether every flow's bytes arrived
// bit for bit, every drop the network made, how the senders recovered,
// the pauses, and the bottleneck's use.
type IncastResult struct {
	Senders   int   `json:"senders"`
	FlowBytes int64 `json:"flow_bytes"`
	PFC       bool  `json:"pfc"`
	Exact     bool  `json:"exact"`
	// Error is the run's error (a QP that gave up: RETRY_EXC_ERR).
	Error string `json:"error,omitempty"`
	// Drops: egress queues' frame limit, the shared buffer's admission
	// (every reason: egress threshold, headroom, buffer full), faults.
	QueueDrops  uint64 `json:"queue_drops"`
	BufferDrops uint64 `json:"buffer_drops"`
	FaultDrops  uint64 `json:"fault_drops"`
	// The senders' go-back-N recovery.
	Retransmissions uint64 `json:"retransmissions"`
	NAKs            uint64 `json:"naks"`
	Timeouts        uint64 `json:"timeouts"`
	// Pauses are the PFC frames the switch sent (XOFF, refresh and XON);
	// PeakIngressBytes the most one ingress port held.
	Pauses           uint64 `json:"pauses"`
	PeakIngressBytes int64  `json:"peak_ingress_bytes"`
	// Time is the job's first post to its last completion; GoodputGbps
	// the flows' bytes over it, Utilisation that over the sink's link.
	Time        time.Duration `json:"time_ns"`
	GoodputGbps float64       `json:"goodput_gbps"`
	Utilisation float64       `json:"utilisation"`
}

// Drops is every frame the network dropped.
func (r IncastResult) Drops() uint64 { return r.QueueDrops + r.BufferDrops + r.FaultDrops }

// IncastConfigFor is the emu.Config of c: a star of Senders+1 hosts, the
// last one the sink.
func IncastConfigFor(c IncastConfig) emu.Config {
	cfg := emu.DefaultConfig()
	cfg.Mode = collective.Traffic
	cfg.Workers = c.Senders + 1
	cfg.Link.Rate = c.Rate
	if cfg.Link.Rate == 0 {
		cfg.Link.Rate = 100e9
	}
	cfg.TensorBytes = c.FlowBytes
	cfg.Seed = c.Seed
	cfg.Traffic = &emu.Traffic{Pattern: "incast"}
	if c.PFC {
		cfg.PFC = "on"
	}
	return cfg
}

// Incast runs c. A run whose transport gave up (a QP out of retries) is a
// result, not an error: Exact is false and Error says why; the error is
// for a configuration the runner refused.
func Incast(c IncastConfig) (IncastResult, error) {
	cfg := IncastConfigFor(c)
	res, err := runToEnd(cfg)
	if err != nil {
		return IncastResult{}, err
	}
	r := IncastResult{Senders: c.Senders, FlowBytes: c.FlowBytes, PFC: c.PFC, Exact: res.Exact, Error: res.Error,
		QueueDrops: res.QueueDrops, FaultDrops: res.FaultDrops, BufferDrops: pfcBufferDrops(res.Switch.Buffer),
		Retransmissions: res.Retransmissions, NAKs: res.NAKs, Timeouts: res.Timeouts,
		PeakIngressBytes: pfcPeakIngress(res.Switch.Buffer)}
	for _, p := range res.PFC {
		if p.Switch != "" {
			r.Pauses += p.PausesSent
		}
	}
	if len(res.Jobs) == 1 && res.Jobs[0].VirtualNS > 0 {
		j := res.Jobs[0]
		r.Time = time.Duration(j.VirtualNS)
		r.GoodputGbps = float64(j.Bytes) * 8 / float64(j.VirtualNS)
		r.Utilisation = r.GoodputGbps * 1e9 / cfg.Link.Rate
	}
	return r, nil
}

// runToEnd runs cfg; a run whose job failed (a QP out of retries, a PFC
// deadlock) is a result, not an error: its Result says why. The error is
// for a configuration the runner refused.
func runToEnd(cfg emu.Config) (*emu.Result, error) {
	res, err := emu.Run(cfg)
	var je *emu.JobError
	if err != nil && (res == nil || !errors.As(err, &je)) {
		return nil, err
	}
	return res, nil
}

// pfcBufferDrops adds up the shared buffer's drops of every reason.
func pfcBufferDrops(rows []switching.BufferUse) uint64 {
	var n uint64
	for _, b := range rows {
		n += b.DropsEgress + b.DropsHeadroom + b.DropsFull
	}
	return n
}

// pfcPeakIngress is the most one ingress port and priority held.
func pfcPeakIngress(rows []switching.BufferUse) int64 {
	var m int64
	for _, b := range rows {
		m = max(m, b.MaxBytes)
	}
	return m
}
