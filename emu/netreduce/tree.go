package netreduce

// Multi-rack aggregation (NetReduce, ASPLOS '23 §3.3): the ranks of a
// ring sit under several leaves of a two-tier fabric. Each leaf
// aggregates its local ranks as one switch does (§3.1), and its
// Connection Translation Table (CTT) sends the partial sum up on the
// leaf's virtual connection to the spine; the spine aggregates the
// leaves' partials and sends the total down to each leaf; each leaf
// translates the total onto the ring connections whose receivers it
// serves, with those connections' own headers and a fresh ICRC.
//
// Points §3.3 leaves open, settled here:
//   - Fan-in: job setup tells a leaf its local ranks and the spine its
//     children, in tree order; aggregator bitmaps are sized from them.
//   - One copy per distinct target: a leaf's local connections all map
//     to its one uplink and the spine's children's rows to the same
//     downlinks, so one partial goes up and one total goes down each
//     link per packet; the matches not sent are counted (DupSuppressed).
//   - The virtual connections' frames are RoCEv2 with an opcode no RC
//     responder takes (wire.OpINAPartial, OpINATotal, OpINANotify), the
//     INA header and an INATree header (the message's number, the
//     packet's offset, the ranks in the sum) on every packet, and an
//     ICRC. Their PSN counts frames for diagnosis only; they are never
//     ACKed: recovery is the hosts' go-back-N, end to end.
//   - Rebuilding a connection's results at a leaf its packets never
//     passed: the sender's leaf sends the headers of each message's first
//     packet (addresses, RETH, INA header) and last packet (opcode,
//     ImmDt) to the receiver's leaf as notifications, which also populate
//     its CTT. A leaf keeps the last 2N messages' headers per connection;
//     a total it cannot translate (a notification was lost) is dropped and
//     counted (Untranslatable), and the receiver's NAK or the sender's
//     timeout brings a retransmission that answers from a cache.
//   - Release: a leaf frees message m once a total of message m+N
//     arrived (the spine made it, so every rank sent m+N and so holds all
//     of m); the spine once every child sent a partial of m+N.
//   - The float reduction order is the tree's: a leaf sums its local
//     ranks in rank order, the spine the partials in child order.
//   - Loss anywhere is recovered by four rules: a gradient packet that
//     meets a leaf aggregator holding the total gets its connection's
//     result re-sent (routed like any frame, across the spine if the
//     receiver is in another rack); one that meets a leaf aggregator whose
//     partial went up but whose total never came re-sends the partial; a
//     partial that meets a completed spine aggregator gets the total
//     re-sent on that child's downlink only, and the leaf re-translates
//     it for every local receiver; a gradient packet of m + N that finds
//     its aggregator still held by m - N (the leaf's total of m was lost,
//     and its local ranks, served by another leaf's re-sent results, need
//     not retransmit m) re-sends m's partial too, and m's total releases
//     the aggregator.
//   - The tree's frames carry the job's traffic class (RingConfig.TClass:
//     its DSCP, so its priority and PFC class, and ECT when its hosts
//     react to ECN), and congestion marks aggregate with the data: a
//     partial is CE-marked when a contribution it sums arrived CE, a total
//     when a partial did, and a result a leaf translates when its total
//     did, so a receiver's CNP reaches the connection's sender whatever
//     tree link was congested (the hosts' DCQCN, which NetReduce §3
//     reuses). Nothing else is marked: the headers a leaf learns keep
//     their DSCP and ECT but not a CE mark they may have picked up, which
//     would otherwise mark every later result of the connection.
//   - A leaf aggregates only frames from its host ports. A ring frame
//     that enters by a port joining it to another switch (Tree.Trunks:
//     its uplink, and every other switch-to-switch link) and is not
//     addressed to it is in transit and passes unchanged: ordinary
//     traffic between racks (a result re-sent by the sender's leaf, a
//     frame of a released message, an ACK) takes any shortest path its
//     routes give, ECMP over several spines or a direct link between two
//     leaves, not only the ring's tree. Only a frame of a member attached
//     here is refused from such a port (it cannot come from another
//     switch: looped or forged). The tree's own frames stay on the tree:
//     switches route each other's addresses by the tree's ports only.

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

// Role is a switch's place in a ring.
type Role uint8

const (
	Single Role = iota // the ring's only switch (§3.1)
	Leaf               // aggregates local ranks, translates totals (§3.3)
	Spine              // aggregates the leaves' partials
)

func (r Role) String() string { return [...]string{"single", "leaf", "spine"}[r%3] }

// Node is a switch's end of virtual connections: its name (for the CTT's
// rows), MAC and IPv4 address.
type Node struct {
	Name string
	MAC  [6]byte
	IP   netip.Addr
}

// Tree places a switch in a multi-rack ring.
type Tree struct {
	Role Role
	Self Node
	// Leaf: the spine, the port towards it, and this leaf's index among
	// the spine's children (the Rank of its partials).
	Parent     Node
	ParentPort int
	Child      int
	// Spine: the leaves in tree order and the port towards each.
	Children   []Node
	ChildPorts []int
	// Trunks are every port joining this switch to another switch,
	// beside the tree's own (ParentPort, ChildPorts), which count anyway.
	Trunks []int
}

// Tree counters (in Stats).
type TreeStats struct {
	PartialsSent   uint64 `json:"partials_sent"`   // leaf: partial sums sent up
	PartialResends uint64 `json:"partial_resends"` // leaf: partials sent again (a retransmission met no total)
	TotalsSent     uint64 `json:"totals_sent"`     // spine: totals sent down (one per child)
	TotalResends   uint64 `json:"total_resends"`   // spine: a total sent again to one child
	NotifySent     uint64 `json:"notify_sent"`     // leaf: notifications sent to another leaf
	NotifyLearned  uint64 `json:"notify_learned"`  // leaf: first/last headers learned (sent here or by a local sender)
	Translated     uint64 `json:"translated"`      // leaf: results built from a total for a local receiver
	Untranslatable uint64 `json:"untranslatable"`  // leaf: results not built: no headers of that message (a lost notification)
	DupSuppressed  uint64 `json:"dup_suppressed"`  // CTT matches with the same target as one sent
	TreeStale      uint64 `json:"tree_stale"`      // partials or totals of released or unknown messages, dropped
}

func (s *TreeStats) add(x TreeStats) {
	s.PartialsSent += x.PartialsSent
	s.PartialResends += x.PartialResends
	s.TotalsSent += x.TotalsSent
	s.TotalResends += x.TotalResends
	s.NotifySent += x.NotifySent
	s.NotifyLearned += x.NotifyLearned
	s.Translated += x.Translated
	s.Untranslatable += x.Untranslatable
	s.DupSuppressed += x.DupSuppressed
	s.TreeStale += x.TreeStale
}

// treeRing is a ring's multi-rack state on one switch.
type treeRing struct {
	Tree
	local    []int     // leaf: the local ranks, in rank order
	rx       []*rxConn // leaf: connections whose receivers are local (multicast rows)
	rxByKey  map[connKey]*rxConn
	vcs      map[[6]byte]*vconn // virtual connections by destination
	childMsg []int64            // spine: each child's newest partial's message
}

// vconn is a virtual connection's frame builder and PSN counter.
type vconn struct {
	b   *frames.Builder
	psn uint32
}

// rxConn is a ring connection whose receiver is under this leaf: the
// headers its results are rebuilt with, learned per message.
type rxConn struct {
	name  string
	b     *frames.Builder // from the connection's path, made on first sight
	path  frames.Path
	msgs  []rxMsg // message m at m mod 2N
	multi bool    // a multicast row exists (some first packet learned)
}

// rxMsg is what a leaf knows of one message of a connection.
type rxMsg struct {
	m                 int64 // -1: nothing
	first, last       bool
	psn0              uint32
	msgLen            int
	ina               frames.INAFields
	firstOp, lastOp   wire.Opcode
	firstAck, lastAck bool
	firstID, lastID   uint16
	reth              frames.RETHFields
	imm               uint32
	firstSE, lastSE   bool
}

// TreeQPN is the destination QPN of ring's switch-to-switch frames of
// opcode op: 0xFFFF00 (partials), 0xFFFE00 (totals) and 0xFFFD00
// (notifications), plus the RingID, so a fault can aim at them by qp=.
func TreeQPN(op wire.Opcode, ring uint8) uint32 {
	return 0xFFFF00 - uint32(op-wire.OpINAPartial)<<8 | uint32(ring)
}

// IsTreeQPN reports whether q is some ring's TreeQPN.
func IsTreeQPN(q uint32) bool { return q >= 0xFFFD00 && q <= 0xFFFFFF }

func (t *Tree) validate(cfg *RingConfig) error {
	if cfg.Release != Safe {
		return fmt.Errorf("netreduce: ring %d: multi-rack aggregation releases by the safe rule", cfg.ID)
	}
	if !t.Self.IP.Is4() || (t.Role == Leaf && !t.Parent.IP.Is4()) {
		return fmt.Errorf("netreduce: ring %d: switch nodes need IPv4 addresses", cfg.ID)
	}
	switch t.Role {
	case Leaf:
		if t.ParentPort < 0 || t.Child < 0 || t.Child >= MaxWorkers {
			return fmt.Errorf("netreduce: ring %d: leaf %s has no parent port or child index", cfg.ID, t.Self.Name)
		}
		if len(cfg.Conns) != cfg.Workers {
			return fmt.Errorf("netreduce: ring %d: a leaf needs all %d ring connections at setup", cfg.ID, cfg.Workers)
		}
	case Spine:
		if len(t.Children) != cfg.Workers || len(t.ChildPorts) != cfg.Workers {
			return fmt.Errorf("netreduce: ring %d: spine %s: %d children, %d ports, want %d", cfg.ID, t.Self.Name, len(t.Children), len(t.ChildPorts), cfg.Workers)
		}
	default:
		return fmt.Errorf("netreduce: ring %d: unknown tree role %d", cfg.ID, t.Role)
	}
	return nil
}

// newTreeRing sets up a ring's tree state (after AddRing's checks).
func (a *Accelerator) newTreeRing(r *ring) error {
	t := &treeRing{Tree: *r.cfg.Tree, vcs: map[[6]byte]*vconn{}, rxByKey: map[connKey]*rxConn{}}
	if a.self == nil {
		a.self = &t.Self
	} else if a.self.MAC != t.Self.MAC {
		return fmt.Errorf("netreduce: ring %d: switch %s already has MAC %x", r.cfg.ID, t.Self.Name, a.self.MAC)
	}
	twoN := 2 * r.cfg.Window
	for _, p := range t.Trunks {
		a.markFabricPort(p)
	}
	switch t.Role {
	case Leaf:
		a.markFabricPort(t.ParentPort)
		for _, c := range r.cfg.Conns {
			if !c.Remote {
				t.local = append(t.local, c.Rank)
			}
			if c.LocalDst {
				rx := &rxConn{name: c.Name, msgs: make([]rxMsg, twoN)}
				for i := range rx.msgs {
					rx.msgs[i].m = -1
				}
				t.rx = append(t.rx, rx)
				t.rxByKey[c.key()] = rx
			}
		}
		if len(t.local) == 0 {
			return fmt.Errorf("netreduce: ring %d: leaf %s has no local rank", r.cfg.ID, t.Self.Name)
		}
		slices.Sort(t.local)
		r.full = 0
		for _, k := range t.local {
			r.full |= 1 << k
		}
	case Spine:
		for _, p := range t.ChildPorts {
			a.markFabricPort(p)
		}
		t.childMsg = make([]int64, len(t.Children))
		for i := range t.childMsg {
			t.childMsg[i] = -1
		}
	}
	r.tree = t
	return nil
}

// markFabricPort records a port that joins this switch to another.
func (a *Accelerator) markFabricPort(p int) {
	if p < 0 {
		return
	}
	for len(a.fabricPort) <= p {
		a.fabricPort = append(a.fabricPort, false)
	}
	a.fabricPort[p] = true
}

func (a *Accelerator) isFabricPort(p int) bool {
	return p >= 0 && p < len(a.fabricPort) && a.fabricPort[p]
}

// transit judges a ring frame (not the tree's) that entered by a port
// joining this switch to another: it passes, unless it claims to be from
// a member attached to this switch, whose frames enter by its own port.
func (a *Accelerator) transit(v *frames.View) Verdict {
	if op := v.Opcode(); !isFirstOp(op) && !isLaterOp(op) {
		return NotINA
	}
	if c := a.clt[frameKey(v)]; c != nil && !c.remote {
		c.ring.stats.PortDrops++
		return Dropped
	}
	return NotINA
}

// processTree handles a switch-to-switch frame.
func (a *Accelerator) processTree(v *frames.View, port int, emit Emit) Verdict {
	if !a.isFabricPort(port) { // a host sending the switches' frames: forged
		a.noRing.PortDrops++
		return Dropped
	}
	if a.self == nil || [6]byte(v.DstMAC()) != a.self.MAC {
		return NotINA // in transit (a notification crossing the spine)
	}
	if !v.ICRCOK() {
		a.noRing.ICRCDrops++
		return Dropped
	}
	h, th := v.INATree()
	if th == nil {
		a.noRing.BadDrops++
		return Dropped
	}
	r := a.rings[h.RingID()]
	if r == nil || r.tree == nil {
		a.noRing.BadDrops++
		return Dropped
	}
	t, rs := r.tree, &r.stats
	op := v.Opcode()
	want := Leaf
	if op == wire.OpINAPartial {
		want = Spine
	}
	if t.Role != want {
		rs.BadDrops++
		return Dropped
	}
	m, off := int64(th.Msg()), int(th.Offset())
	data := v.Payload()[wire.INALen+wire.INATreeLen:]
	if op == wire.OpINANotify {
		if port != t.ParentPort {
			rs.PortDrops++
			return Dropped
		}
		return a.learnNotification(r, m, th, data)
	}
	if off >= r.cfg.MsgLen || int(h.MsgLen()) > r.cfg.MsgLen || h.MsgLen() == 0 || len(data) > r.cfg.MTU || len(data)%r.cfg.DType.Size() != 0 || uint8(m) != h.MsgID() {
		rs.BadDrops++
		return Dropped
	}
	g := &r.aggs[int(m%int64(2*r.cfg.Window))*r.cfg.MsgLen+off]
	if op == wire.OpINATotal {
		if port != t.ParentPort {
			rs.PortDrops++
			return Dropped
		}
		if g.msg != m || !g.done || len(data) != g.dataLen {
			rs.TreeStale++
			return Dropped
		}
		copy(g.sum, data)
		g.total = true
		r.released = max(r.released, m-int64(r.cfg.Window)+1)
		a.translate(r, g, m, off, v.CE(), emit)
		return Aggregated
	}
	// A partial at the spine.
	child := int(h.Rank())
	if child >= len(t.Children) {
		rs.BadDrops++
		return Dropped
	}
	if port != t.ChildPorts[child] {
		rs.PortDrops++
		return Dropped
	}
	if m > t.childMsg[child] {
		t.childMsg[child] = m
		r.releaseBelow(t.childMsg)
	}
	if g.msg != m {
		if m < r.released || g.msg > m || (g.msg >= 0 && g.msg >= r.released) {
			rs.TreeStale++
			return Dropped
		}
		g.msg, g.bitmap, g.done, g.total, g.ranks = m, 0, false, false, 0
	}
	rs.Packets++
	if (g.done || g.bitmap != 0) && len(data) != g.dataLen {
		rs.BadDrops++
		return Dropped
	}
	if g.done { // this child lost the total: it alone gets it again
		rs.TotalResends++
		a.sendTree(r, wire.OpINATotal, t.Children[child], m, off, g.msgLen, 0, g.ranks, g.sum[:g.dataLen], g.ce&r.full != 0, KindTotalResend, emit)
		return Resent
	}
	g.frames[child] = append(g.frames[child][:0], data...)
	g.dataOff[child], g.dataLen, g.msgLen = 0, len(data), h.MsgLen()
	g.bitmap |= 1 << child
	g.ranks |= th.Ranks()
	g.ce &^= 1 << child
	if v.CE() {
		g.ce |= 1 << child
	}
	if g.bitmap != r.full {
		return Aggregated
	}
	sum := g.sum[:g.dataLen]
	copy(sum, g.frames[0])
	for k := 1; k < len(t.Children); k++ {
		tensor.Add(r.cfg.DType, sum, g.frames[k][:g.dataLen])
	}
	g.done = true
	rs.Aggregations++
	n := uint64(len(t.Children))
	rs.DupSuppressed += n*n - n // every child's rows name every downlink
	ce := g.ce&r.full != 0
	for _, c := range t.Children {
		rs.TotalsSent++
		a.sendTree(r, wire.OpINATotal, c, m, off, g.msgLen, 0, g.ranks, sum, ce, KindTotal, emit)
	}
	return Aggregated
}

// sendTree emits a switch-to-switch frame to dst: INA header (rank is the
// child index of a partial), INATree header, data; CE-marked if ce.
func (a *Accelerator) sendTree(r *ring, op wire.Opcode, dst Node, m int64, off int, msgLen uint8, rank int, ranks uint64, data []byte, ce bool, kind Kind, emit Emit) {
	vc := a.vcTo(r, op, dst)
	pay := a.treePay[:wire.INATreeLen+len(data)]
	th := wire.INATree(pay)
	th.SetMsg(uint32(m))
	th.SetOffset(uint16(off))
	flags := uint8(0)
	if off == int(msgLen)-1 {
		flags = wire.INATreeLast
	}
	th.SetFlags(flags)
	th.SetRanks(ranks)
	copy(pay[wire.INATreeLen:], data)
	a.sendVC(r, vc, op, uint8(m), msgLen, rank, pay, ce, kind, emit)
}

// vcTo is the virtual connection from this switch to dst, which carries
// op's frames (a leaf's partials go to the spine, its notifications to
// other leaves, the spine's totals to leaves: one opcode per destination).
func (a *Accelerator) vcTo(r *ring, op wire.Opcode, dst Node) *vconn {
	t := r.tree
	vc := t.vcs[dst.MAC]
	if vc == nil {
		b, err := frames.NewBuilder(frames.Path{Transport: frames.V2IPv4, SrcMAC: hwAddr(t.Self.MAC), DstMAC: hwAddr(dst.MAC),
			SrcIP: t.Self.IP, DstIP: dst.IP, SrcPort: frames.UDPSourcePort(TreeQPN(op, r.cfg.ID)), DestQP: TreeQPN(op, r.cfg.ID),
			TClass: r.cfg.TClass})
		if err != nil {
			panic(err) // Tree.validate checked the addresses
		}
		vc = &vconn{b: b}
		t.vcs[dst.MAC] = vc
	}
	return vc
}

// hwAddr is a copy of mac as a slice (slicing the array itself would
// move a caller's Node to the heap on every call).
func hwAddr(mac [6]byte) net.HardwareAddr {
	return net.HardwareAddr{mac[0], mac[1], mac[2], mac[3], mac[4], mac[5]}
}

func (a *Accelerator) sendVC(r *ring, vc *vconn, op wire.Opcode, msgID, msgLen uint8, rank int, pay []byte, ce bool, kind Kind, emit Emit) {
	pkt := &a.pkt
	*pkt = frames.Packet{Opcode: op, PSN: vc.psn, HasINA: true,
		INA: frames.INAFields{RingID: r.cfg.ID, MsgID: msgID, MsgLen: msgLen, Rank: uint8(rank)}, Payload: pay}
	vc.psn = (vc.psn + 1) & wire.PSNMask
	n, err := vc.b.Build(a.out, pkt)
	if err != nil {
		panic(err) // a.out holds any frame of the ring's MTU
	}
	if ce {
		a.markCE(a.out[:n])
	}
	emit(a.out[:n], kind, &r.cfg)
}

// fetchTotal asks the spine again for the total of message m at offset
// off, which a leaf lacks when a local rank sends m + N into an
// aggregator still held by m - N: the leaf releases m - N only on m's
// total, and m's total never came. Its local ranks may not retransmit m
// at all (another leaf re-sent them m's results), so waiting for them
// would hold the aggregator forever. The partial sent again makes the
// spine, whose m is complete, send the total down this leaf's link alone;
// the rank's next retransmission of m + N then finds the aggregator free.
// (Releasing on the rank's word instead, m + N implying every rank holds
// m - N, would trust every host to keep its window.)
func (a *Accelerator) fetchTotal(r *ring, m int64, off int, emit Emit) {
	if m < 0 {
		return
	}
	g := &r.aggs[int(m%int64(2*r.cfg.Window))*r.cfg.MsgLen+off]
	if g.msg == m && g.done && !g.total {
		r.stats.PartialResends++
		a.sendPartial(r, g, m, off, KindPartialResend, emit)
	}
}

// sendPartial sends a leaf aggregator's partial sum up.
func (a *Accelerator) sendPartial(r *ring, g *agg, m int64, off int, kind Kind, emit Emit) {
	t := r.tree
	a.sendTree(r, wire.OpINAPartial, t.Parent, m, off, g.msgLen, t.Child, g.ranks, g.sum[:g.dataLen], g.ce&r.full != 0, kind, emit)
}

// notify hands the headers of a local sender's first or last packet of
// message m (in v) to the receiver's leaf: this one, or another by a
// notification frame.
func (a *Accelerator) notify(r *ring, c *conn, v *frames.View, m int64, off int, first bool, emit Emit) {
	if c.dstLocal {
		a.learn(r, v, m, first)
		return
	}
	f := v.Frame()
	block := v.PayloadOffset()
	if first {
		block += wire.INALen
	}
	pay := a.treePay[:wire.INATreeLen+block]
	th := wire.INATree(pay)
	th.SetMsg(uint32(m))
	th.SetOffset(uint16(off))
	flags := uint8(0)
	if !first {
		flags = wire.INATreeNotifyLast
	}
	th.SetFlags(flags)
	th.SetBlock(block, v.ICRCOffset()+wire.ICRCLen)
	copy(pay[wire.INATreeLen:], f[:block])
	vc := a.vcTo(r, wire.OpINANotify, c.peer)
	r.stats.NotifySent++
	a.sendVC(r, vc, wire.OpINANotify, uint8(m), uint8(c.msgLen), c.rank, pay, false, KindNotify, emit)
}

// learnNotification takes a notification that came down from the spine.
func (a *Accelerator) learnNotification(r *ring, m int64, th wire.INATree, block []byte) Verdict {
	n, flen := th.BlockLen(), th.FrameLen()
	if n > len(block) || flen < n || flen > len(a.out) {
		r.stats.BadDrops++
		return Dropped
	}
	// The header block, padded to the original frame's length, parses as
	// that frame (its payload bytes zero).
	f := a.rebuild[:flen]
	copy(f, block[:n])
	clear(f[n:])
	if a.nview.Parse(f) != nil {
		r.stats.BadDrops++
		return Dropped
	}
	first := th.Flags()&wire.INATreeNotifyLast == 0
	if first && (a.nview.PayloadOffset()+wire.INALen != n || !wire.IsINA(a.nview.Payload())) {
		r.stats.BadDrops++
		return Dropped
	}
	if !a.learn(r, &a.nview, m, first) {
		r.stats.BadDrops++
		return Dropped
	}
	return Aggregated
}

// learn records the headers of a first or last packet of message m of a
// connection whose receiver is under this leaf (a CTT multicast row).
func (a *Accelerator) learn(r *ring, v *frames.View, m int64, first bool) bool {
	rx := r.tree.rxByKey[frameKey(v)]
	if rx == nil {
		return false
	}
	if p := pathOf(v); rx.b == nil || !samePath(rx.path, p) {
		p.SrcMAC, p.DstMAC = slices.Clone(p.SrcMAC), slices.Clone(p.DstMAC) // p's view the frame
		b, err := frames.NewBuilder(p)
		if err != nil {
			return false
		}
		rx.b, rx.path = b, p
	}
	e := &rx.msgs[m%int64(len(rx.msgs))]
	if e.m != m {
		*e = rxMsg{m: m}
	}
	op := v.Opcode()
	id := uint16(0)
	if v.Transport() == frames.V2IPv4 {
		id = binary.BigEndian.Uint16(v.L3()[4:])
	}
	if first {
		h := wire.INA(v.Payload())
		reth := v.RETH()
		e.first, e.psn0, e.msgLen, e.firstOp, e.firstAck, e.firstID, e.firstSE = true, v.PSN(), int(h.MsgLen()), op, v.AckReq(), id, v.BTH().SE()
		e.ina = frames.INAFields{RingID: h.RingID(), MsgID: h.MsgID(), MsgLen: h.MsgLen(), Rank: h.Rank()}
		e.reth = frames.RETHFields{VA: reth.VA(), RKey: reth.RKey(), DMALen: reth.DMALen()}
		if imm, ok := v.Imm(); ok { // WRITE ONLY with immediate
			e.imm = imm
		}
		rx.multi = true
	} else {
		e.last, e.lastOp, e.lastAck, e.lastID, e.lastSE = true, op, v.AckReq(), id, v.BTH().SE()
		e.imm, _ = v.Imm()
	}
	r.stats.NotifyLearned++
	return true
}

// translate builds the result of packet off of message m from the total
// in g for every connection whose receiver is local, CE-marked if the
// total was (ce).
func (a *Accelerator) translate(r *ring, g *agg, m int64, off int, ce bool, emit Emit) {
	for _, rx := range r.tree.rx {
		e := &rx.msgs[m%int64(len(rx.msgs))]
		last := off == e.msgLen-1
		if rx.b == nil || e.m != m || !e.first || off >= e.msgLen || (last && off > 0 && !e.last) {
			r.stats.Untranslatable++
			continue
		}
		pkt := &a.pkt
		*pkt = frames.Packet{Opcode: wire.WriteMiddle, PSN: (e.psn0 + uint32(off)) & wire.PSNMask, Payload: g.sum[:g.dataLen]}
		id := e.firstID + uint16(off)
		switch {
		case off == 0:
			pkt.Opcode, pkt.AckReq, pkt.SE, pkt.RETH, pkt.HasINA, pkt.INA, pkt.Imm = e.firstOp, e.firstAck, e.firstSE, e.reth, true, e.ina, e.imm
		case last:
			pkt.Opcode, pkt.AckReq, pkt.SE, pkt.Imm, id = e.lastOp, e.lastAck, e.lastSE, e.imm, e.lastID
		}
		rx.b.SetIPID(id)
		n, err := rx.b.Build(a.out, pkt)
		if err != nil {
			r.stats.Untranslatable++
			continue
		}
		if ce {
			a.markCE(a.out[:n])
		}
		r.stats.Translated++
		emit(a.out[:n], KindTranslated, &r.cfg)
	}
}

// markCE sets the ECN field of a frame just built to CE.
func (a *Accelerator) markCE(f []byte) {
	if a.view.Parse(f) == nil {
		a.view.SetECN(frames.ECNCE)
	}
}

// pathOf is the addressing of the frame in v, as a Builder takes it. A CE
// mark is not addressing: the path keeps the frame's codepoint and sends
// ECT(0) in its place (the codepoint a RoCE NIC with ECN enabled sends;
// a mark met on the way hides whether the sender's was ECT(0) or ECT(1)),
// so one marked frame does not mark every result built from the path.
func pathOf(v *frames.View) frames.Path {
	f := v.Frame()
	p := frames.Path{Transport: v.Transport(), SrcMAC: net.HardwareAddr(f[6:12]), DstMAC: net.HardwareAddr(f[0:6]),
		SrcIP: v.SrcAddr(), DstIP: v.DstAddr(), SrcPort: v.UDPSrcPort(), PKey: v.BTH().PKey(), DestQP: v.DestQP()}
	if v.VLANs() > 0 {
		tci := binary.BigEndian.Uint16(f[14:])
		p.VLAN, p.VLANID, p.VLANPCP = true, tci&0x0FFF, uint8(tci>>13)
	}
	l3 := v.L3()
	switch v.Transport() {
	case frames.V2IPv4:
		p.TClass, p.HopLimit = l3[1], l3[8]
	default:
		g := wire.GRH(l3)
		p.TClass, p.FlowLabel, p.HopLimit = g.TClass(), g.FlowLabel(), g.HopLmt()
	}
	if p.TClass&3 == frames.ECNCE {
		p.TClass = p.TClass&^3 | frames.ECNECT0
	}
	return p
}

func samePath(a, b frames.Path) bool {
	return a.Transport == b.Transport && string(a.SrcMAC) == string(b.SrcMAC) && string(a.DstMAC) == string(b.DstMAC) &&
		a.VLAN == b.VLAN && a.VLANID == b.VLANID && a.VLANPCP == b.VLANPCP && a.SrcIP == b.SrcIP && a.DstIP == b.DstIP &&
		a.SrcPort == b.SrcPort && a.TClass == b.TClass && a.FlowLabel == b.FlowLabel && a.HopLimit == b.HopLimit &&
		a.PKey == b.PKey && a.DestQP == b.DestQP
}

// CTTEntry is one row of a switch's Connection Translation Table.
type CTTEntry struct {
	Direction string `json:"direction"` // aggregation, multicast, or both (the spine's rows)
	From      string `json:"from"`
	To        string `json:"to"`
}

// CTT is ring id's Connection Translation Table on this switch: the
// spine's rows from setup, a leaf's as its connections' first packets
// (and notifications) populated them.
func (a *Accelerator) CTT(id uint8) []CTTEntry {
	r := a.rings[id]
	if r == nil || r.tree == nil {
		return nil
	}
	t := r.tree
	vc := func(x, y Node) string { return x.Name + "→" + y.Name }
	var rows []CTTEntry
	switch t.Role {
	case Spine:
		for _, c := range t.Children {
			for _, d := range t.Children {
				rows = append(rows, CTTEntry{"aggregation and multicast", vc(c, t.Self), vc(t.Self, d)})
			}
		}
	case Leaf:
		for _, k := range t.local {
			if c := r.rankConn[k]; c != nil && c.msg >= 0 {
				rows = append(rows, CTTEntry{"aggregation", c.name, vc(t.Self, t.Parent)})
			}
		}
		for _, rx := range t.rx {
			if rx.multi {
				rows = append(rows, CTTEntry{"multicast", vc(t.Parent, t.Self), rx.name})
			}
		}
	}
	return rows
}
