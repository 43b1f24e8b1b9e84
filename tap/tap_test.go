package tap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/inaemu/inaemu/internal/testtool"
	"github.com/stretchr/testify/require"
)

func TestPipeCarriesFramesBothWays(t *testing.T) {
	a, b := Pipe("a", "b", 2)
	buf := make([]byte, MaxFrame)
	require.NoError(t, a.WriteFrame([]byte{1, 2, 3}))
	require.NoError(t, b.WriteFrame([]byte{4}))
	n, err := b.ReadFrame(buf)
	require.NoError(t, err)
	require.Equal(t, []byte{1, 2, 3}, buf[:n])
	n, err = a.ReadFrame(buf)
	require.NoError(t, err)
	require.Equal(t, []byte{4}, buf[:n])
	// A full queue drops, like a TAP's: depth 2.
	for i := byte(0); i < 3; i++ {
		require.NoError(t, a.WriteFrame([]byte{i}))
	}
	require.Equal(t, uint64(1), a.(Dropper).Dropped(), "the drop is counted")
	require.Zero(t, b.(Dropper).Dropped())
	for i := byte(0); i < 2; i++ {
		n, err = b.ReadFrame(buf)
		require.NoError(t, err)
		require.Equal(t, []byte{i}, buf[:n])
	}
	// Closing one end: its reads fail, writes to it are lost, the other
	// end stays usable.
	require.NoError(t, b.Close())
	_, err = b.ReadFrame(buf)
	require.True(t, errors.Is(err, os.ErrClosed), "%v", err)
	require.NoError(t, a.WriteFrame([]byte{9}), "writing towards a closed end loses the frame, like a TAP without reader")
	require.Error(t, b.WriteFrame([]byte{9}))
	require.Equal(t, "a", a.Name())
}

// TestHostPipeLosesNothingTheHostSends: a host that writes far faster
// than its loop reads loses nothing (Pipe lost all but the first depth
// frames): every frame arrives, in order, and none is counted dropped.
func TestHostPipeLosesNothingTheHostSends(t *testing.T) {
	h, l := HostPipe("h", "w", 4)
	const n = 2000
	werr := make(chan error, 1)
	go func() {
		for i := range n {
			if err := h.WriteFrame([]byte{byte(i >> 8), byte(i)}); err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	got := make(chan []byte, n)
	go func() { // the reader falls behind now and then
		buf := make([]byte, MaxFrame)
		for i := 0; ; i++ {
			if i%200 == 0 {
				time.Sleep(5 * time.Millisecond)
			}
			k, err := l.ReadFrame(buf)
			if err != nil {
				return
			}
			got <- append([]byte(nil), buf[:k]...)
		}
	}()
	for i := range n {
		select {
		case b := <-got:
			require.Equal(t, []byte{byte(i >> 8), byte(i)}, b, "frame %d", i)
		case <-time.After(5 * time.Second):
			t.Fatalf("frame %d never arrived: %d of %d lost", i, n-i, n)
		}
	}
	require.NoError(t, <-werr)
	require.Zero(t, h.(Dropper).Dropped())
	require.NoError(t, l.Close()) // stops the reader

	// A write waiting for room ends when either end is closed: the loop's
	// (the frame is lost, as towards any closed end) or its own (an error).
	waiting := func(h Device) chan error {
		c := make(chan error, 1)
		go func() { c <- h.WriteFrame([]byte{9}) }()
		select {
		case err := <-c:
			t.Fatalf("a write to a full loop end returned at once: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		return c
	}
	for _, closeLoop := range []bool{true, false} {
		h, l := HostPipe("h", "w", 1)
		require.NoError(t, h.WriteFrame([]byte{1}))
		c := waiting(h)
		if closeLoop {
			require.NoError(t, l.Close())
			require.NoError(t, <-c)
		} else {
			require.NoError(t, h.Close())
			require.ErrorIs(t, <-c, os.ErrClosed)
		}
	}
}

// TestHostPipeCountsWhatTheHostMisses: the loop end never waits; a frame
// a full host queue drops is counted, and its write says so
// (ErrQueueFull), so that the loop can record which frame it was.
func TestHostPipeCountsWhatTheHostMisses(t *testing.T) {
	h, l := HostPipe("h", "w", 3)
	for i := byte(0); i < 5; i++ {
		err := l.WriteFrame([]byte{i})
		if i < 3 {
			require.NoError(t, err)
		} else {
			require.ErrorIs(t, err, ErrQueueFull, "frame %d", i)
			require.ErrorContains(t, err, "tap w: write:")
		}
	}
	require.Equal(t, uint64(2), l.(Dropper).Dropped())
	require.Zero(t, h.(Dropper).Dropped())
	buf := make([]byte, MaxFrame)
	for i := byte(0); i < 3; i++ {
		n, err := h.ReadFrame(buf)
		require.NoError(t, err)
		require.Equal(t, []byte{i}, buf[:n])
	}
	require.NoError(t, l.WriteFrame([]byte{7}), "room again")
	require.NoError(t, h.Close())
	require.NoError(t, l.WriteFrame([]byte{8}), "towards a closed end: lost, not an error, not counted")
	require.Equal(t, uint64(2), l.(Dropper).Dropped())
}

func TestPipeReadUnblocksOnClose(t *testing.T) {
	a, _ := Pipe("a", "b", 1)
	done := make(chan error)
	go func() {
		_, err := a.ReadFrame(make([]byte, 10))
		done <- err
	}()
	require.NoError(t, a.Close())
	require.True(t, errors.Is(<-done, os.ErrClosed))
}

// TestErrNeedLinux: the error off Linux reads as one line and is also
// errors.ErrUnsupported, which test helpers skip on even under CI.
func TestErrNeedLinux(t *testing.T) {
	err := fmt.Errorf("tap: %w (this is plan9)", ErrNeedLinux)
	require.EqualError(t, err, "tap: TAP devices need Linux (this is plan9)")
	require.ErrorIs(t, err, ErrNeedLinux)
	require.ErrorIs(t, err, errors.ErrUnsupported)
	require.NotErrorIs(t, ErrNoPrivilege, errors.ErrUnsupported)
}

func TestTopologyNames(t *testing.T) {
	topo := Topology{Prefix: "ina", Workers: 3}
	require.NoError(t, topo.Validate())
	require.Equal(t, "ina-sw2", topo.SwitchPort(2))
	require.Equal(t, "ina-h0", topo.Host(0))
	require.Equal(t, []string{"ina-br0", "ina-br1", "ina-br2"}, topo.Bridges())
	for _, bad := range []Topology{{"ina", 0, false}, {"ina", 251, false}, {"", 2, false}, {"a/b", 2, false}, {"abcdefghijkl", 2, false}, {"abcdefghijk", 100, false}} {
		require.Error(t, bad.Validate(), "%+v", bad)
	}
	require.NoError(t, Topology{"abcdefghi", 100, false}.Validate(), "abcdefghi-br99 is 14 characters")
	for name, owned := range map[string]bool{"ina-sw0": true, "ina-h12": true, "ina-br3": true, "ina-br": false,
		"ina-brx": false, "inax-sw0": false, "ina-sw0x": false, "eth0": false, "ina-tap0": false} {
		require.Equal(t, owned, ownedName("ina", name), name)
	}
}

// TestUpDownAndFramesCrossTheBridge needs root: it makes a one-link
// topology, checks a frame written to the switch port's TAP comes out of
// the host's, and removes everything.
func TestUpDownAndFramesCrossTheBridge(t *testing.T) {
	testtool.Require(t, "tap", Usable())
	topo := Topology{Prefix: "ittp", Workers: 1}
	t.Cleanup(func() { Down("ittp") })
	made, err := Up(topo)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"ittp-br0", "ittp-sw0", "ittp-h0"}, made)
	sw, err := Open(topo.SwitchPort(0))
	require.NoError(t, err)
	defer sw.Close()
	h, err := Open(topo.Host(0))
	require.NoError(t, err)
	defer h.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, WaitUp(ctx, "ittp-sw0", "ittp-h0"))
	frame := make([]byte, 1500)
	copy(frame, []byte{0x02, 0x1a, 0xe0, 0, 0, 1, 0x02, 0x1a, 0xe0, 0, 0, 2, 0x88, 0xb5})
	frame[100] = 0x5a
	require.NoError(t, sw.WriteFrame(frame))
	buf := make([]byte, MaxFrame)
	n, err := h.ReadFrame(buf)
	require.NoError(t, err)
	require.Equal(t, frame, buf[:n])
	big := make([]byte, 4096+14+40+8+12+16+4) // MTU 4096 over IPv6: still passes the bridge
	copy(big, frame[:14])
	require.NoError(t, h.WriteFrame(big))
	n, err = sw.ReadFrame(buf)
	require.NoError(t, err)
	require.Equal(t, len(big), n)
	removed, err := Down("ittp")
	require.NoError(t, err)
	require.ElementsMatch(t, made, removed)
}

// TestSocketJoinsInterfaces needs root: a raw socket on a TAP reads what
// the TAP's holder writes (and nothing the socket itself sends), and what
// it sends reaches the holder — the wire's view of an interface — on a
// wired topology, where no bridge carries the frames instead.
func TestSocketJoinsInterfaces(t *testing.T) {
	testtool.Require(t, "tap", Usable())
	topo := Topology{Prefix: "itsk", Workers: 1}
	t.Cleanup(func() { Down("itsk") })
	_, err := Up(topo) // bridged first: the wired Up must take the TAP out again
	require.NoError(t, err)
	topo.Wired = true
	made, err := Up(topo)
	require.NoError(t, err)
	require.Empty(t, made, "everything exists")
	_, err = os.Stat("/sys/class/net/itsk-sw0/master")
	require.True(t, os.IsNotExist(err), "the wired topology's TAP is in no bridge: %v", err)
	holder, err := Open(topo.SwitchPort(0))
	require.NoError(t, err)
	defer holder.Close()
	s, err := OpenSocket(topo.SwitchPort(0))
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, WaitUp(ctx, "itsk-sw0"))
	frame := make([]byte, 4096+100)
	copy(frame, []byte{0x02, 0x1a, 0xe0, 0, 0, 1, 0x02, 0x1a, 0xe0, 0, 0, 2, 0x88, 0xb5})
	frame[len(frame)-1] = 0x5a
	buf := make([]byte, MaxFrame)
	require.NoError(t, s.WriteFrame(frame))
	n, err := holder.ReadFrame(buf)
	require.NoError(t, err)
	require.Equal(t, frame, buf[:n], "sent out of the TAP: its holder reads it")
	frame[20] = 0x77
	require.NoError(t, holder.WriteFrame(frame))
	n, err = s.ReadFrame(buf)
	require.NoError(t, err)
	require.Equal(t, frame, buf[:n], "written by the holder: the socket reads it, and not its own frame before it")
	require.NoError(t, holder.WriteFrame(frame))
	_, err = s.ReadFrame(make([]byte, 64))
	require.ErrorContains(t, err, "4196-byte frame does not fit a 64-byte buffer")
	// Nothing else is queued: Close must wake a blocked read.
	done := make(chan error, 1)
	go func() { _, err := s.ReadFrame(buf); done <- err }()
	require.NoError(t, s.Close())
	require.ErrorIs(t, <-done, os.ErrClosed)
}
