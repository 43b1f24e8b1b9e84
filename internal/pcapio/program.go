package pcapio

import (
	"io"
	"strings"
)

// SwitchProgramPrefix starts the Section Header Block comment line that
// names the switch program a capture's switches ran ("inaemu:
// switch-program=ars"), so that a reader (inaemu check, replay) knows
// which aggregation its frames follow.
const SwitchProgramPrefix = "inaemu: switch-program="

// DefaultSwitchProgram is the program of a capture that names none:
// NetReduce's, whose captures carry no such line (every capture written
// before switch programs were named, and every NetReduce capture since,
// byte for byte the same).
const DefaultSwitchProgram = "netreduce"

// SwitchProgramComment is the section comment line naming program, ""
// for DefaultSwitchProgram or "".
func SwitchProgramComment(program string) string {
	if program == "" || program == DefaultSwitchProgram {
		return ""
	}
	return SwitchProgramPrefix + program
}

// SwitchProgram is the switch program a capture's section comment
// (Reader's SectionComment) names, DefaultSwitchProgram if none.
func SwitchProgram(sectionComment string) string {
	for line := range strings.SplitSeq(sectionComment, "\n") {
		if p, ok := strings.CutPrefix(strings.TrimSpace(line), SwitchProgramPrefix); ok && p != "" {
			return p
		}
	}
	return DefaultSwitchProgram
}

// NewCommentedWriter is NewWriter with a Section Header Block comment
// ("" for none, as NewWriter writes).
func NewCommentedWriter(out io.Writer, comment string, names ...string) (*Writer, error) {
	return newWriter(out, comment, names...)
}
