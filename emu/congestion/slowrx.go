package congestion

import (
	"time"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/emu/collective"
)

// SlowReceiverConfig is a host that cannot drain its NIC as fast as its
// link delivers (PCIe or host memory slower than the wire): Senders hosts
// each write FlowBytes to one sink over links of Rate bit/s, and every
// host drains its NIC's receive buffer (the ConnectX default, 262016 B)
// at DrainRate. With PFC the sink's NIC pauses the switch when its
// buffer crosses XOFF, the paused port's queue fills the switch's buffer
// and, past the switch's XOFF (SwitchXOFF, static; 0: dynamic), the
// switch pauses the senders in turn: the NIC-originated pause storm of
// Guo et al., SIGCOMM '16, §4. Without PFC the sink's NIC drops what
// does not fit and go-back-N recovers.
//
// It is `inaemu run --mode traffic --workers N+1 --link 10G --tensor 4MiB
// --nic-rx-rate 5G [--pfc on --pfc-xoff 100KB] --seed 1`
// (docs/congestion.md, "A slow receiver: NIC pauses").
type SlowReceiverConfig struct {
	Senders    int
	FlowBytes  int64
	Rate       float64 // link, bit/s (0: 10 Gb/s)
	DrainRate  float64 // the hosts' drain, bit/s (0: half of Rate)
	PFC        bool
	SwitchXOFF int64
	Seed       uint64
}

// SlowReceiverResult is what the slow receiver did to the network.
type SlowReceiverResult struct {
	Senders int    `json:"senders"`
	PFC     bool   `json:"pfc"`
	Exact   bool   `json:"exact"`
	Error   string `json:"error,omitempty"`
	// Drops in the network (the switch's queues and buffer, faults); the
	// sink NIC's own drops show as the senders' retransmissions.
	QueueDrops      uint64 `json:"queue_drops"`
	BufferDrops     uint64 `json:"buffer_drops"`
	FaultDrops      uint64 `json:"fault_drops"`
	Retransmissions uint64 `json:"retransmissions"`
	Timeouts        uint64 `json:"timeouts"`
	// NICPauses are the PFC frames the NICs sent (XOFF, refresh, XON);
	// SinkPortPausedNs how long the switch port towards the sink was
	// paused; SwitchPauses the PFC frames the switch sent its senders.
	NICPauses        uint64 `json:"nic_pauses"`
	SinkPortPausedNs int64  `json:"sink_port_paused_ns"`
	SwitchPauses     uint64 `json:"switch_pauses"`
	// Time is the job's first post to its last completion, GoodputGbps
	// the flows' bytes over it.
	Time        time.Duration `json:"time_ns"`
	GoodputGbps float64       `json:"goodput_gbps"`
}

// SlowReceiverConfigFor is the emu.Config of c: a star of Senders+1
// hosts, the last one the sink.
func SlowReceiverConfigFor(c SlowReceiverConfig) emu.Config {
	cfg := emu.DefaultConfig()
	cfg.Mode = collective.Traffic
	cfg.Workers = c.Senders + 1
	cfg.Link.Rate = c.Rate
	if cfg.Link.Rate == 0 {
		cfg.Link.Rate = 10e9
	}
	cfg.NICRxRate = c.DrainRate
	if cfg.NICRxRate == 0 {
		cfg.NICRxRate = cfg.Link.Rate / 2
	}
	cfg.TensorBytes = c.FlowBytes
	cfg.Seed = c.Seed
	cfg.Traffic = &emu.Traffic{Pattern: "incast"}
	if c.PFC {
		cfg.PFC = "on"
		cfg.Buffer.XOFF = c.SwitchXOFF
	}
	return cfg
}

// SlowReceiver runs c. A run whose transport gave up is a result (Exact
// false, Error why); the error is for a configuration the runner refused.
func SlowReceiver(c SlowReceiverConfig) (SlowReceiverResult, error) {
	cfg := SlowReceiverConfigFor(c)
	res, err := runToEnd(cfg)
	if err != nil {
		return SlowReceiverResult{}, err
	}
	r := SlowReceiverResult{Senders: c.Senders, PFC: c.PFC, Exact: res.Exact, Error: res.Error,
		QueueDrops: res.QueueDrops, FaultDrops: res.FaultDrops, BufferDrops: pfcBufferDrops(res.Switch.Buffer),
		Retransmissions: res.Retransmissions, Timeouts: res.Timeouts}
	sink := c.Senders // the star's port of the last host
	for _, p := range res.PFC {
		switch {
		case p.Switch == "":
			r.NICPauses += p.PausesSent
		case p.Port == sink:
			r.SinkPortPausedNs += p.PausedNs
		default:
			r.SwitchPauses += p.PausesSent
		}
	}
	if len(res.Jobs) == 1 && res.Jobs[0].VirtualNS > 0 {
		j := res.Jobs[0]
		r.Time = time.Duration(j.VirtualNS)
		r.GoodputGbps = float64(j.Bytes) * 8 / float64(j.VirtualNS)
	}
	return r, nil
}
