package workload_test

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu/workload"
	"github.com/inaemu/inaemu/tensor"
)

// An Ahead read in pieces of any size gives the bytes Fill gives, for
// every type and pattern: across its blocks' edges, to the tensor's end
// and past it, and after a move or a piece of part of an element has
// handed reading back to the Stream.
func TestAheadIsFill(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, d := range []tensor.DType{tensor.F32, tensor.I32, tensor.F16} {
		for _, p := range []workload.Pattern{workload.Random, workload.Ones, workload.Ramp, {Kind: workload.KindLogNormal, Mu: -9, Sigma: 2}} {
			if p.Gradient() && d != tensor.F32 {
				continue
			}
			const total = 300_000 // bytes read ahead: several blocks and a short one
			whole := make([]byte, total+40_000)
			workload.Fill(d, p, whole, 4, 55)
			for trial := range 6 {
				a := workload.NewAhead(workload.NewStream(d, p, 4, 55), total)
				off := 0
				for off < len(whole) {
					k := d.Size() * (1 + rng.IntN(30_000))
					switch {
					case trial == 1 && off > 100_000:
						// Move to where the reader is: nothing changes.
						a.MoveTo(int64(off / d.Size()))
					case trial == 2 && off > 150_000:
						off = d.Size() * rng.IntN(len(whole)/d.Size())
						a.MoveTo(int64(off / d.Size())) // elsewhere: the Stream reads
					case trial == 3 && off > 120_000 && off < 200_000:
						k++ // part of an element: the Stream reads
					}
					k = min(k, len(whole)-off)
					got := make([]byte, k)
					a.Fill(got)
					n := k - k%d.Size()
					require.True(t, bytes.Equal(whole[off:off+n], got[:n]), "%v %v trial %d: piece at %d (%d bytes)", d, p, trial, off, k)
					off += n
				}
				a.Close()
			}
		}
	}
}

// Close stops the goroutine, whether it is mid-tensor, done, or never
// started; Close twice is harmless.
// It counts the goroutines generating, by their stacks: the number of
// all goroutines had also counted one of the test runner's ending
// meanwhile (under -race).
func TestAheadCloseStops(t *testing.T) {
	require.Zero(t, generating(), "before the test")
	var as []*workload.Ahead
	for i := range 8 {
		a := workload.NewAhead(workload.NewStream(tensor.F32, workload.Random, i, 1), 64<<20)
		as = append(as, a)
		if i%4 != 0 { // some never start
			a.Fill(make([]byte, 1000))
		}
	}
	require.Equal(t, 6, generating(), "one goroutine per Ahead read")
	for _, a := range as {
		a.Close()
		a.Close()
	}
	// Close returns when the goroutine has returned; it may take a
	// moment more to leave the scheduler's list.
	n := generating()
	for i := 0; i < 1000 && n > 0; i++ {
		runtime.Gosched()
		n = generating()
	}
	require.Zero(t, n, "goroutines generating after Close")
}

// generating counts the goroutines in an Ahead's generator.
func generating() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	return bytes.Count(buf, []byte("workload.(*Ahead).generate("))
}
