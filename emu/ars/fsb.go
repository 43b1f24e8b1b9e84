package ars

import "github.com/inaemu/inaemu/frames/wire"

// The Frame Status Buffer's geometry (TCSI '21 Table IV): 4 frame flows
// (RDMA WRITE messages) of at most 128 frames each, 512 frame indices.
const (
	Flows       = 4
	FlowFrames  = 128
	BufferSlots = Flows * FlowFrames
)

// noBase is a free column's base PSN: 25 bits, the complement bit set, so
// it is larger than any 24-bit PSN and never matches one (§IV-C: "all the
// base PSN values are initialized with 25'h1ffffff").
const noBase = 0x1FFFFFF

// fsb is one member port's Frame Status Buffer with its floating pointers
// (§IV-C, Fig. 13). Each Aggregation Frame Handler keeps its own: QP and
// PSN of one NIC say nothing about another's, so only the frame index
// (column base + offset) is common to all ports.
//
// p[0]..p[3] are the floating pointers, each a column (0..3, i.e. base
// address 0, 128, 256, 384). p[0] is pnext, the column the next flow
// takes; p[3] the newest flow's. A new flow (a WRITE FIRST) takes pnext,
// clears its 128 status bits and rotates the pointers by one.
type fsb struct {
	p    [Flows]int
	base [Flows]uint32 // per column: the flow's first PSN (25 bits; noBase: free)
	n    [Flows]int    // per column: frames in the flow (from its RETH DMA length)
	msg  [Flows]int64  // per column: the flow's message number (the job's count)
	done [BufferSlots]bool
}

func newFSB() *fsb {
	f := &fsb{p: [Flows]int{0, 1, 2, 3}}
	for c := range f.base {
		f.base[c], f.msg[c] = noBase, -1
	}
	return f
}

// distance is the paper's offset arithmetic: the base PSN (25 bits)
// subtracted from {1'b1, PSN}, the complement bit chopped off. It is the
// PSN distance modulo 2^24, so a flow that crosses 0xFFFFFF → 0 keeps
// counting up.
func distance(psn, base uint32) uint32 {
	return ((1<<24 | psn&wire.PSNMask) - base) & wire.PSNMask
}

// locate is the frame index of a later frame (WRITE MIDDLE/LAST) with psn:
// its PSN is compared with the base PSNs from the newest flow (p3) to the
// oldest (p0), and the first flow it lies within gives the column and the
// offset. The strict order matters: a short flow and the next one are both
// within 128 PSNs of a frame of the later flow. A flow's extent is its
// frame count, not the whole 128: a frame past the newest flow's last
// frame belongs to a flow whose WRITE FIRST was not seen, and must not be
// taken for an older one's (the paper compares the distance with 128).
func (f *fsb) locate(psn uint32) (col, off int, ok bool) {
	for j := Flows - 1; j >= 0; j-- {
		c := f.p[j]
		if f.base[c] == noBase {
			continue
		}
		if d := distance(psn, f.base[c]); int(d) < f.n[c] {
			return c, int(d), true
		}
	}
	return 0, 0, false
}

// first finds the column of a WRITE FIRST already recorded (a
// retransmission re-reads its own column): its PSN is a base PSN.
func (f *fsb) first(psn uint32) (col int, ok bool) {
	for j := Flows - 1; j >= 0; j-- {
		if c := f.p[j]; f.base[c] == psn&wire.PSNMask {
			return c, true
		}
	}
	return 0, false
}

// start begins a flow of n frames at psn for message msg: it takes pnext's
// column, clears the column's status (128 cycles in hardware, hidden under
// the frame's own 128+ cycles), and rotates the pointers.
func (f *fsb) start(psn uint32, n int, msg int64) (col int) {
	col = f.p[0]
	f.base[col], f.n[col], f.msg[col] = psn&wire.PSNMask, n, msg
	clear(f.done[col*FlowFrames : (col+1)*FlowFrames])
	f.p = [Flows]int{f.p[1], f.p[2], f.p[3], f.p[0]}
	return col
}

// newest is the newest flow's column (p3), ok false before any flow.
func (f *fsb) newest() (col int, ok bool) {
	c := f.p[Flows-1]
	return c, f.base[c] != noBase
}

// index is a frame's index in the buffers: its column's base address plus
// its offset in the flow.
func index(col, off int) int { return col*FlowFrames + off }
