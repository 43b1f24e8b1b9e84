package emu

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/fabric"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/roce"
)

// Fidelity: with the switch aggregating, every byte crosses each link once
// each way; Ring-AllReduce sends 2(n-1)/n of the tensor over every link.
// On equal links the ratio of their times must approach 2(n-1)/n, the
// AllReduce-Switch paper's Table VIII (1.75 for 8 workers on 10GE).
func TestFidelityRingOverNetReduce(t *testing.T) {
	if testing.Short() {
		t.Skip("fidelity runs take a few seconds; skipped with -short")
	}
	for _, rate := range []float64{10e9, 100e9} {
		for n := 2; n <= 8; n++ {
			t.Run(fmt.Sprintf("rate=%s,workers=%d", units.FormatRate(rate), n), func(t *testing.T) {
				t.Parallel()
				fidelityRingOverNetReduce(t, rate, n)
			})
		}
	}
}

func fidelityRingOverNetReduce(t *testing.T, rate float64, n int) {
	cfg := DefaultConfig()
	cfg.Link.Rate = rate
	cfg.Workers = n
	cfg.TensorBytes = 4 << 20
	cfg.MsgLen = 32 // 32 KiB messages: several per ring chunk, so the ring pipelines
	if rate > 10e9 {
		// The papers' settings (window 2, 170-packet messages) fill a 100G
		// pipe; 32-packet messages would not (the window is below the
		// bandwidth-delay product), and a larger tensor keeps several
		// messages per ring chunk.
		cfg.TensorBytes, cfg.MsgLen = 16<<20, 170
	}
	cfg.Seed = 1
	cfg.Mode = NetReduce
	nr, err := Run(cfg)
	require.NoError(t, err)
	require.True(t, nr.Exact)
	cfg.Mode = Ring
	ring, err := Run(cfg)
	require.NoError(t, err)
	require.True(t, ring.Exact)
	want := 2 * float64(n-1) / float64(n)
	got := float64(ring.VirtualNS) / float64(nr.VirtualNS)
	t.Logf("%s, workers %d: ring %v, netreduce %v, ratio %.4f, 2(n-1)/n %.4f, netreduce algbw %.3f Gb/s",
		units.FormatRate(rate), n, time.Duration(ring.VirtualNS), time.Duration(nr.VirtualNS), got, want, nr.AlgBWGbps)
	require.InDelta(t, want, got, 0.03*want, "ring/netreduce time ratio")
}

// Fidelity at 100G: NetReduce Table 6 measures 92.5 Gb/s of throughput for
// 6 workers, window 2, 170-packet messages of 1 KB payloads on 100G links.
// inaemu counts algbw: tensor bytes per worker over the job's virtual time,
// which at full pipeline is the line rate times payload over wire bytes of
// a packet (1024 / 1106 = 92.6 %). It needs the window's 340 packets in
// flight: the rxe profile's 128-PSN limit caps it well below (about 79).
func TestFidelityNetReduce100G(t *testing.T) {
	if testing.Short() {
		t.Skip("fidelity runs take a few seconds; skipped with -short")
	}
	cfg := DefaultConfig()
	cfg.Workers, cfg.Window, cfg.MsgLen, cfg.TensorBytes, cfg.Seed = 6, 2, 170, 16<<20, 1
	cfg.Link.Rate = 100e9
	res, err := Run(cfg)
	require.NoError(t, err)
	require.True(t, res.Exact)
	t.Logf("commodity NIC: algbw %.2f Gb/s (Table 6: 92.5)", res.AlgBWGbps)
	require.InDelta(t, 92.5, res.AlgBWGbps, 0.03*92.5)
	cfg.NIC = roce.RXE
	rxe, err := Run(cfg)
	require.NoError(t, err)
	require.True(t, rxe.Exact)
	t.Logf("rxe NIC (128 PSNs in flight): algbw %.2f Gb/s", rxe.AlgBWGbps)
	require.Less(t, rxe.AlgBWGbps, 0.9*92.5, "rxe's window limit must show")
}

// Fidelity: NetReduce's window. §3.2 sizes it by the bandwidth-delay
// product, N >= RTT × PortRate / (MsgLen × pktSize). The window is counted
// in messages and slides when a whole result message is back, so the RTT
// that matters is a message's: from its first byte leaving the worker to
// its last result byte arriving (the message's own serialization plus one
// packet's trip through the switch and back). Throughput must grow with N
// up to about that N (the model ignores the first and last packets' extra
// headers and the completion handling, so it is good to ±1) and not beyond.
func TestFidelityWindowBDP(t *testing.T) {
	if testing.Short() {
		t.Skip("fidelity runs take a few seconds; skipped with -short")
	}
	for _, tc := range []struct {
		msgLen  int
		latency time.Duration
	}{{4, 5 * time.Microsecond}, {8, 10 * time.Microsecond}, {2, 2 * time.Microsecond}} {
		t.Run(fmt.Sprintf("msglen=%d,latency=%v", tc.msgLen, tc.latency), func(t *testing.T) {
			const rate = 10e9
			// The model, written out independently of the emulator: a full
			// packet is Ethernet 14 + IPv4 20 + UDP 8 + BTH 12 + 1024 B
			// payload + ICRC 4, plus 24 B of preamble, FCS and gap.
			pktWire := float64(14+20+8+12+1024+4+24) * 8 / rate // seconds
			msgTime := float64(tc.msgLen) * pktWire
			rttPkt := 2*(pktWire+tc.latency.Seconds()) + switching.DefaultTiming.AggregateFloat.Seconds()
			rttMsg := msgTime - pktWire + rttPkt // the last packet's serialization is in both
			nStar := int(math.Ceil(rttMsg * rate / (float64(tc.msgLen) * pktWire * rate)))
			tput := map[int]float64{}
			best := 0.0
			for n := 1; n <= nStar+3; n++ {
				cfg := DefaultConfig()
				cfg.Workers, cfg.Window, cfg.MsgLen, cfg.TensorBytes, cfg.Seed = 4, n, tc.msgLen, 1<<20, 1
				cfg.Link = fabric.LinkConfig{Rate: rate, Latency: tc.latency}
				res, err := Run(cfg)
				require.NoError(t, err)
				require.True(t, res.Exact)
				tput[n] = res.AlgBWGbps
				best = max(best, res.AlgBWGbps)
			}
			t.Logf("N* = %d (message RTT %.2f µs); algbw by window: %v", nStar, rttMsg*1e6, tput)
			for n := 2; n < nStar; n++ {
				require.Greater(t, tput[n], tput[n-1]*1.001, "throughput must still grow at N=%d < N*", n)
			}
			for n := 1; n <= nStar-2; n++ {
				require.Less(t, tput[n], 0.97*best, "N=%d is well below N*: throughput must be below the plateau", n)
			}
			for n := nStar; n <= nStar+3; n++ {
				require.InDelta(t, best, tput[n], 0.01*best, "throughput must have stopped growing at N=%d >= N*", n)
			}
		})
	}
}
