package roce_test

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/pcapio"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/internal/testvec"
	"github.com/inaemu/inaemu/roce"
)

// Held vectors from an independent implementation: the READ and atomic
// frames of testdata/vectors/read_atomic_v2_ipv4.pcap were built by scapy
// (testdata/vectors/gen_read_atomic.py, ICRC by scapy's
// BTH.compute_icrc) from header values that script writes out; the
// transport, doing the same work, must emit them byte for byte.

const readAtomicVectors = "read_atomic_v2_ipv4.pcap"

// readAtomicScenario runs what gen_read_atomic.py describes: A reads 600
// bytes (PSNs 0xFFFFFE..0, wrapping), reads 5, fetch-adds, compare-and-
// swaps, reads 0 bytes from B, at MTU 256.
func readAtomicScenario(t *testing.T) (*harness, [][]byte) {
	cfgA, cfgB := defaultCfg(), defaultCfg()
	cfgA.SQPSN, cfgA.RQPSN = 0xFFFFFE, 0x500
	cfgB.SQPSN, cfgB.RQPSN = 0x500, 0xFFFFFE
	h := newHarness(t, cfgA, cfgB, 1<<12)
	for i := range h.hosts[1].mem {
		h.hosts[1].mem[i] = byte(7*i + 3)
	}
	binary.LittleEndian.PutUint64(h.hosts[1].mem[0x800:], 0x1122334455667788)
	binary.LittleEndian.PutUint64(h.hosts[1].mem[0x808:], 0x0A0B0C0D0E0F1011)
	r1 := postRead(t, h, 1, 0x100, 600)
	r2 := postRead(t, h, 2, 0x400, 5)
	fa := postAtomic(t, h, 3, roce.WRFetchAdd, 0x800, 0x0123456789ABCDEF, 0)
	cs := postAtomic(t, h, 4, roce.WRCompSwap, 0x808, 0xCAFEF00DDEADBEEF, 0x0A0B0C0D0E0F1011)
	postRead(t, h, 5, 0, 0)
	h.run(time.Second)
	require.Len(t, poll(h.hosts[0].cq), 5)
	return h, [][]byte{r1, r2, fa, cs}
}

// TestTransportMatchesScapyReadAtomicVectors: A's requests are the file's
// frames 0-4 and B's responses its frames 5-11, byte for byte (Ethernet,
// IPv4 with its identification and checksum, UDP, BTH, RETH, AtomicETH,
// AETH, AtomicAckETH, payload, pad and ICRC); the data A got is B's.
func TestTransportMatchesScapyReadAtomicVectors(t *testing.T) {
	recs, err := pcapio.ReadAll(filepath.Join(testvec.Dir(), readAtomicVectors))
	require.NoError(t, err)
	require.Len(t, recs, 12)
	h, got := readAtomicScenario(t)
	for dir, want := range [2][]pcapio.Record{recs[:5], recs[5:]} {
		sent := h.frames(dir, func(wireEvent) bool { return true })
		require.Len(t, sent, len(want), "direction %d", dir)
		for i, e := range sent {
			assert.Equal(t, want[i].Data, e.frame, "direction %d frame %d (%s psn %#x) differs from scapy's", dir, i, e.op, e.psn)
		}
	}
	mem := h.hosts[1].mem
	want600 := make([]byte, 600)
	for i := range want600 {
		want600[i] = byte(7*(0x100+i) + 3)
	}
	assert.Equal(t, want600, got[0])
	assert.Equal(t, mem[0x400:0x405], got[1])
	assert.Equal(t, uint64(0x1122334455667788), le64(got[2]))
	assert.Equal(t, uint64(0x0A0B0C0D0E0F1011), le64(got[3]))
	assert.Equal(t, uint64(0x1122334455667788+0x0123456789ABCDEF), le64(mem[0x800:]))
	assert.Equal(t, uint64(0xCAFEF00DDEADBEEF), le64(mem[0x808:]))
}

// TestScapyReadAtomicVectorsRegenerate: the checked-in file is what
// scapy makes of gen_read_atomic.py today, byte for byte.
func TestScapyReadAtomicVectorsRegenerate(t *testing.T) {
	testtool.Need(t, "scapy", testtool.HaveScapy)
	out := filepath.Join(t.TempDir(), readAtomicVectors)
	_, stderr, err := testtool.Run(t, testtool.SystemPython, filepath.Join(testvec.Dir(), "gen_read_atomic.py"), out)
	require.NoError(t, err, stderr)
	fresh, err := os.ReadFile(out)
	require.NoError(t, err)
	held, err := os.ReadFile(filepath.Join(testvec.Dir(), readAtomicVectors))
	require.NoError(t, err)
	assert.Equal(t, held, fresh)
}

// TestTsharkDecodesReadAtomic: TShark's InfiniBand dissector reads the
// transport's READ and atomic frames with the opcode names, PSNs, RETH,
// AtomicETH, AETH and AtomicAckETH values written here (the names as
// tshark 4.0 shows them).
func TestTsharkDecodesReadAtomic(t *testing.T) {
	testtool.Need(t, "tshark", testtool.HaveTshark)
	h, _ := readAtomicScenario(t)
	fn := filepath.Join(t.TempDir(), "ra.pcapng")
	require.NoError(t, os.WriteFile(fn, writeCapture(t, h), 0o644))
	out, stderr, err := testtool.Run(t, "tshark", "-r", fn, "-n", "-T", "fields", "-E", "separator=|",
		"-e", "infiniband.bth.opcode", "-e", "infiniband.bth.psn", "-e", "infiniband.bth.a",
		"-e", "infiniband.reth.va", "-e", "infiniband.reth.dmalen",
		"-e", "infiniband.atomiceth.swapdt", "-e", "infiniband.atomiceth.cmpdt",
		"-e", "infiniband.aeth.msn", "-e", "infiniband.atomicacketh.origremdt", "-e", "_ws.col.Info")
	require.NoError(t, err, stderr)
	var rows []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		rows = append(rows, strings.TrimSpace(strings.ReplaceAll(l, "QP=0x000022", "")))
	}
	// In send order per direction: the harness logs A's and B's frames
	// as they leave, A's first five requests before B answers.
	var a, b []string
	for i, e := range h.log {
		if e.dir == 0 {
			a = append(a, rows[i])
		} else {
			b = append(b, rows[i])
		}
	}
	// Fields: opcode|PSN|AckReq|VA|DMA length|swap/add|compare|MSN|original|Info.
	// TShark reports an AtomicETH's VA as infiniband.reth.va. The values:
	// 0x0123456789ABCDEF = 81985529216486895, 0xCAFEF00DDEADBEEF =
	// 14627392582107119343, 0x0A0B0C0D0E0F1011 = 723685415333072913,
	// 0x1122334455667788 = 1234605616436508552.
	assert.Equal(t, []string{
		"12|16777214|1|0x0000000000010100|600|||||RC RDMA Read Request",
		"12|1|1|0x0000000000010400|5|||||RC RDMA Read Request",
		"20|2|1|0x0000000000010800||81985529216486895|0|||RC Fetch Add",
		"19|3|1|0x0000000000010808||14627392582107119343|723685415333072913|||RC Compare Swap",
		"12|4|1|0x0000000000010000|0|||||RC RDMA Read Request",
	}, a)
	assert.Equal(t, []string{
		"13|16777214|0|||||1||RC RDMA Read Response First QP=0x000011",
		"14|16777215|0|||||||RC RDMA Read Response Middle QP=0x000011",
		"15|0|0|||||1||RC RDMA Read Response Last QP=0x000011",
		"16|1|0|||||2||RC RDMA Read Response Only QP=0x000011",
		"18|2|0|||||3|1234605616436508552|RC Atomic Acknowledge QP=0x000011",
		"18|3|0|||||4|723685415333072913|RC Atomic Acknowledge QP=0x000011",
		"16|4|0|||||5||RC RDMA Read Response Only QP=0x000011",
	}, b)
}
