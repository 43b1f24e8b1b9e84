package conformance_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// verbsCorrupted is the set of the capture's frames (indexes from 0, as
// Violation.Index) a fault corrupted: those whose comment says corrupt,
// and byte-exact copies of them further on (a switch forwards a frame
// unchanged), as TestCheckEmulatorCaptures collects them.
func verbsCorrupted(t *testing.T, b []byte) map[int]bool {
	t.Helper()
	recs, err := pcapio.NewReader("run.pcapng", bytes.NewReader(b))
	require.NoError(t, err)
	out := map[int]bool{}
	var bad [][]byte
	for i := 0; ; i++ {
		r, err := recs.Next()
		if err != nil {
			break
		}
		if pcapio.IsGhost(r.Comments) {
			continue
		}
		said := false
		for _, c := range r.Comments {
			said = said || strings.Contains(c, "corrupt")
		}
		if said {
			out[i] = true
			bad = append(bad, bytes.Clone(r.Data))
			continue
		}
		for _, c := range bad {
			if bytes.Equal(c, r.Data) {
				out[i] = true
				break
			}
		}
	}
	return out
}

// TestCheckVerbsCorruptedFrames: the bad ICRCs the faults made are
// found by verbsCorrupted and are no violations, while a bit flipped in
// the ICRC of a frame no fault touched (by this test, in the file) is an
// icrc violation that verbsCorrupted does not excuse.
func TestCheckVerbsCorruptedFrames(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Mode, cfg.Verb, cfg.Workers, cfg.MTU, cfg.MsgLen, cfg.TensorBytes, cfg.Seed = emu.Verbs, emu.VerbRead, 3, 256, 4, 64<<10, 7
	ev, err := faults.Parse("corrupt port=1 dir=in class=data nth=3")
	require.NoError(t, err)
	cfg.Events = append(cfg.Events, ev)
	b := ckCapture(t, cfg, "")
	corrupted := verbsCorrupted(t, b)
	require.NotEmpty(t, corrupted)
	rep := ckReport(t, b)
	assert.Empty(t, rep.Violations)
	assert.Positive(t, rep.BadICRC)
	assert.LessOrEqual(t, rep.BadICRC, len(corrupted))

	// Flip the last ICRC bit of the 40th frame, unless a fault touched it
	// (then the next one), where its bytes lie in the file.
	recs, err := pcapio.NewReader("run.pcapng", bytes.NewReader(b))
	require.NoError(t, err)
	var at int
	var data []byte
	for i := 0; ; i++ {
		r, err := recs.Next()
		require.NoError(t, err)
		if i >= 40 && !corrupted[i] && !pcapio.IsGhost(r.Comments) && len(r.Comments) == 0 {
			at, data = i, bytes.Clone(r.Data)
			break
		}
	}
	off := bytes.Index(b, data)
	require.GreaterOrEqual(t, off, 0)
	flipped := bytes.Clone(b)
	flipped[off+len(data)-1] ^= 1
	rep = ckReport(t, flipped)
	require.Len(t, rep.Violations, 1, "%v", rep.Violations)
	assert.Equal(t, "icrc", rep.Violations[0].Rule)
	assert.Equal(t, at, rep.Violations[0].Index)
	assert.False(t, verbsCorrupted(t, flipped)[at], "not a frame a fault corrupted")
}

// TestCheckVerbsCapturesUnderFaults: the capture checker judges the
// emulator's RDMA WRITE, READ, fetch-and-add and compare-and-swap traffic
// under every fault kind without a false violation, and decides all of it.
// The transport's own properties (package roce) prove it right under the
// same faults, so a violation here is the checker's bug, and one that
// would fail a user's CI on correct NIC traffic.
//
// Cases are drawn from a seed (printed): 2 to 4 ranks, messages of 1 to
// 16 packets (long READs; and 4 cases of READs of 128 to 255 packets), MTU 256 to 4096, netem loss, duplication,
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
	// Then 4 READs as long as the job makes them: MsgLen 128..255 (its
	// INA-header bound) at MTU 256, up to 255 PSNs per READ. (Longer ones,
	// 8192 PSNs, are capcheck's readlong_test.go, built frame by frame.)
	const long = 4
	for i := 0; i < cases+long; i++ {
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
		if i >= cases {
			cfg.Verb, cfg.MTU, cfg.MsgLen = emu.VerbRead, 256, 128+rng.IntN(128)
			cfg.TensorBytes = int64(cfg.MTU*cfg.MsgLen) * int64(2+rng.IntN(3))
			cfg.Timeout = []uint8{10, 14}[rng.IntN(2)]
		}
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
			b := ckCapture(t, cfg, netem)
			rep := ckReport(t, b)
			corrupted := verbsCorrupted(t, b)
			var wrong []string
			for _, v := range rep.Violations {
				// A bad ICRC is right only on a frame a fault corrupted
				// (its comment says so) or a byte-exact copy of one.
				if v.Rule != "icrc" || !corrupted[v.Index] {
					wrong = append(wrong, fmt.Sprintf("%s frame %d (%s) qp %#x psn %d: %s", v.Rule, v.Frame, v.Interface, v.QP, v.PSN, v.Detail))
				}
			}
			replay := fmt.Sprintf("inaemu run --mode verbs --verb %s --workers %d --mtu %d --msg-len %d --tensor %d --timeout %d --seed %d --netem '%s'",
				cfg.Verb, cfg.Workers, cfg.MTU, cfg.MsgLen, cfg.TensorBytes, cfg.Timeout, cfg.Seed, netem)
			for _, e := range events {
				replay += fmt.Sprintf(" --fault '%s'", e)
			}
			// A bad ICRC the checker counts lies on a corrupted frame.
			assert.LessOrEqual(t, rep.BadICRC, len(corrupted), "bad ICRCs beyond the frames the faults corrupted")
			assert.Empty(t, wrong, "false violations on correct traffic; replay: %s --pcap c.pcapng && inaemu check c.pcapng", replay)
			assert.Empty(t, rep.Unchecked, "left unchecked: %s", strings.Join(rep.Unchecked, "; "))
		})
	}
}
