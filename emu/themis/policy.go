package themis

import "fmt"

// Policy is an intra-dimension policy: which of the chunks ready on a
// dimension it serves next (the paper's §4.3).
type Policy string

const (
	// FIFO serves chunks in the order they became ready on the
	// dimension (the baseline's policy, Table 3).
	FIFO Policy = "fifo"
	// SCF is Smallest-Chunk-First, the paper's best policy: "processing
	// smaller chunks takes a shorter time and allows the chunk to be fed
	// to other dimensions faster" (§4.3).
	SCF Policy = "scf"
)

// Validate refuses a policy Next does not know.
func (p Policy) Validate() error {
	if p != FIFO && p != SCF {
		return fmt.Errorf("themis: unknown intra-dimension policy %q (want fifo or scf)", p)
	}
	return nil
}

// ReadyChunk is a chunk waiting on a dimension for one of its stages.
type ReadyChunk struct {
	Chunk, Stage int // the chunk and the index of its stage
	// Bytes is the stage's size as SCF compares it: the larger of what
	// each NPU holds before and after it (ASTRA-sim's Sys::insert_stream
	// compares max(initial size, final size)), so an AG is as large as
	// what it gathers.
	Bytes float64
	// Last is true for the chunk's last stage: SCF serves those after
	// the others, since finishing one feeds no other dimension
	// (ASTRA-sim puts a stream with one phase left at the queue's end).
	Last bool
	// Seq is the order in which chunks became ready on this dimension,
	// lower first; ties (equal Seq) go to the lower chunk, then stage.
	Seq int
}

// Ready is stage j of s waiting on its dimension, seq its arrival order.
func Ready(s ChunkSchedule, j, seq int) ReadyChunk {
	st := s.Stages[j]
	return ReadyChunk{Chunk: s.Chunk, Stage: j, Bytes: max(st.InBytes, st.OutBytes), Last: j == len(s.Stages)-1, Seq: seq}
}

// Next is the index in ready of the chunk the dimension serves next, -1
// if none is ready. FIFO takes the earliest arrival; SCF the smallest
// stage among those that are not their chunk's last (then the last
// ones, smallest first), equal sizes in arrival order. ASTRA-sim's
// insertion puts a newcomer before the waiting streams of its size;
// inaemu keeps arrival order among equals so that no chunk waits behind
// later arrivals of its own size. An unknown policy serves FIFO.
func Next(p Policy, ready []ReadyChunk) int {
	best := -1
	for i := range ready {
		if best < 0 || before(p, &ready[i], &ready[best]) {
			best = i
		}
	}
	return best
}

func before(p Policy, a, b *ReadyChunk) bool {
	if p == SCF {
		if a.Last != b.Last {
			return !a.Last
		}
		if a.Bytes != b.Bytes {
			return a.Bytes < b.Bytes
		}
	}
	if a.Seq != b.Seq {
		return a.Seq < b.Seq
	}
	if a.Chunk != b.Chunk {
		return a.Chunk < b.Chunk
	}
	return a.Stage < b.Stage
}
