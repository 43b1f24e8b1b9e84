package inaps

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/inaemu/inaemu/emu/switching"
	"github.com/inaemu/inaemu/frames"
)

// ProgramName is the switch program's registered name.
const ProgramName = "ina-ps"

// AggregatorBytes is the memory one aggregator's values take (62 ×
// int32); a pool of --switch-memory bytes holds that many over this.
const AggregatorBytes = Values * 4

// DefaultAggregators is the pool of ESA's simulation: 5 MB for INA,
// as ATP's MAX_AGTR_COUNT, 20,000 aggregators of 248 bytes (4.96 MB).
const DefaultAggregators = 20000

// MaxAggregators is the most the 16-bit aggregator index addresses.
const MaxAggregators = 65535

func init() {
	switching.RegisterProgram(ProgramName, "INA-PS aggregation with a parameter server (ATP's frame): the static, fcfs, esa, straw1 and straw2 policies of sharing one aggregator pool", func(env switching.ProgramEnv) switching.Program {
		return &Program{env: env}
	})
}

// Aggregator is one slot of the pool: the task it holds and its running
// sum.
type Aggregator struct {
	Used     bool
	Job      uint16
	Seq      uint16
	Key      uint64 // the task's key: its iteration and its sequence number's wraps (TaskKey)
	Prio     uint8
	Level    uint8
	FanIn    uint8
	ECN      bool
	Done     bool // static: the round completed, its result kept (shadow copy); fcfs: sent to the PS, awaiting its ACK
	Bitmap   uint32
	Count    uint8
	Values   Vec
	Since    time.Duration // when the task took it
	DoneAt   time.Duration // when its last contribution came (Done)
	Out      uint32        // the contributions that have left in a frame built from it
	lastFull bool          // the last contribution completed it (static's re-send answer)
}

// Job is a job's entry in the switch's control plane: its workers (bit
// w is Workers[w]), its PS, and for the static policy its region.
type Job struct {
	ID      uint16
	Workers []Addr
	PS      Addr
	// First and Size are a static job's region of the pool.
	First, Size int
}

// Config is the program's setup: the policy, the pool, the seed of
// straw2's coin, the pipeline's latencies.
type Config struct {
	Policy      Policy
	Aggregators int
	Seed        uint64
	// Latency is a packet's time through the pipeline; a preemption's
	// resubmission costs one more (Resubmit).
	Latency  time.Duration
	Resubmit time.Duration
}

// Program is the INA-PS switch program on one switch.
type Program struct {
	env   switching.ProgramEnv
	cfg   Config
	pool  []Aggregator
	jobs  map[uint16]*Job
	coin  *rand.Rand
	out   [FrameLen]byte // scratch for the frames it builds
	stats Stats
	// held is aggregator-time held (occupancy), summed at release.
	heldNs  int64
	held    map[uint16]int64 // per job
	wait    map[uint16]int64 // per job: held while contributions were missing
	tearing bool
	inUse   int
	// Mutations re-introduce known bugs for the property suites' power
	// tests; zero in every real run.
	Mutations Mutations
}

// Mutations are bugs the property suite must catch.
type Mutations struct {
	EvictLosesBitmap   bool // an evicted partial leaves with an empty bitmap
	ReminderNoSwap     bool // a reminder frees the aggregator without returning its value
	ReAddRetransmitted bool // a contribution whose bit is already in is added again
}

// Stats are the switch's counters (spec: every counter a policy has).
type Stats struct {
	Gradients      uint64 `json:"gradients"`          // contributions that reached the pipeline
	Aggregated     uint64 `json:"aggregated"`         // added into an aggregator
	Completed      uint64 `json:"completed"`          // tasks completed in the switch
	Multicasts     uint64 `json:"multicasts"`         // results the switch multicast (one per task)
	PSMulticasts   uint64 `json:"ps_multicasts"`      // PS results copied to the workers
	Collisions     uint64 `json:"collisions"`         // a task met an aggregator held by another
	Preemptions    uint64 `json:"preemptions"`        // ... and evicted it
	FailedPreempts uint64 `json:"failed_preemptions"` // ... and lost (esa, straw2)
	Downgrades     uint64 `json:"downgrades"`         // priority halvings
	Diverted       uint64 `json:"diverted"`           // raw gradients sent to the PS
	Evicted        uint64 `json:"evicted"`            // partials sent to the PS by preemption
	ToPS           uint64 `json:"completed_to_ps"`    // fcfs: complete aggregates sent to the PS
	Released       uint64 `json:"released_by_ack"`    // fcfs: aggregators the PS's ACK freed
	Flushed        uint64 `json:"flushed_by_resend"`  // fcfs: aggregators a resend flushed
	Reminders      uint64 `json:"reminders"`          // reminders that reached the switch
	RemindersValue uint64 `json:"reminders_with_value"`
	Duplicates     uint64 `json:"duplicates"`     // contributions already in their aggregator, dropped
	Stale          uint64 `json:"stale"`          // static: contributions of a finished round, dropped
	Retransmits    uint64 `json:"retransmits"`    // static: results re-sent from the shadow copy
	Resubmits      uint64 `json:"resubmits"`      // extra pipeline passes (packet swapping)
	BadIndex       uint64 `json:"bad_index"`      // an index outside the pool or the job's region
	UnknownJob     uint64 `json:"unknown_job"`    // frames of no installed job, forwarded
	Overflows      uint64 `json:"overflows"`      // fragments sent as raw floats, sent on to the PS
	TeardownFreed  uint64 `json:"teardown_freed"` // aggregators a job's teardown freed (stale tasks)
	// LostContributions are contributions an aggregator took in and freed
	// without their leaving in any frame (a result, a partial, a
	// reminder's return): zero in a correct switch, whatever the faults.
	LostContributions uint64 `json:"lost_contributions"`
	// AbandonedContributions are those a job's teardown freed (tasks a
	// late copy started after its result was out).
	AbandonedContributions uint64 `json:"abandoned_contributions"`
	HeldNs                 int64  `json:"aggregator_ns_held"` // aggregator-time held, summed over releases
	MaxInUse               int    `json:"max_in_use"`         // most aggregators held at once
	InUse                  int    `json:"in_use"`             // held now
}

// Name is ProgramName.
func (p *Program) Name() string { return ProgramName }

// MemoryBytes is the pool's memory.
func (p *Program) MemoryBytes() int64 { return int64(len(p.pool)) * AggregatorBytes }

// Report is the counters.
func (p *Program) Report() any {
	s := p.stats
	s.InUse = p.inUse
	s.HeldNs = p.heldNs
	return s
}

// Stats is Report's value.
func (p *Program) Stats() Stats { return p.Report().(Stats) }

// Setup sizes the pool and sets the policy; it refuses a pool the
// switch's memory budget cannot hold.
func (p *Program) Setup(cfg Config) error {
	if cfg.Aggregators < 1 || cfg.Aggregators > MaxAggregators {
		return fmt.Errorf("%d aggregators: want 1..%d", cfg.Aggregators, MaxAggregators)
	}
	if b := p.env.MemoryBudget(); b > 0 && p.env.MemoryUsed()-p.MemoryBytes()+int64(cfg.Aggregators)*AggregatorBytes > b {
		return fmt.Errorf("%d aggregators need %d bytes; switch %s has %d", cfg.Aggregators, cfg.Aggregators*AggregatorBytes, p.env.Switch, b)
	}
	p.cfg = cfg
	p.pool = make([]Aggregator, cfg.Aggregators)
	p.jobs = map[uint16]*Job{}
	p.held = map[uint16]int64{}
	p.wait = map[uint16]int64{}
	p.coin = rand.New(rand.NewPCG(cfg.Seed, 0x57a2))
	return nil
}

// AddJob installs a job.
func (p *Program) AddJob(j Job) error {
	if j.ID == 0 {
		return fmt.Errorf("job ID 0 means no job")
	}
	if len(j.Workers) < 1 || len(j.Workers) > 32 {
		return fmt.Errorf("job %d: %d workers: the bitmap holds 1..32", j.ID, len(j.Workers))
	}
	if _, dup := p.jobs[j.ID]; dup {
		return fmt.Errorf("job %d installed twice", j.ID)
	}
	if p.cfg.Policy == Static && (j.Size < 2 || j.First < 0 || j.First+j.Size > len(p.pool)) {
		return fmt.Errorf("job %d: region [%d, %d) of a pool of %d: want at least 2 aggregators inside it", j.ID, j.First, j.First+j.Size, len(p.pool))
	}
	jj := j
	p.jobs[j.ID] = &jj
	return nil
}

// HeldByJob is each job's aggregator-time held (ns), summed at release.
func (p *Program) HeldByJob() map[uint16]int64 { return p.held }

// WaitingByJob is the part of HeldByJob during which the task still
// missed contributions (the rest: a complete task held until released,
// ATP-style's wait for the PS's ACK and SwitchML-style's shadow copies).
func (p *Program) WaitingByJob() map[uint16]int64 { return p.wait }

// Pool is the aggregators (read only: the harness's end-of-run checks).
func (p *Program) Pool() []Aggregator { return p.pool }

// Teardown frees what a finished job still holds (tasks a duplicate
// started after their result was out, which nothing else frees) and
// returns how many.
func (p *Program) Teardown(id uint16) int {
	n := 0
	p.tearing = true
	defer func() { p.tearing = false }()
	for i := range p.pool {
		if a := &p.pool[i]; a.Used && a.Job == id {
			p.free(a)
			n++
		}
	}
	p.stats.TeardownFreed += uint64(n)
	return n
}

// Process: INA-PS frames are not RoCE; the pipeline offers them to
// ProcessFrame.
func (p *Program) Process(_ *frames.View, _ int, _ switching.ProgramEmit) bool { return false }
