// Package netreduce is the NetReduce aggregation accelerator (ASPLOS '23
// §3; the AllReduce-Switch of TCSI '21 is its pipelined hardware): the
// connection lookup table (CLT), an aggregator array of 2N messages per
// ring, per-rank payload slots with a bitmap, the sum formed in rank
// order, result packets rebuilt per connection with a fresh ICRC, and the
// result re-sent when a gradient packet arrives for a completed
// aggregator.
//
// It sees frames, not ports: the switch hands it every RoCE frame and
// routes what it emits by destination MAC, like any other frame.
//
// Points the papers leave open, settled here:
//   - Ingress ICRCs are verified before a frame touches the CLT or an
//     aggregator. The accelerator recomputes the ICRC of what it sends, so
//     aggregating a corrupted frame would launder the corruption.
//   - A packet's message is told by its PSN, never by the 8-bit MsgID
//     alone: every message but the last has exactly MsgLen packets, so the
//     PSN distance from a known message start gives the message (a running
//     count) and the offset in it. The distance is a signed 24-bit PSN
//     difference taken from the connection's latest message start, exact
//     for any frame within 2^23 packets of it, however late it arrives (a
//     connection never has that many in flight). A first packet's MsgID
//     must agree with the message its PSN names, and its PSN must fall on
//     a message start; otherwise it is dropped as bad. (An 8-bit MsgID
//     widened by an 8-bit difference takes a frame 128 messages old for a
//     future one.)
//   - The CLT only moves forward: a first packet of a message not newer
//     than the entry's (a duplicate or a go-back-N retransmission) is
//     aggregated but leaves the entry alone.
//   - A packet past the current message belongs to a message whose first
//     packet was lost: it is dropped (the paper's rule) until the sender
//     retransmits from that first packet.
//   - A ring connection is bound to the switch port its member sends from
//     (given at setup, or the port of its first frame): a frame with the
//     connection's addresses from any other port is dropped and counted,
//     and a rank claimed from one port cannot be claimed from another. The
//     switch trusts a member's port, not its addresses: an IP address and
//     QPN are easy to forge, the port a frame enters by is not.
//   - Release (which message may reuse an aggregator) is selectable; see
//     Release.
//
// A ring whose ranks sit under several leaves aggregates in the leaves and
// a spine (multi-rack, §3.3): see tree.go.
package netreduce

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

// Release is the rule that frees an aggregator for a later message.
type Release uint8

const (
	// Safe frees message m's aggregators once every rank has sent a first
	// packet of message m+N. A worker sends m+N only after its window
	// slid past m, that is after it received the whole result of m, so at
	// that point every connection's receiver holds m and nothing can need
	// m's result again. Aggregators know which message they hold; a frame
	// of a released message is a duplicate its receiver already has (its
	// PSN is behind the receiver's expected PSN), so it is forwarded
	// unchanged for the receiver to re-ACK and discard.
	Safe Release = iota
	// Paper is the rule as NetReduce §3.1 states it: a packet of MsgID
	// frees the aggregator (MsgID+N) % 2N at the same offset, and
	// aggregators are addressed by index alone.
	Paper
)

func (r Release) String() string { return [...]string{"safe", "paper"}[r&1] }

// ParseRelease reads safe or paper.
func ParseRelease(s string) (Release, error) {
	switch s {
	case "safe":
		return Safe, nil
	case "paper":
		return Paper, nil
	}
	return 0, fmt.Errorf("release rule %q: want safe or paper", s)
}

// Limits of a ring.
const (
	MaxWorkers = 64  // ranks per ring (one bitmap word)
	MaxWindow  = 32  // keeps 8-bit MsgIDs unambiguous: in flight spans < 2N+N
	MaxMsgLen  = 255 // the INA header's MsgLen is 8 bits
	// SlotFrameLen bounds a stored frame: MTU plus Ethernet, two VLAN
	// tags, IPv6/GRH, UDP, BTH, RETH, ImmDt, pad and ICRC.
	slotOverhead = 160
)

// Conn names one ring connection for the CLT: the sender's and receiver's
// addresses (IP, or GID for RoCEv1) and the receiver's QPN, and the
// sender's rank.
type Conn struct {
	Src, Dst netip.Addr
	DestQP   uint32
	Rank     int
	// Port is the switch port the sender's frames arrive on; AnyPort
	// binds the connection to the port of its first frame instead.
	Port int
	// StartPSN, when HasStart, is the PSN of the connection's first
	// packet (message 0); without it the first message start seen, with
	// its MsgID, anchors the count.
	StartPSN uint32
	HasStart bool
	// Multi-rack (RingConfig.Tree, a leaf): Remote says the sender is
	// under another leaf (its frames never enter this one from a host:
	// any that do are forged and dropped); LocalDst that the
	// receiver is under this one (its results are built here); Peer is
	// the receiver's leaf when it is another. Name names the connection
	// in the CTT.
	Remote   bool
	LocalDst bool
	Peer     Node
	Name     string
}

// AnyPort is a Conn.Port that binds on first sight.
const AnyPort = -1

// RingConfig describes one ring's aggregator array.
type RingConfig struct {
	ID      uint8
	Workers int // H
	Window  int // N messages in flight per worker
	MsgLen  int // packets per message
	MTU     int // payload bytes of a full packet
	DType   tensor.DType
	Release Release
	// Conns, if given, are the ring's connections, entered in the CLT at
	// setup (the control plane knows them when the job connects). A
	// packet of such a connection that arrives before any first packet of
	// it was seen is then dropped like any packet whose first packet was
	// lost. Without them the CLT learns connections from first packets
	// only, and a non-first packet of a connection it has not learned yet
	// must be forwarded as ordinary traffic: raw gradient bytes a
	// reordering link can still deliver in sequence to the receiver.
	Conns []Conn
	// Tree, if set, makes this switch a leaf or the spine of a multi-rack
	// ring (tree.go). A leaf's Workers are all the ring's ranks and its
	// Conns all the ring's connections; the spine's Workers are its
	// children (leaves).
	Tree *Tree
	// TClass is the traffic class (IPv4 TOS) of the switches' own frames
	// of a multi-rack ring: the job's, as its QPs send (DSCP<<2, with
	// ECT(0) when the job's congestion control reacts to ECN), so the
	// tree's partials, totals and notifications share the job's priority,
	// its PFC class and its RED marking. Their ECN field is ECT as given
	// here, or CE when a frame they aggregate arrived CE (tree.go).
	TClass uint8
}

// Kind says why a frame was emitted.
type Kind uint8

const (
	KindResult Kind = iota // an aggregator completed: one result per connection
	KindResend             // a gradient packet met a completed aggregator
	// Multi-rack (tree.go):
	KindPartial       // a leaf's partial sum, up
	KindPartialResend // a partial again: a retransmission met no total
	KindTotal         // the spine's total, down
	KindTotalResend   // a total again, to one leaf
	KindNotify        // a connection's first or last packet's headers, to the receiver's leaf
	KindTranslated    // a result a leaf built from a total for a local receiver
)

// Emit receives a frame the accelerator sends, why, and the ring it
// belongs to (its processing latency follows the ring's arithmetic); the
// frame is valid only during the call.
type Emit func(frame []byte, kind Kind, ring *RingConfig)

// Verdict is what became of a frame handed to Process.
type Verdict uint8

const (
	NotINA     Verdict = iota // not aggregation traffic: forward it as a switch would
	Aggregated                // stored in an aggregator (results emitted if it completed)
	Resent                    // its connection's result was emitted again
	Stale                     // a released message's duplicate: forward it unchanged
	Dropped                   // dropped; Stats says why
)

func (v Verdict) String() string {
	return [...]string{"not-ina", "aggregated", "resent", "stale", "dropped"}[v]
}

// Stats count the accelerator's work.
type Stats struct {
	Packets        uint64 `json:"packets"`          // aggregation packets accepted (ICRC good, addressed)
	Aggregations   uint64 `json:"aggregations"`     // aggregators completed
	ResultPackets  uint64 `json:"result_packets"`   // results emitted on completion
	ResultResends  uint64 `json:"result_resends"`   // results emitted again
	CLTMisses      uint64 `json:"clt_misses"`       // non-first WRITE packets of no known connection (forwarded)
	CLTUpdates     uint64 `json:"clt_updates"`      // first packets that moved a CLT entry forward
	StaleFirsts    uint64 `json:"stale_firsts"`     // first packets that did not (duplicates, retransmissions)
	ICRCDrops      uint64 `json:"icrc_drops"`       // aggregation packets with a bad ICRC
	FirstLostDrops uint64 `json:"first_lost_drops"` // packets of a message whose first packet was not seen
	StaleForwards  uint64 `json:"stale_forwards"`   // duplicates of released messages, forwarded
	WindowDrops    uint64 `json:"window_drops"`     // packets for an aggregator still held by an unreleased message
	BadDrops       uint64 `json:"bad_drops"`        // bad INA header, ring, rank, opcode, length, or a first packet off a message start
	PortDrops      uint64 `json:"port_drops"`       // a member connection's or rank's frames from a port other than the member's
	TreeStats
}

// Add adds another accelerator's counters (a run's switches together).
func (s *Stats) Add(x Stats) {
	s.Packets += x.Packets
	s.Aggregations += x.Aggregations
	s.ResultPackets += x.ResultPackets
	s.ResultResends += x.ResultResends
	s.CLTMisses += x.CLTMisses
	s.CLTUpdates += x.CLTUpdates
	s.StaleFirsts += x.StaleFirsts
	s.ICRCDrops += x.ICRCDrops
	s.FirstLostDrops += x.FirstLostDrops
	s.StaleForwards += x.StaleForwards
	s.WindowDrops += x.WindowDrops
	s.BadDrops += x.BadDrops
	s.PortDrops += x.PortDrops
	s.TreeStats.add(x.TreeStats)
}

type connKey struct {
	src, dst netip.Addr
	qp       uint32
}

// key is the CLT key of a ring connection given at setup.
func (c Conn) key() connKey { return connKey{c.Src.Unmap(), c.Dst.Unmap(), c.DestQP & wire.PSNMask} }

// frameKey is the CLT key of the connection a frame belongs to.
func frameKey(v *frames.View) connKey {
	return connKey{v.SrcAddr().Unmap(), v.DstAddr().Unmap(), v.DestQP()}
}

// conn is a CLT entry.
type conn struct {
	ring   *ring
	rank   int
	port   int   // the member's switch port; AnyPort until its first frame
	msg    int64 // newest message whose first packet was seen; -1 before
	msgLen int   // packets of that message (its INA header's MsgLen)
	// The anchor: message aMsg starts at PSN aPSN. Set from StartPSN or
	// the first message start seen, moved to each newer one.
	anchored bool
	aMsg     int64
	aPSN     uint32
	// Multi-rack: the connection's name, and where its receiver is.
	name     string
	dstLocal bool
	peer     Node
	remote   bool // its sender is under another leaf: never enters here from a host
}

// locate is the message and offset of the packet with psn, from the
// anchor: exact for any PSN within 2^23 of it.
func (c *conn) locate(psn uint32) (m int64, off int) {
	L := int64(c.ring.cfg.MsgLen)
	d := int64(wire.PSNDiff(psn, c.aPSN))
	dm := d / L
	if d%L < 0 {
		dm--
	}
	return c.aMsg + dm, int(d - dm*L)
}

type agg struct {
	msg     int64 // Safe: the message held, -1 none
	bitmap  uint64
	done    bool
	dataLen int
	sum     []byte
	frames  [][]byte // per rank: the stored frame (len = frame length); the spine's: per child, its partial
	dataOff []int    // per rank: where the summed data starts in it
	// Multi-rack: the message's MsgLen, the ranks in the sum, and, at a
	// leaf, whether sum holds the spine's total (else the partial); ce has
	// bit k set when rank k's stored frame (the spine: child k's partial)
	// arrived CE-marked.
	msgLen uint8
	ranks  uint64
	total  bool
	ce     uint64
}

type ring struct {
	cfg      RingConfig
	aggs     []agg
	full     uint64
	rankConn []*conn
	rankMsg  []int64
	released int64 // Safe: messages below this are released
	stats    Stats // the accelerator's counters of this ring's frames
	tree     *treeRing
}

// Accelerator is the aggregation engine of one switch. Not safe for
// concurrent use.
type Accelerator struct {
	noRing  Stats // counters of frames tied to no ring
	rings   [256]*ring
	clt     map[connKey]*conn
	scratch []byte
	view    frames.View
	// Multi-rack (tree.go).
	hostRings  int         // rings that take host frames (single or leaf)
	trees      int         // rings with a Tree
	self       *Node       // this switch's virtual connection end
	fabricPort []bool      // per port: joins another switch
	treePay    []byte      // scratch: an internal frame's payload
	out        []byte      // scratch: a frame built
	rebuild    []byte      // scratch: a notification's headers as a frame
	nview      frames.View // parses rebuild
	pkt        frames.Packet
}

// New returns an accelerator with no rings.
func New() *Accelerator {
	return &Accelerator{clt: map[connKey]*conn{}}
}

// AddRing allocates the aggregator array of a ring (the job's setup).
func (a *Accelerator) AddRing(cfg RingConfig) error {
	switch {
	case a.rings[cfg.ID] != nil:
		return fmt.Errorf("netreduce: ring %d already exists", cfg.ID)
	case cfg.Workers < 2 || cfg.Workers > MaxWorkers:
		return fmt.Errorf("netreduce: %d workers: want 2..%d", cfg.Workers, MaxWorkers)
	case cfg.Window < 1 || cfg.Window > MaxWindow:
		return fmt.Errorf("netreduce: window %d: want 1..%d", cfg.Window, MaxWindow)
	case cfg.MsgLen < 1 || cfg.MsgLen > MaxMsgLen:
		return fmt.Errorf("netreduce: msg-len %d packets: want 1..%d", cfg.MsgLen, MaxMsgLen)
	case cfg.MTU < 256 || cfg.MTU > 4096:
		return fmt.Errorf("netreduce: MTU %d: want 256..4096", cfg.MTU)
	case cfg.DType > tensor.F16:
		return fmt.Errorf("netreduce: unknown dtype %d", cfg.DType)
	}
	if cfg.Tree != nil {
		if err := cfg.Tree.validate(&cfg); err != nil {
			return err
		}
	}
	r := &ring{cfg: cfg, full: 1<<cfg.Workers - 1, rankConn: make([]*conn, cfg.Workers), rankMsg: make([]int64, cfg.Workers)}
	if cfg.Workers == 64 {
		r.full = ^uint64(0)
	}
	for i := range r.rankMsg {
		r.rankMsg[i] = -1
	}
	n := 2 * cfg.Window * cfg.MsgLen
	slotLen, slotted := cfg.slots()
	// One slab: untouched pages cost nothing until an aggregator is used.
	slab := make([]byte, n*(len(slotted)*slotLen+cfg.MTU))
	frameSlices := make([][]byte, n*cfg.Workers)
	offs := make([]int, n*cfg.Workers)
	r.aggs = make([]agg, n)
	for i := range r.aggs {
		g := &r.aggs[i]
		g.msg = -1
		g.sum, slab = slab[:cfg.MTU:cfg.MTU], slab[cfg.MTU:]
		g.frames, frameSlices = frameSlices[:cfg.Workers:cfg.Workers], frameSlices[cfg.Workers:]
		g.dataOff, offs = offs[:cfg.Workers:cfg.Workers], offs[cfg.Workers:]
		for _, k := range slotted {
			g.frames[k], slab = slab[:0:slotLen], slab[slotLen:]
		}
	}
	seenRank, seenKey, seenPort := map[int]bool{}, map[connKey]bool{}, map[int]bool{}
	for _, c := range cfg.Conns {
		k := c.key()
		bad := c.Rank < 0 || c.Rank >= cfg.Workers || seenRank[c.Rank] || seenKey[k] || a.clt[k] != nil
		seenRank[c.Rank], seenKey[k] = true, true
		if bad {
			return fmt.Errorf("netreduce: ring %d connection %v→%v QP %#x rank %d: bad rank or already known", cfg.ID, c.Src, c.Dst, c.DestQP, c.Rank)
		}
		// Each member sends from its own port (a Conn without Port would
		// bind every member to port 0).
		if c.Port < AnyPort || (c.Port != AnyPort && seenPort[c.Port]) {
			return fmt.Errorf("netreduce: ring %d rank %d: port %d is another member's or not a port (AnyPort to learn it)", cfg.ID, c.Rank, c.Port)
		}
		seenPort[c.Port] = c.Port != AnyPort
	}
	for _, c := range cfg.Conns {
		if c.Remote {
			// Its frames enter another leaf: one from a host port here
			// is forged.
			a.clt[c.key()] = &conn{ring: r, rank: c.Rank, msg: -1, remote: true}
			continue
		}
		e := &conn{ring: r, rank: c.Rank, msg: -1, port: max(c.Port, AnyPort), anchored: c.HasStart, aPSN: c.StartPSN & wire.PSNMask,
			name: c.Name, dstLocal: c.LocalDst, peer: c.Peer}
		a.clt[c.key()] = e
		r.rankConn[c.Rank] = e
	}
	if cfg.Tree != nil {
		if err := a.newTreeRing(r); err != nil {
			for _, c := range cfg.Conns {
				delete(a.clt, c.key())
			}
			return err
		}
		a.trees++
	}
	if cfg.Tree == nil || cfg.Tree.Role == Leaf {
		a.hostRings++
	}
	frameLen := cfg.MTU + slotOverhead + wire.INATreeLen
	if len(a.scratch) < frameLen {
		a.scratch, a.out, a.rebuild, a.treePay = make([]byte, frameLen), make([]byte, frameLen), make([]byte, frameLen), make([]byte, frameLen)
	}
	a.rings[cfg.ID] = r
	return nil
}

// slots are the length of an aggregator's stored frames and whose they
// are: every rank's (one switch), the local ranks' (a leaf), each child's
// partial (the spine, data only).
func (c RingConfig) slots() (slotLen int, who []int) {
	slotLen = c.MTU + slotOverhead
	switch {
	case c.Tree != nil && c.Tree.Role == Spine:
		slotLen = c.MTU
		for k := range c.Workers {
			who = append(who, k)
		}
	case c.Tree != nil:
		for _, x := range c.Conns {
			if !x.Remote {
				who = append(who, x.Rank)
			}
		}
	default:
		for k := range c.Workers {
			who = append(who, k)
		}
	}
	return slotLen, who
}

// MemoryBytes is what a ring's aggregator array takes in the switch:
// 2·Window·MsgLen aggregators, each holding one frame slot per rank (a
// packet's headers are kept to answer on its connection) and the sum.
func (c RingConfig) MemoryBytes() int64 {
	slotLen, who := c.slots()
	return int64(2*c.Window*c.MsgLen) * int64(len(who)*slotLen+c.MTU)
}

// MemoryBytes is the memory of every ring's aggregator array.
func (a *Accelerator) MemoryBytes() int64 {
	var n int64
	for _, r := range a.rings {
		if r != nil {
			n += r.cfg.MemoryBytes()
		}
	}
	return n
}

// Stats are the accelerator's counters: every ring's and those of frames
// tied to no ring.
func (a *Accelerator) Stats() Stats {
	st := a.noRing
	for _, r := range a.rings {
		if r != nil {
			st.Add(r.stats)
		}
	}
	return st
}

// RingStats are the counters of ring id's frames (those the accelerator
// could tie to the ring: by its INA header's RingID or its connection), a
// tenant's share of Stats; ok is false for a ring not set up.
func (a *Accelerator) RingStats(id uint8) (st Stats, ok bool) {
	if r := a.rings[id]; r != nil {
		return r.stats, true
	}
	return Stats{}, false
}

// Released is the number of leading messages of ring id whose aggregators
// are free again (Safe rule); -1 if there is no such ring.
func (a *Accelerator) Released(id uint8) int64 {
	if r := a.rings[id]; r != nil {
		return max(r.released, 0)
	}
	return -1
}

func isFirstOp(op wire.Opcode) bool {
	return op == wire.WriteFirst || op == wire.WriteOnly || op == wire.WriteOnlyWithImm
}

func isLaterOp(op wire.Opcode) bool {
	return op == wire.WriteMiddle || op == wire.WriteLast || op == wire.WriteLastWithImm
}

// Process handles one frame the switch received on port, parsed into v
// (which Process may re-use). Emitted frames go to emit before Process
// returns.
func (a *Accelerator) Process(v *frames.View, port int, emit Emit) Verdict {
	op := v.Opcode()
	if a.trees > 0 {
		switch {
		case wire.IsINATree(op):
			return a.processTree(v, port, emit)
		case a.hostRings == 0:
			return NotINA // host traffic crossing a spine
		case a.isFabricPort(port):
			return a.transit(v) // host traffic between racks, by any path
		}
	}
	first, later := isFirstOp(op), isLaterOp(op)
	if !first && !later {
		return NotINA
	}
	pay := v.Payload()
	key := frameKey(v)
	psn := v.PSN()
	c := a.clt[key]
	if c != nil && c.remote {
		c.ring.stats.PortDrops++ // another leaf's member's frame, from a host of this one
		return Dropped
	}
	var h wire.INA
	// A frame counts for its ring (rs) once the ring is known, else for
	// no ring.
	var rs *Stats
	if first && wire.IsINA(pay) {
		if !v.ICRCOK() {
			a.noRing.ICRCDrops++
			return Dropped
		}
		h = wire.INA(pay)
		r := a.rings[h.RingID()]
		if r == nil {
			a.noRing.BadDrops++
			return Dropped
		}
		rs = &r.stats
		rank := int(h.Rank())
		if rank >= r.cfg.Workers || h.MsgLen() == 0 || int(h.MsgLen()) > r.cfg.MsgLen || (r.tree != nil && r.tree.Role == Spine) {
			rs.BadDrops++
			return Dropped
		}
		if c == nil && r.tree != nil { // a leaf knows its ring's connections from setup
			rs.PortDrops++
			return Dropped
		}
		if c == nil {
			if o := r.rankConn[rank]; o != nil { // a second connection claiming the rank
				if o.port != port && o.port != AnyPort {
					rs.PortDrops++
				} else {
					rs.BadDrops++
				}
				return Dropped
			}
			c = &conn{ring: r, rank: rank, msg: -1, port: port}
			a.clt[key] = c
			r.rankConn[rank] = c
		} else if c.ring != r || c.rank != rank {
			if c.port != port && c.port != AnyPort {
				rs.PortDrops++
			} else {
				rs.BadDrops++
			}
			return Dropped
		}
	} else {
		if c == nil {
			if later { // a FIRST/ONLY without the header is an ordinary WRITE
				a.noRing.CLTMisses++
			}
			return NotINA
		}
		rs = &c.ring.stats
		if !v.ICRCOK() { // first: a corrupted header is corruption, not a protocol error
			rs.ICRCDrops++
			return Dropped
		}
	}
	if c.port == AnyPort {
		c.port = port
	} else if c.port != port {
		rs.PortDrops++ // a member's addresses from another port: forged
		return Dropped
	}
	if first && h == nil { // an INA connection's message must start with the header
		rs.BadDrops++
		return Dropped
	}
	if first && !c.anchored {
		c.anchored, c.aMsg, c.aPSN = true, int64(h.MsgID()), psn
	}
	if !c.anchored { // a known connection whose first message start has not come yet
		rs.FirstLostDrops++
		return Dropped
	}
	m, off := c.locate(psn)
	if first {
		if off != 0 || m < 0 || uint8(m) != h.MsgID() { // off a message start, or the MsgID disagrees
			rs.BadDrops++
			return Dropped
		}
		if m > c.msg {
			c.msg, c.msgLen = m, int(h.MsgLen())
			c.aMsg, c.aPSN = m, psn
			c.ring.advance(c.rank, m)
			rs.CLTUpdates++
		} else {
			rs.StaleFirsts++
		}
	} else {
		switch {
		case m > c.msg || (m == c.msg && off >= c.msgLen): // its first packet was not seen
			rs.FirstLostDrops++
			return Dropped
		case off == 0 || m < 0: // message boundaries do not match MsgLen
			rs.BadDrops++
			return Dropped
		}
	}
	r := c.ring
	data := pay
	if off == 0 {
		data = pay[wire.INALen:]
	}
	if len(pay) > r.cfg.MTU || len(data)%r.cfg.DType.Size() != 0 || len(v.Frame()) > r.cfg.MTU+slotOverhead {
		rs.BadDrops++
		return Dropped
	}
	w := int64(r.cfg.Window)
	g := &r.aggs[int(m%(2*w))*r.cfg.MsgLen+off]
	if r.cfg.Release == Paper {
		// The paper's rule: this packet frees the aggregator one window ahead.
		f := &r.aggs[int((m+w)%(2*w))*r.cfg.MsgLen+off]
		f.bitmap, f.done = 0, false
	} else if g.msg != m {
		if m < r.released || g.msg > m {
			rs.StaleForwards++
			return Stale
		}
		if g.msg >= 0 && g.msg >= r.released {
			rs.WindowDrops++
			if r.tree != nil {
				a.fetchTotal(r, m-w, off, emit)
			}
			return Dropped
		}
		g.msg, g.bitmap, g.done, g.total, g.ranks = m, 0, false, false, 0
	}
	rs.Packets++
	leaf := r.tree != nil
	if leaf && (first || op != wire.WriteMiddle) {
		// The receiver's leaf learns the message's headers (a CTT
		// notification): from the first packet, and the last's ImmDt.
		a.notify(r, c, v, m, off, first, emit)
	}
	if g.done && leaf && !g.total { // the partial went up, no total came: again
		if len(data) != g.dataLen {
			rs.BadDrops++
			return Dropped
		}
		rs.PartialResends++
		a.sendPartial(r, g, m, off, KindPartialResend, emit)
		return Resent
	}
	if g.done {
		if len(data) != g.dataLen {
			rs.BadDrops++
			return Dropped
		}
		out := a.scratch[:len(v.Frame())]
		copy(out, v.Frame())
		copy(out[v.PayloadOffset()+len(pay)-len(data):], g.sum[:g.dataLen])
		a.fixICRC(out)
		rs.ResultResends++
		emit(out, KindResend, &r.cfg)
		return Resent
	}
	if g.bitmap != 0 && len(data) != g.dataLen {
		rs.BadDrops++ // ranks disagree on the packet's length
		return Dropped
	}
	rank := c.rank
	fr := v.Frame()
	g.frames[rank] = append(g.frames[rank][:0], fr...)
	g.dataOff[rank] = v.PayloadOffset() + len(pay) - len(data)
	g.dataLen = len(data)
	g.bitmap |= 1 << rank
	if leaf { // the partial is marked if any contribution was (tree.go)
		g.ce &^= 1 << rank
		if v.CE() {
			g.ce |= 1 << rank
		}
	}
	if g.bitmap != r.full {
		return Aggregated
	}
	if leaf {
		// The local ranks' sum in rank order goes up, once for all of
		// the local connections' CTT rows.
		g.msgLen = uint8(c.msgLen)
		if m < c.msg || c.msgLen == 0 {
			g.msgLen = uint8(r.cfg.MsgLen) // an older message: every one but the last is full
		}
		t := r.tree
		sum := g.sum[:g.dataLen]
		copy(sum, g.frames[t.local[0]][g.dataOff[t.local[0]]:])
		for _, k := range t.local[1:] {
			tensor.Add(r.cfg.DType, sum, g.frames[k][g.dataOff[k]:g.dataOff[k]+g.dataLen])
		}
		g.done, g.ranks = true, r.full
		rs.Aggregations++
		rs.PartialsSent++
		rs.DupSuppressed += uint64(len(t.local) - 1)
		a.sendPartial(r, g, m, off, KindPartial, emit)
		return Aggregated
	}
	// Complete: the sum in rank order, then one result per connection.
	sum := g.sum[:g.dataLen]
	copy(sum, g.frames[0][g.dataOff[0]:])
	for k := 1; k < r.cfg.Workers; k++ {
		tensor.Add(r.cfg.DType, sum, g.frames[k][g.dataOff[k]:g.dataOff[k]+g.dataLen])
	}
	g.done = true
	rs.Aggregations++
	// Every result ends with the same covered bytes (the sum, then the
	// pad): they are hashed once, and each connection's ICRC only over
	// its own headers (frames.TailCRC).
	var tail frames.TailCRC
	var tailBytes []byte // what tail was made of: the sum and a pad
	for k := 0; k < r.cfg.Workers; k++ {
		f := g.frames[k]
		copy(f[g.dataOff[k]:], sum)
		if a.view.Parse(f) == nil {
			end := a.view.ICRCOffset()
			// The sum was just copied into every frame: only the pads can differ.
			if t := f[g.dataOff[k]:end]; tailBytes == nil || len(t) != len(tailBytes) || !bytes.Equal(t[g.dataLen:], tailBytes[g.dataLen:]) {
				tail, tailBytes = frames.NewTailCRC(t), t
			}
			binary.LittleEndian.PutUint32(f[end:], a.view.ICRCWithTail(tail))
		}
		rs.ResultPackets++
		emit(f, KindResult, &r.cfg)
	}
	return Aggregated
}

// fixICRC recomputes the ICRC of a frame the accelerator rebuilt.
func (a *Accelerator) fixICRC(f []byte) {
	if a.view.Parse(f) == nil {
		a.view.SetICRC()
	}
}

// advance records that rank's connection reached message m and recomputes
// the Safe release point: every message below min(rankMsg) - N + 1.
func (r *ring) advance(rank int, m int64) {
	r.rankMsg[rank] = m
	r.releaseBelow(r.rankMsg)
}

// releaseBelow raises the Safe release point given each member's newest
// message (-1: none yet): every message below their minimum - N + 1.
func (r *ring) releaseBelow(newest []int64) {
	low := newest[0]
	for _, x := range newest[1:] {
		low = min(low, x)
	}
	if low >= 0 {
		r.released = max(r.released, low-int64(r.cfg.Window)+1)
	}
}
