package pcapio

import (
	"strconv"
	"strings"
	"time"
)

// Capture comments are machine-readable, and the contract between the
// emulator that writes captures and every reader that judges them (the
// capture checker, the suites, replay): a fault annotation starts with
// FaultCommentPrefix, followed by the names of what was done and the
// event's spec if one fired, and a frame that was not delivered carries
// GhostComment. They live here, with the capture format, so that a reader
// needs no emulator to honour them.
const (
	FaultCommentPrefix = "inaemu: fault="
	GhostComment       = "(not delivered)"
	// DelayKey precedes the extra delay a fault gave a frame beyond its
	// link's own, in nanoseconds ("extra_delay=2300ns"): a reader puts
	// the frame back where its sender sent it by subtracting it.
	DelayKey = "extra_delay="
)

// FaultComment is the annotation of a frame a fault touched: kinds as
// Fault.Kinds has them, the event's spec if one fired (""), the extra
// delay beyond the link's own, and whether the frame was not delivered.
// The extra delay lets a reader put a delayed frame back where its sender
// sent it: its arrival time less the extra delay orders it among the
// link's other frames as they left the sender.
func FaultComment(kinds, spec string, extra time.Duration, ghost bool) string {
	s := FaultCommentPrefix + kinds
	if spec != "" {
		s += " spec=" + strconv.Quote(spec)
	}
	if extra > 0 {
		s += " " + DelayKey + strconv.FormatInt(extra.Nanoseconds(), 10) + "ns"
	}
	if ghost {
		s += " " + GhostComment
	}
	return s
}

// Fault is what a capture comment says a fault did to a frame.
type Fault struct {
	// Kinds are the names of what was done, comma-separated as written
	// ("loss", "drop", "duplicate", "corrupt", "delay", "reorder",
	// "hold", "spoof").
	Kinds string
	// ExtraDelay is the delay beyond the link's own (0 if none written).
	ExtraDelay time.Duration
	// Ghost: the frame was not delivered.
	Ghost bool
}

// Has reports whether kind is one of f's kinds.
func (f Fault) Has(kind string) bool {
	for k := range strings.SplitSeq(f.Kinds, ",") {
		if k == kind {
			return true
		}
	}
	return false
}

// FaultOf reads the fault annotation among a record's comments; ok is
// false when none of them is one.
func FaultOf(comments []string) (f Fault, ok bool) {
	for _, c := range comments {
		rest, found := strings.CutPrefix(c, FaultCommentPrefix)
		if !found {
			continue
		}
		ok = true
		f.Kinds, _, _ = strings.Cut(rest, " ")
		f.Ghost = f.Ghost || strings.Contains(rest, GhostComment)
		if i := strings.LastIndex(rest, " "+DelayKey); i >= 0 {
			v := rest[i+1+len(DelayKey):]
			v, _, _ = strings.Cut(v, " ")
			if n, err := strconv.ParseInt(strings.TrimSuffix(v, "ns"), 10, 64); err == nil && n > 0 {
				// The emulator's delays are below an hour; a larger
				// value (a hand-edited comment) is held to one, so that
				// sums of delays cannot overflow.
				f.ExtraDelay = min(time.Duration(n), maxExtraDelay)
			}
		}
	}
	return f, ok
}

// maxExtraDelay bounds the extra_delay a comment can claim.
const maxExtraDelay = time.Hour

// IsGhost reports whether a capture record's comments mark it as a frame a
// fault dropped, written where it would have arrived: it was never
// delivered (nor, past the fault, on the wire).
func IsGhost(comments []string) bool {
	for _, c := range comments {
		if strings.Contains(c, GhostComment) {
			return true
		}
	}
	return false
}
