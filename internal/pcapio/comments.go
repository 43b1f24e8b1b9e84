package pcapio

import "strings"

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
)

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
