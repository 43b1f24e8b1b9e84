package collective

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// In-network aggregation as a dimension, in packet mode (docs/themis.md,
// "In-network aggregation as a dimension"): a switch dimension the job
// names in Hier.INADims runs a chunk's AR stage (emu/themis's ina kind:
// the RS and AG that meet on it in the middle of the chunk's order) as
// one NetReduce aggregation on the switch of each group along it.
//
// Each group has its own ring on its switch (netreduce.Install: its own
// RingID and aggregator array), its members by coordinate the ring's
// ranks 0..P-1: member k's send QP WRITEs (with immediate: the message's
// index on the ring) to member k+1's receive QP through the switch,
// which replaces each packet's data with the P members' sum, in rank
// order, so what arrives is the result. A message is one packet (ring
// MsgLen 1): the INA header, then up to the MTU's remaining whole
// elements of the rank's current partial (its region of the chunk
// there, which every member of the group holds); its result lands in a
// slot of its own in the receiver's receive region and is copied back
// into the tensor. The ring's messages are numbered across the AR
// stages in the dimension's service order, which every rank follows (so
// the ina dimension needs schedule consistency on); at most the ring's
// window of messages is unanswered at a rank (NetReduce's sliding
// window). An AR stage ends at a rank when the results of all its
// messages are in. Lost packets are resent by go-back-N and met by the
// switch's aggregator as NetReduce meets them.

// kindINA is an ina dimension's kind (themis.INA).
const kindINA = "ina"

// ringWR marks the WR ID of a ring message (dimension << 40 | message).
const ringWR = 1 << 63

// markINA makes the dimensions h.INADims names ina: switch dimensions
// whose groups' switches aggregate.
func markINA(dims []hierDim, h job.Hier, c *job.Config) error {
	if len(h.INADims) == 0 {
		return nil
	}
	for _, d := range h.INADims {
		if d < 1 || d > len(dims) {
			return fmt.Errorf("--ina-dims %d: the topology has dimensions 1..%d", d, len(dims))
		}
		dm := &dims[d-1]
		if dm.kind != "switch" && dm.kind != kindINA {
			return fmt.Errorf("--ina-dims %d: dimension %d is a %s; an ina dimension is a switch that aggregates", d, d, dm.kind)
		}
		if dm.size > netreduce.MaxWorkers {
			return fmt.Errorf("--ina-dims %d: a ring aggregates at most %d ranks, and dimension %d has %d", d, netreduce.MaxWorkers, d, dm.size)
		}
		dm.kind = kindINA
	}
	if h.LocalOrder {
		return errors.New("--ina-dims: a ring's switch takes every member's messages in one order: it needs --consistency on")
	}
	if err := switching.CheckProgram(cmpProgram(c.SwitchProgram)); err != nil {
		return fmt.Errorf("--switch-program: %v", err)
	}
	if l := netreduce.LimitsOf(c.SwitchProgram); !l.Fits(c.DType) {
		return fmt.Errorf("--dtype %v: switch program %s sums %v", c.DType, cmpProgram(c.SwitchProgram), l.DTypes)
	}
	if c.MTU-netreduce.HeaderLen(c.SwitchProgram) < c.DType.Size() {
		return fmt.Errorf("--mtu %d: no room for an element after the INA header", c.MTU)
	}
	return nil
}

func cmpProgram(p string) string {
	if p == "" {
		return netreduce.ProgramName
	}
	return p
}

// inaGroup is one group along an ina dimension: one ring.
type inaGroup struct {
	dim     int
	members []int          // ranks by coordinate: the ring's ranks
	msg0    map[[2]int]int // (chunk, stage) of an AR stage: its first message on the ring
	n       map[[2]int]int // its messages
	total   int
	ms      []*inaMember
}

// inaPlan is the ina dimensions' rings.
type inaPlan struct {
	per, hdr, mtu, window int
	groups                []*inaGroup
	off                   map[[2]int]int64 // (rank, dim): where its ring's results land in its receive region
	size                  []int64          // per rank: the bytes of those areas
	count                 []int            // per rank: ring messages it sends (and receives)
	up, down              []int64          // per dimension: tensor bytes the AR stages sent up and got back
}

func (ip *inaPlan) bytes(r int) int64 {
	if ip == nil {
		return 0
	}
	return ip.size[r]
}

func (ip *inaPlan) msgs(r int) int {
	if ip == nil {
		return 0
	}
	return ip.count[r]
}

// newINAPlan numbers each ring's messages (nil: no ina dimension).
func newINAPlan(p *hierPlan, hs *hierScheduling, cfg *job.Config) (*inaPlan, error) {
	if !slices.ContainsFunc(p.dims, func(d hierDim) bool { return d.kind == kindINA }) {
		return nil, nil
	}
	hdr := netreduce.HeaderLen(cfg.SwitchProgram)
	ip := &inaPlan{hdr: hdr, mtu: cfg.MTU, per: (cfg.MTU - hdr) / p.elemSize * p.elemSize,
		window: min(max(cfg.Window, 1), netreduce.MaxWindow), off: map[[2]int]int64{}, size: make([]int64, p.n), count: make([]int, p.n),
		up: make([]int64, len(p.dims)), down: make([]int64, len(p.dims))}
	for d, dm := range p.dims {
		if dm.kind != kindINA {
			continue
		}
		for r := range p.n {
			m := p.members(r, d)
			if m[0] != r {
				continue
			}
			g := &inaGroup{dim: d, members: m, msg0: map[[2]int]int{}, n: map[[2]int]int{}}
			for _, op := range hs.order[d] {
				if !p.sched[op.Chunk][op.Stage].ar {
					continue
				}
				reg := p.arReg[[3]int{r, op.Chunk, op.Stage}]
				k := ((reg[1]-reg[0])*p.elemSize + ip.per - 1) / ip.per
				key := [2]int{op.Chunk, op.Stage}
				g.msg0[key], g.n[key] = g.total, k
				g.total += k
			}
			if g.total >= 1<<23 {
				return nil, fmt.Errorf("--mode hier: a ring of dimension %d would carry %d packets; the 24-bit PSN space allows fewer than 2^23 for the switch to place every packet", d+1, g.total)
			}
			for _, x := range m {
				ip.off[[2]int{x, d}] = p.recvBytes[x] + ip.size[x]
				ip.size[x] += int64(g.total) * int64(ip.mtu)
				ip.count[x] += g.total
			}
			ip.groups = append(ip.groups, g)
		}
	}
	return ip, nil
}

// inaMember is a rank's place in its group's ring.
type inaMember struct {
	g          *inaGroup
	coord      int
	rank       int
	nic        *nic.NIC
	sq, rq     *roce.QP
	succ, pred int   // ranks
	off        int64 // where its results land in its receive region
	ringID     uint8
	// The AR stage under way: chunk c, stage si, its messages base..end;
	// next to post, got results in.
	c, si, base, end, next, got int
	bufs                        map[int][]byte
}

// setupRings makes each ring member's two QPs on its NIC of the
// dimension (send to the successor, receive from the predecessor).
func (j *hierJob) setupRings(nicAt func(rank, dim, peer int) (*nic.NIC, error), newQP func(*job.Worker, *nic.NIC) *roce.QP, registered map[*nic.NIC]bool) error {
	if j.ina == nil {
		return nil
	}
	for _, hr := range j.ranks {
		hr.rings = make([]*inaMember, len(j.p.dims))
	}
	for _, g := range j.ina.groups {
		P := len(g.members)
		for k, rank := range g.members {
			h, err := nicAt(rank, g.dim, g.members[(k+1)%P])
			if err != nil {
				return &job.ConfigError{Err: err}
			}
			w := j.r.Workers[rank]
			m := &inaMember{g: g, coord: k, rank: rank, nic: h, succ: g.members[(k+1)%P], pred: g.members[(k+P-1)%P],
				off: j.ina.off[[2]int{rank, g.dim}], c: -1, bufs: map[int][]byte{}}
			m.sq, m.rq = newQP(w, h), newQP(w, h)
			if !registered[h] {
				registered[h] = true
				if err := h.PD.Register(j.ranks[rank].recv); err != nil {
					return err
				}
			}
			j.ranks[rank].rings[g.dim] = m
			g.ms = append(g.ms, m)
		}
	}
	return nil
}

// connectRings installs each group's ring on its switch, its
// connections and first PSNs known (NetReduce's initialization), and
// connects each member's send QP to its successor's receive QP. The PSNs
// come from a stream of the job's seed of their own, so the other
// connections' are those of a run without ina.
func (j *hierJob) connectRings() error {
	if j.ina == nil {
		return nil
	}
	r := j.r
	rng := rand.New(rand.NewPCG(r.Cfg.Seed, 0x1A0A))
	psn := func() uint32 { return uint32(rng.Uint64()) & 0xFFFFFF }
	for _, g := range j.ina.groups {
		P := len(g.ms)
		sq, rq := make([]uint32, P), make([]uint32, P)
		for k := range P {
			sq[k], rq[k] = psn(), psn()
		}
		ring := netreduce.RingConfig{Workers: P, Window: j.ina.window, MsgLen: 1, MTU: r.Cfg.MTU, DType: r.Cfg.DType,
			Release: r.Cfg.Release, TClass: r.Cfg.TClass()}
		sws := make([]*switching.Switch, P)
		for k, m := range g.ms {
			s, port := r.Fab.SwitchOf(m.nic)
			if s == nil {
				return &job.ConfigError{Err: fmt.Errorf("job %s: rank %d's NIC %s of dimension %d is not attached to a switch", r.Name, m.rank, m.nic.Name, g.dim+1)}
			}
			sws[k] = s
			succ := g.ms[(k+1)%P]
			ring.Conns = append(ring.Conns, netreduce.Conn{Src: m.nic.IP, Dst: succ.nic.IP, DestQP: succ.rq.QPN(), Rank: k, Port: port,
				StartPSN: sq[k], HasStart: true, Name: m.nic.Name + "→" + succ.nic.Name})
		}
		in, err := netreduce.Install(netreduce.Placement{Job: r.Name, Tenants: r.Tenants(), Program: r.Cfg.SwitchProgram,
			Ring: ring, Switches: sws, All: r.Fab.Switches, Fabric: r.Fab})
		if err != nil {
			return err
		}
		base := roce.Config{MTU: r.Cfg.MTU, Timeout: r.Cfg.Timeout, RetryCnt: r.Cfg.RetryCnt, RNRRetry: 7, MinRNRTimer: 1, Profile: r.Cfg.NIC}
		for k, m := range g.ms {
			m.ringID = in.ID
			succ := g.ms[(k+1)%P]
			cs, cr := base, base
			cs.SQPSN, cs.RQPSN, cs.MaxSendWR, cs.MaxRecvWR = sq[k], rq[(k+1)%P], g.total+1, 1
			cr.SQPSN, cr.RQPSN, cr.MaxSendWR, cr.MaxRecvWR = rq[(k+1)%P], sq[k], 1, g.total+1
			if err := m.sq.Connect(r.PathTo(m.nic, succ.nic, succ.rq.QPN()), cs); err != nil {
				return err
			}
			if err := succ.rq.Connect(r.PathTo(succ.nic, m.nic, m.sq.QPN()), cr); err != nil {
				return err
			}
		}
	}
	return nil
}

// postRingRecvs posts a receive per result each member will get.
func (j *hierJob) postRingRecvs() error {
	if j.ina == nil {
		return nil
	}
	for _, g := range j.ina.groups {
		for _, m := range g.ms {
			for range g.total {
				if err := m.rq.PostRecv(roce.RecvWR{}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// arStep runs chunk c's AR stage si at the rank: entering it sets its
// messages; it posts what the window allows; done when every result is in.
func (j *hierJob) arStep(rank, c, si int, entering bool) (bool, error) {
	hr := j.ranks[rank]
	m := hr.rings[j.p.sched[c][si].dim]
	if entering {
		key := [2]int{c, si}
		m.c, m.si, m.base = c, si, m.g.msg0[key]
		m.next, m.end = m.base, m.base+m.g.n[key]
		if m.got != m.base {
			return false, &job.JobError{Msg: fmt.Sprintf("rank %d: chunk %d stage %s begins at ring message %d with %d results in", rank, c, j.p.sched[c][si], m.base, m.got)}
		}
	}
	if err := j.ringPost(hr, m); err != nil {
		return false, err
	}
	return m.got >= m.end, nil
}

// piece is ring message k's bytes in the rank's tensor.
func (j *hierJob) piece(m *inaMember, k int) (lo, hi int) {
	reg := j.p.arReg[[3]int{m.rank, m.c, m.si}]
	sz := j.p.elemSize
	lo = reg[0]*sz + (k-m.base)*j.ina.per
	return lo, min(lo+j.ina.per, reg[1]*sz)
}

// ringPost posts the member's next messages while its window allows.
func (j *hierJob) ringPost(hr *hierRank, m *inaMember) error {
	for m.next < m.end && m.next < m.got+j.ina.window {
		k := m.next
		m.next++
		lo, hi := j.piece(m, k)
		buf := make([]byte, j.ina.hdr+hi-lo)
		h := wire.INA(buf)
		h.SetTag(wire.INATag)
		h.SetRingID(m.ringID)
		h.SetMsgID(uint8(k))
		h.SetMsgLen(1)
		h.SetRank(uint8(m.coord))
		copy(buf[j.ina.hdr:], hr.data[lo:hi])
		m.bufs[k] = buf
		j.payload[m.g.dim] += int64(hi - lo)
		j.ina.up[m.g.dim] += int64(hi - lo)
		succ := j.ranks[m.succ]
		wr := roce.SendWR{ID: ringWR | uint64(m.g.dim)<<40 | uint64(k), Opcode: roce.WRWriteImm, Local: buf,
			RemoteVA: j.r.RecvVA + uint64(succ.rings[m.g.dim].off) + uint64(k*j.ina.mtu), RKey: succ.recv.RKey,
			Imm: uint32(k), Signaled: true}
		if err := m.sq.PostSend(wr); err != nil {
			return &job.JobError{Msg: fmt.Sprintf("rank %d: post %s: %v", m.rank, j.describeRing(wr.ID), err)}
		}
	}
	return nil
}

// describeRing names a ring message by its WR ID.
func (j *hierJob) describeRing(id uint64) string {
	return fmt.Sprintf("ring message %d of dimension %d (ina)", uint32(id), int(id>>40&0xFF)+1)
}

// ringCompletion takes a completion of a ring QP (false: not one).
func (j *hierJob) ringCompletion(hr *hierRank, c roce.Completion) bool {
	if !c.Recv {
		if c.WRID&ringWR == 0 {
			return false
		}
		hr.w.SendDone++
		delete(hr.rings[int(c.WRID>>40&0xFF)].bufs, int(uint32(c.WRID)))
		return true
	}
	for _, m := range hr.rings {
		if m != nil && c.QPN == m.rq.QPN() {
			if err := j.ringResult(hr, m, c); err != nil {
				j.r.Err = err
			}
			return true
		}
	}
	return false
}

// ringResult takes result k in: the group's sum of the piece, copied
// into the tensor; the last of the stage ends it.
func (j *hierJob) ringResult(hr *hierRank, m *inaMember, c roce.Completion) error {
	k := int(c.Imm)
	if !c.HasImm || k != m.got || k >= m.end {
		return &job.JobError{Msg: fmt.Sprintf("rank %d: ring result %d of dimension %d arrived when %d was due", m.rank, c.Imm, m.g.dim+1, m.got)}
	}
	lo, hi := j.piece(m, k)
	at := m.off + int64(k*j.ina.mtu) + int64(j.ina.hdr)
	copy(hr.data[lo:hi], hr.recv.Buf[at:at+int64(hi-lo)])
	hr.w.RecvDone++
	j.ina.down[m.g.dim] += int64(hi - lo)
	if m.got++; m.got == m.end {
		return j.advance(m.rank, m.c, false)
	}
	return j.ringPost(hr, m)
}

// ringPeer is the rank at the other end of a ring QP of the rank.
func (j *hierJob) ringPeer(rank int, q *roce.QP) int {
	for _, m := range j.ranks[rank].rings {
		switch {
		case m == nil:
		case m.sq == q:
			return m.succ
		case m.rq == q:
			return m.pred
		}
	}
	return -1
}

// arReference is an AR stage without a network: each group's regions
// summed in coordinate order (NetReduce's rank order), on every member.
func arReference(p *hierPlan, d tensor.DType, data [][]byte, c, si int) {
	dim, sz := p.sched[c][si].dim, p.elemSize
	for r := range p.n {
		m := p.members(r, dim)
		if m[0] != r {
			continue
		}
		reg := p.arReg[[3]int{r, c, si}]
		lo, hi := reg[0]*sz, reg[1]*sz
		acc := slices.Clone(data[m[0]][lo:hi])
		for _, x := range m[1:] {
			tensor.Add(d, acc, data[x][lo:hi])
		}
		for _, x := range m {
			copy(data[x][lo:hi], acc)
		}
	}
}
