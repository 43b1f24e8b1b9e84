package roce

import "github.com/inaemu/inaemu/internal/clock"

// Clock drives every timer of the transport (see internal/clock, where it
// is defined so that the clocks need not import the transport). The
// emulator's discrete-event scheduler (internal/vclock) implements it in
// virtual time, so a QP needs no goroutine; on real interfaces the same
// clock is advanced in real time by one event loop (internal/wallloop).
type Clock = clock.Clock

// Timer is a pending AfterFunc call.
type Timer = clock.Timer
