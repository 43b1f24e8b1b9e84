package conformance_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/faults"
)

// TestCheckVerbsCapturesUnderFaults: the capture checker judges the
// emulator's RDMA WRITE, READ, fetch-and-add and compare-and-swap traffic
// under every fault kind without a false violation, and decides all of it.
// The transport's own properties (package roce) prove it right under the
// same faults, so a violation here is the checker's bug, and one that
// would fail a user's CI on correct NIC traffic.
//
// Cases are drawn from a seed (printed): 2 to 4 ranks, messages of 1 to
// 16 packets (long READs), MTU 256 to 4096, netem loss, duplication,
// reordering and corruption at rates up to a few percent, deterministic
// drops of requests, responses and ACKs, and ACK timeouts from 262 µs
// (shorter than a long READ's round trip under loss: spurious retries) to
// the default. (Shorter timers exhaust the retry budget of a correct
// transport on long READs, which is a failed job, not a capture to judge.)
func TestCheckVerbsCapturesUnderFaults(t *testing.T) {
	const seed = 20261127
	cases := 48
	if testing.Short() {
		cases = 12
	}
	t.Logf("seed %d, %d cases", seed, cases)
	rng := rand.New(rand.NewPCG(seed, 0))
	verbs := []emu.Verb{emu.VerbWrite, emu.VerbRead, emu.VerbFetchAdd, emu.VerbCmpSwap}
	mtus := []int{256, 1024, 4096}
	for i := 0; i < cases; i++ {
		cfg := emu.DefaultConfig()
		cfg.Mode = emu.Verbs
		cfg.Verb = verbs[i%len(verbs)]
		cfg.Workers = 2 + rng.IntN(3)
		cfg.MTU = mtus[rng.IntN(len(mtus))]
		cfg.MsgLen = 1 + rng.IntN(16)
		cfg.TensorBytes = int64(cfg.MTU*cfg.MsgLen) * int64(2+rng.IntN(6))
		if cfg.Verb == emu.VerbFetchAdd || cfg.Verb == emu.VerbCmpSwap {
			cfg.TensorBytes = int64(8 * (64 + rng.IntN(256)))
		}
		cfg.Seed = rng.Uint64()
		cfg.Timeout = []uint8{6, 8, 10, 14}[rng.IntN(4)]
		netem := fmt.Sprintf("loss %.2f%% duplicate %.2f%% corrupt %.2f%% reorder %.2f%% gap 3",
			rng.Float64()*4, rng.Float64()*3, rng.Float64()*1, rng.Float64()*5)
		events := []string{
			fmt.Sprintf("drop port=%d dir=in class=data nth=%d", rng.IntN(cfg.Workers), 1+rng.IntN(20)),
			fmt.Sprintf("drop port=%d dir=out class=any nth=%d", rng.IntN(cfg.Workers), 1+rng.IntN(20)),
			fmt.Sprintf("drop class=ack nth=%d", 1+rng.IntN(10)),
			fmt.Sprintf("dup port=%d dir=in class=data every=%d", rng.IntN(cfg.Workers), 5+rng.IntN(20)),
		}
		name := fmt.Sprintf("%02d-%s-w%d-mtu%d-len%d-t%d", i, cfg.Verb, cfg.Workers, cfg.MTU, cfg.MsgLen, cfg.Timeout)
		t.Run(name, func(t *testing.T) {
			for _, e := range events {
				ev, err := faults.Parse(e)
				require.NoError(t, err)
				cfg.Events = append(cfg.Events, ev)
			}
			rep := ckReport(t, ckCapture(t, cfg, netem))
			var wrong []string
			for _, v := range rep.Violations {
				if v.Rule != "icrc" { // a corrupted frame's ICRC is checked elsewhere
					wrong = append(wrong, fmt.Sprintf("%s frame %d (%s) qp %#x psn %d: %s", v.Rule, v.Frame, v.Interface, v.QP, v.PSN, v.Detail))
				}
			}
			replay := fmt.Sprintf("inaemu run --mode verbs --verb %s --workers %d --mtu %d --msg-len %d --tensor %d --timeout %d --seed %d --netem '%s'",
				cfg.Verb, cfg.Workers, cfg.MTU, cfg.MsgLen, cfg.TensorBytes, cfg.Timeout, cfg.Seed, netem)
			for _, e := range events {
				replay += fmt.Sprintf(" --fault '%s'", e)
			}
			assert.Empty(t, wrong, "false violations on correct traffic; replay: %s --pcap c.pcapng && inaemu check c.pcapng", replay)
			assert.Empty(t, rep.Unchecked, "left unchecked: %s", strings.Join(rep.Unchecked, "; "))
		})
	}
}
