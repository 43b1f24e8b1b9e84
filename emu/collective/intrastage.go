package collective

import (
	"time"

	"github.com/inaemu/inaemu/emu/topo"
	"github.com/inaemu/inaemu/internal/vclock"
	"github.com/inaemu/inaemu/tensor"
)

// An intra-machine stage of a scheme (reduce-scatter, gather, scatter,
// all-gather among one machine's GPUs) is a schedule of transfers over
// the machine's GPU interconnect, the same model as intraLink: a transfer
// of b bytes takes b/rate + α (topo.Intra.StepTime), one at a time from
// each sending GPU (its port is shared with every link and job sending
// from that GPU), and then its bytes are in the receiver's buffer, added
// to what is there or copied over it. Nothing of it is on a wire.
//
// A transfer belongs to a step; a GPU sends its transfers of step s once
// it has received every transfer addressed to it in steps before s, so
// data moves only once it is final, and a stage of k steps of b bytes
// takes k × (b/rate + α) when every GPU sends one transfer per step.

// intraXfer is one transfer: bytes [lo, hi) of GPU src's buffer into the
// same bytes of GPU dst's (GPUs as the machine's local indices), added
// (dst = dst + src, in the element type) or copied.
type intraXfer struct {
	step, src, dst int
	lo, hi         int
	add            bool
}

// intraStage runs one schedule on one machine. buf[g] is local GPU g's
// buffer, busy[g] when its port is free; done is called once every
// transfer has landed, at[g] when GPU g received its last (or, for a GPU
// that receives nothing, when the stage began).
type intraStage struct {
	clock  *vclock.Clock
	intra  topo.Intra
	dtype  tensor.DType
	buf    [][]byte
	busy   []*time.Duration
	sends  [][]intraXfer // per GPU, in step order
	next   []int         // per GPU: its next send
	recvs  [][]int       // per GPU, per step: transfers still to land
	got    []int         // per GPU: the steps fully received (all before got[g] are)
	left   int           // transfers not yet landed
	at     []time.Duration
	onDone func()
}

func newIntraStage(c *vclock.Clock, in topo.Intra, d tensor.DType, buf [][]byte, busy []*time.Duration, xs []intraXfer, onDone func()) *intraStage {
	n := len(buf)
	st := &intraStage{clock: c, intra: in, dtype: d, buf: buf, busy: busy, sends: make([][]intraXfer, n), next: make([]int, n),
		recvs: make([][]int, n), got: make([]int, n), left: len(xs), at: make([]time.Duration, n), onDone: onDone}
	steps := 0
	for _, x := range xs {
		steps = max(steps, x.step+1)
	}
	for g := range n {
		st.recvs[g] = make([]int, steps+1)
	}
	for _, x := range xs {
		st.sends[x.src] = append(st.sends[x.src], x)
		st.recvs[x.dst][x.step]++
	}
	return st
}

// start posts what every GPU can send at once.
func (st *intraStage) start() {
	now := st.clock.Now()
	for g := range st.buf {
		st.at[g] = now
		st.advance(g)
	}
	if st.left == 0 {
		st.onDone()
	}
}

// advance moves GPU g past the steps it has fully received and posts its
// sends they allow.
func (st *intraStage) advance(g int) {
	r := st.recvs[g]
	for st.got[g] < len(r)-1 && r[st.got[g]] == 0 {
		st.got[g]++
	}
	for st.next[g] < len(st.sends[g]) {
		x := st.sends[g][st.next[g]]
		if x.step > st.got[g] {
			return
		}
		st.next[g]++
		st.post(x)
	}
}

// post takes the transfer's bytes now (they are final: see advance) and
// lands them when the sending port has moved them.
func (st *intraStage) post(x intraXfer) {
	now := st.clock.Now()
	data := append([]byte(nil), st.buf[x.src][x.lo:x.hi]...)
	b := st.busy[x.src]
	*b = max(*b, now) + st.intra.StepTime(int64(len(data)))
	st.clock.AfterFunc(*b-now, func() { st.land(x, data) })
}

func (st *intraStage) land(x intraXfer, data []byte) {
	dst := st.buf[x.dst][x.lo:x.hi]
	if x.add {
		tensor.Add(st.dtype, dst, data)
	} else {
		copy(dst, data)
	}
	st.recvs[x.dst][x.step]--
	st.at[x.dst] = st.clock.Now()
	st.left--
	st.advance(x.dst)
	if st.left == 0 {
		st.onDone()
	}
}

// The schedules. bounds[c]:bounds[c+1] is piece c of the tensor, bytes;
// n = len(bounds)-1 GPUs, GPU g's neighbour on the ring is g+1 mod n.

// ringReduceScatter leaves piece c at GPU c summed over the machine:
// piece c starts at GPU c+1, and each GPU after it adds its own to what
// arrives, in n-1 steps of one piece per GPU. In step s GPU g sends piece
// g-s-1 to g+1.
func ringReduceScatter(bounds []int) []intraXfer {
	n := len(bounds) - 1
	var xs []intraXfer
	for s := 0; s < n-1; s++ {
		for g := range n {
			c := mod(g-s-1, n)
			xs = append(xs, intraXfer{step: s, src: g, dst: (g + 1) % n, lo: bounds[c], hi: bounds[c+1], add: true})
		}
	}
	return xs
}

// ringAllGather passes every GPU's piece c = g round the ring (copies) in
// n-1 steps, from step first on: in step first+s GPU g sends piece g-s.
func ringAllGather(bounds []int, first int) []intraXfer {
	n := len(bounds) - 1
	var xs []intraXfer
	for s := 0; s < n-1; s++ {
		for g := range n {
			c := mod(g-s, n)
			xs = append(xs, intraXfer{step: first + s, src: g, dst: (g + 1) % n, lo: bounds[c], hi: bounds[c+1]})
		}
	}
	return xs
}

// halvingReduceScatter is recursive halving (n a power of two): in step k
// GPU g and its partner g XOR d (d = n/2^(k+1)) split the 2d pieces
// both cover; each sends the half the other keeps and adds what it
// receives into its own half. After log2(n) steps GPU g holds piece g
// summed over the machine; each GPU sends (n-1)/n of the tensor.
func halvingReduceScatter(bounds []int) []intraXfer {
	n := len(bounds) - 1
	var xs []intraXfer
	for k, d := 0, n/2; d >= 1; k, d = k+1, d/2 {
		for g := range n {
			base := g &^ (2*d - 1)
			send := base + d // the upper half, if g keeps the lower
			if g&d != 0 {
				send = base
			}
			xs = append(xs, intraXfer{step: k, src: g, dst: g ^ d, lo: bounds[send], hi: bounds[send+d], add: true})
		}
	}
	return xs
}

// binomialGather collects every GPU's piece at GPU 0 (n a power of two):
// in step k (d = 2^k) each GPU g with g mod 2d = d sends the d pieces it
// holds, g..g+d-1, to g-d. log2(n) steps, (n-1)/n of the tensor into
// GPU 0.
func binomialGather(bounds []int) []intraXfer {
	n := len(bounds) - 1
	var xs []intraXfer
	for k, d := 0, 1; d < n; k, d = k+1, 2*d {
		for g := d; g < n; g += 2 * d {
			xs = append(xs, intraXfer{step: k, src: g, dst: g - d, lo: bounds[g], hi: bounds[g+d]})
		}
	}
	return xs
}

// binomialScatter sends GPU 0's tensor out so that GPU g holds piece g
// (n a power of two): in step k (d = n/2^(k+1)) each GPU g with
// g mod 2d = 0 sends pieces g+d..g+2d-1 to g+d.
func binomialScatter(bounds []int) []intraXfer {
	n := len(bounds) - 1
	var xs []intraXfer
	for k, d := 0, n/2; d >= 1; k, d = k+1, d/2 {
		for g := 0; g < n; g += 2 * d {
			xs = append(xs, intraXfer{step: k, src: g, dst: g + d, lo: bounds[g+d], hi: bounds[g+2*d]})
		}
	}
	return xs
}

// log2 is the number of halvings of a power of two n.
func log2(n int) int {
	k := 0
	for ; n > 1; n /= 2 {
		k++
	}
	return k
}
