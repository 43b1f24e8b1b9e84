package netreduce

import (
	"fmt"
	"slices"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
	"github.com/inaemu/inaemu/frames/wire"
	"github.com/inaemu/inaemu/internal/units"
	"github.com/inaemu/inaemu/tensor"
)

// ProgramName is the name the accelerator registers as a switch program,
// and the program a NetReduce job aggregates on by default.
const ProgramName = "netreduce"

func init() {
	switching.RegisterProgram(ProgramName, "NetReduce's aggregator arrays (ASPLOS '23): INA-headed RDMA WRITEs summed per ring, message and rank; multi-rack trees", newProgram)
	switching.ReportFlat(ProgramName, Stats{})
}

// RingHost is the contract between the NetReduce collective (the hosts'
// side: INA-headed WRITEs on a ring of connections) and any switch
// program that aggregates for it: the job's control plane sets its ring
// up through it. The NetReduce accelerator is one; another program that
// implements it serves the same hosts.
type RingHost interface {
	// AddRing sets a ring up; a ring that does not fit the switch's
	// memory budget, or that the program cannot hold, is refused.
	AddRing(RingConfig) error
	// HasRing reports whether ring id is set up.
	HasRing(id uint8) bool
}

// RingCounter is a RingHost that counts per ring (the job's report shows
// its ring's counters when the program has them).
type RingCounter interface {
	RingStats(id uint8) (Stats, bool)
}

// CTTHolder is a RingHost with a connection translation table (a
// multi-rack ring's leaves and spine), which the job's report shows.
type CTTHolder interface {
	CTT(id uint8) []CTTEntry
}

// INAHeader is a RingHost whose first WRITE packets carry a header other
// than NetReduce's 8-byte INA header in front of the data: its length.
type INAHeader interface {
	INAHeaderLen() int
}

// declared is an instance of the program registered as name ("": the
// NetReduce accelerator), on a scratch switch of its own, to ask what it
// declares (its header, limits, ring memory) before any switch holds a
// ring of the job; nil for a name not registered.
func declared(name string) switching.Program {
	if name == "" {
		name = ProgramName
	}
	p, err := switching.New(nil, "scratch", switching.Timing{}).Program(name)
	if err != nil {
		return nil
	}
	return p
}

// HeaderLen is the header the hosts put in front of a message's data for
// the program registered as name: its INAHeaderLen, else the 8-byte INA
// header.
func HeaderLen(name string) int {
	if h, ok := declared(name).(INAHeader); ok {
		return h.INAHeaderLen()
	}
	return wire.INALen
}

// RingMemory is a RingHost whose rings take memory of its own size, not
// NetReduce's aggregator array (RingConfig.MemoryBytes): what AddRing of
// ring cfg adds to its MemoryBytes. A job's memory estimate and its
// report take a ring's memory from it.
type RingMemory interface {
	RingMemoryBytes(cfg RingConfig) int64
}

// RingMemoryOf is the memory ring cfg takes on the program registered as
// name ("": the NetReduce accelerator): its RingMemoryBytes, asked of an
// instance as HeaderLen does, and true; else the aggregator array's
// (cfg.MemoryBytes) and false.
func RingMemoryOf(name string, cfg RingConfig) (int64, bool) {
	if m, ok := declared(name).(RingMemory); ok {
		return m.RingMemoryBytes(cfg), true
	}
	return cfg.MemoryBytes(), false
}

// Limits are what a RingHost can hold of a ring, for tools that draw
// rings to fit it (the conformance suites generate jobs within them). A
// zero bound is none.
type Limits struct {
	MaxWorkers, MaxWindow, MaxMsgLen int
	MinMTU, MaxMTU                   int
	DTypes                           []tensor.DType // the element types it sums; nil: every one
	Trees                            bool           // multi-rack rings (RingConfig.Tree)
}

// RingLimiter is a RingHost that says its Limits. One that does not holds
// every ring the runner validates, multi-rack trees included, as the
// NetReduce accelerator does.
type RingLimiter interface {
	Limits() Limits
}

// LimitsOf are the Limits of the program registered as name ("": the
// NetReduce accelerator's), asked of an instance as HeaderLen does.
func LimitsOf(name string) Limits {
	if l, ok := declared(name).(RingLimiter); ok {
		return l.Limits()
	}
	return Limits{Trees: true}
}

// Fits reports whether d is one of the element types l sums.
func (l Limits) Fits(d tensor.DType) bool {
	return l.DTypes == nil || slices.Contains(l.DTypes, d)
}

// AggregationDrops is the ICRC and port drops (switching.DropReport).
func (s Stats) AggregationDrops() (icrc, port uint64) { return s.ICRCDrops, s.PortDrops }

// Program puts the accelerator in a switch's pipeline: its results take
// the aggregation latency of their ring's arithmetic, re-sent results the
// resend path's, and its rings are refused beyond the switch's memory
// budget.
type Program struct {
	*Accelerator
	env    switching.ProgramEnv
	emit   switching.ProgramEmit
	emitFn Emit
	rings  int
}

func newProgram(env switching.ProgramEnv) switching.Program {
	p := &Program{Accelerator: New(), env: env}
	p.emitFn = p.onEmit
	return p
}

// Name is ProgramName.
func (p *Program) Name() string { return ProgramName }

// Report is the accelerator's counters (Stats).
func (p *Program) Report() any { return p.Stats() }

// Rings is the number of rings set up.
func (p *Program) Rings() int { return p.rings }

// HasRing reports whether ring id is set up here.
func (p *Program) HasRing(id uint8) bool {
	_, ok := p.RingStats(id)
	return ok
}

// AddRing sets up a ring's aggregator array (Accelerator.AddRing), unless
// it does not fit the switch's memory budget.
func (p *Program) AddRing(cfg RingConfig) error {
	if budget := p.env.MemoryBudget(); budget > 0 {
		used, need := p.env.MemoryUsed(), cfg.MemoryBytes()
		if used+need > budget {
			return fmt.Errorf("switch %s: ring %d needs %s of aggregation memory (2×window %d×msg-len %d aggregators × (%d ranks' frame slots + the sum)) and %s of the %s budget is in use: raise --switch-memory or lower --window/--msg-len/--mtu",
				p.env.Switch, cfg.ID, units.FormatBytes(need), cfg.Window, cfg.MsgLen, cfg.Workers, units.FormatBytes(used), units.FormatBytes(budget))
		}
	}
	if err := p.Accelerator.AddRing(cfg); err != nil {
		return err
	}
	p.rings++
	return nil
}

// Process offers the frame to the accelerator: it consumes what it
// absorbed, answered or dropped.
func (p *Program) Process(v *frames.View, port int, emit switching.ProgramEmit) bool {
	p.emit = emit
	switch p.Accelerator.Process(v, port, p.emitFn) {
	case NotINA, Stale:
		return false
	}
	return true
}

func (p *Program) onEmit(frame []byte, kind Kind, ring *RingConfig) {
	t := p.env.Timing
	lat := t.AggregateFixed
	switch kind {
	case KindResend, KindPartialResend, KindTotalResend, KindTranslated:
		// No adder: a cached sum re-sent, or a total translated onto a
		// connection (it "bypasses the aggregator array", §3.3).
		lat = t.Resend
	case KindNotify: // a header duplicated on the way through
		lat = t.Forward
	default:
		if ring.DType.Float() {
			lat = t.AggregateFloat
		}
	}
	p.emit(frame, lat)
}

// Sum adds another switch's counters (switching.ReportSum).
func (s Stats) Sum(other any) any {
	s.Add(other.(Stats))
	return s
}

// StatsOf is the NetReduce counters of a switch report (zero if no
// switch ran the program).
func StatsOf(r switching.Report) Stats {
	s, _ := r.Programs[ProgramName].(Stats)
	return s
}

// RingPrograms are the registered programs that aggregate NetReduce
// rings (a RingHost): the choices of a NetReduce job's --switch-program.
// Programs of other transports (ina-ps) are left out.
func RingPrograms() []string {
	var out []string
	for _, n := range switching.ProgramNames() {
		if _, ok := declared(n).(RingHost); ok {
			out = append(out, n)
		}
	}
	return out
}
