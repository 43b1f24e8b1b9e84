package switching

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/inaemu/inaemu/frames"
)

// Program is a switch program: the pipeline hands it every RoCE frame it
// parsed, and it consumes the frame or lets the pipeline forward it. The
// pipeline knows programs only through this interface and the registry
// (RegisterProgram): a program is one package that registers itself, and
// brings its own control plane, memory, counters and report.
type Program interface {
	// Name says what the program is: the name it registered ("netreduce").
	Name() string
	// Process sees a frame that entered by port, parsed into v (which it
	// may re-use). It reports whether it consumed the frame (absorbed,
	// answered or dropped it); if not, the pipeline forwards it. Frames it
	// sends go to emit, with their processing latency, before it returns.
	Process(v *frames.View, port int, emit ProgramEmit) bool
	// MemoryBytes is the switch memory the program holds.
	MemoryBytes() int64
	// Report is the program's own counters, a value encoding/json writes
	// (the switch's report carries it beside the pipeline's counters). A
	// report that implements ReportSum adds up over a run's switches.
	Report() any
}

// FrameProgram is a program that also takes frames the RoCE parser
// rejects (not RoCE: an INA-PS frame with its own EtherType, a UDP
// channel). The pipeline offers such a frame to every installed program
// that implements it, in order, before forwarding it; frame is valid
// only during the call, and the program may rewrite it in place.
type FrameProgram interface {
	ProcessFrame(frame []byte, port int, emit ProgramEmit) bool
}

// ReportSum is a program report that adds another switch's report of
// the same program to itself (a run's switches together) and returns
// the total. Reports that do not implement it are kept per switch.
type ReportSum interface {
	Sum(other any) any
}

// ReportLine is a program report that says itself in one line of the
// text reports (inaemu run, replay): its main counters, without the
// program's name, which the caller prints before it. A report without
// it is in the JSON only.
type ReportLine interface {
	Line() string
}

// ProgramEmit takes a frame a program sends (valid only during the call)
// and the time it spent in the pipeline; the switch forwards it by its
// destination, never filtering it against the ingress port (a result may
// go back out its trigger's port).
type ProgramEmit func(frame []byte, lat time.Duration)

// ProgramEnv is what a program is given of the switch it is installed
// in: what it needs for its latencies, its messages and its memory
// budget, and nothing of the pipeline.
type ProgramEnv struct {
	Switch string // the switch's name, for messages
	Timing Timing
	Clock  Clock
	// MemoryUsed is the memory the switch's programs hold now (every
	// program's MemoryBytes); MemoryBudget is the switch's bound on it
	// (0: none). A program refuses state that would not fit.
	MemoryUsed   func() int64
	MemoryBudget func() int64
}

// registration is a registered program.
type registration struct {
	doc  string
	make func(ProgramEnv) Program
	// flat is the zero report of a program whose report is written flat
	// beside the pipeline's counters (ReportFlat); nil: under its name.
	flat any
}

var programs = map[string]registration{}

// RegisterProgram makes a program installable by name (Switch.Program):
// newProgram makes one for a switch. doc is one line for the help. A
// program package calls it in its init; a second registration of a name
// is a bug and panics.
func RegisterProgram(name, doc string, newProgram func(ProgramEnv) Program) {
	if _, dup := programs[name]; dup {
		panic("switching: program " + name + " registered twice")
	}
	programs[name] = registration{doc: doc, make: newProgram}
}

// ReportFlat makes a registered program's report (zero: its zero value)
// be written flat beside the pipeline's counters in the switch report's
// JSON, and zero on a switch that does not run it. It is for NetReduce
// only, whose counters were fields of the switch report before programs
// were plug-ins: reports and the tools that read them keep their shape.
// Every other program's report is written under its name.
func ReportFlat(name string, zero any) {
	r, ok := programs[name]
	if !ok {
		panic("switching: ReportFlat of unregistered program " + name)
	}
	for n, o := range programs {
		if o.flat != nil && n != name {
			panic("switching: program " + n + "'s report is already the flat one")
		}
	}
	r.flat = zero
	programs[name] = r
}

// ProgramNames are the registered programs, sorted.
func ProgramNames() []string {
	names := make([]string, 0, len(programs))
	for n := range programs {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ProgramDoc is a registered program's line of help ("" if unknown).
func ProgramDoc(name string) string { return programs[name].doc }

// CheckProgram refuses a name no program registered, naming those that
// did and the nearest one: `switch program "netreduse": want netreduce
// (did you mean netreduce?)`.
func CheckProgram(name string) error {
	if _, ok := programs[name]; ok {
		return nil
	}
	names := ProgramNames()
	msg := fmt.Sprintf("switch program %q: want %s", name, strings.Join(names, " or "))
	if near := nearest(name, names); near != "" {
		msg += " (did you mean " + near + "?)"
	}
	return fmt.Errorf("%s", msg)
}

// nearest is the name within two edits of s, if one is.
func nearest(s string, names []string) string {
	best, bestD := "", 3
	for _, n := range names {
		if d := editDistance(s, n); d < bestD {
			best, bestD = n, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev, cur := make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			sub := prev[j-1]
			if a[i-1] != b[j-1] {
				sub++
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, sub)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// Program is the program registered as name on this switch, installed
// (after those already installed) on the first ask: a job's control
// plane asks for its program by name and installs its state through it.
func (s *Switch) Program(name string) (Program, error) {
	if i := slices.IndexFunc(s.programs, func(p Program) bool { return p.Name() == name }); i >= 0 {
		return s.programs[i], nil
	}
	r, ok := programs[name]
	if !ok {
		return nil, CheckProgram(name)
	}
	p := r.make(ProgramEnv{Switch: s.Name, Timing: s.timing, Clock: s.clock, MemoryUsed: s.MemoryBytes,
		MemoryBudget: func() int64 { return s.MemoryBudget }})
	s.Install(p)
	return p, nil
}

// Installed is the program registered as name if this switch runs it
// (nil if not), without installing it.
func (s *Switch) Installed(name string) Program {
	if i := slices.IndexFunc(s.programs, func(p Program) bool { return p.Name() == name }); i >= 0 {
		return s.programs[i]
	}
	return nil
}
