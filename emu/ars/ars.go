package ars

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/tensor"
)

// Name is the program's name (--switch-program ars).
const Name = "ars"

// HeaderLen is the NCCL header a WRITE FIRST carries before its data
// (Table IV): NetReduce's 8-byte INA header, then 12 reserved bytes that
// must be zero. WRITE MIDDLE and LAST carry none.
const HeaderLen = 20

// PayloadSlot is the fixed layer-5 payload of an aggregation frame
// (Table IV): the size of one frame's payload buffer.
const PayloadSlot = 1024

// headerSlot is the Frame Header Buffer's room per frame: Ethernet, two
// VLAN tags, GRH or IPv6, UDP, BTH, RETH, ImmDt and ICRC fit in 128 bytes.
const headerSlot = 128

// Limits a ring must meet to fit the buffers.
const (
	MaxWorkers = 26 // AGG_PORT_CFG's port-enable bits (Table VII)
	// MaxWindow: a worker sends message m+N only once result m reached it,
	// and a connection that lost result m can hold every other worker
	// back until m+N-1 completes, so 2N messages may need their slots
	// (their results) at once. The FSB holds 4 flows.
	MaxWindow = Flows / 2
)

// Stats count the program's work.
type Stats struct {
	Packets       uint64 `json:"packets"`        // aggregation frames stored
	Flows         uint64 `json:"flows"`          // WRITE FIRSTs that started a flow (a column taken)
	Aggregations  uint64 `json:"aggregations"`   // frame indices completed
	ResultPackets uint64 `json:"result_packets"` // results sent on completion
	ResultResends uint64 `json:"result_resends"` // results sent again, from the buffer
	EarlyResends  uint64 `json:"early_resends"`  // a frame sent again before its index completed (absorbed: its data is stored)
	FirstResends  uint64 `json:"first_resends"`  // WRITE FIRSTs that re-read their recorded column
	// Dropped: FirstLost, a later frame whose flow's WRITE FIRST was not
	// seen; Gap, a WRITE FIRST past the next expected flow; Busy, a frame
	// whose index still holds an older message some worker may need;
	// ICRC, a corrupted aggregation frame; Bad, a malformed one; Port, a
	// member's frame from another port.
	FirstLostDrops uint64 `json:"first_lost_drops"`
	GapDrops       uint64 `json:"gap_drops"`
	BusyDrops      uint64 `json:"busy_drops"`
	ICRCDrops      uint64 `json:"icrc_drops"`
	BadDrops       uint64 `json:"bad_drops"`
	PortDrops      uint64 `json:"port_drops"`
	// StaleForwards: a frame of a message its index no longer holds,
	// forwarded unchanged (its receiver has it and discards it).
	StaleForwards uint64 `json:"stale_forwards"`
	// The output arbiter: grants that waited, and the total wait (ns).
	ArbiterWaits  uint64 `json:"arbiter_waits"`
	ArbiterWaitNS int64  `json:"arbiter_wait_ns"`
}

// Report is what the program reports: its counters and its rings.
type Report struct {
	Stats
	Rings       int   `json:"rings"`
	MemoryBytes int64 `json:"memory_bytes"`
}

// Clock is the switch's clock (the arbiter books its grants in it).
type Clock interface{ Now() time.Duration }

// Program is the AllReduce-Switch program of one switch. Not safe for
// concurrent use.
type Program struct {
	timing switching.Timing
	clock  Clock
	rings  [256]*ring
	nrings int
	conns  map[connKey]*member
	st     Stats
	view   frames.View
	out    []byte
}

var _ switching.Program = (*Program)(nil)

// New returns the program with no ring; t zero means
// switching.DefaultTiming, a nil clock stands still at 0.
func New(t switching.Timing, clock Clock) *Program {
	if t == (switching.Timing{}) {
		t = switching.DefaultTiming
	}
	return &Program{timing: t, clock: clock, conns: map[connKey]*member{}}
}

func (p *Program) Name() string { return Name }

// INAHeaderLen is the header the hosts put before a message's data.
func (p *Program) INAHeaderLen() int { return HeaderLen }

type connKey struct {
	src, dst netip.Addr
	qp       uint32
}

// member is one aggregation port: its Frame Analyzer's aggregation QP
// (with the connection's addresses) and its Aggregation Frame Handler's
// Frame Status Buffer, header and payload buffers.
type member struct {
	ring *ring
	rank int
	port int // switching port; netreduce.AnyPort until its first frame
	fsb  *fsb
	// frames[i] is the frame stored at index i (headers, NCCL header,
	// data), dataOff[i] where its data starts.
	frames  [BufferSlots][]byte
	dataOff [BufferSlots]int
	// The next flow: its WRITE FIRST's PSN (once known) and message.
	next    uint32
	hasNext bool
	flows   int64
}

// slot is one frame index's shared state: the Aggregation Status Buffer
// (which ranks contributed), the result buffer and whether it was sent.
type slot struct {
	msg     int64 // the message the index holds; -1 none
	ranks   uint64
	done    bool
	sent    bool
	dataLen int
	result  []byte
}

type ring struct {
	cfg     netreduce.RingConfig
	full    uint64
	members []*member // by rank
	slots   [BufferSlots]slot
	newest  []int64 // per rank: its newest flow's message (-1 none)
	// released: every message below it reached every receiver (each rank
	// sent a flow N messages later), so its index may be reused.
	released int64
	// arb is the ring's output arbiter: like its buffers, each ring
	// (tenant) has its own, as if AGG_PORT_CFG were per group, so one
	// tenant's re-sends never delay another's results (the tenants
	// conformance suite holds every other job's virtual time to the run
	// without the faults).
	arb arbiter
}

// AddRing sets up a ring: its members' ports, QPs and first PSNs.
func (p *Program) AddRing(cfg netreduce.RingConfig) error {
	switch {
	case p.rings[cfg.ID] != nil:
		return fmt.Errorf("ars: ring %d already exists", cfg.ID)
	case cfg.Tree != nil:
		return fmt.Errorf("ars: ring %d spans racks: the AllReduce-Switch aggregates the ports of one switch", cfg.ID)
	case cfg.Workers < 2 || cfg.Workers > MaxWorkers:
		return fmt.Errorf("ars: %d workers: the AllReduce-Switch aggregates 2..%d ports", cfg.Workers, MaxWorkers)
	case cfg.Window < 1 || cfg.Window > MaxWindow:
		return fmt.Errorf("ars: window %d: the Frame Status Buffer holds %d flows, 2×window of them may be needed at once: want --window 1..%d", cfg.Window, Flows, MaxWindow)
	case cfg.MsgLen < 1 || cfg.MsgLen > FlowFrames:
		return fmt.Errorf("ars: msg-len %d packets: a flow has at most %d frames: want --msg-len 1..%d", cfg.MsgLen, FlowFrames, FlowFrames)
	case cfg.MTU < 256 || cfg.MTU > PayloadSlot:
		return fmt.Errorf("ars: MTU %d: an aggregation frame's payload buffer is %d bytes: want --mtu 256..%d", cfg.MTU, PayloadSlot, PayloadSlot)
	case cfg.DType != tensor.F32 && cfg.DType != tensor.I32:
		return fmt.Errorf("ars: dtype %v: the adders are 32-bit fixed and floating point (AGG_MODE): want i32 or f32", cfg.DType)
	}
	r := &ring{cfg: cfg, full: 1<<cfg.Workers - 1, members: make([]*member, cfg.Workers), newest: make([]int64, cfg.Workers)}
	for i := range r.newest {
		r.newest[i] = -1
	}
	for i := range r.slots {
		r.slots[i].msg = -1
	}
	ports := map[int]bool{}
	for _, c := range cfg.Conns {
		k := connKey{c.Src.Unmap(), c.Dst.Unmap(), c.DestQP & wire.PSNMask}
		switch {
		case c.Remote:
			return fmt.Errorf("ars: ring %d rank %d: remote connections are multi-rack's", cfg.ID, c.Rank)
		case c.Rank < 0 || c.Rank >= cfg.Workers || r.members[c.Rank] != nil || p.conns[k] != nil:
			return fmt.Errorf("ars: ring %d connection %v→%v QP %#x rank %d: bad rank or already known", cfg.ID, c.Src, c.Dst, c.DestQP, c.Rank)
		case c.Port < netreduce.AnyPort || c.Port != netreduce.AnyPort && ports[c.Port]:
			return fmt.Errorf("ars: ring %d rank %d: port %d is another member's or not a port", cfg.ID, c.Rank, c.Port)
		}
		ports[c.Port] = c.Port != netreduce.AnyPort
		m := &member{ring: r, rank: c.Rank, port: c.Port, fsb: newFSB(), next: c.StartPSN & wire.PSNMask, hasNext: c.HasStart}
		r.members[c.Rank] = m
		p.conns[k] = m
	}
	p.rings[cfg.ID] = r
	p.nrings++
	if len(p.out) == 0 {
		p.out = make([]byte, PayloadSlot+headerSlot)
	}
	return nil
}

// HasRing reports whether ring id is set up.
func (p *Program) HasRing(id uint8) bool { return p.rings[id] != nil }

// MemoryBytes is the buffers' on-chip memory: per ring, every member
// port's 512 frame slots (header and payload buffers) and the shared
// 512-frame result buffer; the status bits are noise beside them.
func (p *Program) MemoryBytes() int64 {
	var n int64
	for _, r := range p.rings {
		if r != nil {
			n += ringMemory(r.cfg.Workers)
		}
	}
	return n
}

// RingMemoryBytes is what AddRing(cfg) adds to MemoryBytes
// (netreduce.RingMemory): a job's memory estimate and report use it.
func (p *Program) RingMemoryBytes(cfg netreduce.RingConfig) int64 { return ringMemory(cfg.Workers) }

func ringMemory(workers int) int64 {
	return int64(BufferSlots) * (int64(workers)*(headerSlot+PayloadSlot) + PayloadSlot)
}

// Report is the program's counters (switching.Program).
func (p *Program) Report() any { return p.Stats() }

// Stats is the program's report, typed.
func (p *Program) Stats() Report {
	st := p.st
	for _, r := range p.rings {
		if r != nil {
			st.ArbiterWaits += r.arb.waits
			st.ArbiterWaitNS += int64(r.arb.waited)
		}
	}
	return Report{Stats: st, Rings: p.nrings, MemoryBytes: p.MemoryBytes()}
}

func (p *Program) now() time.Duration {
	if p.clock == nil {
		return 0
	}
	return p.clock.Now()
}

// Process is the Frame Parsing and Aggregation stages for one frame that
// entered by port (switching.Program). It reports false for a frame that
// is not aggregation traffic (the pipeline forwards it: MAC learning,
// routes, flooding) and for a stale duplicate the receiver should see.
func (p *Program) Process(v *frames.View, port int, emit switching.ProgramEmit) bool {
	op := v.Opcode()
	if op.Class() != wire.ClassRC || !op.IsWrite() {
		return false // Table VI: not an aggregation opcode
	}
	first := op.IsFirst() // FIRST or ONLY: the message's header leads it
	pay := v.Payload()
	m := p.conns[connKey{v.SrcAddr().Unmap(), v.DstAddr().Unmap(), v.DestQP()}]
	if m == nil {
		m = p.learn(v, port, first, pay)
		if m == nil {
			return false // not an aggregation QP: forward (Table VI)
		}
	}
	if m.port == netreduce.AnyPort {
		m.port = port
	} else if m.port != port {
		p.st.PortDrops++ // a member's connection from another port: forged
		return true
	}
	if !v.ICRCOK() {
		// Checked before anything is stored: the switch recomputes the
		// ICRC of what it sends, and would launder the corruption.
		p.st.ICRCDrops++
		return true
	}
	r := m.ring
	var col, off int
	var data []byte
	if first {
		h, ok := p.header(r, m, pay)
		if !ok {
			p.st.BadDrops++
			return true
		}
		data = pay[HeaderLen:]
		psn := v.PSN()
		if c, ok := m.fsb.first(psn); ok {
			col = c // a retransmitted WRITE FIRST: its recorded column, no rotation
			p.st.FirstResends++
		} else {
			switch {
			case !m.hasNext && h.MsgID() == 0: // the first flow anchors the connection
			case !m.hasNext:
				p.st.FirstLostDrops++ // joined mid-stream: wait for message 0
				return true
			case psn == m.next:
			case wire.PSNDiff(psn, m.next) > 0:
				p.st.GapDrops++ // a flow in between was not seen: go-back-N resends it
				return true
			default:
				if _, _, inside := m.fsb.locate(psn); inside {
					p.st.BadDrops++ // a first frame inside a flow
					return true
				}
				p.st.StaleForwards++ // older than every recorded flow
				return false
			}
			n := 1
			if op == wire.WriteFirst {
				n = (int(v.RETH().DMALen()) + r.cfg.MTU - 1) / r.cfg.MTU
			}
			if n < 1 || n > FlowFrames || n > r.cfg.MsgLen || h.MsgID() != uint8(m.flows) || (op == wire.WriteFirst) != (n > 1) {
				p.st.BadDrops++
				return true
			}
			col = m.fsb.start(psn, n, m.flows)
			m.next, m.hasNext = wire.PSNAdd(psn, n), true
			r.advance(m.rank, m.flows)
			m.flows++
			p.st.Flows++
		}
	} else {
		c, o, ok := m.fsb.locate(v.PSN())
		if !ok {
			if m.hasNext && wire.PSNDiff(v.PSN(), m.next) < 0 {
				p.st.StaleForwards++ // its flow's column was taken again
				return false
			}
			p.st.FirstLostDrops++ // its flow's WRITE FIRST was not seen
			return true
		}
		last := o == m.fsb.n[c]-1
		if o == 0 || last != (op != wire.WriteMiddle) {
			p.st.BadDrops++ // opcode and flow length disagree
			return true
		}
		col, off, data = c, o, pay
	}
	return p.aggregate(v, m, col, off, data, emit)
}

// learn makes a member of a ring set up without connections from a WRITE
// FIRST whose NCCL header names the ring and a rank not yet taken.
func (p *Program) learn(v *frames.View, port int, first bool, pay []byte) *member {
	if !first || !wire.IsINA(pay) {
		return nil
	}
	h := wire.INA(pay)
	r := p.rings[h.RingID()]
	if r == nil || len(r.cfg.Conns) > 0 || int(h.Rank()) >= r.cfg.Workers || r.members[h.Rank()] != nil {
		return nil
	}
	m := &member{ring: r, rank: int(h.Rank()), port: port, fsb: newFSB()}
	r.members[m.rank] = m
	p.conns[connKey{v.SrcAddr().Unmap(), v.DstAddr().Unmap(), v.DestQP()}] = m
	return m
}

// header checks a WRITE FIRST's NCCL header: the INA header of the
// member's ring and rank, then 12 zero bytes. A host that puts an 8-byte
// header before its data fails here rather than summing misaligned data.
func (p *Program) header(r *ring, m *member, pay []byte) (wire.INA, bool) {
	if len(pay) < HeaderLen || !wire.IsINA(pay) {
		return nil, false
	}
	h := wire.INA(pay[:wire.INALen])
	if h.RingID() != r.cfg.ID || int(h.Rank()) != m.rank || h.MsgLen() == 0 {
		return nil, false
	}
	for _, b := range pay[wire.INALen:HeaderLen] {
		if b != 0 {
			return nil, false
		}
	}
	return h, true
}

// aggregate is the Aggregation Frame Handler's JUDGE on the frame index
// and the Aggregation Processor behind it.
func (p *Program) aggregate(v *frames.View, m *member, col, off int, data []byte, emit switching.ProgramEmit) bool {
	r := m.ring
	i := index(col, off)
	msg := m.fsb.msg[col]
	s := &r.slots[i]
	if len(v.Payload()) > r.cfg.MTU || len(data)%4 != 0 || len(v.Frame()) > PayloadSlot+headerSlot {
		p.st.BadDrops++
		return true
	}
	switch {
	case s.msg > msg:
		p.st.StaleForwards++ // the index moved on: every receiver has this message
		return false
	case s.msg < msg && s.msg >= r.released:
		p.st.BusyDrops++ // the index holds a message a receiver may still ask for
		return true
	case s.msg < msg:
		s.msg, s.ranks, s.done, s.sent, s.dataLen = msg, 0, false, false, 0
	}
	if m.fsb.done[i] {
		// Aggregated before: a retransmission, answered from the buffer.
		if !s.done {
			p.st.EarlyResends++ // its data is stored; the result goes out on completion
			return true
		}
		if len(data) != s.dataLen {
			p.st.BadDrops++
			return true
		}
		// The answer is the re-sent frame with the sum for its data, not
		// the stored frame: the ICRC does not cover the Ethernet header, so
		// a stored copy whose MAC a bit error changed would make every
		// answer undeliverable (the conformance suites' netem corruption
		// found it: a connection stalled for good).
		f := v.Frame()
		out := p.out[:len(f)]
		copy(out, f)
		copy(out[v.PayloadOffset()+len(v.Payload())-len(data):], s.result[:s.dataLen])
		p.fixICRC(out)
		wait := r.arb.book(p.now(), p.now()+p.timing.Resend-txOut(len(out)), txOut(len(out)), true)
		p.st.ResultResends++
		emit(out, p.timing.Resend+wait)
		return true
	}
	if s.ranks != 0 && len(data) != s.dataLen {
		p.st.BadDrops++ // the ports disagree on the frame's length
		return true
	}
	fr := v.Frame()
	if m.frames[i] == nil {
		m.frames[i] = make([]byte, 0, PayloadSlot+headerSlot)
	}
	m.frames[i] = append(m.frames[i][:0], fr...)
	m.dataOff[i] = v.PayloadOffset() + len(v.Payload()) - len(data)
	m.fsb.done[i] = true
	s.ranks |= 1 << m.rank
	s.dataLen = len(data)
	p.st.Packets++
	if s.ranks != r.full {
		return true
	}
	// Complete: the sum of the payload buffers in rank order (the ports
	// AGG_PORT_CFG enables, in order), into the result buffer.
	if s.result == nil {
		s.result = make([]byte, PayloadSlot)
	}
	sum := s.result[:s.dataLen]
	first := r.members[0]
	copy(sum, first.frames[i][first.dataOff[i]:])
	for _, o := range r.members[1:] {
		tensor.Add(r.cfg.DType, sum, o.frames[i][o.dataOff[i]:o.dataOff[i]+s.dataLen])
	}
	s.done = true
	p.st.Aggregations++
	// One TX_OUT grant broadcasts the result to every branch: each with
	// its own Frame Header Buffer's headers, so each goes on to the
	// receiver of that branch's connection.
	lat := p.timing.AggregateFixed
	if r.cfg.DType.Float() {
		lat = p.timing.AggregateFloat
	}
	longest := 0
	for _, o := range r.members {
		longest = max(longest, len(o.frames[i]))
	}
	lat += r.arb.book(p.now(), p.now()+lat-txOut(longest), txOut(longest), false)
	for _, o := range r.members {
		f := o.frames[i]
		copy(f[o.dataOff[i]:], sum)
		p.fixICRC(f)
		p.st.ResultPackets++
		emit(f, lat)
	}
	s.sent = true
	return true
}

// fixICRC recomputes the ICRC of a frame the program rebuilt (TX_OUT
// computes it while packaging).
func (p *Program) fixICRC(f []byte) {
	if p.view.Parse(f) == nil {
		p.view.SetICRC()
	}
}

// advance records rank's newest flow and raises the release point: every
// message below min(newest) - N + 1 has reached every receiver.
func (r *ring) advance(rank int, msg int64) {
	r.newest[rank] = msg
	low := r.newest[0]
	for _, x := range r.newest[1:] {
		low = min(low, x)
	}
	if low >= 0 {
		r.released = max(r.released, low-int64(r.cfg.Window)+1)
	}
}

// Limits are the rings the buffers hold (netreduce.RingLimiter): what
// AddRing refuses beyond, so tools that draw rings (the conformance
// suites) draw them within.
func (p *Program) Limits() netreduce.Limits {
	return netreduce.Limits{MaxWorkers: MaxWorkers, MaxWindow: MaxWindow, MaxMsgLen: FlowFrames, MinMTU: 256, MaxMTU: PayloadSlot,
		DTypes: []tensor.DType{tensor.F32, tensor.I32}}
}

// AggregationDrops is the ICRC and port drops (switching.DropReport).
func (r Report) AggregationDrops() (icrc, port uint64) { return r.ICRCDrops, r.PortDrops }
