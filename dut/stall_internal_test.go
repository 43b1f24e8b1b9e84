package dut

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/inaemu/inaemu/emu"
	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/inaemu/inaemu/roce"
)

// TestStallClockStartsWithTheJob: the stall detector's clock runs from
// the job's first frame, not from the watch's making (the hosts' tensors
// and session come between, seconds on a loaded machine): idle for four
// limits before the first frame is no stall; after it, the limit is.
func TestStallClockStartsWithTheJob(t *testing.T) {
	cfg := emu.DefaultConfig()
	cfg.Workers, cfg.Timeout = 2, 8 // 1 ms: a limit of 8.4 ms
	w := newWatch(cfg)
	limit := StallTimeouts * roce.AckTimeout(8)
	require.Equal(t, limit, w.limit)
	done := make(chan struct{})
	stopped := make(chan struct{})
	go w.run(done, func() { close(stopped) })
	time.Sleep(4 * limit) // the setup: no frame yet
	require.Nil(t, w.stalled(), "stalled before the job sent anything")
	armed := time.Now()
	w.observe(0, true, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}) // the first frame (any)
	select {
	case <-stopped:
	case <-time.After(testtool.Budget(5 * time.Second)):
		close(done)
		t.Fatal("no stall after the first frame")
	}
	s := w.stalled()
	require.NotNil(t, s)
	require.GreaterOrEqual(t, time.Since(armed), limit)
	require.GreaterOrEqual(t, s.For, limit)
	require.LessOrEqual(t, s.For, time.Since(armed), "counted from the first frame")
}
