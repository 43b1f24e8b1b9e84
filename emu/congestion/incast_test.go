package congestion

import (
	"os"
	"testing"

	"github.com/inaemu/inaemu/emu/switching"
)

// incastFlow is each sender's flow: 4 MiB is more than a flow's window
// (16 WRs of 170 KiB, 2.85 MB), so every sender keeps its whole window
// in the network for most of the run, and 4 senders' windows (11.1 MB)
// overrun the 12 MB buffer's dynamic XOFF (α × free, ≈ 12 MB / 5 per
// ingress port when four ports fill it).
const incastFlow = 4 << 20

// roceGoodputShare is the most of a link's bits that can be RDMA WRITE
// payload at a 1024-byte MTU over RoCEv2/IPv4: each frame also carries
// Ethernet (14), IPv4 (20), UDP (8), BTH (12) and the ICRC (4), and on the
// wire the FCS, preamble and inter-frame gap (4 + 8 + 12); a message's
// first frame adds the RETH (16), once per 170 frames. (IBTA RoCEv2
// Annex A17; IEEE 802.3 clause 4.)
func roceGoodputShare() float64 {
	const payload, perFrame, reth, frames = 1024.0, 14 + 20 + 8 + 12 + 4 + 24, 16.0, 170.0
	return payload / (payload + perFrame + reth/frames)
}

// TestPFCIncastLossless: PFC makes an N:1 incast lossless (C. Guo et al.,
// "RDMA over Commodity Ethernet at Scale", SIGCOMM '16; IEEE 802.1Qbb):
// for every N no frame is dropped, no sender retransmits, every byte
// arrives bit for bit, and the sink's link stays busy: the flows together
// get at least 98% of what the link can carry as payload.
func TestPFCIncastLossless(t *testing.T) {
	for _, n := range []int{2, 4, 8, 16, 32} {
		r, err := Incast(IncastConfig{Senders: n, FlowBytes: incastFlow, PFC: true, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("N=%d: %d pauses, peak ingress %d B, %.2f Gb/s (%.2f%% of 100G) in %v",
			n, r.Pauses, r.PeakIngressBytes, r.GoodputGbps, 100*r.Utilisation, r.Time)
		if !r.Exact || r.Error != "" || r.Drops() != 0 || r.Retransmissions != 0 || r.Timeouts != 0 {
			t.Errorf("N=%d with PFC: exact %v, error %q, drops %d (queue %d, buffer %d, fault %d), %d retransmissions, %d timeouts: want exact and lossless",
				n, r.Exact, r.Error, r.Drops(), r.QueueDrops, r.BufferDrops, r.FaultDrops, r.Retransmissions, r.Timeouts)
		}
		if share := roceGoodputShare(); r.Utilisation > share || r.Utilisation < 0.98*share {
			t.Errorf("N=%d: utilisation %.4f, want within 98%% of the payload share %.4f", n, r.Utilisation, share)
		}
		// An ingress pauses once it holds α × free (α = 1): with n ports
		// filling the pool each stops near B/(n+1). Two windows of 2.85 MB
		// stay under 12 MB/3: the N = 2 incast never pauses; from N = 4
		// the windows outgrow the threshold and the switch pauses.
		window := int64(16 * 170 * 1024)
		if fills := window > switching.DefaultBufferBytes/int64(n+1); fills != (r.Pauses > 0) {
			t.Errorf("N=%d: %d pauses; a window of %d B against XOFF ≈ %d B says pauses: %v", n, r.Pauses, window, switching.DefaultBufferBytes/int64(n+1), fills)
		}
	}
}

// TestIncastWithoutPFCDrops: the same incast without PFC overflows the
// sink's egress queue (1000 frames) and the senders' go-back-N recovers
// every byte, at the price of retransmissions and timeouts.
func TestIncastWithoutPFCDrops(t *testing.T) {
	ns := []int{4}
	if os.Getenv("INAEMU_SCALE") != "" {
		ns = []int{2, 4, 8, 16, 32}
	}
	for _, n := range ns {
		r, err := Incast(IncastConfig{Senders: n, FlowBytes: incastFlow, Seed: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("N=%d: %d queue drops, %d retransmissions, %d NAKs, %d timeouts, %.2f Gb/s in %v",
			n, r.QueueDrops, r.Retransmissions, r.NAKs, r.Timeouts, r.GoodputGbps, r.Time)
		if !r.Exact || r.Drops() == 0 || r.Retransmissions == 0 || r.Pauses != 0 {
			t.Errorf("N=%d without PFC: exact %v (%s), %d drops, %d retransmissions, %d pauses: want drops recovered exactly, no pauses",
				n, r.Exact, r.Error, r.Drops(), r.Retransmissions, r.Pauses)
		}
	}
}
