package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/testtool"
)

// verbsCaptureOps counts the RoCE opcodes of a capture file, read with
// inaemu's own parser.
func verbsCaptureOps(t *testing.T, fn string) map[wire.Opcode]int {
	t.Helper()
	f, err := os.Open(fn)
	require.NoError(t, err)
	defer f.Close()
	rd, err := pcapio.NewReader(fn, f)
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

// TestRunVerbsWithFaults: `inaemu run --mode verbs --verb V` under loss,
// duplication and reordering ends exact (exit 0), its capture carries the
// verb's opcodes; tshark names them as Wireshark shows them (the names
// written here from tshark 4.0's InfiniBand dissector); and `inaemu
// check` judges its READs and atomics and finds the capture conforming.
func TestRunVerbsWithFaults(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		verb  string
		ops   []wire.Opcode
		names []string
	}{
		{"read", []wire.Opcode{wire.ReadRequest, wire.ReadResponseFirst, wire.ReadResponseMiddle, wire.ReadResponseLast},
			[]string{"RC RDMA Read Request", "RC RDMA Read Response First", "RC RDMA Read Response Middle", "RC RDMA Read Response Last"}},
		{"fetch-add", []wire.Opcode{wire.FetchAdd, wire.AtomicAcknowledge}, []string{"RC Fetch Add", "RC Atomic Acknowledge"}},
		{"cmp-swap", []wire.Opcode{wire.CompareSwap, wire.AtomicAcknowledge}, []string{"RC Compare Swap", "RC Atomic Acknowledge"}},
		{"write", []wire.Opcode{wire.WriteFirst, wire.WriteLast, wire.Acknowledge}, []string{"RC RDMA Write First", "RC Acknowledge"}},
	} {
		t.Run(c.verb, func(t *testing.T) {
			pcap := filepath.Join(dir, c.verb+".pcapng")
			code, out, errOut := runCLI("run", "--mode", "verbs", "--verb", c.verb, "--workers", "3", "--tensor", "32KiB",
				"--msg-len", "4", "--seed", "11", "--loss", "2%", "--duplicate", "1%", "--reorder", "5%", "--timeout", "8", "--pcap", pcap)
			require.Equal(t, 0, code, "stdout %s\nstderr %s", out, errOut)
			assert.Contains(t, out, "inaemu run: verbs "+c.verb+" (rank i to rank i+1)")
			assert.Contains(t, out, "EXACT")
			assert.NotContains(t, out, " 0 lost", "faults were injected")
			ops := verbsCaptureOps(t, pcap)
			for _, op := range c.ops {
				assert.NotZero(t, ops[op], "%s in the capture", op)
			}

			// check judges the READs and atomics (its read-psn, atomic-psn
			// and atomic-replay rules), leaving nothing unchecked.
			code, out, errOut = runCLI("check", pcap, "--json")
			require.Equal(t, 0, code, "check: %s%s", out, errOut)
			rep := decodeJSON(t, out)
			assert.Equal(t, "conforms", rep["verdict"], out)
			assert.Empty(t, rep["unchecked"], out)
			assert.Empty(t, rep["violations"], out)
			judged := map[string]string{"read": "read_requests", "fetch-add": "atomic_requests", "cmp-swap": "atomic_requests"}[c.verb]
			if judged != "" {
				assert.NotZero(t, num(t, rep, judged), "check counted the %s", judged)
			}

			testtool.Need(t, "tshark", testtool.HaveTshark)
			info, stderr, err := testtool.Run(t, "tshark", "-r", pcap, "-n", "-T", "fields", "-e", "_ws.col.Info")
			require.NoError(t, err, stderr)
			for _, name := range c.names {
				assert.Contains(t, info, name+" QP=", "tshark shows %s", name)
			}
			assert.NotContains(t, strings.ToLower(info), "malformed")
		})
	}
}

// TestRunVerbsBadInput: a verb that is none, or a verb without the verbs
// mode, is one line and exit 2.
func TestRunVerbsBadInput(t *testing.T) {
	code, _, errOut := runGuarded("run", "--mode", "verbs", "--verb", "send", "--workers", "2", "--tensor", "4KiB")
	oneLine(t, code, errOut, "inaemu run: ", `"send": want write, read, fetch-add, cmp-swap`)
	code, _, errOut = runGuarded("run", "--verb", "fetch-add", "--workers", "2", "--tensor", "4KiB")
	oneLine(t, code, errOut, "inaemu run: ", "only --mode verbs takes a verb")
}
