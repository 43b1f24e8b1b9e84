package emu

import (
	"fmt"

	"github.com/inaemu/inaemu/emu/tensor"
	"github.com/inaemu/inaemu/roce"
)

// ringJob is Ring-AllReduce over the same RC connections (the switch only
// forwards): the tensor is cut into H chunks; in reduce-scatter step s
// (s = 0..H-2) rank r sends chunk (r-s) mod H to r+1, which adds it into
// its own copy; after H-1 steps rank r holds the full sum of chunk
// (r+1) mod H. In all-gather step t (s = H-1+t) rank r sends chunk
// (r+1-t) mod H on, and r+1 keeps it.
//
// Summation order (what the reference reproduces): chunk c starts at rank
// c and each later rank adds its own, so chunk c is
// ((x_c + x_{c+1}) + x_{c+2}) + ... + x_{c+H-1}, indices mod H.
//
// Each chunk travels as messages of MsgLen×MTU bytes (RDMA WRITE with
// immediate = step<<24 | message), pipelined: message j of step s+1 goes
// as soon as message j of step s has arrived, as NCCL slices a chunk.
type ringJob struct {
	r       *runner
	n       int
	msgB    int   // bytes per message
	bounds  []int // chunk c is bytes bounds[c]:bounds[c+1]
	maxC    int   // largest chunk, bytes: the recv region of a step
	steps   int   // 2(H-1)
	input   [][]byte
	data    [][]byte   // per rank: its tensor, reduced in place during reduce-scatter
	recv    [][]byte   // per rank: steps × maxC, one region per step (its MR)
	arrived [][][]bool // per rank, step, message
}

func init() { RegisterAlgorithm(Ring, func(r *runner) (collective, error) { return newRingJob(r) }) }

func newRingJob(r *runner) (*ringJob, error) {
	cfg := r.cfg
	n := cfg.Workers
	j := &ringJob{r: r, n: n, msgB: cfg.MsgLen * cfg.MTU, steps: 2 * (n - 1)}
	sz := int64(cfg.DType.Size())
	elems := cfg.TensorBytes / sz
	for c := 0; c <= n; c++ {
		j.bounds = append(j.bounds, int(elems*int64(c)/int64(n)*sz))
	}
	for c := 0; c < n; c++ {
		j.maxC = max(j.maxC, j.bounds[c+1]-j.bounds[c])
	}
	for _, w := range r.workers {
		in := make([]byte, cfg.TensorBytes)
		tensor.Fill(cfg.DType, cfg.Pattern, in, w.rank, cfg.Seed)
		j.input = append(j.input, in)
		j.data = append(j.data, append([]byte(nil), in...))
		rb := make([]byte, j.steps*j.maxC)
		j.recv = append(j.recv, rb)
		w.recvMR = &roce.MR{Addr: r.recvVA, Buf: rb, RKey: r.rkey(w.rank), Access: roce.AccessLocalWrite | roce.AccessRemoteWrite}
		if err := w.h.PD.Register(w.recvMR); err != nil {
			return nil, err
		}
		arr := make([][]bool, j.steps)
		for s := range arr {
			k := j.msgCount(j.recvChunk(w.rank, s))
			arr[s] = make([]bool, k)
			w.recvWant += k
			w.sendWant += j.msgCount(j.sendChunk(w.rank, s))
		}
		j.arrived = append(j.arrived, arr)
	}
	return j, nil
}

func mod(a, n int) int { return ((a % n) + n) % n }

// sendChunk and recvChunk are the chunk rank r sends / receives in step s.
func (j *ringJob) sendChunk(r, s int) int {
	if s < j.n-1 {
		return mod(r-s, j.n)
	}
	return mod(r+1-(s-(j.n-1)), j.n)
}

func (j *ringJob) recvChunk(r, s int) int { return j.sendChunk(mod(r-1, j.n), s) }

func (j *ringJob) chunkLen(c int) int { return j.bounds[c+1] - j.bounds[c] }

func (j *ringJob) msgCount(c int) int { return (j.chunkLen(c) + j.msgB - 1) / j.msgB }

// msgRange is message m of chunk c: its byte range within the chunk.
func (j *ringJob) msgRange(c, m int) (int, int) {
	lo := m * j.msgB
	return lo, min(lo+j.msgB, j.chunkLen(c))
}

func (j *ringJob) start() error {
	for _, w := range j.r.local() {
		for s := 0; s < j.steps; s++ {
			for m := range j.arrived[w.rank][s] {
				if err := w.rq.PostRecv(roce.RecvWR{ID: uint64(s)<<24 | uint64(m)}); err != nil {
					return err
				}
			}
		}
		c := j.sendChunk(w.rank, 0)
		for m := 0; m < j.msgCount(c); m++ {
			if err := j.post(w, 0, m); err != nil {
				return err
			}
		}
	}
	return nil
}

// post sends message m of step s: from the rank's own (reduced) tensor up
// to the first all-gather step, then from what the previous step received.
func (j *ringJob) post(w *worker, s, m int) error {
	c := j.sendChunk(w.rank, s)
	lo, hi := j.msgRange(c, m)
	var local []byte
	if s <= j.n-1 {
		local = j.data[w.rank][j.bounds[c]+lo : j.bounds[c]+hi]
	} else {
		local = j.recv[w.rank][(s-1)*j.maxC+lo : (s-1)*j.maxC+hi]
	}
	succ := j.r.workers[(w.rank+1)%j.n]
	return w.sq.PostSend(roce.SendWR{ID: uint64(s)<<24 | uint64(m), Opcode: roce.WRWriteImm, Local: local,
		RemoteVA: j.r.recvVA + uint64(s*j.maxC+lo), RKey: succ.recvMR.RKey, Imm: uint32(s)<<24 | uint32(m), Signaled: true})
}

func (j *ringJob) onCompletion(w *worker) {
	j.r.drain(w, func(c roce.Completion) {
		if !c.Recv {
			w.sendDone++
			return
		}
		s, m := int(c.Imm>>24), int(c.Imm&0xFFFFFF)
		if !c.HasImm || s >= j.steps || m >= len(j.arrived[w.rank][s]) || j.arrived[w.rank][s][m] {
			j.r.err = &JobError{Msg: fmt.Sprintf("rank %d: unexpected message (imm %#x)", w.rank, c.Imm)}
			return
		}
		j.arrived[w.rank][s][m] = true
		if s < j.n-1 { // reduce-scatter: add the predecessor's partial sum
			ch := j.recvChunk(w.rank, s)
			lo, hi := j.msgRange(ch, m)
			tensor.Add(j.r.cfg.DType, j.data[w.rank][j.bounds[ch]+lo:j.bounds[ch]+hi], j.recv[w.rank][s*j.maxC+lo:s*j.maxC+hi])
		}
		w.recvDone++
		if w.recvDone == w.recvWant {
			w.doneAt = j.r.fab.Clock.Now()
		}
		if s+1 < j.steps {
			if err := j.post(w, s+1, m); err != nil {
				j.r.err = &JobError{Msg: fmt.Sprintf("rank %d: post step %d message %d: %v", w.rank, s+1, m, err)}
			}
		}
	})
}

// result is chunk c of rank r's final tensor: its own reduced chunk r+1,
// or the copy all-gather delivered.
func (j *ringJob) result(r, c int) []byte {
	if c == mod(r+1, j.n) {
		return j.data[r][j.bounds[c]:j.bounds[c+1]]
	}
	s := j.n - 1 + mod(r-c, j.n)
	return j.recv[r][s*j.maxC : s*j.maxC+j.chunkLen(c)]
}

func (j *ringJob) check() *Mismatch {
	d := j.r.cfg.DType
	for c := 0; c < j.n; c++ {
		lo, hi := j.bounds[c], j.bounds[c+1]
		ref := append([]byte(nil), j.input[c][lo:hi]...)
		for i := 1; i < j.n; i++ {
			tensor.Add(d, ref, j.input[(c+i)%j.n][lo:hi])
		}
		for r := 0; r < j.n; r++ {
			if !j.r.workers[r].local {
				continue
			}
			if m := firstDiff(d, r, int64(lo), j.result(r, c), ref); m != nil {
				return m
			}
		}
	}
	return nil
}
