package congestion

import (
	"testing"
)

// drainGoodput is the most RDMA WRITE payload a host draining rate bit/s
// of frame bytes can take at a 1024-byte MTU over RoCEv2/IPv4: each frame
// also carries Ethernet (14), IPv4 (20), UDP (8), BTH (12) and the ICRC
// (4) (the FCS, preamble and gap stay in the MAC), and a message's first
// frame the RETH (16), once per 170 frames (IBTA RoCEv2 Annex A17).
func drainGoodput(rate float64) float64 {
	const payload, perFrame, reth, frames = 1024.0, 14 + 20 + 8 + 12 + 4, 16.0, 170.0
	return rate * payload / (payload + perFrame + reth/frames)
}

// TestSlowReceiverPausesSpread: a sink draining 5 Gb/s behind a 10 Gb/s
// link, with PFC, in a 2:1 incast of 4 MiB flows: the sink's NIC pauses
// the switch (IEEE 802.1Qbb; NVIDIA's tx_prio<p>_pause), the switch's
// buffer fills past its 100 KB XOFF and it pauses both senders (the
// storm spreads upstream, Guo et al. SIGCOMM '16 §4), nothing is
// dropped or retransmitted, every byte arrives, and the flows together
// get what the host drains: within 1% under 5 Gb/s's payload share.
func TestSlowReceiverPausesSpread(t *testing.T) {
	r, err := SlowReceiver(SlowReceiverConfig{Senders: 2, FlowBytes: 4 << 20, PFC: true, SwitchXOFF: 100_000, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if !r.Exact || r.Error != "" || r.QueueDrops+r.BufferDrops+r.FaultDrops != 0 || r.Retransmissions != 0 || r.Timeouts != 0 {
		t.Errorf("exact %v, error %q, drops %d/%d/%d, %d retransmissions, %d timeouts: want exact and lossless",
			r.Exact, r.Error, r.QueueDrops, r.BufferDrops, r.FaultDrops, r.Retransmissions, r.Timeouts)
	}
	if r.NICPauses == 0 || r.SinkPortPausedNs == 0 {
		t.Errorf("the sink's NIC sent %d pauses, its switch port paused %d ns: want both", r.NICPauses, r.SinkPortPausedNs)
	}
	if r.SwitchPauses == 0 {
		t.Errorf("the switch paused no sender: the storm did not spread")
	}
	if want := drainGoodput(5e9) / 1e9; r.GoodputGbps > want || r.GoodputGbps < 0.99*want {
		t.Errorf("goodput %.3f Gb/s, want within 1%% under the drain's %.3f Gb/s", r.GoodputGbps, want)
	}
}

// TestSlowReceiverDropsWithoutPFC: without PFC the only place a one-sender
// run can lose frames is the sink's NIC (the link is not oversubscribed:
// no queue or buffer drops); its full buffer drops, go-back-N recovers,
// and every byte still arrives bit for bit.
func TestSlowReceiverDropsWithoutPFC(t *testing.T) {
	r, err := SlowReceiver(SlowReceiverConfig{Senders: 1, FlowBytes: 4 << 20, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", r)
	if !r.Exact || r.Error != "" {
		t.Errorf("exact %v, error %q: want go-back-N to recover exactly", r.Exact, r.Error)
	}
	if r.QueueDrops+r.BufferDrops+r.FaultDrops != 0 || r.NICPauses != 0 {
		t.Errorf("drops %d/%d/%d, %d NIC pauses: want the NIC's own drops only", r.QueueDrops, r.BufferDrops, r.FaultDrops, r.NICPauses)
	}
	if r.Retransmissions == 0 {
		t.Errorf("no retransmissions: the sink's NIC dropped nothing")
	}
	if want := drainGoodput(5e9) / 1e9; r.GoodputGbps > want {
		t.Errorf("goodput %.3f Gb/s above the drain's %.3f Gb/s", r.GoodputGbps, want)
	}
}
