package frames_test

import (
	"hash/crc32"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/benchratio"
)

func benchBuilder(tb testing.TB, tr frames.Transport) *frames.Builder {
	src, dst := "10.0.0.1", "10.0.0.2"
	if tr != frames.V2IPv4 {
		src, dst = "fd00::1", "fd00::2"
	}
	b, err := frames.NewBuilder(frames.Path{Transport: tr, SrcMAC: macA, DstMAC: macB,
		SrcIP: netip.MustParseAddr(src), DstIP: netip.MustParseAddr(dst), SrcPort: frames.UDPSourcePort(0x11), DestQP: 0x12})
	require.NoError(tb, err)
	return b
}

func benchFrame(tb testing.TB, tr frames.Transport, payload int) []byte {
	buf := make([]byte, 9000)
	n, err := benchBuilder(tb, tr).Build(buf, &frames.Packet{Opcode: wire.WriteMiddle, PSN: 7, Payload: seq(payload)})
	require.NoError(tb, err)
	return buf[:n]
}

// TestHotPathsAllocateNothing pins the zero-allocation contract of the
// builder, the view and the ICRC.
func TestHotPathsAllocateNothing(t *testing.T) {
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		b := benchBuilder(t, tr)
		buf := make([]byte, 2048)
		pkt := &frames.Packet{Opcode: wire.WriteOnlyWithImm, PSN: 9, AckReq: true, Imm: 5,
			RETH: frames.RETHFields{VA: 1, RKey: 2, DMALen: 1021}, HasINA: true, Payload: seq(1013)}
		var v frames.View
		allocs := testing.AllocsPerRun(100, func() {
			n, err := b.Build(buf, pkt)
			if err != nil {
				t.Fatal(err)
			}
			if err := v.Parse(buf[:n]); err != nil {
				t.Fatal(err)
			}
			if !v.ICRCOK() || v.INA() == nil {
				t.Fatal("bad frame")
			}
			v.SetICRC()
		})
		require.Zero(t, allocs, "%v: allocations per build+parse+verify", tr)
	}
}

// BenchmarkICRC reports the ICRC throughput beside crc32.ChecksumIEEE over
// the same frame, measured in the same run; ratio = ICRC speed / crc32
// speed (target >= 0.9 for 1 KiB payloads).
func BenchmarkICRC(b *testing.B) {
	for _, c := range []struct {
		name    string
		tr      frames.Transport
		payload int
	}{{"v2-ipv4/1KiB", frames.V2IPv4, 1024}, {"v2-ipv6/1KiB", frames.V2IPv6, 1024}, {"v1/1KiB", frames.V1, 1024},
		{"v2-ipv4/4KiB", frames.V2IPv4, 4096}, {"v2-ipv4/64B", frames.V2IPv4, 64}} {
		b.Run(c.name, func(b *testing.B) {
			frame := benchFrame(b, c.tr, c.payload)
			var v frames.View
			require.NoError(b, v.Parse(frame))
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			var sink uint32
			// Interleave short rounds of each, the first of a pair
			// alternating, so both see the same machine state; the ratio
			// is the median of the rounds'.
			var rounds benchratio.Rounds
			const round = 256
			var n int
			icrc := func() time.Duration {
				t0 := time.Now()
				for i := 0; i < n; i++ {
					sink += v.ICRC()
				}
				return time.Since(t0)
			}
			crc := func() time.Duration {
				t0 := time.Now()
				for i := 0; i < n; i++ {
					sink += crc32.ChecksumIEEE(frame)
				}
				return time.Since(t0)
			}
			b.ResetTimer()
			for done, k := 0, 0; done < b.N; done, k = done+round, k+1 {
				n = min(round, b.N-done)
				rounds.Pair(k, icrc, crc)
			}
			b.StopTimer()
			b.ReportMetric(rounds.Ratio(), "ratio")
			b.ReportMetric(float64(rounds.Ours().Nanoseconds())/float64(b.N), "icrc-ns/op")
			b.ReportMetric(float64(rounds.Raw().Nanoseconds())/float64(b.N), "crc32-ns/op")
			_ = sink
		})
	}
}

// BenchmarkBuild builds one 1 KiB RDMA WRITE MIDDLE frame per op.
func BenchmarkBuild(b *testing.B) {
	for _, tr := range []frames.Transport{frames.V2IPv4, frames.V2IPv6, frames.V1} {
		b.Run(tr.String(), func(b *testing.B) {
			bld := benchBuilder(b, tr)
			buf := make([]byte, 2048)
			pkt := &frames.Packet{Opcode: wire.WriteMiddle, Payload: seq(1024)}
			b.SetBytes(int64(bld.FrameLen(pkt)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				pkt.PSN = uint32(i) & wire.PSNMask
				if _, err := bld.Build(buf, pkt); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkViewParse parses one frame per op; BenchmarkViewParseVerify
// also checks its ICRC.
func BenchmarkViewParse(b *testing.B) {
	frame := benchFrame(b, frames.V2IPv4, 1024)
	var v frames.View
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := v.Parse(frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkViewParseVerify(b *testing.B) {
	frame := benchFrame(b, frames.V2IPv4, 1024)
	var v frames.View
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if err := v.Parse(frame); err != nil || !v.ICRCOK() {
			b.Fatal("bad frame", err)
		}
	}
}
