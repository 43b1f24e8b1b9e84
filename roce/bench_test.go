package roce_test

import (
	"hash/crc32"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/internal/benchratio"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// pipe joins two QPs with no link model: every frame one sends is parsed
// and handed to the other at once. It allocates nothing per frame.
type pipe struct {
	a, b *roce.QP
	buf  []byte
	v    frames.View
}

// pump moves frames both ways until neither QP has one; it returns the
// number moved.
func (p *pipe) pump() int {
	moved := 0
	for {
		n := 0
		for _, d := range [2][2]*roce.QP{{p.a, p.b}, {p.b, p.a}} {
			for {
				m, ok := d[0].NextFrame(p.buf)
				if !ok {
					break
				}
				if p.v.Parse(p.buf[:m]) == nil {
					d[1].Receive(&p.v)
				}
				n++
			}
		}
		if n == 0 {
			return moved
		}
		moved += n
	}
}

func newPipe(tb testing.TB, mtu int, mem []byte) (*pipe, *roce.CQ) {
	clock := vclock.New()
	cqA := roce.NewCQ(16)
	pdB := roce.NewPD()
	require.NoError(tb, pdB.Register(&roce.MR{Addr: memVA, Buf: mem, RKey: memKey, Access: roce.AccessRemoteWrite | roce.AccessRemoteRead | roce.AccessRemoteAtomic}))
	a := roce.NewQP(qpnA, clock, roce.NewPD(), cqA, roce.NewCQ(16))
	b := roce.NewQP(qpnB, clock, pdB, roce.NewCQ(16), roce.NewCQ(16))
	cfg := roce.Config{MTU: mtu, SQPSN: 1, RQPSN: 1, Timeout: 14, RetryCnt: 7, RNRRetry: 7}
	require.NoError(tb, a.Connect(frames.Path{Transport: frames.V2IPv4, SrcMAC: macA, DstMAC: macB, SrcIP: ipA, DstIP: ipB, DestQP: qpnB}, cfg))
	require.NoError(tb, b.Connect(frames.Path{Transport: frames.V2IPv4, SrcMAC: macB, DstMAC: macA, SrcIP: ipB, DstIP: ipA, DestQP: qpnA}, cfg))
	return &pipe{a: a, b: b, buf: make([]byte, mtu+256)}, cqA
}

// BenchmarkQPWrite1MiB streams 1 MiB RDMA WRITEs at MTU 1024 between two
// QPs in process (segmentation, frame build with ICRC, parse, ICRC check,
// responder checks, memory write, ACKs, completion). Beside it, in the same
// run, the raw limit: copying the same bytes through a frame-sized buffer
// with a CRC-32 per MTU, the least work any emulator of this traffic does.
// "emu-Gbps" is emulated payload throughput on one core; "ratio" is emu/raw,
// the median of interleaved round pairs.
func BenchmarkQPWrite1MiB(b *testing.B) {
	const size, mtu = 1 << 20, 1024
	src := pattern(size, 9)
	dst := make([]byte, size)
	p, cq := newPipe(b, mtu, dst)
	wr := roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: src, RemoteVA: memVA, RKey: memKey, Signaled: true}
	var comp [1]roce.Completion
	one := func() {
		if err := p.a.PostSend(wr); err != nil {
			b.Fatal(err)
		}
		p.pump()
		if cq.Poll(comp[:]) != 1 || comp[0].Status != roce.StatusSuccess {
			b.Fatalf("no successful completion: %v", comp[0])
		}
	}
	one() // warm up: timers and rings exist
	frame := make([]byte, mtu+64)
	var sink uint32
	raw := func() {
		for off := 0; off < size; off += mtu {
			copy(frame[58:], src[off:off+mtu])
			sink += crc32.ChecksumIEEE(frame[14 : 58+mtu])
			copy(dst[off:], frame[58:58+mtu])
		}
	}
	b.SetBytes(size)
	b.ReportAllocs()
	// Each iteration is a round pair, the first alternating; the ratio is
	// the median of the pairs'.
	var rounds benchratio.Rounds
	timed := func(f func()) time.Duration {
		t0 := time.Now()
		f()
		return time.Since(t0)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rounds.Pair(i, func() time.Duration { return timed(one) }, func() time.Duration { return timed(raw) })
	}
	b.StopTimer()
	gbps := func(d time.Duration) float64 { return float64(b.N) * size * 8 / float64(d.Nanoseconds()) }
	b.ReportMetric(gbps(rounds.Ours()), "emu-Gbps")
	b.ReportMetric(gbps(rounds.Raw()), "raw-Gbps")
	b.ReportMetric(rounds.Ratio(), "ratio")
	_ = sink
}

// TestQPStreamAllocatesNothing pins the zero-allocation steady state of
// the whole QP data path (build, parse, verify, execute, ACK, complete).
func TestQPStreamAllocatesNothing(t *testing.T) {
	src := pattern(64*1024, 3)
	dst := make([]byte, len(src))
	p, cq := newPipe(t, 1024, dst)
	wr := roce.SendWR{ID: 1, Opcode: roce.WRWrite, Local: src, RemoteVA: memVA, RKey: memKey, Signaled: true}
	var comp [1]roce.Completion
	run := func() {
		require.NoError(t, p.a.PostSend(wr))
		p.pump()
		require.Equal(t, 1, cq.Poll(comp[:]))
	}
	run()
	require.Zero(t, testing.AllocsPerRun(20, run))
	require.Equal(t, src, dst)
}
