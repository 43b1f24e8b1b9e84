package netreduce_test

// The accelerator is fed real frames built by frames.Builder: one RoCEv2
// IPv4 connection per rank r (10.0.0.(r+1) -> 10.0.0.(r+2), wrapping), each
// message WRITE_FIRST (RETH + INA header) / WRITE_MIDDLE /
// WRITE_LAST_WITH_IMM. Expected results are built independently: the
// rank-order sum is computed in this file (float32 / int32 additions, and a
// brute-force binary16 rounding), and the expected result frame is the
// input frame rebuilt by the builder with the sum as its payload (same IPv4
// ID, so every header byte matches).

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/f16ref"
	"github.com/inaemu/inaemu/tensor"
)

const destQP = 0x12

// ---- independent element arithmetic ----

var (
	decode16 = f16ref.Decode
	round16  = f16ref.Round
)

// refSum folds the inputs in the order given with the type's arithmetic,
// written independently of package tensor.
func refSum(d tensor.DType, in [][]byte) []byte {
	out := append([]byte(nil), in[0]...)
	for _, b := range in[1:] {
		switch d {
		case tensor.F32:
			for i := 0; i+4 <= len(out); i += 4 {
				s := math.Float32frombits(binary.LittleEndian.Uint32(out[i:])) + math.Float32frombits(binary.LittleEndian.Uint32(b[i:]))
				binary.LittleEndian.PutUint32(out[i:], math.Float32bits(s))
			}
		case tensor.I32:
			for i := 0; i+4 <= len(out); i += 4 {
				s := int32(binary.LittleEndian.Uint32(out[i:])) + int32(binary.LittleEndian.Uint32(b[i:]))
				binary.LittleEndian.PutUint32(out[i:], uint32(s))
			}
		case tensor.F16:
			for i := 0; i+2 <= len(out); i += 2 {
				s := round16(decode16(binary.LittleEndian.Uint16(out[i:])) + decode16(binary.LittleEndian.Uint16(b[i:])))
				binary.LittleEndian.PutUint16(out[i:], s)
			}
		}
	}
	return out
}

// orderSensitive fills n bytes with values whose float sum depends on the
// order of addition: magnitudes spread over many binades, both signs.
func orderSensitive(d tensor.DType, rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	switch d {
	case tensor.F32:
		for i := 0; i+4 <= n; i += 4 {
			v := float32(math.Ldexp(0.5+rng.Float64(), rng.IntN(41)-20))
			if rng.IntN(2) == 0 {
				v = -v
			}
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(v))
		}
	case tensor.I32:
		for i := 0; i+4 <= n; i += 4 {
			binary.LittleEndian.PutUint32(b[i:], rng.Uint32())
		}
	case tensor.F16:
		for i := 0; i+2 <= n; i += 2 {
			h := uint16(rng.IntN(2))<<15 | uint16(3+rng.IntN(22))<<10 | uint16(rng.IntN(1024))
			binary.LittleEndian.PutUint16(b[i:], h)
		}
	}
	return b
}

// ---- the cluster: H workers in a ring, their connections and frames ----

type emitted struct {
	frame []byte
	kind  netreduce.Kind
}

type cluster struct {
	t       testing.TB
	cfg     netreduce.RingConfig
	acc     *netreduce.Accelerator
	b       []*frames.Builder
	psnBase []uint32 // PSN of message 0's first packet, per rank
	view    frames.View
	out     []emitted
	emit    netreduce.Emit
	seed    uint64
	// data overrides the generated gradient of (rank, msg, off) when set.
	data func(rank, m, off, n int) []byte
}

func mac(r int) net.HardwareAddr { return net.HardwareAddr{0x02, 0, 0, 0, 0x10, byte(r + 1)} }

func ip(r int) netip.Addr { return netip.AddrFrom4([4]byte{10, 0, 0, byte(r + 1)}) }

func newCluster(t testing.TB, cfg netreduce.RingConfig) *cluster {
	t.Helper()
	c := &cluster{t: t, cfg: cfg, acc: netreduce.New(), seed: 1}
	require.NoError(t, c.acc.AddRing(cfg))
	c.addBuilders()
	c.emit = func(f []byte, k netreduce.Kind, _ *netreduce.RingConfig) {
		c.out = append(c.out, emitted{append([]byte(nil), f...), k})
	}
	return c
}

func (c *cluster) addBuilders() {
	for r := 0; r < c.cfg.Workers; r++ {
		next := (r + 1) % c.cfg.Workers
		b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mac(r), DstMAC: mac(next),
			SrcIP: ip(r), DstIP: ip(next), SrcPort: frames.UDPSourcePort(0x11 + uint32(r)), DestQP: destQP})
		require.NoError(c.t, err)
		c.b = append(c.b, b)
		// Rank 0 starts just below the PSN wrap, the others elsewhere.
		c.psnBase = append(c.psnBase, (wire.PSNMask-2+uint32(r)*0x31337)&wire.PSNMask)
	}
}

func (c *cluster) L() int { return c.cfg.MsgLen }

// dataLen is the gradient bytes of a packet at offset off (the first
// packet's payload begins with the 8-byte INA header).
func (c *cluster) dataLen(off int) int {
	if off == 0 {
		return c.cfg.MTU - wire.INALen
	}
	return c.cfg.MTU
}

func (c *cluster) gradient(rank, m, off int) []byte {
	n := c.dataLen(off)
	if c.data != nil {
		return c.data(rank, m, off, n)
	}
	rng := rand.New(rand.NewPCG(c.seed*1000003+uint64(rank), uint64(m)<<16|uint64(off)))
	return orderSensitive(c.cfg.DType, rng, n)
}

func (c *cluster) psn(rank, m, off int) uint32 {
	return wire.PSNAdd(c.psnBase[rank], m*c.L()+off)
}

// packet describes packet off of message m from rank, carrying data.
func (c *cluster) packet(rank, m, off int, data []byte) *frames.Packet {
	L := c.L()
	p := &frames.Packet{PSN: c.psn(rank, m, off), Payload: data}
	switch {
	case L == 1:
		p.Opcode = wire.WriteOnlyWithImm
	case off == 0:
		p.Opcode = wire.WriteFirst
	case off == L-1:
		p.Opcode = wire.WriteLastWithImm
	default:
		p.Opcode = wire.WriteMiddle
	}
	if off == 0 {
		next := (rank + 1) % c.cfg.Workers
		p.RETH = frames.RETHFields{VA: 0x7f00_0000_0000 + uint64(m*L*c.cfg.MTU), RKey: 0x1000 + uint32(next), DMALen: uint32(L * c.cfg.MTU)}
		p.HasINA = true
		p.INA = frames.INAFields{RingID: c.cfg.ID, MsgID: uint8(m), MsgLen: uint8(L), Rank: uint8(rank)}
	}
	if off == L-1 {
		p.Imm, p.AckReq = uint32(m), true
	}
	return p
}

func (c *cluster) build(rank int, p *frames.Packet, ipID uint16) []byte {
	buf := make([]byte, 9000)
	c.b[rank].SetIPID(ipID)
	n, err := c.b[rank].Build(buf, p)
	require.NoError(c.t, err)
	return buf[:n]
}

func (c *cluster) ipID(m, off int) uint16 { return uint16(m*c.L() + off) }

// frame is rank's packet off of message m as its NIC sends it.
func (c *cluster) frame(rank, m, off int) []byte {
	return c.build(rank, c.packet(rank, m, off, c.gradient(rank, m, off)), c.ipID(m, off))
}

// sum is the rank-order reference sum of (m, off).
func (c *cluster) sum(m, off int) []byte {
	in := make([][]byte, c.cfg.Workers)
	for r := range in {
		in[r] = c.gradient(r, m, off)
	}
	return refSum(c.cfg.DType, in)
}

// result is the frame rank's connection must carry for (m, off): its own
// input frame with the sum as the gradient.
func (c *cluster) result(rank, m, off int) []byte {
	return c.build(rank, c.packet(rank, m, off, c.sum(m, off)), c.ipID(m, off))
}

func (c *cluster) feed(f []byte) netreduce.Verdict {
	c.t.Helper()
	require.NoError(c.t, c.view.Parse(f))
	in := append([]byte(nil), f...)
	v := c.acc.Process(&c.view, srcPort(&c.view), c.emit)
	require.Equal(c.t, in, f, "Process must not modify the ingress frame")
	return v
}

func (c *cluster) send(rank, m, off int) netreduce.Verdict {
	c.t.Helper()
	return c.feed(c.frame(rank, m, off))
}

// sendMsg sends every packet of message m from rank.
func (c *cluster) sendMsg(rank, m int) {
	c.t.Helper()
	for off := 0; off < c.L(); off++ {
		c.send(rank, m, off)
	}
}

func (c *cluster) take() []emitted {
	o := c.out
	c.out = nil
	return o
}

// srcPort is the switch port of the rank that sends from v's source
// address: rank r (address 10.0.0.r+1) sits on port r.
func srcPort(v *frames.View) int {
	a := v.SrcAddr().Unmap().As4()
	return int(a[3]) - 1
}

// feedFrom hands f to the accelerator as if it came in on port.
func (c *cluster) feedFrom(port int, f []byte) netreduce.Verdict {
	c.t.Helper()
	require.NoError(c.t, c.view.Parse(f))
	return c.acc.Process(&c.view, port, c.emit)
}

// rankOf names the connection a frame belongs to by its source address.
func (c *cluster) rankOf(f []byte) int {
	var v frames.View
	require.NoError(c.t, v.Parse(f))
	a := v.SrcAddr().As4()
	return int(a[3]) - 1
}

// checkFrame checks one emitted frame against the expected result of
// rank's connection for (m, off).
func (c *cluster) checkFrame(t testing.TB, got []byte, rank, m, off int) {
	t.Helper()
	want := c.result(rank, m, off)
	ok, err := frames.VerifyICRC(got)
	require.NoError(t, err)
	require.True(t, ok, "rank %d (%d,%d): emitted frame's ICRC does not verify", rank, m, off)
	if !bytes.Equal(want, got) {
		var gv, wv frames.View
		require.NoError(t, gv.Parse(got))
		require.NoError(t, wv.Parse(want))
		require.Equal(t, wv.Payload()[:16], gv.Payload()[:16], "rank %d (%d,%d): payload start", rank, m, off)
		require.Equal(t, want, got, "rank %d (%d,%d): result frame", rank, m, off)
	}
	in := c.frame(rank, m, off)
	require.NotEqual(t, in, got, "the payload changed, so the frame must differ from the input")
	var v frames.View
	require.NoError(t, v.Parse(in))
	hdr := v.PayloadOffset()
	if off == 0 {
		hdr += wire.INALen // the INA header is kept
	}
	require.Equal(t, in[:hdr], got[:hdr], "headers (and INA header) are the input's")
}

// wantResults checks that exactly the H results of (m, off) were emitted,
// one per connection, and consumes them.
func (c *cluster) wantResults(t testing.TB, m, off int) {
	t.Helper()
	out := c.take()
	require.Len(t, out, c.cfg.Workers, "(%d,%d): one result per connection", m, off)
	seen := map[int]bool{}
	for _, e := range out {
		require.Equal(t, netreduce.KindResult, e.kind)
		r := c.rankOf(e.frame)
		require.False(t, seen[r], "two results for rank %d", r)
		seen[r] = true
		c.checkFrame(t, e.frame, r, m, off)
	}
}

func (c *cluster) wantNothing(t testing.TB, what string) {
	t.Helper()
	require.Empty(t, c.take(), what)
}

// wantResend checks one KindResend frame: rank's connection's result.
func (c *cluster) wantResend(t testing.TB, rank, m, off int) {
	t.Helper()
	out := c.take()
	require.Len(t, out, 1, "exactly one resend")
	require.Equal(t, netreduce.KindResend, out[0].kind)
	require.Equal(t, rank, c.rankOf(out[0].frame))
	c.checkFrame(t, out[0].frame, rank, m, off)
}

// lockstep sends messages from..to-1 of every rank, packet by packet, and
// checks each (message, offset)'s results.
func (c *cluster) lockstep(t testing.TB, from, to int) {
	t.Helper()
	for m := from; m < to; m++ {
		for off := 0; off < c.L(); off++ {
			for r := 0; r < c.cfg.Workers; r++ {
				require.Equal(t, netreduce.Aggregated, c.send(r, m, off), "rank %d (%d,%d)", r, m, off)
				if r < c.cfg.Workers-1 {
					c.wantNothing(t, "incomplete")
				}
			}
			c.wantResults(t, m, off)
		}
	}
}

func ringCfg(h, n, l int) netreduce.RingConfig {
	return netreduce.RingConfig{ID: 3, Workers: h, Window: n, MsgLen: l, MTU: 256, DType: tensor.F32}
}

// corrupt flips one bit of a copy of f at offset i.
func corrupt(f []byte, i int) []byte {
	g := append([]byte(nil), f...)
	g[i] ^= 0x10
	return g
}

// ---- tests ----

func TestAddRingValidation(t *testing.T) {
	ok := netreduce.RingConfig{ID: 1, Workers: 4, Window: 2, MsgLen: 4, MTU: 1024, DType: tensor.F32}
	a := netreduce.New()
	require.NoError(t, a.AddRing(ok))
	assert.Error(t, a.AddRing(ok), "duplicate ring ID")
	assert.Equal(t, int64(0), a.Released(1))
	assert.Equal(t, int64(-1), a.Released(2))
	for _, c := range []struct {
		name string
		mod  func(*netreduce.RingConfig)
	}{
		{"workers 1", func(r *netreduce.RingConfig) { r.Workers = 1 }},
		{"workers 0", func(r *netreduce.RingConfig) { r.Workers = 0 }},
		{"workers 65", func(r *netreduce.RingConfig) { r.Workers = 65 }},
		{"window 0", func(r *netreduce.RingConfig) { r.Window = 0 }},
		{"window 33", func(r *netreduce.RingConfig) { r.Window = 33 }},
		{"msg-len 0", func(r *netreduce.RingConfig) { r.MsgLen = 0 }},
		{"msg-len 256", func(r *netreduce.RingConfig) { r.MsgLen = 256 }},
		{"mtu 255", func(r *netreduce.RingConfig) { r.MTU = 255 }},
		{"mtu 4097", func(r *netreduce.RingConfig) { r.MTU = 4097 }},
		{"dtype 3", func(r *netreduce.RingConfig) { r.DType = 3 }},
	} {
		cfg := ok
		cfg.ID = 9
		c.mod(&cfg)
		assert.Error(t, netreduce.New().AddRing(cfg), c.name)
	}
	for _, cfg := range []netreduce.RingConfig{
		{ID: 0, Workers: 2, Window: 1, MsgLen: 1, MTU: 256},
		{ID: 255, Workers: 64, Window: 32, MsgLen: 2, MTU: 4096, DType: tensor.F16, Release: netreduce.Paper},
		{ID: 7, Workers: 3, Window: 1, MsgLen: 255, MTU: 256, DType: tensor.I32},
	} {
		assert.NoError(t, netreduce.New().AddRing(cfg), "%+v", cfg)
	}
	r, err := netreduce.ParseRelease("paper")
	require.NoError(t, err)
	assert.Equal(t, netreduce.Paper, r)
	r, err = netreduce.ParseRelease("safe")
	require.NoError(t, err)
	assert.Equal(t, netreduce.Safe, r)
	_, err = netreduce.ParseRelease("Paper")
	assert.Error(t, err)
	assert.Equal(t, "safe", netreduce.Safe.String())
	assert.Equal(t, "paper", netreduce.Paper.String())
}

// TestResultsOnlyWhenComplete: nothing is emitted until the last rank's
// packet of a (message, offset) arrives; then one result per connection,
// addressed like that connection's input, payload = rank-order sum.
func TestResultsOnlyWhenComplete(t *testing.T) {
	c := newCluster(t, ringCfg(4, 2, 3))
	H, L := 4, 3
	// Every rank but the last sends the whole message: nothing completes.
	for r := 0; r < H-1; r++ {
		for off := 0; off < L; off++ {
			require.Equal(t, netreduce.Aggregated, c.send(r, 0, off))
		}
	}
	c.wantNothing(t, "three of four ranks")
	// The last rank's packets complete the offsets one by one.
	for off := 0; off < L; off++ {
		require.Equal(t, netreduce.Aggregated, c.send(H-1, 0, off))
		c.wantResults(t, 0, off)
	}
	s := c.acc.Stats()
	assert.Equal(t, uint64(H*L), s.Packets)
	assert.Equal(t, uint64(L), s.Aggregations)
	assert.Equal(t, uint64(H*L), s.ResultPackets)
	assert.Equal(t, uint64(H), s.CLTUpdates)
	assert.Zero(t, s.ResultResends+s.CLTMisses+s.StaleFirsts+s.ICRCDrops+s.FirstLostDrops+s.StaleForwards+s.WindowDrops+s.BadDrops)

	// The result of connection r goes to r's successor: check addressing
	// explicitly, beyond the byte comparison.
	c.send(0, 1, 0)
	c.send(1, 1, 0)
	c.send(2, 1, 0)
	c.send(3, 1, 0)
	for _, e := range c.out {
		var v frames.View
		require.NoError(t, v.Parse(e.frame))
		r := c.rankOf(e.frame)
		assert.Equal(t, []byte(mac((r+1)%H)), v.DstMAC())
		assert.Equal(t, []byte(mac(r)), v.SrcMAC())
		assert.Equal(t, ip((r+1)%H), v.DstAddr())
		assert.Equal(t, uint32(destQP), v.DestQP())
		assert.Equal(t, c.psn(r, 1, 0), v.PSN())
		ina := v.INA()
		require.NotNil(t, ina)
		assert.Equal(t, uint8(r), ina.Rank())
		assert.Equal(t, uint8(1), ina.MsgID())
	}
	c.wantResults(t, 1, 0)
}

// TestSumIsRankOrderNotArrivalOrder shows the data makes addition order
// matter, then that reversing the arrival order does not change the bytes.
func TestSumIsRankOrderNotArrivalOrder(t *testing.T) {
	c := newCluster(t, ringCfg(5, 1, 1))
	in := make([][]byte, 5)
	rev := make([][]byte, 5)
	for r := range in {
		in[r] = c.gradient(r, 0, 0)
		rev[4-r] = in[r]
	}
	require.NotEqual(t, refSum(tensor.F32, in), refSum(tensor.F32, rev), "test data must be order-sensitive")
	for r := 4; r >= 0; r-- {
		c.send(r, 0, 0)
	}
	c.wantResults(t, 0, 0)
}

// propParams: fixed seed, overridable by INAEMU_GOPTER_SEED.
func propParams(t *testing.T, seed int64, cases int) *gopter.TestParameters {
	t.Helper()
	if s := os.Getenv("INAEMU_GOPTER_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 0, 64)
		require.NoError(t, err)
		seed = v
	}
	p := gopter.DefaultTestParametersWithSeed(seed)
	p.MinSuccessfulTests = cases
	t.Logf("gopter seed %d, %d cases (replay: INAEMU_GOPTER_SEED=%d go test ./emu/netreduce -run '^%s$')", seed, cases, seed, t.Name())
	return p
}

// TestArrivalOrderProperty: any interleaving of the ranks' packet streams
// (each rank's own packets in order, as one RC connection delivers them)
// gives the same result frames: the rank-order sum, one result per
// connection per (message, offset), emitted exactly when the last rank's
// packet arrives.
func TestArrivalOrderProperty(t *testing.T) {
	params := propParams(t, 20240611, 60)
	props := gopter.NewProperties(params)
	const H, N, L, M = 5, 2, 3, 2
	props.Property("rank-order sum regardless of arrival order", prop.ForAll(
		func(seed uint64, dt int) string {
			cfg := ringCfg(H, N, L)
			cfg.DType = []tensor.DType{tensor.F32, tensor.F16, tensor.I32}[dt]
			c := newCluster(t, cfg)
			c.seed = seed
			rng := rand.New(rand.NewPCG(seed, 99))
			next := make([]int, H) // per rank: packets sent (m*L+off)
			arrived := map[[2]int]int{}
			for left := H * M * L; left > 0; left-- {
				var ready []int
				for r := range next {
					if next[r] < M*L {
						ready = append(ready, r)
					}
				}
				r := ready[rng.IntN(len(ready))]
				m, off := next[r]/L, next[r]%L
				next[r]++
				if v := c.send(r, m, off); v != netreduce.Aggregated {
					return fmt.Sprintf("rank %d (%d,%d): verdict %v", r, m, off, v)
				}
				arrived[[2]int{m, off}]++
				out := c.take()
				if arrived[[2]int{m, off}] < H {
					if len(out) != 0 {
						return fmt.Sprintf("(%d,%d): %d frames emitted after %d ranks", m, off, len(out), arrived[[2]int{m, off}])
					}
					continue
				}
				if len(out) != H {
					return fmt.Sprintf("(%d,%d): %d results, want %d", m, off, len(out), H)
				}
				seen := map[int]bool{}
				for _, e := range out {
					k := c.rankOf(e.frame)
					if seen[k] || e.kind != netreduce.KindResult {
						return fmt.Sprintf("(%d,%d): duplicate or non-result frame for rank %d", m, off, k)
					}
					seen[k] = true
					if want := c.result(k, m, off); !bytes.Equal(want, e.frame) {
						return fmt.Sprintf("(%d,%d) rank %d: result differs from the rank-order sum frame", m, off, k)
					}
				}
			}
			if c.acc.Stats().Aggregations != M*L {
				return fmt.Sprintf("%d aggregations", c.acc.Stats().Aggregations)
			}
			return ""
		},
		gen.UInt64(), gen.IntRange(0, 2),
	))
	props.TestingRun(t, gopter.ConsoleReporter(false))
}

func TestDuplicateBeforeCompletion(t *testing.T) {
	c := newCluster(t, ringCfg(3, 2, 2))
	for off := 0; off < 2; off++ {
		require.Equal(t, netreduce.Aggregated, c.send(0, 0, off))
		require.Equal(t, netreduce.Aggregated, c.send(1, 0, off))
		// A retransmission of rank 0's packet (a new frame: another IPv4 ID).
		dup := c.build(0, c.packet(0, 0, off, c.gradient(0, 0, off)), 0xBEEF)
		require.Equal(t, netreduce.Aggregated, c.feed(dup))
		require.Equal(t, netreduce.Aggregated, c.send(1, 0, off))
		c.wantNothing(t, "duplicates do not complete an aggregator")
	}
	// The duplicate replaced rank 0's frame: the result goes out in the
	// duplicate's frame (IPv4 ID 0xBEEF), otherwise as the reference.
	for off := 0; off < 2; off++ {
		require.Equal(t, netreduce.Aggregated, c.send(2, 0, off))
		out := c.take()
		require.Len(t, out, 3)
		for _, e := range out {
			r := c.rankOf(e.frame)
			if r == 0 {
				want := c.build(0, c.packet(0, 0, off, c.sum(0, off)), 0xBEEF)
				require.Equal(t, want, e.frame)
				continue
			}
			c.checkFrame(t, e.frame, r, 0, off)
		}
	}
	assert.Equal(t, uint64(2), c.acc.Stats().Aggregations)
	assert.Equal(t, uint64(2), c.acc.Stats().StaleFirsts, "the two duplicate first packets")
	assert.Zero(t, c.acc.Stats().ResultResends)
}

func TestDuplicateAfterCompletionResends(t *testing.T) {
	c := newCluster(t, ringCfg(3, 2, 3))
	c.lockstep(t, 0, 1)
	for _, x := range []struct{ rank, off int }{{1, 1}, {2, 0}, {0, 2}, {1, 1}} {
		require.Equal(t, netreduce.Resent, c.send(x.rank, 0, x.off))
		c.wantResend(t, x.rank, 0, x.off)
	}
	assert.Equal(t, uint64(4), c.acc.Stats().ResultResends)
	assert.Equal(t, uint64(3), c.acc.Stats().Aggregations, "a resend aggregates nothing")
	assert.Equal(t, uint64(9), c.acc.Stats().ResultPackets)
}

func TestBadICRCDropped(t *testing.T) {
	t.Run("middle", func(t *testing.T) {
		c := newCluster(t, ringCfg(2, 2, 3))
		c.send(0, 0, 0)
		c.send(1, 0, 0)
		c.take()
		c.send(0, 0, 1)
		f := c.frame(1, 0, 1)
		var v frames.View
		require.NoError(t, v.Parse(f))
		for _, i := range []int{v.PayloadOffset() + 5, v.ICRCOffset(), v.PayloadOffset() - 3 /* BTH PSN */} {
			require.Equal(t, netreduce.Dropped, c.feed(corrupt(f, i)))
			c.wantNothing(t, "a corrupted frame completes nothing")
		}
		assert.Equal(t, uint64(3), c.acc.Stats().ICRCDrops)
		require.Equal(t, netreduce.Aggregated, c.feed(f))
		c.wantResults(t, 0, 1)
		// After completion a corrupted duplicate gets no resend.
		require.Equal(t, netreduce.Dropped, c.feed(corrupt(f, v.PayloadOffset()+9)))
		c.wantNothing(t, "no resend for a corrupted duplicate")
		assert.Equal(t, uint64(4), c.acc.Stats().ICRCDrops)
		assert.Zero(t, c.acc.Stats().ResultResends)
	})
	t.Run("first packet creates no CLT entry", func(t *testing.T) {
		c := newCluster(t, ringCfg(2, 2, 3))
		f := c.frame(0, 0, 0)
		var v frames.View
		require.NoError(t, v.Parse(f))
		require.Equal(t, netreduce.Dropped, c.feed(corrupt(f, v.PayloadOffset()+12)))
		assert.Equal(t, uint64(1), c.acc.Stats().ICRCDrops)
		assert.Zero(t, c.acc.Stats().CLTUpdates)
		require.Equal(t, netreduce.NotINA, c.send(0, 0, 1), "no CLT entry: a middle packet is not INA traffic")
		assert.Equal(t, uint64(1), c.acc.Stats().CLTMisses)
		assert.Zero(t, c.acc.Stats().Packets)
	})
	t.Run("first packet does not move the CLT", func(t *testing.T) {
		c := newCluster(t, ringCfg(2, 2, 3))
		c.lockstep(t, 0, 1)
		f := c.frame(0, 1, 0)
		var v frames.View
		require.NoError(t, v.Parse(f))
		require.Equal(t, netreduce.Dropped, c.feed(corrupt(f, v.PayloadOffset()+5))) // the MsgID byte
		assert.Equal(t, uint64(2), c.acc.Stats().CLTUpdates, "only message 0's two first packets")
		assert.Zero(t, c.acc.Stats().StaleFirsts)
		// Message 1's middle packet is past message 0: first packet lost.
		require.Equal(t, netreduce.Dropped, c.send(0, 1, 1))
		assert.Equal(t, uint64(1), c.acc.Stats().FirstLostDrops)
		// The good first packet then moves it.
		require.Equal(t, netreduce.Aggregated, c.feed(f))
		require.Equal(t, netreduce.Aggregated, c.send(0, 1, 1))
		assert.Equal(t, uint64(3), c.acc.Stats().CLTUpdates)
	})
}

// where names the rank, message and offset of a frame from its source
// address and PSN.
func (c *cluster) where(f []byte) (rank, m, off int) {
	var v frames.View
	require.NoError(c.t, v.Parse(f))
	rank = c.rankOf(f)
	d := int(wire.PSNDiff(v.PSN(), c.psnBase[rank]))
	return rank, d / c.L(), d % c.L()
}

// wantResultSet consumes the emitted frames and checks they are exactly
// the complete result sets of the given (message, offset)s.
func (c *cluster) wantResultSet(t testing.TB, want ...[2]int) {
	t.Helper()
	got := map[[2]int][]emitted{}
	for _, e := range c.take() {
		require.Equal(t, netreduce.KindResult, e.kind)
		_, m, off := c.where(e.frame)
		got[[2]int{m, off}] = append(got[[2]int{m, off}], e)
	}
	for _, k := range want {
		c.out = got[k]
		c.wantResults(t, k[0], k[1])
		delete(got, k)
	}
	require.Empty(t, got, "unexpected results")
}

func TestCLTNeverRewinds(t *testing.T) {
	c := newCluster(t, ringCfg(2, 2, 3))
	require.Equal(t, netreduce.Aggregated, c.send(0, 0, 0))
	require.Equal(t, netreduce.Aggregated, c.send(0, 1, 0))
	// A duplicated (older) first packet of message 0: aggregated, CLT kept.
	require.Equal(t, netreduce.Aggregated, c.send(0, 0, 0))
	assert.Equal(t, uint64(2), c.acc.Stats().CLTUpdates)
	assert.Equal(t, uint64(1), c.acc.Stats().StaleFirsts)
	// Message 1's middle packet is still addressed to message 1.
	require.Equal(t, netreduce.Aggregated, c.send(0, 1, 1))
	require.Equal(t, netreduce.Aggregated, c.send(0, 1, 2))
	assert.Zero(t, c.acc.Stats().FirstLostDrops)
	// Message 0's later packets come after: an earlier message by PSN.
	require.Equal(t, netreduce.Aggregated, c.send(0, 0, 1))
	require.Equal(t, netreduce.Aggregated, c.send(0, 0, 2))
	c.wantNothing(t, "rank 1 has sent nothing")
	c.sendMsg(1, 0)
	c.wantResultSet(t, [2]int{0, 0}, [2]int{0, 1}, [2]int{0, 2})
	c.sendMsg(1, 1)
	c.wantResultSet(t, [2]int{1, 0}, [2]int{1, 1}, [2]int{1, 2})
	// A stale first packet arriving again after both completed: resend.
	require.Equal(t, netreduce.Resent, c.send(0, 0, 0))
	c.wantResend(t, 0, 0, 0)
	require.Equal(t, netreduce.Resent, c.send(0, 1, 1), "the CLT still points at message 1")
	c.wantResend(t, 0, 1, 1)
}

func TestFirstPacketLost(t *testing.T) {
	c := newCluster(t, ringCfg(2, 2, 3))
	c.lockstep(t, 0, 1)
	// Rank 0's first packet of message 1 is lost: its other packets are
	// past message 0 and are dropped.
	require.Equal(t, netreduce.Dropped, c.send(0, 1, 1))
	require.Equal(t, netreduce.Dropped, c.send(0, 1, 2))
	assert.Equal(t, uint64(2), c.acc.Stats().FirstLostDrops)
	c.sendMsg(1, 1)
	c.wantNothing(t, "rank 0's contributions were dropped")
	// Go-back-N from the first packet: now they aggregate.
	c.sendMsg(0, 1)
	c.wantResultSet(t, [2]int{1, 0}, [2]int{1, 1}, [2]int{1, 2})
	assert.Equal(t, uint64(2), c.acc.Stats().FirstLostDrops)

	// The very first message's first packet lost: no CLT entry at all.
	d := newCluster(t, ringCfg(2, 2, 3))
	require.Equal(t, netreduce.NotINA, d.send(0, 0, 1))
	assert.Equal(t, uint64(1), d.acc.Stats().CLTMisses)
}

// TestGoBackNEarlierMessages: packets before PSN0 belong to earlier
// messages, found by PSN arithmetic with MsgLen (one and two messages back).
func TestGoBackNEarlierMessages(t *testing.T) {
	c := newCluster(t, ringCfg(2, 3, 3))
	for m := 0; m < 3; m++ {
		c.sendMsg(1, m)
	}
	c.wantNothing(t, "rank 0 has sent nothing")
	// Rank 0: message 0 and 1 lose everything but the first packet.
	require.Equal(t, netreduce.Aggregated, c.send(0, 0, 0))
	require.Equal(t, netreduce.Aggregated, c.send(0, 1, 0))
	c.sendMsg(0, 2)
	c.wantResultSet(t, [2]int{0, 0}, [2]int{1, 0}, [2]int{2, 0}, [2]int{2, 1}, [2]int{2, 2})
	// Go-back-N from message 0's second packet.
	for _, x := range [][2]int{{0, 1}, {0, 2}} { // two messages back
		require.Equal(t, netreduce.Aggregated, c.send(0, x[0], x[1]))
		c.wantResultSet(t, x)
	}
	require.Equal(t, netreduce.Resent, c.send(0, 1, 0))
	c.wantResend(t, 0, 1, 0)
	for _, x := range [][2]int{{1, 1}, {1, 2}} { // one message back
		require.Equal(t, netreduce.Aggregated, c.send(0, x[0], x[1]))
		c.wantResultSet(t, x)
	}
	for off := 0; off < 3; off++ { // the current message, all done
		require.Equal(t, netreduce.Resent, c.send(0, 2, off))
		c.wantResend(t, 0, 2, off)
	}
	assert.Zero(t, c.acc.Stats().BadDrops+c.acc.Stats().FirstLostDrops+c.acc.Stats().WindowDrops)
}

func TestNonINATraffic(t *testing.T) {
	c := newCluster(t, ringCfg(2, 2, 3))
	other, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mac(0), DstMAC: mac(1),
		SrcIP: ip(0), DstIP: ip(1), SrcPort: 0xC123, DestQP: 0x99})
	require.NoError(t, err)
	build := func(b *frames.Builder, p *frames.Packet) []byte {
		buf := make([]byte, 2048)
		n, err := b.Build(buf, p)
		require.NoError(t, err)
		return buf[:n]
	}
	pay := make([]byte, 64)
	reth := frames.RETHFields{VA: 0x1000, RKey: 7, DMALen: 64}
	for name, p := range map[string]*frames.Packet{
		"ack":                     {Opcode: wire.Acknowledge, PSN: 5, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK, MSN: 1}},
		"nak":                     {Opcode: wire.Acknowledge, PSN: 5, AETH: frames.AETHFields{Syndrome: wire.SyndromeNAKPSNSeqErr, MSN: 1}},
		"send only":               {Opcode: wire.SendOnly, PSN: 6, Payload: pay},
		"send first":              {Opcode: wire.SendFirst, PSN: 6, Payload: pay, HasINA: true}, // an INA tag in a SEND is not INA traffic
		"read request":            {Opcode: wire.ReadRequest, PSN: 7, RETH: reth},
		"read response":           {Opcode: wire.ReadResponseOnly, PSN: 7, Payload: pay},
		"write first without INA": {Opcode: wire.WriteFirst, PSN: 8, RETH: reth, Payload: pay},
		"write only without INA":  {Opcode: wire.WriteOnlyWithImm, PSN: 8, RETH: reth, Payload: pay},
	} {
		require.Equal(t, netreduce.NotINA, c.feed(build(other, p)), name)
	}
	assert.Equal(t, netreduce.Stats{}, c.acc.Stats(), "no accounting for plain RoCE traffic")
	require.Equal(t, netreduce.NotINA, c.feed(build(other, &frames.Packet{Opcode: wire.WriteMiddle, PSN: 9, Payload: pay})))
	require.Equal(t, netreduce.NotINA, c.feed(build(other, &frames.Packet{Opcode: wire.WriteLast, PSN: 10, Payload: pay})))
	assert.Equal(t, netreduce.Stats{CLTMisses: 2}, c.acc.Stats())
	c.wantNothing(t, "")

	// On a known INA connection: ACKs still pass; a WRITE_FIRST without the
	// INA header is not a well-formed INA message start.
	require.Equal(t, netreduce.Aggregated, c.send(0, 0, 0))
	require.Equal(t, netreduce.NotINA, c.feed(build(c.b[0], &frames.Packet{Opcode: wire.Acknowledge, PSN: 5, AETH: frames.AETHFields{Syndrome: wire.SyndromeACK}})))
	require.Equal(t, netreduce.Dropped, c.feed(build(c.b[0], &frames.Packet{Opcode: wire.WriteFirst, PSN: c.psn(0, 1, 0), RETH: reth, Payload: pay})))
	assert.Equal(t, uint64(1), c.acc.Stats().BadDrops)
	c.wantNothing(t, "")
}

// TestCLTMissesCountsNonFirstOnly: Stats.CLTMisses is documented as
// "non-first WRITE packets of no known connection"; a plain RDMA WRITE
// FIRST/ONLY (no INA header) of a connection the CLT does not know is a
// first packet and ordinary traffic, so it does not count (regression).
func TestCLTMissesCountsNonFirstOnly(t *testing.T) {
	c := newCluster(t, ringCfg(2, 2, 3))
	b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mac(0), DstMAC: mac(1),
		SrcIP: ip(0), DstIP: ip(1), DestQP: 0x99})
	require.NoError(t, err)
	buf := make([]byte, 2048)
	reth := frames.RETHFields{VA: 0x1000, RKey: 7, DMALen: 64}
	for _, op := range []wire.Opcode{wire.WriteFirst, wire.WriteOnly, wire.WriteOnlyWithImm} {
		n, err := b.Build(buf, &frames.Packet{Opcode: op, PSN: 8, RETH: reth, Payload: make([]byte, 64)})
		require.NoError(t, err)
		require.Equal(t, netreduce.NotINA, c.feed(buf[:n]), "%v", op)
	}
	assert.Zero(t, c.acc.Stats().CLTMisses, "first packets without INA header counted as CLT misses")
}

func TestBadINAHeader(t *testing.T) {
	c := newCluster(t, ringCfg(4, 2, 3))
	bad := func(rank int, mod func(*frames.Packet)) []byte {
		p := c.packet(rank, 0, 0, c.gradient(rank, 0, 0))
		mod(p)
		return c.build(rank, p, 1)
	}
	drops := uint64(0)
	for name, mod := range map[string]func(*frames.Packet){
		"unknown ring":   func(p *frames.Packet) { p.INA.RingID = 7 },
		"rank >= H":      func(p *frames.Packet) { p.INA.Rank = 4 },
		"rank 255":       func(p *frames.Packet) { p.INA.Rank = 255 },
		"msg-len 0":      func(p *frames.Packet) { p.INA.MsgLen = 0 },
		"msg-len > ring": func(p *frames.Packet) { p.INA.MsgLen = 4 },
	} {
		require.Equal(t, netreduce.Dropped, c.feed(bad(0, mod)), name)
		drops++
		assert.Equal(t, drops, c.acc.Stats().BadDrops, name)
		require.Equal(t, netreduce.NotINA, c.send(0, 0, 1), "%s: no CLT entry was created", name)
	}
	assert.Zero(t, c.acc.Stats().CLTUpdates)
	// A shorter message than the ring's (the tensor's last) is fine.
	require.Equal(t, netreduce.Aggregated, c.feed(bad(0, func(p *frames.Packet) { p.INA.MsgLen = 2 })))

	// A known connection may not change its rank; another connection may
	// not claim a taken rank.
	require.Equal(t, netreduce.Dropped, c.feed(bad(0, func(p *frames.Packet) { p.INA.Rank = 1 })))
	intruder, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mac(9), DstMAC: mac(1),
		SrcIP: ip(9), DstIP: ip(1), DestQP: destQP})
	require.NoError(t, err)
	buf := make([]byte, 2048)
	n, err := intruder.Build(buf, c.packet(0, 0, 0, c.gradient(0, 0, 0)))
	require.NoError(t, err)
	require.Equal(t, netreduce.Dropped, c.feedFrom(0, buf[:n]), "second connection claiming rank 0 from rank 0's port")
	assert.Equal(t, drops+2, c.acc.Stats().BadDrops)
	require.Equal(t, netreduce.Dropped, c.feed(buf[:n]), "second connection claiming rank 0 from another port")
	assert.Equal(t, drops+2, c.acc.Stats().BadDrops)
	assert.Equal(t, uint64(1), c.acc.Stats().PortDrops)

	// Lengths: more than the MTU, not a whole number of elements, or
	// disagreeing with the other ranks' packet of the same offset.
	c.send(1, 0, 0)
	for name, data := range map[string][]byte{
		"payload > MTU":     make([]byte, c.cfg.MTU+4),
		"partial element":   make([]byte, c.cfg.MTU-2),
		"length mismatch 1": make([]byte, c.cfg.MTU-4),
	} {
		if name == "length mismatch 1" {
			require.Equal(t, netreduce.Aggregated, c.send(0, 0, 1)) // rank 0 sets the offset's length
		}
		before := c.acc.Stats().BadDrops
		require.Equal(t, netreduce.Dropped, c.feed(c.build(1, c.packet(1, 0, 1, data), 2)), name)
		assert.Equal(t, before+1, c.acc.Stats().BadDrops, name)
	}
	c.wantNothing(t, "")
}

// TestMessageBoundaryMismatch: a later packet (WRITE_MIDDLE/LAST) whose
// PSN is where a message's first packet must be, or before message 0,
// cannot be addressed: messages do not have MsgLen packets.
func TestMessageBoundaryMismatch(t *testing.T) {
	c := newCluster(t, ringCfg(2, 3, 3))
	c.sendMsg(0, 0)
	c.send(0, 1, 0)
	c.send(0, 2, 0)
	mid := func(psn uint32) []byte {
		p := c.packet(0, 1, 1, c.gradient(0, 1, 1))
		p.PSN = psn
		return c.build(0, p, 7)
	}
	for name, psn := range map[string]uint32{
		"current message's PSN0": c.psn(0, 2, 0),
		"one message back":       c.psn(0, 1, 0),
		"two messages back":      c.psn(0, 0, 0),
		"before message 0":       wire.PSNAdd(c.psn(0, 0, 0), -1),
	} {
		before := c.acc.Stats().BadDrops
		require.Equal(t, netreduce.Dropped, c.feed(mid(psn)), name)
		assert.Equal(t, before+1, c.acc.Stats().BadDrops, name)
	}
	// At the next message's PSN0 a later opcode means that message's first
	// packet was lost.
	require.Equal(t, netreduce.Dropped, c.feed(mid(c.psn(0, 3, 0))))
	assert.Equal(t, uint64(1), c.acc.Stats().FirstLostDrops)
	c.wantNothing(t, "")
	// The well-formed packets still aggregate.
	c.sendMsg(1, 0)
	c.wantResultSet(t, [2]int{0, 0}, [2]int{0, 1}, [2]int{0, 2})
}

// TestSafeRelease walks the Safe rule with H=2, N=1 (two aggregators per
// offset): message m's aggregators serve m+2 only after both ranks sent a
// first packet of m+1.
func TestSafeRelease(t *testing.T) {
	c := newCluster(t, ringCfg(2, 1, 2))
	id := c.cfg.ID
	c.lockstep(t, 0, 1)
	assert.Equal(t, int64(0), c.acc.Released(id))
	require.Equal(t, netreduce.Aggregated, c.send(0, 1, 0))
	assert.Equal(t, int64(0), c.acc.Released(id), "rank 1 has not sent message 1")
	// Rank 0 runs ahead to message 2: its aggregator still holds message 0.
	require.Equal(t, netreduce.Dropped, c.send(0, 2, 0))
	assert.Equal(t, uint64(1), c.acc.Stats().WindowDrops)
	c.wantNothing(t, "")
	// Rank 1's first packet of message 1 releases message 0.
	require.Equal(t, netreduce.Aggregated, c.send(1, 1, 0))
	c.wantResultSet(t, [2]int{1, 0})
	assert.Equal(t, int64(1), c.acc.Released(id))
	c.send(0, 1, 1) // an earlier message for rank 0's CLT (now at 2)
	c.send(1, 1, 1)
	c.wantResultSet(t, [2]int{1, 1})
	// Rank 0 retransmits message 2's first packet: the aggregator is reused.
	require.Equal(t, netreduce.Aggregated, c.send(0, 2, 0))
	// A late duplicate of released message 0 whose aggregator now holds
	// message 2: forwarded unchanged.
	require.Equal(t, netreduce.Stale, c.send(1, 0, 0))
	assert.Equal(t, uint64(1), c.acc.Stats().StaleForwards)
	c.wantNothing(t, "a stale frame is forwarded by the switch, not emitted")
	// Offset 1's aggregator still holds message 0: either answer is the
	// receiver's data (message 0's result, or the stale frame unchanged).
	switch v := c.send(1, 0, 1); v {
	case netreduce.Resent:
		c.wantResend(t, 1, 0, 1)
	case netreduce.Stale:
		c.wantNothing(t, "")
	default:
		t.Fatalf("released message 0, offset 1: verdict %v", v)
	}
	require.Equal(t, netreduce.Aggregated, c.send(1, 2, 0))
	c.wantResultSet(t, [2]int{2, 0})
	c.send(0, 2, 1)
	c.send(1, 2, 1)
	c.wantResultSet(t, [2]int{2, 1})
	assert.Equal(t, int64(2), c.acc.Released(id))
	// Message 2's duplicate still gets its result (not released).
	require.Equal(t, netreduce.Resent, c.send(0, 2, 1))
	c.wantResend(t, 0, 2, 1)
}

// TestReleasedMessageNeverReaggregated: once every rank sent a first packet
// of m+N, a packet of m is a duplicate even if m's aggregator at its offset
// was never used: it is forwarded, not aggregated into a fresh aggregator.
func TestReleasedMessageNeverReaggregated(t *testing.T) {
	c := newCluster(t, ringCfg(2, 1, 2))
	c.send(0, 0, 0)
	c.send(1, 0, 0)
	c.wantResultSet(t, [2]int{0, 0})
	c.send(0, 1, 0)
	c.send(1, 1, 0)
	c.wantResultSet(t, [2]int{1, 0})
	require.Equal(t, int64(1), c.acc.Released(c.cfg.ID))
	require.Equal(t, netreduce.Stale, c.send(0, 0, 1))
	assert.Equal(t, uint64(1), c.acc.Stats().StaleForwards)
	c.wantNothing(t, "")
}

func TestSafeReleasePoint(t *testing.T) {
	c := newCluster(t, ringCfg(3, 2, 1))
	id := c.cfg.ID
	want := func(m int) int64 { return int64(max(m-2+1, 0)) } // all ranks at m: below m-N+1 released
	for m := 0; m < 8; m++ {
		for r := 0; r < 3; r++ {
			before := c.acc.Released(id)
			require.Equal(t, netreduce.Aggregated, c.send(r, m, 0), "rank %d message %d", r, m)
			if r < 2 {
				assert.Equal(t, before, c.acc.Released(id), "rank %d of message %d moves nothing", r, m)
			} else {
				assert.Equal(t, want(m), c.acc.Released(id), "all ranks sent message %d", m)
			}
		}
		c.wantResultSet(t, [2]int{m, 0})
	}
	assert.Zero(t, c.acc.Stats().WindowDrops)
}

// TestPaperReleaseHazard: under the paper's rule a retransmitted packet of
// message m clears the aggregator of m+N at the same offset, so a partly
// filled m+N loses its contributions and never completes. The same
// sequence under Safe completes with the right sum.
func TestPaperReleaseHazard(t *testing.T) {
	for _, rel := range []netreduce.Release{netreduce.Safe, netreduce.Paper} {
		t.Run(rel.String(), func(t *testing.T) {
			cfg := ringCfg(2, 2, 2)
			cfg.Release = rel
			c := newCluster(t, cfg)
			c.lockstep(t, 0, 2)
			// Rank 0 got results 0 and 1 and sends message 2 (slot 2).
			c.sendMsg(0, 2)
			c.wantNothing(t, "")
			// Rank 1's ACK for message 0 was lost: it retransmits message
			// 0's last packet (PSN before its PSN0, one message back).
			v := c.send(1, 0, 1)
			if rel == netreduce.Safe {
				require.Equal(t, netreduce.Resent, v)
				c.wantResend(t, 1, 0, 1)
			} else {
				require.Equal(t, netreduce.Aggregated, v, "paper: message 2's packet already cleared message 0's slot")
				c.wantNothing(t, "")
			}
			c.sendMsg(1, 2)
			if rel == netreduce.Safe {
				c.wantResultSet(t, [2]int{2, 0}, [2]int{2, 1})
				return
			}
			// Offset 0 completes; offset 1 lost rank 0's contribution.
			c.wantResultSet(t, [2]int{2, 0})
			assert.Equal(t, uint64(2*2+1), c.acc.Stats().Aggregations)
		})
	}
}

// TestLongStreamWraps runs 600 messages lock-step: MsgIDs wrap twice with a
// 2N (6) that does not divide 256, PSNs wrap, aggregators are reused 100
// times, under both release rules.
func TestLongStreamWraps(t *testing.T) {
	for _, rel := range []netreduce.Release{netreduce.Safe, netreduce.Paper} {
		t.Run(rel.String(), func(t *testing.T) {
			cfg := ringCfg(3, 3, 2)
			cfg.Release = rel
			c := newCluster(t, cfg)
			c.lockstep(t, 0, 600)
			s := c.acc.Stats()
			assert.Equal(t, uint64(1200), s.Aggregations)
			assert.Zero(t, s.WindowDrops+s.StaleForwards+s.BadDrops+s.FirstLostDrops+s.StaleFirsts)
			if rel == netreduce.Safe {
				assert.Equal(t, int64(599-3+1), c.acc.Released(cfg.ID))
			}
		})
	}
}

func TestI32Ring(t *testing.T) {
	cfg := ringCfg(3, 2, 2)
	cfg.DType = tensor.I32
	c := newCluster(t, cfg)
	c.data = func(rank, m, off, n int) []byte {
		b := orderSensitive(tensor.I32, rand.New(rand.NewPCG(uint64(rank), uint64(m*10+off))), n)
		first := []int32{math.MaxInt32, 1, 4}[rank] // wraps: MaxInt32 + 1 + 4 = MinInt32 + 4
		binary.LittleEndian.PutUint32(b, uint32(first))
		return b
	}
	c.lockstep(t, 0, 2)
	for _, r := range []int{2, 0, 1} { // arrival order 2, 0, 1
		c.sendMsg(r, 2)
	}
	out := c.out
	c.wantResultSet(t, [2]int{2, 0}, [2]int{2, 1})
	var v frames.View
	require.NoError(t, v.Parse(out[0].frame))
	assert.Equal(t, int32(math.MinInt32+4), int32(binary.LittleEndian.Uint32(v.Payload()[wire.INALen:])))
}

func TestF16Ring(t *testing.T) {
	cfg := ringCfg(4, 2, 2)
	cfg.DType = tensor.F16
	c := newCluster(t, cfg)
	c.data = func(rank, m, off, n int) []byte {
		b := orderSensitive(tensor.F16, rand.New(rand.NewPCG(uint64(rank), uint64(m*10+off))), n)
		// 2048 + 1 + 1 + 1 in rank order stays 2048 (each +1 is a tie,
		// rounded to even); any order adding the ones first gives 2052.
		binary.LittleEndian.PutUint16(b, []uint16{0x6800, 0x3c00, 0x3c00, 0x3c00}[rank])
		return b
	}
	for r := 3; r >= 0; r-- { // reverse arrival
		c.sendMsg(r, 0)
	}
	out := c.out
	c.wantResultSet(t, [2]int{0, 0}, [2]int{0, 1})
	for _, e := range out {
		var v frames.View
		require.NoError(t, v.Parse(e.frame))
		_, _, off := c.where(e.frame)
		data := v.Payload()
		if off == 0 {
			data = data[wire.INALen:]
		}
		assert.Equal(t, uint16(0x6800), binary.LittleEndian.Uint16(data), "2048, not 2051/2052")
	}
	c.lockstep(t, 1, 6)
}

// TestWriteOnlyMessages: MsgLen 1 rings send WRITE_ONLY_WITH_IMM packets.
func TestWriteOnlyMessages(t *testing.T) {
	c := newCluster(t, ringCfg(4, 2, 1))
	c.lockstep(t, 0, 10)
	require.Equal(t, netreduce.Resent, c.send(2, 9, 0))
	c.wantResend(t, 2, 9, 0)
}

// TestSteadyStateAllocatesNothing: a full aggregation round (8 ranks' packet
// of one (message, offset), results emitted) after warm-up allocates
// nothing, with aggregators being reused under the Safe rule.
func TestSteadyStateAllocatesNothing(t *testing.T) {
	cfg := netreduce.RingConfig{ID: 0, Workers: 8, Window: 2, MsgLen: 4, MTU: 1024, DType: tensor.F32}
	c := newCluster(t, cfg)
	const msgs = 40
	var rounds [][][]byte // (m, off) in order, 8 frames each
	for m := 0; m < msgs; m++ {
		for off := 0; off < 4; off++ {
			var r [][]byte
			for k := 0; k < 8; k++ {
				r = append(r, c.frame(k, m, off))
			}
			rounds = append(rounds, r)
		}
	}
	emits := 0
	emit := func(f []byte, k netreduce.Kind, _ *netreduce.RingConfig) { emits++ }
	var v frames.View
	next := 0
	round := func() {
		for _, f := range rounds[next] {
			if v.Parse(f) != nil || c.acc.Process(&v, srcPort(&v), emit) != netreduce.Aggregated {
				t.Fatalf("round %d: not aggregated", next)
			}
		}
		next++
	}
	for next < 24 { // six messages: every aggregator used and reused
		round()
	}
	allocs := testing.AllocsPerRun(100, round)
	assert.Zero(t, allocs, "allocations per round")
	assert.Equal(t, 8*next, emits)
	assert.Equal(t, uint64(next), c.acc.Stats().Aggregations)
}

// TestSkewedWindowStream: rank 0 runs N-1 messages ahead of rank 1 (the
// most a window of N allows), with N = MaxWindow, for 600 messages, and
// retransmits the first packet of the message rank 1 just completed: 31
// messages behind its CLT entry, across MsgID wraps. Nothing is dropped;
// every retransmission gets its result.
func TestSkewedWindowStream(t *testing.T) {
	for _, rel := range []netreduce.Release{netreduce.Safe, netreduce.Paper} {
		t.Run(rel.String(), func(t *testing.T) {
			const N, M = netreduce.MaxWindow, 600
			cfg := ringCfg(2, N, 2)
			cfg.Release = rel
			c := newCluster(t, cfg)
			for m := 0; m < N-1; m++ {
				c.sendMsg(0, m)
			}
			for s := 0; s < M; s++ {
				if s+N-1 < M {
					c.sendMsg(0, s+N-1)
				}
				c.wantNothing(t, "rank 1 is behind")
				c.sendMsg(1, s)
				c.wantResultSet(t, [2]int{s, 0}, [2]int{s, 1})
				require.Equal(t, netreduce.Resent, c.send(0, s, 0), "message %d", s)
				c.wantResend(t, 0, s, 0)
			}
			st := c.acc.Stats()
			assert.Zero(t, st.WindowDrops+st.StaleForwards+st.BadDrops+st.FirstLostDrops+st.ICRCDrops)
			assert.Equal(t, uint64(M), st.StaleFirsts)
		})
	}
}
