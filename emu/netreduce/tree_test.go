package netreduce_test

// A two-rack ring on bare accelerators (no fabric): ranks 0, 1 under
// leaf0 and 2, 3 under leaf1, ports 0 and 1 on each leaf, the uplink on
// port 2; the spine has leaf0 on port 0 and leaf1 on port 1. The harness
// carries every frame an accelerator emits to where the fabric would:
// partials to the spine, totals and notifications to the leaf they
// address, results to the hosts (collected).

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
)

type treeFrame struct {
	frame []byte
	kind  netreduce.Kind
	from  string // the emitting switch
}

type twoRacks struct {
	t      *testing.T
	hosts  *cluster // builds the ranks' frames
	leaves [2]*netreduce.Accelerator
	spine  *netreduce.Accelerator
	nodes  [3]netreduce.Node // leaf0, leaf1, spine
	queue  []treeFrame       // emitted, not yet delivered
	tree   []treeFrame       // every switch-to-switch frame, as sent
	out    []treeFrame       // every result to a host
	// mark, if set, may CE-mark a switch-to-switch frame on its way (a
	// congested uplink or downlink), given its kind, ends and packet.
	mark func(kind netreduce.Kind, from, to string, p [2]int) bool
}

func node(i int, name string) netreduce.Node {
	return netreduce.Node{Name: name, MAC: [6]byte{0x02, 0x1a, 0xe1, byte(i), 0, 0xff}, IP: netip.AddrFrom4([4]byte{10, 9, 0, byte(i + 1)})}
}

func newTwoRacks(t *testing.T, tc uint8) *twoRacks {
	base := ringCfg(4, 2, 3)
	base.Window, base.TClass = 2, tc
	h := newCluster(t, base) // its own accelerator stays unused
	h.b = nil
	for r := 0; r < 4; r++ { // the hosts send in the job's class, as its QPs do
		next := (r + 1) % 4
		b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: mac(r), DstMAC: mac(next),
			SrcIP: ip(r), DstIP: ip(next), SrcPort: frames.UDPSourcePort(0x11 + uint32(r)), DestQP: destQP, TClass: tc})
		require.NoError(t, err)
		h.b = append(h.b, b)
	}
	x := &twoRacks{t: t, hosts: h, spine: netreduce.New(), nodes: [3]netreduce.Node{node(0, "leaf0"), node(1, "leaf1"), node(2, "spine0")}}
	leafOf := func(r int) int { return r / 2 }
	for li := range x.leaves {
		cfg := base
		cfg.Conns = nil
		for r := 0; r < 4; r++ {
			c := netreduce.Conn{Src: ip(r), Dst: ip((r + 1) % 4), DestQP: destQP, Rank: r, Port: r % 2,
				StartPSN: h.psnBase[r], HasStart: true, Remote: leafOf(r) != li, LocalDst: leafOf((r+1)%4) == li,
				Peer: x.nodes[leafOf((r+1)%4)], Name: fmt.Sprintf("h%d→h%d", r, (r+1)%4)}
			if c.Remote {
				c.Port = netreduce.AnyPort
			}
			cfg.Conns = append(cfg.Conns, c)
		}
		cfg.Tree = &netreduce.Tree{Role: netreduce.Leaf, Self: x.nodes[li], Parent: x.nodes[2], ParentPort: 2, Child: li}
		x.leaves[li] = netreduce.New()
		require.NoError(t, x.leaves[li].AddRing(cfg))
	}
	sc := base
	sc.Workers = 2
	sc.Tree = &netreduce.Tree{Role: netreduce.Spine, Self: x.nodes[2], Children: x.nodes[:2], ChildPorts: []int{0, 1}}
	require.NoError(t, x.spine.AddRing(sc))
	return x
}

func (x *twoRacks) emitter(from string) netreduce.Emit {
	return func(f []byte, k netreduce.Kind, _ *netreduce.RingConfig) {
		x.queue = append(x.queue, treeFrame{append([]byte(nil), f...), k, from})
	}
}

// host feeds rank's frame to its leaf, then delivers everything that
// follows until the switches are quiet.
func (x *twoRacks) host(rank int, f []byte) {
	var v frames.View
	require.NoError(x.t, v.Parse(f))
	li := rank / 2
	require.Equal(x.t, netreduce.Aggregated, x.leaves[li].Process(&v, rank%2, x.emitter(x.nodes[li].Name)))
	for len(x.queue) > 0 {
		e := x.queue[0]
		x.queue = x.queue[1:]
		var acc *netreduce.Accelerator
		port, to := 2, ""
		switch e.kind {
		case netreduce.KindPartial, netreduce.KindPartialResend:
			acc, to = x.spine, x.nodes[2].Name
			port = map[string]int{"leaf0": 0, "leaf1": 1}[e.from]
		case netreduce.KindTotal, netreduce.KindTotalResend, netreduce.KindNotify:
			for i := range x.leaves {
				if [6]byte(e.frame[:6]) == x.nodes[i].MAC {
					acc, to = x.leaves[i], x.nodes[i].Name
				}
			}
			require.NotNil(x.t, acc, "a tree frame to no leaf")
		default:
			x.out = append(x.out, e)
			continue
		}
		x.tree = append(x.tree, treeFrame{append([]byte(nil), e.frame...), e.kind, e.from})
		if x.mark != nil && x.mark(e.kind, e.from, to, treeMsg(x.t, e.frame)) {
			require.NoError(x.t, v.Parse(e.frame))
			v.SetECN(frames.ECNCE)
		}
		require.NoError(x.t, v.Parse(e.frame))
		require.Equal(x.t, netreduce.Aggregated, acc.Process(&v, port, x.emitter(to)), "%v from %s to %s", e.kind, e.from, to)
	}
}

// treeMsg is the (message, offset) of a switch-to-switch frame.
func treeMsg(t *testing.T, f []byte) [2]int {
	var v frames.View
	require.NoError(t, v.Parse(f))
	_, th := v.INATree()
	require.NotNil(t, th)
	return [2]int{int(th.Msg()), int(th.Offset())}
}

// TestTreeCarriesTheJobsClassAndMarks: the tree's frames go in the job's
// DSCP with its ECT; a CE mark on a rank's contribution marks that
// packet's partial, then its total, then every result translated from it;
// a mark picked up by a partial on the uplink, or by a total on one
// leaf's downlink, marks what is built from it downstream; nothing else
// is ever marked, in particular not the later results of a connection
// whose learned first or last packet was marked. The results stay the
// tree-order sum with a good ICRC and IPv4 checksum.
func TestTreeCarriesTheJobsClassAndMarks(t *testing.T) {
	const dscp = 26
	tc := uint8(dscp<<2) | frames.ECNECT0
	x := newTwoRacks(t, tc)
	type pos struct{ rank, m, off int }
	// Two first packets: rank 1's (its receiver is under leaf1, which
	// learns the headers from a notification) and rank 0's (learned by
	// leaf0 itself); the results of their connections' middle packets,
	// built from the learned headers, must not inherit the mark.
	hostCE := map[pos]bool{{1, 0, 0}: true, {0, 1, 0}: true}
	x.mark = func(k netreduce.Kind, from, to string, p [2]int) bool {
		return (k == netreduce.KindPartial && p == [2]int{1, 2} && from == "leaf1") || // leaf1's uplink
			(k == netreduce.KindTotal && p == [2]int{0, 2} && to == "leaf0") // leaf0's downlink
	}
	for m := 0; m < 2; m++ {
		for off := 0; off < 3; off++ {
			for r := 0; r < 4; r++ {
				f := x.hosts.frame(r, m, off)
				if hostCE[pos{r, m, off}] {
					var v frames.View
					require.NoError(t, v.Parse(f))
					v.SetECN(frames.ECNCE)
				}
				x.host(r, f)
			}
		}
	}
	// Switch-to-switch frames as sent: the job's DSCP, ECT(0) unless
	// aggregated from a CE contribution. Leaf0's partials of (0,0) and
	// (1,0) sum a marked frame; the totals of those and of (1,2) (leaf1's
	// partial was marked on the uplink) sum a marked partial.
	partialCE := map[[2]int]bool{{0, 0}: true, {1, 0}: true}
	totalCE := map[[2]int]bool{{0, 0}: true, {1, 0}: true, {1, 2}: true}
	var n [3]int
	for _, e := range x.tree {
		var v frames.View
		require.NoError(t, v.Parse(e.frame))
		require.True(t, v.ICRCOK())
		l3 := v.L3()
		require.Equal(t, refIPv4Checksum(l3[:20]), binary.BigEndian.Uint16(l3[10:]), "%v: IPv4 checksum", e.kind)
		assert.Equal(t, uint8(dscp), v.DSCP(), "%v from %s", e.kind, e.from)
		p := treeMsg(t, e.frame)
		want := frames.ECNECT0
		switch e.kind {
		case netreduce.KindPartial:
			n[0]++
			if partialCE[p] && e.from == "leaf0" {
				want = frames.ECNCE
			}
		case netreduce.KindTotal:
			n[1]++
			if totalCE[p] {
				want = frames.ECNCE
			}
		case netreduce.KindNotify:
			n[2]++
		default:
			t.Fatalf("unexpected %v", e.kind)
		}
		assert.Equal(t, want, v.ECN(), "%v %v from %s", e.kind, p, e.from)
	}
	assert.Equal(t, [3]int{12, 12, 8}, n, "partials (2 leaves × 6 packets), totals, notifications (2 cross-rack connections × 2 messages × first and last)")

	// Results: four per packet, CE exactly where their total was; leaf0's
	// (receivers 0, 1) also for (0, 2), whose total was marked on its way
	// to leaf0 only.
	require.Len(t, x.out, 24)
	for _, e := range x.out {
		require.Equal(t, netreduce.KindTranslated, e.kind)
		var v frames.View
		require.NoError(t, v.Parse(e.frame))
		require.True(t, v.ICRCOK())
		l3 := v.L3()
		require.Equal(t, refIPv4Checksum(l3[:20]), binary.BigEndian.Uint16(l3[10:]))
		rank := x.hosts.rankOf(e.frame)
		off := wire.PSNDiff(v.PSN(), x.hosts.psnBase[rank])
		m, o := int(off)/3, int(off)%3
		want := frames.ECNECT0
		if totalCE[[2]int{m, o}] || (m == 0 && o == 2 && e.from == "leaf0") {
			want = frames.ECNCE
		}
		assert.Equal(t, uint8(dscp), v.DSCP())
		assert.Equal(t, want, v.ECN(), "result of h%d's connection (%d,%d) at %s", rank, m, o, e.from)
		// The tree's reduction order: each leaf's ranks, then the leaves.
		g := func(r int) []byte { return x.hosts.gradient(r, m, o) }
		sum := refSum(x.hosts.cfg.DType, [][]byte{refSum(x.hosts.cfg.DType, [][]byte{g(0), g(1)}), refSum(x.hosts.cfg.DType, [][]byte{g(2), g(3)})})
		data := v.Payload()
		if o == 0 {
			data = data[wire.INALen:]
		}
		assert.Equal(t, sum, data, "h%d (%d,%d)", rank, m, o)
	}
}

// TestTreeClassZeroStaysZero: a ring without a class (a job without
// --dscp or --cc) sends its tree frames in TClass 0, as before.
func TestTreeClassZeroStaysZero(t *testing.T) {
	x := newTwoRacks(t, 0)
	for m := 0; m < 2; m++ {
		for off := 0; off < 3; off++ {
			for r := 0; r < 4; r++ {
				x.host(r, x.hosts.frame(r, m, off))
			}
		}
	}
	require.NotEmpty(t, x.tree)
	for _, e := range append(x.tree, x.out...) {
		var v frames.View
		require.NoError(t, v.Parse(e.frame))
		assert.Zero(t, v.TClass(), "%v from %s", e.kind, e.from)
	}
}

// refIPv4Checksum is RFC 791's header checksum recomputed from scratch
// (the checksum field taken as zero).
func refIPv4Checksum(h []byte) uint16 {
	var s uint32
	for i := 0; i+1 < len(h); i += 2 {
		if i != 10 {
			s += uint32(binary.BigEndian.Uint16(h[i:]))
		}
	}
	for s>>16 != 0 {
		s = s&0xFFFF + s>>16
	}
	return ^uint16(s)
}
