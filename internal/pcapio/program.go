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
	if p := sectionValue(sectionComment, SwitchProgramPrefix); p != "" {
		return p
	}
	return DefaultSwitchProgram
}

// sectionValue is what follows prefix on the first line of a section
// comment that starts with it and says something, "" if none does.
func sectionValue(sectionComment, prefix string) string {
	for line := range strings.SplitSeq(sectionComment, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok && v != "" {
			return v
		}
	}
	return ""
}

// NewCommentedWriter is NewWriter with a Section Header Block comment
// ("" for none, as NewWriter writes).
func NewCommentedWriter(out io.Writer, comment string, names ...string) (*Writer, error) {
	return newWriter(out, comment, names...)
}

// DTypePrefix starts the Section Header Block comment line that names the
// element type of the NetReduce payloads a capture's switches summed
// ("inaemu: dtype=f16"), so that a reader (inaemu check's agg-sum rule)
// adds them as the switch did. A capture of f32 jobs (the default) carries
// no such line, byte for byte the captures written before it existed.
const DTypePrefix = "inaemu: dtype="

// DTypeComment is the section comment line naming dtype, "" for f32 or "".
func DTypeComment(dtype string) string {
	if dtype == "" || dtype == "f32" {
		return ""
	}
	return DTypePrefix + dtype
}

// DType is the element type a capture's section comment names, "" if none.
func DType(sectionComment string) string { return sectionValue(sectionComment, DTypePrefix) }

// JoinComments joins the non-empty comment lines into one section comment.
func JoinComments(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		if l == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(l)
	}
	return b.String()
}
