package emu

import (
	"bytes"
	"fmt"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/emu/tensor"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/roce"
)

// netReduceJob is NetReduce's allreduce (ASPLOS '23 §3.1-3.2): every
// worker chunks its tensor into messages of MsgLen packets, puts the INA
// header in front of each, and RDMA-WRITEs (with immediate: the message
// index) message k into its successor's result buffer at the same offset.
// The switch replaces each packet's gradient with the sum of all ranks',
// so what arrives is the result. A message-level sliding window of N keeps
// at most N messages unfinished: receiving result k from the predecessor
// lets the worker send message k+N.
type netReduceJob struct {
	r      *runner
	msgs   int      // M messages per worker
	stride int      // MsgLen × MTU: a message slot in the buffers
	chunk  int      // tensor bytes per full message (stride - INA header)
	send   [][]byte // per rank: INA header + tensor chunk, per message slot
	recv   [][]byte // per rank: the result buffer (its MR)
	next   []int    // per rank: next message to post
	ringID uint8
}

func init() {
	RegisterAlgorithm(NetReduce, func(r *runner) (collective, error) { return newNetReduceJob(r) })
}

func newNetReduceJob(r *runner) (*netReduceJob, error) {
	cfg := r.cfg
	j := &netReduceJob{r: r, stride: cfg.MsgLen * cfg.MTU}
	j.chunk = j.stride - wire.INALen
	j.msgs = int(netReduceMessages(cfg))
	if err := j.installRing(); err != nil {
		return nil, err
	}
	size := j.msgs * j.stride
	tens := make([]byte, cfg.TensorBytes)
	for _, w := range r.workers {
		tensor.Fill(cfg.DType, cfg.Pattern, tens, w.rank, cfg.Seed)
		buf := make([]byte, size)
		for k := 0; k < j.msgs; k++ {
			data := j.slot(buf, k)[wire.INALen:]
			copy(data, tens[k*j.chunk:])
			h := wire.INA(buf[k*j.stride:])
			h.SetTag(wire.INATag)
			h.SetRingID(j.ringID)
			h.SetMsgID(uint8(k))
			h.SetMsgLen(uint8((len(data) + wire.INALen + cfg.MTU - 1) / cfg.MTU))
			h.SetRank(uint8(w.rank))
		}
		j.send = append(j.send, buf)
		res := make([]byte, size)
		j.recv = append(j.recv, res)
		w.recvMR = &roce.MR{Addr: r.recvVA, Buf: res, RKey: r.rkey(w.rank), Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
		if err := w.h.PD.Register(w.recvMR); err != nil {
			return nil, err
		}
		w.sendWant, w.recvWant = j.msgs, j.msgs
	}
	j.next = make([]int, cfg.Workers)
	return j, nil
}

// netReduceMessages is how many messages each worker sends: MsgLen
// packets each, the first carrying the INA header before its tensor bytes.
func netReduceMessages(cfg Config) int64 {
	chunk := int64(cfg.MsgLen*cfg.MTU - wire.INALen)
	return (cfg.TensorBytes + chunk - 1) / chunk
}

// installRing sets up the job's ring on the switch every rank's NIC is
// attached to (on the live backend, the switch in this process, if any).
// Ranks under different switches would need multi-rack aggregation, which
// this switch program does not do.
func (j *netReduceJob) installRing() error {
	r := j.r
	if r.fab.Live() {
		if r.fab.Switch != nil {
			return r.fab.Switch.AddRing(NetReduceRing(r.cfg, r.psns.send))
		}
		return nil
	}
	var sw *switching.Switch
	ports := make([]int, len(r.workers))
	for i, w := range r.workers {
		s, p := r.fab.SwitchOf(w.h)
		switch {
		case w.gpu >= 0:
			return fmt.Errorf("job %s: rank %d is on GPU %d of %s: a NetReduce ring has one rank per NIC (a parallel scheme over GPUs is not built yet; --mode ring runs over GPUs)", r.name, i, w.gpu, w.host)
		case s == nil:
			return fmt.Errorf("job %s: rank %d's NIC %s is not attached to a switch: NetReduce aggregates in a switch", r.name, i, w.h.Name)
		case sw != nil && s != sw:
			return fmt.Errorf("job %s: rank 0 (%s) is under switch %s and rank %d (%s) under %s: NetReduce here aggregates in one switch (multi-rack aggregation is not built yet); place the ranks under one switch or use --mode ring",
				r.name, r.workers[0].h.Name, sw.Name, i, w.h.Name, s.Name)
		}
		sw, ports[i] = s, p
	}
	if sw.Rings() > 255 {
		return fmt.Errorf("job %s: switch %s already holds 256 rings", r.name, sw.Name)
	}
	j.ringID = uint8(sw.Rings())
	ring := NetReduceRing(r.cfg, r.psns.send)
	ring.ID = j.ringID
	for i, w := range r.workers {
		c := &ring.Conns[i]
		c.Src, c.Dst, c.DestQP, c.Port = w.h.IP, r.workers[(i+1)%len(r.workers)].h.IP, r.workers[(i+1)%len(r.workers)].rq.QPN(), ports[i]
	}
	return sw.AddRing(ring)
}

// NetReduceRing is the switch's ring for a NetReduce job: ring 0 with the
// job's window, message length, MTU, arithmetic and release rule, and the
// ring's connections (rank r's send QP to rank r+1's receive QP), which
// the switch learns when the job connects (NetReduce's initialization), so
// a packet that overtakes its message's first packet is never mistaken for
// ordinary traffic. Rank r's connection is bound to switch port r (a frame
// with its addresses from another port is forged). startPSNs, if given, are
// the connections' first PSNs (the job's setup knows them); without them
// the switch anchors each connection at its first message start.
func NetReduceRing(cfg Config, startPSNs []uint32) netreduce.RingConfig {
	var conns []netreduce.Conn
	for r := 0; r < cfg.Workers; r++ {
		c := netreduce.Conn{Src: nic.Addr(cfg.Transport, r, 0), Dst: nic.Addr(cfg.Transport, (r+1)%cfg.Workers, 0),
			DestQP: recvQPN, Rank: r, Port: r}
		if startPSNs != nil {
			c.StartPSN, c.HasStart = startPSNs[r], true
		}
		conns = append(conns, c)
	}
	return netreduce.RingConfig{ID: 0, Workers: cfg.Workers, Window: cfg.Window, MsgLen: cfg.MsgLen, MTU: cfg.MTU,
		DType: cfg.DType, Release: cfg.Release, Conns: conns}
}

// slot is message k of a buffer: header plus data, as long as it is.
func (j *netReduceJob) slot(buf []byte, k int) []byte {
	n := j.stride
	if k == j.msgs-1 {
		n = int(j.r.cfg.TensorBytes-int64(k)*int64(j.chunk)) + wire.INALen
	}
	return buf[k*j.stride : k*j.stride+n]
}

func (j *netReduceJob) start() error {
	for _, w := range j.r.local() {
		for k := 0; k < j.msgs; k++ {
			if err := w.rq.PostRecv(roce.RecvWR{ID: uint64(k)}); err != nil {
				return err
			}
		}
		for k := 0; k < j.r.cfg.Window && k < j.msgs; k++ {
			if err := j.post(w); err != nil {
				return err
			}
		}
	}
	return nil
}

func (j *netReduceJob) post(w *worker) error {
	k := j.next[w.rank]
	succ := j.r.workers[(w.rank+1)%len(j.r.workers)]
	j.next[w.rank]++
	return w.sq.PostSend(roce.SendWR{ID: uint64(k), Opcode: roce.WRWriteImm, Local: j.slot(j.send[w.rank], k),
		RemoteVA: j.r.recvVA + uint64(k*j.stride), RKey: succ.recvMR.RKey, Imm: uint32(k), Signaled: true})
}

func (j *netReduceJob) onCompletion(w *worker) {
	j.r.drain(w, func(c roce.Completion) {
		if !c.Recv {
			w.sendDone++
			return
		}
		if !c.HasImm || int(c.Imm) != w.recvDone {
			j.r.err = &JobError{Msg: fmt.Sprintf("rank %d: result message %d arrived when %d was due", w.rank, c.Imm, w.recvDone)}
			return
		}
		w.recvDone++
		if w.recvDone == w.recvWant {
			w.doneAt = j.r.fab.Clock.Now()
		}
		if j.next[w.rank] < j.msgs { // the window slides
			if err := j.post(w); err != nil {
				j.r.err = &JobError{Msg: fmt.Sprintf("rank %d: post message %d: %v", w.rank, j.next[w.rank], err)}
			}
		}
	})
}

// check compares every worker's result buffer with the rank-order sum of
// all ranks' tensors, message by message, and each result's INA header
// with the predecessor's (the connection the result came in on).
func (j *netReduceJob) check() *Mismatch {
	d := j.r.cfg.DType
	n := len(j.r.workers)
	var ref []byte
	for k := 0; k < j.msgs; k++ {
		ref = append(ref[:0], j.slot(j.send[0], k)[wire.INALen:]...)
		for rank := 1; rank < n; rank++ {
			tensor.Add(d, ref, j.slot(j.send[rank], k)[wire.INALen:])
		}
		for rank := 0; rank < n; rank++ {
			if !j.r.workers[rank].local {
				continue
			}
			got := j.slot(j.recv[rank], k)
			pred := j.slot(j.send[(rank+n-1)%n], k)
			if !bytes.Equal(got[:wire.INALen], pred[:wire.INALen]) {
				return &Mismatch{Rank: rank, Element: int64(k*j.chunk) / int64(d.Size()),
					Got: fmt.Sprintf("INA header % x", got[:wire.INALen]), Want: fmt.Sprintf("INA header % x", pred[:wire.INALen])}
			}
			if m := firstDiff(d, rank, int64(k*j.chunk), got[wire.INALen:], ref); m != nil {
				return m
			}
		}
	}
	return nil
}

// firstDiff reports the first element where got differs from want; base is
// got's byte offset in the tensor.
func firstDiff(d tensor.DType, rank int, base int64, got, want []byte) *Mismatch {
	if bytes.Equal(got, want) {
		return nil
	}
	sz := d.Size()
	for i := 0; i+sz <= len(want); i += sz {
		if !bytes.Equal(got[i:i+sz], want[i:i+sz]) {
			return &Mismatch{Rank: rank, Element: (base + int64(i)) / int64(sz), Got: tensor.Value(d, got, i/sz), Want: tensor.Value(d, want, i/sz)}
		}
	}
	return &Mismatch{Rank: rank, Element: base / int64(sz), Got: fmt.Sprintf("%d bytes", len(got)), Want: fmt.Sprintf("%d bytes", len(want))}
}
