package emu

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/internal/pcapio"
)

// Config.Progress sees the results of every rank grow to their total:
// never backwards, at most once per PollEvents events and once at the end,
// where done is total — in both algorithms.
func TestProgressIsMonotoneAndEnds(t *testing.T) {
	for _, mode := range []Mode{NetReduce, Ring} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := smallJob(mode)
			var calls, last, total int64
			cfg.Progress = func(done, tot int64) {
				calls++
				assert.GreaterOrEqual(t, done, last, "done never goes back")
				assert.LessOrEqual(t, done, tot)
				if total != 0 {
					assert.Equal(t, total, tot, "the total is fixed")
				}
				last, total = done, tot
			}
			res, err := Run(cfg)
			require.NoError(t, err)
			require.True(t, res.Exact)
			assert.Positive(t, total)
			assert.Equal(t, total, last, "the last call has every result")
			assert.Equal(t, int64(res.Events/PollEvents+1), calls, "once per PollEvents events, and at the end")
		})
	}
}

// A Context that ends stops the run at the next poll: Run returns the
// Result so far and an *Interrupted saying how far it got, wrapping the
// context's cause, and the capture is closed so that it reads to its end.
func TestContextStopsTheRun(t *testing.T) {
	cfg := smallJob(NetReduce)
	cfg.TensorBytes = 4 << 20 // far more than PollEvents events
	path := filepath.Join(t.TempDir(), "stopped.pcapng")
	f, err := os.Create(path)
	require.NoError(t, err)
	w := bufio.NewWriter(f)
	cfg.Capture = w
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // before the start: the run stops at its first poll
	cfg.Context = ctx
	res, err := Run(cfg)
	require.NoError(t, w.Flush())
	require.NoError(t, f.Close())

	var stopped *Interrupted
	require.ErrorAs(t, err, &stopped)
	assert.ErrorIs(t, err, context.Canceled)
	require.NotNil(t, res)
	assert.Equal(t, PollEvents, res.Events, "stopped at the first poll")
	assert.Positive(t, stopped.At)
	assert.Positive(t, stopped.Results, "some results were received")
	assert.Less(t, stopped.Results, stopped.Want)
	assert.False(t, res.Exact)
	assert.Equal(t, err.Error(), res.Error)
	var je *JobError
	assert.False(t, errors.As(err, &je), "an interruption is no job failure")

	recs, err := pcapio.ReadAll(path)
	require.NoError(t, err, "the capture is whole")
	assert.NotEmpty(t, recs)
	assert.LessOrEqual(t, uint64(len(recs)), res.FramesSent*4, "frames up to the stop")
}
