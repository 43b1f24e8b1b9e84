package capcheck

import "fmt"

// The icrc family: every RoCE frame's ICRC, computed over the invariant
// fields (IBTA Annex A17) while the frames are parsed (frameParser.add).

// RuleICRC names a frame whose ICRC is wrong.
const RuleICRC = "icrc"

// badICRC is a frame whose ICRC is wrong: the one it carries, the one its
// bytes give.
type badICRC struct {
	frame          int
	wire, computed uint32
}

// icrcRule reports the frames parsing found with a wrong ICRC.
func (c *checker) icrcRule(bad []badICRC) {
	for _, b := range bad {
		c.violation(RuleICRC, c.fs.at(b.frame), "bad ICRC: wire %08x, computed %08x", b.wire, b.computed)
	}
}

func icrcSummary(r *Report) string { return fmt.Sprintf("%d bad", r.BadICRC) }
