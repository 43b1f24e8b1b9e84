package job

import (
	"errors"
	"time"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/roce"
)

// Endpoint is one end of a rank's hop to its neighbour: an RC queue pair
// on the rank's NIC, or, between two GPUs of one host, the host's GPU
// interconnect. Algorithms post work and poll completions the same way on
// both.
type Endpoint interface {
	PostSend(wr roce.SendWR) error
	PostRecv(wr roce.RecvWR) error
	SendCQ() *roce.CQ
	RecvCQ() *roce.CQ
	QPN() uint32
}

// counters is a QP's counters (zero for a hop that is not RoCE).
func counters(e Endpoint) roce.Counters {
	if q, ok := e.(*roce.QP); ok {
		return q.Counters
	}
	return roce.Counters{}
}

// intraLink is the hop from one GPU to the next GPU of the same host over
// the host's interconnect (NVLink-like, not RoCE, so nothing of it is on
// a wire or in a capture). A WRITE WITH IMMEDIATE is one transfer step:
// it takes bytes/rate + α (topo.Intra.StepTime), one at a time from the
// sending GPU (across every link and job that sends from it), and then its
// bytes are in the receiver's region and both sides have their
// completions, as a QP would give them. A transfer that finds no receive
// posted waits for one, as a QP with infinite RNR retries does.
type intraLink struct {
	clock   *vclock.Clock
	intra   topo.Intra
	dst     *Worker // the receiving rank (its region, once set up)
	sendCQ  *roce.CQ
	recvCQ  *roce.CQ
	idle    *roce.CQ      // the unused CQ of each side
	recvs   []roce.RecvWR // posted receives; the first unused is recvs[rhead]
	rhead   int
	pending []xfer // transfers in order from pending[phead]
	phead   int
	busy    *time.Duration // when the sending GPU's port is free (shared by its links)
	waiting bool           // the first transfer waits for a receive
	timer   roce.Timer
}

func newIntraLink(c *vclock.Clock, in topo.Intra, busy *time.Duration, src, dst *Worker) *intraLink {
	l := &intraLink{clock: c, intra: in, busy: busy, dst: dst, sendCQ: src.NIC.NewCQ(), recvCQ: dst.NIC.NewCQ(), idle: roce.NewCQ(1)}
	l.timer = c.AfterFunc(0, l.deliver)
	l.timer.Stop()
	return l
}

func (l *intraLink) post(wr roce.SendWR) error {
	if wr.Opcode != roce.WRWriteImm {
		return errors.New("the GPU interconnect carries RDMA WRITE WITH IMMEDIATE only")
	}
	now := l.clock.Now()
	*l.busy = max(*l.busy, now) + l.intra.StepTime(int64(len(wr.Local)))
	if l.phead == len(l.pending) {
		l.pending, l.phead = l.pending[:0], 0
	}
	l.pending = append(l.pending, xfer{wr, *l.busy})
	if len(l.pending)-l.phead == 1 {
		l.timer.Reset(*l.busy - now)
	}
	return nil
}

// deliver completes every transfer due now.
func (l *intraLink) deliver() {
	now := l.clock.Now()
	for l.phead < len(l.pending) && l.pending[l.phead].done <= now {
		wr := l.pending[l.phead].wr
		st := roce.StatusSuccess
		mr := l.dst.RecvMR
		bad := mr == nil || mr.RKey != wr.RKey || wr.RemoteVA < mr.Addr || wr.RemoteVA-mr.Addr+uint64(len(wr.Local)) > mr.Size()
		if !bad && l.rhead == len(l.recvs) {
			l.waiting = true // until PostRecv
			return
		}
		l.pending[l.phead] = xfer{}
		l.phead++
		switch {
		case bad:
			st = roce.StatusRemAccessErr
		default:
			mr.Write(wr.RemoteVA-mr.Addr, wr.Local)
			rv := l.recvs[l.rhead]
			l.rhead++
			l.recvCQ.Push(roce.Completion{WRID: rv.ID, Status: st, Opcode: roce.WRWriteImm, Recv: true, Len: len(wr.Local), Imm: wr.Imm, HasImm: true})
		}
		if wr.Signaled || st != roce.StatusSuccess {
			l.sendCQ.Push(roce.Completion{WRID: wr.ID, Status: st, Opcode: wr.Opcode, Len: len(wr.Local)})
		}
	}
	if l.phead < len(l.pending) {
		l.timer.Reset(l.pending[l.phead].done - now)
	}
}

// intraSend and intraRecv are the link's two ends.
type xfer struct {
	wr   roce.SendWR
	done time.Duration
}

type intraSend struct{ l *intraLink }
type intraRecv struct{ l *intraLink }

func (e intraSend) PostSend(wr roce.SendWR) error { return e.l.post(wr) }
func (e intraSend) PostRecv(roce.RecvWR) error {
	return errors.New("the sending end of a GPU link takes no receives")
}
func (e intraSend) SendCQ() *roce.CQ { return e.l.sendCQ }
func (e intraSend) RecvCQ() *roce.CQ { return e.l.idle }
func (e intraSend) QPN() uint32      { return 0 }

func (e intraRecv) PostSend(roce.SendWR) error {
	return errors.New("the receiving end of a GPU link sends nothing")
}
func (e intraRecv) PostRecv(wr roce.RecvWR) error {
	l := e.l
	if l.rhead == len(l.recvs) {
		l.recvs, l.rhead = l.recvs[:0], 0
	}
	l.recvs = append(l.recvs, wr)
	if l.waiting {
		l.waiting = false
		l.timer.Reset(0)
	}
	return nil
}
func (e intraRecv) SendCQ() *roce.CQ { return e.l.idle }
func (e intraRecv) RecvCQ() *roce.CQ { return e.l.recvCQ }
func (e intraRecv) QPN() uint32      { return 0 }
