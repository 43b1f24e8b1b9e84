package collective

import (
	"bytes"
	"fmt"
	"github.com/inaemu/inaemu/emu/job"
	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/internal/units"
	"slices"

	"github.com/inaemu/inaemu/emu/netreduce"
	"github.com/inaemu/inaemu/emu/nic"
	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/roce"
	"github.com/inaemu/inaemu/tensor"
)

// netReduceJob is NetReduce's allreduce (ASPLOS '23 §3.1-3.2): every
// worker chunks its tensor into messages of MsgLen packets, puts the INA
// header in front of each, and RDMA-WRITEs (with immediate: the message
// index) message k into its successor's result buffer at the same offset.
// The switch replaces each packet's gradient with the sum of all ranks',
// so what arrives is the result. A message-level sliding window of N keeps
// at most N messages unfinished: receiving result k from the predecessor
// lets the worker send message k+N.
//
// Memory does not grow with the tensor: a worker's messages are generated
// from its tensor's stream as they are posted, into a ring of slots, and
// its results land in a ring MR and are checked as each completes,
// against a rank-order sum generated once per message for all workers.
// Within a ring's slots a job behaves exactly as with whole buffers.
type netReduceJob struct {
	r      *job.Job
	msgs   int      // M messages per worker
	stride int      // MsgLen × MTU: a message slot in the buffers
	chunk  int      // tensor bytes per full message (stride - INA header)
	slots  int      // messages a send ring and a receive ring hold
	send   [][]byte // per rank: the send ring (INA header + tensor chunk per slot)
	sendSt []job.Source
	out    [][]byte // per rank: where its result is kept (nil: checked only)
	next   []int    // per rank: next message to post
	// The rank-order sum of message k, made when the first worker
	// completes k from the ranks' message k (piece0) and dropped once
	// every local worker checked it.
	expSt    []job.Source
	expected []expectedMsg        // message k at k mod slots (workers are at most a window apart)
	extra    map[int]*expectedMsg // a sum whose place is still taken (never seen; kept for safety)
	expNext  int                  // the next message whose sum is made
	nLocal   int                  // the workers in this process: each checks every sum
	piece    []byte               // scratch: one rank's message
	hdrLen   int                  // the header in front of a message's data: the program's (netreduce.HeaderLen)
	hdr      []byte               // scratch: the header a result must carry
	mismatch *job.Mismatch
	mmAt     [2]int // (message, rank) of mismatch: the first in that order is kept
	ringID   uint8
	// groups are the ranks each switch that aggregates them sums, in the
	// tree's order: the sum is each group's in rank order, then the
	// groups' in this order. One switch: one group of every rank; a
	// multi-rack ring: the ranks under each leaf.
	groups [][]int
	part   []byte // scratch: a group's sum
}

type expectedMsg struct {
	k     int
	sum   []byte
	exact []byte // a compressing ring's exact rank-order sum (sum is what the hops make of it)
	left  int    // local workers yet to check it
}

// NetReduce is the NetReduce job's mode: the ring of RC WRITEs through
// the aggregating switch.
const NetReduce job.Mode = "netreduce"

func init() {
	job.Register(job.Algorithm{Mode: NetReduce, Doc: "NetReduce, the hosts' ring of RDMA WRITEs summed in the aggregating switch (the default)", New: func(r *job.Job) (job.Collective, error) { return newNetReduceJob(r) },
		InSwitch: true, Streams: true, StreamsLive: true, StreamsWindow: true,
		Validate: func(c *job.Config) error {
			if c.Window < 1 || c.Window > netreduce.MaxWindow {
				return &job.ConfigError{Err: fmt.Errorf("--window %d: want 1..%d", c.Window, netreduce.MaxWindow)}
			}
			if err := checkProgramLimits(c); err != nil {
				return &job.ConfigError{Err: err}
			}
			return nil
		},
		ValidateRun: checkSwitchProgram,
		ValidateJob: func(j job.JobConfig) error {
			// The switch tells a packet's message by its signed 24-bit PSN
			// distance, exact while a connection spans fewer than 2^23 PSNs.
			if n := NetReduceMessages(j.Cfg) * int64(j.Cfg.MsgLen); n >= 1<<23 {
				return fmt.Errorf("--tensor %s at --mtu %d: each ring connection would carry %d packets; the 24-bit PSN space allows fewer than 2^23 (%d) for the switch to place every packet: use a larger --mtu or a smaller --tensor",
					units.FormatSize(j.Cfg.TensorBytes), j.Cfg.MTU, n, 1<<23)
			}
			return nil
		},
		Memory: netReduceMemory,
		ServeSwitch: func(c job.Config, sw *switching.Switch) error {
			return netreduce.AddRing(sw, c.SwitchProgram, NetReduceRing(c, nil))
		},
	})
}

// checkProgramLimits refuses a job its switch program cannot hold
// (netreduce.Limits: the AllReduce-Switch's buffers take at most window 2
// and 128-packet messages of 1 KiB f32 or i32), before anything runs:
// otherwise the refusal would come from the ring's install, after the
// run began, and a sweep's validation would pass such points.
func checkProgramLimits(c *job.Config) error {
	name := c.SwitchProgram
	if name == "" {
		name = netreduce.ProgramName
	}
	if err := switching.CheckProgram(name); err != nil {
		return fmt.Errorf("--switch-program: %v", err)
	}
	l := netreduce.LimitsOf(name)
	switch {
	case l.MaxWorkers > 0 && c.Workers > l.MaxWorkers:
		return fmt.Errorf("--workers %d: switch program %s aggregates 2..%d ports", c.Workers, name, l.MaxWorkers)
	case l.MaxWindow > 0 && c.Window > l.MaxWindow:
		return fmt.Errorf("--window %d: switch program %s holds 1..%d messages in flight per worker", c.Window, name, l.MaxWindow)
	case l.MaxMsgLen > 0 && c.MsgLen > l.MaxMsgLen:
		return fmt.Errorf("--msg-len %d: switch program %s takes messages of 1..%d packets", c.MsgLen, name, l.MaxMsgLen)
	case l.MaxMTU > 0 && (c.MTU < l.MinMTU || c.MTU > l.MaxMTU):
		return fmt.Errorf("--mtu %d: switch program %s takes %d..%d", c.MTU, name, l.MinMTU, l.MaxMTU)
	case !l.Fits(c.DType):
		return fmt.Errorf("--dtype %v: switch program %s sums %v", c.DType, name, l.DTypes)
	}
	return nil
}

// checkSwitchProgram refuses a --switch-program other than the default
// given to a run none of whose jobs aggregates in a switch (it would be
// ignored without a word, and its captures would name it).
func checkSwitchProgram(c *job.Config, jobs []job.JobConfig) error {
	if c.SwitchProgram == "" || c.SwitchProgram == netreduce.ProgramName {
		return nil
	}
	for _, j := range jobs {
		if a := job.Lookup(j.Cfg.Mode); a != nil && a.InSwitch {
			return nil
		}
	}
	return &job.ConfigError{Err: fmt.Errorf("--switch-program %s: only jobs that aggregate in the switch (netreduce, and pn's rings) run on a switch program (this run is %s)", c.SwitchProgram, c.Mode)}
}

// netReduceMemory: send and receive rings of a few windows per worker
// (the tensor is generated and checked as it goes), the expected sums,
// one per ring slot, and the switch's memory for the ring (the program's
// own figure, netreduce.RingMemoryOf; NetReduce's: the window's
// aggregators in use).
func netReduceMemory(cfg job.Config, e *job.MemoryEstimate) (int64, bool) {
	w, mtu := int64(cfg.Workers), int64(cfg.MTU)
	msgB := int64(cfg.MsgLen) * mtu
	msgs := NetReduceMessages(cfg)
	slots := min(msgs, int64(netReduceSlots(cfg)))
	size := slots * msgB
	e.Buffers = 2*w*size + size + msgB + w*workload.AheadBytes
	e.Queues = w * 2 * (msgs + 1) * job.WRBytes
	aggs := 2 * int64(cfg.Window) * int64(cfg.MsgLen)
	used := min(msgs, 2*int64(cfg.Window)) * int64(cfg.MsgLen)
	// The ring's memory as the program counts it: a program's own figure
	// (netreduce.RingMemory) whole; NetReduce's aggregator array by the
	// pages touched, those of the aggregators in use.
	ring, own := netreduce.RingMemoryOf(cfg.SwitchProgram, NetReduceRing(cfg, nil))
	if own {
		e.Switch = ring
	} else {
		e.Switch = used*(ring/aggs) + aggs*w*(24+8) + aggs*64
	}
	e.Largest = max(size, ring)
	return 4*int64(cfg.Window)*int64(cfg.MsgLen) + 2, false
}

func newNetReduceJob(r *job.Job) (*netReduceJob, error) {
	cfg := r.Cfg
	j := &netReduceJob{r: r, stride: cfg.MsgLen * cfg.MTU, hdrLen: netreduce.HeaderLen(cfg.SwitchProgram)}
	j.chunk = j.stride - j.hdrLen
	j.hdr = make([]byte, j.hdrLen)
	j.msgs = int(NetReduceMessages(cfg))
	j.groups = [][]int{make([]int, len(r.Workers))}
	for i := range j.groups[0] {
		j.groups[0][i] = i
	}
	if err := j.installRing(); err != nil {
		return nil, err
	}
	j.slots = min(j.msgs, netReduceSlots(cfg))
	j.expected = make([]expectedMsg, j.slots)
	for i := range j.expected {
		j.expected[i] = expectedMsg{k: -1, sum: make([]byte, 0, j.chunk)}
	}
	j.piece = make([]byte, j.chunk)
	j.mmAt = [2]int{j.msgs, 0}
	for _, w := range r.Workers {
		j.sendSt = append(j.sendSt, r.InputAhead(w.Rank))
		j.expSt = append(j.expSt, r.Input(w.Rank))
		j.out = append(j.out, r.Output(w.Rank))
		j.send = append(j.send, make([]byte, j.slots*j.stride))
		res := make([]byte, j.slots*j.stride)
		w.RecvMR = &roce.MR{Addr: r.RecvVA, Buf: res, Len: uint64(j.msgs * j.stride), RKey: r.RKey(w.Rank), Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
		if err := w.NIC.PD.Register(w.RecvMR); err != nil {
			return nil, err
		}
		w.SendWant, w.RecvWant = j.msgs, j.msgs
	}
	j.next = make([]int, cfg.Workers)
	return j, nil
}

// netReduceSlots is how many messages a worker's send and receive rings
// hold: four windows and a margin. A worker posts message k+N once result
// k arrived, and result k+s lands in k's slot only after k was checked; a
// send slot is reused only once its message's WRITE completed (ACKed),
// which lags results by about an ACK's flight, so the margin is never
// the limit in practice; where it would be, posting waits for it.
func netReduceSlots(cfg job.Config) int { return 4*cfg.Window + 8 }

// msgLen is message k's length: header plus data (the last is short).
func (j *netReduceJob) msgLen(k int) int {
	if k == j.msgs-1 {
		return int(j.r.Cfg.TensorBytes-int64(k)*int64(j.chunk)) + j.hdrLen
	}
	return j.stride
}

// header writes message k's INA header as rank sends it.
func (j *netReduceJob) header(h wire.INA, k, rank int) {
	h.SetTag(wire.INATag)
	h.SetRingID(j.ringID)
	h.SetMsgID(uint8(k))
	h.SetMsgLen(uint8((j.msgLen(k) + j.r.Cfg.MTU - 1) / j.r.Cfg.MTU))
	h.SetRank(uint8(rank))
}

// NetReduceMessages is how many messages each worker sends: MsgLen
// packets each, the first carrying the INA header before its tensor bytes.
func NetReduceMessages(cfg job.Config) int64 {
	chunk := int64(cfg.MsgLen*cfg.MTU - netreduce.HeaderLen(cfg.SwitchProgram))
	return (cfg.TensorBytes + chunk - 1) / chunk
}

// installRing sets up the job's ring on the switch every rank's NIC is
// attached to (on the live backend, the switch in this process, if any),
// or, when the ranks sit under several leaves, on those leaves and the
// spine that joins them: netreduce.Install, through the program
// cfg.SwitchProgram names.
func (j *netReduceJob) installRing() error {
	r := j.r
	if r.Fab.Live() {
		if r.Fab.Switch != nil {
			return netreduce.AddRing(r.Fab.Switch, r.Cfg.SwitchProgram, NetReduceRing(r.Cfg, r.PSNs.Send))
		}
		return nil
	}
	sws := make([]*switching.Switch, len(r.Workers))
	gpuRank := map[string]int{} // by host, the rank on one of its GPUs
	ring := NetReduceRing(r.Cfg, r.PSNs.Send)
	for i, w := range r.Workers {
		if w.GPU >= 0 {
			// Two ranks of one host would meet on the host's interconnect,
			// which the switch never sees. GPUs of one host may each be in
			// another ring (parallel NetReduce's rings: GPU i of every host).
			if prev, twice := gpuRank[w.Host]; twice {
				return fmt.Errorf("job %s: ranks %d and %d are both on %s: a NetReduce ring has one rank per host (one ring per GPU index runs the GPUs of several hosts)", r.Name, prev, i, w.Host)
			}
			gpuRank[w.Host] = i
		}
		s, p := r.Fab.SwitchOf(w.NIC)
		if s == nil {
			return fmt.Errorf("job %s: rank %d's NIC %s is not attached to a switch: NetReduce aggregates in a switch", r.Name, i, w.NIC.Name)
		}
		sws[i] = s
		succ := r.Workers[(i+1)%len(r.Workers)]
		c := &ring.Conns[i]
		c.Src, c.Dst, c.DestQP, c.Port = w.NIC.IP, succ.NIC.IP, succ.RQ.QPN(), p
		c.Name = w.NIC.Name + "→" + succ.NIC.Name
	}
	in, err := netreduce.Install(netreduce.Placement{Job: r.Name, Tenants: r.Tenants(), Program: r.Cfg.SwitchProgram,
		Ring: ring, Switches: sws, All: r.Fab.Switches, Fabric: r.Fab})
	if err != nil {
		return err
	}
	j.ringID, j.groups = in.ID, in.Groups
	top := in.Members[0]
	r.Ring = &job.JobRing{Switch: top.Switch.Name, ID: in.ID, MemoryBytes: in.MemoryBytes}
	if top.Role == netreduce.Single {
		r.RingSw = top.Switch
		return nil
	}
	for _, m := range in.Members {
		r.RingTree = append(r.RingTree, m.Switch)
		r.Ring.Tree = append(r.Ring.Tree, job.TreeSwitch{Switch: m.Switch.Name, Role: m.Role.String(), Ranks: m.Ranks, MemoryBytes: m.MemoryBytes})
	}
	return nil
}

// NetReduceRing is the switch's ring for a NetReduce job: ring 0 with the
// job's window, message length, MTU, arithmetic and release rule, and the
// ring's connections (rank r's send QP to rank r+1's receive QP), which
// the switch learns when the job connects (NetReduce's initialization), so
// a packet that overtakes its message's first packet is never mistaken for
// ordinary traffic. Rank r's connection is bound to switch port r (a frame
// with its addresses from another port is forged). startPSNs, if given, are
// the connections' first PSNs (the job's setup knows them); without them
// the switch anchors each connection at its first message start. The
// ring's TClass is the job's QPs' (a multi-rack ring's switches send
// their own frames in the job's class).
func NetReduceRing(cfg job.Config, startPSNs []uint32) netreduce.RingConfig {
	var conns []netreduce.Conn
	for r := 0; r < cfg.Workers; r++ {
		c := netreduce.Conn{Src: nic.Addr(cfg.Transport, r, 0), Dst: nic.Addr(cfg.Transport, (r+1)%cfg.Workers, 0),
			DestQP: job.RecvQPN, Rank: r, Port: r}
		if startPSNs != nil {
			c.StartPSN, c.HasStart = startPSNs[r], true
		}
		conns = append(conns, c)
	}
	return netreduce.RingConfig{ID: 0, Workers: cfg.Workers, Window: cfg.Window, MsgLen: cfg.MsgLen, MTU: cfg.MTU,
		DType: cfg.DType, Release: cfg.Release, Conns: conns, TClass: cfg.TClass()}
}

// slot is message k's place in a ring: header plus data, as long as it is.
func (j *netReduceJob) slot(ring []byte, k int) []byte {
	at := k % j.slots * j.stride
	return ring[at : at+j.msgLen(k)]
}

func (j *netReduceJob) Start() error {
	j.nLocal = len(j.r.Local())
	for _, w := range j.r.Local() {
		for k := 0; k < j.msgs; k++ {
			if err := w.RQ.PostRecv(roce.RecvWR{ID: uint64(k)}); err != nil {
				return err
			}
		}
		if err := j.post(w); err != nil {
			return err
		}
	}
	return nil
}

// post posts the worker's next messages while its window (N results
// ahead) and its send ring (a slot whose WRITE completed) allow.
func (j *netReduceJob) post(w *job.Worker) error {
	for {
		k := j.next[w.Rank]
		if k >= j.msgs || k >= w.RecvDone+j.r.Cfg.Window || k-w.SendDone >= j.slots {
			return nil
		}
		succ := j.r.Workers[(w.Rank+1)%len(j.r.Workers)]
		j.next[w.Rank]++
		msg := j.slot(j.send[w.Rank], k)
		j.header(wire.INA(msg), k, w.Rank)
		j.sendSt[w.Rank].Fill(msg[j.hdrLen:])
		if err := w.SQ.PostSend(roce.SendWR{ID: uint64(k), Opcode: roce.WRWriteImm, Local: msg,
			RemoteVA: j.r.RecvVA + uint64(k*j.stride), RKey: succ.RecvMR.RKey, Imm: uint32(k), Signaled: true}); err != nil {
			return err
		}
	}
}

func (j *netReduceJob) OnCompletion(w *job.Worker) {
	j.r.Drain(w, func(c roce.Completion) {
		if !c.Recv {
			w.SendDone++
		} else {
			if !c.HasImm || int(c.Imm) != w.RecvDone {
				j.r.Err = &job.JobError{Msg: fmt.Sprintf("rank %d: result message %d arrived when %d was due", w.Rank, c.Imm, w.RecvDone)}
				return
			}
			j.verify(w, w.RecvDone)
			if o := j.out[w.Rank]; o != nil {
				copy(o[w.RecvDone*j.chunk:], j.slot(w.RecvMR.Buf, w.RecvDone)[j.hdrLen:])
			}
			w.RecvDone++
			if w.RecvDone == w.RecvWant {
				w.DoneAt = j.r.Fab.Clock.Now()
			}
		}
		if err := j.post(w); err != nil { // the window slides, or a send slot freed
			j.r.Err = &job.JobError{Msg: fmt.Sprintf("rank %d: post message %d: %v", w.Rank, j.next[w.Rank], err)}
		}
	})
}

// verify checks result k as it completes at worker w, before its slot of
// the ring is used again: the rank-order sum of all ranks' message k, and
// the INA header of the predecessor (the connection it came in on). The
// first mismatch in (message, rank) order is kept for check.
func (j *netReduceJob) verify(w *job.Worker, k int) {
	n := len(j.r.Workers)
	e := j.expectedSum(k)
	defer func() {
		if e.left--; e.left == 0 && j.extra[k] == e {
			delete(j.extra, k)
		}
	}()
	if slices.Compare([]int{k, w.Rank}, j.mmAt[:]) > 0 {
		return // an earlier mismatch is already the one reported
	}
	got := j.slot(w.RecvMR.Buf, k)
	want := j.hdr[:]
	j.header(want, k, (w.Rank+n-1)%n)
	d := j.r.Cfg.DType
	var m *job.Mismatch
	if !bytes.Equal(got[:j.hdrLen], want) {
		m = &job.Mismatch{Rank: w.Rank, Element: int64(k*j.chunk) / int64(d.Size()),
			Got: fmt.Sprintf("INA header % x", got[:j.hdrLen]), Want: fmt.Sprintf("INA header % x", want)}
	} else {
		m = firstDiff(d, w.Rank, int64(k*j.chunk), got[j.hdrLen:], e.sum)
	}
	if m != nil {
		j.mismatch, j.mmAt = m, [2]int{k, w.Rank}
	}
}

// expectedSum is message k's rank-order sum, made from the ranks' expect
// streams the first time a worker asks (workers ask in message order).
func (j *netReduceJob) expectedSum(k int) *expectedMsg {
	if e := &j.expected[k%j.slots]; e.k == k {
		return e
	}
	if e := j.extra[k]; e != nil {
		return e
	}
	for ; j.expNext <= k; j.expNext++ {
		m := j.expNext
		e := &j.expected[m%j.slots]
		if e.k >= 0 && e.left > 0 { // its place is still needed
			if j.extra == nil {
				j.extra = map[int]*expectedMsg{}
			}
			e = &expectedMsg{}
			j.extra[m] = e
		}
		size := j.msgLen(m) - j.hdrLen
		if cap(e.sum) < size {
			e.sum = make([]byte, j.chunk)
		}
		e.k, e.sum = m, e.sum[:size]
		j.sumOf(e.sum, m, size)
		e.left = j.nLocal
	}
	if e := &j.expected[k%j.slots]; e.k == k {
		return e
	}
	return j.extra[k]
}

// sumOf writes the reduction of every rank's message m (size bytes) into
// sum, in the order the switches form it: rank order in one switch; in a
// tree, each leaf's ranks in rank order, then the leaves in tree order.
func (j *netReduceJob) sumOf(sum []byte, m, size int) {
	if j.part == nil && len(j.groups) > 1 {
		j.part = make([]byte, j.chunk)
	}
	var part []byte
	if j.part != nil {
		part = j.part[:size]
	}
	groupSum(j.r.Cfg.DType, j.groups, sum, part, func(rank int) []byte { return j.piece0(rank, m, size) })
}

// groupSum writes into sum the reduction in a switch tree's order: each
// group's pieces in rank order, then the groups' sums in group order.
// piece is a rank's piece (read before the next call); part is scratch of
// sum's length when there are several groups.
func groupSum(d tensor.DType, groups [][]int, sum, part []byte, piece func(rank int) []byte) {
	for gi, g := range groups {
		dst := sum
		if gi > 0 {
			dst = part
		}
		copy(dst, piece(g[0]))
		for _, rank := range g[1:] {
			tensor.Add(d, dst, piece(rank))
		}
		if gi > 0 {
			tensor.Add(d, sum, part)
		}
	}
}

// piece0 is rank's data of message m (size bytes): still in the rank's
// send ring if this process posted it and has not reused its slot (the
// first worker to complete m finds every local rank's m there, as a
// window is shorter than the ring), else generated from the rank's
// expect stream (a remote rank's: front to back, so the move is free).
func (j *netReduceJob) piece0(rank, m, size int) []byte {
	if w := j.r.Workers[rank]; w.Local && j.next[rank] > m && j.next[rank]-m <= j.slots {
		return j.slot(j.send[rank], m)[j.hdrLen:]
	}
	j.expSt[rank].MoveTo(int64(m) * int64(j.chunk) / int64(j.r.Cfg.DType.Size()))
	p := j.piece[:size]
	j.expSt[rank].Fill(p)
	return p
}

// Check reports the first result (in message, then rank order) that was
// not the rank-order sum or came with the wrong INA header.
func (j *netReduceJob) Check() *job.Mismatch { return j.mismatch }

// firstDiff reports the first element where got differs from want; base is
// got's byte offset in the tensor.
func firstDiff(d tensor.DType, rank int, base int64, got, want []byte) *job.Mismatch {
	if bytes.Equal(got, want) {
		return nil
	}
	sz := d.Size()
	for i := 0; i+sz <= len(want); i += sz {
		if !bytes.Equal(got[i:i+sz], want[i:i+sz]) {
			return &job.Mismatch{Rank: rank, Element: (base + int64(i)) / int64(sz), Got: tensor.Value(d, got, i/sz), Want: tensor.Value(d, want, i/sz)}
		}
	}
	return &job.Mismatch{Rank: rank, Element: base / int64(sz), Got: fmt.Sprintf("%d bytes", len(got)), Want: fmt.Sprintf("%d bytes", len(want))}
}
