package collective

import (
	"bytes"
	"fmt"
	"github.com/inaemu/inaemu/emu/job"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/faults"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
)

// verbsJobCfg is a small verbs job: 4 ranks × 32 KiB in 4 KiB messages
// (8 WRs per rank), on 10G links, with netem loss, duplication,
// reordering and corruption on every link.
func verbsJobCfg(verb job.Verb, seed uint64) job.Config {
	cfg := job.DefaultConfig()
	cfg.Workers, cfg.Mode, cfg.Verb, cfg.TensorBytes, cfg.MsgLen, cfg.MTU, cfg.Seed = 4, Verbs, verb, 32<<10, 4, 1024, seed
	cfg.Timeout = 8 // ≈1 ms: losses of a last frame are repaired quickly in virtual time
	n, err := faults.ParseNetem("loss 2% duplicate 2% reorder 5% corrupt 1%")
	if err != nil {
		panic(err)
	}
	cfg.Netem = n
	return cfg
}

// opcodesIn counts the RoCE opcodes of a pcapng capture.
func opcodesIn(t *testing.T, capture []byte) map[wire.Opcode]int {
	t.Helper()
	rd, err := pcapio.NewReader("capture", bytes.NewReader(capture))
	require.NoError(t, err)
	ops := map[wire.Opcode]int{}
	for {
		rec, err := rd.Next()
		if err != nil {
			break
		}
		var v frames.View
		if v.Parse(rec.Data) == nil {
			ops[v.Opcode()]++
		}
	}
	return ops
}

// TestVerbsJobs: each verb, under loss, duplication, reordering and
// corruption, ends exact (every WRITE and READ bit for bit, every atomic
// returning its serial-order value, the words at the sum or the chain's
// end); the capture carries the verb's request and response opcodes and
// no other data opcode; the same seed gives the same capture byte for
// byte.
func TestVerbsJobs(t *testing.T) {
	want := map[job.Verb][]wire.Opcode{
		job.VerbWrite:    {wire.WriteFirst, wire.WriteMiddle, wire.WriteLast, wire.Acknowledge},
		job.VerbRead:     {wire.ReadRequest, wire.ReadResponseFirst, wire.ReadResponseMiddle, wire.ReadResponseLast},
		job.VerbFetchAdd: {wire.FetchAdd, wire.AtomicAcknowledge},
		job.VerbCmpSwap:  {wire.CompareSwap, wire.AtomicAcknowledge},
	}
	for _, verb := range job.AllVerbs {
		t.Run(string(verb), func(t *testing.T) {
			var caps [2]bytes.Buffer
			var res [2]*job.Result
			for i := range caps {
				cfg := verbsJobCfg(verb, 3)
				cfg.Capture = &caps[i]
				res[i] = runOK(t, cfg)
			}
			assert.Equal(t, caps[0].Bytes(), caps[1].Bytes(), "same seed, same capture")
			r := res[0]
			assert.NotZero(t, r.Faults.Lost+r.Faults.Duplicated+r.Faults.Corrupted, "faults were injected: %+v", r.Faults)
			assert.NotZero(t, r.Retransmissions, "and repaired")
			ops := opcodesIn(t, caps[0].Bytes())
			for _, op := range want[verb] {
				assert.NotZero(t, ops[op], "%s in the capture", op)
			}
			for op := range ops {
				if op.IsAck() || op == wire.Acknowledge {
					continue
				}
				assert.Contains(t, want[verb], op, "a %s job sent %s", verb, op)
			}
		})
	}
}

// TestVerbsJobsCatchWrongDelivery: a transport that delivers one wrong
// bit (a WRITE's or READ's byte, an atomic's original value) makes the
// job WRONG, naming the rank.
func TestVerbsJobsCatchWrongDelivery(t *testing.T) {
	for _, verb := range job.AllVerbs {
		t.Run(string(verb), func(t *testing.T) {
			verbsTamper = func(rank, m int, landed []byte) {
				if rank == 2 && m == 5 {
					landed[len(landed)-1] ^= 0x10
				}
			}
			defer func() { verbsTamper = nil }()
			cfg := verbsJobCfg(verb, 3)
			res, err := job.Run(cfg)
			require.NoError(t, err)
			require.False(t, res.Exact)
			require.NotNil(t, res.Mismatch)
			wantRank := 2
			if verb == job.VerbWrite {
				wantRank = 3 // the region written is rank 3's
			}
			assert.Equal(t, wantRank, res.Mismatch.Rank, "%+v", res.Mismatch)
		})
	}
}

// TestVerbsBadConfig: a verb that does not exist is refused in one line.
func TestVerbsBadConfig(t *testing.T) {
	_, err := job.ParseVerb("send")
	require.EqualError(t, err, `"send": want write, read, fetch-add, cmp-swap`)
	cfg := verbsJobCfg("swap", 1)
	_, err = job.Run(cfg)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "\n")
	var ce *job.ConfigError
	assert.ErrorAs(t, err, &ce, fmt.Sprintf("%T", err))
	cfg = job.DefaultConfig()
	cfg.Verb = job.VerbRead
	require.EqualError(t, cfg.Validate(), "--verb read: only --mode verbs takes a verb (this run is netreduce)")
	cfg.Mode = Verbs
	require.NoError(t, cfg.Validate())
}

// TestVerbsEventLoopAllocatesNothing: once warm, a verbs job's event loop
// (links, switch, NICs, QPs executing READs and atomics, the job posting
// and checking) allocates nothing, for every verb.
func TestVerbsEventLoopAllocatesNothing(t *testing.T) {
	for _, verb := range job.AllVerbs {
		cfg := job.DefaultConfig()
		cfg.Mode, cfg.Verb, cfg.Workers, cfg.TensorBytes, cfg.MsgLen = Verbs, verb, 4, 16<<20, 4
		if verb.Atomic() {
			cfg.TensorBytes = 256 << 20 // 64Ki atomics per rank: the loop stays busy
		}
		r := startJob(t, cfg)
		for i := 0; i < 20000; i++ {
			require.True(t, r.Fab.Clock.Step())
		}
		allocs := testing.AllocsPerRun(5, func() {
			for i := 0; i < 2000; i++ {
				r.Fab.Clock.Step()
			}
		})
		require.NoError(t, r.Err())
		t.Logf("%v: %.1f allocations per 2000 events", verb, allocs)
		require.Zero(t, allocs, "%v: the warm event loop allocated", verb)
	}
}
