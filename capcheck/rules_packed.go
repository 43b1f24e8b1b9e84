package capcheck

import "fmt"

// The packed family: a SEND or WRITE marked as carrying an INCEPTIONN
// compressed payload (DSCP 10) must unpack (frames/inceptionn's packed
// form); frameParser.add tries each one with a good ICRC.

// RulePacked names a marked payload that does not unpack.
const RulePacked = "packed"

// badPacked is a marked frame whose payload does not unpack, and why.
type badPacked struct {
	frame int
	err   error
}

// packedRule reports the marked frames whose payloads did not unpack.
func (c *checker) packedRule(bad []badPacked) {
	for _, b := range bad {
		c.violation(RulePacked, c.fs.at(b.frame), "marked compressed (DSCP 10) but its payload does not unpack: %v", b.err)
	}
}

func packedSummary(r *Report) string {
	if r.Compressed == 0 {
		return ""
	}
	return fmt.Sprintf("%d frames with INCEPTIONN payloads (DSCP 10), each unpacked", r.Compressed)
}
